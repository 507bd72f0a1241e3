"""Windows: the DLL search path, copies of the C runtime on PATH, and PATH entries of several conda installs.

"DLL load failed" on Windows usually means one of three things: the environment is not activated (its
Library\\bin is not searched), an older vcruntime140/ucrt copy on PATH is found before the environment's,
or PATH holds entries of two conda installations (Anaconda and Miniconda), so DLLs of one are loaded
into the other's Python.
"""

from __future__ import annotations

import ntpath
import re
import struct
from collections.abc import Mapping
from pathlib import Path, PureWindowsPath

from .facts import DllCopy, Facts, WindowsFacts
from .findings import Finding, failed, info, passed, warned

CRT_DLLS = ("vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll", "ucrtbase.dll")
VC_REDIST_URL = "https://aka.ms/vs/17/release/vc_redist.x64.exe"
# Folder names that conda installers create by default; the root of an installation is the first one.
_INSTALL_NAME = re.compile(
    r"^((ana|mini)conda\d*|miniforge\d*|mambaforge\d*|micromamba|condabin)$", re.IGNORECASE
)
_FIXED_FILE_INFO_SIGNATURE = 0xFEEF04BD


# ---------------------------------------------------------------- gathering


def read_file_version(path: Path) -> tuple[int, ...] | None:
    """The file version of a PE file (DLL/EXE), read from its VS_FIXEDFILEINFO block.

    Works on any OS, so the same code reads real DLLs on Windows and test files elsewhere.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(64 << 20)
    except OSError:
        return None
    marker = struct.pack("<I", _FIXED_FILE_INFO_SIGNATURE)
    start = data.find(marker)
    while start != -1:
        block = data[start : start + 16]
        if len(block) == 16:
            _, struct_version, version_ms, version_ls = struct.unpack("<4I", block)
            if struct_version >> 16 in (0, 1):  # a real VS_FIXEDFILEINFO, not a stray match
                return (version_ms >> 16, version_ms & 0xFFFF, version_ls >> 16, version_ls & 0xFFFF)
        start = data.find(marker, start + 1)
    return None


def _dll_copies(folders: list[str]) -> list[DllCopy]:
    copies = []
    for folder in folders:
        for name in CRT_DLLS:
            candidate = Path(folder) / name
            if candidate.is_file():
                copies.append(DllCopy(str(candidate), read_file_version(candidate)))
    return copies


def gather_windows(env: Mapping[str, str], prefix: str) -> WindowsFacts:
    path_entries = [entry for entry in env.get("PATH", "").split(";") if entry.strip()]
    return WindowsFacts(
        path_entries=path_entries,
        prefix=prefix,
        active_prefix=env.get("CONDA_PREFIX", ""),
        conda_dll_search_modification=env.get("CONDA_DLL_SEARCH_MODIFICATION_ENABLE"),
        env_dlls=_dll_copies([prefix, str(Path(prefix, "Library", "bin"))]),
        path_dlls=_dll_copies(list(dict.fromkeys(path_entries))),
    )


# ---------------------------------------------------------------- checks


def _key(path: str) -> str:
    return ntpath.normcase(ntpath.normpath(path.strip().strip('"')))


def _inside(path: str, folder: str) -> bool:
    path_key, folder_key = _key(path), _key(folder)
    return path_key == folder_key or path_key.startswith(folder_key.rstrip("\\") + "\\")


def conda_install_root(entry: str) -> str | None:
    """The conda installation a PATH entry belongs to, judged by the installer's folder names."""
    parts = PureWindowsPath(entry.strip().strip('"')).parts
    for index, part in enumerate(parts):
        if _INSTALL_NAME.match(part):
            root = parts[: index + 1] if part.lower() != "condabin" else parts[:index]
            return str(PureWindowsPath(*root)) if root else None
    return None


def check_mixed_installs(win: WindowsFacts) -> list[Finding]:
    roots: dict[str, str] = {}
    for entry in win.path_entries:
        root = conda_install_root(entry)
        if root:
            roots.setdefault(_key(root), root)
    if len(roots) <= 1:
        return [
            passed(
                "windows.conda-installs",
                "PATH holds entries of at most one conda installation",
                ", ".join(roots.values()) or "none",
            )
        ]
    names = list(roots.values())
    active = conda_install_root(win.prefix) or names[0]
    others = [name for name in names if _key(name) != _key(active)]
    return [
        warned(
            "windows.conda-installs",
            f"PATH mixes {len(names)} conda installations; DLLs of one load into another",
            "; ".join(names),
            f"remove the entries of {', '.join(others)} from PATH (System settings > Environment Variables), "
            f"then open a new shell and `conda activate` the environment",
        )
    ]


def check_dll_search_path(win: WindowsFacts, is_conda_env: bool) -> list[Finding]:
    if not is_conda_env:
        return [
            info(
                "windows.dll-search-path",
                "not a conda environment; PATH is not how its DLLs are found",
                f"prefix {win.prefix}",
            )
        ]
    prefix_key = _key(win.prefix)
    library_bin = ntpath.join(win.prefix, "Library", "bin")
    path_keys = [_key(entry) for entry in win.path_entries]
    findings = []
    if win.active_prefix and _key(win.active_prefix) != prefix_key:
        findings.append(
            warned(
                "windows.dll-search-path",
                "another conda environment is activated than the one this Python belongs to",
                f"CONDA_PREFIX={win.active_prefix}; this Python: {win.prefix}",
                f'conda activate "{win.prefix}"',
            )
        )
    elif _key(library_bin) not in path_keys and (win.conda_dll_search_modification or "").strip() not in (
        "",
        "0",
    ):
        findings.append(
            info(
                "windows.dll-search-path",
                "the environment is not activated, but CONDA_DLL_SEARCH_MODIFICATION_ENABLE "
                "lets conda's Python search its Library\\bin",
                f"missing from PATH: {library_bin}",
                f'conda activate "{win.prefix}" for programs other than Python',
            )
        )
    elif _key(library_bin) not in path_keys:
        findings.append(
            warned(
                "windows.dll-search-path",
                "the environment's Library\\bin is not on PATH (not activated); "
                "DLLs of conda packages such as cudart or libiomp5md will not be found",
                f"missing: {library_bin}",
                f'conda activate "{win.prefix}"',
            )
        )
    ours = path_keys.index(_key(library_bin)) if _key(library_bin) in path_keys else len(path_keys)
    foreign = [
        entry
        for entry in win.path_entries[:ours]
        if _key(entry).endswith(ntpath.normcase("\\library\\bin")) and not _inside(entry, win.prefix)
    ]
    if foreign:
        findings.append(
            warned(
                "windows.dll-search-path",
                "another environment's Library\\bin comes before this one's on PATH",
                "; ".join(foreign),
                "remove it from PATH, or `conda deactivate` until only this environment is active",
            )
        )
    if not findings:
        findings.append(
            passed(
                "windows.dll-search-path",
                "the environment's Library\\bin is on PATH, ahead of others",
                library_bin,
            )
        )
    return findings


def _version_text(version: tuple[int, ...] | None) -> str:
    return ".".join(map(str, version)) if version else "unknown version"


def check_crt_copies(win: WindowsFacts) -> list[Finding]:
    env_newest: dict[str, DllCopy] = {}
    for copy in win.env_dlls:
        name = ntpath.basename(copy.path).lower()
        if copy.version and (name not in env_newest or copy.version > (env_newest[name].version or ())):
            env_newest[name] = copy
    findings = []
    for copy in win.path_dlls:
        name = ntpath.basename(copy.path).lower()
        mine = env_newest.get(name)
        if _inside(copy.path, win.prefix) or not mine or not copy.version:
            continue
        if copy.version < (mine.version or ()):
            folder = ntpath.dirname(copy.path)
            if "system32" in folder.lower() or "syswow64" in folder.lower():
                fix = f"install the latest Microsoft Visual C++ Redistributable ({VC_REDIST_URL})"
            else:
                fix = f"remove {folder} from PATH, or update the {name} there (it came with another program)"
            findings.append(
                warned(
                    "windows.crt-copies",
                    f"an older {name} on PATH can be loaded instead of the environment's",
                    f"{copy.path} {_version_text(copy.version)} < {mine.path} {_version_text(mine.version)}",
                    fix,
                )
            )
    has_vcruntime = any(
        ntpath.basename(c.path).lower() == "vcruntime140.dll" for c in win.env_dlls + win.path_dlls
    )
    if not has_vcruntime:
        findings.append(
            failed(
                "windows.crt-copies",
                "no vcruntime140.dll in the environment or on PATH; compiled extensions cannot load",
                f"looked in {win.prefix} and {len(win.path_entries)} PATH entries",
                f"conda install -c conda-forge vc14_runtime  (or install {VC_REDIST_URL})",
            )
        )
    if not findings:
        evidence = ", ".join(
            f"{ntpath.basename(c.path)} {_version_text(c.version)}" for c in env_newest.values()
        )
        findings.append(
            passed(
                "windows.crt-copies",
                "no older C runtime copy shadows the environment's",
                evidence or "the environment ships no CRT of its own; the system copy is used",
            )
        )
    return findings


def check_windows(facts: Facts, kb) -> list[Finding]:
    if facts.windows is None:
        return []
    win = facts.windows
    return (
        check_mixed_installs(win)
        + check_dll_search_path(win, facts.conda.prefix is not None)
        + check_crt_copies(win)
    )
