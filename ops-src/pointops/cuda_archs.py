"""CUDA architecture lists: the default table per toolkit and parsing of user arch lists.

Pure Python with no torch import, so setup.py, the recipes and the solver can all use it.
The table lives in cuda_arch_table.json next to this file (its "format" key documents it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("cuda_arch_table.json")

# "8.6", "9.0a", "10.0f" optionally followed by "+PTX"; also "sm_86"/"compute_86" spellings.
_DOTTED = re.compile(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$", re.IGNORECASE)
_SM = re.compile(r"^(?:sm_|compute_)(\d+?)(\d)([af]?)(\+PTX)?$", re.IGNORECASE)


class ArchListError(ValueError):
    """A CUDA arch list or toolkit version that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class ArchPlan:
    """What nvcc should build: SASS for each capability in `sass`, PTX for `ptx` (if any)."""

    sass: tuple[str, ...]
    ptx: tuple[str, ...]

    def gencode_flags(self) -> list[str]:
        flags = []
        for cap in self.sass:
            num = _cap_digits(cap)
            flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        for cap in self.ptx:
            num = _cap_digits(cap)
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
        return flags


def _cap_digits(cap: str) -> str:
    major, minor = cap.split(".")
    return f"{major}{minor}"


def load_table(path: Path | None = None) -> dict[str, dict]:
    """The 'toolkits' mapping of the arch table."""
    with open(path or TABLE_PATH, encoding="utf-8") as f:
        return json.load(f)["toolkits"]


def _version_key(version: str) -> tuple[int, int]:
    m = re.match(r"^(\d+)\.(\d+)", version.strip())
    if not m:
        raise ArchListError(f"CUDA version {version!r} is not of the form MAJOR.MINOR (e.g. 12.9)")
    return int(m.group(1)), int(m.group(2))


def table_entry(cuda_version: str, table: dict[str, dict] | None = None) -> tuple[str, dict]:
    """The table entry for a toolkit: an exact major.minor match, else the highest lower minor of
    the same major. Returns (table key, entry)."""
    table = load_table() if table is None else table
    major, minor = _version_key(cuda_version)
    candidates = [k for k in table if _version_key(k)[0] == major and _version_key(k)[1] <= minor]
    if not candidates:
        known = ", ".join(sorted(table, key=_version_key))
        raise ArchListError(
            f"no default CUDA arch list for CUDA {cuda_version} (the table knows {known}); "
            "set TORCH_CUDA_ARCH_LIST, e.g. TORCH_CUDA_ARCH_LIST='8.0;9.0+PTX'"
        )
    key = max(candidates, key=_version_key)
    return key, table[key]


def default_plan(cuda_version: str, table: dict[str, dict] | None = None) -> ArchPlan:
    _, entry = table_entry(cuda_version, table)
    ptx = (entry["ptx"],) if entry.get("ptx") else ()
    return ArchPlan(sass=tuple(entry["sass"]), ptx=ptx)


def parse_arch_list(text: str) -> ArchPlan:
    """Parse a TORCH_CUDA_ARCH_LIST-style string: entries separated by ';', ',' or spaces, each
    'X.Y' (optionally with an 'a'/'f' suffix) or 'sm_XY', with '+PTX' to also embed PTX."""
    sass: list[str] = []
    ptx: list[str] = []
    entries = [e for e in re.split(r"[;,\s]+", text.strip()) if e]
    if not entries:
        raise ArchListError("the CUDA arch list is empty; give e.g. '8.0;9.0+PTX'")
    for entry in entries:
        m = _DOTTED.match(entry) or _SM.match(entry)
        if not m:
            raise ArchListError(
                f"cannot read CUDA arch {entry!r}; use compute capabilities like '8.6', '9.0a' or "
                "'12.0+PTX' separated by ';'"
            )
        cap = f"{int(m.group(1))}.{m.group(2)}{m.group(3).lower()}"
        if cap not in sass:
            sass.append(cap)
        if m.group(4):
            if m.group(3):
                raise ArchListError(f"{entry!r}: arch-specific targets ('a'/'f') cannot carry PTX")
            if cap not in ptx:
                ptx.append(cap)
    return ArchPlan(sass=tuple(sass), ptx=tuple(ptx))


def choose_plan(env: dict[str, str], cuda_version: str) -> tuple[ArchPlan, str]:
    """The arch plan for a build and where it came from: TORCH_CUDA_ARCH_LIST, then
    CF_TORCH_CUDA_ARCH_LIST (conda-forge's pytorch exports it), then the table."""
    for name in ("TORCH_CUDA_ARCH_LIST", "CF_TORCH_CUDA_ARCH_LIST"):
        value = env.get(name, "").strip()
        if value:
            try:
                return parse_arch_list(value), name
            except ArchListError as e:
                raise ArchListError(f"{name}: {e}") from None
    key, _ = table_entry(cuda_version)
    return default_plan(cuda_version), f"cuda_arch_table.json[{key}]"
