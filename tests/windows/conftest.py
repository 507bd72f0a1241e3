"""Session fixtures for the Windows checks: the mingw-w64 builds (each source compiled once per
session) and one wine prefix. Tools that are missing skip the tests that need them."""

from __future__ import annotations

import shutil
from pathlib import Path

import cross_build as cb
import pytest


@pytest.fixture(scope="session")
def mingw() -> str:
    cxx = shutil.which(cb.MINGW_CXX)
    if cxx is None:
        pytest.skip(
            f"{cb.MINGW_CXX} not found: the Windows cross-compile checks need mingw-w64 ({cb.INSTALL_HINT})"
        )
    return cxx


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("windows-build")


@pytest.fixture(scope="session")
def windows_torch_free_objects(mingw, build_dir) -> dict[Path, cb.Compiled]:
    return {
        src: cb.compile_cxx(mingw, src, build_dir / "torch-free", cb.torch_free_flags())
        for src in cb.torch_free_sources()
    }


@pytest.fixture(scope="session")
def windows_binding_objects(mingw, build_dir) -> dict[Path, cb.Compiled]:
    include = cb.torch_include()
    if include is None:
        pytest.skip(
            "torch is not installed: the binding is compiled against its stable headers (torch/include)"
        )
    return {
        src: cb.compile_cxx(mingw, src, build_dir / "binding", cb.binding_flags(include))
        for src in cb.binding_sources()
    }


@pytest.fixture(scope="session")
def windows_kernel_library(windows_torch_free_objects, build_dir) -> Path:
    """Every torch-free object (the kernels and what they use) in one static library."""
    lib = build_dir / "libpointops_cpu.a"
    objects = cb.objects_or_fail(windows_torch_free_objects, "the torch-free sources")
    result = cb.run([cb.MINGW_PREFIX + "ar", "rcs", lib, *objects])
    assert result.returncode == 0, result.stderr
    return lib


@pytest.fixture(scope="session")
def windows_kernel_harness(mingw, windows_kernel_library, build_dir) -> Path:
    """tests/windows/kernel_outputs.cpp linked with the whole library into a Windows exe (whole
    archive: an object with an unresolved symbol fails the link)."""
    harness = cb.compile_cxx(
        mingw, cb.HERE / "kernel_outputs.cpp", build_dir / "harness", cb.torch_free_flags()
    )
    assert harness.ok, harness.log()
    exe = build_dir / "kernel_outputs.exe"
    link = cb.run(
        [
            mingw,
            *cb.STATIC_RUNTIME,
            "-o",
            exe,
            harness.obj,
            "-Wl,--whole-archive",
            windows_kernel_library,
            "-Wl,--no-whole-archive",
        ]
    )
    assert link.returncode == 0, link.stdout + link.stderr
    return exe


@pytest.fixture(scope="session")
def wine(tmp_path_factory):
    loader = cb.find_wine()
    if loader is None:
        pytest.skip(f"wine64 not found: running the Windows builds needs wine ({cb.INSTALL_HINT})")
    runner = cb.Wine(loader, tmp_path_factory.mktemp("wineprefix"))
    yield runner
    runner.stop()


@pytest.fixture(scope="session", autouse=True)
def _wine_prefix_early(request):
    """Starts the wine prefix with the first test of this folder, so that its creation overlaps
    the compiles instead of following them."""
    if cb.find_wine() is not None and shutil.which(cb.MINGW_CXX) is not None:
        request.getfixturevalue("wine")
