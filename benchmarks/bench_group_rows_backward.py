"""The grouping backward of PointNet++'s set abstraction (the channels-last QueryAndGroup of
pointops' pointnet2_ops drop-in: one row gather, so its backward is gather_rows_backward_feat
over B * M * K entries of one row each) with its two row builders side by side, in one process
on the same inputs: the radix sort (the planner's choice below 2^31 entries) and the counting
sort (POINTOPS_GATHER_ROWS_COUNTED=1). The indices come from the drop-in's own ball query on
points in the unit ball, queries a subset of them as after FPS. Each row: the median device
time of one call per builder; the gradients must be bit-identical (both sum each row in
ascending entry order), or the row says they differ.

    python benchmarks/bench_group_rows_backward.py [--reps 50] [--json OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pointops
import torch
from pointops.compat import pointnet2_utils

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ball_query_lanes import cloud_and_queries  # noqa: E402
from bench_common import gpu_ab_args, median_call_ms, write_ab_json  # noqa: E402

# (B, N, M, radius, K, C): cls-ssg's second level (3 + 128 channels), cls-msg's widest ball of
# its second level (3 + 320 channels), bench_peer_ops' group_points shape
SHAPES = [
    (16, 512, 128, 0.4, 64, 131),
    (16, 512, 128, 0.8, 128, 323),
    (8, 16384, 4096, 0.1, 32, 64),
]
BUILDERS = {"radix": None, "counting": 1}  # POINTOPS_GATHER_ROWS_COUNTED


def main() -> int:
    args = gpu_ab_args(__doc__, "bench_group_rows_backward")
    if args is None:
        return 2
    g = torch.Generator().manual_seed(0)
    rows = []
    for B, N, M, radius, K, C in SHAPES:
        xyz, query = cloud_and_queries(B, N, M, g)
        idx = pointnet2_utils.ball_query(radius, K, xyz, query).long()
        entries = (idx + torch.arange(0, B * N, N, device="cuda").view(B, 1, 1)).reshape(-1, 1)
        grad = torch.rand(entries.shape[0], C, generator=g).cuda()

        def call(entries=entries, grad=grad, rows=B * N):
            return torch.ops.pointops.gather_rows_backward_feat(grad, entries, None, rows)

        row = {"shape": f"B{B} N{N} M{M} r{radius} K{K} C{C}", "ms": {}}
        outs = {}
        for name, value in BUILDERS.items():
            with pointops._tuning.override(GATHER_ROWS_COUNTED=value):
                outs[name] = call()
                row["ms"][name] = median_call_ms(call, "cuda", args.reps, 3)
        row["identical"] = torch.equal(outs["radix"], outs["counting"])
        rows.append(row)
        times = "  ".join(f"{name} {ms:.4f}" for name, ms in row["ms"].items())
        check = "identical" if row["identical"] else "DIFFER"
        print(f"{row['shape']:<36} ms: {times}  {check}", flush=True)
    write_ab_json(args.json, args.reps, rows)
    return 0 if all(row["identical"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
