"""torch_cluster's API (fps, knn, knn_graph, radius, radius_graph, nearest, grid_cluster) on
pointops, CPU and CUDA, TorchScript-compilable like the original.

    from pointops.compat import torch_cluster
    edge_index = torch_cluster.knn(x, y, 16, batch_x, batch_y)

For code that does `import torch_cluster` (PyTorch Geometric, Pointcept) and cannot be edited:

    import pointops.compat.torch_cluster as tc
    tc.install_torch_cluster()      # before the first `import torch_cluster` / torch_geometric
    import torch_geometric          # now uses pointops for fps / knn / radius / voxel_grid

Same signatures, argument defaults and output layouts as torch_cluster 1.6.3. Deliberate
differences (docs/ops.md, "torch_cluster compatibility"):
- any k (torch_cluster's CUDA knn stops at k = 100) and any feature dimension on CPU and CUDA;
  cosine kNN works on CPU too (torch_cluster: CUDA only);
- neighbours come in (distance, index) order; radius keeps the first max_num_neighbors points
  in index order (as torch_cluster's CUDA kernel; its CPU tree returns an arbitrary subset);
- fps has no distance sentinel (torch_cluster's CUDA FPS starts at 5e4, so points farther than
  about 224 units from all picks tie), its random start uses torch's generator, and ties go to
  the first point in cyclic order from the start (plain index order without random_start);
- nearest on CPU searches the given coordinates (torch_cluster's CPU path rescales them to
  [0, 1] first, which can flip near-ties) and never needs scipy;
- float16/bfloat16 on CPU are searched in float32.
graclus_cluster, random_walk and neighbor_sampler are not provided (they raise).
"""

# TorchScript compiles these functions: keep typing.Optional/Union/List (it reads them).
# ruff: noqa: UP006, UP007, UP035, UP045

import sys
import types
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

from . import _cluster_ops  # noqa: F401  (registers torch.ops.pointops_compat.*)

__version__ = "1.6.3"

__all__ = [
    "fps",
    "grid_cluster",
    "install_torch_cluster",
    "knn",
    "knn_graph",
    "nearest",
    "radius",
    "radius_graph",
]


def _pair_ptr(
    n_x: int,
    n_y: int,
    batch_x: Optional[Tensor],
    batch_y: Optional[Tensor],
    batch_size: Optional[int],
    device: torch.device,
) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    if batch_x is not None and batch_x.numel() != n_x:
        raise ValueError("pointops: batch_x must have one entry per row of x")
    if batch_y is not None and batch_y.numel() != n_y:
        raise ValueError("pointops: batch_y must have one entry per row of y")
    if batch_size is None:
        batch_size = 1
        if batch_x is not None and batch_x.numel() > 0:
            batch_size = int(batch_x.max()) + 1
        if batch_y is not None and batch_y.numel() > 0:
            batch_size = max(batch_size, int(batch_y.max()) + 1)
    if batch_size <= 1:
        return None, None
    if batch_x is None or batch_y is None:
        raise ValueError("pointops: batch_x and batch_y are both needed for more than one cloud")
    bounds = torch.arange(batch_size + 1, device=device)
    return torch.bucketize(bounds, batch_x.contiguous()), torch.bucketize(bounds, batch_y.contiguous())


def knn(
    x: Tensor,
    y: Tensor,
    k: int,
    batch_x: Optional[Tensor] = None,
    batch_y: Optional[Tensor] = None,
    cosine: bool = False,
    num_workers: int = 1,
    batch_size: Optional[int] = None,
) -> Tensor:
    """For each row of y, the k nearest rows of x in the same example: edge_index [2, M*k]
    (row 0: index into y, row 1: index into x). batch_x / batch_y are sorted batch vectors;
    batch_size the number of examples (computed when None); cosine uses 1 - cosine similarity;
    num_workers is accepted and unused."""
    if x.numel() == 0 or y.numel() == 0:
        return torch.empty(2, 0, dtype=torch.long, device=x.device)
    x = x.view(-1, 1) if x.dim() == 1 else x
    y = y.view(-1, 1) if y.dim() == 1 else y
    ptr_x, ptr_y = _pair_ptr(x.size(0), y.size(0), batch_x, batch_y, batch_size, x.device)
    return torch.ops.pointops_compat.knn(x, y, ptr_x, ptr_y, k, cosine)


def knn_graph(
    x: Tensor,
    k: int,
    batch: Optional[Tensor] = None,
    loop: bool = False,
    flow: str = "source_to_target",
    cosine: bool = False,
    num_workers: int = 1,
    batch_size: Optional[int] = None,
) -> Tensor:
    """Edges to the k nearest points of each point (without itself unless loop)."""
    if flow not in ["source_to_target", "target_to_source"]:
        raise ValueError("pointops: flow must be 'source_to_target' or 'target_to_source'")
    edge_index = knn(x, x, k if loop else k + 1, batch, batch, cosine, num_workers, batch_size)
    if flow == "source_to_target":
        row, col = edge_index[1], edge_index[0]
    else:
        row, col = edge_index[0], edge_index[1]
    if not loop:
        keep = row != col
        row, col = row[keep], col[keep]
    return torch.stack([row, col], dim=0)


def radius(
    x: Tensor,
    y: Tensor,
    r: float,
    batch_x: Optional[Tensor] = None,
    batch_y: Optional[Tensor] = None,
    max_num_neighbors: int = 32,
    num_workers: int = 1,
    batch_size: Optional[int] = None,
    ignore_same_index: bool = False,
) -> Tensor:
    """For each row of y, the rows of x of the same example at distance < r (the first
    max_num_neighbors in index order): edge_index [2, E] (row 0: y, row 1: x)."""
    if x.numel() == 0 or y.numel() == 0:
        return torch.empty(2, 0, dtype=torch.long, device=x.device)
    x = x.view(-1, 1) if x.dim() == 1 else x
    y = y.view(-1, 1) if y.dim() == 1 else y
    ptr_x, ptr_y = _pair_ptr(x.size(0), y.size(0), batch_x, batch_y, batch_size, x.device)
    return torch.ops.pointops_compat.radius(
        x, y, ptr_x, ptr_y, float(r), max_num_neighbors, ignore_same_index
    )


def radius_graph(
    x: Tensor,
    r: float,
    batch: Optional[Tensor] = None,
    loop: bool = False,
    max_num_neighbors: int = 32,
    flow: str = "source_to_target",
    num_workers: int = 1,
    batch_size: Optional[int] = None,
) -> Tensor:
    """Edges between all points closer than r (no self loops unless loop)."""
    if flow not in ["source_to_target", "target_to_source"]:
        raise ValueError("pointops: flow must be 'source_to_target' or 'target_to_source'")
    edge_index = radius(x, x, r, batch, batch, max_num_neighbors, num_workers, batch_size, not loop)
    if flow == "source_to_target":
        row, col = edge_index[1], edge_index[0]
    else:
        row, col = edge_index[0], edge_index[1]
    return torch.stack([row, col], dim=0)


def fps(
    src: Tensor,
    batch: Optional[Tensor] = None,
    ratio: Optional[Union[Tensor, float]] = None,
    random_start: bool = True,
    batch_size: Optional[int] = None,
    ptr: Optional[Union[Tensor, List[int]]] = None,
) -> Tensor:
    """Farthest point sampling: indices of ceil(ratio * size) points of each example (ratio 0.5
    by default; a float, a 0-d tensor or one value per example). batch is the batch vector, or
    ptr the row pointer (a tensor or list)."""
    r = torch.tensor(0.5, dtype=src.dtype, device=src.device)
    if isinstance(ratio, float):
        r = torch.tensor(ratio, dtype=src.dtype, device=src.device)
    elif ratio is not None:
        r = ratio
    if ptr is not None:
        if isinstance(ptr, list):
            return torch.ops.pointops_compat.fps(src, torch.tensor(ptr, device=src.device), r, random_start)
        return torch.ops.pointops_compat.fps(src, ptr, r, random_start)
    if batch is not None:
        if src.size(0) != batch.numel():
            raise ValueError("pointops: batch must have one entry per row of src")
        if batch_size is None:
            batch_size = int(batch.max()) + 1
        deg = torch.zeros(batch_size, dtype=torch.long, device=src.device)
        deg.scatter_add_(0, batch, torch.ones_like(batch))
        ptr_vec = torch.cat([torch.zeros(1, dtype=torch.long, device=src.device), torch.cumsum(deg, 0)])
        return torch.ops.pointops_compat.fps(src, ptr_vec, r, random_start)
    return torch.ops.pointops_compat.fps(src, None, r, random_start)


def nearest(
    x: Tensor, y: Tensor, batch_x: Optional[Tensor] = None, batch_y: Optional[Tensor] = None
) -> Tensor:
    """For each row of x, the index of the nearest row of y in the same example."""
    x = x.view(-1, 1) if x.dim() == 1 else x
    y = y.view(-1, 1) if y.dim() == 1 else y
    if x.size(1) != y.size(1):
        raise ValueError("pointops: x and y must have the same number of features")
    if batch_x is not None and bool((batch_x[1:] - batch_x[:-1] < 0).any()):
        raise ValueError("'batch_x' is not sorted")
    if batch_y is not None and bool((batch_y[1:] - batch_y[:-1] < 0).any()):
        raise ValueError("'batch_y' is not sorted")
    if batch_x is None and batch_y is None:
        return torch.ops.pointops_compat.nearest(x, y, None, None)
    if batch_x is None:
        batch_x = torch.zeros(x.size(0), dtype=torch.long, device=x.device)
    if batch_y is None:
        batch_y = torch.zeros(y.size(0), dtype=torch.long, device=y.device)
    if batch_x.numel() != x.size(0) or batch_y.numel() != y.size(0):
        raise ValueError("pointops: batch_x / batch_y must have one entry per row of x / y")
    size = 0
    if batch_x.numel() > 0:
        size = int(batch_x.max()) + 1
    if batch_y.numel() > 0:
        size = max(size, int(batch_y.max()) + 1)
    count_x = torch.bincount(batch_x, minlength=size)
    count_y = torch.bincount(batch_y, minlength=size)
    if not torch.equal(count_x > 0, count_y > 0):
        raise ValueError("Some batch indices occur in 'batch_x' that do not occur in 'batch_y'")
    zero = torch.zeros(1, dtype=torch.long, device=x.device)
    ptr_x = torch.cat([zero, torch.cumsum(count_x, 0)])
    ptr_y = torch.cat([zero, torch.cumsum(count_y, 0)])
    return torch.ops.pointops_compat.nearest(x, y, ptr_x, ptr_y)


_GRID_CUDA_KERNELS = int(torch.ops.pointops.cuda_runtime_version()) > 0  # this binary has them


def _grid_cuda_kernels() -> bool:
    if torch.jit.is_scripting():  # (TorchScript reads no Python globals of type bool)
        return torch.ops.pointops.cuda_runtime_version() > 0
    else:
        return _GRID_CUDA_KERNELS


def _grid_native(pos: Tensor) -> bool:
    """Whether the native op pointops::grid_cluster takes pos: float32/float64 on CPU, and on CUDA
    when this binary has CUDA kernels, up to 1024 dimensions (csrc/kernels.h)."""
    if pos.dtype != torch.float32 and pos.dtype != torch.float64:
        return False
    if pos.is_cpu:
        return True
    return pos.is_cuda and pos.size(1) <= 1024 and _grid_cuda_kernels()


def _grid_operand(t: Tensor, pos: Tensor) -> Tensor:
    """t on pos's device in pos's dtype, converted only when it is not (typically a CPU tensor
    made in Python for a CUDA pos: a copy that does not wait for the device)."""
    if t.device != pos.device or t.dtype != pos.dtype:
        return t.to(device=pos.device, dtype=pos.dtype, non_blocking=pos.is_cuda)
    return t


@torch.jit.unused
def _grid_cluster_eager(pos: Tensor, size: Tensor, start: Optional[Tensor], end: Optional[Tensor]) -> Tensor:
    """The op outside TorchScript: a bad value found by the CPU op is raised as ValueError (a
    problem recorded on the GPU by an earlier pointops call, too)."""
    if torch.compiler.is_compiling():
        return torch.ops.pointops.grid_cluster(pos, size, start, end)
    try:
        return torch.ops.pointops.grid_cluster(pos, size, start, end)
    except RuntimeError as error:
        if pos.is_cuda:
            from .._registrations import raise_recorded

            raise_recorded(error)
        else:
            # the binding's line (after the source location the stable ABI puts before it)
            for line in str(error).splitlines():
                for marker in ("pointops: grid_cluster", "pointops.grid_cluster"):
                    at = line.find(marker)
                    if at >= 0:
                        raise ValueError(line[at:]) from None
        raise


def _grid_cluster_torch(pos: Tensor, size: Tensor, start: Optional[Tensor], end: Optional[Tensor]) -> Tensor:
    """The formula in torch ops, for the dtypes and devices the native op does not take."""
    if pos.size(0) == 0:
        return torch.empty(0, dtype=torch.long, device=pos.device)
    size = size.to(pos.device)
    start = torch.min(pos, 0)[0] if start is None else start.to(pos.device)
    end = torch.max(pos, 0)[0] if end is None else end.to(pos.device)
    start, end, size = start.view(-1), end.view(-1), size.view(-1)
    cells = torch.true_divide(end - start, size).to(torch.long) + 1
    stride = torch.cat([torch.ones(1, dtype=torch.long, device=pos.device), torch.cumprod(cells, 0)[:-1]])
    out = torch.true_divide(pos - start.unsqueeze(0), size.view(1, -1)).to(torch.long)
    return (out * stride.view(1, -1)).sum(1)


def grid_cluster(
    pos: Tensor, size: Tensor, start: Optional[Tensor] = None, end: Optional[Tensor] = None
) -> Tensor:
    """Voxel id of each point: a grid of cell `size` from `start` (default: the minimum of pos)
    to `end` (default: the maximum), ids in x-fastest order. Any device, any dtype.

    float32/float64 pos on CPU and CUDA run one native op (pointops::grid_cluster: on CUDA at
    most two kernels and no sync); size, start and end are first converted to pos's device and
    dtype, so the arithmetic is in pos's dtype. Other dtypes and devices run the same formula in
    torch ops. Bad values (size not finite and > 0, non-finite start, end or pos) raise
    ValueError on CPU; on CUDA they give the id INT64_MIN for every point they affect."""
    if pos.dim() == 0:
        raise ValueError("pointops: pos must have at least one dimension (one row per point)")
    if pos.dim() != 2:
        pos = pos.view(-1, 1) if pos.dim() == 1 else pos.flatten(1)
    dims = pos.size(1)
    if size.numel() != dims:
        raise ValueError("pointops: size must have one entry per dimension of pos")
    if start is not None and start.numel() != dims:
        raise ValueError("pointops: start must have one entry per dimension of pos")
    if end is not None and end.numel() != dims:
        raise ValueError("pointops: end must have one entry per dimension of pos")
    if not _grid_native(pos):
        return _grid_cluster_torch(pos, size, start, end)
    size = _grid_operand(size, pos)
    if start is not None:
        start = _grid_operand(start, pos)
    if end is not None:
        end = _grid_operand(end, pos)
    if torch.jit.is_scripting():
        return torch.ops.pointops.grid_cluster(pos, size, start, end)
    return _grid_cluster_eager(pos, size, start, end)


def _unsupported(name: str):
    def missing(*args, **kwargs):
        raise NotImplementedError(
            f"pointops.compat.torch_cluster does not provide {name}; install torch_cluster itself for it"
        )

    missing.__name__ = name
    return missing


graclus_cluster = _unsupported("graclus_cluster")
random_walk = _unsupported("random_walk")
neighbor_sampler = _unsupported("neighbor_sampler")


def install_torch_cluster(replace: bool = False) -> types.ModuleType:
    """Makes `import torch_cluster` return this module for the rest of the process (sys.modules
    entries `torch_cluster` and its submodules fps, knn, radius, nearest, grid). Call it before
    anything imports torch_cluster or torch_geometric (which checks for torch_cluster once, at
    its import). If a real torch_cluster is already imported, raises unless replace=True (code
    holding the old module would keep using it)."""
    this = sys.modules[__name__]
    current = sys.modules.get("torch_cluster")
    if current is not None and current is not this and not replace:
        raise RuntimeError(
            "pointops: torch_cluster is already imported (from "
            f"{getattr(current, '__file__', '?')}); call install_torch_cluster() before "
            "the first import, or pass replace=True"
        )
    sys.modules["torch_cluster"] = this
    for sub in ("fps", "knn", "radius", "nearest", "grid"):
        sys.modules[f"torch_cluster.{sub}"] = this
    return this
