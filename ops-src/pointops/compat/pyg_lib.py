"""pyg-lib's point operators (`pyg_lib.ops.fps / knn / radius / nearest / grid_cluster`), the
row-pointer (`ptr`) forms that succeed torch_cluster's batch vectors, on pointops.

    from pointops.compat import pyg_lib
    edge_index = pyg_lib.knn(x, y, 16, ptr_x, ptr_y)     # [2, E]: y rows, x rows

Same semantics and deliberate differences as pointops.compat.torch_cluster (see there); the
ptr tensors are int64 [B + 1] starting at 0. grid_cluster runs on CPU and CUDA.
"""

# TorchScript compiles these functions: keep typing.Optional (it reads it).
# ruff: noqa: UP045

from typing import Optional

import torch
from torch import Tensor

from . import _cluster_ops  # noqa: F401  (registers torch.ops.pointops_compat.*)
from .torch_cluster import grid_cluster

__all__ = ["fps", "grid_cluster", "knn", "nearest", "radius"]


def fps(src: Tensor, ptr: Tensor, ratio: float = 0.5, random_start: bool = True) -> Tensor:
    """Farthest point sampling of ceil(ratio * size) points of each cloud: global indices."""
    r = torch.tensor(ratio, dtype=torch.float32, device=src.device)
    return torch.ops.pointops_compat.fps(src, ptr, r, random_start)


def knn(
    x: Tensor,
    y: Tensor,
    k: int = 1,
    ptr_x: Optional[Tensor] = None,
    ptr_y: Optional[Tensor] = None,
    cosine: bool = False,
    num_workers: int = 1,
) -> Tensor:
    """The k nearest x rows of each y row: edge_index [2, E] (row 0: y, row 1: x)."""
    return torch.ops.pointops_compat.knn(x, y, ptr_x, ptr_y, k, cosine)


def radius(
    x: Tensor,
    y: Tensor,
    r: float = 1.0,
    ptr_x: Optional[Tensor] = None,
    ptr_y: Optional[Tensor] = None,
    max_num_neighbors: int = 32,
    num_workers: int = 1,
    ignore_same_index: bool = False,
) -> Tensor:
    """The first max_num_neighbors x rows (index order) at distance < r of each y row: [2, E]."""
    return torch.ops.pointops_compat.radius(
        x, y, ptr_x, ptr_y, float(r), max_num_neighbors, ignore_same_index
    )


def nearest(x: Tensor, y: Tensor, ptr_x: Optional[Tensor] = None, ptr_y: Optional[Tensor] = None) -> Tensor:
    """For each x row, the index of the nearest y row of its cloud. Every cloud with rows in x
    needs rows in y (torch_cluster.nearest's rule): otherwise ValueError (one read of the device)."""
    out = torch.ops.pointops_compat.nearest(x, y, ptr_x, ptr_y)
    if not torch.compiler.is_compiling() and bool((out < 0).any()):
        raise ValueError(
            "pointops: a cloud of x has rows but its cloud of y is empty, so those rows have no nearest "
            "row; give every cloud of x points in y (or drop those clouds from x)"
        )
    return out


# ---------------------------------------------------------------------------------------------
# torch.ops.pyg.* for PyTorch Geometric >= 2.8, which calls pyg-lib's ops instead of torch_cluster

_PYG_OPS = ("fps", "knn", "radius", "nearest", "grid_cluster")


def _define_pyg_ops() -> None:
    @torch.library.custom_op("pyg::fps", mutates_args=())
    def _fps(src: Tensor, ptr: Tensor, ratio: float = 0.5, random_start: bool = True) -> Tensor:
        return fps(src, ptr, ratio, random_start)

    @torch.library.custom_op("pyg::knn", mutates_args=())
    def _knn(
        x: Tensor,
        y: Tensor,
        ptr_x: Optional[Tensor] = None,
        ptr_y: Optional[Tensor] = None,
        k: int = 1,
        cosine: bool = False,
        num_workers: int = 1,
    ) -> Tensor:
        return knn(x, y, k, ptr_x, ptr_y, cosine, num_workers)

    @torch.library.custom_op("pyg::radius", mutates_args=())
    def _radius(
        x: Tensor,
        y: Tensor,
        ptr_x: Optional[Tensor] = None,
        ptr_y: Optional[Tensor] = None,
        r: float = 1.0,
        max_num_neighbors: int = 32,
        num_workers: int = 1,
        ignore_same_index: bool = False,
    ) -> Tensor:
        return radius(x, y, r, ptr_x, ptr_y, max_num_neighbors, num_workers, ignore_same_index)

    @torch.library.custom_op("pyg::nearest", mutates_args=())
    def _nearest(
        x: Tensor, y: Tensor, ptr_x: Optional[Tensor] = None, ptr_y: Optional[Tensor] = None
    ) -> Tensor:
        return nearest(x, y, ptr_x, ptr_y).clone()

    @torch.library.custom_op("pyg::grid_cluster", mutates_args=())
    def _grid(
        pos: Tensor, size: Tensor, start: Optional[Tensor] = None, end: Optional[Tensor] = None
    ) -> Tensor:
        return grid_cluster(pos, size, start, end)

    @_grid.register_fake
    def _grid_fake(pos, size, start=None, end=None):
        # one id per point: the shape torch.compile needs to trace voxel_grid
        return pos.new_empty((pos.shape[0] if pos.dim() > 0 else 0,), dtype=torch.int64)


def install_pyg_ops(torch_geometric_flags: bool = True) -> None:
    """Registers torch.ops.pyg.fps / knn / radius / nearest / grid_cluster (pyg-lib's schemas)
    backed by pointops, for PyTorch Geometric >= 2.8, whose fps, knn, radius, nearest and
    voxel_grid call these ops. With torch_geometric_flags it also turns on torch_geometric's
    matching feature flags (WITH_FPS, WITH_KNN, WITH_RADIUS, WITH_NEAREST, WITH_GRID_CLUSTER),
    which it sets False at import when pyg-lib is absent. Raises if pyg-lib is installed (its
    library owns the `pyg` namespace: use it, or uninstall it). Idempotent."""
    import importlib.util

    if importlib.util.find_spec("pyg_lib") is not None:
        raise RuntimeError(
            "pointops: pyg-lib is installed and defines torch.ops.pyg itself; "
            "install_pyg_ops() is for environments without it"
        )
    try:
        torch.ops.pyg.grid_cluster  # noqa: B018
    except (AttributeError, RuntimeError):
        _define_pyg_ops()
    if torch_geometric_flags and importlib.util.find_spec("torch_geometric") is not None:
        import torch_geometric.typing as flags

        for name in ("WITH_FPS", "WITH_KNN", "WITH_RADIUS", "WITH_NEAREST", "WITH_GRID_CLUSTER"):
            setattr(flags, name, True)
