"""pointops.compat.torch_cluster against torch_cluster built from source, in one process (the
names do not collide): fps, knn, radius and grid_cluster at PyG-like shapes, a batch of 16 clouds
of 10k points and one cloud of 1M points (issue 20).

    python benchmarks/bench_torch_cluster.py --torch-cluster-lib .peers/build/torch_cluster \
        --json out/bench_torch_cluster.json
    python benchmarks/update_baseline.py h200 torch_cluster out/bench_torch_cluster.json

The second command records the run as section torch_cluster of benchmarks/baseline_h200.json
(out/ is not tracked; older runs live in git history).

Rows: fps ratio 0.25, at most 2500 picks per cloud (random_start=False; ratio 0.0025 at 1M
points); knn k=16, every point a query; radius r such that about 20 points fall in a ball,
max_num_neighbors=32; grid_cluster voxel 1/50 of the extent. Medians of CUDA-event timings of
single calls (CPU wall time without CUDA); on CUDA, rows whose single calls both take under 1 ms
are also timed pipelined (100 calls queued back to back, the mean per call: what a training step
sees when the host runs ahead), since a single short call mostly measures launch latency.
torch_cluster's knn and radius are brute force (1e12 pairs at 1M points), so the 1M rows take 3
calls after one warm-up, fps there one call (grid_cluster 10 everywhere). Results are
compared where the semantics agree (knn neighbour sets, radius pairs when no ball is capped,
grid ids, fps). The grid rows also time a floor the same way: one torch call that allocates
int64 ids and launches one kernel over pos (`pos[:, 0].to(torch.long)`), about the least any
grid_cluster call through the dispatcher costs. The JSON is rewritten after every row, so a run
cut short keeps what it measured.
Without torch_cluster the comparison column is skipped with a message.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import median_call_ms, pipelined_call_ms, write_json  # noqa: E402

# single calls shorter than this are also timed pipelined
PIPELINED_BELOW_MS = 1.0


def edge_set_equal(a, b) -> bool:
    key = lambda e: (e[0] * (1 << 32) + e[1]).sort().values  # noqa: E731
    return a.shape == b.shape and torch.equal(key(a), key(b))


# fps picks a quarter of each cloud, at most FPS_MAX_PICKS: torch_cluster runs one block per
# cloud, about 1 ms per pick at 1M points, so a quarter of 1M (250k picks) would take minutes.
FPS_MAX_PICKS = 2500


def calls(pos, batch, r, size, n_per_cloud) -> dict:
    ratio = min(0.25, FPS_MAX_PICKS / n_per_cloud)
    return {
        "fps": lambda m: m.fps(pos, batch, ratio, random_start=False),
        "knn": lambda m: m.knn(pos, pos, 16, batch, batch),
        "radius": lambda m: m.radius(pos, pos, r, batch, batch, max_num_neighbors=32),
        "grid": lambda m: m.grid_cluster(pos, size),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torch-cluster-lib", default=".peers/build/torch_cluster")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json")
    p.add_argument("--shapes", nargs="+", default=["16x10000", "1x1000000"])
    p.add_argument("--ops", nargs="+", default=["fps", "knn", "radius", "grid"], help="rows to run")
    args = p.parse_args()
    from pointops.compat import torch_cluster as ours

    theirs = None
    if os.path.isdir(args.torch_cluster_lib):
        sys.path.insert(0, os.path.abspath(args.torch_cluster_lib))
        try:
            import torch_cluster as theirs
        except ImportError as error:  # a build that failed part way
            print(
                f"torch_cluster at {args.torch_cluster_lib} does not import ({error}): its column is skipped"
            )
    else:
        print(f"torch_cluster not found at {args.torch_cluster_lib}: its column is skipped")
    device, rows = args.device, []
    device_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"{'shape':11s} {'op':6s} {'pointops ms':>12s} {'torch_cluster ms':>17s} {'speedup':>8s}  check")
    for shape in args.shapes:
        B, N = (int(v) for v in shape.split("x"))
        g = torch.Generator().manual_seed(0)
        pos = torch.rand(B * N, 3, generator=g).to(device)
        batch = torch.arange(B).repeat_interleave(N).to(device)
        r = (20 * 3 / (4 * 3.14159 * N)) ** (1 / 3)  # ~20 points per ball in a unit cube
        size = torch.full((3,), 1 / 50, device=device)
        for name, call in calls(pos, batch, r, size, N).items():
            if name not in args.ops:
                continue
            if N < 1_000_000 or name == "grid":  # grid: microseconds at any shape
                reps, warmup = (10, 2) if name != "fps" else (3, 2)
            else:
                reps, warmup = (3, 1) if name != "fps" else (1, 0)
            t_ours = median_call_ms(lambda call=call: call(ours), device, reps, warmup)
            t_theirs, check = None, ""
            if theirs is not None:
                t_theirs = median_call_ms(lambda call=call: call(theirs), device, reps, warmup)
                a, b = call(ours), call(theirs)
                if name in ("knn", "radius"):
                    check = "same edges" if edge_set_equal(a, b) else "edges differ"
                else:
                    check = (
                        f"identical {float((a == b).double().mean()) * 100:.3f}%"
                        if a.shape == b.shape
                        else f"shapes {list(a.shape)} vs {list(b.shape)}"
                    )
            # the grid rows' floor: one allocating torch call with one kernel over pos
            floor_call = (lambda column=pos[:, 0]: column.to(torch.long)) if name == "grid" else None
            speed = t_theirs / t_ours if t_theirs else None
            row = {
                "shape": shape,
                "op": name,
                "pointops_ms": t_ours,
                "torch_cluster_ms": t_theirs,
                "speedup": speed,
                "check": check,
            }
            if floor_call is not None:
                row["floor_ms"] = median_call_ms(floor_call, device, reps, warmup)
            if device == "cuda" and max(t_ours, t_theirs or 0.0) < PIPELINED_BELOW_MS:
                row["pointops_pipelined_ms"] = pipelined_call_ms(lambda call=call: call(ours))
                if floor_call is not None:
                    row["floor_pipelined_ms"] = pipelined_call_ms(floor_call)
                if theirs is not None:
                    row["torch_cluster_pipelined_ms"] = pipelined_call_ms(lambda call=call: call(theirs))
                    row["pipelined_speedup"] = (
                        row["torch_cluster_pipelined_ms"] / row["pointops_pipelined_ms"]
                    )
            rows.append(row)
            pipelined = (
                f"  pipelined {row['pointops_pipelined_ms']:.4f} / {row.get('torch_cluster_pipelined_ms', float('nan')):.4f}"
                f" ms = {row.get('pipelined_speedup', float('nan')):.2f}x"
                if "pointops_pipelined_ms" in row
                else ""
            )
            floor = f"  floor {row['floor_ms']:.3f} ms" if "floor_ms" in row else ""
            print(
                f"{shape:11s} {name:6s} {t_ours:12.3f} {t_theirs if t_theirs else float('nan'):17.3f} "
                f"{speed if speed else float('nan'):8.2f}  {check}{pipelined}{floor}",
                flush=True,
            )
            if args.json:
                write_json(args.json, {"device": device_name, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
