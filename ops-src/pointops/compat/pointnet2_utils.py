"""pointnet2_ops-compatible API (`from pointops.compat import pointnet2_utils`).

Same names, argument order and conventions as pointnet2_ops.pointnet2_utils: int32 indices,
Euclidean (not squared) distances from three_nn, ball_query with a strict d^2 < r^2 test where
r^2 is rounded as pointnet2_ops rounds it (the float32 radius squared in float32), short balls
padded with their first hit and an empty ball giving index 0.

Deliberate differences (pointnet2_ops behaviour we do not reproduce):
- furthest_point_sample never skips points: pointnet2_ops ignores points with |p|^2 <= 1e-3
  (points at or near the origin are never picked). When npoint exceeds the cloud size the extra
  slots hold index 0.
- three_interpolate has a real gradient w.r.t. the weights (pointnet2_ops returns zeros).
- CPU tensors and float64 work; CUDA also takes float16/bfloat16.
- Backward passes are deterministic (no float atomics).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .. import ops

_ops = torch.ops.pointops


def _int32(idx: Tensor) -> Tensor:
    """Native -1 ("no point") becomes 0, as in pointnet2_ops; indices become int32."""
    return idx.clamp_min(0).to(torch.int32)


def furthest_point_sample(xyz: Tensor, npoint: int) -> Tensor:
    """xyz [B, N, 3] -> int32 indices [B, npoint], starting at point 0."""
    return _int32(ops.furthest_point_sample(xyz, npoint))


def gather_operation(features: Tensor, idx: Tensor) -> Tensor:
    """features [B, C, N], idx [B, npoint] -> [B, C, npoint]."""
    return ops.gather_points(features, idx)


def three_nn(unknown: Tensor, known: Tensor) -> tuple[Tensor, Tensor]:
    """The three nearest `known` points of each `unknown` point: (dist [B, n, 3] Euclidean,
    idx [B, n, 3] int32). With fewer than 3 known points the missing slots are idx 0, dist inf.

    As in pointnet2_ops, the distances carry no gradient: the usual interpolation weights
    1 / (dist + eps) would otherwise send NaN into xyz's gradient (the derivative of the square
    root at a known point that coincides with an unknown one)."""
    dist2, idx = ops.three_nn(unknown.detach(), known.detach())
    return torch.sqrt(dist2), _int32(idx)


def three_interpolate(features: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    """features [B, C, m], idx [B, n, 3], weight [B, n, 3] -> [B, C, n]."""
    return ops.three_interpolate(features, idx, weight)


def grouping_operation(features: Tensor, idx: Tensor) -> Tensor:
    """features [B, C, N], idx [B, npoint, nsample] -> [B, C, npoint, nsample]."""
    return ops.group_points(features, idx)


def _pointnet2_radius(radius: float, dtype: torch.dtype) -> float:
    """The radius to give the native op so that its r^2 (radius * radius in double, rounded once
    to the accumulation type) equals pointnet2_ops' float32 r^2 = fl(fl(r) * fl(r)). The two
    roundings differ by an ulp for many radii (r = 0.2: 0.040000003 against 0.039999999), which
    moves points at that distance in or out of the ball. float64 inputs keep r * r in double."""
    if dtype == torch.float64:
        return radius
    r = _float32(radius)
    r2 = _float32(r * r)  # the double product of two float32 values is exact: one rounding, as in float32
    # sqrt(r2)^2 in double is within 2 double ulps of r2, so it rounds back to the float32 r2 exactly
    return math.sqrt(r2) if r2 < math.inf else radius


def _float32(x: float) -> float:
    """x rounded to the nearest float32, ties to even (inf past its range). Comparisons, powers
    of two and round() only: torch.compile(dynamic=True) turns a float module attribute into a
    symbolic float, which supports these (math.frexp and math.isfinite it does not)."""
    if x == 0 or x != x:
        return x
    magnitude = x if x > 0 else -x
    if magnitude >= 2.0**128:
        return math.inf if x > 0 else -math.inf
    exponent = 0  # 2^(exponent - 1) <= magnitude < 2^exponent, as math.frexp gives it
    while magnitude >= 2.0**exponent:
        exponent += 1
    while exponent > -148 and magnitude < 2.0 ** (exponent - 1):
        exponent -= 1
    step = max(exponent - 24, -149)  # 24 significand bits; below 2^-126 the spacing stays 2^-149
    scale = 2.0**-step
    rounded = round(x * scale) / scale  # exact scalings by powers of two; round() ties to even
    if rounded > _FLOAT32_MAX:
        return math.inf
    if rounded < -_FLOAT32_MAX:
        return -math.inf
    return rounded


_FLOAT32_MAX = 3.4028234663852886e38


@ops._traceable
def ball_query(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    """int32 indices [B, npoint, nsample] of the first nsample points with d^2 < radius^2 around
    each new_xyz point; short balls repeat their first hit, an empty ball is all 0."""
    names = ("xyz", "new_xyz")
    xyz, new_xyz = ops._pair_structure(xyz, new_xyz, names)
    if not isinstance(radius, (int, float)) or isinstance(radius, bool) or not radius >= 0:
        raise ValueError(f"pointops: radius must be a number >= 0, got {radius!r}")
    nsample = ops._positive_int(nsample, "nsample")
    radius = _pointnet2_radius(float(radius), xyz.dtype)
    idx, _, _ = ops._call(
        _ops.ball_query.default,
        (xyz, new_xyz, radius, nsample, None, None, False, False),
        ops._neighbour_checks(xyz, new_xyz, None, None, names),
    )
    return _int32(idx)


class QueryAndGroup(nn.Module):
    """Groups points in a ball around each centroid: forward(xyz [B, N, 3], new_xyz [B, npoint, 3],
    features [B, C, N] or None) -> [B, 3 + C, npoint, nsample] (xyz relative to the centroid
    first when use_xyz)."""

    def __init__(self, radius: float, nsample: int, use_xyz: bool = True):
        super().__init__()
        self.radius, self.nsample, self.use_xyz = radius, nsample, use_xyz

    def forward(self, xyz: Tensor, new_xyz: Tensor, features: Tensor | None = None) -> Tensor:
        idx = ball_query(self.radius, self.nsample, xyz, new_xyz)
        grouped_xyz = grouping_operation(xyz.transpose(1, 2), idx)
        grouped_xyz = grouped_xyz - new_xyz.transpose(1, 2).unsqueeze(-1)
        if features is None:
            if not self.use_xyz:
                raise ValueError("pointops: QueryAndGroup(use_xyz=False) needs features")
            return grouped_xyz
        grouped_features = grouping_operation(features, idx)
        if self.use_xyz:
            return torch.cat([grouped_xyz, grouped_features], dim=1)
        return grouped_features


class GroupAll(nn.Module):
    """Groups all points into one group: forward(xyz [B, N, 3], new_xyz (ignored), features
    [B, C, N] or None) -> [B, 3 + C, 1, N]."""

    def __init__(self, use_xyz: bool = True):
        super().__init__()
        self.use_xyz = use_xyz

    def forward(self, xyz: Tensor, new_xyz: Tensor | None = None, features: Tensor | None = None) -> Tensor:
        grouped_xyz = xyz.transpose(1, 2).unsqueeze(2)
        if features is None:
            return grouped_xyz
        grouped_features = features.unsqueeze(2)
        if self.use_xyz:
            return torch.cat([grouped_xyz, grouped_features], dim=1)
        return grouped_features
