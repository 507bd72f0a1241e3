"""A linux-64 channel in which rattler-build can really build and test recipes/pointops offline.

Every package carries conda-forge's metadata (tests/conda_forge_standins.py, from
tests/data/conda_forge_metadata.yaml); the ones a build or test runs also carry files that wrap
this machine's tools, the way conda-forge's activation packages wrap their compilers:

    gcc_linux-64, gxx_linux-64   activation scripts exporting CC/CXX (this machine's gcc/g++) and
                                 conda-forge-style flags (-rpath and -L to $PREFIX/lib)
    python                       a venv-style prefix over the interpreter running the tests
    pytorch, libtorch            links to this interpreter's torch (libtorch: its shared libraries
                                 under lib/, where conda-forge's libtorch puts them)
    pip, setuptools, torch's Python dependencies
                                 links to the installed distributions, with their dist-info
    abi3audit                    a bin/ wrapper of the installed abi3audit
    cuda-nvcc_linux-64           bin/nvcc linking this machine's nvcc, activation adding -ccbin
    cuda-cudart-static(_linux-64)
                                 this machine's libcudart_static.a at conda-forge's paths

Only the interpreter's Python exists here, so the channel's python (and the pytorch builds for it)
is that version; the build test sets the recipe's python and python_min to it.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import conda_forge_standins as standins  # noqa: E402

SUBDIR = "linux-64"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PY_FULL = ".".join(str(p) for p in sys.version_info[:3])
SITE = f"lib/python{PY}/site-packages"
# conda package -> the distributions (as pip names them) whose files it links
PYTHON_PACKAGES = {
    "pip": "pip",
    "setuptools": "setuptools",
    "filelock": "filelock",
    "fsspec": "fsspec",
    "networkx": "networkx",
    "jinja2": "jinja2",
    "markupsafe": "markupsafe",
    "sympy": "sympy",
    "mpmath": "mpmath",
    "typing_extensions": "typing_extensions",
}
TORCH_LIBS = ("libtorch_cpu.so", "libc10.so", "libtorch.so", "libtorch_global_deps.so")


def cuda_home() -> Path | None:
    """The CUDA toolkit root: CUDA_HOME, /usr/local/cuda, or the root of the nvcc on PATH (the
    first of them holding bin/nvcc and the static runtime)."""
    nvcc = shutil.which("nvcc")
    candidates = [
        os.environ.get("CUDA_HOME"),
        "/usr/local/cuda",
        nvcc and str(Path(nvcc).resolve().parent.parent),
    ]
    for candidate in filter(None, candidates):
        root = Path(candidate).resolve()
        if (root / "bin" / "nvcc").is_file() and (
            root / "targets/x86_64-linux/lib/libcudart_static.a"
        ).is_file():
            return root
    return None


def _distribution_files(dist_name: str) -> dict[str, object]:
    """site-packages links to an installed distribution's top-level packages and modules, its
    .pth files copied, and its dist-info copied (pip check reads it)."""
    dist = importlib.metadata.distribution(dist_name)
    root = Path(dist.locate_file(""))
    files: dict[str, object] = {}
    tops = set()
    for entry in dist.files or []:
        parts = Path(entry).parts
        if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".dist-info"):
            continue
        tops.add(parts[0])
    for top in sorted(tops):
        path = root / top
        if top.endswith(".pth"):
            files[f"{SITE}/{top}"] = path.read_bytes()
        elif path.exists():
            files[f"{SITE}/{top}"] = ("symlink", str(path))
    dist_info = Path(dist._path)  # the .dist-info directory
    for item in sorted(dist_info.rglob("*")):
        if item.is_file() and item.name != "RECORD":
            files[f"{SITE}/{dist_info.name}/{item.relative_to(dist_info)}"] = item.read_bytes()
    return files


def _python_files() -> dict[str, object]:
    base = Path(sys._base_executable)
    home = base.parent
    cfg = f"home = {home}\ninclude-system-site-packages = false\nversion = {PY_FULL}\n"
    return {
        "pyvenv.cfg": cfg.encode(),
        "bin/python": ("symlink", str(base)),
        "bin/python3": ("symlink", str(base)),
        f"bin/python{PY}": ("symlink", str(base)),
        f"{SITE}/README": b"site-packages of the stand-in python\n",
    }


def _libtorch_files() -> dict[str, object]:
    torch_lib = Path(importlib.metadata.distribution("torch").locate_file("torch")) / "lib"
    return {
        f"lib/{name}": ("symlink", str(torch_lib / name))
        for name in TORCH_LIBS
        if (torch_lib / name).exists()
    }


def _compiler_activation(tool: str, variable: str, program: str) -> dict[str, object]:
    path = shutil.which(program)
    script = (
        f"# stand-in {tool}: this machine's {program}, with conda-forge's rpath/-L flags\n"
        f'export {variable}="{path}"\n'
        'export _STANDIN_PREFIX="${PREFIX:-${CONDA_PREFIX}}"\n'
        f'export {"CFLAGS" if variable == "CC" else "CXXFLAGS"}="-O2 -fPIC -isystem ${{_STANDIN_PREFIX}}/include"\n'
        'export LDFLAGS="-Wl,-O2 -Wl,--as-needed -Wl,-rpath,${_STANDIN_PREFIX}/lib '
        '-Wl,-rpath-link,${_STANDIN_PREFIX}/lib -L${_STANDIN_PREFIX}/lib"\n'
    )
    return {f"etc/conda/activate.d/activate-{tool}.sh": ("script", script)}


def _nvcc_files() -> dict[str, object]:
    """bin/nvcc runs this machine's nvcc (by its own path, so that it finds its nvcc.profile and
    headers, as conda-forge's nvcc finds the build prefix's); the activation, like conda-forge's,
    makes the C++ compiler package nvcc's host compiler and adds the host prefix's CUDA target
    directory to its flags."""
    nvcc = cuda_home() / "bin" / "nvcc"
    activation = (
        "# stand-in cuda-nvcc activation\n"
        'export NVCC_PREPEND_FLAGS="${NVCC_PREPEND_FLAGS:-} -ccbin=${CXX}"\n'
        'if [ "${CONDA_BUILD:-0}" = "1" ]; then\n'
        '  export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -I${PREFIX}/targets/x86_64-linux/include '
        '-L${PREFIX}/targets/x86_64-linux/lib"\n'
        "fi\n"
    )
    return {
        "bin/nvcc": ("script", f'#!/bin/sh\nexec "{nvcc}" "$@"\n'),
        "etc/conda/activate.d/~cuda-nvcc_activate.sh": ("script", activation),
    }


def _cudart_static_files(target_specific: bool) -> dict[str, object]:
    target = "targets/x86_64-linux/lib/libcudart_static.a"
    if target_specific:
        return {target: ("symlink", str(cuda_home() / target))}
    return {"lib/libcudart_static.a": ("symlink", f"../{target}")}


def _abi3audit_files() -> dict[str, object]:
    program = Path(sysconfig.get_path("scripts")) / "abi3audit"
    return {"bin/abi3audit": ("script", f'#!/bin/sh\nexec "{program}" "$@"\n')}


def toolchain_records(torch_versions=("2.13.0", "2.10.0"), cuda_versions=()) -> list[dict]:
    versions = {conda: importlib.metadata.version(dist) for conda, dist in PYTHON_PACKAGES.items()}
    records = standins.conda_forge_records(SUBDIR, {PY: PY_FULL}, torch_versions, list(cuda_versions))
    for rec in records:  # the python leaves are the installed distributions, at their versions
        if rec["name"] in versions and rec.get("noarch") == "python":
            rec["version"] = versions[rec["name"]]
    return records


def write_toolchain_channel(root: Path, torch_versions=("2.13.0", "2.10.0"), cuda_versions=()) -> Path:
    """The channel at `root`: conda-forge's records for this machine's Python, with the files above."""
    records = toolchain_records(torch_versions, cuda_versions)
    content = {}
    python_files = {name: _distribution_files(dist) for name, dist in PYTHON_PACKAGES.items()}
    for rec in records:
        name = rec["name"]
        files = None
        if name == "python":
            files = _python_files()
        elif name == "pytorch":
            files = _distribution_files("torch")
        elif name == "libtorch":
            files = _libtorch_files()
        elif name in python_files and rec.get("noarch") == "python":
            files = python_files[name]
        elif name == "abi3audit":
            files = _abi3audit_files()
        elif name == f"gcc_{SUBDIR}":
            files = _compiler_activation(name, "CC", "gcc")
        elif name == f"gxx_{SUBDIR}":
            files = _compiler_activation(name, "CXX", "g++")
        elif name == f"cuda-nvcc_{SUBDIR}" and cuda_home():
            files = _nvcc_files()
        elif name == f"cuda-cudart-static_{SUBDIR}" and cuda_home():
            files = _cudart_static_files(target_specific=True)
        elif name == "cuda-cudart-static" and cuda_home():
            files = _cudart_static_files(target_specific=False)
        if files is not None:
            content[(name, rec["version"], rec["build"])] = files
    return standins.write_channel(root, records, content)
