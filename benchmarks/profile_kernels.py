"""Per-kernel GPU time of the gather-family ops (forward and deterministic backward) and kNN.

    python benchmarks/profile_kernels.py [--reps 20] [--only three_interpolate] [--plain]

Runs the gather shapes of bench_gpu.py (and its kNN B8 shape) under torch.profiler, in
float32, float16 and bfloat16 (with --packed: bench_packed.py's rows through the Pointcept
API, forward and backward as timed there), and prints, for each op, every
CUDA kernel (and memset) it launched with its mean device time per call, so that a slow
pipeline shows which stage to work on. --plain only runs the ops (for an outside profiler such
as Nsight Compute). Needs a CUDA build of pointops.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _profile(label: str, fn, reps: int, plain: bool) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if plain:
        return
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        us = ev.self_device_time_total / reps
        if us > 0:
            rows.append((us, ev.key))
    total = sum(us for us, _ in rows)
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / reps * 1e6
    print(f"{label}: {total:.1f} us of device time per call, {wall:.1f} us wall (back to back)")
    for us, key in sorted(rows, reverse=True):
        print(f"    {us:8.1f} us  {key[:110]}")


def _profile_case(ops, g, name, shape, weighted, dtype, reps, plain) -> None:
    import torch

    B, C, N, P, T = shape
    feat = (1.0 + torch.rand(B, C, N, generator=g)).to("cuda", dtype)
    idx = torch.randint(0, N, (B, P, T), generator=g).cuda()
    w = torch.rand(B, P, T, generator=g).to("cuda", dtype) if weighted else None
    grad = torch.rand(B, C, P, generator=g).to("cuda", dtype)
    tag = f"{name} B{B} C{C} N{N} P{P} T{T} {str(dtype)[6:]}"
    _profile(tag + " forward", lambda: ops.gather(feat, idx, w), reps, plain)
    _profile(tag + " backward_feat", lambda: ops.gather_backward_feat(grad, idx, w, N), reps, plain)
    if weighted:
        _profile(tag + " backward_weight", lambda: ops.gather_backward_weight(grad, feat, idx), reps, plain)


def _profile_knn(ops, g, dtype, reps, plain) -> None:
    import torch

    B, N, M, K = 8, 16384, 4096, 16
    xyz = (1.0 + torch.rand(B, N, 3, generator=g)).to("cuda", dtype)
    query = xyz[:, :M].contiguous()
    _profile(
        f"knn B{B} N{N} M{M} k{K} {str(dtype)[6:]}", lambda: ops.knn(xyz, query, K, None, None), reps, plain
    )


def _profile_packed(reps: int, plain: bool) -> None:
    """bench_packed.py's scenes and rows (8 scenes of 40k-120k points), as that script calls them."""
    import pointops
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_packed import grouping_steps, scenes

    xyz, offset, new_offset, feat = scenes("cuda")
    idx16, _ = pointops.knn_query(16, xyz, offset)
    grad = torch.rand(idx16.shape[0], 16, 64, device="cuda")
    grouping_fwd_bwd, grouping2_fwd_bwd = grouping_steps(
        pointops, idx16, feat.clone().requires_grad_(), xyz, grad
    )

    _profile("knn_query k16", lambda: pointops.knn_query(16, xyz, offset), reps, plain)
    _profile("ball_query r0.1 k32", lambda: pointops.ball_query(32, 0.1, 0.0, xyz, offset), reps, plain)
    _profile("grouping c64 k16 forward", lambda: pointops.grouping(idx16, feat, xyz), reps, plain)
    _profile("grouping c64 k16 forward+backward", grouping_fwd_bwd, reps, plain)
    _profile("grouping2 c64 k16 forward+backward", grouping2_fwd_bwd, reps, plain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", help="run only the cases whose name starts with this")
    parser.add_argument("--plain", action="store_true", help="run the ops without torch.profiler")
    parser.add_argument("--packed", action="store_true", help="bench_packed.py's rows instead")
    args = parser.parse_args(argv)
    import pointops  # noqa: F401  (registers torch.ops.pointops)
    import torch

    if not torch.cuda.is_available():
        print("profile_kernels: no CUDA device is visible", file=sys.stderr)
        return 2
    if args.packed:
        _profile_packed(args.reps, args.plain)
        return 0
    ops = torch.ops.pointops
    g = torch.Generator(device="cpu").manual_seed(2)
    cases = [
        ("gather_points", 8, 128, 16384, 4096, 1, False),
        ("group_points", 8, 64, 16384, 4096 * 32, 1, False),
        ("three_interpolate", 8, 128, 4096, 16384, 3, True),
        ("gather_points_large_out", 16, 256, 16384, 65536, 1, False),
    ]
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    if not args.only or "knn".startswith(args.only):
        for dtype in dtypes:
            _profile_knn(ops, g, dtype, args.reps, args.plain)
    for name, B, C, N, P, T, weighted in cases:
        if args.only and not name.startswith(args.only):
            continue
        for dtype in dtypes:
            _profile_case(ops, g, name, (B, C, N, P, T), weighted, dtype, args.reps, args.plain)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
