"""mmcv and mmdet as users end up with them, for doctor to diagnose: wheels written here and
installed by pip into a virtual environment that sees this test environment's torch
(broken_envs.Venv). The stand-in mmcv's `mmcv.ops` loads `mmcv._ext` the way the real one does
(importlib, after torch), its `_ext` is a real shared object compiled here with g++ (or nvcc), and the
stand-in mmdet checks the mmcv version it imports and raises the message mmdet 3.x raises."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sysconfig
import zipfile
from pathlib import Path

import pytest

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")  # the venv's Python is this one
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build mmcv's _ext")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build CUDA code")

MMCV_INIT = "from .version import __version__\n"
MMCV_OPS = (
    "import importlib\n\n"
    "import torch  # _ext links to torch's libraries, loaded by torch\n\n"
    'ext_module = importlib.import_module("mmcv._ext")\n'
)
# A Python extension module that loads: the _ext of a build that works.
LOADABLE_EXT = """
#include <Python.h>
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_ext", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit__ext() { return PyModule_Create(&definition); }
"""
# The constructor torch 1.x wheels exported (built with the pre-C++11 std::string, as torch 1.x was):
# today's torch defines it only with the C++11 std::string, so loading fails with "undefined symbol:
# _ZN3c105ErrorC1ENS_14SourceLocationESs", the error of open-mmlab/mmcv#2660.
OLD_TORCH_EXT = """
#include <string>
namespace c10 {
struct SourceLocation { const char* function; const char* file; unsigned line; };
struct Error { Error(SourceLocation location, std::string message); };
}
extern "C" void* PyInit__ext() {
  c10::Error error({"PyInit__ext", "ext.cpp", 1}, "never constructed");
  (void)error;
  return nullptr;
}
"""
OLD_TORCH_SYMBOL = "_ZN3c105ErrorC1ENS_14SourceLocationESs"
KERNEL = """
__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" const char* launch_add_one() {
  add_one<<<1, 1>>>(nullptr);
  return cudaGetErrorString(cudaGetLastError());
}
"""


def torch_lib() -> Path:
    import torch

    return Path(torch.__file__).parent / "lib"


def compile_ext(folder: Path, source: str, *flags: str) -> bytes:
    """A shared object built with g++ from `source`, linked to torch's libc10 (as mmcv's _ext is)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ext.cpp").write_text(source)
    target = folder / "ext.so"
    command = ["g++", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", *flags]
    command += ["-o", str(target), str(folder / "ext.cpp"), f"-L{torch_lib()}", "-Wl,--no-as-needed", "-lc10"]
    subprocess.run(command, check=True, capture_output=True)
    return target.read_bytes()


def compile_cuda(folder: Path, *gencode: str) -> bytes:
    """A shared object built with nvcc with code for exactly these targets ("compute_80:sm_80")."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cu").write_text(KERNEL)
    target = folder / "kernel.so"
    flags = [f"-gencode=arch={arch},code={code}" for arch, code in (g.split(":") for g in gencode)]
    command = ["nvcc", "-shared", "-Xcompiler", "-fPIC", *flags, "-o", str(target), str(folder / "kernel.cu")]
    subprocess.run(command, check=True, capture_output=True)
    return target.read_bytes()


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(folder: Path, name: str, version: str, files: dict[str, bytes | str], requires=()) -> Path:
    """A wheel as bdist_wheel writes one: the files, METADATA, WHEEL and a RECORD with hashes and sizes."""
    stem = f"{name.replace('-', '_')}-{version}"
    meta = f"{stem}.dist-info"
    contents = {path: data.encode() if isinstance(data, str) else data for path, data in files.items()}
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    contents[f"{meta}/METADATA"] = (
        "\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n"
    ).encode()
    contents[f"{meta}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
    )
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in contents.items())
    contents[f"{meta}/RECORD"] = (record + f"{meta}/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def mmcv_files(version: str, ext: bytes | None = None, ext_name: str = f"_ext{EXT_SUFFIX}") -> dict:
    files = {
        "mmcv/__init__.py": MMCV_INIT,
        "mmcv/version.py": f"__version__ = {version!r}\n",
        "mmcv/ops/__init__.py": MMCV_OPS,
    }
    if ext is not None:
        files[f"mmcv/{ext_name}"] = ext
    return files


def mmdet_files(minimum: str, maximum: str) -> dict:
    """mmdet 3.x's import-time check of mmcv's version, and its message (facts of its behaviour)."""
    check = f"""import mmcv


def _release(version):
    head = version.split("rc")[0]
    return tuple(int(part) for part in head.split(".")) + ((0,) if "rc" in version else (1,))


minimum, maximum = {minimum!r}, {maximum!r}
if not _release(minimum) <= _release(mmcv.__version__) < _release(maximum):
    raise AssertionError(
        f"MMCV=={{mmcv.__version__}} is used but incompatible. Please install mmcv>={{minimum}}, <{{maximum}}."
    )
"""
    return {"mmdet/__init__.py": check}
