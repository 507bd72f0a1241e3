"""Every C++ source of ops-src compiles for x86_64 Windows (mingw-w64: LLP64, Windows headers) with
warnings as errors, and what links without torch's real import library links: the torch-free
sources (the kernels) into a static library and an exe, the extension against an import library
holding torch 2.10's C shim."""

from __future__ import annotations

import cross_build as cb
import pytest

SHIM_SYMBOLS = cb.REPO / "tests" / "ops" / "data" / "torch_2_10_shim_symbols.txt"


def test_sources_are_found_by_glob():
    torch_free, binding = cb.torch_free_sources(), cb.binding_sources()
    assert cb.kernel_sources() and binding
    assert sorted(torch_free + binding) == cb.cpp_sources()
    assert any("STABLE_TORCH_LIBRARY(" in p.read_text() for p in binding), "no source registers the ops"


@pytest.mark.parametrize("source", cb.kernel_sources(), ids=cb.relative)
def test_kernel_source_is_torch_free(source):
    assert not cb.includes_torch(source), "csrc/cpu must not include torch headers (kernels.h's contract)"


@pytest.mark.parametrize("source", cb.torch_free_sources(), ids=cb.relative)
def test_torch_free_source_compiles_for_windows(windows_torch_free_objects, source):
    compiled = windows_torch_free_objects[source]
    assert compiled.ok, compiled.log()


@pytest.mark.parametrize("source", cb.binding_sources(), ids=cb.relative)
def test_binding_source_compiles_for_windows_against_stable_headers(windows_binding_objects, source):
    compiled = windows_binding_objects[source]
    assert compiled.ok, compiled.log()


def test_kernel_exe_imports_only_system_dlls(windows_kernel_harness):
    """The kernels need no runtime DLL of their own (no libstdc++/libgcc, no OpenMP or pthreads)."""
    dlls = cb.imported_dlls(windows_kernel_harness)
    assert any(d.lower() == "kernel32.dll" for d in dlls), dlls
    assert all(cb.is_system_dll(d) for d in dlls), f"unexpected DLL imports: {sorted(dlls)}"


def test_extension_links_against_torch_2_10_shim_alone(
    mingw, windows_torch_free_objects, windows_binding_objects, build_dir
):
    """Windows resolves every imported symbol at link time, against torch_cpu.lib. Linking against
    an import library holding only torch 2.10's C shim symbols shows that the extension needs
    nothing else from torch (no C++ symbol, no c10.dll) and loads with torch >= 2.10."""
    listed = [s.strip() for s in SHIM_SYMBOLS.read_text().splitlines() if s.strip() and not s.startswith("#")]
    stand_in = cb.import_library(listed, "torch_cpu.dll", build_dir / "torch-stand-in")
    objects = cb.objects_or_fail(windows_torch_free_objects, "the torch-free sources") + cb.objects_or_fail(
        windows_binding_objects, "the binding"
    )
    dll = build_dir / "_C.pyd"
    link = cb.run([mingw, "-shared", *cb.STATIC_RUNTIME, "-o", dll, *objects, stand_in])
    assert link.returncode == 0, f"link failed (a symbol missing from torch 2.10's shim?):\n{link.stderr}"

    dlls = cb.imported_dlls(dll)
    torch_dlls = sorted(d for d in dlls if not cb.is_system_dll(d))
    assert torch_dlls == ["torch_cpu.dll"], sorted(dlls)
    imported = set(dlls["torch_cpu.dll"])
    assert imported and imported <= set(listed)
    assert {"torch_parallel_for", "aoti_torch_empty_strided"} <= imported
