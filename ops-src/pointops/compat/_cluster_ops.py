"""The operators behind the torch_cluster and pyg-lib layers, registered as torch ops
(`torch.ops.pointops_compat.*`) so that TorchScript-compiled callers can use them, as they use
torch_cluster's. Clouds are given by row pointers (ptr, int32/int64 [B + 1]); None means one cloud.

Routing: points of dimension <= 3 (zero-padded to 3, which leaves distances unchanged) go
through pointops' kernels: pointops.packed for kNN and FPS, the padded ball-query op with the
strict test d < r for radius. Other dimensions and the cosine metric use the exact chunked
search of _bruteforce. Both order neighbours by (distance, row). On CPU, float16/bfloat16 are
searched in float32 (pointops' CPU kernels take float32/float64).

Every op checks its values with one read of the device (a sync on CUDA, which the edge lists'
sizes need anyway): points finite and within pointops.coordinate_limit, whatever their dimension
(the rule of pointops' kernels), row pointers that start at 0, never decrease and end at their
rows; bad values raise ValueError naming the argument.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import _bruteforce, ops, packed

_KERNEL_DTYPES_CPU = (torch.float32, torch.float64)
_KERNEL_DTYPES_CUDA = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _matrix(t: Tensor, name: str) -> Tensor:
    if t.dim() == 0:
        raise ValueError(f"pointops: {name} must be a [N, D] (or [N]) tensor, got a 0-d tensor")
    t = t.reshape(-1, 1) if t.dim() == 1 else t
    if t.dim() != 2:
        raise ValueError(f"pointops: {name} must be a [N, D] (or [N]) tensor, got shape {list(t.shape)}")
    if not t.is_floating_point():
        raise TypeError(f"pointops: {name} must be a floating-point tensor, got {t.dtype}")
    return t.contiguous()


def _working(t: Tensor, like: Tensor | None = None) -> Tensor:
    """t in the dtype it is searched in: its own on CUDA, float32 for float16/bfloat16 on CPU;
    with `like`, like's working dtype."""
    ref = t if like is None else like
    work = ref.dtype if ref.is_cuda or ref.dtype in _KERNEL_DTYPES_CPU else torch.float32
    return t.to(work)


def _as_3d(t: Tensor) -> Tensor:
    """Rows padded with zero columns to 3-D (only for D <= 3)."""
    if t.shape[1] == 3:
        return t
    return torch.cat([t, t.new_zeros(t.shape[0], 3 - t.shape[1])], 1)


def _kernel_ok(t: Tensor) -> bool:
    dtypes = _KERNEL_DTYPES_CUDA if t.is_cuda else _KERNEL_DTYPES_CPU
    return t.shape[1] <= 3 and t.dtype in dtypes and (t.is_cuda or t.is_cpu)


def _ptr(ptr: Tensor | None, rows: int, device, name: str) -> Tensor:
    """The row pointer's structure (its values are checked by _check_values)."""
    if ptr is None:
        return torch.tensor([0, rows], dtype=torch.int64, device=device)
    if ptr.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"pointops: {name} must be an int32 or int64 row pointer, got {ptr.dtype}")
    if ptr.dim() != 1 or ptr.numel() < 1:
        raise ValueError(f"pointops: {name} must be a 1-D row pointer [B + 1], got shape {list(ptr.shape)}")
    return ptr.to(device=device, dtype=torch.int64)


def _point_status(t: Tensor) -> Tensor:
    """0-d int64, not read here: 0 fine, 1 nan or inf, 2 a coordinate beyond the limit."""
    if t.numel() == 0:
        return torch.zeros((), dtype=torch.int64, device=t.device)
    smallest, largest = torch.aminmax(t)
    limit = ops.coordinate_limit(t.dtype)
    beyond = ((smallest < -limit) | (largest > limit)).long() * 2
    return torch.where(torch.isfinite(smallest) & torch.isfinite(largest), beyond, 1)


def _check_values(points, ptrs, extra=()) -> list[int]:
    """Checks points [(tensor, name)] and row pointers [(ptr, rows, name)] with one read of the
    device, and returns the values of `extra` (0-d int64 tensors) read along."""
    stats = [_point_status(t) for t, _ in points]
    for p, _, _ in ptrs:
        steps = p[1:] - p[:-1]
        stats += [p[0], steps.min() if steps.numel() else p.new_zeros(()), p[-1]]
    stats += list(extra)
    values = torch.stack(stats).tolist() if stats else []
    for (t, name), status in zip(points, values[: len(points)], strict=True):
        if status == 1:
            raise ValueError(ops._not_finite_message(name))
        if status == 2:
            raise ValueError(ops._too_large_message(name, t))
    at = len(points)
    for _, rows, name in ptrs:
        first, low, last = values[at : at + 3]
        at += 3
        if first == -1:  # ptr_from_batch's mark on CUDA (no read there)
            raise ValueError(
                f"pointops: {name.replace('ptr', 'batch')} must hold cloud ids >= 0 in nondecreasing order, "
                f"below batch_size (found on the GPU: {name}[0] = -1)"
            )
        if first != 0 or low < 0 or last != rows:
            raise ValueError(
                f"pointops: {name} must start at 0, never decrease and end at {rows} (the rows of its "
                f"points), got {name}[0] = {first}, {name}[-1] = {last}"
                + (", and a decrease" if low < 0 else "")
            )
    return values[at:]


def _largest_cloud(p: Tensor) -> Tensor:
    counts = p[1:] - p[:-1]
    return counts.max() if counts.numel() else p.new_zeros(())


def _same_features(x: Tensor, y: Tensor) -> None:
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"pointops: x and y must have the same feature dimension, got {x.shape[1]} and {y.shape[1]}"
        )
    if x.device != y.device:
        raise ValueError(f"pointops: x is on {x.device} but y is on {y.device}")


def _same_clouds(px: Tensor, py: Tensor) -> tuple[Tensor, Tensor]:
    """A cloud present in one set only has nothing to match: the shorter ptr gets empty clouds."""
    if px.numel() < py.numel():
        px = torch.cat([px, px[-1:].expand(py.numel() - px.numel())])
    elif py.numel() < px.numel():
        py = torch.cat([py, py[-1:].expand(px.numel() - py.numel())])
    return px, py


def _empty_edges(device) -> Tensor:
    return torch.empty((2, 0), dtype=torch.int64, device=device)


@torch.library.custom_op("pointops_compat::ptr_from_batch", mutates_args=())
def ptr_from_batch(batch: Tensor, rows: int, batch_size: int | None, name: str) -> Tensor:
    """torch_cluster's batch vector `name` (the cloud id of each of `rows` rows) -> ptr [B + 1]
    through pointops.packed.ptr_from_batch (int32/int64, ids >= 0, sorted; ValueError naming
    `name`); ids must be below batch_size. B = batch_size on CUDA where batch_size <= rows: then
    nothing is read (as torch_cluster reads nothing) and a broken vector gives ptr[0] = -1, which
    the ops report. Else the vector is read (free on CPU) and B is its last id + 1: a larger
    batch_size adds only empty clouds, which every op here treats as such."""
    if batch.numel() != rows:
        raise ValueError(f"pointops: {name} must have one entry per row ({rows}), got {batch.numel()}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"pointops: batch_size must be >= 1 (or None), got {batch_size}")
    batch = batch.contiguous()  # (searchsorted warns about a strided one)
    if batch_size is not None and batch.is_cuda and batch_size <= rows:
        return packed.ptr_from_batch(batch, batch_size, name)
    ptr = packed.ptr_from_batch(batch, None, name)
    clouds = ptr.numel() - 1
    if batch_size is not None and batch_size < clouds:
        raise ValueError(
            f"pointops: batch_size is {batch_size} but {name} holds cloud id {clouds - 1}; pass "
            f"batch_size > {clouds - 1} (or None)"
        )
    return ptr


def _searched_pair(x: Tensor, y: Tensor, ptr_x: Tensor | None, ptr_y: Tensor | None):
    """knn's and radius's shared checks: x and y in their working dtype with their values
    checked, their row pointers, and the largest x cloud."""
    xs, ys = _working(x), _working(y, x)
    px, py = _ptr(ptr_x, x.shape[0], x.device, "ptr_x"), _ptr(ptr_y, y.shape[0], y.device, "ptr_y")
    (largest,) = _check_values(
        [(xs, "x"), (ys, "y")], [(px, x.shape[0], "ptr_x"), (py, y.shape[0], "ptr_y")], [_largest_cloud(px)]
    )
    return xs, ys, px, py, largest


def knn_rows(x: Tensor, y: Tensor, px: Tensor, py: Tensor, k: int, cosine: bool):
    """(dist [M, k], idx [M, k]) of the k nearest x rows of each y row (cosine: 1 - cos, where
    a zero row has cosine distance 1 to every row); x and y in their working dtype."""
    if not cosine and _kernel_ok(x):
        return packed.knn(_as_3d(x), px, _as_3d(y), py, k)
    return _bruteforce.knn(x, px, y, py, k, "cosine" if cosine else "l2")


@torch.library.custom_op("pointops_compat::knn", mutates_args=())
def knn(x: Tensor, y: Tensor, ptr_x: Tensor | None, ptr_y: Tensor | None, k: int, cosine: bool) -> Tensor:
    """Edges [2, E] (row 0: y row, row 1: x row) to the k nearest x rows of each y row."""
    x, y = _matrix(x, "x"), _matrix(y, "y")
    _same_features(x, y)
    if k <= 0:
        raise ValueError(f"pointops: k must be > 0, got {k}")
    xs, ys, px, py, largest = _searched_pair(x, y, ptr_x, ptr_y)
    if x.shape[0] == 0 or y.shape[0] == 0:
        return _empty_edges(x.device)
    px, py = _same_clouds(px, py)
    _, idx = knn_rows(xs, ys, px, py, min(k, max(largest, 1)), cosine)
    return _edges_at(idx >= 0, idx)


@torch.library.custom_op("pointops_compat::radius", mutates_args=())
def radius(
    x: Tensor,
    y: Tensor,
    ptr_x: Tensor | None,
    ptr_y: Tensor | None,
    r: float,
    max_num_neighbors: int,
    ignore_same_index: bool,
) -> Tensor:
    """Edges [2, E] (row 0: y row, row 1: x row) to the first max_num_neighbors x rows (ascending)
    with distance < r of each y row (r = inf: every x row of the cloud); ignore_same_index drops
    x row == y row before counting."""
    x, y = _matrix(x, "x"), _matrix(y, "y")
    _same_features(x, y)
    if not r >= 0:
        raise ValueError(f"pointops: r must be >= 0 (inf: every point of the cloud), got {r}")
    if max_num_neighbors <= 0:
        raise ValueError(f"pointops: max_num_neighbors must be > 0, got {max_num_neighbors}")
    xs, ys, px, py, largest = _searched_pair(x, y, ptr_x, ptr_y)
    if x.shape[0] == 0 or y.shape[0] == 0:
        return _empty_edges(x.device)
    px, py = _same_clouds(px, py)
    if not _kernel_ok(xs) or r == float("inf"):
        q, c = _bruteforce.radius(xs, px, ys, py, r * r, max_num_neighbors, ignore_same_index)
        return torch.stack([q, c])
    # no wider than the largest cloud (the packed ball query holds k slots per query)
    k = min(max_num_neighbors + (1 if ignore_same_index else 0), max(largest, 1))
    # the packed ball query keeps each ball's first k rows in ascending order, torch_cluster's rule
    idx, count = packed.ball_query(_as_3d(xs), px, _as_3d(ys), py, float(r), k, inclusive=False)
    hit = torch.arange(k, device=y.device)[None, :] < count[:, None]
    if ignore_same_index:
        hit &= idx != torch.arange(y.shape[0], device=y.device)[:, None]
        hit &= hit.cumsum(1) <= max_num_neighbors
    return _edges_at(hit, idx)


def _edges_at(hit: Tensor, idx: Tensor) -> Tensor:
    """Edges [2, E] (query row, idx value) at the True entries of hit [M, k], row-major: one
    nonzero (one sync) for both rows."""
    flat = hit.reshape(-1).nonzero().squeeze(1)
    return torch.stack([flat // hit.shape[1], idx.reshape(-1)[flat]])


def _ratio(ratio: Tensor, clouds: int, device) -> Tensor:
    if ratio.dtype == torch.bool or ratio.is_complex():
        raise TypeError(f"pointops: ratio must hold real numbers in (0, 1], got {ratio.dtype}")
    if ratio.numel() not in (1, clouds):
        raise ValueError(
            f"pointops: ratio must be a scalar or have one entry per cloud ({clouds}), got {ratio.numel()}"
        )
    return ratio.to(device).reshape(-1)


@torch.library.custom_op("pointops_compat::fps", mutates_args=())
def fps(src: Tensor, ptr: Tensor | None, ratio: Tensor, random_start: bool) -> Tensor:
    """Farthest point sampling of each cloud: ceil(size * ratio) picks per cloud (ratio a scalar
    or one per cloud, in (0, 1]), global rows. The first pick is the cloud's first row, or a
    uniformly random row (torch's generator) with random_start; ties go to the first row in
    cyclic order from the first pick."""
    src = _matrix(src, "src")
    work = _working(src)
    p = _ptr(ptr, src.shape[0], src.device, "ptr")
    counts = p[1:] - p[:-1]
    ratio = _ratio(ratio, counts.numel(), src.device)
    wanted = torch.minimum(torch.ceil(counts.to(torch.float32) * ratio).to(torch.int64), counts)
    ratio_ok = ((ratio > 0) & (ratio <= 1)).all().long()
    total = wanted.sum() if wanted.numel() else p.new_zeros(())
    ratio_ok, total, largest = _check_values(
        [(work, "src")], [(p, src.shape[0], "ptr")], [ratio_ok, total, _largest_cloud(p)]
    )
    if not ratio_ok:
        raise ValueError(f"pointops: ratio must lie in (0, 1], got {ratio.tolist()[:8]}")
    if src.shape[0] == 0:
        return torch.empty(0, dtype=torch.int64, device=src.device)
    sample_ptr = packed.ptr_from_counts(wanted)
    cloud = packed.batch_from_ptr(p, src.shape[0])
    local = torch.arange(src.shape[0], device=src.device) - p[:-1][cloud]
    if random_start:
        start = (torch.rand(counts.numel(), device=src.device) * counts).to(torch.int64)
        start = torch.minimum(start, (counts - 1).clamp_min(0))
        order = p[:-1][cloud] + (local + start[cloud]) % counts[cloud]
        rotated = work[order]
    else:
        order, rotated = None, work
    if _kernel_ok(rotated):
        picks = packed.furthest_point_sample(
            _as_3d(rotated), p, sample_ptr, num_samples=total, max_points=max(largest, 1)
        )
    else:
        picks = _bruteforce.furthest_point_sample(rotated, p, sample_ptr)
    return picks if order is None else order[picks]


@torch.library.custom_op("pointops_compat::nearest", mutates_args=())
def nearest(x: Tensor, y: Tensor, ptr_x: Tensor | None, ptr_y: Tensor | None) -> Tensor:
    """For each x row, the nearest y row of its cloud (-1 when that cloud of y is empty)."""
    x, y = _matrix(x, "x"), _matrix(y, "y")
    _same_features(x, y)
    xs, ys = _working(x), _working(y, x)
    px, py = _ptr(ptr_x, x.shape[0], x.device, "ptr_x"), _ptr(ptr_y, y.shape[0], y.device, "ptr_y")
    if px.numel() != py.numel():
        raise ValueError(f"pointops: ptr_x has {px.numel() - 1} clouds but ptr_y has {py.numel() - 1}")
    _check_values([(xs, "x"), (ys, "y")], [(px, x.shape[0], "ptr_x"), (py, y.shape[0], "ptr_y")])
    if x.shape[0] == 0:
        return torch.empty(0, dtype=torch.int64, device=x.device)
    if y.shape[0] == 0:
        return torch.full((x.shape[0],), -1, dtype=torch.int64, device=x.device)
    _, idx = knn_rows(ys, xs, py, px, 1, False)
    return idx[:, 0].clone()
