"""Chamfer distance between batches of point clouds, with pytorch3d's `chamfer_distance` API.

    loss, loss_normals = pointops.chamfer_distance(x, y)          # x [N, P1, D], y [N, P2, D]

Each point is matched to its nearest neighbour in the other cloud (k = 1): under squared L2 by
pointops.knn (D = 3) or an exact chunked search (any D), under L1 by an exact chunked L1 search
(the nearest point under L1 is not the nearest under L2). Equal distances go to the lower index.
The distances are then recomputed from the matched coordinates in torch, so gradients flow to
both x and y (and to nothing through the matching, which is piecewise constant).

One value rule for every norm and dimension: x and y must be finite (padding included) and
small enough for finite distances (pointops.coordinate_limit for D <= 3, halved per factor 4
of D / 3 beyond); weights finite and >= 0.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _bruteforce, ops, packed

__all__ = ["chamfer_distance"]

_POINT_REDUCTIONS = ("mean", "sum", "max", None)
_BATCH_REDUCTIONS = ("mean", "sum", None)


def _cloud(t, lengths, name: str):
    """Checks a padded cloud and its lengths; returns the lengths (int64 [N], on t's device)."""
    if not isinstance(t, Tensor):
        raise TypeError(
            f"pointops: {name} must be a tensor [N, P, D] (pytorch3d Pointclouds objects "
            f"are not taken: pass points_padded() and num_points_per_cloud()), got "
            f"{type(t).__name__}"
        )
    if t.dim() != 3:
        raise ValueError(f"pointops: {name} must have shape [N, P, D], got {list(t.shape)}")
    if not t.is_floating_point():
        raise TypeError(f"pointops: {name} must be a floating-point tensor, got {t.dtype}")
    ops._tensor(t, name)  # CPU or CUDA (with kernels)
    N, P = t.shape[0], t.shape[1]
    if lengths is None:
        return torch.full((N,), P, dtype=torch.int64, device=t.device)
    if not isinstance(lengths, Tensor) or lengths.dim() != 1 or lengths.shape[0] != N:
        raise ValueError(f"pointops: {name}_lengths must be a tensor of shape [{N}]")
    if lengths.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"pointops: {name}_lengths must be int32 or int64, got {lengths.dtype}")
    lengths = lengths.to(device=t.device, dtype=torch.int64)
    if ops.value_checks_enabled() and lengths.numel() and not torch.compiler.is_compiling():
        low, high = torch.stack(torch.aminmax(lengths)).tolist()
        if low < 0 or high > P:
            raise ValueError(f"pointops: {name}_lengths values must lie in 0..{P}, got {low}..{high}")
    return lengths


def _uses_knn(x: Tensor, norm: int) -> bool:
    """Whether the matching runs on pointops.knn (L2 in 3-D, a dtype its kernels take)."""
    return (
        norm == 2
        and x.shape[2] == 3
        and x.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
        and (x.is_cuda or x.dtype in (torch.float32, torch.float64))
    )


def _coordinate_limit(dtype: torch.dtype, dims: int) -> float:
    """The largest coordinate magnitude whose distances in `dims` dimensions stay finite: the
    3-D limit of the kernels (12 limit^2 fits), halved per factor 4 of dims / 3 beyond 3."""
    halvings = math.ceil(math.log2(dims / 3) / 2) if dims > 3 else 0
    return ops.coordinate_limit(dtype) / 2.0**halvings


def _check_coordinates(x: Tensor, y: Tensor) -> None:
    """x and y hold finite coordinates within _coordinate_limit (one read of device data)."""
    named = [(name, ops._plain(t.detach())) for name, t in (("x", x), ("y", y)) if t.numel()]
    if not named:
        return
    magnitudes = torch.stack([t.abs().amax().to(torch.float64) for _, t in named]).tolist()  # nan stays nan
    limit = _coordinate_limit(x.dtype, x.shape[2])
    for (name, _), magnitude in zip(named, magnitudes, strict=True):
        if not math.isfinite(magnitude):
            raise ValueError(ops._not_finite_message(name))
        if magnitude > limit:
            raise ValueError(
                f"pointops: {name} holds a coordinate of magnitude {magnitude:.4g}, above {limit:.4g}, "
                f"the largest for which distances in {x.shape[2]} dimensions stay finite ({x.dtype}); "
                "scale the points down"
            )


def _nearest(x: Tensor, x_len: Tensor, y: Tensor, y_len: Tensor, norm: int) -> Tensor:
    """Index [N, P1] (into y's second dimension) of the nearest valid y point of each x point
    under L2 (norm 2) or L1 (norm 1); -1 where the x point is padding or its y cloud is empty."""
    N, P1, D = x.shape
    if N == 0 or P1 == 0 or y.shape[1] == 0:
        return torch.full((N, P1), -1, dtype=torch.int64, device=x.device)
    with torch.no_grad():
        if _uses_knn(x, norm):
            _, idx = ops.knn(y.detach(), x.detach(), 1, lengths=y_len, query_lengths=x_len)
            return idx[..., 0]
        # exact brute force over packed clouds
        x_mask = torch.arange(P1, device=x.device)[None, :] < x_len[:, None]
        y_mask = torch.arange(y.shape[1], device=y.device)[None, :] < y_len[:, None]
        x_ptr, y_ptr = packed.ptr_from_counts(x_len), packed.ptr_from_counts(y_len)
        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        _, flat = _bruteforce.knn(
            y.detach()[y_mask].to(work),
            y_ptr,
            x.detach()[x_mask].to(work),
            x_ptr,
            1,
            "l2" if norm == 2 else "l1",
        )
        cloud = torch.arange(N, device=x.device)[:, None].expand(N, P1)[x_mask]
        local = torch.where(flat[:, 0] >= 0, flat[:, 0] - y_ptr[:-1][cloud], -1)
        idx = torch.full((N, P1), -1, dtype=torch.int64, device=x.device)
        idx[x_mask] = local
        return idx


def _distance(x: Tensor, nearest: Tensor, norm: int, squared: bool) -> Tensor:
    diff = x - nearest
    if norm == 1:
        return diff.abs().sum(-1)
    d2 = (diff * diff).sum(-1)
    if squared:
        return d2
    # sqrt with a zero (not infinite) gradient at coincident points
    return torch.where(d2 > 0, d2.clamp_min(torch.finfo(d2.dtype).tiny).sqrt(), torch.zeros_like(d2))


def _one_direction(
    x, x_len, y, y_len, x_normals, y_normals, weights, point_reduction, norm, squared, abs_cosine
):
    N, P1, _ = x.shape
    idx = _nearest(x, x_len, y, y_len, norm)
    found = idx >= 0
    safe = idx.clamp_min(0)
    near = _matched(y, safe)
    cham = torch.where(
        found, _distance(x, near, norm, squared), torch.zeros((), dtype=x.dtype, device=x.device)
    )
    cham_norm = None
    if x_normals is not None and y_normals is not None:
        near_n = _matched(y_normals, safe)
        cos = F.cosine_similarity(x_normals, near_n, dim=2, eps=1e-6)
        cham_norm = 1 - (cos.abs() if abs_cosine else cos)
        cham_norm = torch.where(found, cham_norm, torch.zeros((), dtype=cham_norm.dtype, device=x.device))
    if weights is not None:
        cham = cham * weights.view(N, 1)
        if cham_norm is not None:
            cham_norm = cham_norm * weights.view(N, 1)
    if point_reduction == "max":
        cham = cham.max(1).values if P1 else cham.sum(1)  # an empty sum: 0, still in the graph
    elif point_reduction is not None:
        cham = cham.sum(1)
        cham_norm = cham_norm.sum(1) if cham_norm is not None else None
        if point_reduction == "mean":
            div = x_len.clamp_min(1).to(cham.dtype)
            cham = cham / div
            cham_norm = cham_norm / div if cham_norm is not None else None
    return cham, cham_norm


def _matched(y: Tensor, safe: Tensor) -> Tensor:
    """y's rows at safe [N, P1] (0 where nothing matched): [N, P1, D]. An empty y (P2 = 0)
    matches nothing; its stand-in rows are zeros (y's sum over no points, which keeps y in the
    graph: its gradient is a zero tensor, not None), masked out by the caller."""
    if y.shape[1] == 0:
        return y.sum(1, keepdim=True).expand(-1, safe.shape[1], -1)
    return y.gather(1, safe[..., None].expand(-1, -1, y.shape[2]))


def _batch_reduce(value, weights, batch_reduction):
    if batch_reduction is None or value is None:
        return value
    total = value.sum()
    if batch_reduction == "sum":
        return total
    if weights is None:
        return total / max(value.shape[0], 1)
    return total / weights.sum()


def chamfer_distance(
    x,
    y,
    x_lengths=None,
    y_lengths=None,
    x_normals=None,
    y_normals=None,
    weights=None,
    batch_reduction: str | None = "mean",
    point_reduction: str | None = "mean",
    norm: int = 2,
    single_directional: bool = False,
    abs_cosine: bool = True,
    squared: bool | None = None,
):
    """Chamfer distance with pytorch3d's signature and reductions: (loss, loss_normals).

    x [N, P1, D], y [N, P2, D] (padded; x_lengths / y_lengths [N] give ragged clouds, padding
    contributes 0). norm=2: squared Euclidean distances (squared=False: Euclidean); norm=1: L1.
    point_reduction "mean" (over each cloud's valid points), "sum", "max" (Hausdorff-like, no
    normals) or None (per-point terms: a tuple (cham_x [N, P1], cham_y [N, P2]), or cham_x alone
    when single_directional; batch_reduction must then be None). batch_reduction "mean" divides
    by N, or by weights.sum() when weights [N] are given; "sum"; None keeps [N]. The two
    directions are added ("max": their maximum). loss_normals (1 - |cos| of matched normals, or
    1 - cos when abs_cosine=False) is None without both normals.
    """
    squared = _checked_options(norm, squared, point_reduction, batch_reduction, x_normals, y_normals)
    x_len = _cloud(x, x_lengths, "x")
    y_len = _cloud(y, y_lengths, "y")
    _check_partners(x, y, x_normals, y_normals, weights)
    # the knn kernels check their inputs on CUDA without a sync; everything else is read here
    if ops.value_checks_enabled() and not torch.compiler.is_compiling():
        if not (x.is_cuda and _uses_knn(x, norm) and x.shape[1] and y.shape[1]):
            _check_coordinates(x, y)
    if weights is not None and _checked_weights_sum(weights) == 0.0:  # pytorch3d: a zero loss, graph kept
        zero = (x.sum((1, 2)) * weights) * 0.0
        return (zero.sum(), zero.sum()) if batch_reduction is not None else (zero, zero)

    args = (weights, point_reduction, norm, squared, abs_cosine)
    cham_x, norm_x = _one_direction(x, x_len, y, y_len, x_normals, y_normals, *args)
    if single_directional:
        loss, loss_normals = cham_x, norm_x
    else:
        cham_y, norm_y = _one_direction(y, y_len, x, x_len, y_normals, x_normals, *args)
        loss, loss_normals = _both_directions(cham_x, norm_x, cham_y, norm_y, point_reduction)
    if point_reduction is None:
        return loss, loss_normals
    return _batch_reduce(loss, weights, batch_reduction), _batch_reduce(
        loss_normals, weights, batch_reduction
    )


def _checked_options(norm, squared, point_reduction, batch_reduction, x_normals, y_normals) -> bool:
    """Validates the options; returns `squared` with its default (True for norm=2) filled in."""
    if isinstance(norm, bool) or norm not in (1, 2):
        raise ValueError(f"pointops: chamfer_distance supports norm=1 (L1) or norm=2 (L2), got {norm!r}")
    if squared is None:
        squared = norm == 2
    elif norm == 1 and squared:
        raise ValueError("pointops: squared=True applies to norm=2 only (norm=1 gives L1 distances)")
    if point_reduction not in _POINT_REDUCTIONS:
        raise ValueError(
            f"pointops: point_reduction must be 'mean', 'sum', 'max' or None, got {point_reduction!r}"
        )
    if batch_reduction not in _BATCH_REDUCTIONS:
        raise ValueError(f"pointops: batch_reduction must be 'mean', 'sum' or None, got {batch_reduction!r}")
    if point_reduction is None and batch_reduction is not None:
        raise ValueError("pointops: batch_reduction must be None when point_reduction is None")
    if point_reduction == "max" and (x_normals is not None or y_normals is not None):
        raise ValueError('pointops: normals must be None when point_reduction is "max"')
    return squared


def _check_partners(x, y, x_normals, y_normals, weights) -> None:
    """y, the normals and the weights must fit x."""
    N, P1, D = x.shape
    if y.shape[0] != N or y.shape[2] != D:
        raise ValueError(
            f"pointops: y must have shape [{N}, P2, {D}] to match x {list(x.shape)}, got {list(y.shape)}"
        )
    if y.dtype != x.dtype or y.device != x.device:
        raise ValueError(f"pointops: y ({y.dtype}, {y.device}) must match x ({x.dtype}, {x.device})")
    for name, n, ref in (("x_normals", x_normals, x), ("y_normals", y_normals, y)):
        if n is not None:
            _like_x(n, name, x)
            if n.shape != ref.shape:
                raise ValueError(f"pointops: {name} must have the shape of its points {list(ref.shape)}")
    if weights is not None:
        _like_x(weights, "weights", x)
        if weights.shape != (N,):
            raise ValueError(f"pointops: weights must have shape [{N}], got {list(weights.shape)}")


def _like_x(t, name: str, x: Tensor) -> None:
    """t is a tensor of x's dtype on x's device."""
    if not isinstance(t, Tensor):
        raise TypeError(f"pointops: {name} must be a tensor, got {type(t).__name__}")
    if t.device != x.device:
        raise ValueError(
            f"pointops: {name} is on {t.device} but x is on {x.device}; move them to the same device"
        )
    if t.dtype != x.dtype:
        raise TypeError(f"pointops: {name} has dtype {t.dtype} but x has {x.dtype}")


def _checked_weights_sum(weights: Tensor) -> float:
    """weights.sum(), after checking that the weights are finite and >= 0 (one device read)."""
    if weights.numel() == 0:
        return 0.0
    plain = ops._plain(weights.detach())
    low, high, total = torch.stack([plain.amin(), plain.amax(), plain.sum()]).tolist()
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError("pointops: weights contain nan or inf; they must be finite and >= 0")
    if low < 0:
        raise ValueError(f"pointops: weights cannot be negative, got {low}")
    return total


def _both_directions(cham_x, norm_x, cham_y, norm_y, point_reduction):
    """The two directions combined: added, their maximum ("max"), or kept apart (None)."""
    if point_reduction == "max":
        return torch.maximum(cham_x, cham_y), None
    if point_reduction is None:
        return (cham_x, cham_y), ((norm_x, norm_y) if norm_x is not None else None)
    return cham_x + cham_y, (norm_x + norm_y if norm_x is not None else None)
