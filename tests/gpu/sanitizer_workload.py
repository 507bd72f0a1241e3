"""Calls every pointops CUDA kernel (forward and backward, edge cases, every dtype) on small
inputs, for compute-sanitizer memcheck/racecheck. Exits non-zero if an op raises.

The kernels pick a path by size (scan vs spatial grid from 8192 points, one block / cluster /
grid FPS); the 20000- and 300000-point cases reach the larger paths, and the device script runs
this file a second time with POINTOPS_GRID_MIN_POINTS=64 POINTOPS_FPS_NO_CLUSTER=1 so small
clouds take the grid and non-cluster paths too. SANITIZER_WORKLOAD_LARGE=0 leaves the large
clouds out (racecheck, which is much slower, runs the small-cloud pass that way)."""

import os

import pointops
import pointops._tuning
import torch

# cpu: a quick dry run of the same calls where there is no GPU
DEVICE = os.environ.get("SANITIZER_WORKLOAD_DEVICE", "cuda")
LARGE = os.environ.get("SANITIZER_WORKLOAD_LARGE", "1") != "0"


def run(dtype):
    dev = DEVICE
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 300, 50, 8), (1, 1, 3, 4), (3, 0, 2, 2), (2, 3000, 20, 40)] + (
        [(2, 20000, 64, 16)] if LARGE else []
    )
    for B, N, M, k in shapes:
        xyz = torch.rand(B, N, 3, generator=g).to(dev, dtype)
        q = torch.rand(B, M, 3, generator=g).to(dev, dtype)
        lengths = torch.tensor([N] + [N // 2] * (B - 1), device=dev) if B > 1 else None
        pointops.furthest_point_sample(xyz, k, lengths=lengths, start=1)
        pointops.ball_query(xyz, q, 0.2, k, lengths=lengths, return_dist2=True)
        torch.ops.pointops.ball_query(xyz, q, 0.2, k, lengths, None, False, False)
        xr = xyz.clone().requires_grad_()
        qr = q.clone().requires_grad_()
        d2, idx = pointops.knn(xr, qr, k, lengths=lengths)
        if N:
            torch.where(torch.isinf(d2), 0, d2).sum().backward()
        d2, nn = pointops.three_nn(q, xyz)
        C = 5
        feat = torch.randn(B, C, N, generator=g).to(dev, dtype).requires_grad_()
        w = torch.rand(B, M, 3, generator=g).to(dev, dtype).requires_grad_()
        out = pointops.three_interpolate(feat, nn, w)
        out.float().sum().backward()
        ball, _ = pointops.ball_query(xyz, q, 0.3, k)
        pointops.group_points(feat, ball).float().sum().backward()
        pointops.gather_points(feat, pointops.furthest_point_sample(xyz, k)).float().sum().backward()
    if dtype != torch.float64 and LARGE:
        big = torch.rand(1, 300_000, 3, generator=g).to(dev, dtype)
        pointops.furthest_point_sample(big, 8)
    run_packed(dtype, g)
    if dtype in (torch.float32, torch.float64):
        run_grid(dtype, g)
    run_bad_values(dtype)
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def run_packed(dtype, g):
    """The packed ops: a few clouds of uneven size (one empty), the grid path and FPS plans."""
    from pointops import packed

    dev = DEVICE
    counts = torch.tensor([900, 0, 12000 if LARGE else 1200, 5, 3000], device=dev)
    ptr = packed.ptr_from_counts(counts)
    xyz = torch.rand(int(counts.sum()), 3, generator=g).to(dev, dtype).requires_grad_()
    query_ptr = packed.ptr_from_counts(torch.tensor([40, 3, 100, 0, 30], device=dev))
    query = torch.rand(173, 3, generator=g).to(dev, dtype).requires_grad_()
    d2, idx = packed.knn(xyz, ptr, query, query_ptr, 16)
    _, _, bd2 = packed.ball_query(xyz, ptr, query, query_ptr, 0.1, 32, return_dist2=True)
    packed.ball_query(xyz, ptr, query, query_ptr, 0.1, 8, inclusive=False)
    (torch.where(torch.isinf(d2), 0, d2).sum() + torch.where(torch.isinf(bd2), 0, bd2).sum()).backward()
    samples = torch.tensor([100, 4, 3000 if LARGE else 300, 9, 750], device=dev)
    sample_ptr = packed.ptr_from_counts(samples)
    total = int(samples.sum())
    packed.furthest_point_sample(
        xyz.detach(), ptr, sample_ptr, num_samples=total, max_points=int(counts.max())
    )
    packed.furthest_point_sample(xyz.detach(), ptr, sample_ptr, num_samples=total)
    feat = torch.randn(xyz.shape[0], 24, generator=g).to(dev, dtype).requires_grad_()
    w = torch.rand(173, 16, generator=g).to(dev, dtype).requires_grad_()
    (packed.interpolate(feat, idx, w).float().sum() + packed.gather(feat, idx).float().sum()).backward()


def run_grid(dtype, g):
    """grid_cluster: bounds partials in a workspace (tiny or wide clouds) and in the ids."""
    dev = DEVICE
    for n, dim in [(2, 3), (9, 40), (3000, 3), (3000, 6)] + ([(200_000, 3)] if LARGE else []):
        pos = torch.rand(n, dim, generator=g).to(dev, dtype)
        # 21 cells a dimension, or 2 where 21**dim would pass the int64 ids (a refused grid)
        size = torch.full((dim,), 0.05 if dim <= 6 else 0.6, dtype=dtype, device=dev)
        torch.ops.pointops.grid_cluster(pos, size, None, None)
        torch.ops.pointops.grid_cluster(pos, size, pos.min(0)[0], None)
        torch.ops.pointops.grid_cluster(pos, size, pos.min(0)[0], pos.max(0)[0])
        if dev == "cuda" and n >= 3000:  # a cooperative grid whose partials span several blocks' rows
            with pointops._tuning.override(GRID_CLUSTER_FUSED_BLOCKS=400):
                torch.ops.pointops.grid_cluster(pos, size, None, None)


def run_bad_values(dtype):
    """Bad values: the check kernel records each and the poison kernel overwrites the outputs.
    Each is raised by the next pointops call, so check_errors() collects it before the next."""
    xyz = torch.rand(2, 500, 3, device=DEVICE).to(dtype)
    xyz[1, 7, 2] = float("nan")
    _expect_value_error(lambda: pointops.knn(xyz, xyz[:, :50], 8))
    feat = torch.rand(2, 4, 500, device=DEVICE).to(dtype)
    _expect_value_error(lambda: pointops.gather_points(feat, torch.full((2, 9), 600, device=DEVICE)))


def _expect_value_error(call):
    try:
        call()  # CPU raises here; CUDA records the problem and returns
        pointops.check_errors()  # CUDA raises here
    except ValueError:
        return
    raise SystemExit("the value checks did not report a bad value")


if __name__ == "__main__":
    dtypes = (
        (torch.float32, torch.float16, torch.bfloat16, torch.float64)
        if DEVICE == "cuda"
        else (torch.float32, torch.float64)
    )
    for dtype in dtypes:
        run(dtype)
    print("sanitizer workload: all ops ran")
