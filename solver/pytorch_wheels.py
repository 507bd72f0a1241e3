"""PyTorch's CUDA wheel indexes (solver/knowledge/pytorch_wheels.yaml), and the one a machine should
use, chosen by make-env's rules.

    table = load_wheels()
    table.indexes_for("2.13")               # -> [WheelIndex(tag="cu126", cuda="12.6", ...), ...]
    table.choose(kb, "linux-64", "6.1", driver_cuda="13.0", driver_version="580.95.05")
        # -> WheelChoice(torch="2.13", index=cu126, mode="full", coverage="sass")

Rules (solver/plan.py's, applied to wheels): torch releases pointops supports, newest first, then
the newest CUDA the driver runs fully, else the newest it runs through minor-version compatibility,
which is allowed only when the wheels carry SASS for the GPU; the GPU must be covered by SASS or PTX;
a GPU whose driver branch dropped it gets no index at all.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from solver.knowledge import KNOWLEDGE_DIR, ArchList, Knowledge, KnowledgeError, arch_coverage, parse_version

WHEELS_FILE = KNOWLEDGE_DIR / "pytorch_wheels.yaml"


@dataclass(frozen=True)
class WheelIndex:
    tag: str  # "cu126"
    cuda: str  # "12.6"
    url: str  # "https://download.pytorch.org/whl/cu126"
    archs: dict[str, ArchList]  # conda subdir -> archs; empty when not recorded


@dataclass(frozen=True)
class WheelChoice:
    torch: str  # "2.13"
    index: WheelIndex
    mode: str  # "full" or "mvc" (minor-version compatibility)
    coverage: str  # "sass" or "ptx"

    def pip_command(self) -> str:
        return f'pip install --force-reinstall "torch=={self.torch}.*" --index-url {self.index.url}'


class WheelTable:
    def __init__(
        self,
        indexes: dict[str, WheelIndex],
        releases: dict[str, list[str]],
        index_url: str = "https://download.pytorch.org/whl/{tag}",
    ):
        self.indexes = indexes
        self.releases = releases  # torch minor -> index tags
        self.index_url = index_url

    def url(self, tag: str) -> str:
        """The URL of any index of the table's server, the CPU one ("cpu") included."""
        return self.index_url.format(tag=tag)

    def indexes_for(self, torch_minor: str) -> list[WheelIndex]:
        return [self.indexes[tag] for tag in self.releases.get(torch_minor, [])]

    def choose(
        self,
        kb: Knowledge,
        platform: str,
        compute_capability: str | None,
        driver_cuda: str | None,
        driver_version: str | None = None,
    ) -> WheelChoice | None:
        """The newest torch and CUDA wheels that fit the GPU and driver; None when none does."""
        return next(self.candidates(kb, platform, compute_capability, driver_cuda, driver_version), None)

    def candidates(
        self,
        kb: Knowledge,
        platform: str,
        compute_capability: str | None,
        driver_cuda: str | None,
        driver_version: str | None = None,
        tegra: bool = False,
    ) -> Iterator[WheelChoice]:
        """Every (torch release, index) that fits the GPU and driver, best first: releases newest
        first; within one, the indexes the driver runs fully (newest CUDA first), then those it runs
        through minor-version compatibility. `tegra`: a Jetson GPU (only SASS of its exact arch)."""
        if compute_capability is None or driver_cuda is None:
            return
        os_name = "windows" if platform.startswith("win") else "linux"
        arch = kb.architecture(compute_capability)
        if driver_version and arch and arch.last_branch:
            branch = kb.driver_branch(driver_version)
            if branch and branch.branch > arch.last_branch:
                return  # the driver no longer runs this GPU: no wheel helps
        floor = parse_version(kb.pointops["torch_min"])
        for torch in sorted(self.releases, key=parse_version, reverse=True):
            if parse_version(torch) < floor:
                continue
            fitting = []
            for index in sorted(self.indexes_for(torch), key=lambda i: parse_version(i.cuda), reverse=True):
                archs = index.archs.get(platform)
                coverage = arch_coverage(compute_capability, archs, tegra) if archs else None
                if coverage is None:
                    continue
                try:
                    mode = kb.driver_runs_cuda(driver_cuda, index.cuda, driver_version, os_name)
                except (KeyError, ValueError):
                    mode = None
                if mode is None or (mode == "mvc" and coverage != "sass"):
                    continue
                fitting.append(WheelChoice(torch=torch, index=index, mode=mode, coverage=coverage))
            # a release's wheels the driver runs fully before those it runs through MVC
            yield from sorted(fitting, key=lambda c: c.mode != "full")


def _arch_list(raw, where: str) -> ArchList:
    if not isinstance(raw, dict) or not isinstance(raw.get("sass"), list):
        raise KnowledgeError(f"{where}: expected {{sass: [...], ptx: X.Y}}")
    sass = tuple(str(a) for a in raw["sass"])
    for value in sass + ((str(raw["ptx"]),) if raw.get("ptx") else ()):
        try:
            parse_version(value)
        except ValueError:
            raise KnowledgeError(f"{where}: {value!r} is not a compute capability") from None
    if list(sass) != sorted(sass, key=parse_version):
        raise KnowledgeError(f"{where}: archs must be in ascending order")
    return ArchList(sass=sass, ptx=str(raw["ptx"]) if raw.get("ptx") else None)


def parse_wheels(raw: dict) -> WheelTable:
    where = "pytorch_wheels.yaml"
    if not isinstance(raw, dict) or not {"index_url", "indexes", "releases"} <= set(raw):
        raise KnowledgeError(f"{where}: expected index_url, indexes and releases")
    indexes = {}
    for tag, item in raw["indexes"].items():
        cuda = str((item or {}).get("cuda", ""))
        if tag != "cu" + cuda.replace(".", ""):
            raise KnowledgeError(f"{where} indexes.{tag}: cuda {cuda!r} does not match the tag")
        archs = {
            str(platform): _arch_list(value, f"{where} indexes.{tag}.archs.{platform}")
            for platform, value in (item.get("archs") or {}).items()
        }
        indexes[tag] = WheelIndex(tag=tag, cuda=cuda, url=str(raw["index_url"]).format(tag=tag), archs=archs)
    releases = {}
    for torch, tags in raw["releases"].items():
        unknown = [t for t in tags if t not in indexes]
        if unknown:
            raise KnowledgeError(f"{where} releases.{torch}: unknown index {unknown[0]!r}")
        releases[str(torch)] = [str(t) for t in tags]
    return WheelTable(indexes, releases, str(raw["index_url"]))


@functools.lru_cache(maxsize=2)
def load_wheels(path: str | None = None) -> WheelTable:
    import yaml

    file = Path(path) if path else WHEELS_FILE
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KnowledgeError(f"cannot read {file}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KnowledgeError(f"{file} is not valid YAML: {exc}") from None
    return parse_wheels(raw)
