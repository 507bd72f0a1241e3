"""Packed point batches: every cloud of a batch concatenated along the first dimension.

A packed batch is points [P, 3] (features [P, C], channels last) plus a row pointer `ptr`:
int64 [B + 1], ptr[0] = 0, nondecreasing, ptr[B] = P; cloud b is rows ptr[b] .. ptr[b+1]-1.
Queries come as another packed set (query [Q, 3], query_ptr [B + 1]) with the same B; it may be
the same set. Neighbour indices are global rows of the searched set (int64, -1 = no point), so
they index `feat[idx]` directly.

Other layouts convert to `ptr`: Pointcept's `offset` (cumulative ends, no leading 0), PyG's
`batch` (cloud id per row, sorted), per-cloud counts (mmcv/OpenPCDet "stack" ops) and Open3D's
`row_splits` (which is `ptr`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import ops

__all__ = [
    "ball_query",
    "batch_from_ptr",
    "counts_from_ptr",
    "furthest_point_sample",
    "gather",
    "interpolate",
    "knn",
    "offset_from_ptr",
    "ptr_from_batch",
    "ptr_from_counts",
    "ptr_from_offset",
    "three_nn",
]


# ---------------------------------------------------------------------------------------------
# layout conversions (no host sync, except ptr_from_batch without num_clouds)

def _index_vector(t, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in (torch.int32, torch.int64) or t.dim() != 1:
        raise ValueError(f"pointops: {name} must be a 1-D int32 or int64 tensor, got {t.dtype} "
                         f"with shape {list(t.shape)}")
    return t.long()


def ptr_from_offset(offset: Tensor) -> Tensor:
    """Pointcept's offset (cumulative cloud ends, [B]) -> ptr [B + 1]."""
    offset = _index_vector(offset, "offset")
    return torch.cat([offset.new_zeros(1), offset])


def offset_from_ptr(ptr: Tensor) -> Tensor:
    """ptr [B + 1] -> Pointcept's offset [B] (int32, as Pointcept keeps it)."""
    return _index_vector(ptr, "ptr")[1:].to(torch.int32)


def ptr_from_counts(counts: Tensor) -> Tensor:
    """Points per cloud [B] -> ptr [B + 1]."""
    counts = _index_vector(counts, "counts")
    return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])


def counts_from_ptr(ptr: Tensor) -> Tensor:
    """ptr [B + 1] -> points per cloud [B]."""
    ptr = _index_vector(ptr, "ptr")
    return ptr[1:] - ptr[:-1]


def ptr_from_batch(batch: Tensor, num_clouds: int | None = None) -> Tensor:
    """PyG's batch vector (cloud id of each row, sorted) -> ptr [num_clouds + 1]. Without
    num_clouds it is batch[-1] + 1, which reads the device (one sync)."""
    batch = _index_vector(batch, "batch")
    if num_clouds is None:
        num_clouds = int(batch[-1]) + 1 if batch.numel() else 0
    bounds = torch.arange(num_clouds + 1, device=batch.device, dtype=torch.int64)
    return torch.searchsorted(batch, bounds, right=False)


def batch_from_ptr(ptr: Tensor, total: int | None = None) -> Tensor:
    """ptr [B + 1] -> the cloud id of each of the `total` rows (total = ptr[-1], read from the
    device when not given)."""
    ptr = _index_vector(ptr, "ptr")
    counts = ptr[1:] - ptr[:-1]
    ids = torch.arange(counts.numel(), device=ptr.device)
    return torch.repeat_interleave(ids, counts, output_size=total)


# ---------------------------------------------------------------------------------------------
# operators

def _clouds(ptr: Tensor) -> list[tuple[int, int]]:
    bounds = ptr.tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def knn(xyz: Tensor, ptr: Tensor, query: Tensor, query_ptr: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k nearest points of each query row within its own cloud: (dist2 [Q, k], idx [Q, k]),
    idx global rows of xyz, sorted by (dist2, index); missing slots are -1 / +inf."""
    ptr, query_ptr = _index_vector(ptr, "ptr"), _index_vector(query_ptr, "query_ptr")
    dist2 = query.new_full((query.shape[0], k), float("inf"))
    idx = torch.full((query.shape[0], k), -1, dtype=torch.int64, device=query.device)
    for (p0, p1), (q0, q1) in zip(_clouds(ptr), _clouds(query_ptr), strict=True):
        if q1 > q0 and p1 > p0:
            d, i = ops.knn(xyz[None, p0:p1], query[None, q0:q1], k)
            dist2[q0:q1] = d[0]
            idx[q0:q1] = torch.where(i[0] >= 0, i[0] + p0, i[0])
    return dist2, idx


def three_nn(unknown: Tensor, unknown_ptr: Tensor, known: Tensor, known_ptr: Tensor):
    """The 3 nearest `known` rows of each `unknown` row: (dist2 [n, 3], idx [n, 3])."""
    return knn(known, known_ptr, unknown, unknown_ptr, 3)


def ball_query(xyz: Tensor, ptr: Tensor, query: Tensor, query_ptr: Tensor, radius: float, k: int,
               return_dist2: bool = False):
    """The first k points (ascending row) within `radius` (inclusive) of each query row:
    (idx [Q, k], count [Q]) (+ dist2 [Q, k]); short balls repeat their first hit, empty ones
    are -1 / count 0 / +inf."""
    ptr, query_ptr = _index_vector(ptr, "ptr"), _index_vector(query_ptr, "query_ptr")
    idx = torch.full((query.shape[0], k), -1, dtype=torch.int64, device=query.device)
    count = torch.zeros(query.shape[0], dtype=torch.int64, device=query.device)
    dist2 = query.new_full((query.shape[0], k), float("inf"))
    for (p0, p1), (q0, q1) in zip(_clouds(ptr), _clouds(query_ptr), strict=True):
        if q1 > q0 and p1 > p0:
            i, c, d = ops.ball_query(xyz[None, p0:p1], query[None, q0:q1], radius, k, return_dist2=True)
            idx[q0:q1] = torch.where(i[0] >= 0, i[0] + p0, i[0])
            count[q0:q1] = c[0]
            dist2[q0:q1] = d[0]
    return (idx, count, dist2) if return_dist2 else (idx, count)


def furthest_point_sample(xyz: Tensor, ptr: Tensor, sample_ptr: Tensor) -> Tensor:
    """Farthest point sampling of each cloud: cloud b gets sample_ptr[b+1] - sample_ptr[b]
    picks, written to rows sample_ptr[b] .. of the result (global rows of xyz, int64), starting
    at the cloud's first point. Slots past a cloud's size are -1."""
    ptr, sample_ptr = _index_vector(ptr, "ptr"), _index_vector(sample_ptr, "sample_ptr")
    samples = _clouds(sample_ptr)
    out = torch.full((samples[-1][1] if samples else 0,), -1, dtype=torch.int64, device=xyz.device)
    for (p0, p1), (s0, s1) in zip(_clouds(ptr), samples, strict=True):
        if s1 > s0 and p1 > p0:
            i = ops.furthest_point_sample(xyz[None, p0:p1], s1 - s0)[0]
            out[s0:s1] = torch.where(i >= 0, i + p0, i)
    return out


def gather(feat: Tensor, idx: Tensor) -> Tensor:
    """Rows of feat [P, C] at idx (any shape, global rows, -1 gives zeros): [*idx.shape, C]."""
    safe = idx.clamp_min(0)
    out = feat[safe.reshape(-1)].reshape(*idx.shape, feat.shape[1])
    return out * (idx >= 0).unsqueeze(-1).to(out.dtype)


def interpolate(feat: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    """sum_t weight[q, t] * feat[idx[q, t]]: [Q, C] (idx -1 contributes 0)."""
    return (gather(feat, idx) * weight.unsqueeze(-1)).sum(1)
