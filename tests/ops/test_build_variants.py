"""Switching one build directory between a CPU-only and a CUDA build relinks with the right
objects: the binding compiled with -DPOINTOPS_WITH_CUDA (which registers the CUDA kernels)
must not be replaced by a stale CPU-only one, nor the other way round.

A copy of ops-src with a one-kernel CUDA source and no CPU kernel sources keeps each build to
the binding alone (the library is never loaded, so unresolved kernel symbols are fine)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")
NM = shutil.which("nm")

pytestmark = [
    pytest.mark.slow,  # a few builds of the binding, about 20 s each on 2 cores
    pytest.mark.skipif(
        NVCC is None or NM is None or not sys.platform.startswith("linux"),
        reason="needs nvcc and nm on Linux",
    ),
]


def build(src: Path, cuda: bool) -> str:
    # POINTOPS_LOAD_CHECK=0: this partial library is never loaded (setup.py would refuse it)
    env = dict(
        os.environ,
        POINTOPS_CUDA="1" if cuda else "0",
        TORCH_CUDA_ARCH_LIST="9.0",
        MAX_JOBS="2",
        POINTOPS_LOAD_CHECK="0",
    )
    result = subprocess.run(
        [sys.executable, "setup.py", "build_ext"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def library_symbols(src: Path) -> str:
    (library,) = src.glob("build/lib.*/pointops/_C*.so")
    return subprocess.run([NM, "-C", str(library)], capture_output=True, text=True, check=True).stdout


def references_cuda_kernels(src: Path) -> bool:
    return "furthest_point_sample_cuda" in library_symbols(src)


def minimal_copy(tmp_path: Path) -> Path:
    src = tmp_path / "ops-src"
    shutil.copytree(
        REPO / "ops-src", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "*.so", "__pycache__")
    )
    for cpp in (src / "csrc" / "cpu").glob("*.cpp"):
        cpp.unlink()
    for cu in (src / "csrc" / "cuda").glob("*.cu"):
        cu.unlink()
    (src / "csrc" / "cuda" / "empty_kernel.cu").write_text("__global__ void pointops_empty_kernel() {}\n")
    return src


def test_an_edited_cuda_source_or_header_reaches_the_library(tmp_path):
    """Incremental builds: setuptools relinks only when a source or dependency is newer than the
    library, so the CUDA objects and the headers must count as dependencies."""
    src = minimal_copy(tmp_path)
    build(src, cuda=True)
    assert "pointops_edited_kernel" not in library_symbols(src)
    kernel = src / "csrc" / "cuda" / "empty_kernel.cu"
    kernel.write_text(kernel.read_text() + "__global__ void pointops_edited_kernel() {}\n")
    build(src, cuda=True)
    assert "pointops_edited_kernel" in library_symbols(src)

    build(src, cuda=False)
    (library,) = src.glob("build/lib.*/pointops/_C*.so")
    built_at = library.stat().st_mtime_ns
    header = src / "csrc" / "kernels.h"
    header.write_text(header.read_text() + "// edited\n")
    later = built_at + 2_000_000_000  # two seconds past the library, whatever the clock's resolution
    os.utime(header, ns=(later, later))
    build(src, cuda=False)
    assert library.stat().st_mtime_ns != built_at


def test_cpu_and_cuda_builds_in_one_directory_use_their_own_objects(tmp_path):
    src = minimal_copy(tmp_path)

    build(src, cuda=False)
    assert not references_cuda_kernels(src)
    build(src, cuda=True)  # sources unchanged: only the configuration differs
    assert references_cuda_kernels(src)
    assert list(src.glob("build/temp.*/cuda/csrc/binding/sampling.o"))
    assert list(src.glob("build/temp.*/cpu/csrc/binding/sampling.o"))
    build(src, cuda=False)
    assert not references_cuda_kernels(src)
    (library,) = src.glob("build/lib.*/pointops/_C*.so")
    built_at = library.stat().st_mtime_ns
    build(src, cuda=False)  # same configuration, nothing changed: nothing is rebuilt
    assert library.stat().st_mtime_ns == built_at
