"""Exact neighbour search in plain torch, for what the 3-D kernels do not cover: any feature
dimension, the L1 and cosine metrics, farthest point sampling in D != 3.

Brute force over packed clouds (row pointers as in pointops.packed), chunked over the queries so
that one chunk holds about _CHUNK_ELEMENTS candidate coordinates. Results follow the kernels'
order: ascending distance, equal distances by ascending row. Missing slots are -1 / +inf.
Distances are computed as sum_d f(x_d - y_d) (never the |x|^2 + |y|^2 - 2xy expansion, which
cancels), so they are the exact per-pair values of the input dtype. The cosine distance is
1 - u.v of the rows scaled to unit length; a zero row stays zero, so its cosine distance to every
row is 1 (similarity 0), and its neighbours are the first rows of its cloud in index order.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import packed

_CHUNK_ELEMENTS = 1 << 24

METRICS = ("l2", "l1", "cosine")


def unit_rows(t: Tensor) -> Tensor:
    """The rows of t [n, D] scaled to unit length (zero rows stay zero). Each row is divided by
    its largest magnitude first, so that the norm neither overflows nor underflows."""
    scale = t.abs().amax(1, keepdim=True) if t.shape[1] else t.new_zeros(t.shape[0], 1)
    t = t / torch.where(scale > 0, scale, 1)
    norm = t.norm(dim=1, keepdim=True)
    return t / torch.where(norm > 0, norm, 1)


def pair_distances(query: Tensor, cand: Tensor, metric: str) -> Tensor:
    """query [m, D], cand [m, L, D] -> [m, L]: squared L2, L1 or cosine distance 1 - u.v (for
    "cosine" the rows must already be unit_rows)."""
    if metric == "l2":
        diff = cand - query[:, None, :]
        return (diff * diff).sum(-1)
    if metric == "l1":
        return (cand - query[:, None, :]).abs().sum(-1)
    return 1 - (cand * query[:, None, :]).sum(-1)


def smallest_k(dist: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k smallest entries of each row of dist [m, L] in (value, column) order: (values [m, k],
    columns [m, k]). Exact for ties: equal values keep the lower column; NaN counts as +inf, so
    the k columns are always distinct."""
    m, L = dist.shape
    dist = dist.nan_to_num(nan=float("inf"), posinf=float("inf"), neginf=float("-inf"))
    kth = torch.topk(dist, k, dim=1, largest=False).values[:, -1:]
    below = dist < kth
    at = dist == kth
    room = k - below.sum(1, keepdim=True)
    take = below | (at & (at.cumsum(1) <= room))
    slot = torch.where(take, take.cumsum(1) - 1, k)  # taken columns fill slots 0..k-1 in column order
    columns = torch.arange(L, device=dist.device).expand(m, L)
    picked = torch.zeros((m, k + 1), dtype=torch.int64, device=dist.device)
    picked.scatter_(1, slot, columns)  # duplicates only land in the spare slot k
    picked = picked[:, :k]
    values = dist.gather(1, picked)
    order = torch.sort(values, dim=1, stable=True).indices
    return values.gather(1, order), picked.gather(1, order)


def _chunks(ptr_x: Tensor, ptr_y: Tensor, rows: int, dim: int):
    """Yields (q0, q1, starts, lengths, L) per chunk of query rows: the first searched row and
    the size of each query's cloud, and the largest cloud size L (one device read)."""
    counts = ptr_x[1:] - ptr_x[:-1]
    L = int(counts.max()) if counts.numel() else 0
    if L == 0 or rows == 0:
        return
    batch_y = packed.batch_from_ptr(ptr_y, rows)
    starts, lengths = ptr_x[:-1][batch_y], counts[batch_y]
    step = max(1, _CHUNK_ELEMENTS // (L * max(dim, 1)))
    for q0 in range(0, rows, step):
        q1 = min(rows, q0 + step)
        yield q0, q1, starts[q0:q1], lengths[q0:q1], L


def _candidates(x: Tensor, starts: Tensor, lengths: Tensor, L: int) -> tuple[Tensor, Tensor]:
    cols = torch.arange(L, device=x.device)
    valid = cols[None, :] < lengths[:, None]
    # rows past a cloud's end read row 0 (masked out by `valid`); not clamp_max(N - 1): under
    # torch.jit.trace N - 1 becomes a CPU tensor, which a CUDA clamp refuses
    rows = torch.where(valid, starts[:, None] + cols[None, :], 0)
    return rows, valid


def knn(x: Tensor, ptr_x: Tensor, y: Tensor, ptr_y: Tensor, k: int, metric: str = "l2"):
    """The k nearest rows of x (same cloud) of each row of y: (dist [M, k], idx [M, k] int64),
    dist squared for "l2". x [N, D], y [M, D] with the same D."""
    M = y.shape[0]
    if metric == "cosine":
        x, y = unit_rows(x), unit_rows(y)
    dist = y.new_full((M, k), float("inf"))
    idx = torch.full((M, k), -1, dtype=torch.int64, device=y.device)
    for q0, q1, starts, lengths, L in _chunks(ptr_x, ptr_y, M, x.shape[1]):
        rows, valid = _candidates(x, starts, lengths, L)
        d = pair_distances(y[q0:q1], x[rows], metric).masked_fill(~valid, float("inf"))
        kk = min(k, L)
        dk, ck = smallest_k(d, kk)
        ok = valid.gather(1, ck)
        dist[q0:q1, :kk] = torch.where(ok, dk, float("inf"))
        idx[q0:q1, :kk] = torch.where(ok, rows.gather(1, ck), -1)
    return dist, idx


def radius(
    x: Tensor,
    ptr_x: Tensor,
    y: Tensor,
    ptr_y: Tensor,
    r2: float,
    max_neighbors: int,
    ignore_same_index: bool,
) -> tuple[Tensor, Tensor]:
    """The first max_neighbors rows of x (ascending) with squared distance < r2 of each row of y
    (r2 = inf: every row of the cloud, whatever the distance): (query rows, x rows) of every
    pair, ordered by query row then x row."""
    M = y.shape[0]
    out_q, out_x = [], []
    for q0, q1, starts, lengths, L in _chunks(ptr_x, ptr_y, M, x.shape[1]):
        rows, valid = _candidates(x, starts, lengths, L)
        hit = valid
        if r2 != float("inf"):
            hit = hit & (pair_distances(y[q0:q1], x[rows], "l2") < r2)
        if ignore_same_index:
            hit &= rows != torch.arange(q0, q1, device=y.device)[:, None]
        hit &= hit.cumsum(1) <= max_neighbors
        q, c = hit.nonzero(as_tuple=True)
        out_q.append(q + q0)
        out_x.append(rows[q, c])
    if not out_q:
        empty = torch.empty(0, dtype=torch.int64, device=y.device)
        return empty, empty
    return torch.cat(out_q), torch.cat(out_x)


def furthest_point_sample(x: Tensor, ptr: Tensor, sample_ptr: Tensor) -> Tensor:
    """Farthest point sampling of each cloud in any dimension, starting at its first row; ties go
    to the lower row; global rows [sample_ptr[-1]], -1 past a cloud's size."""
    counts = ptr[1:] - ptr[:-1]
    wanted = sample_ptr[1:] - sample_ptr[:-1]
    B = counts.numel()
    total = int(sample_ptr[-1]) if B else 0
    out = torch.full((total,), -1, dtype=torch.int64, device=x.device)
    if B == 0 or total == 0:
        return out
    L, K = int(counts.max()), int(wanted.max())
    if L == 0:
        return out
    rows, valid = _candidates(x, ptr[:-1], counts, L)
    cloud = x[rows]  # [B, L, D]
    best = torch.where(valid, float("inf"), -1.0).to(x.dtype)  # invalid columns never win
    current = torch.zeros(B, dtype=torch.int64, device=x.device)
    picks = [current]
    batch = torch.arange(B, device=x.device)
    for _ in range(1, K):
        diff = cloud - cloud[batch, current][:, None, :]
        best = torch.where(valid, torch.minimum(best, (diff * diff).sum(-1)), best)
        current = best.argmax(1)  # the first maximum: ties to the lower row
        picks.append(current)
    local = torch.stack(picks, 1)  # [B, K]
    slot = torch.arange(K, device=x.device)[None, :]
    keep = (slot < wanted[:, None]) & (slot < counts[:, None])
    dest = sample_ptr[:-1][:, None] + slot
    out[dest[keep]] = (ptr[:-1][:, None] + local)[keep]
    return out
