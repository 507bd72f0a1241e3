"""Ball query's scanning path: a thread per query against a group of lanes per query
(docs/kernels.md, POINTOPS_BALL_QUERY_LANES), in one process on the same inputs, at PointNet++'s
set-abstraction shapes (points in the unit ball, queries a subset of them, as after FPS) and
bench_gpu's B16 N4096 M1024. Each row: the median device time of one call per lane count; the
outputs of every count must equal the single thread's, or the row says which differ.

    python benchmarks/bench_ball_query_lanes.py [--reps 50] [--json OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pointops
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import gpu_ab_args, median_call_ms, write_ab_json  # noqa: E402

# (B, N, M, radius, k): PointNet++ SSG's two levels at 1024 points, MSG's widest ball, the bench row
SHAPES = [
    (16, 1024, 512, 0.2, 64),
    (16, 512, 128, 0.4, 64),
    (16, 1024, 512, 0.4, 128),
    (16, 4096, 1024, 0.2, 32),
]
LANES = [1, 2, 4, 8, 16, 32, None]  # None: the planner's count


def cloud_and_queries(
    B: int, N: int, M: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """B clouds of N points uniform in the unit ball, and M of each cloud's points as its
    queries (as after FPS), both on the GPU."""
    direction = torch.randn(B, N, 3, generator=generator)
    direction = direction / direction.norm(dim=-1, keepdim=True)
    xyz = (direction * torch.rand(B, N, 1, generator=generator) ** (1 / 3)).cuda()
    return xyz, xyz[:, torch.randperm(N, generator=generator)[:M]].contiguous()


def main() -> int:
    args = gpu_ab_args(__doc__, "bench_ball_query_lanes")
    if args is None:
        return 2
    g = torch.Generator().manual_seed(0)
    rows = []
    for B, N, M, radius, k in SHAPES:
        xyz, query = cloud_and_queries(B, N, M, g)
        row = {"shape": f"B{B} N{N} M{M} r{radius} k{k}", "ms": {}, "differs": []}
        reference = None

        def call(xyz=xyz, query=query, radius=radius, k=k):
            return pointops.ball_query(xyz, query, radius, k)

        for lanes in LANES:
            with pointops._tuning.override(BALL_QUERY_LANES=lanes):
                out = call()
                row["ms"][str(lanes or "planner")] = median_call_ms(call, "cuda", args.reps, 1)
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
    write_ab_json(args.json, args.reps, rows)
    return 0 if all(not row["differs"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
