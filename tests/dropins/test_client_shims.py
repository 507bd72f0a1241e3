"""The plain-torch stand-ins the client harnesses install for absent third-party pieces
(benchmarks/clients/_shims.py): torch_scatter.segment_csr, which Pointcept's PTv2 pools with,
must give torch_scatter's values and compile with inductor where its row pointer has a
data-dependent length, as in PTv2's pooling."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
REDUCTIONS = ["sum", "mean", "max", "min"]


def _load_shims():
    spec = importlib.util.spec_from_file_location(
        "client_shims_under_test", REPO / "benchmarks/clients/_shims.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dynamo looks the function's module up by name
    spec.loader.exec_module(module)
    return module


segment_csr = _load_shims().segment_csr


def reference(src: torch.Tensor, indptr: list[int], reduce: str) -> torch.Tensor:
    """One segment at a time; an empty segment gives 0, as in torch_scatter."""
    rows = []
    for start, end in zip(indptr[:-1], indptr[1:], strict=True):
        part = src[start:end]
        if part.shape[0] == 0:
            rows.append(src.new_zeros(src.shape[1:]))
        else:
            rows.append(
                {"sum": part.sum(0), "mean": part.mean(0), "max": part.amax(0), "min": part.amin(0)}[reduce]
            )
    return torch.stack(rows) if rows else src.new_zeros((0, *src.shape[1:]))


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize(
    "indptr",
    [[0, 3, 3, 7, 10], [2, 4, 8], [0, 10], [1, 1, 9], [0, 0, 0], [4], [0, 10, 10]],
    ids=["empty-middle", "inner-rows", "one", "empty-first", "all-empty", "no-segments", "empty-last"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_segment_csr_gives_each_segments_reduction(indptr, reduce, dtype):
    src = torch.randn(10, 3, 2, dtype=dtype, generator=torch.Generator().manual_seed(0))
    got = segment_csr(src, torch.tensor(indptr), reduce=reduce)
    torch.testing.assert_close(got, reference(src, indptr, reduce), rtol=0, atol=1e-6)


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_segment_csr_keeps_an_infinite_extreme(reduce):
    src = torch.tensor([[1.0], [float("inf")], [-float("inf")], [2.0]])
    got = segment_csr(src, torch.tensor([0, 3, 4]), reduce=reduce)
    assert got[:, 0].tolist() == reference(src, [0, 3, 4], reduce)[:, 0].tolist()


def test_segment_csr_refuses_what_it_does_not_provide():
    src, indptr = torch.zeros(4, 2), torch.tensor([0, 4])
    with pytest.raises(NotImplementedError, match="out="):
        segment_csr(src, indptr, out=torch.zeros(1, 2))
    with pytest.raises(ValueError, match="reduce='mul'"):
        segment_csr(src, indptr, reduce="mul")


def _pooled(x: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
    """PTv2's grid pooling pattern: rows sorted by cluster, a row pointer from the counts of
    torch.unique (a data-dependent length), then max and mean per cluster."""
    _, inverse, counts = torch.unique(cluster, sorted=True, return_inverse=True, return_counts=True)
    _, order = torch.sort(inverse)
    indptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    return segment_csr(x[order], indptr, reduce="max") * 2 + segment_csr(x[order], indptr, reduce="mean")


@pytest.mark.skipif(
    shutil.which("c++") is None and shutil.which("g++") is None, reason="inductor needs a C++ compiler"
)
def test_segment_csr_compiles_whole_with_inductor_on_a_data_dependent_row_pointer():
    torch._dynamo.reset()
    x = torch.randn(
        64, 4, dtype=torch.float64, requires_grad=True, generator=torch.Generator().manual_seed(1)
    )
    cluster = torch.randint(0, 9, (64,), generator=torch.Generator().manual_seed(2))
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        compiled = torch.compile(_pooled, fullgraph=True, backend="inductor")
        got = compiled(x, cluster)
        (grad,) = torch.autograd.grad(got.square().sum(), x)
    expected = _pooled(x, cluster)
    (expected_grad,) = torch.autograd.grad(expected.square().sum(), x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(grad, expected_grad)
    torch._dynamo.reset()
