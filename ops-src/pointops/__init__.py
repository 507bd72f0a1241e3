"""pointops: point-cloud operators for PyTorch (CPU and CUDA).

    import pointops
    idx = pointops.furthest_point_sample(xyz, 512)

See docs/ops.md for semantics. `pointops.compat.pointnet2_utils` mirrors pointnet2_ops.
"""

from __future__ import annotations

import torch

from ._loader import ExtensionLoadError, load_extension

_EXTENSION_PATH = load_extension(torch.ops.load_library)

from . import (  # noqa: E402,F401
    _registrations,  # noqa: E402,F401  (needs the ops loaded above)
    _tuning,
    packed,
)
from ._build_info import build_info  # noqa: E402
from .ops import (  # noqa: E402
    ball_query,
    check_errors,
    coordinate_limit,
    furthest_point_sample,
    gather_points,
    group_points,
    knn,
    set_value_checks,
    three_interpolate,
    three_nn,
    value_checks,
    value_checks_enabled,
)

__version__ = "0.1.0"

__all__ = [
    "ExtensionLoadError",
    "ball_query",
    "build_info",
    "check_errors",
    "coordinate_limit",
    "furthest_point_sample",
    "gather_points",
    "group_points",
    "knn",
    "packed",
    "set_value_checks",
    "three_interpolate",
    "three_nn",
    "value_checks",
    "value_checks_enabled",
]
