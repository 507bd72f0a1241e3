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
    import pointops
    import torch

    _ops = torch.ops.pointops

    def _shape(t, name: str, shape: tuple) -> torch.Tensor:
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(shape):
            got = list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"pointnet2_batch_cuda: {name} must have shape {list(shape)}, got {got}")
        return t

    def _int_index(idx: torch.Tensor) -> torch.Tensor:
        """Native -1 ("no point") becomes 0, as openpoints' kernels leave it."""
        return idx.clamp_min(0).to(torch.int32)

    def furthest_point_sampling_wrapper(b, n, m, points_tensor, temp_tensor, idx_tensor):
        """idx [b, m] (int32) <- farthest point sampling of points [b, n, 3] from point 0."""
        _shape(points_tensor, "points", (b, n, 3))
        _shape(idx_tensor, "idx", (b, m))
        if m > 0 and b > 0:
            idx_tensor.copy_(_int_index(pointops.furthest_point_sample(points_tensor, m)))
        return 1

    def ball_query_wrapper(b, n, m, radius, nsample, new_xyz_tensor, xyz_tensor, idx_tensor):
        """idx [b, m, nsample] (int32) <- the first nsample points of xyz [b, n, 3] with
        d^2 < radius^2 of each new_xyz [b, m, 3] point; empty balls keep their idx row."""
        _shape(new_xyz_tensor, "new_xyz", (b, m, 3))
        _shape(xyz_tensor, "xyz", (b, n, 3))
        _shape(idx_tensor, "idx", (b, m, nsample))
        if b == 0 or m == 0 or nsample <= 0:
            return 1
        r2 = torch.tensor(float(radius), dtype=torch.float32)
        r2 = float(r2 * r2)  # openpoints squares the radius in float32
        # radius whose square, rounded to float32 as pointops does, is exactly r2
        radius_arg = r2**0.5 if xyz_tensor.dtype == torch.float32 else float(radius)
        idx, count, _ = _ops.ball_query(
            xyz_tensor, new_xyz_tensor, radius_arg, nsample, None, None, False, False
        )
        hit = (count > 0).unsqueeze(-1)
        idx_tensor.copy_(torch.where(hit, idx.to(torch.int32), idx_tensor))
        return 1

    def group_points_wrapper(b, c, n, npoints, nsample, points_tensor, idx_tensor, out_tensor):
        """out [b, c, npoints, nsample] <- points [b, c, n] at idx [b, npoints, nsample]."""
        _shape(points_tensor, "points", (b, c, n))
        _shape(idx_tensor, "idx", (b, npoints, nsample))
        out_tensor.copy_(pointops.group_points(points_tensor, idx_tensor))
        return 1

    def group_points_grad_wrapper(b, c, n, npoints, nsample, grad_out_tensor, idx_tensor, grad_points_tensor):
        """grad_points [b, c, n] += the scatter of grad_out [b, c, npoints, nsample] to idx."""
        _shape(grad_out_tensor, "grad_out", (b, c, npoints, nsample))
        _shape(idx_tensor, "idx", (b, npoints, nsample))
        flat = idx_tensor.reshape(b, npoints * nsample, 1).long()
        grad = _ops.gather_backward_feat(grad_out_tensor.reshape(b, c, npoints * nsample), flat, None, n)
        grad_points_tensor.add_(grad)
        return 1

    def gather_points_wrapper(b, c, n, npoints, points_tensor, idx_tensor, out_tensor):
        """out [b, c, npoints] <- points [b, c, n] at idx [b, npoints]."""
        _shape(points_tensor, "points", (b, c, n))
        _shape(idx_tensor, "idx", (b, npoints))
        out_tensor.copy_(pointops.gather_points(points_tensor, idx_tensor))
        return 1

    def gather_points_grad_wrapper(b, c, n, npoints, grad_out_tensor, idx_tensor, grad_points_tensor):
        """grad_points [b, c, n] += the scatter of grad_out [b, c, npoints] to idx."""
        _shape(grad_out_tensor, "grad_out", (b, c, npoints))
        _shape(idx_tensor, "idx", (b, npoints))
        grad = _ops.gather_backward_feat(grad_out_tensor, idx_tensor.reshape(b, npoints, 1).long(), None, n)
        grad_points_tensor.add_(grad)
        return 1

    def three_nn_wrapper(b, n, m, unknown_tensor, known_tensor, dist2_tensor, idx_tensor):
        """dist2 [b, n, 3] (squared), idx [b, n, 3] (int32) <- the 3 nearest known [b, m, 3]
        points of each unknown [b, n, 3] point."""
        _shape(unknown_tensor, "unknown", (b, n, 3))
        _shape(known_tensor, "known", (b, m, 3))
        dist2, idx = pointops.three_nn(unknown_tensor, known_tensor)
        dist2_tensor.copy_(dist2)
        idx_tensor.copy_(_int_index(idx))
        return 1

    def three_interpolate_wrapper(b, c, m, n, points_tensor, idx_tensor, weight_tensor, out_tensor):
        """out [b, c, n] <- sum_j weight[b, i, j] * points[b, c, idx[b, i, j]]."""
        _shape(points_tensor, "points", (b, c, m))
        _shape(idx_tensor, "idx", (b, n, 3))
        out_tensor.copy_(pointops.three_interpolate(points_tensor, idx_tensor, weight_tensor))
        return 1

    def three_interpolate_grad_wrapper(
        b, c, n, m, grad_out_tensor, idx_tensor, weight_tensor, grad_points_tensor
    ):
        """grad_points [b, c, m] += the weighted scatter of grad_out [b, c, n] to idx."""
        _shape(grad_out_tensor, "grad_out", (b, c, n))
        _shape(idx_tensor, "idx", (b, n, 3))
        grad = _ops.gather_backward_feat(grad_out_tensor, idx_tensor.long(), weight_tensor, m)
        grad_points_tensor.add_(grad)
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
