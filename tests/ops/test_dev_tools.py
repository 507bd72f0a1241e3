"""The developer tools: the GPU kernel oracle (tests/gpu/kernel_oracle.cu) still compiles against
kernels.h, and the Python benchmarks fail with a clear message (not a traceback) where they
cannot run."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_kernel_oracle_compiles_against_the_kernel_contract(tmp_path):
    # Compile only the oracle's translation unit (the kernels are compile-checked elsewhere):
    # a changed signature in kernels.h breaks this build.
    obj = tmp_path / "kernel_oracle.o"
    cmd = [
        NVCC,
        "-c",
        "-O0",
        "-std=c++17",
        "-arch=sm_90",
        f"-I{REPO / 'ops-src' / 'csrc'}",
        str(REPO / "tests" / "gpu" / "kernel_oracle.cu"),
        "-o",
        str(obj),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert obj.stat().st_size > 0


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


def test_bench_gpu_without_a_gpu_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run for minutes")
    result = _run("bench_gpu.py", "--quick")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("bench_gpu: ")
    assert "GPU" in result.stderr or "pointops" in result.stderr


def test_bench_cpu_fps_rejects_more_samples_than_points():
    result = _run("bench_cpu_fps.py", "--n", "5", "--k", "10")
    assert result.returncode == 2
    assert "need 0 < k <= n" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("fpsample") is None, reason="fpsample is a benchmark-only dependency"
)
def test_bench_cpu_fps_small_run_agrees_with_fpsample(tmp_path):
    pytest.importorskip("pointops")
    out = tmp_path / "fps.json"
    result = _run("bench_cpu_fps.py", "--n", "3000", "--k", "300", "--reps", "1", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    import json

    data = json.loads(out.read_text())
    rows = {r["sampler"]: r for r in data["rows"]}
    # Vanilla FPS from the same start index picks the same points as pointops.
    assert rows["fpsample.fps_sampling"]["same_set_as_pointops"] == 1.0
    assert data["n"] == 3000 and data["k"] == 300
