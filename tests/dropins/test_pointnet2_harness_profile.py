"""benchmarks/clients/pointnet2_training.py's profile listing: pointops' ops and kernels (and
the cub sorts its backward runs) per step, most device time first, with their host time;
nothing else listed."""

from __future__ import annotations

import types

import pytest
import torch
from client_harnesses import client_harness


@pytest.fixture(scope="module")
def harness():
    with client_harness("pointnet2_training.py") as module:
        yield module


def event(key: str, device_us: float, calls: int, host_us: float = 0.0):
    return types.SimpleNamespace(
        key=key, self_device_time_total=device_us, cpu_time_total=host_us, count=calls
    )


def test_pointops_lines_list_ours_per_step_most_time_first(harness):
    events = [
        event("aten::convolution_backward", 3000.0, 27),
        event("pointops::ball_query", 30.0, 6, host_us=120.0),
        event("void pointops::(anonymous namespace)::ball_query_tiled_kernel<float>", 437.0, 6),
        event("void cub::DeviceRadixSortOnesweepKernel<...>", 90.0, 9),
    ]
    assert harness.pointops_lines(events, 3) == [
        "    device      host  calls  name",
        f"{437 / 3:10.1f}  {0.0:8.1f}  x2    void pointops::(anonymous namespace)::ball_query_tiled_kernel<float>",
        f"{30.0:10.1f}  {0.0:8.1f}  x3    void cub::DeviceRadixSortOnesweepKernel<...>",
        f"{10.0:10.1f}  {40.0:8.1f}  x2    pointops::ball_query",
    ]


def test_the_listing_reads_real_profiler_events(harness):
    """The attributes it reads exist on torch.profiler's averaged events (a CPU run here)."""
    import pointops

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        pointops.furthest_point_sample(torch.rand(1, 8, 3), 2)
    lines = harness.pointops_lines(prof.key_averages(), 1)
    assert any(line.endswith("pointops::furthest_point_sample") for line in lines)
