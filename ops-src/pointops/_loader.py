"""Finding and loading the compiled extension (pointops/_C*), with Windows DLL handling.

The extension is a library of torch operators: it registers them from a static initializer when
torch.ops.load_library loads it, so it needs no Python module init. On Windows its dependencies
(torch_cpu.dll, c10.dll, the MSVC runtime) are found through the DLL search path, which Python
>= 3.8 no longer takes from PATH; we add torch's lib dir and the environment's Library/bin, and
turn a load failure into a message that names the missing DLLs. The platform facts are passed in
as arguments so the Windows logic can be tested on any host.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent

# DLLs a Windows build of the extension imports besides system DLLs (torch's import libraries
# are torch_cpu.lib and c10.lib; the MSVC runtime comes from vc14_runtime / the VC redist).
WINDOWS_DEPENDENCIES = ("torch_cpu.dll", "c10.dll", "vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll")


class ExtensionLoadError(ImportError):
    """The compiled pointops extension is missing or cannot be loaded; the message says why."""


def find_extension(package_dir: Path = PACKAGE_DIR) -> Path:
    candidates = sorted(package_dir.glob("_C*.so")) + sorted(package_dir.glob("_C*.pyd"))
    if not candidates:
        raise ExtensionLoadError(explain_missing_extension(package_dir))
    return candidates[0]


def _installed_by(package_dir: Path) -> Path | None:
    """The *.dist-info folder beside the package whose RECORD lists this package's __init__.py."""
    for meta_dir in sorted(package_dir.parent.glob("*.dist-info")):
        try:
            record = (meta_dir / "RECORD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(line.split(",")[0] == f"{package_dir.name}/__init__.py" for line in record.splitlines()):
            return meta_dir
    return None


def _metadata(meta_dir: Path, name: str) -> str:
    try:
        return (meta_dir / name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def reinstall_command(meta_dir: Path) -> str:
    """How to put back the installed distribution whose dist-info this is, from where it came, without
    touching torch (--no-deps)."""
    import json  # here, not at the top: only a failed import needs them
    from urllib.parse import unquote, urlparse
    from urllib.request import url2pathname

    headers = dict(
        line.split(": ", 1) for line in _metadata(meta_dir, "METADATA").splitlines() if ": " in line
    )
    name, version = headers.get("Name", "pointops"), headers.get("Version", "")
    if _metadata(meta_dir, "INSTALLER").strip() == "conda":
        return f'conda install --force-reinstall "{name}={version}"'
    try:
        url = str(json.loads(_metadata(meta_dir, "direct_url.json") or "{}").get("url", ""))
    except (ValueError, AttributeError):
        url = ""
    local = Path(url2pathname(unquote(urlparse(url).path))) if url.startswith("file:") else None
    if local is not None and local.suffix == ".whl" and local.is_file():
        return f"pip install --no-deps --force-reinstall {shlex.quote(str(local))}"
    if local is not None and local.is_dir():
        return f"pip install --no-deps --no-build-isolation --force-reinstall {shlex.quote(str(local))}"
    return f'pip install --no-deps --force-reinstall --no-cache-dir "{name}=={version}"'


def reinstall_advice(package_dir: Path) -> str:
    """What to run for a package folder whose binary is missing or broken: build a source checkout,
    reinstall an installed package from where it came."""
    checkout = package_dir.parent
    if (checkout / "setup.py").is_file():
        return (
            f"This is pointops' source tree ({checkout}), which has not been built. Build it in place with "
            f"`pip install --no-deps --no-build-isolation -e {shlex.quote(str(checkout))}`, or install it "
            "and import it from another folder."
        )
    meta_dir = _installed_by(package_dir)
    if meta_dir is not None:
        return f"Reinstall it from where it came: `{reinstall_command(meta_dir)}`."
    return "Reinstall pointops: `pip install --no-deps --force-reinstall pointops`."


def explain_missing_extension(package_dir: Path) -> str:
    """Why there is no _C here and what to run: a source checkout that was never built, or an
    installed package whose binary was deleted."""
    where = f"pointops: the compiled extension (_C.*.so / _C.*.pyd) is not in {package_dir}."
    if not (package_dir.parent / "setup.py").is_file() and _installed_by(package_dir) is not None:
        where += (
            " The installed package is missing its binary: it was deleted or the install was interrupted."
        )
    return f"{where} {reinstall_advice(package_dir)}"


def dll_search_dirs(
    platform: str, torch_dir: Path, prefix: Path, is_dir: Callable[[Path], bool] = Path.is_dir
) -> list[Path]:
    """Directories to add to the DLL search path before loading the extension (Windows only):
    torch's lib dir, then the environment's Library/bin (conda keeps DLLs there)."""
    if platform != "win32":
        return []
    dirs: list[Path] = []
    for candidate in (torch_dir / "lib", prefix / "Library" / "bin"):
        if is_dir(candidate) and candidate not in dirs:
            dirs.append(candidate)
    return dirs


def prepare_dll_search_path(
    platform: str,
    torch_dir: Path,
    prefix: Path,
    add_dll_directory: Callable[[str], object] | None,
    is_dir: Callable[[Path], bool] = Path.is_dir,
) -> list[Path]:
    """Adds dll_search_dirs(...) with os.add_dll_directory; returns the directories added."""
    dirs = dll_search_dirs(platform, torch_dir, prefix, is_dir)
    if add_dll_directory is None:
        return []
    for directory in dirs:
        add_dll_directory(str(directory))
    return dirs


def missing_dlls(
    required: Iterable[str],
    search_dirs: Iterable[Path],
    path_env: str,
    system_dir: Path | None,
    exists: Callable[[Path], bool] = Path.exists,
    make_path: Callable[[str], Path] = Path,
) -> list[str]:
    """The DLLs of `required` found in none of the search dirs, PATH entries (';'-separated, as
    on Windows) or the system dir."""
    dirs = list(search_dirs) + [make_path(p) for p in path_env.split(";") if p]
    if system_dir is not None:
        dirs.append(system_dir)
    return [dll for dll in required if not any(exists(d / dll) for d in dirs)]


def explain_load_failure(
    error: BaseException, extension: Path, platform: str, search_dirs: list[Path], missing: list[str]
) -> str:
    """A message for a failed load that names what is missing and how to fix it."""
    lines = [f"pointops: could not load its compiled extension {extension}: {error}"]
    text = str(error)
    if platform == "win32":
        if missing:
            lines.append("Missing DLL(s): " + ", ".join(missing) + ".")
            if any(d.lower().startswith(("vcruntime", "msvcp")) for d in missing):
                lines.append(
                    "The Microsoft Visual C++ runtime is missing: install vc14_runtime "
                    "(conda install -c conda-forge vc14_runtime) or the VC++ 2015-2022 "
                    "redistributable."
                )
            if any(d.lower() in ("torch_cpu.dll", "c10.dll") for d in missing):
                lines.append(
                    "torch's DLLs were not found: check that PyTorch >= 2.10 is "
                    "installed in this environment."
                )
        else:
            lines.append(
                "All direct dependencies were found; a dependency of theirs may be "
                "missing or built for another architecture."
            )
        searched = ", ".join(str(d) for d in search_dirs) or "(none)"
        lines.append(f"Searched: {searched}, PATH and the system directory.")
    elif "undefined symbol" in text or "Symbol not found" in text:
        lines.append(
            "The installed torch lacks a symbol the extension needs: pointops needs "
            "PyTorch >= 2.10. Upgrade torch, or rebuild pointops against it."
        )
    else:
        lines.append(reinstall_advice(extension.parent))
    return "\n".join(lines)


def load_extension(load_library: Callable[[str], None]) -> Path:
    """Loads the extension with `load_library` (torch.ops.load_library); returns its path."""
    import torch

    extension = find_extension()
    torch_dir = Path(torch.__file__).resolve().parent
    prefix = Path(sys.prefix)
    dirs = prepare_dll_search_path(sys.platform, torch_dir, prefix, getattr(os, "add_dll_directory", None))
    try:
        load_library(str(extension))
    except OSError as error:
        missing: list[str] = []
        if sys.platform == "win32":
            system_root = os.environ.get("SystemRoot")
            missing = missing_dlls(
                WINDOWS_DEPENDENCIES,
                dirs,
                os.environ.get("PATH", ""),
                Path(system_root) / "System32" if system_root else None,
            )
        raise ExtensionLoadError(
            explain_load_failure(error, extension, sys.platform, dirs, missing)
        ) from error
    return extension
