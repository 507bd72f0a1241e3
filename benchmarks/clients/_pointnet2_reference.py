"""pointnet2_ops.pointnet2_utils' behaviour in plain torch: the oracle of the pointnet2_training
harness, and a backend of its own (`torch`, `torch-fma`, `float64`) that runs on any device.

Written from pointnet2_ops' documented conventions and kernels' observable behaviour:
- furthest_point_sample starts at point 0 and never picks a point with |p|^2 <= 1e-3; the next
  pick is the first point of largest distance to the picked set.
- ball_query keeps the first nsample points (in index order) with d^2 < radius^2 (radius^2
  rounded in float32 when the input is float32), pads a short ball with its first hit and
  gives an empty ball index 0.
- three_nn: the 3 smallest d^2, ties to the lower index, Euclidean distances (the square root
  of d^2), no gradient; missing slots (fewer than 3 known points) give index 0, distance inf.
- three_interpolate: sum_j w_j f[idx_j]; its weight gradient is zero.
- int32 indices everywhere.

d^2 is (ux - x)^2 + (uy - y)^2 + (uz - z)^2 evaluated left to right in the input's dtype. With
EMULATE_FMA set (the `torch-fma` backend), the float32 sums of the distance and of
three_interpolate are rounded as nvcc's default contraction computes them in pointnet2_ops'
kernels: d^2 = fma(dz, dz, fma(dy, dy, dx * dx)), out = fma(f3, w3, fma(f2, w2, f1 * w1)).
An fma is emulated by one float64 evaluation rounded to float32 (the float32 product is exact
in float64); this differs from a hardware fma only in rare double-rounding cases.

With SEARCH_FLOAT32 set (the `float64` backend, a float64 model), the searches (FPS, ball
query, three_nn's choice of neighbours) run on the points rounded to float32, so that they pick
what the float32 variants pick; three_nn's distances are then those neighbours' distances in the
input's dtype. Everything else stays in the input's dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

EMULATE_FMA = False
SEARCH_FLOAT32 = False
_CHUNK_ELEMENTS = 1 << 26  # pairwise-distance blocks of at most this many entries


def _fma32(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    return (a.double() * b.double() + c.double()).to(c.dtype)


def _sq_dist(a: Tensor, b: Tensor) -> Tensor:
    """a [..., 3], b [..., 3] (broadcast) -> d^2 [...] with the kernels' evaluation order."""
    d = a - b
    dx, dy, dz = d.unbind(-1)
    if EMULATE_FMA and d.dtype == torch.float32:
        return _fma32(dz, dz, _fma32(dy, dy, dx * dx))
    return dx * dx + dy * dy + dz * dz


def _chunks(total: int, per_row: int):
    step = max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    for start in range(0, total, step):
        yield start, min(total, start + step)


def _search_points(xyz: Tensor) -> Tensor:
    return xyz.float() if SEARCH_FLOAT32 else xyz


@torch.no_grad()
def furthest_point_sample(xyz: Tensor, npoint: int) -> Tensor:
    xyz = _search_points(xyz)
    B, N, _ = xyz.shape
    out = torch.zeros(B, npoint, dtype=torch.int32, device=xyz.device)
    mag = _sq_dist(xyz, torch.zeros_like(xyz))
    skipped = mag <= 1e-3
    dist = torch.full((B, N), 1e10, dtype=xyz.dtype, device=xyz.device)
    rows = torch.arange(B, device=xyz.device)
    current = torch.zeros(B, dtype=torch.int64, device=xyz.device)
    for s in range(1, npoint):
        d = _sq_dist(xyz, xyz[rows, current].unsqueeze(1))
        dist = torch.minimum(dist, d)
        candidate = torch.where(skipped, torch.full_like(dist, -1.0), dist)
        best, current = candidate.max(dim=1)  # first maximum
        current = torch.where(best < 0, torch.zeros_like(current), current)
        out[:, s] = current.to(torch.int32)
    return out


def _gather_last(features: Tensor, idx: Tensor) -> Tensor:
    """features [B, C, N], idx [B, P] -> [B, C, P] (torch autograd: scatter-add backward)."""
    return torch.gather(features, 2, idx.long().unsqueeze(1).expand(-1, features.shape[1], -1))


def gather_operation(features: Tensor, idx: Tensor) -> Tensor:
    return _gather_last(features, idx)


def grouping_operation(features: Tensor, idx: Tensor) -> Tensor:
    B, M, K = idx.shape
    return _gather_last(features, idx.reshape(B, M * K)).view(B, features.shape[1], M, K)


@torch.no_grad()
def ball_query(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    xyz, new_xyz = _search_points(xyz), _search_points(new_xyz)
    B, N, _ = xyz.shape
    M = new_xyz.shape[1]
    r2 = torch.tensor(radius, dtype=xyz.dtype) * torch.tensor(radius, dtype=xyz.dtype)
    out = torch.zeros(B, M, nsample, dtype=torch.int32, device=xyz.device)
    slots = torch.arange(nsample, device=xyz.device)
    for m0, m1 in _chunks(M, B * N):
        hit = _sq_dist(new_xyz[:, m0:m1, None, :], xyz[:, None, :, :]) < r2.to(xyz.device)
        # hits first, each group in index order
        order = torch.sort((~hit).to(torch.int8), dim=2, stable=True).indices[:, :, :nsample]
        count = hit.sum(dim=2, keepdim=True)
        first = torch.where(count > 0, order[:, :, :1], torch.zeros_like(order[:, :, :1]))
        out[:, m0:m1] = torch.where(slots < count, order, first).to(torch.int32)
    return out


@torch.no_grad()
def three_nn(unknown: Tensor, known: Tensor) -> tuple[Tensor, Tensor]:
    if SEARCH_FLOAT32 and unknown.dtype != torch.float32:
        _, idx = three_nn_searched(unknown.float(), known.float())
        picked = torch.gather(known, 1, idx.long().reshape(idx.shape[0], -1, 1).expand(-1, -1, 3))
        d2 = _sq_dist(unknown.unsqueeze(2), picked.view(*idx.shape, 3))
        return torch.sqrt(d2), idx
    return three_nn_searched(unknown, known)


def three_nn_searched(unknown: Tensor, known: Tensor) -> tuple[Tensor, Tensor]:
    B, n, _ = unknown.shape
    m = known.shape[1]
    k = min(3, m)
    dist2 = torch.full((B, n, 3), float("inf"), dtype=unknown.dtype, device=unknown.device)
    idx = torch.zeros(B, n, 3, dtype=torch.int32, device=unknown.device)
    for n0, n1 in _chunks(n, B * m):
        d2 = _sq_dist(unknown[:, n0:n1, None, :], known[:, None, :, :])
        best, where = torch.sort(d2, dim=2, stable=True)  # ties: lower index first
        dist2[:, n0:n1, :k] = best[:, :, :k]
        idx[:, n0:n1, :k] = where[:, :, :k].to(torch.int32)
    return torch.sqrt(dist2), idx


def _interpolate(features: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    B, C, _ = features.shape
    n = idx.shape[1]
    f = _gather_last(features, idx.reshape(B, n * 3)).view(B, C, n, 3)
    w = weight.unsqueeze(1)
    if EMULATE_FMA and features.dtype == torch.float32:
        p = f * w
        return _fma32(f[..., 2], w[..., 2], _fma32(f[..., 1], w[..., 1], p[..., 0]))
    p = f * w
    return p[..., 0] + p[..., 1] + p[..., 2]


class _ThreeInterpolate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, idx, weight):
        ctx.save_for_backward(idx, weight)
        ctx.m = features.shape[2]
        return _interpolate(features, idx, weight)

    @staticmethod
    def backward(ctx, grad_out):
        idx, weight = ctx.saved_tensors
        B, C, n = grad_out.shape
        contrib = grad_out.unsqueeze(-1) * weight.unsqueeze(1)  # [B, C, n, 3]
        target = idx.long().reshape(B, 1, n * 3).expand(-1, C, -1)
        grad = grad_out.new_zeros(B, C, ctx.m).scatter_add_(2, target, contrib.reshape(B, C, n * 3))
        return grad, None, torch.zeros_like(weight)


def three_interpolate(features: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    return _ThreeInterpolate.apply(features, idx, weight)


class QueryAndGroup(nn.Module):
    """forward(xyz [B, N, 3], new_xyz [B, M, 3], features [B, C, N] or None) ->
    [B, 3 + C, M, nsample], xyz relative to the centre first when use_xyz."""

    def __init__(self, radius: float, nsample: int, use_xyz: bool = True):
        super().__init__()
        self.radius, self.nsample, self.use_xyz = radius, nsample, use_xyz

    def forward(self, xyz, new_xyz, features=None):
        idx = ball_query(self.radius, self.nsample, xyz, new_xyz)
        rel = grouping_operation(xyz.transpose(1, 2).contiguous(), idx) - new_xyz.transpose(1, 2).unsqueeze(
            -1
        )
        if features is None:
            if not self.use_xyz:
                raise ValueError("QueryAndGroup(use_xyz=False) needs features")
            return rel
        grouped = grouping_operation(features, idx)
        return torch.cat([rel, grouped], dim=1) if self.use_xyz else grouped


class GroupAll(nn.Module):
    """forward(xyz [B, N, 3], new_xyz (ignored), features [B, C, N] or None) -> [B, 3 + C, 1, N]."""

    def __init__(self, use_xyz: bool = True):
        super().__init__()
        self.use_xyz = use_xyz

    def forward(self, xyz, new_xyz=None, features=None):
        rel = xyz.transpose(1, 2).unsqueeze(2)
        if features is None:
            return rel
        grouped = features.unsqueeze(2)
        return torch.cat([rel, grouped], dim=1) if self.use_xyz else grouped
