"""CPU farthest point sampling: pointops against fpsample, side by side in one run.

    pip install fpsample   # not a test dependency: only this benchmark uses it
    python benchmarks/bench_cpu_fps.py [--n 100000] [--k 10000] [--json out/bench_cpu_fps.json]
    python benchmarks/update_baseline.py cpu_2core cpu_fps out/bench_cpu_fps.json

The second command records the run as section cpu_fps of benchmarks/baseline_cpu_2core.json
(bench_cpu_neighbors.py's section neighbors already holds the default case against fpsample).

Times pointops' CPU kernel (all of torch's threads; its default kd-tree sampler, and the
brute-force scan forced with POINTOPS_CPU_FPS_PATH=brute) and fpsample's samplers (exact
fps_sampling and the bucket-based kdline/kdtree variants) on one uniform cloud in [1, 2]^3,
start index 0, median of --reps runs, and reports how many samples agree with pointops'.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

from bench_common import write_json


def _median_s(fn, reps: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="points in the cloud")
    parser.add_argument("--k", type=int, default=10_000, help="samples to draw")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per sampler (median)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    if args.n <= 0 or args.k <= 0 or args.k > args.n or args.reps <= 0:
        parser.error("need 0 < k <= n and reps > 0")

    try:
        import numpy as np
        import pointops  # noqa: F401  (registers torch.ops.pointops)
        import torch
    except ImportError as e:
        print(
            f"bench_cpu_fps: cannot import numpy/torch/pointops ({e}); run tests/run.sh first",
            file=sys.stderr,
        )
        return 2
    try:
        import fpsample
    except ImportError:
        print(
            "bench_cpu_fps: fpsample is not installed; `pip install fpsample` (benchmark only)",
            file=sys.stderr,
        )
        return 2

    rng = np.random.default_rng(0)
    pts = (1.0 + rng.random((args.n, 3))).astype(np.float32)
    xyz = torch.from_numpy(pts).unsqueeze(0)
    ops = torch.ops.pointops

    def ours(path):
        def sample():
            with pointops._tuning.override(CPU_FPS_PATH=path):
                return ops.furthest_point_sample(xyz, args.k, None, 0)[0].numpy()

        return sample

    samplers = {
        "pointops (cpu)": ours("auto"),
        "pointops (cpu, brute-force scan)": ours("brute"),
        "fpsample.fps_sampling": lambda: fpsample.fps_sampling(pts, args.k, start_idx=0),
        "fpsample.bucket_fps_kdline_sampling(h=7)": lambda: fpsample.bucket_fps_kdline_sampling(
            pts, args.k, h=7, start_idx=0
        ),
        "fpsample.bucket_fps_kdtree_sampling": lambda: fpsample.bucket_fps_kdtree_sampling(
            pts, args.k, start_idx=0
        ),
    }
    ours("auto")()  # warm-up (thread pool start)
    rows, reference = [], None
    for name, fn in samplers.items():
        seconds, result = _median_s(fn, args.reps)
        result = np.asarray(result, dtype=np.int64)
        if reference is None:
            reference = result
        same = len(np.intersect1d(result, reference)) / len(reference)
        rows.append({"sampler": name, "ms": round(seconds * 1e3, 2), "same_set_as_pointops": same})
    fpsample_rows = [r for r in rows if r["sampler"].startswith("fpsample")]
    best_fpsample = min(r["ms"] for r in fpsample_rows)
    exact_fpsample = next(r["ms"] for r in fpsample_rows if r["sampler"] == "fpsample.fps_sampling")
    ratio = rows[0]["ms"] / best_fpsample
    ratio_exact = rows[0]["ms"] / exact_fpsample
    for r in rows:
        print(
            f"{r['sampler']:44s} {r['ms']:10.1f} ms   same samples as pointops: "
            f"{100 * r['same_set_as_pointops']:.1f}%"
        )
    print(
        f"pointops / fastest fpsample = {ratio:.2f} (target <= 2.0: {'PASS' if ratio <= 2 else 'MISS'}); "
        f"pointops / fpsample exact = {ratio_exact:.3f}; "
        f"{torch.get_num_threads()} torch threads, {os.cpu_count()} cores"
    )
    if args.json:
        write_json(
            args.json,
            {
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": platform.platform(),
                "cpu_count": os.cpu_count(),
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                "fpsample": getattr(fpsample, "__version__", "unknown"),
                "n": args.n,
                "k": args.k,
                "reps": args.reps,
                "rows": rows,
                "ratio_to_fastest_fpsample": round(ratio, 3),
                "ratio_to_exact_fpsample": round(ratio_exact, 4),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
