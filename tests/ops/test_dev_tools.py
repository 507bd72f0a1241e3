"""The developer tools: the GPU kernel oracle (tests/gpu/kernel_oracle.cu) still compiles against
kernels.h, and the Python benchmarks fail with a clear message (not a traceback) where they
cannot run."""

from __future__ import annotations

import importlib.util
import json
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


@pytest.mark.parametrize("passes", ["0", "-1"])
def test_bench_gpu_refuses_fewer_than_one_pass(passes):
    result = _run("bench_gpu.py", "--quick", "--passes", passes)
    assert result.returncode == 2
    assert f"--passes must be at least 1, got {passes}" in result.stderr
    assert "Traceback" not in result.stderr


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


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_bench_gpu_times_short_single_calls_many_times_and_long_ones_reps_times():
    bench = _load(BENCH / "bench_gpu.py", "bench_gpu_under_test")
    # A 0.04 ms call: as many as fill MIN_TIMED_MS, capped at MAX_REPS (a median of 3 of these
    # flipped a row); a 9 ms FPS call: the quick run's 3 or the full run's 10.
    assert bench._single_calls(0.04, 3) == bench.MAX_REPS
    assert bench._single_calls(1.0, 3) == int(bench.MIN_TIMED_MS) + 1
    assert bench._single_calls(9.0, 3) == 3
    assert bench._single_calls(9.0, 10) == 10
    assert bench._single_calls(0.0, 3) == bench.MAX_REPS  # an event pair that read 0 ms


def test_bench_gpu_keeps_each_rows_fastest_pass_against_the_strictest_target(capsys):
    bench = _load(BENCH / "bench_gpu.py", "bench_gpu_passes_under_test")
    first, second = bench.Table(echo=False), bench.Table(echo=False)
    # Pass 1 caught the gather row in a slow stretch of the host; pass 2 its baseline.
    first.add("gather", "B8", 0.050, target=0.046, note="scatter 0.092")
    second.add("gather", "B8", 0.042, target=0.048, note="scatter 0.096")
    first.add("fps", "B1", 9.0, target=10.0)
    second.add("fps", "B1", 9.5, target=10.0)
    first.add("dtype", "B1", 1.0)
    second.add("dtype", "B1", 0.9)
    rows = {r["op"]: r for r in bench.fastest_passes([first, second]).rows}
    assert rows["gather"]["ms"] == 0.042 and rows["gather"]["target_ms"] == 0.046
    assert rows["gather"]["status"] == "PASS" and rows["gather"]["note"] == "scatter 0.096"
    assert rows["gather"]["passes_ms"] == [0.05, 0.042]
    assert rows["fps"]["ms"] == 9.0 and rows["fps"]["status"] == "PASS"
    assert rows["dtype"]["ms"] == 0.9 and rows["dtype"]["status"] is None
    assert "gather" in capsys.readouterr().out  # the merged table prints, once per row

    # The slow pass is not hidden where both are slow: a row past the target in each stays MISS.
    third = bench.Table(echo=False)
    third.add("gather", "B8", 0.049, target=0.048)
    fourth = bench.Table(echo=False)
    fourth.add("gather", "B8", 0.047, target=0.046)
    assert bench.fastest_passes([third, fourth]).rows[0]["status"] == "MISS"

    # Passes that ran different rows are an error, not a silent mismatch.
    other = bench.Table(echo=False)
    other.add("knn", "B8", 0.1)
    with pytest.raises(ValueError, match="different rows"):
        bench.fastest_passes([third, other])
    with pytest.raises(ValueError):
        bench.fastest_passes([first, other])  # different lengths: zip(strict=True)


def test_bench_peer_ops_without_a_gpu_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would build its inputs and time the peers")
    result = _run("bench_peer_ops.py")
    assert result.returncode == 0
    assert "needs CUDA" in result.stdout and "Traceback" not in result.stderr


def test_bench_peer_ops_table_takes_each_sides_better_pass_and_the_fastest_peer():
    pytest.importorskip("torch")
    bench = _load(BENCH / "bench_peer_ops.py", "bench_peer_ops_under_test")

    def times(one, b2b):
        return {"fps": {"one_call_ms": one, "b2b_ms": b2b}}

    passes = {
        "pointops": [times(1.2, 0.5), times(1.0, 0.6)],
        "pointnet2_ops": [times(2.0, 0.45), times(3.0, 0.4)],
        "pointcept": [times(4.0, 1.0)],
        "torch": [{}],
    }
    rows = {r["row"]: r for r in bench.table(passes, {"fps": ["pointnet2_ops identical"] * 2})}
    fps = rows["fps"]
    assert fps["pointops_ms"] == 1.0 and fps["pointops_b2b_ms"] == 0.5
    assert fps["fastest_peer"] == "pointnet2_ops" and fps["ratio"] == pytest.approx(0.5)
    assert fps["fastest_peer_b2b"] == "pointnet2_ops" and fps["ratio_b2b"] == pytest.approx(1.25)
    assert fps["status"] == "MISS"  # slower than a peer back to back
    assert fps["note"] == "pointnet2_ops identical"
    assert "torch" not in fps["peers_ms"]  # a side without the row is no peer of it
    assert rows["gather_points"]["status"] == "-"  # no side timed it


def test_bench_peer_ops_packs_per_cloud_indices_as_pointcept_rows():
    torch = pytest.importorskip("torch")
    bench = _load(BENCH / "bench_peer_ops.py", "bench_peer_ops_under_test")
    idx = torch.tensor([[[0, 2], [1, 1]], [[3, 0], [2, 2]]])  # B2, M2, K2 into clouds of 4 points
    packed = bench._packed_index(idx, 4)
    assert packed.dtype == torch.int32
    assert packed.tolist() == [[0, 2], [1, 1], [7, 4], [6, 6]]


def test_pointnet2_reference_float64_searches_pick_the_float32_neighbours():
    torch = pytest.importorskip("torch")
    ref = _load(BENCH / "clients" / "_pointnet2_reference.py", "pointnet2_reference_under_test")
    g = torch.Generator().manual_seed(0)
    known = torch.rand(2, 64, 3, generator=g, dtype=torch.float64)
    unknown = torch.rand(2, 200, 3, generator=g, dtype=torch.float64)
    # a pair the float64 search orders one way and the float32 search the other: a known point
    # nudged below float32 resolution towards an unknown one
    known[0, 1] = known[0, 0]
    known[0, 1, 0] += 1e-12
    d32, i32 = ref.three_nn(unknown.float(), known.float())
    ref.SEARCH_FLOAT32 = True
    try:
        d64, i64 = ref.three_nn(unknown, known)
        fps = ref.furthest_point_sample(known, 16)
    finally:
        ref.SEARCH_FLOAT32 = False
    assert torch.equal(i64, i32)
    assert d64.dtype == torch.float64
    picked = known[torch.arange(2)[:, None, None], i64.long()]
    expect = (unknown.unsqueeze(2) - picked).pow(2).sum(-1).sqrt()
    torch.testing.assert_close(d64, expect, rtol=1e-15, atol=0)
    assert torch.equal(fps, ref.furthest_point_sample(known.float(), 16))


@pytest.mark.parametrize(
    "script, args",
    [
        ("bench_grid_paths.py", ["--rounds", "1"]),
        ("bench_ball_query_lanes.py", ["--reps", "1"]),
        ("bench_group_rows_backward.py", ["--reps", "1"]),
        ("bench_host_overhead.py", ["--device", "cuda", "--reps", "1"]),
    ],
)
def test_gpu_benchmarks_without_a_gpu_say_so(script, args):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    result = _run(script, *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"{script[:-3]}: needs a CUDA GPU")


def test_bench_host_overhead_times_the_floor_and_the_backward_layers(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "host.json"
    result = _run("bench_host_overhead.py", "--calls", "50", "--reps", "3", "--json", str(out))
    assert result.returncode == 0, result.stderr
    rows = {(r["op"], r["layer"]): r["us"] for r in json.loads(out.read_text())["results"]}
    for key in [
        ("floor", "torch.empty"),
        ("floor", "raw op, does nothing"),
        ("three_interpolate", "raw op"),
        ("three_interpolate backward", "raw op"),
        ("three_interpolate backward", "autograd.grad"),
        ("gather_points", "torch.gather (the peer)"),
        ("three_interpolate", "compat API (int32 idx)"),
    ]:
        assert 0 < rows[key] < 1e6, key
    # autograd.grad runs the engine and the formula around the same raw op
    assert (
        rows[("three_interpolate backward", "autograd.grad")] > rows[("three_interpolate backward", "raw op")]
    )


def test_update_baseline_renders_the_columns_each_section_fills():
    # A column shows in a section's table only where one of its rows has a value: bench_gpu's rows
    # carry floor_ms None, bench_torch_cluster's grid rows a number.
    update = _load(BENCH / "update_baseline.py", "update_baseline_under_test")
    baseline = {
        "sections": {
            "ops": {
                "meta": {"gpu": "G"},
                "rows": [{"op": "fps", "shape": "B1", "ms": 1.5, "floor_ms": None}],
            },
            "torch_cluster": {
                "meta": {"gpu": "G"},
                "rows": [
                    {"op": "grid", "shape": "16x10000", "pointops_ms": 0.026, "floor_ms": 0.016},
                    {"op": "fps", "shape": "16x10000", "pointops_ms": 4.9},
                ],
            },
        }
    }
    text = update.render(baseline, "h100")
    ops = text[text.index("## ops") : text.index("## torch_cluster")]
    tc = text[text.index("## torch_cluster") :]
    assert "| op | shape | ms |" in ops and "floor_ms" not in ops
    assert "| op | shape | pointops_ms | floor_ms |" in tc
    assert "| grid | 16x10000 | 0.026 | 0.016 |" in tc and "| fps | 16x10000 | 4.9 |  |" in tc


def test_update_baseline_renders_a_single_run_of_results():
    # bench_host_overhead writes its rows under "results" (one run, as recorded on a GPU host)
    update = _load(BENCH / "update_baseline.py", "update_baseline_under_test")
    run = {"device": "G", "results": [{"op": "floor", "layer": "torch.empty", "us": 2.5}]}
    text = update.render({"sections": {"host_overhead": run}}, "h100")
    assert "| op | layer | us |" in text and "| floor | torch.empty | 2.5 |" in text
    assert "(no rows)" not in text
