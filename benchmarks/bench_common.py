"""Helpers shared by the benchmark scripts (run as `python benchmarks/<script>.py`, so this
module is importable as a sibling)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time


def write_json(path: str, payload: dict) -> None:
    """Write a results file atomically: an interrupted run never leaves a half-written file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".bench-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def cpu_model() -> str:
    """The host CPU's model name (/proc/cpuinfo), else what platform.processor() says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor()


def import_pointcept_library(lib: str):
    """Pointcept's compiled `pointops` from its pip --target directory `lib`, put first on
    sys.path; exits if the import finds this project's pointops (which has `packed`) instead."""
    import sys

    sys.path.insert(0, os.path.abspath(lib))
    import pointops

    if hasattr(pointops, "packed"):
        raise SystemExit(f"{pointops.__file__} is pointops, not Pointcept's library")
    return pointops


def median_call_ms(fn, device: str, reps: int = 10, warmup: int = 2) -> float:
    """Median ms of single calls of fn: CUDA events around each call on the GPU (the launches'
    host time included, the final sync not), wall time elsewhere."""
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def median_host_us(fn, calls: int, rounds: int, warmup: int = 0, sync=lambda: None) -> float:
    """Median over `rounds` of the host's µs per call of fn, called `calls` times back to back.
    sync() runs before each round and after the last (torch.cuda.synchronize: the GPU's queue
    is empty when a round starts, so a round times the enqueueing of tiny CUDA calls)."""
    for _ in range(warmup):
        fn()
    per_call = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls)
    sync()
    return statistics.median(per_call) * 1e6


def pipelined_call_ms(fn, calls: int = 100, warmup: int = 5) -> float:
    """Mean ms per call of `calls` CUDA calls queued back to back between two events: what a
    training loop sees when the host runs ahead of the GPU (the cost is the larger of a call's
    host time and its device time). For calls too short for median_call_ms, whose single-call
    events also hold the GPU's wake-up from idle."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def gpu_ab_args(doc: str, script: str, reps: int = 50):
    """The arguments of a one-process A/B script on the GPU (--reps, --json), or None after
    saying on stderr that it needs a CUDA GPU (the script then exits 2)."""
    import argparse
    import sys

    import torch

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=reps, help="timed calls per variant")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"{script}: needs a CUDA GPU", file=sys.stderr)
        return None
    return args


def write_ab_json(path: str | None, reps: int, rows: list) -> None:
    """An A/B script's rows with the GPU, torch and the repetitions, when a path is given."""
    import torch

    if path:
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": reps}
        write_json(path, {"meta": meta, "rows": rows})
