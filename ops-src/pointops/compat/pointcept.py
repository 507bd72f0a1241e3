"""Pointcept's `pointops` API (libs/pointops of Pointcept), served by pointops' packed ops.

    import pointops                      # Pointcept code runs unmodified:
    idx, dist = pointops.knn_query(16, coord, offset)

The same names are importable from `pointops.compat.pointcept`. Pointcept's conventions:
packed clouds with `offset` = cumulative cloud ends without a leading 0 (int32 or int64),
int32 indices with -1 for "no point", Euclidean (not squared) distances, global row indices.

Deliberate differences from Pointcept's CUDA library (docs/ops.md, "Pointcept compatibility"):
- knn_query: no 128-neighbour limit; missing neighbours (a cloud smaller than nsample) are
  idx -1 with distance +inf (Pointcept: -1 with 1e5, the root of its 1e10 sentinel); equal
  distances are ordered by row (Pointcept's heap leaves their order unspecified).
- ball_query: no 2048-candidate limit, and the distances of a ball with more than nsample hits
  are distances (Pointcept writes point indices into them).
- grouping/grouping2/subtraction/aggregation/query_and_group: index -1 reads zeros (grouping2,
  subtraction and aggregation read out of bounds in Pointcept; query_and_group reads the last
  row); with_xyz offsets of -1 slots are 0.
- interpolation: a missing neighbour has weight 0 (Pointcept weighs the last row by 1e-5), a
  query with no neighbour at all gets zeros.
- FPS: a cloud asked for more samples than it has points repeats its first point (as Pointcept);
  an empty cloud gives -1 (Pointcept writes the next cloud's first row).
- Every op takes float64 (and float16/bfloat16 on CUDA) and keeps the input dtype; Pointcept
  runs float32 only. Backward passes are deterministic. attention_relation_step returns the
  gradient of `weight` (Pointcept computes it and drops it).
- Outputs of the queries carry no gradient (as in Pointcept, whose queries have no backward).
- Bad input is refused with ValueError/TypeError naming the argument (offsets not >= 0,
  nondecreasing and ending at the row count; new_xyz without new_offset or the reverse; radii
  outside 0 <= min_radius < max_radius; an unsorted batch vector in batch2offset; index -1 in
  the attention steps; mismatched shapes), where Pointcept reads out of bounds or returns
  garbage.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor
from torch.fx.experimental.symbolic_shapes import guard_or_false

from .. import ops, packed

__all__ = [
    "aggregation",
    "attention_fusion_step",
    "attention_relation_step",
    "ball_query",
    "ball_query_and_group",
    "batch2offset",
    "farthest_point_sampling",
    "grouping",
    "grouping2",
    "interpolation",
    "interpolation2",
    "knn_query",
    "knn_query_and_group",
    "offset2batch",
    "query_and_group",
    "random_ball_query",
    "subtraction",
]


# ---------------------------------------------------------------------------------------------
# argument handling


def _checks_on(t: Tensor) -> bool:
    if not ops.value_checks_enabled() or torch.compiler.is_compiling():
        return False
    return not (t.is_cuda and torch.cuda.is_current_stream_capturing())


def _points(t, name: str) -> Tensor:
    t = ops._float_tensor(t, name)
    if t.dim() != 2 or t.shape[1] != 3:
        raise ValueError(f"pointops: {name} must have shape [n, 3], got {list(t.shape)}")
    return t.contiguous()


def _is_empty(t: Tensor) -> bool:
    """Whether t has no entries. While torch.compile traces, t's length may be known only at run
    time (PTv2 rebuilds its offsets from the pooled batch vector): then the compiled graph checks
    it when it runs (torch._check) instead of guarding on it, and the code after knows it is > 0."""
    if torch.compiler.is_compiling() and not guard_or_false(t.numel() == 0):
        torch._check(t.numel() > 0, lambda: "pointops: an offset needs one entry per cloud, got none")
        return False
    return t.numel() == 0


def _ptr(offset, points: Tensor | None, name: str, points_name: str = "") -> Tensor:
    """Pointcept's offset -> ptr. Its entries must be >= 0 and nondecreasing and end at the rows
    of `points` when that is given. On CPU a bad one raises ValueError here; on CUDA nothing is
    read from the device (as Pointcept's own knn_query): the op that takes the ptr checks it on
    the GPU and reports a bad one from a later pointops call or pointops.check_errors()."""
    if not isinstance(offset, Tensor):
        raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(offset).__name__}")
    if offset.dim() != 1 or _is_empty(offset):
        raise ValueError(
            f"pointops: {name} must be a non-empty 1-D tensor of cumulative cloud ends "
            f"(Pointcept's offset), got shape {list(offset.shape)}"
        )
    if points is not None:
        ops._same_device(points, points_name, offset, name)
    ptr = packed.ptr_from_offset(offset, name)
    if ptr.is_cuda or torch.compiler.is_compiling():
        return ptr
    _refuse_bad_ptr(offset, _ptr_summary(ptr).tolist(), points, name, points_name)
    return ptr


def _ptr_summary(ptr: Tensor) -> Tensor:
    """[first entry, smallest step, last entry] of ptr, on its device (not read here): what
    _refuse_bad_ptr checks."""
    return torch.stack([ptr[0], (ptr[1:] - ptr[:-1]).min(), ptr[-1]])


def _refuse_bad_ptr(offset: Tensor, first_low_last: list, points, name: str, points_name: str) -> None:
    """ValueError unless a ptr with this _ptr_summary (read) is a row pointer ending at the rows
    of `points` (when given)."""
    first, low, last = first_low_last
    rows = None if points is None else points.shape[0]
    if first != 0 or low < 0 or (rows is not None and last != rows):
        end = f" and end at {rows} (the rows of {points_name})" if rows is not None else ""
        raise ValueError(
            f"pointops: {name} must be nondecreasing{end}, its entries >= 0, got "
            f"{offset.tolist() if offset.numel() <= 16 else '...'}"
        )


def _pair(xyz, offset, new_xyz, new_offset):
    xyz = _points(xyz, "xyz")
    ptr = _ptr(offset, xyz, "offset", "xyz")
    if (new_xyz is None) != (new_offset is None):
        raise ValueError(
            "pointops: give new_xyz and new_offset together (or neither, to query xyz itself); "
            f"got new_xyz {'None' if new_xyz is None else 'set'} and new_offset "
            f"{'None' if new_offset is None else 'set'}"
        )
    if new_xyz is None:
        return xyz, ptr, xyz, ptr
    new_xyz = _points(new_xyz, "new_xyz")
    if new_xyz.dtype != xyz.dtype or new_xyz.device != xyz.device:
        raise ValueError(
            f"pointops: new_xyz ({new_xyz.dtype}, {new_xyz.device}) must match xyz "
            f"({xyz.dtype}, {xyz.device})"
        )
    new_ptr = _ptr(new_offset, new_xyz, "new_offset", "new_xyz")
    if new_ptr.shape != ptr.shape:
        raise ValueError(
            f"pointops: offset has {ptr.numel() - 1} clouds but new_offset has "
            f"{new_ptr.numel() - 1}; give one entry per cloud in both"
        )
    return xyz, ptr, new_xyz, new_ptr


def _positive(n, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"pointops: {name} must be an int > 0, got {n!r}")
    return n


def _radii(max_radius, min_radius, op: str) -> None:
    """Pointcept's ball: min_radius <= d < max_radius; numbers with 0 <= min_radius < max_radius
    (max_radius may be inf: every point)."""
    for value, name in ((max_radius, "max_radius"), (min_radius, "min_radius")):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"pointops: {op}'s {name} must be a number, got {type(value).__name__}")
    if not (math.isfinite(min_radius) and 0 <= min_radius < max_radius):
        raise ValueError(
            f"pointops: {op} needs 0 <= min_radius < max_radius (min_radius finite), got "
            f"{min_radius} and {max_radius}"
        )


def _rows(idx, n: int, name: str = "idx", gathered: bool = False, lowest: int = -1) -> Tensor:
    """An index tensor into n rows: int32/int64, values lowest..n-1 (-1 = no point where lowest
    is -1; checked when checks are on). gathered: only packed.gather reads it, whose CUDA kernel
    checks the values itself without waiting for the device, so the check here (a sync) is left
    to it, and reads int32 as it is (no conversion copy)."""
    if not isinstance(idx, Tensor) or idx.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"pointops: {name} must be an int32 or int64 tensor")
    if idx.numel() and not (gathered and idx.is_cuda) and _checks_on(idx):
        low, high = torch.stack(torch.aminmax(idx)).tolist()
        if low < lowest or high >= n:
            meaning = " (-1 = no point)" if lowest == -1 else ""
            raise ValueError(
                f"pointops: {name} values must lie in {lowest}..{n - 1}{meaning}, got {low}..{high}"
            )
    return idx if gathered else idx.long()


# ---------------------------------------------------------------------------------------------
# queries


@torch.no_grad()
def knn_query(nsample, xyz, offset, new_xyz=None, new_offset=None):
    """The nsample nearest points of each query within its cloud: (idx int32 [m, nsample] global
    rows, dist [m, nsample] Euclidean), ascending; missing slots -1 / inf."""
    nsample = _positive(nsample, "nsample")
    xyz, ptr, new_xyz, new_ptr = _pair(xyz, offset, new_xyz, new_offset)
    # detached as well as no_grad: torch.jit.trace does not record no_grad, and a traced model
    # would otherwise give xyz a gradient through these distances that the eager one has not
    dist2, idx = packed.knn(xyz.detach(), ptr, new_xyz.detach(), new_ptr, nsample)
    return idx.to(torch.int32), dist2.sqrt()


# The native search's ball is this much wider in d^2 than Pointcept's: every point Pointcept
# counts is found even after dist2 is rounded to float16/bfloat16 (relative error <= 2^-8).
_BALL_MARGIN = 1.02


_HALF_TYPES = (torch.float16, torch.bfloat16)


def _ball_candidates(xyz, ptr, new_xyz, new_ptr, max_radius, min_radius, nsample):
    """Every point of Pointcept's ball (d2 <= 1e-5, or min_r^2 <= d2 < max_r^2, with the radii
    squared in float32 as its kernel does) in (d2, row) order: (dist2 [m, K], idx [m, K],
    inside [m, K]).

    First the native ball query (a grid) over a slightly larger ball, keeping up to nsample + 1
    hits: when no ball overflows, that is every candidate, sorted here by distance (a stable sort
    of rows already ascending gives kNN's tie order). A ball with more hits than nsample needs
    them all (Pointcept spreads its picks over the whole ball): then the kNN grows until every
    query's farthest candidate is outside the ball."""
    max_r = torch.tensor(float(max_radius), dtype=torch.float32)
    min_r = torch.tensor(float(min_radius), dtype=torch.float32)
    max_r2, min_r2 = float(max_r * max_r), float(min_r * min_r)
    reach2 = max(max_r2, 1e-5) * _BALL_MARGIN
    found = _ball_hits(xyz, ptr, new_xyz, new_ptr, reach2, nsample + 1) if math.isfinite(reach2) else None
    if found is None:
        found = _nearest_until_outside(xyz, ptr, new_xyz, new_ptr, max_r2, nsample)
    dist2, idx = found
    present = idx >= 0
    inside = present & ((dist2 <= 1e-5) | ((dist2 >= min_r2) & (dist2 < max_r2)))
    return dist2, idx, inside


def _ball_hits(xyz, ptr, new_xyz, new_ptr, reach2: float, width: int):
    """(dist2, idx) [m, width] of every point with d2 <= reach2, ascending (d2, row),
    missing +inf / -1; None when some ball holds `width` points or more (it may hold more)."""
    idx, count, dist2 = packed.ball_query(
        xyz.detach(), ptr, new_xyz.detach(), new_ptr, math.sqrt(reach2), width, return_dist2=True
    )
    if bool((count >= width).any()):
        return None
    valid = torch.arange(width, device=idx.device)[None, :] < count[:, None]
    idx = torch.where(valid, idx, -1)
    dist2 = torch.where(valid, dist2, float("inf"))
    # the kNN orders by the distance before it is rounded to float16/bfloat16
    key = _float32_dist2(xyz, new_xyz, idx, valid) if dist2.dtype in _HALF_TYPES else dist2
    order = torch.sort(key, dim=1, stable=True).indices
    return dist2.gather(1, order), idx.gather(1, order)


def _float32_dist2(xyz, query, idx, valid):
    """d^2 of query row q to xyz[idx[q, s]] as the CUDA kernels compute it for float16/bfloat16:
    in float32, (dx*dx + dy*dy) + dz*dz with dx = x - qx (one rounding per operation; eager torch
    does not fuse them); +inf where not valid."""
    d = xyz.float()[idx.clamp_min(0)] - query.float()[:, None, :]
    d2 = (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]
    return torch.where(valid, d2, float("inf"))


def _nearest_until_outside(xyz, ptr, new_xyz, new_ptr, max_r2: float, nsample: int):
    """(dist2, idx) of a kNN wide enough that every query's farthest candidate lies outside the
    ball (or k covers the largest cloud)."""
    largest = int((ptr[1:] - ptr[:-1]).max())
    k = max(1, min(largest, 2 * nsample))
    while True:
        dist2, idx = packed.knn(xyz, ptr, new_xyz, new_ptr, k)
        near = (idx >= 0) & ((dist2 <= 1e-5) | (dist2 < max_r2))
        if k >= largest or not bool(near[:, -1].any()):
            return dist2, idx
        k = min(largest, 2 * k)


def _first_slots(inside: Tensor, priority: Tensor) -> tuple[Tensor, Tensor]:
    """Columns of the True entries of each row by ascending `priority`, packed to the front:
    (columns [m, K], count [m])."""
    key = torch.where(inside, priority, priority.max() + 1)
    cols = torch.sort(key, dim=1, stable=True).indices
    return cols, inside.sum(1)


@torch.no_grad()
def ball_query(nsample, max_radius, min_radius, xyz, offset, new_xyz=None, new_offset=None):
    """Pointcept's ball query: the points with min_radius <= d < max_radius (and the point itself,
    d^2 <= 1e-5) sorted by distance; a ball with more than nsample of them keeps nsample evenly
    spaced ones (positions floor(i * count / nsample) in float32). (idx int32 [m, nsample],
    dist [m, nsample] Euclidean), missing -1 / inf."""
    nsample = _positive(nsample, "nsample")
    _radii(max_radius, min_radius, "ball_query")
    xyz, ptr, new_xyz, new_ptr = _pair(xyz, offset, new_xyz, new_offset)
    m = new_xyz.shape[0]
    idx_out = torch.full((m, nsample), -1, dtype=torch.int64, device=xyz.device)
    dist_out = xyz.new_full((m, nsample), float("inf"))
    if m == 0 or xyz.shape[0] == 0:
        return idx_out.to(torch.int32), dist_out
    dist2, idx, inside = _ball_candidates(xyz, ptr, new_xyz, new_ptr, max_radius, min_radius, nsample)
    # the column of the ball's pos-th point: the first where the running count of hits passes pos
    hits = inside.cumsum(1)
    count = hits[:, -1]
    slot = torch.arange(nsample, device=xyz.device)
    sep = count.to(torch.float32) / nsample
    spread = (sep[:, None] * slot.to(torch.float32)).to(torch.int64)  # float32, truncated
    pos = torch.where((count > nsample)[:, None], spread, slot.expand(m, nsample))
    take = torch.searchsorted(hits, (pos + 1).contiguous()).clamp_max(hits.shape[1] - 1)
    valid = slot[None, :] < count[:, None]
    idx_out = torch.where(valid, idx.gather(1, take), -1)
    dist_out = torch.where(valid, dist2.gather(1, take), float("inf")).sqrt()
    return idx_out.to(torch.int32), dist_out


@torch.no_grad()
def random_ball_query(nsample, max_radius, min_radius, xyz, offset, new_xyz=None, new_offset=None):
    """Pointcept's random ball query: up to nsample points of the same ball as ball_query, taken
    in a random order of each cloud (torch's generator); missing -1 / inf."""
    nsample = _positive(nsample, "nsample")
    _radii(max_radius, min_radius, "random_ball_query")
    xyz, ptr, new_xyz, new_ptr = _pair(xyz, offset, new_xyz, new_offset)
    m = new_xyz.shape[0]
    if m == 0 or xyz.shape[0] == 0:
        return (
            torch.full((m, nsample), -1, dtype=torch.int32, device=xyz.device),
            xyz.new_full((m, nsample), float("inf")),
        )
    dist2, idx, inside = _ball_candidates(xyz, ptr, new_xyz, new_ptr, max_radius, min_radius, nsample)
    rank = torch.rand(xyz.shape[0], device=xyz.device)[idx.clamp_min(0)]
    cols, count = _first_slots(inside, rank)
    width = min(nsample, cols.shape[1])
    cols = cols[:, :width]
    valid = torch.arange(width, device=xyz.device)[None, :] < count[:, None]
    idx_out = torch.full((m, nsample), -1, dtype=torch.int64, device=xyz.device)
    dist_out = xyz.new_full((m, nsample), float("inf"))
    idx_out[:, :width] = torch.where(valid, idx.gather(1, cols), -1)
    dist_out[:, :width] = torch.where(valid, dist2.gather(1, cols), float("inf")).sqrt()
    return idx_out.to(torch.int32), dist_out


@torch.no_grad()
def farthest_point_sampling(xyz, offset, new_offset):
    """Farthest point sampling of each cloud from its first point: int32 global rows
    [new_offset[-1]]; cloud b gets new_offset[b] - new_offset[b-1] picks."""
    xyz = _points(xyz, "xyz")
    ptr = _ptr(offset, xyz, "offset", "xyz")
    if not isinstance(new_offset, Tensor) or new_offset.shape != offset.shape:
        raise ValueError("pointops: new_offset must be a tensor with one entry per cloud, like offset")
    ops._same_device(xyz, "xyz", new_offset, "new_offset")
    sample_ptr = _ptr(new_offset, None, "new_offset")  # its end is the output size
    # one read of the device for the output size and the largest cloud (Pointcept's library
    # reads offsets on the host too), so the kernels can plan for the real cloud sizes; the
    # offsets are checked from the same read
    widest = (ptr[1:] - ptr[:-1]).max()
    read = torch.cat([_ptr_summary(ptr), _ptr_summary(sample_ptr), widest[None]]).tolist()
    _refuse_bad_ptr(offset, read[:3], xyz, "offset", "xyz")
    _refuse_bad_ptr(new_offset, read[3:6], None, "new_offset", "")
    total, largest = read[5], read[6]
    idx = packed.furthest_point_sample(xyz, ptr, sample_ptr, num_samples=total, max_points=max(largest, 1))
    # past a cloud's size Pointcept's kernel repeats the cloud's first point
    cloud = packed.batch_from_ptr(sample_ptr, idx.shape[0])
    first = ptr[:-1][cloud]
    nonempty = (ptr[1:] - ptr[:-1])[cloud] > 0
    idx = torch.where((idx < 0) & nonempty, first, idx)
    return idx.to(torch.int32)


# ---------------------------------------------------------------------------------------------
# grouping and interpolation


def _feat(feat, name: str = "feat") -> Tensor:
    """Rows [n, c] for the packed gathers, in a dtype their kernels take on feat's device."""
    feat = ops._float_tensor(feat, name)
    if feat.dim() != 2:
        raise ValueError(f"pointops: {name} must be a 2-D tensor [n, c], got shape {list(feat.shape)}")
    return feat


def _shape(t: Tensor, name: str, expected: tuple, layout: str) -> None:
    """ValueError unless t's shape is `expected` (None: any size); `layout` names the sizes."""
    if t.dim() != len(expected) or any(
        e is not None and e != n for e, n in zip(expected, t.shape, strict=True)
    ):
        raise ValueError(f"pointops: {name} must have shape {layout}, got {list(t.shape)}")


def _neighbours(idx, n: int, name: str = "idx") -> Tensor:
    """Pointcept's neighbour index [m, nsample] into n rows, for the packed gathers."""
    idx = _rows(idx, n, name, gathered=True)
    _shape(idx, name, (None, None), "[m, nsample]")
    return idx


def grouping(idx, feat, xyz, new_xyz=None, with_xyz=False):
    """feat rows at idx: [m, nsample, c] (-1 gives zeros); with_xyz prepends the neighbours'
    offsets xyz[idx] - new_xyz (0 for -1 slots): [m, nsample, 3 + c]. Differentiable."""
    feat = _feat(feat)
    idx = _neighbours(idx, feat.shape[0])
    grouped = packed.gather(feat, idx)
    if not with_xyz:
        return grouped
    xyz = _points(xyz, "xyz")
    _shape(xyz, "xyz", (feat.shape[0], 3), f"[n, 3] with n = {feat.shape[0]} (the rows of feat)")
    name = "new_xyz" if new_xyz is not None else "xyz (new_xyz is None)"
    new_xyz = xyz if new_xyz is None else _points(new_xyz, "new_xyz")
    _shape(new_xyz, name, (idx.shape[0], 3), f"[m, 3] with m = {idx.shape[0]} (the rows of idx)")
    rel = packed.gather(xyz, idx) - new_xyz.unsqueeze(1)
    rel = rel * (idx >= 0).unsqueeze(-1).to(rel.dtype)
    return torch.cat((rel, grouped), -1)


def grouping2(input, idx):  # noqa: A002  (Pointcept's argument name)
    """input rows at idx: [m, nsample, c]; -1 gives zeros. Differentiable w.r.t. input."""
    input = _feat(input, "input")  # noqa: A001
    return packed.gather(input, _neighbours(idx, input.shape[0]))


def _inverse_distance_weights(dist: Tensor) -> Tensor:
    recip = 1.0 / (dist + 1e-8)  # +inf (missing) -> 0
    norm = recip.sum(1, keepdim=True)
    return torch.where(norm > 0, recip / norm.clamp_min(torch.finfo(recip.dtype).tiny), 0.0)


def interpolation(xyz, new_xyz, feat, offset, new_offset, k=3):
    """Inverse-distance weighted mean of the features of the k nearest xyz rows of each new_xyz
    row: [n, c]. Differentiable w.r.t. feat."""
    k = _positive(k, "k")
    feat = _feat(feat)
    xyz = _points(xyz, "xyz")
    _shape(feat, "feat", (xyz.shape[0], None), f"[n, c] with n = {xyz.shape[0]} (the rows of xyz)")
    idx, dist = knn_query(k, xyz, offset, new_xyz, new_offset)
    return packed.interpolate(feat, idx, _inverse_distance_weights(dist))  # int32 read as it is


def interpolation2(xyz, new_xyz, input, offset, new_offset, k=3):  # noqa: A002
    """Same values as interpolation (Pointcept's kernel variant)."""
    return interpolation(xyz, new_xyz, input, offset, new_offset, k)


def knn_query_and_group(
    feat, xyz, offset=None, new_xyz=None, new_offset=None, idx=None, nsample=None, with_xyz=False
):
    """(grouping of feat at the nsample nearest neighbours, idx int32)."""
    if idx is None:
        if nsample is None:
            raise ValueError("pointops: knn_query_and_group needs nsample when idx is not given")
        idx, _ = knn_query(nsample, xyz, offset, new_xyz, new_offset)
    return grouping(idx, feat, xyz, new_xyz, with_xyz), idx


def ball_query_and_group(
    feat,
    xyz,
    offset=None,
    new_xyz=None,
    new_offset=None,
    idx=None,
    max_radio=None,
    min_radio=0,
    nsample=None,
    with_xyz=False,
):
    """(grouping of feat at Pointcept's ball query, idx int32)."""
    if idx is None:
        if nsample is None or offset is None or max_radio is None or min_radio is None:
            raise ValueError(
                "pointops: ball_query_and_group needs nsample, offset, max_radio and "
                "min_radio when idx is not given"
            )
        idx, _ = ball_query(nsample, max_radio, min_radio, xyz, offset, new_xyz, new_offset)
    return grouping(idx, feat, xyz, new_xyz, with_xyz), idx


def query_and_group(
    nsample, xyz, new_xyz, feat, idx, offset, new_offset, dilation=0, with_feat=True, with_xyz=True
):
    """Pointcept's dilated kNN grouping: neighbours 0, d+1, 2(d+1), ... of the
    1 + (nsample-1)(d+1) nearest (a cloud with fewer points spreads the picks over what it
    has). Returns idx [m, nsample] int32 when not with_feat, else ([m, nsample, 3 + c] or
    [m, nsample, c], idx)."""
    if new_xyz is None:
        new_xyz = xyz
    if idx is None:
        nsample = _positive(nsample, "nsample")
        if isinstance(dilation, bool) or not isinstance(dilation, int) or dilation < 0:
            raise ValueError(f"pointops: dilation must be an int >= 0, got {dilation!r}")
        total = 1 + (nsample - 1) * (dilation + 1)
        wide, _ = knn_query(total, xyz, offset, new_xyz, new_offset)
        ptr = packed.ptr_from_offset(offset)
        new_ptr = packed.ptr_from_offset(new_offset)
        size = (ptr[1:] - ptr[:-1])[packed.batch_from_ptr(new_ptr, new_xyz.shape[0])]
        i = torch.arange(nsample, device=wide.device, dtype=torch.float64)
        if nsample > 1:  # as Pointcept: step (n-1)/(nsample-1) when the cloud is short, in float64
            soft = (size.to(torch.float64) - 1) / (nsample - 1) - 1
        else:
            soft = torch.zeros_like(size, dtype=torch.float64)
        step = torch.where(size < total, soft, float(dilation)) + 1
        cols = (step[:, None] * i[None, :]).to(torch.int64).clamp(0, total - 1)
        idx = wide.gather(1, cols)
    if not with_feat:
        return idx
    grouped = grouping(idx, feat, xyz, new_xyz, with_xyz)
    return grouped, idx


# ---------------------------------------------------------------------------------------------
# layout helpers


def offset2batch(offset):
    """Cloud id of each row (int64), from Pointcept's offset (>= 0, nondecreasing: ValueError
    otherwise)."""
    if isinstance(offset, Tensor) and offset.dim() == 1 and offset.numel() == 0:
        return torch.empty(0, dtype=torch.int64, device=offset.device)  # no clouds, no rows
    ptr = _ptr(offset, None, "offset")
    if not ptr.is_cuda or torch.compiler.is_compiling():
        return packed.batch_from_ptr(ptr)
    # the batch's length is the offset's end: read it together with the offset's checks (one sync)
    read = _ptr_summary(ptr).tolist()
    _refuse_bad_ptr(offset, read, None, "offset", "")
    return packed.batch_from_ptr(ptr, read[2])


def batch2offset(batch):
    """Pointcept's offset (int32 cumulative counts) from a batch vector, which must be sorted:
    ids >= 0, nondecreasing (packed.ptr_from_batch's rule; ValueError otherwise). Ids with no
    rows are empty clouds."""
    return packed.offset_from_ptr(packed.ptr_from_batch(batch, name="batch"))


# ---------------------------------------------------------------------------------------------
# Point Transformer (v1) helpers, in plain differentiable torch


def _float_array(t, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"pointops: {name} has dtype {t.dtype}; use a floating-point dtype")
    return t


def subtraction(input1, input2, idx):
    """out[n, s] = input1[n] - input2[idx[n, s]]: [n, nsample, c]; -1 reads zeros."""
    input1, input2 = _feat(input1, "input1"), _feat(input2, "input2")
    idx = _neighbours(idx, input2.shape[0])
    n, c = input1.shape
    _shape(idx, "idx", (n, None), f"[n, nsample] with n = {n} (the rows of input1)")
    _shape(input2, "input2", (None, c), f"[m, c] with c = {c} (the channels of input1)")
    return input1.unsqueeze(1) - packed.gather(input2, idx)


def aggregation(input, position, weight, idx):  # noqa: A002
    """out[n, c] = sum_s (input[idx[n, s], c] + position[n, s, c]) * weight[n, s, c % w_c]."""
    input = _feat(input, "input")  # noqa: A001
    idx = _neighbours(idx, input.shape[0])
    position, weight = _float_array(position, "position"), _float_array(weight, "weight")
    (n, s), c = idx.shape, input.shape[1]
    _shape(position, "position", (n, s, c), f"[n, nsample, c] = [{n}, {s}, {c}] (idx's and input's)")
    _shape(weight, "weight", (n, s, None), f"[n, nsample, w_c] with [n, nsample] = [{n}, {s}] (idx's)")
    w_c = weight.shape[-1]
    if w_c == 0 or c % w_c:
        raise ValueError(
            f"pointops: aggregation needs the channel count {c} to be a multiple of "
            f"weight's last dimension {w_c}"
        )
    w = weight.repeat(1, 1, c // w_c)  # channel j uses weight column j % w_c
    return ((packed.gather(input, idx) + position) * w).sum(1)


def _relation_indices(index_target, index_refer, targets: int, refers: int) -> tuple[Tensor, Tensor]:
    t = _rows(index_target, targets, "index_target", lowest=0)  # torch would read -1 as the last row
    f = _rows(index_refer, refers, "index_refer", lowest=0)
    if t.dim() != 1 or t.shape != f.shape:
        raise ValueError(
            f"pointops: index_target and index_refer must be 1-D of one length (one entry per "
            f"relation), got shapes {list(t.shape)} and {list(f.shape)}"
        )
    return t, f


def attention_relation_step(query, key, weight, index_target, index_refer):
    """out[r, g] = sum_c query[t[r], g, c] * key[f[r], g, c] * weight[c]: [m, g]."""
    query, key = _float_array(query, "query"), _float_array(key, "key")
    weight = _float_array(weight, "weight")
    _shape(query, "query", (None, None, None), "[n, g, c]")
    g, c = query.shape[1:]
    _shape(key, "key", (None, g, c), f"[n, g, c] = [n, {g}, {c}] (query's g and c)")
    _shape(weight, "weight", (c,), f"[c] = [{c}] (query's c)")
    t, f = _relation_indices(index_target, index_refer, query.shape[0], key.shape[0])
    return (query[t] * key[f] * weight).sum(-1)


def attention_fusion_step(weight, value, index_target, index_refer):
    """out[n] = sum over r with t[r] = n of weight[r, g] * value[f[r], g, c]: [n, g, c]."""
    weight, value = _float_array(weight, "weight"), _float_array(value, "value")
    _shape(value, "value", (None, None, None), "[n, g, c]")
    t, f = _relation_indices(index_target, index_refer, value.shape[0], value.shape[0])
    _shape(weight, "weight", (t.shape[0], value.shape[1]), f"[m, g] = [{t.shape[0]}, {value.shape[1]}]")
    contrib = weight.unsqueeze(-1) * value[f]
    return torch.zeros_like(value).index_add(0, t, contrib)


def native_or_pointcept_ball_query(*args, **kwargs):
    """`pointops.ball_query` serves two APIs, told apart by the first argument:

    - a tensor: the native padded ball query, ball_query(xyz, query, radius, k, lengths=None,
      query_lengths=None, return_dist2=False) (pointops.ops.ball_query);
    - anything else (Pointcept passes nsample, an int), or an `nsample=` keyword: Pointcept's
      ball_query(nsample, max_radius, min_radius, xyz, offset, new_xyz=None, new_offset=None).
    """
    if "nsample" in kwargs or (args and not isinstance(args[0], Tensor)):
        return ball_query(*args, **kwargs)
    return ops.ball_query(*args, **kwargs)
