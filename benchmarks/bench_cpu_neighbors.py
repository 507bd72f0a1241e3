"""CPU neighbour search and FPS: pointops against the kd-trees a CPU user would pick instead.

    pip install pykdtree scipy fpsample   # not test dependencies: only this benchmark uses them
    python3 benchmarks/bench_cpu_neighbors.py [--reps 5] [--json out/bench_cpu_neighbors.json] [--only knn,ball] [--degenerate]
    python3 benchmarks/update_baseline.py cpu_2core neighbors out/bench_cpu_neighbors.json

The second command records the run as section neighbors of benchmarks/baseline_cpu_2core.json
(a full run, --degenerate included, on the 2-core machine; docs/performance-cpu.md).

Each row of issue 21 is timed in this one process, median of --reps runs after a warm-up:
pointops' CPU kernels on all of torch's threads and on one thread (thread scaling), against
pykdtree (KDTree build + query, its OpenMP queries on all cores) and scipy's cKDTree (build +
query with workers=-1; query_ball_point returns every hit as Python lists, more than the
first-k pointops returns), and FPS against fpsample's samplers. Trees are built inside the timed
region: a CPU user searching a new cloud pays for the build. Data: uniform float32 points in the
unit cube, fixed seed. A missing peer is skipped with a message. For kNN rows the script also
reports the share of queries whose neighbour set equals pykdtree's (ties and float rounding may
differ; pointops' own exactness is covered by tests/ops).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import statistics
import sys
import time

from bench_common import cpu_model, write_json

# (name, kind, B, N points per cloud, M queries per cloud, k, radius)
CASES = [
    ("kNN N=1e5 M=1e4 k=16", "knn", 1, 100_000, 10_000, 16, None),
    ("kNN B8 N16384 M4096 k=16", "knn", 8, 16_384, 4_096, 16, None),
    ("kNN N=1e6 M=1e5 k=16", "knn", 1, 1_000_000, 100_000, 16, None),
    ("ball query B8 N16384 M4096 r=0.05 k=32", "ball", 8, 16_384, 4_096, 32, 0.05),
    ("ball query N=1e5 M=1e4 r=0.02 k=16", "ball", 1, 100_000, 10_000, 16, 0.02),
    ("ball query N=1e6 M=1e5 r=0.02 k=16", "ball", 1, 1_000_000, 100_000, 16, 0.02),
    ("three_nn known 25000 unknown 1e5", "three_nn", 1, 25_000, 100_000, 3, None),
    ("three_nn B8 known 4096 unknown 16384", "three_nn", 8, 4_096, 16_384, 3, None),
]


def _median_ms(fn, reps: int) -> float:
    fn()  # warm-up: thread pools, page faults, caches
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1e3, 2)


# Degenerate clouds (--degenerate): N=1e5 points, M=1e4 queries uniform in the unit cube.
DEGENERATE = [
    "all points equal",
    "points on a line",
    "points on a plane",
    "one far outlier",
    "4 tight clusters",
]


def _degenerate_cloud(kind, np, rng, n):
    if kind == "all points equal":
        return np.full((n, 3), 0.5, dtype=np.float32)
    if kind == "points on a line":
        t = rng.random((n, 1), dtype=np.float32)
        return np.concatenate([t, 1 - t, 0.5 * t], axis=1)
    if kind == "points on a plane":
        return np.concatenate(
            [rng.random((n, 2), dtype=np.float32), np.full((n, 1), 0.5, np.float32)], axis=1
        )
    if kind == "one far outlier":
        pts = rng.random((n, 3), dtype=np.float32)
        pts[n // 2] = 1e6
        return pts
    centres = rng.random((4, 3), dtype=np.float32)
    return centres[rng.integers(0, 4, n)] + 1e-3 * rng.random((n, 3), dtype=np.float32)


def _degenerate_row(kind, op, pts, qs, args, torch, peers):
    k, radius = 16, 0.02
    xyz, query = torch.from_numpy(pts).unsqueeze(0), torch.from_numpy(qs).unsqueeze(0)
    if op == "knn":

        def ours():
            return torch.ops.pointops.knn(xyz, query, k, None, None)
    else:

        def ours():
            return torch.ops.pointops.ball_query(xyz, query, radius, k, None, None, True, False)

    row = {
        "case": f"{'kNN k=16' if op == 'knn' else 'ball r=0.02 k=16'}, {kind}",
        "B": 1,
        "N": len(pts),
        "M": len(qs),
        "k": k,
        "radius": radius if op == "ball" else None,
        "pointops_ms": _median_ms(ours, args.reps),
        "pointops_1thread_ms": _with_threads(torch, 1, lambda: _median_ms(ours, args.reps)),
        "threads": torch.get_num_threads(),
        "peers_ms": {},
    }
    KDTree = peers.get("pykdtree")
    if op == "knn" and KDTree is not None:
        row["peers_ms"]["pykdtree"] = _median_ms(lambda: KDTree(pts).query(qs, k=k), args.reps)
    return row


def _degenerate_rows(args, torch, np, peers):
    rows = []
    for kind in DEGENERATE:
        rng = np.random.default_rng(1)
        pts = _degenerate_cloud(kind, np, rng, 100_000)
        qs = rng.random((10_000, 3), dtype=np.float32)
        rows += [_degenerate_row(kind, op, pts, qs, args, torch, peers) for op in ("knn", "ball")]
    return rows


def _import_peers():
    peers = {}
    try:
        from pykdtree.kdtree import KDTree

        peers["pykdtree"] = KDTree
    except ImportError:
        print(
            "bench_cpu_neighbors: pykdtree not installed, skipped (`pip install pykdtree`)", file=sys.stderr
        )
    try:
        from scipy.spatial import cKDTree

        peers["scipy cKDTree"] = cKDTree
    except ImportError:
        print("bench_cpu_neighbors: scipy not installed, skipped (`pip install scipy`)", file=sys.stderr)
    try:
        import fpsample

        peers["fpsample"] = fpsample
    except ImportError:
        print(
            "bench_cpu_neighbors: fpsample not installed, FPS row skipped (`pip install fpsample`)",
            file=sys.stderr,
        )
    return peers


def _with_threads(torch, threads: int, fn):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return fn()
    finally:
        torch.set_num_threads(previous)


def _neighbour_case(case, args, torch, np, peers):
    name, kind, B, N, M, k, radius = case
    rng = np.random.default_rng(0)
    pts = rng.random((B, N, 3), dtype=np.float32)
    qs = rng.random((B, M, 3), dtype=np.float32)
    xyz, query = torch.from_numpy(pts), torch.from_numpy(qs)
    ops = torch.ops.pointops
    if kind == "ball":

        def ours():
            return ops.ball_query(xyz, query, radius, k, None, None, True, False)
    else:

        def ours():
            return ops.knn(xyz, query, k, None, None)

    all_threads = torch.get_num_threads()
    row = {
        "case": name,
        "B": B,
        "N": N,
        "M": M,
        "k": k,
        "radius": radius,
        "pointops_ms": _median_ms(ours, args.reps),
        "pointops_1thread_ms": _with_threads(torch, 1, lambda: _median_ms(ours, args.reps)),
        "threads": all_threads,
        "peers_ms": {},
    }
    KDTree, cKDTree = peers.get("pykdtree"), peers.get("scipy cKDTree")
    if kind in ("knn", "three_nn") and KDTree is not None:

        def pykd():
            return [KDTree(pts[b]).query(qs[b], k=k) for b in range(B)]

        row["peers_ms"]["pykdtree"] = _median_ms(pykd, args.reps)
        theirs = np.stack([np.sort(i.reshape(M, k), axis=1) for _, i in pykd()])
        mine = np.sort(ours()[1].numpy(), axis=2)
        row["same_neighbours_as_pykdtree"] = round(float((theirs == mine).all(axis=2).mean()), 5)
    if cKDTree is not None:
        if kind == "ball":

            def ckd():
                return [cKDTree(pts[b]).query_ball_point(qs[b], radius, workers=-1) for b in range(B)]
        else:

            def ckd():
                return [cKDTree(pts[b]).query(qs[b], k=k, workers=-1) for b in range(B)]

        row["peers_ms"]["scipy cKDTree"] = _median_ms(ckd, args.reps)
    return row


def _fps_case(args, torch, np, peers):
    fpsample = peers.get("fpsample")
    if fpsample is None:
        return None
    n, k = 100_000, 10_000
    pts = (1.0 + np.random.default_rng(0).random((n, 3))).astype(np.float32)
    xyz = torch.from_numpy(pts).unsqueeze(0)

    def ours():
        return torch.ops.pointops.furthest_point_sample(xyz, k, None, 0)

    row = {
        "case": "FPS N=1e5 K=1e4",
        "B": 1,
        "N": n,
        "M": k,
        "k": k,
        "radius": None,
        "pointops_ms": _median_ms(ours, args.reps),
        "pointops_1thread_ms": _with_threads(torch, 1, lambda: _median_ms(ours, args.reps)),
        "threads": torch.get_num_threads(),
        "peers_ms": {},
    }
    samplers = {
        "fpsample fps_sampling": lambda: fpsample.fps_sampling(pts, k, start_idx=0),
        "fpsample bucket kdline(h=7)": lambda: fpsample.bucket_fps_kdline_sampling(pts, k, h=7, start_idx=0),
        "fpsample bucket kdtree": lambda: fpsample.bucket_fps_kdtree_sampling(pts, k, start_idx=0),
    }
    for name, fn in samplers.items():
        row["peers_ms"][name] = _median_ms(fn, args.reps)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed runs per entry (median)")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--only", default="knn,ball,three_nn,fps", help="comma-separated subset of: knn, ball, three_nn, fps"
    )
    parser.add_argument(
        "--degenerate",
        action="store_true",
        help="also time degenerate clouds (equal points, line, plane, outlier, clusters)",
    )
    args = parser.parse_args(argv)
    if args.reps <= 0:
        parser.error("--reps must be positive")
    wanted = set(args.only.split(","))
    unknown = wanted - {"knn", "ball", "three_nn", "fps"}
    if unknown:
        parser.error(f"--only: unknown {sorted(unknown)}; use knn, ball, three_nn, fps")
    try:
        import numpy as np
        import pointops  # noqa: F401  (registers torch.ops.pointops)
        import torch
    except ImportError as e:
        print(
            f"bench_cpu_neighbors: cannot import numpy/torch/pointops ({e}); run tests/run.sh first",
            file=sys.stderr,
        )
        return 2
    peers = _import_peers()

    rows = [_neighbour_case(case, args, torch, np, peers) for case in CASES if case[1] in wanted]
    if "fps" in wanted:
        fps_row = _fps_case(args, torch, np, peers)
        if fps_row is not None:
            rows.append(fps_row)
    if args.degenerate:
        rows += _degenerate_rows(args, torch, np, peers)

    print(f"{'case':44s} {'pointops':>10s} {'1 thread':>10s} {'scaling':>8s}   peers (ms)   pointops/best")
    for r in rows:
        best = min(r["peers_ms"].items(), key=lambda kv: kv[1]) if r["peers_ms"] else None
        r["best_peer"] = best[0] if best else None
        r["ratio_to_best_peer"] = round(r["pointops_ms"] / best[1], 3) if best else None
        r["thread_scaling"] = round(r["pointops_1thread_ms"] / r["pointops_ms"], 2)
        peers_text = ", ".join(f"{name} {ms:.1f}" for name, ms in r["peers_ms"].items()) or "-"
        ratio = (
            f"{r['ratio_to_best_peer']:.2f}x ({'PASS' if r['ratio_to_best_peer'] <= 1 else 'MISS'})"
            if best
            else "-"
        )
        print(
            f"{r['case']:44s} {r['pointops_ms']:10.1f} {r['pointops_1thread_ms']:10.1f} "
            f"{r['thread_scaling']:7.2f}x   {peers_text}   {ratio}"
        )
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(
        f"{torch.get_num_threads()} torch threads, {os.cpu_count()} cores, load average "
        f"{'n/a' if load is None else f'{load[0]:.1f}'}; times include the peers' tree builds"
    )
    if args.json:
        versions = {}
        for package in ("pykdtree", "scipy", "fpsample"):
            try:
                versions[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                versions[package] = None
        write_json(
            args.json,
            {
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": platform.platform(),
                "processor": cpu_model(),
                "cpu_count": os.cpu_count(),
                "load_average_1min": None if load is None else round(load[0], 2),
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                "peer_versions": versions,
                "reps": args.reps,
                "rows": rows,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
