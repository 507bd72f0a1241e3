"""pointnet2_ops.pointnet2_utils: pointops.compat.pointnet2_utils under the module path code
written for Pointnet2_PyTorch imports.

The functions and modules are pointops' (int32 indices, upstream's argument order and
conventions); the differences from pointnet2_ops are listed in docs/ops.md, section
"pointnet2_ops compatibility". Upstream exposes each function also as a torch.autograd.Function
class (`furthest_point_sample = FurthestPointSampling.apply`); the classes here keep those names
for code that calls `FurthestPointSampling.apply(...)`.
"""

from __future__ import annotations

try:
    from pointops.compat.pointnet2_utils import (
        GroupAll,
        QueryAndGroup,
        ball_query,
        furthest_point_sample,
        gather_operation,
        grouping_operation,
        three_interpolate,
        three_nn,
    )
except ImportError as exc:
    if exc.name not in ("pointops", "pointops.compat"):
        raise  # pointops is there but failed to load: its own message says why
    raise ImportError(
        "pointnet2_ops is served by pointops, which is not installed: pip install pointops "
        "(CPU), pointops-cu12 or pointops-cu13 (CUDA; exactly one of the three), or "
        "`conda install -c pointops -c conda-forge pointops`"
    ) from exc

__all__ = [
    "BallQuery",
    "FurthestPointSampling",
    "GatherOperation",
    "GroupAll",
    "GroupingOperation",
    "QueryAndGroup",
    "ThreeInterpolate",
    "ThreeNN",
    "ball_query",
    "furthest_point_sample",
    "gather_operation",
    "grouping_operation",
    "three_interpolate",
    "three_nn",
]


class FurthestPointSampling:
    """Upstream's Function name: `apply(xyz, npoint)` is furthest_point_sample."""

    apply = staticmethod(furthest_point_sample)


class GatherOperation:
    """Upstream's Function name: `apply(features, idx)` is gather_operation."""

    apply = staticmethod(gather_operation)


class ThreeNN:
    """Upstream's Function name: `apply(unknown, known)` is three_nn."""

    apply = staticmethod(three_nn)


class ThreeInterpolate:
    """Upstream's Function name: `apply(features, idx, weight)` is three_interpolate."""

    apply = staticmethod(three_interpolate)


class GroupingOperation:
    """Upstream's Function name: `apply(features, idx)` is grouping_operation."""

    apply = staticmethod(grouping_operation)


class BallQuery:
    """Upstream's Function name: `apply(radius, nsample, xyz, new_xyz)` is ball_query."""

    apply = staticmethod(ball_query)
