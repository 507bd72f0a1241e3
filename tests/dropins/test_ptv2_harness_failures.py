"""benchmarks/clients/pointcept_models.py: a compiled PTv2 mode that fails is reported (its error
in the run's results) while the other modes and rows still come out; the eager step is never
excused, since every compiled mode is compared with it."""

from __future__ import annotations

import types

import pytest
from client_harnesses import client_harness


@pytest.fixture(scope="module")
def harness():
    with client_harness("pointcept_models.py") as module:
        yield module


def test_a_failing_compiled_mode_becomes_an_error_entry(harness, monkeypatch):
    def fails(args, model, initial, inputs, mode, owners):
        raise RuntimeError(f"storages not in pool, mode {mode}")

    monkeypatch.setattr(harness, "ptv2_step_in_mode", fails)
    args = types.SimpleNamespace(device="cpu")
    entry, grads = harness.compiled_step_or_error(args, None, {}, {}, "reduce-overhead", [])
    assert grads is None
    assert entry == {
        "mode": "reduce-overhead",
        "error": "RuntimeError: storages not in pool, mode reduce-overhead",
        "median_step_ms": None,
    }


def test_a_passing_compiled_mode_is_returned_unchanged(harness, monkeypatch):
    result = ({"mode": "default", "median_step_ms": 2.0}, {"w": 1})
    monkeypatch.setattr(harness, "ptv2_step_in_mode", lambda *a: result)
    assert (
        harness.compiled_step_or_error(types.SimpleNamespace(device="cpu"), None, {}, {}, "default", [])
        == result
    )


def test_rows_leave_out_failed_modes_and_keep_the_others(harness):
    ok = {"median_step_ms": 4.0, "host_syncs": None}
    ours = {
        "backend": "pointops",
        "ptv2_steps": {"none": ok, "reduce-overhead": {"error": "x", "median_step_ms": None}},
    }
    theirs = {"backend": "pointcept-lib", "ptv2_steps": {"none": {"median_step_ms": 8.0, "host_syncs": None}}}
    rows = harness.step_rows(ours, theirs)
    assert [(r["variant"], r["ratio"]) for r in rows] == [("pointops", 0.5), ("pointcept-lib", 1.0)]


# What allocation_stacks finds for the snapshot below, and what failure_lines reports from.
ALLOCATED_AT = [
    {
        "address": 1_000_512,
        "size": 1024,
        "state": "active_allocated",
        "pool": (0, 0),
        "stream": 0,
        "stack": ["binding/packed.cpp:40 pointops::knn_packed", "/tmp/output_code.py:7 call"],
    },
    {"address": 7_000_000, "in_allocator": False, "stack": []},
]


def test_allocation_stacks_name_the_caller_of_each_storage(harness, monkeypatch):
    """The pool check's addresses are looked up in the allocator's snapshot (a stand-in here: CI
    has no GPU): each found block keeps its Python and pointops frames, an address no block
    starts at is reported as outside the allocator."""
    frames = [
        {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
        {"filename": "binding/packed.cpp", "line": 40, "name": "pointops::knn_packed"},
        {"filename": "/tmp/output_code.py", "line": 7, "name": "call"},
    ]
    snapshot = {
        "segments": [
            {
                "address": 1_000_000,
                "segment_pool_id": (0, 0),
                "stream": 0,
                "blocks": [
                    {"size": 512, "state": "active_allocated", "frames": []},
                    {"size": 1024, "state": "active_allocated", "frames": frames},
                ],
            }
        ]
    }
    monkeypatch.setattr(harness.torch.cuda.memory, "_snapshot", lambda: snapshot)
    error = "These storage data ptrs are not allocated in pool (0, 1) but should be: {1000512, 7000000}."
    assert harness.allocation_stacks(error) == ALLOCATED_AT


def test_failure_lines_report_the_error_then_each_storage(harness):
    entry = {
        "mode": "reduce-overhead",
        "error": "RuntimeError: not allocated in pool",
        "allocated_at": ALLOCATED_AT,
    }
    assert harness.failure_lines("pointops", entry) == [
        "[pointops] ptv2 step (reduce-overhead) failed: RuntimeError: not allocated in pool",
        "  1000512 (1024 bytes, active_allocated, pool (0, 0), stream 0) allocated at:",
        "    binding/packed.cpp:40 pointops::knn_packed",
        "    /tmp/output_code.py:7 call",
        "  7000000: no block of torch's caching allocator starts there",
    ]


@pytest.mark.parametrize(
    ("choice", "mode", "captured"),
    [
        (None, "default", True),
        (None, "reduce-overhead", False),  # CUDA graph trees refuse torch.unique's captured outputs
        (True, "reduce-overhead", True),
        (False, "default", False),
    ],
)
def test_data_dependent_sizes_break_the_graph_under_cuda_graphs_unless_told(harness, choice, mode, captured):
    assert harness.captures_dynamic_outputs(choice, mode) is captured
