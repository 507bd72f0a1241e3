"""Packed point batches: every cloud of a batch concatenated along the first dimension.

A packed batch is points [P, 3] (features [P, C], channels last) plus a row pointer `ptr`:
int64 [B + 1], ptr[0] = 0, nondecreasing, ptr[B] = P; cloud b is rows ptr[b] .. ptr[b+1]-1.
Queries come as another packed set (query [Q, 3], query_ptr [B + 1]) with the same B; it may be
the same set. Neighbour indices are global rows of the searched set (int64, -1 = no point), so
they index `feat[idx]` directly.

Other layouts convert to `ptr`: Pointcept's `offset` (cumulative ends, no leading 0), PyG's
`batch` (cloud id per row, sorted), per-cloud counts (mmcv/OpenPCDet "stack" ops) and Open3D's
`row_splits` (which is `ptr`). The converters check their input: on CPU a bad one raises
ValueError naming the argument; on CUDA they do not wait for the device, and a bad input gives
a result starting with -1, which every op refuses (the error then comes from that op, raised by
a later pointops call or pointops.check_errors()).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _registrations as _reg
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
# layout conversions (no host sync, except ptr_from_batch without num_clouds and batch_from_ptr
# without total)
#
# Every converter checks its input. On CPU the checks are free and a bad input raises ValueError
# naming the argument. On CUDA they read nothing from the device (no sync): a bad input gives a
# result whose first entry is -1 (a ptr starting at -1, an offset, count or cloud id of -1),
# which every pointops op refuses ("not a row pointer", "must be >= 0"), so the error comes from
# the op that uses it (on CUDA: raised by a later pointops call or pointops.check_errors()).

_INT32_MAX = 2**31 - 1


def _index_vector(t, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in (torch.int32, torch.int64) or t.dim() != 1:
        raise ValueError(
            f"pointops: {name} must be a 1-D int32 or int64 tensor, got {t.dtype} with shape {list(t.shape)}"
        )
    return t.long()


def _row_pointer_vector(ptr, name: str) -> Tensor:
    ptr = _index_vector(ptr, name)
    if ptr.numel() == 0:
        raise ValueError(
            f"pointops: {name} is empty; a row pointer has B + 1 >= 1 entries (0, then each cloud's end)"
        )
    return ptr


def _reads_values(t: Tensor) -> bool:
    """Whether the converters check values at once: on CPU, where reading them costs nothing
    (not while torch.compile or torch.jit.trace traces, where values are not fixed)."""
    return t.device.type == "cpu" and not torch.compiler.is_compiling() and not torch.jit.is_tracing()


def _first_decrease(values: Tensor) -> int | None:
    """The first i with values[i] < values[i - 1] (values on CPU), or None."""
    if values.numel() < 2:
        return None
    at = torch.nonzero(values[1:] < values[:-1])
    return int(at[0]) + 1 if at.numel() else None


def _is_row_pointer(ptr: Tensor) -> Tensor:
    """0-d bool tensor, not read here: ptr[0] = 0 and ptr never decreases."""
    ok = ptr[0] == 0
    return ok & (ptr[1:] >= ptr[:-1]).all() if ptr.numel() > 1 else ok


def _check_row_pointer(ptr: Tensor, name: str) -> None:
    """ValueError naming `name` unless ptr (on CPU) is a row pointer."""
    first = int(ptr[0])
    if first != 0:
        built = " (-1: it was built on CUDA from a bad batch vector, offset or counts)" if first == -1 else ""
        raise ValueError(f"pointops: {name}[0] = {first}; a row pointer starts at 0{built}")
    i = _first_decrease(ptr)
    if i is not None:
        raise ValueError(
            f"pointops: {name} decreases at entry {i} ({int(ptr[i - 1])} -> {int(ptr[i])}); a row "
            f"pointer never decreases"
        )


def _poisoned(t: Tensor, ok: Tensor) -> Tensor:
    """t (a fresh tensor) with its first entry set to -1 where ok is False, read by nobody here."""
    if t.numel():
        t[0] = torch.where(ok, t[0], -1)
    return t


def ptr_from_offset(offset: Tensor, name: str = "offset") -> Tensor:
    """Pointcept's offset (cumulative cloud ends, [B], >= 0 and nondecreasing) -> ptr [B + 1].
    A bad offset raises ValueError naming `name` on CPU; on CUDA it gives ptr[0] = -1."""
    offset = _index_vector(offset, name)
    ptr = torch.cat([offset.new_zeros(1), offset])
    if not _reads_values(ptr):
        return _poisoned(ptr, _is_row_pointer(ptr))
    i = _first_decrease(ptr)
    if i is not None:
        problem = (
            f"{name}[0] = {int(offset[0])} is negative"
            if i == 1
            else f"{name} decreases at entry {i - 1} ({int(offset[i - 2])} -> {int(offset[i - 1])})"
        )
        raise ValueError(
            f"pointops: {problem}; an offset holds each cloud's end row, e.g. [n0, n0 + n1, ...]"
        )
    return ptr


def offset_from_ptr(ptr: Tensor) -> Tensor:
    """ptr [B + 1] -> Pointcept's offset [B] (int32, as Pointcept keeps it). A ptr that is not a
    row pointer, or ends past 2^31 - 1 rows (int32), raises ValueError on CPU; on CUDA it gives
    offset[0] = -1 (never a silently wrapped value)."""
    ptr = _row_pointer_vector(ptr, "ptr")
    offset = ptr[1:].to(torch.int32)
    if not _reads_values(ptr):
        return _poisoned(offset, _is_row_pointer(ptr) & (ptr[-1] <= _INT32_MAX))
    _check_row_pointer(ptr, "ptr")
    if int(ptr[-1]) > _INT32_MAX:
        raise ValueError(
            f"pointops: ptr ends at {int(ptr[-1])} rows, more than an int32 offset holds (2^31 - 1); "
            f"keep the int64 ptr for batches this large"
        )
    return offset


def ptr_from_counts(counts: Tensor, name: str = "counts") -> Tensor:
    """Points per cloud [B] (each >= 0, summing below 2^63) -> ptr [B + 1]. Bad counts raise
    ValueError naming `name` on CPU; on CUDA they give ptr[0] = -1."""
    counts = _index_vector(counts, name)
    ptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    # a negative count, or a sum wrapping past 2^63 - 1, is exactly a decrease of the sums
    if not _reads_values(ptr):
        return _poisoned(ptr, _is_row_pointer(ptr))
    negative = torch.nonzero(counts < 0)
    if negative.numel():
        i = int(negative[0])
        raise ValueError(f"pointops: {name}[{i}] = {int(counts[i])}; point counts must be >= 0")
    if _first_decrease(ptr) is not None:
        raise ValueError(f"pointops: {name} sum past 2^63 - 1 rows; no batch is that large")
    return ptr


def counts_from_ptr(ptr: Tensor) -> Tensor:
    """ptr [B + 1] -> points per cloud [B]. A ptr that is not a row pointer raises ValueError on
    CPU; on CUDA it gives counts[0] = -1."""
    ptr = _row_pointer_vector(ptr, "ptr")
    counts = ptr[1:] - ptr[:-1]
    if not _reads_values(ptr):
        return _poisoned(counts, _is_row_pointer(ptr))
    _check_row_pointer(ptr, "ptr")
    return counts


def ptr_from_batch(batch: Tensor, num_clouds: int | None = None, name: str = "batch") -> Tensor:
    """PyG's batch vector (cloud id of each row) -> ptr [num_clouds + 1].

    The rule every layer of pointops applies to a batch vector: int32 or int64, ids >= 0, sorted
    (nondecreasing), and below num_clouds when that is given. Without num_clouds it is
    batch[-1] + 1, read from the device together with the checks (one sync); on CPU the checks
    are free and raise ValueError naming `name`. With num_clouds on CUDA nothing is read: a batch
    vector that breaks the rule gives a ptr starting at -1, which every pointops op rejects as
    "not a row pointer" (no sync, so the error comes from the op that uses the ptr)."""
    batch = _index_vector(batch, name)
    if num_clouds is not None and (
        isinstance(num_clouds, bool) or not isinstance(num_clouds, int) or num_clouds < 0
    ):
        raise ValueError(f"pointops: num_clouds must be an int >= 0 (or None), got {num_clouds!r}")
    rows = batch.numel()
    unsorted = (batch[1:] < batch[:-1]).any() if rows > 1 else batch.new_zeros((), dtype=torch.bool)
    if num_clouds is None or not batch.is_cuda:
        if rows:
            low, high, bad_order = torch.stack([batch.min(), batch.max(), unsorted.long()]).tolist()
        else:
            low, high, bad_order = 0, -1, 0
        if bad_order or low < 0:
            raise ValueError(
                f"pointops: {name} must hold cloud ids >= 0 in nondecreasing order (each cloud's rows "
                f"together, clouds in order); sort the points by cloud first, e.g. "
                f"order = {name}.argsort(stable=True)"
            )
        if num_clouds is None:
            num_clouds = int(batch[-1]) + 1 if rows else 0
        elif high >= num_clouds:
            raise ValueError(
                f"pointops: {name} holds cloud id {high} but num_clouds is {num_clouds}; pass "
                f"num_clouds > {high} (or leave it None)"
            )
    bounds = torch.arange(num_clouds + 1, device=batch.device, dtype=torch.int64)
    ptr = torch.searchsorted(batch, bounds, right=False)
    if batch.is_cuda and rows:
        broken = unsorted | (batch[0] < 0) | (batch[-1] >= num_clouds)
        ptr[0] = torch.where(broken, -1, 0)  # the op that reads ptr reports it (no sync here)
    return ptr


def batch_from_ptr(ptr: Tensor, total: int | None = None, name: str = "ptr") -> Tensor:
    """ptr [B + 1] -> the cloud id of each of the `total` rows (int64). total = ptr[-1]: without
    it that value is read from the device (one sync), together with the checks.

    A ptr that is not a row pointer, or a total other than ptr[-1], raises ValueError naming
    `name` on CPU and on the sync path. With total on CUDA nothing is read: a bad pair gives
    batch[0] = -1, and rows past ptr[-1] get the id B; ptr_from_batch(batch, num_clouds=B)
    and the ops refuse both (memory safe either way: rows are found by binary search)."""
    ptr = _row_pointer_vector(ptr, name)
    symbolic = isinstance(total, (torch.SymInt, Tensor))  # a size while compiling or tracing
    if (
        total is not None
        and not symbolic
        and (isinstance(total, bool) or not isinstance(total, int) or total < 0)
    ):
        raise ValueError(f"pointops: total must be an int >= 0 (the number of rows, or None), got {total!r}")
    if _reads_values(ptr):
        _check_row_pointer(ptr, name)
        last = int(ptr[-1])
        if total is not None and total != last:
            raise ValueError(
                f"pointops: total is {total} but {name} ends at {last}; total is the number of rows, "
                f"{name}[-1] (or leave it None)"
            )
        total = last
    elif total is None:
        ok, last = torch.stack([_is_row_pointer(ptr).long(), ptr[-1]]).tolist()
        if not ok:
            _check_row_pointer(ptr.cpu(), name)
        total = last
    rows = torch.arange(total, device=ptr.device)
    batch = torch.searchsorted(ptr[1:], rows, right=True)  # clouds whose end is <= the row
    if ptr.is_cuda and not symbolic:
        batch = _poisoned(batch, _is_row_pointer(ptr) & (ptr[-1] == total))
    return batch


# ---------------------------------------------------------------------------------------------
# operators

_ops = torch.ops.pointops


def _packed_points(t, name: str) -> Tensor:
    t = ops._float_tensor(t, name)
    if t.dim() != 2 or t.shape[1] != 3:
        raise ValueError(f"pointops: {name} must have shape [P, 3], got {list(t.shape)}")
    return t


def _row_pointer(ptr, name: str, ref: Tensor, ref_name: str) -> Tensor:
    ptr = ops._index(ptr, name, ref, ref_name)
    if ptr.dim() != 1 or ptr.shape[0] < 1:
        raise ValueError(
            f"pointops: {name} must be a 1-D row pointer of B + 1 >= 1 entries, got shape {list(ptr.shape)}"
        )
    return ptr


def _pair(xyz, ptr, query, query_ptr):
    xyz, query = _packed_points(xyz, "xyz"), _packed_points(query, "query")
    ops._same_device(xyz, "xyz", query, "query")
    if query.dtype != xyz.dtype:
        raise TypeError(f"pointops: query has dtype {query.dtype} but xyz has {xyz.dtype}")
    ptr, query_ptr = _row_pointer(ptr, "ptr", xyz, "xyz"), _row_pointer(query_ptr, "query_ptr", xyz, "xyz")
    if ptr.shape[0] != query_ptr.shape[0]:
        raise ValueError(
            f"pointops: ptr describes {ptr.shape[0] - 1} clouds but query_ptr {query_ptr.shape[0] - 1}"
        )
    return xyz, ptr, query, query_ptr


def _call(op, args: tuple, grad_inputs: tuple = (), function=None):
    """ops._call for the packed ops: the binding's argument errors (on CPU a bad row pointer or
    nan, on any device an output too large to allocate) become ValueError with the binding's own
    message, which names the argument. A kernel's failure ("pointops.<op> failed: ...") stays a
    RuntimeError."""
    try:
        return ops._call(op, args, None, grad_inputs, function)
    except RuntimeError as error:
        message = str(error)
        start = message.find("pointops: ")
        if start >= 0:
            raise ValueError(message[start:].splitlines()[0]) from None
        raise


def knn(xyz: Tensor, ptr: Tensor, query: Tensor, query_ptr: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k nearest points of each query row within its own cloud: (dist2 [Q, k], idx [Q, k]),
    idx global rows of xyz, sorted by (dist2, index); missing slots are -1 / +inf. dist2 is
    differentiable w.r.t. xyz and query."""
    xyz, ptr, query, query_ptr = _pair(xyz, ptr, query, query_ptr)
    k = ops._positive_int(k, "k")
    return _call(
        _ops.knn_packed.default, (xyz, ptr, query, query_ptr, k), (xyz, query), _reg.KnnPackedFunction
    )


def three_nn(unknown: Tensor, unknown_ptr: Tensor, known: Tensor, known_ptr: Tensor):
    """The 3 nearest `known` rows of each `unknown` row: (dist2 [n, 3], idx [n, 3])."""
    return knn(known, known_ptr, unknown, unknown_ptr, 3)


def ball_query(
    xyz: Tensor,
    ptr: Tensor,
    query: Tensor,
    query_ptr: Tensor,
    radius: float,
    k: int,
    return_dist2: bool = False,
    inclusive: bool = True,
):
    """The first k points (ascending row) of the query's cloud within `radius` of each query row
    (d^2 <= r^2, or d^2 < r^2 with inclusive=False): (idx [Q, k], count [Q]) (+ dist2 [Q, k]);
    short balls repeat their first hit, empty ones are -1 / count 0 / +inf."""
    xyz, ptr, query, query_ptr = _pair(xyz, ptr, query, query_ptr)
    radius = ops._radius(radius)
    k = ops._positive_int(k, "k")
    grad_inputs = (xyz, query) if return_dist2 else ()
    idx, count, dist2 = _call(
        _ops.ball_query_packed.default,
        (xyz, ptr, query, query_ptr, radius, k, bool(inclusive), bool(return_dist2)),
        grad_inputs,
        _reg.BallQueryPackedFunction,
    )
    return (idx, count, dist2) if return_dist2 else (idx, count)


def furthest_point_sample(
    xyz: Tensor,
    ptr: Tensor,
    sample_ptr: Tensor,
    num_samples: int | None = None,
    max_points: int | None = None,
) -> Tensor:
    """Farthest point sampling of each cloud: cloud b gets sample_ptr[b+1] - sample_ptr[b] picks,
    written to rows sample_ptr[b] .. of the result (global rows of xyz, int64), starting at the
    cloud's first point; equal distances go to the lowest row. Slots past a cloud's size are -1.

    num_samples (= sample_ptr[-1]) sizes the result; without it that value is read from the
    device (one sync). max_points, a bound on every cloud's size, lets the CUDA kernels hold
    points in registers; without it they plan for one cloud of all P rows (slower, no sync)."""
    xyz = _packed_points(xyz, "xyz")
    ptr = _row_pointer(ptr, "ptr", xyz, "xyz")
    sample_ptr = _row_pointer(sample_ptr, "sample_ptr", xyz, "xyz")
    if num_samples is None:
        num_samples = int(sample_ptr[-1])
        if num_samples < 0:
            raise ValueError(
                f"pointops: sample_ptr ends at {num_samples}; a row pointer ends at the number of "
                f"samples, >= 0"
            )
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0:
        raise ValueError(f"pointops: num_samples must be an int >= 0, got {num_samples!r}")
    if max_points is not None and (
        isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1
    ):
        raise ValueError(f"pointops: max_points must be an int >= 1 (or None), got {max_points!r}")
    return _call(
        _ops.furthest_point_sample_packed.default, (xyz, ptr, sample_ptr, num_samples, max_points or 0)
    )


def _rows(feat, name: str = "feat") -> Tensor:
    feat = ops._float_tensor(feat, name)
    if feat.dim() != 2:
        raise ValueError(f"pointops: {name} must have shape [P, C], got {list(feat.shape)}")
    return feat


def _row_index(idx, feat: Tensor) -> Tensor:
    """An int32 or int64 index into feat's rows, kept in its dtype: the kernels read int32 as it
    is (Pointcept's indices need no conversion copy)."""
    idx = ops._tensor(idx, "idx")
    if idx.dtype not in ops._INDEX_DTYPES:
        raise TypeError(f"pointops: idx has dtype {idx.dtype}; use int32 or int64")
    ops._same_device(feat, "feat", idx, "idx")
    return idx


def gather(feat: Tensor, idx: Tensor) -> Tensor:
    """Rows of feat [P, C] at idx (int32 or int64, any shape, global rows, -1 gives zeros):
    [*idx.shape, C]. Differentiable w.r.t. feat (deterministic sums)."""
    feat = _rows(feat)
    idx = _row_index(idx, feat)
    out = _call(_ops.gather_rows.default, (feat, idx.reshape(-1, 1), None), (feat,), _reg.GatherRowsFunction)
    return out.view(*idx.shape, feat.shape[1])


def interpolate(feat: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    """sum_t weight[q, t] * feat[idx[q, t]]: [Q, C] (idx -1 contributes 0). Differentiable w.r.t.
    feat and weight."""
    feat = _rows(feat)
    idx = _row_index(idx, feat)
    weight = ops._float_tensor(weight, "weight")
    ops._same_device(feat, "feat", weight, "weight")
    if idx.dim() != 2 or weight.shape != idx.shape:
        raise ValueError(
            f"pointops: idx and weight must both have shape [Q, T], got {list(idx.shape)} and "
            f"{list(weight.shape)}"
        )
    if weight.dtype != feat.dtype:
        raise TypeError(f"pointops: weight has dtype {weight.dtype} but feat has {feat.dtype}")
    return _call(_ops.gather_rows.default, (feat, idx, weight), (feat, weight), _reg.GatherRowsFunction)
