"""grid_cluster's CUDA paths against each other, in one process on one GPU: the planner's
default and each path the knobs force (a cooperative grid of a given size, the two kernels). For
each cloud size and path: the median single call (CUDA events, GPU idle before), calls queued
back to back, and calls replayed from a CUDA graph (device time without host time: the kernels'
own cost). Rounds alternate the paths, so drift hits all alike; every path's ids are checked
against the default's first. For A/B work on the kernels (docs/kernels.md, voxel grid ids).

    python benchmarks/bench_grid_paths.py [--sizes 3000 160000 ...] [--rounds 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import median_call_ms, pipelined_call_ms, write_json  # noqa: E402

PATHS = {
    "default": {},
    "cooperative-64": {"GRID_CLUSTER_FUSED_BLOCKS": 64},
    "two-kernels": {"GRID_CLUSTER_TWO_KERNELS": 1},
}


def graph_call_ms(fn, calls: int = 50) -> float:
    """Mean ms per call of `calls` calls captured in one CUDA graph and replayed."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def main() -> int:
    import pointops._tuning
    from pointops.compat import torch_cluster as tc

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=int, default=[3000, 160_000, 262_144, 500_000, 1_000_000])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_grid_paths: needs a CUDA GPU (it times the CUDA kernels' paths)", file=sys.stderr)
        return 2
    rows = []
    print(f"{torch.cuda.get_device_name()}; ms, medians of {args.rounds} rounds")
    print(f"{'points':>9s} {'dtype':8s} {'path':12s} {'single':>8s} {'b2b':>8s} {'graph':>8s}")
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for n in args.sizes:
            g = torch.Generator().manual_seed(n)
            pos = torch.rand(n, 3, generator=g, dtype=torch.float64).to("cuda", dtype)
            size = torch.full((3,), 1 / 50, dtype=dtype, device="cuda")

            def call(pos=pos, size=size):
                return tc.grid_cluster(pos, size)

            expected = call()
            times = {name: {"single": [], "b2b": [], "graph": []} for name in PATHS}
            for _ in range(args.rounds):
                for name, knobs in PATHS.items():
                    with pointops._tuning.override(**knobs):
                        if not torch.equal(call(), expected):
                            raise SystemExit(
                                f"{name} at {n} points ({dtype_name}): ids differ from the default's"
                            )
                        times[name]["single"].append(median_call_ms(call, "cuda", reps=20, warmup=3))
                        times[name]["b2b"].append(pipelined_call_ms(call))
                        times[name]["graph"].append(graph_call_ms(call))
            for name in PATHS:
                row = {"points": n, "dtype": dtype_name, "path": name}
                row.update({k: statistics.median(v) for k, v in times[name].items()})
                rows.append(row)
                print(
                    f"{n:9d} {dtype_name:8s} {name:12s} {row['single']:8.4f} {row['b2b']:8.4f} {row['graph']:8.4f}"
                )
    pointops.check_errors()
    if args.json:
        write_json(args.json, {"device": torch.cuda.get_device_name(), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
