"""The operators behind the torch_cluster and pyg-lib layers, registered as torch ops
(`torch.ops.pointops_compat.*`) so that TorchScript-compiled callers can use them, as they use
torch_cluster's. Clouds are given by row pointers (ptr, int64 [B + 1]); None means one cloud.

Routing: points of dimension <= 3 (zero-padded to 3, which leaves distances unchanged) go
through pointops' kernels: pointops.packed for kNN and FPS, the padded ball-query op with the
strict test d < r for radius. Other dimensions and the cosine metric use the exact chunked
search of _bruteforce. Both order neighbours by (distance, row). On CPU, float16/bfloat16 are
searched in float32 (pointops' CPU kernels take float32/float64).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import packed
from . import _bruteforce

_KERNEL_DTYPES_CPU = (torch.float32, torch.float64)
_KERNEL_DTYPES_CUDA = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _matrix(t: Tensor, name: str) -> Tensor:
    t = t.view(-1, 1) if t.dim() == 1 else t
    if t.dim() != 2:
        raise ValueError(f"pointops: {name} must be a [N, D] (or [N]) tensor, got shape {list(t.shape)}")
    if not t.is_floating_point():
        raise TypeError(f"pointops: {name} must be a floating-point tensor, got {t.dtype}")
    return t.contiguous()


def _working_dtype(t: Tensor) -> torch.dtype:
    if t.is_cuda:
        return t.dtype
    return t.dtype if t.dtype in _KERNEL_DTYPES_CPU else torch.float32


def _as_3d(t: Tensor) -> Tensor:
    """Rows padded with zero columns to 3-D (only for D <= 3)."""
    if t.shape[1] == 3:
        return t
    return torch.cat([t, t.new_zeros(t.shape[0], 3 - t.shape[1])], 1)


def _kernel_ok(t: Tensor) -> bool:
    dtypes = _KERNEL_DTYPES_CUDA if t.is_cuda else _KERNEL_DTYPES_CPU
    return t.shape[1] <= 3 and t.dtype in dtypes and (t.is_cuda or t.is_cpu)


def _ptr(ptr: Tensor | None, rows: int, device, name: str) -> Tensor:
    if ptr is None:
        return torch.tensor([0, rows], dtype=torch.int64, device=device)
    if ptr.dim() != 1 or ptr.numel() < 2:
        raise ValueError(f"pointops: {name} must be a 1-D row pointer [B + 1], got shape {list(ptr.shape)}")
    ptr = ptr.to(device=device, dtype=torch.int64)
    steps = ptr[1:] - ptr[:-1]
    first, low, last = torch.stack([ptr[0], steps.min(), ptr[-1]]).tolist()
    if first != 0 or low < 0 or last != rows:
        raise ValueError(
            f"pointops: {name} must start at 0, be nondecreasing and end at {rows} (the rows "
            f"of its points); is the batch vector sorted?"
        )
    return ptr


def _pair_ptrs(x: Tensor, y: Tensor, ptr_x, ptr_y):
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"pointops: x and y must have the same feature dimension, got {x.shape[1]} and {y.shape[1]}"
        )
    if x.device != y.device:
        raise ValueError(f"pointops: x is on {x.device} but y is on {y.device}")
    px = _ptr(ptr_x, x.shape[0], x.device, "ptr_x")
    py = _ptr(ptr_y, y.shape[0], y.device, "ptr_y")
    # a cloud present in one set only has nothing to match: extend the shorter ptr with empty clouds
    if px.numel() < py.numel():
        px = torch.cat([px, px[-1:].expand(py.numel() - px.numel())])
    elif py.numel() < px.numel():
        py = torch.cat([py, py[-1:].expand(px.numel() - py.numel())])
    return px, py


def _empty_edges(device) -> Tensor:
    return torch.empty((2, 0), dtype=torch.int64, device=device)


def knn_rows(x: Tensor, y: Tensor, px: Tensor, py: Tensor, k: int, cosine: bool):
    """(dist [M, k], idx [M, k]) of the k nearest x rows of each y row (cosine: 1 - cos)."""
    work = _working_dtype(x)
    xs, ys = x.to(work), y.to(work)
    if not cosine and _kernel_ok(xs):
        return packed.knn(_as_3d(xs), px, _as_3d(ys), py, k)
    return _bruteforce.knn(xs, px, ys, py, k, "cosine" if cosine else "l2")


@torch.library.custom_op("pointops_compat::knn", mutates_args=())
def knn(x: Tensor, y: Tensor, ptr_x: Tensor | None, ptr_y: Tensor | None, k: int, cosine: bool) -> Tensor:
    """Edges [2, E] (row 0: y row, row 1: x row) to the k nearest x rows of each y row."""
    x, y = _matrix(x, "x"), _matrix(y, "y")
    if k <= 0:
        raise ValueError(f"pointops: k must be > 0, got {k}")
    if x.shape[0] == 0 or y.shape[0] == 0:
        return _empty_edges(x.device)
    px, py = _pair_ptrs(x, y, ptr_x, ptr_y)
    _, idx = knn_rows(x, y, px, py, k, cosine)
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
    with distance < r of each y row; ignore_same_index drops x row == y row before counting."""
    x, y = _matrix(x, "x"), _matrix(y, "y")
    if max_num_neighbors <= 0 or x.shape[0] == 0 or y.shape[0] == 0:
        return _empty_edges(x.device)
    if not r >= 0:
        raise ValueError(f"pointops: r must be >= 0, got {r}")
    px, py = _pair_ptrs(x, y, ptr_x, ptr_y)
    work = _working_dtype(x)
    xs, ys = x.to(work), y.to(work)
    if not _kernel_ok(xs):
        r2 = torch.tensor(r * r, dtype=work, device=x.device)
        q, c = _bruteforce.radius(xs, px, ys, py, r2, max_num_neighbors, ignore_same_index)
        return torch.stack([q, c])
    k = max_num_neighbors + (1 if ignore_same_index else 0)
    if k > 64:  # a large cap: no wider than the largest cloud (one sync; the edge count needs one anyway)
        k = min(k, max(int((px[1:] - px[:-1]).max()), 1))
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


@torch.library.custom_op("pointops_compat::fps", mutates_args=())
def fps(src: Tensor, ptr: Tensor | None, ratio: Tensor, random_start: bool) -> Tensor:
    """Farthest point sampling of each cloud: ceil(size * ratio) picks per cloud (ratio a scalar
    or one per cloud, in (0, 1]), global rows. The first pick is the cloud's first row, or a
    uniformly random row (torch's generator) with random_start; ties go to the first row in
    cyclic order from the first pick."""
    src = _matrix(src, "src")
    p = _ptr(ptr, src.shape[0], src.device, "ptr")
    counts = p[1:] - p[:-1]
    ratio = ratio.to(src.device)
    if ratio.numel() not in (1, counts.numel()):
        raise ValueError(
            f"pointops: ratio must be a scalar or have one entry per cloud ({counts.numel()}), "
            f"got {ratio.numel()}"
        )
    if not bool(((ratio > 0) & (ratio <= 1)).all()):
        raise ValueError("pointops: ratio must lie in (0, 1]")
    wanted = torch.ceil(counts.to(torch.float32) * ratio.reshape(-1)).to(torch.int64)
    wanted = torch.minimum(wanted, counts)
    sample_ptr = packed.ptr_from_counts(wanted)
    if src.shape[0] == 0:
        return torch.empty(0, dtype=torch.int64, device=src.device)
    cloud = packed.batch_from_ptr(p, src.shape[0])
    local = torch.arange(src.shape[0], device=src.device) - p[:-1][cloud]
    if random_start:
        start = (torch.rand(counts.numel(), device=src.device) * counts).to(torch.int64)
        start = torch.minimum(start, (counts - 1).clamp_min(0))
        order = p[:-1][cloud] + (local + start[cloud]) % counts[cloud]
        rotated = src[order]
    else:
        order, rotated = None, src
    work = _working_dtype(rotated)
    rotated = rotated.to(work)
    if _kernel_ok(rotated):
        total, largest = torch.stack([sample_ptr[-1], counts.max()]).tolist()  # one read of the device
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
    if x.shape[0] == 0:
        return torch.empty(0, dtype=torch.int64, device=x.device)
    if x.shape[1] != y.shape[1] or x.device != y.device:
        raise ValueError(
            f"pointops: x ({x.shape[1]} features, {x.device}) and y ({y.shape[1]} features, "
            f"{y.device}) must match"
        )
    px = _ptr(ptr_x, x.shape[0], x.device, "ptr_x")
    py = _ptr(ptr_y, y.shape[0], y.device, "ptr_y")
    if px.numel() != py.numel():
        raise ValueError(f"pointops: ptr_x has {px.numel() - 1} clouds but ptr_y has {py.numel() - 1}")
    if y.shape[0] == 0:
        return torch.full((x.shape[0],), -1, dtype=torch.int64, device=x.device)
    _, idx = knn_rows(y, x, py, px, 1, False)
    return idx[:, 0].clone()
