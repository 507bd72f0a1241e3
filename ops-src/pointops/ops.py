"""The native pointops API: typed functions over torch.ops.pointops.*.

Conventions: points are [B, N, 3], features channels-first [B, C, N]; indices are int64 with -1
meaning "no point"; `lengths` (int32 or int64 [B]) gives the number of valid points of each
cloud in a padded batch. Float32/float64 run on CPU, float32/float16/bfloat16 on CUDA (with
float32 accumulation). Inputs may be non-contiguous. Bad input raises ValueError/TypeError
naming the argument.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import warnings

import torch
from torch import Tensor

from ._registrations import BallQueryFunction, GatherFunction, KnnFunction, route
from ._registrations import raise_recorded as _raise_recorded

_ops = torch.ops.pointops

_CPU_FLOATS = (torch.float32, torch.float64)
_CUDA_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_INDEX_DTYPES = (torch.int32, torch.int64)


# ---------------------------------------------------------------------------------------------
# the value-check switch
#
# Value checks: finite coordinates small enough for finite squared distances, index and
# lengths ranges. On CPU the binding checks them before the kernels run, whatever the switch
# says, and the API turns its error into a ValueError naming the argument. On CUDA they never
# wait for the device: a check kernel runs before the op's kernels, and a problem it finds is
# raised (as ValueError) by the next pointops call on that GPU that sees it, or by
# check_errors(); until then every pointops output on that GPU is NaN / -2**63 (docs/ops.md,
# "Value checks"). Switched off, CUDA ops skip those kernels; the kernels clamp lengths and
# treat out-of-range indices as "no point", so bad values then give wrong results but never
# out-of-bounds reads.


def _value_checks_from_env() -> bool:
    raw = os.environ.get("POINTOPS_VALUE_CHECKS", "1").strip().lower()
    if raw in ("", "1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    warnings.warn(
        f"pointops: POINTOPS_VALUE_CHECKS={raw!r} is not understood; value checks stay on (set it to 0 or 1)",
        RuntimeWarning,
        stacklevel=2,
    )
    return True


_value_checks_on = _value_checks_from_env()
_ops.set_value_checks(_value_checks_on)


def value_checks_enabled() -> bool:
    """Whether the API reads input values to raise clear errors (default True)."""
    return _value_checks_on


def set_value_checks(enabled: bool) -> bool:
    """Turn the value checks on or off for the whole process; returns the previous setting."""
    global _value_checks_on
    if not isinstance(enabled, bool):
        raise TypeError(f"pointops: set_value_checks takes True or False, got {enabled!r}")
    previous, _value_checks_on = _value_checks_on, enabled
    _ops.set_value_checks(enabled)
    return previous


@contextlib.contextmanager
def value_checks(enabled: bool):
    """`with pointops.value_checks(False): ...` runs the block with value checks off (or on)."""
    previous = set_value_checks(enabled)
    try:
        yield
    finally:
        set_value_checks(previous)


def check_errors(device=None) -> None:
    """Waits for a GPU's current stream and raises the problem its value checks found, if any
    (ValueError). device: a CUDA device, its index, or None for the current one. Does nothing
    where pointops has no CUDA kernels or torch no GPU."""
    if not (_HAS_CUDA_KERNELS and torch.cuda.is_available()):
        return
    target = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    if target.type != "cuda":
        raise ValueError(f"pointops: check_errors takes a CUDA device, got {device!r}")
    try:
        _ops.check_errors(torch.cuda.current_device() if target.index is None else target.index)
    except RuntimeError as error:
        _raise_recorded(error)
        raise


# ---------------------------------------------------------------------------------------------
# argument checks

# Whether this binary has CUDA kernels (CUDART_VERSION it was built with, 0 for CPU only).
_HAS_CUDA_KERNELS = int(_ops.cuda_runtime_version()) > 0


def _check_device_type(device_type: str, name: str, has_cuda_kernels: bool) -> None:
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"pointops: {name} is on device type {device_type!r}; use a CPU or CUDA tensor")
    if device_type == "cuda" and not has_cuda_kernels:
        raise ValueError(
            f"pointops: {name} is a CUDA tensor but this pointops build has no CUDA "
            "kernels; reinstall it where nvcc is available (or with POINTOPS_CUDA=1)"
        )


def _tensor(t, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not (t.is_cpu or (t.is_cuda and _HAS_CUDA_KERNELS)):  # the common case without a device object
        _check_device_type(t.device.type, name, _HAS_CUDA_KERNELS)
    return t


def _float_tensor(t, name: str) -> Tensor:
    t = _tensor(t, name)
    allowed = _CUDA_FLOATS if t.is_cuda else _CPU_FLOATS
    if t.dtype not in allowed:
        hint = (
            "float32/float16/bfloat16 (or float64)"
            if t.is_cuda
            else "float32 or float64 (float16/bfloat16 run on CUDA only)"
        )
        raise TypeError(f"pointops: {name} has dtype {t.dtype}; use {hint}")
    return t


def _points(t, name: str) -> Tensor:
    t = _float_tensor(t, name)
    if t.dim() != 3 or t.shape[2] != 3:
        raise ValueError(f"pointops: {name} must have shape [B, N, 3], got {list(t.shape)}")
    return t


def _same_device(ref: Tensor, ref_name: str, t: Tensor, name: str) -> None:
    if t.device != ref.device:
        raise ValueError(
            f"pointops: {name} is on {t.device} but {ref_name} is on {ref.device}; "
            "move them to the same device"
        )


def _index(t, name: str, ref: Tensor, ref_name: str) -> Tensor:
    t = _tensor(t, name)
    if t.dtype not in _INDEX_DTYPES:
        raise TypeError(f"pointops: {name} has dtype {t.dtype}; use int32 or int64")
    _same_device(ref, ref_name, t, name)
    return t if t.dtype == torch.int64 else t.long()


def _lengths(lengths, name: str, points: Tensor, points_name: str) -> Tensor | None:
    """Structure of optional per-cloud lengths; their values are checked by _ValueChecks."""
    if lengths is None:
        return None
    lengths = _index(lengths, name, points, points_name)
    if lengths.dim() != 1 or lengths.shape[0] != points.shape[0]:
        raise ValueError(
            f"pointops: {name} must have shape [B] = [{points.shape[0]}], got {list(lengths.shape)}"
        )
    return lengths


def _positive_int(k, name: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"pointops: {name} must be an int, got {type(k).__name__}")
    if k <= 0:
        raise ValueError(f"pointops: {name} must be > 0, got {k}")
    return k


def _radius(radius):
    """A ball radius: a finite number >= 0. Under torch.compile(dynamic=True) a float attribute
    is a symbolic float while tracing, which Python's math cannot test; the op's float argument
    specializes the graph on its value (a new radius recompiles) and the binding checks it."""
    if torch.compiler.is_compiling() and isinstance(radius, (float, torch.SymFloat)):
        return radius
    if isinstance(radius, bool) or not isinstance(radius, (int, float)):
        raise TypeError(f"pointops: radius must be a number, got {type(radius).__name__}")
    if not math.isfinite(radius) or radius < 0:
        raise ValueError(f"pointops: radius must be finite and >= 0, got {radius}")
    return float(radius)


def _pair_structure(xyz, query, names=("xyz", "query")):
    """Checks the types, devices and shapes of a point set and its queries (not the values)."""
    xyz_name, query_name = names
    xyz = _points(xyz, xyz_name)
    query = _points(query, query_name)
    _same_device(xyz, xyz_name, query, query_name)
    if query.dtype != xyz.dtype:
        raise TypeError(f"pointops: {query_name} has dtype {query.dtype} but {xyz_name} has {xyz.dtype}")
    if query.shape[0] != xyz.shape[0]:
        raise ValueError(
            f"pointops: {query_name} has batch size {query.shape[0]} but {xyz_name} has {xyz.shape[0]}"
        )
    return xyz, query


# ---------------------------------------------------------------------------------------------
# value checks and the call of an operator


def _not_finite_message(name: str) -> str:
    return f"pointops: {name} contains nan or inf; coordinates must be finite"


def coordinate_limit(dtype: torch.dtype) -> float:
    """The largest coordinate magnitude the distance ops accept for `dtype`.

    A squared distance of points within [-X, X]^3 is at most 3 * (2X)^2 = 12 X^2, summed in the
    accumulation type: float32 for float32, float16 and bfloat16, float64 for float64. The limit
    is the power of two below the exact bound sqrt(max / 12), so rounding cannot push a sum over:
    12 * (2^62)^2 = 1.5 * 2^127 < FLT_MAX and 12 * (2^510)^2 = 1.5 * 2^1023 < DBL_MAX.
    """
    return 2.0**510 if dtype == torch.float64 else 2.0**62


def _too_large_message(name: str, t: Tensor) -> str:
    limit = coordinate_limit(t.dtype)
    magnitude = float(t.detach().abs().amax())
    accumulation, power = ("float64", 510) if t.dtype == torch.float64 else ("float32", 62)
    return (
        f"pointops: {name} holds a coordinate of magnitude {magnitude:.4g}, above {limit:.4g} "
        f"(2^{power}), the largest for which squared distances stay finite in {accumulation} "
        f"arithmetic ({t.dtype}); scale the points down"
    )


def _plain(t: Tensor) -> Tensor:
    """The tensor holding t's values under torch.func transforms (all vmapped samples at once),
    which can be read, unlike the transforms' wrapper tensors."""
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t


class _ValueChecks:
    """The value checks of one call, read with a single copy (on CPU, after the binding refused a
    call instead of one per checked tensor and bound)."""

    __slots__ = ("_checks",)

    def __init__(self):
        self._checks = []  # (kind, tensor, name, low, high, detail)

    def finite(self, t: Tensor, name: str) -> _ValueChecks:
        self._checks.append(("finite", t, name, 0, 0, ""))
        return self

    def lengths(self, t: Tensor | None, name: str, points: Tensor, points_name: str) -> _ValueChecks:
        if t is not None:
            self._checks.append(("lengths", t, name, 0, points.shape[1], points_name))
        return self

    def indices(self, t: Tensor, name: str, n: int) -> _ValueChecks:
        self._checks.append(("indices", t, name, -1, n - 1, ""))
        return self

    def first_problem(self) -> ValueError | None:
        """The error of the first check that fails, in the order the checks were added."""
        live = [c for c in self._checks if c[1].numel()]
        if not live:
            return None
        stats = []
        for kind, t, *_ in live:
            t = _plain(t)
            smallest, largest = torch.aminmax(t)  # nan propagates
            if kind == "finite":
                limit = coordinate_limit(t.dtype)
                # 0: fine, 1: nan or inf, 2: finite beyond the limit
                status = torch.where(
                    torch.isfinite(smallest) & torch.isfinite(largest),
                    ((smallest < -limit) | (largest > limit)).long() * 2,
                    1,
                )
                stats.append(status.reshape(1))
            else:
                stats.append(torch.stack((smallest, largest)))
        values = torch.cat(stats).tolist()  # the one read of device data
        pos = 0
        for kind, t, name, low, high, detail in live:
            if kind == "finite":
                status, pos = values[pos], pos + 1
                if status == 1:
                    return ValueError(_not_finite_message(name))
                if status == 2:
                    return ValueError(_too_large_message(name, _plain(t)))
                continue
            got_low, got_high = int(values[pos]), int(values[pos + 1])
            pos += 2
            if got_low >= low and got_high <= high:
                continue
            if kind == "lengths":
                return ValueError(
                    f"pointops: {name} values must lie in 0..{high} (the size of "
                    f"{detail}'s point dimension), got {got_low}..{got_high}"
                )
            return ValueError(
                f"pointops: {name} values must lie in -1..{high} (-1 = no point), got {got_low}..{got_high}"
            )
        return None


def _call(op, args: tuple, checks=None, grad_inputs: tuple = (), function=None):
    """Runs op(*args) and turns a bad-value error into a ValueError that names the argument.

    The binding checks values itself: on CPU before the kernels run, on CUDA asynchronously
    (a problem found by an earlier call arrives as RuntimeError). `checks` is a callable giving
    this call's _ValueChecks, built only when a CPU op raised, to replace the binding's message
    with the clearer one. With no input requiring grad the op is called below the autograd layer.
    When one does, `function` (the op's lean autograd.Function from _registrations) is applied
    directly, skipping the dispatcher's round trip through the op's Python autograd kernel.
    Under torch.func transforms the op's transformable autograd.Function is applied instead
    (route); under torch.jit.trace the op goes through the dispatcher, where the tracer records
    it as pointops::* (an applied Function would be an unsaveable Python node).
    """
    if torch.compiler.is_compiling():
        return op(*args)  # traced: autograd is handled by the tracer
    try:
        if torch._C._are_functorch_transforms_active():
            return route(op, *args)
        if torch.is_grad_enabled() and _any_requires_grad(grad_inputs):
            return function.apply(*args) if function is not None and not torch._C._is_tracing() else op(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)
    except RuntimeError as error:
        if args[0].is_cuda:
            _raise_recorded(error)
        elif checks is not None and _value_checks_on:
            problem = checks().first_problem()
            if problem is not None:
                raise problem from None
        raise


def _any_requires_grad(tensors: tuple) -> bool:
    for t in tensors:  # (a loop: a generator for any() costs more than the check on small calls)
        if t is not None and t.requires_grad:
            return True
    return False


def _traceable(fn):
    """Under torch.jit.trace tensor sizes are traced values, and every comparison in the argument
    checks warns that the trace might not generalize. The checks only guard the Python call (the
    traced graph holds the op, which checks its inputs again when it runs), so while tracing
    those warnings are silenced."""

    @functools.wraps(fn)
    def api(*args, **kwargs):
        if not torch.jit.is_tracing():  # (torch.compile knows this one is False)
            return fn(*args, **kwargs)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"pointops\.")
            return fn(*args, **kwargs)

    return api


# ---------------------------------------------------------------------------------------------
# sampling and neighbour search

_fps_op = _ops.furthest_point_sample.default
_ball_query_op = _ops.ball_query.default
_knn_op = _ops.knn.default
_gather_op = _ops.gather.default


@_traceable
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
    lengths = _lengths(lengths, "lengths", xyz, "xyz")

    def checks():
        return _ValueChecks().finite(xyz, "xyz").lengths(lengths, "lengths", xyz, "xyz")

    return _call(_fps_op, (xyz, k, lengths, start), checks)


def _neighbour_checks(xyz, query, lengths, query_lengths, names=("xyz", "query")):
    """The value checks of a neighbour search, as a callable for _call."""
    return lambda: (
        _ValueChecks()
        .finite(xyz, names[0])
        .finite(query, names[1])
        .lengths(lengths, "lengths", xyz, names[0])
        .lengths(query_lengths, "query_lengths", query, names[1])
    )


@_traceable
def ball_query(
    xyz: Tensor,
    query: Tensor,
    radius: float,
    k: int,
    lengths: Tensor | None = None,
    query_lengths: Tensor | None = None,
    return_dist2: bool = False,
):
    """Points of xyz within `radius` (inclusive: d^2 <= radius^2) of each query point.

    Returns (idx [B, M, k] int64, count [B, M] int64), plus squared distances [B, M, k] when
    return_dist2. idx holds the first k hits in index order; a ball with fewer than k hits is
    padded by repeating its first hit, an empty ball is all -1 (dist2 +inf). Squared distances
    are differentiable w.r.t. xyz and query.
    """
    xyz, query = _pair_structure(xyz, query)
    radius = _radius(radius)
    k = _positive_int(k, "k")
    lengths = _lengths(lengths, "lengths", xyz, "xyz")
    query_lengths = _lengths(query_lengths, "query_lengths", query, "query")
    checks = _neighbour_checks(xyz, query, lengths, query_lengths)
    # only the distances carry a gradient: without return_dist2 nothing needs the autograd layer
    grad_inputs = (xyz, query) if return_dist2 else ()
    idx, count, dist2 = _call(
        _ball_query_op,
        (xyz, query, radius, k, lengths, query_lengths, True, bool(return_dist2)),
        checks,
        grad_inputs,
        BallQueryFunction,
    )
    return (idx, count, dist2) if return_dist2 else (idx, count)


@_traceable
def knn(
    xyz: Tensor, query: Tensor, k: int, lengths: Tensor | None = None, query_lengths: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """k nearest neighbours in xyz of each query point: (dist2 [B, M, k], idx [B, M, k] int64),
    sorted by ascending squared distance, equal distances by ascending index. Slots beyond a
    cloud's point count hold idx -1 and dist2 +inf. dist2 is differentiable w.r.t. xyz and query.
    """
    xyz, query = _pair_structure(xyz, query)
    k = _positive_int(k, "k")
    lengths = _lengths(lengths, "lengths", xyz, "xyz")
    query_lengths = _lengths(query_lengths, "query_lengths", query, "query")
    checks = _neighbour_checks(xyz, query, lengths, query_lengths)
    return _call(_knn_op, (xyz, query, k, lengths, query_lengths), checks, (xyz, query), KnnFunction)


@_traceable
def three_nn(unknown: Tensor, known: Tensor) -> tuple[Tensor, Tensor]:
    """The 3 nearest `known` points of each `unknown` point: (dist2 [B, n, 3], idx [B, n, 3])."""
    names = ("known", "unknown")
    known, unknown = _pair_structure(known, unknown, names)
    checks = _neighbour_checks(known, unknown, None, None, names)
    return _call(_knn_op, (known, unknown, 3, None, None), checks, (known, unknown), KnnFunction)


# ---------------------------------------------------------------------------------------------
# gathering


def _features(feat, name: str = "feat") -> Tensor:
    feat = _float_tensor(feat, name)
    if feat.dim() != 3:
        raise ValueError(f"pointops: {name} must have shape [B, C, N], got {list(feat.shape)}")
    return feat


def _index_checks(idx: Tensor, feat: Tensor):
    """The pending range check of a gather's idx into feat [B, C, N]; reads N only when it runs
    (on an error), as the gathers' host time is most of what a single call costs."""
    return lambda: _ValueChecks().indices(idx, "idx", feat.shape[2])


def _features_and_index(feat, idx, idx_layout: str):
    """Checks feat [B, C, N] and an index tensor of layout `idx_layout` (e.g. "[B, M]") into it;
    returns them with the pending index-range check."""
    feat = _features(feat)
    idx = _index(idx, "idx", feat, "feat")
    if idx.dim() != idx_layout.count(",") + 1 or idx.shape[0] != feat.shape[0]:
        raise ValueError(
            f"pointops: idx must have shape {idx_layout} with B = {feat.shape[0]}, got {list(idx.shape)}"
        )
    return feat, idx, _index_checks(idx, feat)


def _plain_gather_args(feat, idx, idx_dims: int) -> bool:
    """True when feat and idx need neither a conversion nor a clearer error than the binding's:
    the common call, checked in a few attribute reads (a gather's host time is most of what a
    single call costs). _features_and_index says what is wrong with the others."""
    if not (isinstance(feat, Tensor) and isinstance(idx, Tensor)):
        return False
    if idx.dtype is not torch.int64 or feat.dim() != 3 or idx.dim() != idx_dims:
        return False
    if feat.is_cuda:
        same_place = _HAS_CUDA_KERNELS and idx.is_cuda and feat.get_device() == idx.get_device()
        floats = _CUDA_FLOATS
    else:
        same_place, floats = feat.is_cpu and idx.is_cpu, _CPU_FLOATS
    return same_place and feat.dtype in floats and idx.size(0) == feat.size(0)


@_traceable
def gather_points(feat: Tensor, idx: Tensor) -> Tensor:
    """out[b, c, m] = feat[b, c, idx[b, m]]: [B, C, M]; idx -1 gives 0."""
    if not _plain_gather_args(feat, idx, 2):
        feat, idx, _ = _features_and_index(feat, idx, "[B, M]")
    return _call(_gather_op, (feat, idx, None), _index_checks(idx, feat), (feat,), GatherFunction)


@_traceable
def group_points(feat: Tensor, idx: Tensor) -> Tensor:
    """out[b, c, m, j] = feat[b, c, idx[b, m, j]]: [B, C, M, K]; idx -1 gives 0."""
    if _plain_gather_args(feat, idx, 3):
        checks = _index_checks(idx, feat)
    else:
        feat, idx, checks = _features_and_index(feat, idx, "[B, M, K]")
    B, M, K = idx.shape
    out = _call(_gather_op, (feat, idx.reshape(B, M * K, 1), None), checks, (feat,), GatherFunction)
    return out.view(B, feat.shape[1], M, K)


@_traceable
def three_interpolate(feat: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
    """out[b, c, i] = sum_j weight[b, i, j] * feat[b, c, idx[b, i, j]]: [B, C, n].
    Differentiable w.r.t. feat and weight; idx -1 contributes 0."""
    feat = _features(feat)
    idx = _index(idx, "idx", feat, "feat")
    weight = _float_tensor(weight, "weight")
    _same_device(feat, "feat", weight, "weight")
    if idx.dim() != 3 or idx.shape[0] != feat.shape[0]:
        raise ValueError(
            f"pointops: idx must have shape [B, n, T] with B = {feat.shape[0]}, got {list(idx.shape)}"
        )
    if weight.shape != idx.shape:
        raise ValueError(
            f"pointops: weight must have the shape of idx {list(idx.shape)}, got {list(weight.shape)}"
        )
    if weight.dtype != feat.dtype:
        raise TypeError(f"pointops: weight has dtype {weight.dtype} but feat has {feat.dtype}")
    return _call(_gather_op, (feat, idx, weight), _index_checks(idx, feat), (feat, weight), GatherFunction)
