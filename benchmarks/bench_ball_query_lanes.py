"""Ball query's scanning path: a thread per query against a group of lanes per query
(docs/kernels.md, POINTOPS_BALL_QUERY_LANES), in one process on the same inputs, at PointNet++'s
set-abstraction shapes (points in the unit ball, queries a subset of them, as after FPS) and
bench_gpu's B16 N4096 M1024. Each row: the median device time of one call per lane count; the
outputs of every count must equal the single thread's, or the row says which differ.

    python benchmarks/bench_ball_query_lanes.py [--reps 50] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import pointops
import torch

# (B, N, M, radius, k): PointNet++ SSG's two levels at 1024 points, MSG's widest ball, the bench row
SHAPES = [
    (16, 1024, 512, 0.2, 64),
    (16, 512, 128, 0.4, 64),
    (16, 1024, 512, 0.4, 128),
    (16, 4096, 1024, 0.2, 32),
]
LANES = [1, 2, 4, 8, 16, 32, None]  # None: the planner's count


def unit_ball(B: int, N: int, generator: torch.Generator) -> torch.Tensor:
    direction = torch.randn(B, N, 3, generator=generator)
    direction = direction / direction.norm(dim=-1, keepdim=True)
    return direction * torch.rand(B, N, 1, generator=generator) ** (1 / 3)


def median_ms(args: tuple, reps: int) -> float:
    """Median device time of pointops.ball_query(*args), one call at a time."""

    def call():
        return pointops.ball_query(*args)

    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_ball_query_lanes: needs a CUDA GPU", file=sys.stderr)
        return 2
    g = torch.Generator().manual_seed(0)
    rows = []
    for B, N, M, radius, k in SHAPES:
        xyz = unit_ball(B, N, g).cuda()
        query = xyz[:, torch.randperm(N, generator=g)[:M]].contiguous()
        row = {"shape": f"B{B} N{N} M{M} r{radius} k{k}", "ms": {}, "differs": []}
        reference = None
        for lanes in LANES:
            with pointops._tuning.override(BALL_QUERY_LANES=lanes):
                out = pointops.ball_query(xyz, query, radius, k)
                row["ms"][str(lanes or "planner")] = median_ms((xyz, query, radius, k), args.reps)
            if reference is None:
                reference = out
            elif not all(torch.equal(a, b) for a, b in zip(out, reference, strict=True)):
                row["differs"].append(str(lanes or "planner"))
        one, chosen = row["ms"]["1"], row["ms"]["planner"]
        row["planner_vs_one_thread"] = chosen / one
        rows.append(row)
        times = "  ".join(f"{name} {ms:.4f}" for name, ms in row["ms"].items())
        check = "identical" if not row["differs"] else f"DIFFER: {row['differs']}"
        print(f"{row['shape']:<30} ms by lanes: {times}  planner/1 {chosen / one:.2f}  {check}", flush=True)
    if args.json:
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": args.reps}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0 if all(not row["differs"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
