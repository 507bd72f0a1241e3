"""The native pointops API: typed functions over torch.ops.pointops.*.

Conventions: points are [B, N, 3], features channels-first [B, C, N]; indices are int64 with -1
meaning "no point"; `lengths` (int32 or int64 [B]) gives the number of valid points of each
cloud in a padded batch. Float32/float64 run on CPU, float32/float16/bfloat16 on CUDA (with
float32 accumulation). Inputs may be non-contiguous. Bad input raises ValueError/TypeError
naming the argument.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_ops = torch.ops.pointops

_CPU_FLOATS = (torch.float32, torch.float64)
_CUDA_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_INDEX_DTYPES = (torch.int32, torch.int64)


# ---------------------------------------------------------------------------------------------
# argument checks

def _data_checks_enabled(t: Tensor) -> bool:
    """Value checks (finite coordinates, index ranges) need the data: skip them while tracing
    for torch.compile and during CUDA graph capture, where reading values is not allowed."""
    if torch.compiler.is_compiling():
        return False
    if t.is_cuda and torch.cuda.is_current_stream_capturing():
        return False
    return True


# Whether this binary has CUDA kernels (CUDART_VERSION it was built with, 0 for CPU only).
_HAS_CUDA_KERNELS = int(_ops.cuda_runtime_version()) > 0


def _check_device_type(device_type: str, name: str, has_cuda_kernels: bool) -> None:
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"pointops: {name} is on device type {device_type!r}; use a CPU or CUDA tensor")
    if device_type == "cuda" and not has_cuda_kernels:
        raise ValueError(f"pointops: {name} is a CUDA tensor but this pointops build has no CUDA "
                         "kernels; reinstall it where nvcc is available (or with POINTOPS_CUDA=1)")


def _tensor(t, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(t).__name__}")
    _check_device_type(t.device.type, name, _HAS_CUDA_KERNELS)
    return t


def _float_tensor(t, name: str) -> Tensor:
    t = _tensor(t, name)
    allowed = _CUDA_FLOATS if t.is_cuda else _CPU_FLOATS
    if t.dtype not in allowed:
        hint = ("float32/float16/bfloat16 (or float64)" if t.is_cuda else
                "float32 or float64 (float16/bfloat16 run on CUDA only)")
        raise TypeError(f"pointops: {name} has dtype {t.dtype}; use {hint}")
    return t


def _points(t, name: str) -> Tensor:
    t = _float_tensor(t, name)
    if t.dim() != 3 or t.shape[2] != 3:
        raise ValueError(f"pointops: {name} must have shape [B, N, 3], got {list(t.shape)}")
    return t


def _check_finite(t: Tensor, name: str) -> None:
    if t.numel() and _data_checks_enabled(t) and not bool(torch.isfinite(t).all()):
        raise ValueError(f"pointops: {name} contains nan or inf; coordinates must be finite")


def _same_device(ref: Tensor, ref_name: str, t: Tensor, name: str) -> None:
    if t.device != ref.device:
        raise ValueError(f"pointops: {name} is on {t.device} but {ref_name} is on {ref.device}; "
                         "move them to the same device")


def _index(t, name: str, ref: Tensor, ref_name: str) -> Tensor:
    t = _tensor(t, name)
    if t.dtype not in _INDEX_DTYPES:
        raise TypeError(f"pointops: {name} has dtype {t.dtype}; use int32 or int64")
    _same_device(ref, ref_name, t, name)
    return t.long()


def _lengths(lengths, name: str, points: Tensor, points_name: str) -> Tensor | None:
    if lengths is None:
        return None
    lengths = _index(lengths, name, points, points_name)
    if lengths.dim() != 1 or lengths.shape[0] != points.shape[0]:
        raise ValueError(f"pointops: {name} must have shape [B] = [{points.shape[0]}], got "
                         f"{list(lengths.shape)}")
    if lengths.numel() and _data_checks_enabled(lengths):
        low, high = int(lengths.min()), int(lengths.max())
        if low < 0 or high > points.shape[1]:
            raise ValueError(f"pointops: {name} values must lie in 0..{points.shape[1]} (the size "
                             f"of {points_name}'s point dimension), got {low}..{high}")
    return lengths


def _index_range(idx: Tensor, name: str, n: int) -> None:
    if idx.numel() and _data_checks_enabled(idx):
        low, high = int(idx.min()), int(idx.max())
        if low < -1 or high >= n:
            raise ValueError(f"pointops: {name} values must lie in -1..{n - 1} (-1 = no point), "
                             f"got {low}..{high}")


def _positive_int(k, name: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"pointops: {name} must be an int, got {type(k).__name__}")
    if k <= 0:
        raise ValueError(f"pointops: {name} must be > 0, got {k}")
    return k


def _pair(xyz, query, names=("xyz", "query")):
    """Checks a point set and its queries; `names` are the caller's argument names."""
    xyz_name, query_name = names
    xyz = _points(xyz, xyz_name)
    query = _points(query, query_name)
    _same_device(xyz, xyz_name, query, query_name)
    if query.dtype != xyz.dtype:
        raise TypeError(f"pointops: {query_name} has dtype {query.dtype} but {xyz_name} has {xyz.dtype}")
    if query.shape[0] != xyz.shape[0]:
        raise ValueError(f"pointops: {query_name} has batch size {query.shape[0]} but {xyz_name} has "
                         f"{xyz.shape[0]}")
    _check_finite(xyz, xyz_name)
    _check_finite(query, query_name)
    return xyz, query


# ---------------------------------------------------------------------------------------------
# sampling and neighbour search

def furthest_point_sample(xyz: Tensor, k: int, lengths: Tensor | None = None, start: int = 0) -> Tensor:
    """Farthest point sampling: int64 indices [B, k] into xyz [B, N, 3].

    The first pick is `start` (clamped to the cloud), each next one the point farthest from the
    picked set; equal distances go to the lowest index. Slots past a cloud's point count are -1.
    Once every point lies at distance 0 from the picked set (duplicate points), the lowest index
    is picked again.
    """
    xyz = _points(xyz, "xyz")
    k = _positive_int(k, "k")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"pointops: start must be an int >= 0, got {start!r}")
    _check_finite(xyz, "xyz")
    lengths = _lengths(lengths, "lengths", xyz, "xyz")
    return _ops.furthest_point_sample(xyz, k, lengths, start)


def ball_query(xyz: Tensor, query: Tensor, radius: float, k: int, lengths: Tensor | None = None,
               query_lengths: Tensor | None = None, return_dist2: bool = False):
    """Points of xyz within `radius` (inclusive: d^2 <= radius^2) of each query point.

    Returns (idx [B, M, k] int64, count [B, M] int64), plus squared distances [B, M, k] when
    return_dist2. idx holds the first k hits in index order; a ball with fewer than k hits is
    padded by repeating its first hit, an empty ball is all -1 (dist2 +inf). Squared distances
    are differentiable w.r.t. xyz and query.
    """
    xyz, query = _pair(xyz, query)
    if isinstance(radius, bool) or not isinstance(radius, (int, float)):
        raise TypeError(f"pointops: radius must be a number, got {type(radius).__name__}")
    if not math.isfinite(radius) or radius < 0:
        raise ValueError(f"pointops: radius must be finite and >= 0, got {radius}")
    k = _positive_int(k, "k")
    lengths = _lengths(lengths, "lengths", xyz, "xyz")
    query_lengths = _lengths(query_lengths, "query_lengths", query, "query")
    idx, count, dist2 = _ops.ball_query(xyz, query, float(radius), k, lengths, query_lengths,
                                        True, bool(return_dist2))
    return (idx, count, dist2) if return_dist2 else (idx, count)


def knn(xyz: Tensor, query: Tensor, k: int, lengths: Tensor | None = None,
        query_lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """k nearest neighbours in xyz of each query point: (dist2 [B, M, k], idx [B, M, k] int64),
    sorted by ascending squared distance, equal distances by ascending index. Slots beyond a
    cloud's point count hold idx -1 and dist2 +inf. dist2 is differentiable w.r.t. xyz and query.
    """
    xyz, query = _pair(xyz, query)
    k = _positive_int(k, "k")
    lengths = _lengths(lengths, "lengths", xyz, "xyz")
    query_lengths = _lengths(query_lengths, "query_lengths", query, "query")
    return _ops.knn(xyz, query, k, lengths, query_lengths)


def three_nn(unknown: Tensor, known: Tensor) -> tuple[Tensor, Tensor]:
    """The 3 nearest `known` points of each `unknown` point: (dist2 [B, n, 3], idx [B, n, 3])."""
    known, unknown = _pair(known, unknown, ("known", "unknown"))
    return _ops.knn(known, unknown, 3, None, None)


# ---------------------------------------------------------------------------------------------
# gathering

def _features(feat, name: str = "feat") -> Tensor:
    feat = _float_tensor(feat, name)
    if feat.dim() != 3:
        raise ValueError(f"pointops: {name} must have shape [B, C, N], got {list(feat.shape)}")
    return feat


def gather_points(feat: Tensor, idx: Tensor) -> Tensor:
    """out[b, c, m] = feat[b, c, idx[b, m]]: [B, C, M]; idx -1 gives 0."""
    feat = _features(feat)
    idx = _index(idx, "idx", feat, "feat")
    if idx.dim() != 2 or idx.shape[0] != feat.shape[0]:
        raise ValueError(f"pointops: idx must have shape [B, M] with B = {feat.shape[0]}, got "
                         f"{list(idx.shape)}")
    _index_range(idx, "idx", feat.shape[2])
    return _ops.gather(feat, idx.unsqueeze(-1), None)


def group_points(feat: Tensor, idx: Tensor) -> Tensor:
    """out[b, c, m, j] = feat[b, c, idx[b, m, j]]: [B, C, M, K]; idx -1 gives 0."""
    feat = _features(feat)
    idx = _index(idx, "idx", feat, "feat")
    if idx.dim() != 3 or idx.shape[0] != feat.shape[0]:
        raise ValueError(f"pointops: idx must have shape [B, M, K] with B = {feat.shape[0]}, got "
                         f"{list(idx.shape)}")
    _index_range(idx, "idx", feat.shape[2])
    B, M, K = idx.shape
    out = _ops.gather(feat, idx.reshape(B, M * K, 1), None)
    return out.view(B, feat.shape[1], M, K)


def three_interpolate(feat: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    """out[b, c, i] = sum_j weight[b, i, j] * feat[b, c, idx[b, i, j]]: [B, C, n].
    Differentiable w.r.t. feat and weight; idx -1 contributes 0."""
    feat = _features(feat)
    idx = _index(idx, "idx", feat, "feat")
    weight = _float_tensor(weight, "weight")
    _same_device(feat, "feat", weight, "weight")
    if idx.dim() != 3 or idx.shape[0] != feat.shape[0]:
        raise ValueError(f"pointops: idx must have shape [B, n, T] with B = {feat.shape[0]}, got "
                         f"{list(idx.shape)}")
    if weight.shape != idx.shape:
        raise ValueError(f"pointops: weight must have the shape of idx {list(idx.shape)}, got "
                         f"{list(weight.shape)}")
    if weight.dtype != feat.dtype:
        raise TypeError(f"pointops: weight has dtype {weight.dtype} but feat has {feat.dtype}")
    _index_range(idx, "idx", feat.shape[2])
    return _ops.gather(feat, idx, weight)
