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
- float16/bfloat16 on CPU are searched in float32;
- cosine kNN: a zero vector has cosine distance 1 (similarity 0) to every row (torch_cluster
  divides by its zero norm and returns duplicate or missing neighbours);
- bad input raises ValueError / TypeError naming the argument where torch_cluster returns
  results: nan, inf or coordinates beyond pointops.coordinate_limit in any dimension; batch
  vectors that are not int32/int64, sorted and >= 0 (the rule of pointops.packed.ptr_from_batch)
  or a batch_size below their ids (torch_cluster mixes clouds); k, max_num_neighbors or
  batch_size below 1; nan or negative r (r = inf takes every point of the example, up to
  max_num_neighbors, in every dimension);
- grid_cluster refuses what its int64 ids cannot hold (a grid of more than 2^63 - 1 cells, an
  id of a point far outside start .. end: torch_cluster wraps around), end below start, and
  non-finite values, on every dtype and device (on CUDA asynchronously, see grid_cluster);
  float16/bfloat16 positions are computed in float32 and integer ones in float64.
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


@torch.jit.unused
def _check_types(tensors: List[Tuple[str, object]], ints: List[Tuple[str, object]]) -> None:
    """Python's argument types, which TorchScript checks itself: tensors (or None), ints (or None),
    no bool for an int."""
    for name, value in tensors:
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"pointops: {name} must be a torch.Tensor, got {type(value).__name__}")
    for name, value in ints:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"pointops: {name} must be an int, got {type(value).__name__}")


@torch.jit.unused
def _check_real(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"pointops: {name} must be a real number, got {type(value).__name__}")


def _rows(t: Tensor, name: str) -> Tensor:
    if t.dim() == 0:
        raise ValueError(f"pointops: {name} must be a [N, D] or [N] tensor, got a 0-d tensor")
    return t.reshape(-1, 1) if t.dim() == 1 else t


def _at_most_rows(n: int, rows: int) -> int:
    """A count (k, max_num_neighbors) > rows means all rows: capped (Python ints have no limit,
    the ops' int64 has)."""
    return max(rows, 1) if n > rows else n


def _batch_ptr(batch: Optional[Tensor], rows: int, batch_size: Optional[int], name: str) -> Optional[Tensor]:
    """A batch vector's row pointer through pointops.packed.ptr_from_batch (the one rule of
    pointops for batch vectors; a torch op so that TorchScript can call it)."""
    if batch is None:
        return None
    return torch.ops.pointops_compat.ptr_from_batch(batch, rows, batch_size, name)


def _check_batch_size(batch_size: Optional[int]) -> None:
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"pointops: batch_size must be >= 1 (or None), got {batch_size}")


def _graph_ptr(rows: int, batch: Optional[Tensor], batch_size: Optional[int]) -> Optional[Tensor]:
    """The row pointer of knn_graph / radius_graph's one point set."""
    _check_batch_size(batch_size)
    if batch is None and batch_size is not None and batch_size > 1:
        raise ValueError("pointops: batch is needed for more than one cloud")
    return _batch_ptr(batch, rows, batch_size, "batch")


def _pair_ptr(
    n_x: int, n_y: int, batch_x: Optional[Tensor], batch_y: Optional[Tensor], batch_size: Optional[int]
) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    _check_batch_size(batch_size)
    ptr_x = _batch_ptr(batch_x, n_x, batch_size, "batch_x")
    ptr_y = _batch_ptr(batch_y, n_y, batch_size, "batch_y")
    clouds = 1 if batch_size is None else batch_size
    if ptr_x is not None:
        clouds = max(clouds, ptr_x.numel() - 1)
    if ptr_y is not None:
        clouds = max(clouds, ptr_y.numel() - 1)
    if clouds > 1 and (ptr_x is None or ptr_y is None):
        raise ValueError("pointops: batch_x and batch_y are both needed for more than one cloud")
    return ptr_x, ptr_y


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
    (row 0: index into y, row 1: index into x). batch_x / batch_y are sorted batch vectors
    (int32/int64); batch_size the number of examples (computed when None); cosine uses
    1 - cosine similarity (a zero row is at distance 1 from every row); num_workers is accepted
    and unused."""
    if not torch.jit.is_scripting():
        _check_types(
            [("x", x), ("y", y), ("batch_x", batch_x), ("batch_y", batch_y)],
            [("k", k), ("batch_size", batch_size)],
        )
    x, y = _rows(x, "x"), _rows(y, "y")
    ptr_x, ptr_y = _pair_ptr(x.size(0), y.size(0), batch_x, batch_y, batch_size)
    return torch.ops.pointops_compat.knn(x, y, ptr_x, ptr_y, _at_most_rows(k, x.size(0)), cosine)


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
    if not torch.jit.is_scripting():
        _check_types([("x", x), ("batch", batch)], [("k", k), ("batch_size", batch_size)])
    if k <= 0:
        raise ValueError(f"pointops: k must be > 0, got {k}")
    x = _rows(x, "x")
    ptr = _graph_ptr(x.size(0), batch, batch_size)
    k = _at_most_rows(k, x.size(0))
    edge_index = torch.ops.pointops_compat.knn(x, x, ptr, ptr, k if loop else k + 1, cosine)
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
    max_num_neighbors in index order): edge_index [2, E] (row 0: y, row 1: x). r = inf takes
    every row of the example (up to max_num_neighbors); NaN or negative r raise."""
    if not torch.jit.is_scripting():
        _check_types(
            [("x", x), ("y", y), ("batch_x", batch_x), ("batch_y", batch_y)],
            [("max_num_neighbors", max_num_neighbors), ("batch_size", batch_size)],
        )
        _check_real(r, "r")
    x, y = _rows(x, "x"), _rows(y, "y")
    ptr_x, ptr_y = _pair_ptr(x.size(0), y.size(0), batch_x, batch_y, batch_size)
    return torch.ops.pointops_compat.radius(
        x, y, ptr_x, ptr_y, float(r), _at_most_rows(max_num_neighbors, x.size(0)), ignore_same_index
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
    if not torch.jit.is_scripting():
        _check_types(
            [("x", x), ("batch", batch)],
            [("max_num_neighbors", max_num_neighbors), ("batch_size", batch_size)],
        )
        _check_real(r, "r")
    x = _rows(x, "x")
    ptr = _graph_ptr(x.size(0), batch, batch_size)
    cap = _at_most_rows(max_num_neighbors, x.size(0))
    edge_index = torch.ops.pointops_compat.radius(x, x, ptr, ptr, float(r), cap, not loop)
    if flow == "source_to_target":
        row, col = edge_index[1], edge_index[0]
    else:
        row, col = edge_index[0], edge_index[1]
    return torch.stack([row, col], dim=0)


def _fps_ratio(ratio: Optional[Union[Tensor, float]], src: Tensor) -> Tensor:
    """ratio as a tensor (a number in src's dtype, as torch_cluster makes it)."""
    dtype = src.dtype if src.is_floating_point() else torch.float32
    if ratio is None:
        return torch.tensor(0.5, dtype=dtype, device=src.device)
    if isinstance(ratio, Tensor):
        return ratio
    if not torch.jit.is_scripting():
        _check_real(ratio, "ratio")
    return torch.tensor(float(ratio), dtype=dtype, device=src.device)


def fps(
    src: Tensor,
    batch: Optional[Tensor] = None,
    ratio: Optional[Union[Tensor, float]] = None,
    random_start: bool = True,
    batch_size: Optional[int] = None,
    ptr: Optional[Union[Tensor, List[int]]] = None,
) -> Tensor:
    """Farthest point sampling: indices of ceil(ratio * size) points of each example (ratio 0.5
    by default; a float, a 0-d tensor or one value per example, in (0, 1]). batch is the batch
    vector (int32/int64, sorted), or ptr the row pointer (a tensor or list; it wins over batch)."""
    if not torch.jit.is_scripting():
        _check_types([("src", src), ("batch", batch)], [("batch_size", batch_size)])
    src = _rows(src, "src")
    r = _fps_ratio(ratio, src)
    _check_batch_size(batch_size)
    if ptr is not None:
        if isinstance(ptr, Tensor):
            return torch.ops.pointops_compat.fps(src, ptr, r, random_start)
        return torch.ops.pointops_compat.fps(src, torch.tensor(ptr, device=src.device), r, random_start)
    p = _batch_ptr(batch, src.size(0), batch_size, "batch")
    if p is not None and batch_size is not None and r.numel() == batch_size:
        p = torch.cat([p, p[-1:].expand(batch_size + 1 - p.numel())])  # one ratio per example: all of them
    return torch.ops.pointops_compat.fps(src, p, r, random_start)


def nearest(
    x: Tensor, y: Tensor, batch_x: Optional[Tensor] = None, batch_y: Optional[Tensor] = None
) -> Tensor:
    """For each row of x, the index of the nearest row of y in the same example (every example
    of x must have rows in y)."""
    if not torch.jit.is_scripting():
        _check_types([("x", x), ("y", y), ("batch_x", batch_x), ("batch_y", batch_y)], [])
    x, y = _rows(x, "x"), _rows(y, "y")
    ptr_x = _batch_ptr(batch_x, x.size(0), None, "batch_x")
    ptr_y = _batch_ptr(batch_y, y.size(0), None, "batch_y")
    if ptr_x is None:
        ptr_x = torch.tensor([0, x.size(0)], device=x.device)
    if ptr_y is None:
        ptr_y = torch.tensor([0, y.size(0)], device=x.device)
    # the same number of clouds (a missing one is empty)
    if ptr_x.numel() < ptr_y.numel():
        ptr_x = torch.cat([ptr_x, ptr_x[-1:].expand(ptr_y.numel() - ptr_x.numel())])
    elif ptr_y.numel() < ptr_x.numel():
        ptr_y = torch.cat([ptr_y, ptr_y[-1:].expand(ptr_x.numel() - ptr_y.numel())])
    if batch_x is None and batch_y is None and y.size(0) == 0 and x.size(0) > 0:
        raise ValueError("pointops: y is empty, so the rows of x have no nearest row")
    has_x, has_y = ptr_x[1:] > ptr_x[:-1], ptr_y[1:] > ptr_y[:-1]
    if bool((has_x & ~has_y.to(has_x.device)).any()):
        raise ValueError("Some batch indices occur in 'batch_x' that do not occur in 'batch_y'")
    return torch.ops.pointops_compat.nearest(x, y, ptr_x.to(x.device), ptr_y.to(x.device))


_GRID_CUDA_KERNELS = int(torch.ops.pointops.cuda_runtime_version()) > 0  # this binary has them


def _grid_cuda_kernels() -> bool:
    if torch.jit.is_scripting():  # (TorchScript reads no Python globals of type bool)
        return torch.ops.pointops.cuda_runtime_version() > 0
    else:
        return _GRID_CUDA_KERNELS


def _grid_device(pos: Tensor) -> torch.device:
    """Where the native op pointops::grid_cluster runs for pos: its own device when that is the
    CPU, or CUDA where this binary has CUDA kernels and D <= 1024 (csrc/kernels.h); else the CPU."""
    if pos.is_cpu or (pos.is_cuda and pos.size(1) <= 1024 and _grid_cuda_kernels()):
        return pos.device
    return torch.device("cpu")


def _grid_dtype(pos: Tensor) -> torch.dtype:
    """The dtype the ids are computed in: pos's for float32/float64, float32 for float16/bfloat16,
    float64 for integers."""
    if pos.dtype == torch.bool or pos.is_complex():
        raise TypeError(f"pointops: grid_cluster: pos must hold real numbers, got {pos.dtype}")
    if pos.dtype == torch.float32 or pos.dtype == torch.float64:
        return pos.dtype
    return torch.float32 if pos.is_floating_point() else torch.float64


@torch.jit.unused
def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _has_values(t: Tensor, name: str) -> None:
    """grid_cluster runs on any device by copying there, which a meta tensor (no values) cannot."""
    if t.is_meta:
        raise ValueError(
            f"pointops: grid_cluster: {name} is a meta tensor, which holds no values; pass a CPU or CUDA tensor"
        )


def _grid_vector(t: Tensor, name: str, dims: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """size / start / end: one real value per dimension, in the computation's dtype, on its
    device. A CPU tensor (typically made in Python) for a GPU computation is checked here, where
    reading it is free; values already on the GPU are checked by the kernels."""
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"pointops: grid_cluster: {name} must hold real numbers, got {t.dtype}")
    _has_values(t, name)
    if t.numel() != dims:
        raise ValueError(f"pointops: {name} must have one entry per dimension of pos")
    t = t.reshape(-1).to(dtype)
    if t.device == device:
        return t
    if t.is_cpu and (torch.jit.is_scripting() or not _compiling()):  # (torch.compile: values unknown)
        bad = ~torch.isfinite(t)
        if name == "size":
            bad = bad | (t <= 0)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            rule = "cell sizes must be finite and > 0" if name == "size" else "grid bounds must be finite"
            raise ValueError(f"pointops: grid_cluster: {name}[{i}] = {float(t[i])}; {rule}")
    # a copy that does not wait for the device
    return t.to(device=device, non_blocking=device.type == "cuda")


@torch.jit.unused
def _grid_args_ready(pos: Tensor, size: Tensor, start: Optional[Tensor], end: Optional[Tensor]) -> bool:
    """True for the common call, which the op takes as it is: pos [N, D] float32/float64 where
    the op runs (_grid_device), size [D] of pos's dtype on pos's device, no start or end. The
    conversions below would change nothing for it, and they were most of a call's host time."""
    if start is not None or end is not None or not (isinstance(pos, Tensor) and isinstance(size, Tensor)):
        return False
    if pos.dtype is not torch.float32 and pos.dtype is not torch.float64:
        return False
    if size.dtype is not pos.dtype or pos.dim() != 2 or size.dim() != 1 or size.size(0) != pos.size(1):
        return False
    if pos.is_cuda:
        return (
            _GRID_CUDA_KERNELS
            and pos.size(1) <= 1024
            and size.is_cuda
            and size.get_device() == pos.get_device()
        )
    return pos.is_cpu and size.is_cpu


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


def grid_cluster(
    pos: Tensor, size: Tensor, start: Optional[Tensor] = None, end: Optional[Tensor] = None
) -> Tensor:
    """Voxel id of each point: a grid of cell `size` from `start` (default: the minimum of pos)
    to `end` (default: the maximum), ids in x-fastest order. Any device, any real dtype.

    One native op, pointops::grid_cluster (on CUDA at most two kernels and no sync), on the CPU
    or CUDA (elsewhere, and on CUDA past 1024 dimensions, on the CPU, copied back). The arithmetic
    is in pos's dtype for float32/float64, float32 for float16/bfloat16 and float64 for integers;
    size, start and end are converted to it. Bad values raise ValueError: size not finite and
    > 0, non-finite start, end or pos, end below start, a grid of more than 2^63 - 1 cells or an
    id beyond int64 (a point far outside start .. end). On CUDA the values on the GPU are checked
    by the kernels without a sync: the affected ids are INT64_MIN and the error is raised by the
    next pointops call or pointops.check_errors(); a CPU size / start / end is checked at once."""
    if not torch.jit.is_scripting():
        if _grid_args_ready(pos, size, start, end):
            return _grid_cluster_eager(pos, size, start, end)
        _check_types([("pos", pos), ("size", size), ("start", start), ("end", end)], [])
    _has_values(pos, "pos")
    if pos.dim() == 0:
        raise ValueError("pointops: pos must have at least one dimension (one row per point)")
    if pos.dim() != 2:
        pos = pos.reshape(-1, 1) if pos.dim() == 1 else pos.flatten(1)
    dims = pos.size(1)
    dtype = _grid_dtype(pos)
    device = _grid_device(pos)
    size = _grid_vector(size, "size", dims, dtype, device)
    if start is not None:
        start = _grid_vector(start, "start", dims, dtype, device)
    if end is not None:
        end = _grid_vector(end, "end", dims, dtype, device)
    work = pos.to(device=device, dtype=dtype)
    if torch.jit.is_scripting():
        ids = torch.ops.pointops.grid_cluster(work, size, start, end)
    else:
        ids = _grid_cluster_eager(work, size, start, end)
    return ids.to(pos.device)


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
