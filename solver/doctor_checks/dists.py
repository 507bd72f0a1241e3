"""Where an installed Python distribution came from, read from its dist-info (INSTALLER,
direct_url.json, RECORD), and the command that reinstalls or rebuilds it from there.

Every pip command here has --no-deps: a reinstall must never bring another torch (or CUDA wheels)
over the one installed. Paths are absolute, so a fix works from any folder.

    origin = read_origin(site / "pointops-0.1.0.dist-info")
    reinstall_command(origin)                       # pip install --no-deps --force-reinstall /abs/x.whl
    reinstall_command(origin, rebuild=True, cxx="/usr/bin/g++")
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

COMPILED = re.compile(r"\.(so|pyd|dylib)$|\.so\.")


@dataclass(frozen=True)
class DistOrigin:
    name: str  # as its METADATA spells it: "pointops-cu13"
    version: str
    installer: str = ""  # INSTALLER: "pip", "conda", "uv", ... ("" when absent)
    # "index" (a package index), "wheel" or "archive" (a local file), "source" or "editable" (a
    # folder), "vcs", "url" (a remote file), "conda"
    kind: str = "index"
    location: str = ""  # the absolute file or folder (kinds wheel, archive, source, editable), else a URL
    location_exists: bool = False
    damaged: tuple[str, ...] = ()  # compiled files the RECORD lists that are missing or of another size


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _file_url_path(url: str) -> str:
    parsed = urlparse(url)
    return url2pathname(unquote(parsed.path)) if parsed.scheme == "file" else ""


def _kind_of(direct_url: dict) -> tuple[str, str]:
    """(kind, location) from a PEP 610 direct_url.json document."""
    url = str(direct_url.get("url", ""))
    local = _file_url_path(url)
    if "dir_info" in direct_url:
        editable = bool((direct_url.get("dir_info") or {}).get("editable"))
        return ("editable" if editable else "source"), local or url
    if "vcs_info" in direct_url:
        vcs = direct_url.get("vcs_info") or {}
        commit = vcs.get("commit_id") or vcs.get("requested_revision") or ""
        return "vcs", f"{vcs.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
    if local:
        return ("wheel" if local.endswith(".whl") else "archive"), local
    return "url", url


def damaged_files(site: Path, record: str) -> tuple[str, ...]:
    """The compiled files of a RECORD that are missing or whose size differs from the recorded one."""
    found = []
    for line in record.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) != 3 or not COMPILED.search(parts[0]) or ".." in parts[0].split("/"):
            continue
        path, size = site / parts[0], parts[2].strip()
        try:
            actual = path.stat().st_size
        except OSError:
            found.append(f"{parts[0]} is missing")
            continue
        if size.isdigit() and int(size) != actual:
            found.append(f"{parts[0]} is {actual} bytes, {size} when installed")
    return tuple(found)


def read_origin(meta_dir: Path) -> DistOrigin | None:
    """The origin of the distribution whose *.dist-info folder this is (None without METADATA)."""
    metadata = _read_text(meta_dir / "METADATA")
    if not metadata:
        return None
    headers = HeaderParser().parsestr(metadata)
    installer = _read_text(meta_dir / "INSTALLER").strip()
    kind, location = "index", ""
    if installer == "conda":
        kind = "conda"
    else:
        try:
            direct_url = json.loads(_read_text(meta_dir / "direct_url.json") or "{}")
        except ValueError:
            direct_url = {}
        if isinstance(direct_url, dict) and direct_url.get("url"):
            kind, location = _kind_of(direct_url)
    exists = (
        bool(location) and kind in ("wheel", "archive", "source", "editable") and os.path.exists(location)
    )
    return DistOrigin(
        name=headers.get("Name", meta_dir.name.split("-")[0]),
        version=headers.get("Version", ""),
        installer=installer,
        kind=kind,
        location=location,
        location_exists=exists,
        damaged=damaged_files(meta_dir.parent, _read_text(meta_dir / "RECORD")),
    )


def owners(site: Path) -> dict[str, DistOrigin]:
    """RECORD path ('pointops/_C.abi3.so') -> the origin of the distribution that installed it."""
    found: dict[str, DistOrigin] = {}
    for meta_dir in sorted(site.glob("*.dist-info")):
        origin = None
        for line in _read_text(meta_dir / "RECORD").splitlines():
            path = line.rsplit(",", 2)[0]
            if COMPILED.search(path):
                origin = origin or read_origin(meta_dir)
                if origin is not None:
                    found.setdefault(path, origin)
    return found


def _pinned(origin: DistOrigin) -> str:
    return f'"{origin.name}=={origin.version}"' if origin.version else f'"{origin.name}"'


def reinstall_command(origin: DistOrigin, conda_name: str = "") -> str:
    """Put back the same build, from where it came: conda, the wheel file, the source folder or the index."""
    if origin.kind == "conda":
        name = conda_name or origin.name
        return (
            f'conda install --force-reinstall "{name}={origin.version}"'
            if origin.version
            else (f"conda install --force-reinstall {name}")
        )
    where = shlex.quote(origin.location)
    if origin.kind == "wheel" and origin.location_exists:
        return f"pip install --no-deps --force-reinstall {where}"
    if origin.kind in ("source", "editable", "archive") and origin.location_exists:
        editable = "-e " if origin.kind == "editable" else ""
        return f"pip install --no-deps --no-build-isolation --force-reinstall {editable}{where}"
    if origin.kind in ("vcs", "url"):
        return f'pip install --no-deps --no-build-isolation --force-reinstall "{origin.name} @ {origin.location}"'
    return f"pip install --no-deps --force-reinstall --no-cache-dir {_pinned(origin)}"


def rebuild_command(origin: DistOrigin, cxx: str, conda_name: str = "") -> str:
    """Compile it again in this environment with the compiler `cxx` (from its source folder when it
    came from one, else from the index's source distribution), or take conda's build."""
    if origin.kind == "conda":
        return reinstall_command(origin, conda_name)
    compiler = f"CXX={shlex.quote(cxx)} " if cxx else ""
    base = f"{compiler}pip install --no-deps --no-build-isolation --force-reinstall"
    if origin.kind in ("source", "editable", "archive") and origin.location_exists:
        editable = "-e " if origin.kind == "editable" else ""
        return f"{base} {editable}{shlex.quote(origin.location)}"
    if origin.kind in ("vcs", "url"):
        return f'{base} "{origin.name} @ {origin.location}"'
    return f"{base} --no-cache-dir --no-binary {origin.name} {_pinned(origin)}"


def source_command(folder: str, cxx: str = "", editable: bool = False) -> str:
    """Build and install the project in `folder` into this environment (editable: the extension is
    built into the folder itself, for a checkout that is imported from where it is)."""
    compiler = f"CXX={shlex.quote(cxx)} " if cxx else ""
    mode = "-e " if editable else ""
    return (
        f"{compiler}pip install --no-deps --no-build-isolation --force-reinstall {mode}{shlex.quote(folder)}"
    )
