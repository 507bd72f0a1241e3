"""The CPU kernels give bitwise the same outputs in a Windows exe (mingw-w64, under wine) as on
Linux: the same harness (kernel_outputs.cpp: FPS, kNN, ball query, gather and its backward, in
float32 and float64, some cases indexing past 2^31 and 2^32 elements) built for both and run on
the same generated inputs, once per FPS sampler; each run prints a hash of every case's outputs."""

from __future__ import annotations

import os
import shutil

import cross_build as cb
import pytest

pytestmark = (
    pytest.mark.slow
)  # runs under wine; with the apt install, over a minute of CI: see docs/recipes.md

# POINTOPS_CPU_FPS_PATH for each run: the planner's choice, then each sampler forced.
FPS_PATHS = ("auto", "brute", "kdtree")


def parse(output: str) -> dict[str, str]:
    return dict(line.split() for line in output.splitlines() if line.strip())


@pytest.fixture(scope="session")
def linux_outputs(build_dir) -> dict[str, dict[str, str]]:
    """The harness built for this host with the same flags, and its output for each FPS path."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++) to build the Linux side of the comparison")
    objects = []
    for source in [*cb.torch_free_sources(), cb.HERE / "kernel_outputs.cpp"]:
        compiled = cb.compile_cxx(cxx, source, build_dir / "linux", cb.torch_free_flags())
        assert compiled.ok, compiled.log()
        objects.append(compiled.obj)
    exe = build_dir / "kernel_outputs"
    link = cb.run([cxx, "-o", exe, *objects, "-ldl"])
    assert link.returncode == 0, link.stderr
    outputs = {}
    for path in FPS_PATHS:
        result = cb.run([exe], env={**os.environ, "POINTOPS_CPU_FPS_PATH": path})
        assert result.returncode == 0, f"the harness's self-checks failed on Linux ({path}):\n{result.stderr}"
        outputs[path] = parse(result.stdout)
    return outputs


def test_harness_covers_every_kernel_in_both_precisions(linux_outputs):
    for kernel in (
        "fps_small",
        "fps_kdtree",
        "fps_grid_ties",
        "knn",
        "three_nn",
        "ball_query_inclusive",
        "ball_query_exclusive",
        "gather_weighted",
        "group",
        "gather_backward_feat_weighted",
        "group_backward",
        "gather_backward_weight",
        "sparse64_neighbours",
        "sparse64_gather",
    ):
        for dtype in ("f32", "f64"):
            assert f"{kernel}_{dtype}" in linux_outputs["auto"]


def test_fps_samplers_agree(linux_outputs):
    """Brute force and kd-tree pick the same points (fps_cpu.cpp's promise), so every run hashes
    the same: the Windows comparison below then covers both samplers."""
    assert linux_outputs["brute"] == linux_outputs["auto"] == linux_outputs["kdtree"]


@pytest.mark.parametrize("fps_path", FPS_PATHS)
def test_windows_outputs_match_linux_bit_for_bit(wine, windows_kernel_harness, linux_outputs, fps_path):
    result = wine.run(windows_kernel_harness, env={"POINTOPS_CPU_FPS_PATH": fps_path})
    assert result.returncode == 0, (
        f"the harness failed under wine (exit {result.returncode}):\n"
        f"{result.stderr[-4000:]}\n{result.stdout[-4000:]}"
    )
    linux, windows = linux_outputs[fps_path], parse(result.stdout)
    assert windows.keys() == linux.keys()
    differ = {case: (linux[case], windows[case]) for case in linux if windows[case] != linux[case]}
    assert not differ, f"outputs differ between Linux and Windows (linux, windows hash): {differ}"
