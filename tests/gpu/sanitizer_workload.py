"""Calls every pointops CUDA kernel (forward and backward, edge cases, every dtype) on small
inputs, for compute-sanitizer memcheck/racecheck. Exits non-zero if an op raises.

The kernels pick a path by size (scan vs spatial grid from 8192 points, one block / cluster /
grid FPS); the 20000- and 300000-point cases reach the larger paths, and the device script runs
this file a second time with POINTOPS_GRID_MIN_POINTS=64 POINTOPS_FPS_NO_CLUSTER=1 so small
clouds take the grid and non-cluster paths too."""

import pointops
import torch


def run(dtype):
    dev = "cuda"
    g = torch.Generator().manual_seed(0)
    for B, N, M, k in [(2, 300, 50, 8), (1, 1, 3, 4), (3, 0, 2, 2), (2, 3000, 20, 40), (2, 20000, 64, 16)]:
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
    if dtype != torch.float64:
        big = torch.rand(1, 300_000, 3, generator=g).to(dev, dtype)
        pointops.furthest_point_sample(big, 8)
    torch.cuda.synchronize()


if __name__ == "__main__":
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        run(dtype)
    print("sanitizer workload: all ops ran")
