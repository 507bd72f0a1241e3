"""`pointnet2_batch_cuda`: the compiled module openpoints (PointNeXt, PointMLP, PointVector)
imports, served by pointops (CPU and CUDA), with openpoints' function names and out-parameter
conventions: each function writes its result into the tensors it is given and returns 1.

Installed with pointops as a top-level module. It never hides a compiled pointnet2_batch_cuda
silently: at import it looks for one (an extension module of that name anywhere on sys.path)
and, when found, loads and returns that one instead, with a warning (set
POINTOPS_PN2_BATCH=pointops to keep pointops' functions anyway). A compiled module in the same
directory as this file also wins by Python's own import order (extension modules first).

Semantics (openpoints' cpp/pointnet2_batch kernels): ball query keeps the first nsample points
with d^2 < r^2 (r^2 in float32), pads a short ball with its first hit and leaves the index row
of an empty ball as it was (the callers pass zeros); FPS starts at point 0; three_nn writes
squared distances, a missing neighbour (fewer than 3 points) is index 0 at distance inf; the
gradient functions add into the given (zeroed) gradient tensor. Differences: no skipped bounds
checks (index values are checked), deterministic gradient sums, and `temp` (FPS scratch) is
left untouched.

Bad input raises TypeError/ValueError naming the function and the argument. Out-parameters must
have exactly the expected shape, int32 (indices) or the inputs' float dtype, the inputs' device,
no two elements at one address and no memory shared with an input; non-contiguous ones are
written in place, without autograd (as the compiled original writes raw memory). The ball query
radius is a number >= 0 for every dtype; one whose float32 square overflows, inf included,
takes every point (openpoints' r^2 is then inf).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings


def _compiled_elsewhere():
    """The path of a compiled pointnet2_batch_cuda on sys.path, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        directory = os.path.abspath(entry or os.getcwd())
        if directory == here or not os.path.isdir(directory):
            continue
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            candidate = os.path.join(directory, "pointnet2_batch_cuda" + suffix)
            if os.path.isfile(candidate):
                return candidate
    return None


_real = None if os.environ.get("POINTOPS_PN2_BATCH") == "pointops" else _compiled_elsewhere()
if _real is not None:
    warnings.warn(
        f"pointnet2_batch_cuda: using the compiled module at {_real} instead of pointops' "
        "(set POINTOPS_PN2_BATCH=pointops to use pointops')",
        RuntimeWarning,
        stacklevel=2,
    )
    _spec = importlib.util.spec_from_file_location(
        __name__, _real, loader=importlib.machinery.ExtensionFileLoader(__name__, _real)
    )
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    sys.modules[__name__] = _module
else:
    import operator

    import torch
    from pointops import ops as _api
    from pointops.compat.pointnet2_utils import _checked_radius, _pointnet2_radius

    _MODULE = "pointnet2_batch_cuda"

    def _where(function: str) -> str:
        return f"{_MODULE}.{function}"

    def _size(value, function: str, name: str):
        """A size argument (b, n, m, c, npoints, nsample): an int >= 0."""
        if torch.compiler.is_compiling():
            return value  # symbolic under dynamic=True; the shape checks compare it to the tensors
        try:  # ints, numpy ints, and the 0-d int tensors that sizes are under torch.jit.trace
            if isinstance(value, bool):
                raise TypeError
            value = operator.index(value)
        except TypeError:
            raise TypeError(
                f"{_where(function)}: {name} must be an int, got {type(value).__name__}"
            ) from None
        if value < 0:
            raise ValueError(f"{_where(function)}: {name} must be >= 0, got {value}")
        return value

    def _shaped(t, function: str, name: str, shape: tuple) -> torch.Tensor:
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{_where(function)}: {name} must be a torch.Tensor of shape {list(shape)}, "
                f"got {type(t).__name__}"
            )
        if not (t.is_cpu or t.is_cuda):
            raise ValueError(
                f"{_where(function)}: {name} is on device type {t.device.type!r}; use a CPU or CUDA tensor"
            )
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{_where(function)}: {name} must have shape {list(shape)}, got {list(t.shape)}")
        return t

    def _same_device(t: torch.Tensor, function: str, name: str, ref: torch.Tensor, ref_name: str) -> None:
        if t.device != ref.device:
            raise ValueError(
                f"{_where(function)}: {name} is on {t.device} but {ref_name} is on {ref.device}; "
                "move them to the same device"
            )

    def _floats(t, function: str, name: str, shape: tuple, ref=None, ref_name: str = "") -> torch.Tensor:
        """A float input: float32/float64 (CUDA also float16/bfloat16), on ref's device and of
        ref's dtype when ref is given."""
        _shaped(t, function, name, shape)
        if ref is not None:
            _same_device(t, function, name, ref, ref_name)
            if t.dtype != ref.dtype:
                raise TypeError(
                    f"{_where(function)}: {name} has dtype {t.dtype} but {ref_name} has {ref.dtype}"
                )
            return t
        allowed = _api._CUDA_FLOATS if t.is_cuda else _api._CPU_FLOATS
        if t.dtype not in allowed:
            hint = (
                "float32, float64, float16 or bfloat16"
                if t.is_cuda
                else "float32 or float64 (float16/bfloat16 on CUDA)"
            )
            raise TypeError(f"{_where(function)}: {name} has dtype {t.dtype}; use {hint}")
        if t.is_cuda and not _api._HAS_CUDA_KERNELS:
            raise ValueError(
                f"{_where(function)}: {name} is a CUDA tensor but this pointops build has no CUDA kernels; "
                "reinstall it where nvcc is available (or with POINTOPS_CUDA=1)"
            )
        return t

    def _indices(t, function: str, name: str, shape: tuple, ref, ref_name: str) -> torch.Tensor:
        """An index input: int32 (openpoints' type) or int64, on ref's device; as int64."""
        _shaped(t, function, name, shape)
        if t.dtype not in _api._INDEX_DTYPES:
            raise TypeError(f"{_where(function)}: {name} has dtype {t.dtype}; use int32")
        _same_device(t, function, name, ref, ref_name)
        return t.long()

    def _output(t, function: str, name: str, shape: tuple, dtype, ref, ref_name: str, inputs: dict):
        """An out-parameter: exactly `shape` and `dtype`, on ref's device, no two elements at one
        address (it is written), sharing no memory with the inputs (they are read)."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{_where(function)}: {name} must be a {dtype} tensor of shape {list(shape)} to write "
                f"the result into, got {type(t).__name__}"
            )
        _shaped(t, function, name, shape)
        if t.dtype != dtype:
            raise TypeError(f"{_where(function)}: {name} must have dtype {dtype}, got {t.dtype}")
        _same_device(t, function, name, ref, ref_name)
        if torch.compiler.is_compiling():  # fake tensors have no addresses; the capture checks writes
            return t
        if _overlaps_itself(t):
            raise ValueError(
                f"{_where(function)}: {name} has elements that share memory (e.g. an expand()ed "
                "tensor); pass a tensor of its own, such as a contiguous one"
            )
        for input_name, other in inputs.items():
            if other is not None and _share_memory(t, other):
                raise ValueError(
                    f"{_where(function)}: {name} shares memory with {input_name}; pass a separate tensor"
                )
        return t

    def _overlaps_itself(t: torch.Tensor) -> bool:
        """Whether two elements of t may share an address: dims by increasing stride must each
        step past everything the smaller ones reach (false alarms only for exotic layouts)."""
        reach = 0
        for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape, strict=True) if sz > 1):
            if stride <= reach:
                return True
            reach += stride * (size - 1)
        return False

    def _share_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
        """Whether the byte ranges spanned by a and b intersect."""
        if a.device != b.device or a.numel() == 0 or b.numel() == 0:
            return False

        def span(t):
            start = t.data_ptr()
            last = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))
            return start, start + (last + 1) * t.element_size()

        (a0, a1), (b0, b1) = span(a), span(b)
        return a0 < b1 and b0 < a1

    def _run(function: str, op, args: tuple, checks):
        """op(*args) through pointops' value checks; a bad value of this call (CPU) is reported
        under this function's name. (A CUDA check reports an earlier call, under its own name.)"""
        try:
            return _api._call(op, args, checks)
        except ValueError as error:
            message = str(error)
            if not message.startswith("pointops: "):
                raise
            raise ValueError(f"{_where(function)}: {message[len('pointops: ') :]}") from None

    def _finite(*named):
        """Value checks: coordinates finite and small enough for finite squared distances."""

        def checks():
            found = _api._ValueChecks()
            for name, t in named:
                found.finite(t, name)
            return found

        return checks

    def _index_range(idx: torch.Tensor, n: int):
        return lambda: _api._ValueChecks().indices(idx, "idx", n)

    def _scatter(function: str, grad_out: torch.Tensor, idx: torch.Tensor, weight, n: int) -> torch.Tensor:
        """gather_backward_feat(grad_out, idx [b, P, T], weight, n) with idx's values checked.
        On CUDA that op checks none (the core API's backward reuses indices its forward gather
        checked): a one-channel gather of the same indices records a bad one, without a sync,
        for the next pointops call or pointops.check_errors() to raise."""
        if grad_out.is_cuda and _api.value_checks_enabled() and not torch.compiler.is_compiling():
            rows = idx.reshape(idx.shape[0], idx.shape[1] * idx.shape[2], 1)
            _api._gather_op(grad_out.new_zeros(idx.shape[0], 1, n), rows, None)
        args = (grad_out, idx, weight, n)
        return _run(function, _api._ops.gather_backward_feat.default, args, _index_range(idx, n))

    def _int32_index(idx: torch.Tensor) -> torch.Tensor:
        """Native -1 ("no point") becomes 0, as openpoints' kernels leave it."""
        return idx.clamp_min(0).to(torch.int32)

    @torch.no_grad()
    def furthest_point_sampling_wrapper(b, n, m, points_tensor, temp_tensor, idx_tensor):
        """idx [b, m] (int32) <- farthest point sampling of points [b, n, 3] from point 0.
        temp (openpoints' scratch: None or a float tensor [b, n]) is not used."""
        fn = "furthest_point_sampling_wrapper"
        b, n, m = _size(b, fn, "b"), _size(n, fn, "n"), _size(m, fn, "m")
        points = _floats(points_tensor, fn, "points", (b, n, 3))
        if temp_tensor is not None:
            _shaped(temp_tensor, fn, "temp", (b, n))
            _same_device(temp_tensor, fn, "temp", points, "points")
            if not temp_tensor.is_floating_point():
                raise TypeError(
                    f"{_where(fn)}: temp has dtype {temp_tensor.dtype}; use a float dtype, or None (it is not used)"
                )
        idx = _output(idx_tensor, fn, "idx", (b, m), torch.int32, points, "points", {"points": points})
        if b > 0 and m > 0:
            picks = _run(fn, _api._fps_op, (points, m, None, 0), _finite(("points", points)))
            idx.copy_(_int32_index(picks))
        return 1

    @torch.no_grad()
    def ball_query_wrapper(b, n, m, radius, nsample, new_xyz_tensor, xyz_tensor, idx_tensor):
        """idx [b, m, nsample] (int32) <- the first nsample points of xyz [b, n, 3] with
        d^2 < radius^2 of each new_xyz [b, m, 3] point; empty balls keep their idx row.
        radius: a number >= 0 (a radius whose square overflows, inf included, takes every point,
        as openpoints' float32 r^2 = inf does)."""
        fn = "ball_query_wrapper"
        b, n, m = _size(b, fn, "b"), _size(n, fn, "n"), _size(m, fn, "m")
        nsample = _size(nsample, fn, "nsample")
        radius = _checked_radius(radius, _where(fn))
        xyz = _floats(xyz_tensor, fn, "xyz", (b, n, 3))
        new_xyz = _floats(new_xyz_tensor, fn, "new_xyz", (b, m, 3), xyz, "xyz")
        idx = _output(
            idx_tensor, fn, "idx", (b, m, nsample), torch.int32, xyz, "xyz", {"xyz": xyz, "new_xyz": new_xyz}
        )
        if b == 0 or m == 0 or nsample == 0:
            return 1
        args = (xyz, new_xyz, _pointnet2_radius(radius, xyz.dtype), nsample, None, None, False, False)
        found, count, _ = _run(fn, _api._ball_query_op, args, _finite(("xyz", xyz), ("new_xyz", new_xyz)))
        idx.copy_(torch.where((count > 0).unsqueeze(-1), found.to(torch.int32), idx))
        return 1

    @torch.no_grad()
    def group_points_wrapper(b, c, n, npoints, nsample, points_tensor, idx_tensor, out_tensor):
        """out [b, c, npoints, nsample] <- points [b, c, n] at idx [b, npoints, nsample]."""
        fn = "group_points_wrapper"
        b, c, n = _size(b, fn, "b"), _size(c, fn, "c"), _size(n, fn, "n")
        npoints, nsample = _size(npoints, fn, "npoints"), _size(nsample, fn, "nsample")
        points = _floats(points_tensor, fn, "points", (b, c, n))
        idx = _indices(idx_tensor, fn, "idx", (b, npoints, nsample), points, "points")
        inputs = {"points": points, "idx": idx_tensor}
        out = _output(out_tensor, fn, "out", (b, c, npoints, nsample), points.dtype, points, "points", inputs)
        flat = idx.reshape(b, npoints * nsample, 1)
        grouped = _run(fn, _api._gather_op, (points, flat, None), _index_range(idx, n))
        out.copy_(grouped.view(b, c, npoints, nsample))
        return 1

    @torch.no_grad()
    def group_points_grad_wrapper(b, c, n, npoints, nsample, grad_out_tensor, idx_tensor, grad_points_tensor):
        """grad_points [b, c, n] += the scatter of grad_out [b, c, npoints, nsample] to idx."""
        fn = "group_points_grad_wrapper"
        b, c, n = _size(b, fn, "b"), _size(c, fn, "c"), _size(n, fn, "n")
        npoints, nsample = _size(npoints, fn, "npoints"), _size(nsample, fn, "nsample")
        grad_out = _floats(grad_out_tensor, fn, "grad_out", (b, c, npoints, nsample))
        idx = _indices(idx_tensor, fn, "idx", (b, npoints, nsample), grad_out, "grad_out")
        inputs = {"grad_out": grad_out, "idx": idx_tensor}
        grad_points = _output(
            grad_points_tensor, fn, "grad_points", (b, c, n), grad_out.dtype, grad_out, "grad_out", inputs
        )
        flat = idx.reshape(b, npoints * nsample, 1)
        grad_points.add_(_scatter(fn, grad_out.reshape(b, c, npoints * nsample), flat, None, n))
        return 1

    @torch.no_grad()
    def gather_points_wrapper(b, c, n, npoints, points_tensor, idx_tensor, out_tensor):
        """out [b, c, npoints] <- points [b, c, n] at idx [b, npoints]."""
        fn = "gather_points_wrapper"
        b, c, n, npoints = (
            _size(b, fn, "b"),
            _size(c, fn, "c"),
            _size(n, fn, "n"),
            _size(npoints, fn, "npoints"),
        )
        points = _floats(points_tensor, fn, "points", (b, c, n))
        idx = _indices(idx_tensor, fn, "idx", (b, npoints), points, "points")
        inputs = {"points": points, "idx": idx_tensor}
        out = _output(out_tensor, fn, "out", (b, c, npoints), points.dtype, points, "points", inputs)
        out.copy_(_run(fn, _api._gather_op, (points, idx.unsqueeze(-1), None), _index_range(idx, n)))
        return 1

    @torch.no_grad()
    def gather_points_grad_wrapper(b, c, n, npoints, grad_out_tensor, idx_tensor, grad_points_tensor):
        """grad_points [b, c, n] += the scatter of grad_out [b, c, npoints] to idx."""
        fn = "gather_points_grad_wrapper"
        b, c, n, npoints = (
            _size(b, fn, "b"),
            _size(c, fn, "c"),
            _size(n, fn, "n"),
            _size(npoints, fn, "npoints"),
        )
        grad_out = _floats(grad_out_tensor, fn, "grad_out", (b, c, npoints))
        idx = _indices(idx_tensor, fn, "idx", (b, npoints), grad_out, "grad_out")
        inputs = {"grad_out": grad_out, "idx": idx_tensor}
        grad_points = _output(
            grad_points_tensor, fn, "grad_points", (b, c, n), grad_out.dtype, grad_out, "grad_out", inputs
        )
        grad_points.add_(_scatter(fn, grad_out, idx.unsqueeze(-1), None, n))
        return 1

    @torch.no_grad()
    def three_nn_wrapper(b, n, m, unknown_tensor, known_tensor, dist2_tensor, idx_tensor):
        """dist2 [b, n, 3] (squared), idx [b, n, 3] (int32) <- the 3 nearest known [b, m, 3]
        points of each unknown [b, n, 3] point."""
        fn = "three_nn_wrapper"
        b, n, m = _size(b, fn, "b"), _size(n, fn, "n"), _size(m, fn, "m")
        unknown = _floats(unknown_tensor, fn, "unknown", (b, n, 3))
        known = _floats(known_tensor, fn, "known", (b, m, 3), unknown, "unknown")
        inputs = {"unknown": unknown, "known": known}
        dist2_out = _output(dist2_tensor, fn, "dist2", (b, n, 3), unknown.dtype, unknown, "unknown", inputs)
        inputs["dist2"] = dist2_out
        idx_out = _output(idx_tensor, fn, "idx", (b, n, 3), torch.int32, unknown, "unknown", inputs)
        checks = _finite(("known", known), ("unknown", unknown))
        dist2, idx = _run(fn, _api._knn_op, (known, unknown, 3, None, None), checks)
        dist2_out.copy_(dist2)
        idx_out.copy_(_int32_index(idx))
        return 1

    @torch.no_grad()
    def three_interpolate_wrapper(b, c, m, n, points_tensor, idx_tensor, weight_tensor, out_tensor):
        """out [b, c, n] <- sum_j weight[b, i, j] * points[b, c, idx[b, i, j]]."""
        fn = "three_interpolate_wrapper"
        b, c, m, n = _size(b, fn, "b"), _size(c, fn, "c"), _size(m, fn, "m"), _size(n, fn, "n")
        points = _floats(points_tensor, fn, "points", (b, c, m))
        idx = _indices(idx_tensor, fn, "idx", (b, n, 3), points, "points")
        weight = _floats(weight_tensor, fn, "weight", (b, n, 3), points, "points")
        inputs = {"points": points, "idx": idx_tensor, "weight": weight}
        out = _output(out_tensor, fn, "out", (b, c, n), points.dtype, points, "points", inputs)
        out.copy_(_run(fn, _api._gather_op, (points, idx, weight), _index_range(idx, m)))
        return 1

    @torch.no_grad()
    def three_interpolate_grad_wrapper(
        b, c, n, m, grad_out_tensor, idx_tensor, weight_tensor, grad_points_tensor
    ):
        """grad_points [b, c, m] += the weighted scatter of grad_out [b, c, n] to idx."""
        fn = "three_interpolate_grad_wrapper"
        b, c, n, m = _size(b, fn, "b"), _size(c, fn, "c"), _size(n, fn, "n"), _size(m, fn, "m")
        grad_out = _floats(grad_out_tensor, fn, "grad_out", (b, c, n))
        idx = _indices(idx_tensor, fn, "idx", (b, n, 3), grad_out, "grad_out")
        weight = _floats(weight_tensor, fn, "weight", (b, n, 3), grad_out, "grad_out")
        inputs = {"grad_out": grad_out, "idx": idx_tensor, "weight": weight}
        grad_points = _output(
            grad_points_tensor, fn, "grad_points", (b, c, m), grad_out.dtype, grad_out, "grad_out", inputs
        )
        grad_points.add_(_scatter(fn, grad_out, idx, weight, m))
        return 1

    __all__ = [
        "ball_query_wrapper",
        "furthest_point_sampling_wrapper",
        "gather_points_grad_wrapper",
        "gather_points_wrapper",
        "group_points_grad_wrapper",
        "group_points_wrapper",
        "three_interpolate_grad_wrapper",
        "three_interpolate_wrapper",
        "three_nn_wrapper",
    ]
