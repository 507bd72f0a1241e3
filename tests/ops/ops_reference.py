"""Plain-PyTorch references for the pointops operators, written for clarity, not speed.

Distances use the same formula and rounding as the kernels (dx*dx + dy*dy + dz*dz, evaluated
left to right in the input's dtype), so on float64 inputs they are the float64 reference and on
float32 inputs they reproduce float32 rounding exactly.
"""

from __future__ import annotations

import torch


def squared_distances(points: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """points [n, 3], q [3] -> [n]."""
    d = points - q
    return d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2]


def _count(lengths, b, n):
    return n if lengths is None else int(lengths[b])


def fps(xyz, k, lengths=None, start=0):
    B, N, _ = xyz.shape
    out = torch.full((B, k), -1, dtype=torch.int64)
    for b in range(B):
        n = _count(lengths, b, N)
        if n == 0:
            continue
        pts = xyz[b, :n].cpu()
        mind = torch.full((n,), float("inf"), dtype=xyz.dtype)
        current = min(start, n - 1)
        out[b, 0] = current
        for s in range(1, min(k, n)):
            mind = torch.minimum(mind, squared_distances(pts, pts[current]))
            current = int(torch.argmax(mind))  # first maximum = lowest index
            out[b, s] = current
    return out


def ball_query(xyz, query, radius, k, lengths=None, query_lengths=None, inclusive=True):
    B, N, _ = xyz.shape
    M = query.shape[1]
    idx = torch.full((B, M, k), -1, dtype=torch.int64)
    count = torch.zeros((B, M), dtype=torch.int64)
    dist2 = torch.full((B, M, k), float("inf"), dtype=xyz.dtype)
    r2 = torch.tensor(radius * radius, dtype=torch.float64).to(xyz.dtype)
    for b in range(B):
        n = _count(lengths, b, N)
        for m in range(_count(query_lengths, b, M)):
            d2 = squared_distances(xyz[b, :n].cpu(), query[b, m].cpu())
            hit = (d2 <= r2) if inclusive else (d2 < r2)
            hits = torch.nonzero(hit).flatten()[:k]
            c = hits.numel()
            count[b, m] = c
            if c:
                idx[b, m, :c] = hits
                idx[b, m, c:] = hits[0]
                dist2[b, m, :c] = d2[hits]
                dist2[b, m, c:] = d2[hits[0]]
    return idx, count, dist2


def knn(xyz, query, k, lengths=None, query_lengths=None):
    B, N, _ = xyz.shape
    M = query.shape[1]
    idx = torch.full((B, M, k), -1, dtype=torch.int64)
    dist2 = torch.full((B, M, k), float("inf"), dtype=xyz.dtype)
    for b in range(B):
        n = _count(lengths, b, N)
        for m in range(_count(query_lengths, b, M)):
            d2 = squared_distances(xyz[b, :n].cpu(), query[b, m].cpu())
            order = torch.sort(d2, stable=True).indices[:k]  # stable: equal d2 by ascending index
            idx[b, m, : order.numel()] = order
            dist2[b, m, : order.numel()] = d2[order]
    return dist2, idx


def gather(feat, idx, weight=None):
    """feat [B,C,N], idx [B,P,T] (-1 = none), weight [B,P,T] or None -> [B,C,P] (differentiable
    w.r.t. feat and weight through plain torch ops)."""
    B, C, N = feat.shape
    if N == 0:  # only -1 indices can address an empty dimension
        return feat.new_zeros((B, C, idx.shape[1]))
    valid = idx >= 0
    safe = idx.clamp_min(0)
    picked = torch.gather(
        feat.unsqueeze(2).expand(B, C, idx.shape[1], N), 3, safe.unsqueeze(1).expand(B, C, *idx.shape[1:])
    )  # [B,C,P,T]
    w = torch.ones_like(idx, dtype=feat.dtype) if weight is None else weight
    w = torch.where(valid, w, torch.zeros_like(w))
    return (picked * w.unsqueeze(1)).sum(-1)


def knn_dist2_differentiable(xyz, query, idx):
    """Squared distances to the given neighbour indices via plain torch ops (for gradients)."""
    B, M, K = idx.shape
    safe = idx.clamp_min(0).reshape(B, M * K, 1).expand(B, M * K, 3)
    nb = torch.gather(xyz, 1, safe).view(B, M, K, 3)
    d = query.unsqueeze(2) - nb
    d2 = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2]
    return torch.where(idx >= 0, d2, torch.full_like(d2, float("inf")))
