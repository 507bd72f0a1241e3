"""The Python distributions installed in an environment's site-packages, read once with
importlib.metadata (files only: doctor may inspect another prefix's Python, so nothing is imported
from there), where each came from (INSTALLER, direct_url.json, RECORD), and the command that
reinstalls or rebuilds it from there. Every check reads these records; none parses METADATA or
RECORD itself.

Every pip command here has --no-deps: a reinstall must never bring another torch (or CUDA wheels)
over the one installed. Paths are absolute, so a fix works from any folder.

    installed = read_installed([site])              # list[InstalledDist], one per *.dist-info/*.egg-info
    reinstall_command(installed[0].origin)          # pip install --no-deps --force-reinstall /abs/x.whl
    reinstall_command(origin, rebuild=True, cxx="/usr/bin/g++")
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import Distribution
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


@dataclass(frozen=True)
class RecordedFile:
    path: str  # as the RECORD lists it, relative to site-packages, "/"-separated: "pointops/_C.abi3.so"
    size: int | None = None  # the size when installed, where the RECORD says


@dataclass(frozen=True)
class InstalledDist:
    """One *.dist-info or *.egg-info folder, as its files describe it."""

    name: str  # as its METADATA spells it
    version: str
    meta_dir: Path  # the metadata folder
    requires: tuple[str, ...] = ()  # Requires-Dist, markers included
    files: tuple[RecordedFile, ...] = ()  # RECORD (installed-files.txt for an egg-info)
    origin: DistOrigin | None = None

    @property
    def site(self) -> Path:
        return self.meta_dir.parent

    @property
    def installer(self) -> str:
        return self.origin.installer if self.origin else ""

    def lists(self, path: str) -> bool:
        return any(f.path == path for f in self.files)

    def compiled_files(self) -> list[str]:
        return [f.path for f in self.files if COMPILED.search(f.path)]


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


def damaged_files(site: Path, files: Iterable[RecordedFile]) -> tuple[str, ...]:
    """The compiled files of a RECORD that are missing or whose size differs from the recorded one."""
    found = []
    for recorded in files:
        if not COMPILED.search(recorded.path) or ".." in recorded.path.split("/"):
            continue
        try:
            actual = (site / recorded.path).stat().st_size
        except OSError:
            found.append(f"{recorded.path} is missing")
            continue
        if recorded.size is not None and recorded.size != actual:
            found.append(f"{recorded.path} is {actual} bytes, {recorded.size} when installed")
    return tuple(found)


def _origin(dist: Distribution, name: str, version: str, site: Path, files) -> DistOrigin:
    installer = (dist.read_text("INSTALLER") or "").strip()
    kind, location = "index", ""
    if installer == "conda":
        kind = "conda"
    else:
        try:
            direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            direct_url = {}
        if isinstance(direct_url, dict) and direct_url.get("url"):
            kind, location = _kind_of(direct_url)
    exists = (
        bool(location) and kind in ("wheel", "archive", "source", "editable") and os.path.exists(location)
    )
    return DistOrigin(name, version, installer, kind, location, exists, damaged_files(site, files))


def read_dist(meta_dir: Path) -> InstalledDist | None:
    """The distribution of one metadata folder; None when it has no readable METADATA (or PKG-INFO)."""
    dist = Distribution.at(meta_dir)
    try:
        if not (dist.read_text("METADATA") or dist.read_text("PKG-INFO")):
            return None
        metadata = dist.metadata
        name = metadata["Name"] or meta_dir.name.split("-")[0]
        version = metadata["Version"] or ""
        files = tuple(RecordedFile(str(p).replace("\\", "/"), p.size) for p in dist.files or [])
        requires = tuple(dist.requires or [])
        origin = _origin(dist, name, version, meta_dir.parent, files)
    except (OSError, ValueError):  # not UTF-8, a RECORD the csv reader refuses
        return None
    return InstalledDist(name, version, meta_dir, requires, files, origin)


def read_installed(site_dirs: Iterable[Path]) -> list[InstalledDist]:
    """Every distribution in these site-packages folders, in folder order, then by name.

    importlib.metadata.distributions(path=...) finds the same folders but does not say which folder
    each came from; the checks need it (a RECORD's paths are relative to it)."""
    found: list[InstalledDist] = []
    for site in site_dirs:
        folders = [p for p in [*site.glob("*.dist-info"), *site.glob("*.egg-info")] if p.is_dir()]
        for meta_dir in sorted(folders):
            dist = read_dist(meta_dir)
            if dist is not None:
                found.append(dist)
    return found


def read_origin(meta_dir: Path) -> DistOrigin | None:
    """The origin of the distribution whose metadata folder this is (None without METADATA)."""
    dist = read_dist(meta_dir)
    return dist.origin if dist else None


def owners(installed: Iterable[InstalledDist]) -> dict[Path, DistOrigin]:
    """Each compiled file a RECORD lists (its absolute path) -> the origin of the distribution that
    installed it (the first one, when several list it)."""
    found: dict[Path, DistOrigin] = {}
    for dist in installed:
        for path in dist.compiled_files():
            if dist.origin is not None:
                found.setdefault(dist.site / path, dist.origin)
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
