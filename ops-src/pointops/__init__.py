"""pointops: point-cloud operators for PyTorch (CPU and CUDA).

    import pointops
    idx = pointops.furthest_point_sample(xyz, 512)

See docs/ops.md for semantics. `pointops.compat.pointnet2_utils` mirrors pointnet2_ops; Pointcept's
`pointops` names (knn_query, grouping, ...) are served here too (`pointops.compat.pointcept`), and
`ball_query` takes both the native and Pointcept's arguments (told apart by the first one).
"""

from __future__ import annotations

import importlib.metadata

import torch

from ._loader import ExtensionLoadError, load_extension

_EXTENSION_PATH = load_extension(torch.ops.load_library)

from . import (  # noqa: E402
    _registrations,  # noqa: F401  (needs the ops loaded above)
    _tuning,  # noqa: F401
    packed,
)
from ._build_info import build_info  # noqa: E402
from .chamfer import chamfer_distance  # noqa: E402
from .compat.pointcept import (  # noqa: E402  (Pointcept's pointops API)
    aggregation,
    attention_fusion_step,
    attention_relation_step,
    ball_query_and_group,
    batch2offset,
    farthest_point_sampling,
    grouping,
    grouping2,
    interpolation,
    interpolation2,
    knn_query,
    knn_query_and_group,
    offset2batch,
    query_and_group,
    random_ball_query,
    subtraction,
)
from .compat.pointcept import native_or_pointcept_ball_query as ball_query  # noqa: E402
from .ops import (  # noqa: E402
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


def __getattr__(name: str):
    """pointops.__version__, read when asked for (the metadata lookup costs milliseconds at import):
    the one version number is ops-src/pyproject.toml's, which the installed metadata carries."""
    if name != "__version__":
        raise AttributeError(f"module 'pointops' has no attribute {name!r}")
    try:
        version = importlib.metadata.version("pointops")
    except importlib.metadata.PackageNotFoundError:  # imported from a tree that was never installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version


__all__ = [
    "ExtensionLoadError",
    "aggregation",
    "attention_fusion_step",
    "attention_relation_step",
    "ball_query",
    "ball_query_and_group",
    "batch2offset",
    "build_info",
    "check_errors",
    "coordinate_limit",
    "chamfer_distance",
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
