"""CPU timings of the core ops at typical shapes: the reference points of docs/ops.md, "CPU timings".

    python benchmarks/bench_cpu_ops.py [--reps 5] [--threads 2] [--json out/bench_cpu_ops.json]
    python benchmarks/update_baseline.py cpu_2core cpu_ops out/bench_cpu_ops.json

Float32 points uniform in the unit cube, torch's thread pool at --threads, each call timed alone
after one warm-up; the best of --reps (the least disturbed run on a shared machine). The second
command records the run as section cpu_ops of benchmarks/baseline_cpu_2core.json and regenerates
the table in docs/ops.md (benchmarks/doc_numbers.py).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

from bench_common import cpu_model, write_json


def _best_ms(fn, reps: int) -> float:
    fn()  # warm-up: the thread pool starts, the kd-tree code is paged in
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def cases(torch, pointops):
    """(op, shape, callable) of every row, inputs made once."""
    gen = torch.Generator().manual_seed(0)

    def cloud(b, n):
        return torch.rand(b, n, 3, generator=gen)

    fps16, fps_1e5, fps_1e6 = cloud(16, 4096), cloud(1, 100_000), cloud(1, 1_000_000)
    xyz, query = cloud(4, 8192), cloud(4, 2048)
    feat = torch.rand(4, 64, 8192, generator=gen)
    idx = torch.randint(0, 8192, (4, 2048, 32), generator=gen)
    grad_feat = feat.clone().requires_grad_(True)

    def group_forward_backward():
        pointops.group_points(grad_feat, idx).sum().backward()

    return [
        (
            "furthest_point_sample",
            "B=16, N=4096, k=1024",
            lambda: pointops.furthest_point_sample(fps16, 1024),
        ),
        (
            "furthest_point_sample",
            "B=1, N=1e5, k=1024",
            lambda: pointops.furthest_point_sample(fps_1e5, 1024),
        ),
        ("furthest_point_sample", "B=1, N=1e6, k=256", lambda: pointops.furthest_point_sample(fps_1e6, 256)),
        ("knn", "B=4, N=8192, M=2048, k=16", lambda: pointops.knn(xyz, query, 16)),
        ("ball_query", "B=4, N=8192, M=2048, r=0.1, k=32", lambda: pointops.ball_query(xyz, query, 0.1, 32)),
        (
            "group_points",
            "C=64, N=8192, idx [4, 2048, 32], forward",
            lambda: pointops.group_points(feat, idx),
        ),
        ("group_points", "C=64, N=8192, idx [4, 2048, 32], forward + backward", group_forward_backward),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed runs per case (best is kept)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.threads < 1:
        parser.error("--reps and --threads must be positive")
    try:
        import pointops
        import torch
    except ImportError as e:
        print(f"bench_cpu_ops: cannot import torch/pointops ({e}); run tests/run.sh first", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows = []
    for op, shape, fn in cases(torch, pointops):
        ms = _best_ms(fn, args.reps)
        rows.append({"op": op, "shape": shape, "ms": round(ms, 2)})
        print(f"{op:22s} {shape:50s} {ms:9.2f} ms", flush=True)
    if args.json:
        write_json(
            args.json,
            {
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": platform.platform(),
                "processor": cpu_model(),
                "cpu_count": os.cpu_count(),
                "load_average_1min": round(load_before, 2) if load_before is not None else None,
                "nice": os.nice(0) if hasattr(os, "nice") else None,  # < 0: run ahead of other jobs
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                "reps": args.reps,
                "rows": rows,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
