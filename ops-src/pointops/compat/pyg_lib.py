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


def knn(x: Tensor, y: Tensor, k: int = 1, ptr_x: Optional[Tensor] = None, ptr_y: Optional[Tensor] = None,
        cosine: bool = False, num_workers: int = 1) -> Tensor:
    """The k nearest x rows of each y row: edge_index [2, E] (row 0: y, row 1: x)."""
    return torch.ops.pointops_compat.knn(x, y, ptr_x, ptr_y, k, cosine)


def radius(x: Tensor, y: Tensor, r: float = 1.0, ptr_x: Optional[Tensor] = None,
           ptr_y: Optional[Tensor] = None, max_num_neighbors: int = 32, num_workers: int = 1,
           ignore_same_index: bool = False) -> Tensor:
    """The first max_num_neighbors x rows (index order) at distance < r of each y row: [2, E]."""
    return torch.ops.pointops_compat.radius(x, y, ptr_x, ptr_y, float(r), max_num_neighbors,
                                            ignore_same_index)


def nearest(x: Tensor, y: Tensor, ptr_x: Optional[Tensor] = None, ptr_y: Optional[Tensor] = None) -> Tensor:
    """For each x row, the index of the nearest y row of its cloud."""
    return torch.ops.pointops_compat.nearest(x, y, ptr_x, ptr_y)
