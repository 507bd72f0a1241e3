"""Stand-ins, in plain torch, for third-party pieces the peers' model code imports but that a
proof run may lack. Only what the models call is provided; nothing of the peers is shimmed.

- torch_scatter.segment_csr (Pointcept's PTv2 pools with it): installed only when torch_scatter
  is not importable.
- torch.ops.pyg.grid_cluster and torch_geometric's WITH_GRID_CLUSTER flag (PyTorch Geometric
  >= 2.8 routes voxel_grid to pyg-lib): for the process that runs Pointcept's own library, where
  pointops (which provides them, pointops.compat.pyg_lib.install_pyg_ops) cannot be imported
  under its name. Same formula as torch_cluster's CPU grid: trunc((pos - start) / size) with
  x-fastest strides.
- CPU mapping of torch's legacy CUDA tensor constructors (torch.cuda.IntTensor(...) etc.), used
  by Pointcept's PTv1 and openpoints' ops wrappers: only with an explicit --cpu flag, so that
  their model code can run on a host without a GPU.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import torch


def segment_csr(src, indptr, out=None, reduce="sum"):
    """torch_scatter.segment_csr in plain torch: reduce the rows indptr[i]..indptr[i+1] of src
    into row i (sum, mean, max or min; an empty segment gives 0)."""
    # Each row finds its segment by a search on the device: no slice of indptr and no host read
    # of its values, which inductor could not lower where indptr's length is data-dependent
    # (PTv2's pooling under torch.compile).
    if out is not None:
        raise NotImplementedError("segment_csr shim: out= is not supported")
    if reduce not in ("sum", "add", "mean", "max", "min"):
        raise ValueError(f"segment_csr shim: reduce={reduce!r} is not supported")
    indptr = indptr.to(src.device, torch.int64)
    segments = indptr.shape[0] - 1
    shape = (segments, *src.shape[1:])
    if not torch.compiler.is_compiling() and segments == 0:
        return src.new_zeros(shape)
    rows = torch.arange(src.shape[0], device=src.device)
    segment = torch.searchsorted(indptr, rows, right=True) - 1  # -1 before, `segments` after
    inside = (segment >= 0) & (segment < segments)
    target = segment.clamp(0, segments - 1)
    counts = src.new_zeros(segments, dtype=torch.int64).scatter_add(0, target, inside.long())
    trailing = [1] * (src.dim() - 1)
    index = target.view(-1, *trailing).expand_as(src)
    keep = inside.view(-1, *trailing)
    if reduce in ("sum", "add", "mean"):
        total = src.new_zeros(shape).scatter_add(0, index, torch.where(keep, src, 0))
        if reduce == "mean":
            total = total / counts.clamp_min(1).view(-1, *trailing).to(src.dtype)
        return total
    fill = float("-inf") if reduce == "max" else float("inf")
    best = src.new_full(shape, fill).scatter_reduce(
        0, index, torch.where(keep, src, fill), "amax" if reduce == "max" else "amin", include_self=True
    )
    return torch.where(counts.view(-1, *trailing) > 0, best, 0)  # an empty segment gives 0


def install_torch_scatter_shim() -> bool:
    """Provides torch_scatter.segment_csr when torch_scatter is absent; True if installed."""
    if importlib.util.find_spec("torch_scatter") is not None:
        return False

    module = types.ModuleType("torch_scatter")
    module.segment_csr = segment_csr
    module.__doc__ = "plain-torch stand-in (benchmarks/clients/_shims.py): segment_csr only"
    sys.modules["torch_scatter"] = module
    return True


def install_plain_grid_cluster() -> bool:
    """Defines torch.ops.pyg.grid_cluster in plain torch and turns on torch_geometric's flag,
    when neither pyg-lib nor an earlier definition provides it; True if installed."""
    try:
        torch.ops.pyg.grid_cluster  # noqa: B018
        defined = True
    except (AttributeError, RuntimeError):
        defined = False
    if not defined:
        if importlib.util.find_spec("pyg_lib") is not None:
            return False

        @torch.library.custom_op("pyg::grid_cluster", mutates_args=())
        def grid_cluster(
            pos: torch.Tensor,
            size: torch.Tensor,
            start: torch.Tensor | None = None,
            end: torch.Tensor | None = None,
        ) -> torch.Tensor:
            pos = pos.view(pos.size(0), -1)
            start = pos.min(0).values if start is None else start
            end = pos.max(0).values if end is None else end
            cells = torch.true_divide(end - start, size).to(torch.long) + 1
            stride = torch.cat([cells.new_ones(1), torch.cumprod(cells, 0)[:-1]])
            voxel = torch.true_divide(pos - start, size).to(torch.long)
            return (voxel * stride).sum(1)

    if importlib.util.find_spec("torch_geometric") is not None:
        import torch_geometric.typing as flags

        flags.WITH_GRID_CLUSTER = True
    return not defined


def install_cpu_legacy_constructors() -> None:
    """torch.cuda.{Int,Long,Float}Tensor(...) -> CPU tensors of that dtype (data or shape)."""

    def constructor(dtype):
        def make(*args, device=None, **kwargs):
            if len(args) == 1 and isinstance(args[0], (list, tuple)):
                return torch.tensor(args[0], dtype=dtype)
            return torch.empty(*args, dtype=dtype)

        return make

    torch.cuda.IntTensor = constructor(torch.int32)
    torch.cuda.LongTensor = constructor(torch.int64)
    torch.cuda.FloatTensor = constructor(torch.float32)


def install_timm_droppath_shim() -> bool:
    """Provides timm.layers.DropPath (stochastic depth, as Pointcept's PTv2 uses it) when timm
    cannot be imported; True if installed."""
    try:
        import timm.layers  # noqa: F401

        return False
    except Exception:  # absent, or present with an unusable torchvision
        pass

    class DropPath(torch.nn.Module):
        def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True):
            super().__init__()
            self.drop_prob, self.scale_by_keep = drop_prob, scale_by_keep

        def forward(self, x):
            if self.drop_prob == 0.0 or not self.training:
                return x
            keep = 1 - self.drop_prob
            mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
            return x * mask / keep if self.scale_by_keep else x * mask

    timm = types.ModuleType("timm")
    layers = types.ModuleType("timm.layers")
    layers.DropPath = DropPath
    timm.layers = layers
    timm.__doc__ = layers.__doc__ = "plain-torch stand-in (benchmarks/clients/_shims.py): DropPath only"
    sys.modules["timm"], sys.modules["timm.layers"] = timm, layers
    return True
