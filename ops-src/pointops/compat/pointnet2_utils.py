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
- Bad input raises TypeError/ValueError naming pointnet2_ops' argument. radius: a number >= 0 for
  every dtype (one whose square overflows, inf included, takes every point, as pointnet2_ops'
  r^2 = inf does); npoint / nsample: ints >= 0, 0 giving an empty result. An empty ball in a
  cloud with no points groups zeros.
- On CUDA, QueryAndGroup and GroupAll return their [B, C, npoint, nsample] groups in
  channels_last memory (same values and shape; `.contiguous()` gives pointnet2_ops' layout).
  Their consumer, a shared MLP of 1x1 convolutions and batch norms, runs on that layout without
  converting it (a PointNet++ training step spends most of its time there).
  POINTOPS_PN2_CHANNELS_LAST=0 (or the module attribute CHANNELS_LAST = False) keeps the
  contiguous layout, =1 uses channels_last on CPU too.
"""

from __future__ import annotations

import math
import os
import warnings

import torch
from torch import Tensor, nn

from .. import ops, packed

_ops = torch.ops.pointops


def _channels_last_from_env() -> bool | None:
    raw = os.environ.get("POINTOPS_PN2_CHANNELS_LAST", "auto").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    warnings.warn(
        f"pointops: POINTOPS_PN2_CHANNELS_LAST={raw!r} is not understood; using auto (set it to 0, 1 or auto)",
        RuntimeWarning,
        stacklevel=2,
    )
    return None


# Groups in channels_last memory: None = on CUDA only, True = always, False = never.
CHANNELS_LAST: bool | None = _channels_last_from_env()


def _int32(idx: Tensor, may_miss: bool = True) -> Tensor:
    """Native -1 ("no point") becomes 0, as in pointnet2_ops; indices become int32. may_miss=False:
    the sizes rule out -1, so the clamp (a kernel launch) is skipped."""
    return (idx.clamp_min(0) if may_miss else idx).to(torch.int32)


def _count(value, name: str) -> int:
    """A sample count (npoint, nsample): an int >= 0 (0 gives an empty result, as in pointnet2_ops)."""
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        raise TypeError(f"pointops: {name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"pointops: {name} must be >= 0, got {value}")
    return value


def _features(features) -> Tensor:
    return ops._features(features, "features")


def furthest_point_sample(xyz: Tensor, npoint: int) -> Tensor:
    """xyz [B, N, 3] -> int32 indices [B, npoint], starting at point 0."""
    npoint = _count(npoint, "npoint")
    if npoint == 0:
        xyz = ops._points(xyz, "xyz")
        return xyz.new_empty((xyz.shape[0], 0), dtype=torch.int32)
    idx = ops.furthest_point_sample(xyz, npoint)
    return _int32(idx, may_miss=npoint > xyz.shape[1])  # -1 only past the cloud's size


def gather_operation(features: Tensor, idx: Tensor) -> Tensor:
    """features [B, C, N], idx [B, npoint] -> [B, C, npoint]."""
    features = _features(features)
    return ops.gather_points(features, _index_beside(idx, features))


def three_nn(unknown: Tensor, known: Tensor) -> tuple[Tensor, Tensor]:
    """The three nearest `known` points of each `unknown` point: (dist [B, n, 3] Euclidean,
    idx [B, n, 3] int32). With fewer than 3 known points the missing slots are idx 0, dist inf.

    As in pointnet2_ops, the distances carry no gradient: the usual interpolation weights
    1 / (dist + eps) would otherwise send NaN into xyz's gradient (the derivative of the square
    root at a known point that coincides with an unknown one)."""
    known, unknown = ops._pair_structure(known, unknown, ("known", "unknown"))
    dist2, idx = ops.three_nn(unknown.detach(), known.detach())
    return torch.sqrt(dist2), _int32(idx, may_miss=known.shape[1] < 3)


def three_interpolate(features: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    """features [B, C, m], idx [B, n, 3], weight [B, n, 3] -> [B, C, n]."""
    features = _features(features)
    idx = _index_beside(idx, features)
    weight = ops._float_tensor(weight, "weight")
    ops._same_device(features, "features", weight, "weight")
    if weight.dtype != features.dtype:
        raise TypeError(f"pointops: weight has dtype {weight.dtype} but features has {features.dtype}")
    return ops.three_interpolate(features, idx, weight)


def grouping_operation(features: Tensor, idx: Tensor) -> Tensor:
    """features [B, C, N], idx [B, npoint, nsample] -> [B, C, npoint, nsample]."""
    features = _features(features)
    return ops.group_points(features, _index_beside(idx, features))


def _index_beside(idx, features: Tensor) -> Tensor:
    """idx, an index tensor on the device of features (the native API names those `feat`), as
    int64: converted once here, so that the native API takes it as it is."""
    return ops._index(idx, "idx", features, "features")


def _checked_radius(radius, where: str = "pointops") -> float:
    """A ball radius of the pointnet2 layers: a number >= 0, inf included (every point); negative
    and nan radii are refused whatever the dtype. `where` names the caller in the errors."""
    if torch.compiler.is_compiling() and isinstance(radius, torch.SymFloat):
        return radius  # a module attribute under dynamic=True; the graph specializes on its value
    if isinstance(radius, bool) or not isinstance(radius, (int, float)):
        raise TypeError(f"{where}: radius must be a number, got {type(radius).__name__}")
    if not radius >= 0:  # nan fails too
        raise ValueError(f"{where}: radius must be a number >= 0 (inf takes every point), got {radius}")
    return float(radius)


def _pointnet2_radius(radius: float, dtype: torch.dtype) -> float:
    """The radius to give the native op so that its r^2 (radius * radius in double, rounded once
    to the accumulation type) equals pointnet2_ops' float32 r^2 = fl(fl(r) * fl(r)). The two
    roundings differ by an ulp for many radii (r = 0.2: 0.040000003 against 0.039999999), which
    moves points at that distance in or out of the ball. float64 inputs keep r * r in double.

    Where r^2 overflows (r >= about 1.8e19 in float32, inf), pointnet2_ops' test d^2 < inf takes
    every point; the native op takes finite radii only, so such a radius becomes one whose
    square exceeds every squared distance of coordinates within pointops.coordinate_limit
    (at most 12 limit^2) and stays finite: sqrt(14) * limit."""
    if dtype == torch.float64:
        if radius * radius < math.inf:
            return radius
    else:
        r = _float32(radius)
        r2 = _float32(r * r)  # the double product of two float32 values is exact: one rounding, as in float32
        if r2 < math.inf:
            # sqrt(r2)^2 in double is within 2 double ulps of r2, so it rounds back to the float32 r2 exactly
            return math.sqrt(r2)
    return math.sqrt(14.0) * ops.coordinate_limit(dtype)


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


def _native_ball_query(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    """ball_query's int64 indices, -1 for an empty ball."""
    names = ("xyz", "new_xyz")
    xyz, new_xyz = ops._pair_structure(xyz, new_xyz, names)
    radius = _checked_radius(radius)
    nsample = _count(nsample, "nsample")
    if nsample == 0:
        return xyz.new_empty((xyz.shape[0], new_xyz.shape[1], 0), dtype=torch.int64)
    radius = _pointnet2_radius(radius, xyz.dtype)
    idx, _, _ = ops._call(
        _ops.ball_query.default,
        (xyz, new_xyz, radius, nsample, None, None, False, False),
        ops._neighbour_checks(xyz, new_xyz, None, None, names),
    )
    return idx


@ops._traceable
def ball_query(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    """int32 indices [B, npoint, nsample] of the first nsample points with d^2 < radius^2 around
    each new_xyz point; short balls repeat their first hit, an empty ball is all 0."""
    return _int32(_native_ball_query(radius, nsample, xyz, new_xyz))


# --- groups in channels_last memory -------------------------------------------------------------


def _use_channels_last(xyz: Tensor, features: Tensor | None) -> bool:
    """Whether QueryAndGroup / GroupAll build channels_last groups for these inputs. Not under
    torch.jit.trace (the cloud offsets would become constants of the trace) or torch.func
    transforms (the row gather has no vmap rule), nor for features of another dtype."""
    setting = CHANNELS_LAST
    if setting is False or not isinstance(xyz, Tensor) or (setting is None and not xyz.is_cuda):
        return False
    if xyz.dim() != 3 or xyz.shape[1] == 0:  # no rows to gather (an empty cloud groups zeros)
        return False
    if features is not None and (not isinstance(features, Tensor) or features.dtype != xyz.dtype):
        return False
    if torch.compiler.is_compiling():
        return True
    return not (torch.jit.is_tracing() or torch._C._are_functorch_transforms_active())


def _check_features(features: Tensor, xyz: Tensor) -> None:
    ops._features(features, "features")
    ops._same_device(xyz, "xyz", features, "features")
    if features.shape[0] != xyz.shape[0] or features.shape[2] != xyz.shape[1]:
        raise ValueError(
            f"pointops: features must have shape [B, C, N] = [{xyz.shape[0]}, C, {xyz.shape[1]}] "
            f"(xyz is {list(xyz.shape)}), got {list(features.shape)}"
        )


_CLOUD_STARTS: dict = {}


def _cloud_starts(B: int, N: int, device: torch.device) -> Tensor:
    """[B, 1, 1] int64: the first row of each cloud of a [B, N] batch seen as B * N rows. Kept
    per (device, B, N): an arange launch per call costs more host time than the lookup."""
    if torch.compiler.is_compiling():
        return torch.arange(0, B * N, N, device=device).view(B, 1, 1)
    key = (device, B, N)
    starts = _CLOUD_STARTS.get(key)
    if starts is None:
        starts = torch.arange(0, B * N, N, device=device).view(B, 1, 1)
        # not while a CUDA graph is captured: the tensor would live in the graph's memory pool
        if not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
            if len(_CLOUD_STARTS) >= 64:
                _CLOUD_STARTS.clear()
            _CLOUD_STARTS[key] = starts
    return starts


def _group_channels_last(xyz: Tensor, new_xyz: Tensor, features: Tensor | None, idx: Tensor, use_xyz: bool):
    """QueryAndGroup's output from ball_query's int64 idx [B, M, K] (-1: empty ball) as one row
    gather: rows [B * N, 3 + C] = (xyz | features transposed), out [B, M, K, 3 + C], returned as
    the [B, 3 + C, M, K] view (channels_last memory). The same values as grouping each part
    and subtracting the centres: copies, then one subtraction."""
    B, N = xyz.shape[0], xyz.shape[1]
    parts = []
    if use_xyz or features is None:
        parts.append(xyz)
    if features is not None:
        parts.append(features.transpose(1, 2))
    rows = parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)
    rows = rows.reshape(B * N, rows.shape[2])
    starts = _cloud_starts(B, N, xyz.device)
    # global rows; an empty ball (-1) groups point 0 of its cloud, as in pointnet2_ops
    rows_idx = (idx + starts).clamp_min_(starts)
    out = packed.gather(rows, rows_idx)
    if use_xyz or features is None:
        out[..., :3] -= new_xyz.unsqueeze(2)
    return out.permute(0, 3, 1, 2)


class QueryAndGroup(nn.Module):
    """Groups points in a ball around each centroid: forward(xyz [B, N, 3], new_xyz [B, npoint, 3],
    features [B, C, N] or None) -> [B, 3 + C, npoint, nsample] (xyz relative to the centroid
    first when use_xyz)."""

    def __init__(self, radius: float, nsample: int, use_xyz: bool = True):
        super().__init__()
        self.radius, self.nsample, self.use_xyz = radius, nsample, use_xyz

    def forward(self, xyz: Tensor, new_xyz: Tensor, features: Tensor | None = None) -> Tensor:
        if features is None and not self.use_xyz:
            raise ValueError("pointops: QueryAndGroup(use_xyz=False) needs features")
        if _use_channels_last(xyz, features):
            idx = _native_ball_query(self.radius, self.nsample, xyz, new_xyz)
            if features is not None:
                _check_features(features, xyz)
            return _group_channels_last(xyz, new_xyz, features, idx, self.use_xyz)
        idx = _native_ball_query(self.radius, self.nsample, xyz, new_xyz)
        if xyz.shape[1] > 0:  # an empty ball groups point 0, as in pointnet2_ops (no points: zeros)
            idx = idx.clamp_min(0)
        if features is not None:
            _check_features(features, xyz)
        grouped_xyz = grouping_operation(xyz.transpose(1, 2), idx)
        grouped_xyz = grouped_xyz - new_xyz.transpose(1, 2).unsqueeze(-1)
        if features is None:
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
        xyz = ops._points(xyz, "xyz")
        grouped_xyz = xyz.transpose(1, 2).unsqueeze(2)
        if features is None:
            return grouped_xyz
        _check_features(features, xyz)
        if self.use_xyz and _use_channels_last(xyz, features):
            # [B, N, 3 + C] rows seen as [B, 3 + C, 1, N]: channels_last memory
            return torch.cat([xyz, features.transpose(1, 2)], dim=2).unsqueeze(1).permute(0, 3, 1, 2)
        grouped_features = features.unsqueeze(2)
        if self.use_xyz:
            return torch.cat([grouped_xyz, grouped_features], dim=1)
        return grouped_features
