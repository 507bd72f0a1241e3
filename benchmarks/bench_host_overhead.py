"""Host overhead per call of the pointops layers, with tiny inputs, on CPU or on a GPU.

    python benchmarks/bench_host_overhead.py [--calls 2000] [--reps 15] [--json out/bench_host_overhead.json]
    python benchmarks/update_baseline.py cpu_2core host_overhead out/bench_host_overhead.json
    python benchmarks/bench_host_overhead.py --device cuda --json out/bench_host_overhead_cuda.json

The second command records the run as section host_overhead of benchmarks/baseline_cpu_2core.json
(docs/performance-cpu.md). With --device cuda the time per call is the host's time to enqueue it
(the GPU is synchronized before and after each repetition only, and keeps up with tiny kernels):
what a call costs back to back where the host is the bound. Beside the ops, the floor rows time
what any op pays (torch.empty, torch.zeros, and cuda_runtime_version, an op of ours that does
nothing: the dispatcher's round trip), and the backward rows a gather's feature gradient (the raw
op, and torch.autograd.grad through the API, as a training step's backward calls it).

With tiny tensors the kernels do next to no work, so the time per call is the host path: the
dispatcher, the autograd wrapper, the Python checks and the binding's checks and allocations.
Each layer is timed as `calls` back-to-back calls, `reps` times; the median per-call time is
reported in microseconds. Layers: the raw torch.ops.pointops op without and with an input that
requires grad, the Python API (value checks on and off, and with an input that requires grad)
and the pointnet2-compatible API (torch_cluster's for grid_cluster); gather_points also times
the peer its one-call row is judged against (torch.gather, indices expanded beforehand).
ball_query returns squared distances (return_dist2=True) in the raw and native rows, so the rows
with requires_grad build a graph; the compat row returns indices.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys

from bench_common import median_host_us, write_json


def _cases(torch, pointops, compat, device: str = "cpu"):
    """(op name, layer name, zero-argument callable) for every measured combination."""
    ops = torch.ops.pointops
    g = torch.Generator().manual_seed(0)
    B, N, M, K, C = 1, 16, 8, 4, 4

    def on(t):
        return t.to(device)

    xyz = on(torch.rand(B, N, 3, generator=g))
    query = on(torch.rand(B, M, 3, generator=g))
    feat = on(torch.rand(B, C, N, generator=g))
    idx2 = on(torch.randint(0, N, (B, M), generator=g))
    idx3 = on(torch.randint(0, N, (B, M, K), generator=g))
    idx2_i32, idx3_i32 = idx2.int(), idx3.int()
    xyz_g = xyz.clone().requires_grad_(True)
    feat_g = feat.clone().requires_grad_(True)
    idx2_col = idx2.unsqueeze(-1)
    idx2_expanded = idx2.unsqueeze(1).expand(B, C, M)  # the peer's form (bench_gpu.py's one-call row)
    idx3_flat = idx3.reshape(B, M * K, 1)
    size = on(torch.full((3,), 0.25))
    # three_interpolate: M points from the N known ones, 3 weights each
    idx_nn = idx3[..., :3].contiguous()
    idx_nn_i32 = idx_nn.int()
    weight = on(torch.rand(B, M, 3, generator=g))
    grad_interp = on(torch.rand(B, C, M, generator=g))
    interp = pointops.three_interpolate(feat_g, idx_nn, weight)
    from pointops.compat import torch_cluster as cluster

    def interp_backward():
        return torch.autograd.grad(interp, feat_g, grad_interp, retain_graph=True)

    return [
        ("floor", "torch.empty", lambda: torch.empty(B, C, N, device=device)),
        ("floor", "torch.zeros", lambda: torch.zeros(B, C, N, device=device)),
        ("floor", "raw op, does nothing", lambda: ops.cuda_runtime_version()),
        ("three_interpolate", "raw op", lambda: ops.gather(feat, idx_nn, weight)),
        ("three_interpolate", "Python API", lambda: pointops.three_interpolate(feat, idx_nn, weight)),
        (
            "three_interpolate",
            "compat API (int32 idx)",
            lambda: compat.three_interpolate(feat, idx_nn_i32, weight),
        ),
        (
            "three_interpolate backward",
            "raw op",
            lambda: ops.gather_backward_feat(grad_interp, idx_nn, weight, N),
        ),
        ("three_interpolate backward", "autograd.grad", interp_backward),
        ("gather_points", "torch.gather (the peer)", lambda: torch.gather(feat, 2, idx2_expanded)),
        ("gather_points", "raw op", lambda: ops.gather(feat, idx2_col, None)),
        ("gather_points", "raw op, requires_grad", lambda: ops.gather(feat_g, idx2_col, None)),
        ("gather_points", "Python API", lambda: pointops.gather_points(feat, idx2)),
        ("gather_points", "Python API, requires_grad", lambda: pointops.gather_points(feat_g, idx2)),
        ("gather_points", "compat API (int32 idx)", lambda: compat.gather_operation(feat, idx2_i32)),
        ("group_points", "raw op", lambda: ops.gather(feat, idx3_flat, None)),
        ("group_points", "raw op, requires_grad", lambda: ops.gather(feat_g, idx3_flat, None)),
        ("group_points", "Python API", lambda: pointops.group_points(feat, idx3)),
        ("group_points", "Python API, requires_grad", lambda: pointops.group_points(feat_g, idx3)),
        ("group_points", "compat API (int32 idx)", lambda: compat.grouping_operation(feat, idx3_i32)),
        ("knn", "raw op", lambda: ops.knn(xyz, query, K, None, None)),
        ("knn", "raw op, requires_grad", lambda: ops.knn(xyz_g, query, K, None, None)),
        ("knn", "Python API", lambda: pointops.knn(xyz, query, K)),
        ("knn", "Python API, requires_grad", lambda: pointops.knn(xyz_g, query, K)),
        ("knn", "compat API (three_nn)", lambda: compat.three_nn(query, xyz)),
        ("ball_query", "raw op", lambda: ops.ball_query(xyz, query, 0.3, K, None, None, True, True)),
        (
            "ball_query",
            "raw op, requires_grad",
            lambda: ops.ball_query(xyz_g, query, 0.3, K, None, None, True, True),
        ),
        ("ball_query", "Python API", lambda: pointops.ball_query(xyz, query, 0.3, K, return_dist2=True)),
        (
            "ball_query",
            "Python API, requires_grad",
            lambda: pointops.ball_query(xyz_g, query, 0.3, K, return_dist2=True),
        ),
        ("ball_query", "compat API", lambda: compat.ball_query(0.3, K, xyz, query)),
        ("furthest_point_sample", "raw op", lambda: ops.furthest_point_sample(xyz, M, None, 0)),
        ("furthest_point_sample", "Python API", lambda: pointops.furthest_point_sample(xyz, M)),
        ("furthest_point_sample", "compat API", lambda: compat.furthest_point_sample(xyz, M)),
        ("grid_cluster", "raw op", lambda: ops.grid_cluster(xyz[0], size, None, None)),
        ("grid_cluster", "torch_cluster API", lambda: cluster.grid_cluster(xyz[0], size)),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed repetition")
    parser.add_argument("--reps", type=int, default=15, help="timed repetitions (median)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1 keeps thread-pool wake-ups out)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the inputs live")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    if args.calls <= 0 or args.reps <= 0 or args.threads <= 0:
        parser.error("calls, reps and threads must be > 0")

    try:
        import pointops
        import torch
        from pointops.compat import pointnet2_utils as compat
    except ImportError as e:
        print(
            f"bench_host_overhead: cannot import torch/pointops ({e}); run tests/run.sh first",
            file=sys.stderr,
        )
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_host_overhead: needs a CUDA GPU for --device cuda (none is visible)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    has_switch = hasattr(pointops, "value_checks")
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    warmup = min(args.calls, 200)  # caches, dispatcher, allocator

    rows = []
    for op, layer, fn in _cases(torch, pointops, compat, args.device):
        rows.append({"op": op, "layer": layer, "us": median_host_us(fn, args.calls, args.reps, warmup, sync)})
        if layer == "Python API" and has_switch:
            with pointops.value_checks(False):
                us = median_host_us(fn, args.calls, args.reps, warmup, sync)
            rows.append({"op": op, "layer": "Python API, value checks off", "us": us})

    print(f"{'op':<28} {'layer':<30} {'us/call':>8}")
    for r in rows:
        print(f"{r['op']:<28} {r['layer']:<30} {r['us']:8.1f}")
    if args.json:
        write_json(
            args.json,
            {
                "benchmark": "bench_host_overhead",
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "host": platform.node(),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "threads": args.threads,
                "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                "calls": args.calls,
                "reps": args.reps,
                "results": rows,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
