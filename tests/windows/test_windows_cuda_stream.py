"""The Windows branch of csrc/cuda_stream.cpp (GetModuleHandle + GetProcAddress on torch_cuda.dll)
run under wine: a clear error when torch has no CUDA library loaded, the shim's stream when a
torch_cuda.dll is loaded (a stand-in exporting the shim function: the real one needs Windows and
a GPU), and the shim's failure turned into an error naming the device."""

from __future__ import annotations

import cross_build as cb
import pytest

pytestmark = pytest.mark.slow  # runs under wine: see test_windows_kernel_outputs.py


@pytest.fixture(scope="session")
def probe(mingw, build_dir):
    sources = sorted(cb.CSRC.rglob("cuda_stream.cpp"))
    assert sources, (
        "csrc/**/cuda_stream.cpp is gone: point this test at the source defining current_cuda_stream"
    )
    out = build_dir / "cuda_stream_probe"
    objects = []
    for source in [sources[0], cb.HERE / "cuda_stream_probe.cpp"]:
        compiled = cb.compile_cxx(mingw, source, out, [*cb.torch_free_flags(), f"-I{sources[0].parent}"])
        assert compiled.ok, compiled.log()
        objects.append(compiled.obj)
    exe = out / "cuda_stream_probe.exe"
    link = cb.run([mingw, *cb.STATIC_RUNTIME, "-o", exe, *objects])
    assert link.returncode == 0, link.stderr
    stand_in = cb.compile_cxx(mingw, cb.HERE / "torch_cuda_stand_in.cpp", out, [])
    assert stand_in.ok, stand_in.log()
    dll = out / "torch_cuda.dll"
    link = cb.run([mingw, "-shared", *cb.STATIC_RUNTIME, "-o", dll, stand_in.obj])
    assert link.returncode == 0, link.stderr
    return exe, dll


def test_without_torch_cuda_the_error_says_to_install_a_cuda_torch(wine, probe):
    exe, _ = probe
    result = wine.run(exe)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert "error: pointops: cannot find torch's CUDA library (torch_cuda)" in line
        assert "Install a CUDA build of PyTorch" in line


def test_with_torch_cuda_loaded_the_shim_gives_the_stream(wine, probe):
    exe, dll = probe
    result = wine.run(exe, "Z:" + str(dll).replace("/", "\\"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"device 3 stream {4096 + 3}",
        "device 7 error: pointops: torch could not report the current CUDA stream of device 7",
    ]
