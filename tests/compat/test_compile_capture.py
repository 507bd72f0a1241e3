"""torch.compile captures the pointops code paths that whole training steps reach (issue 48): the
backward formulas under torch._dynamo.explain, torch.ops.pyg.grid_cluster (PyTorch Geometric's
voxel_grid, which Pointcept's PTv2 pools with) and Pointcept's knn_query on an offset whose
length is only known at run time (PTv2 rebuilds its offsets from the pooled batch vector)."""

import importlib.util
import os

import pointops
import pytest
import torch
from pointops.compat import pointcept, pyg_lib

POINTOPS_DIR = os.path.dirname(os.path.abspath(pointops.__file__))
BACKEND = "aot_eager"  # dynamo's capture and AOTAutograd's graphs; inductor treats the ops as opaque


def breaks_in_pointops(explanation) -> list[str]:
    """The graph breaks whose user stack passes through pointops' own files."""
    return [
        reason.reason.splitlines()[0]
        for reason in explanation.break_reasons
        if any(frame.filename.startswith(POINTOPS_DIR) for frame in reason.user_stack or [])
    ]


def test_explain_of_a_training_step_finds_no_break_in_the_backward_formulas(device):
    # the step's backward() is a graph break of torch's own (without trace_autograd_ops); the
    # eager backward then calls the ops' backward formulas, which dynamo traces on this thread
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    feat = torch.randn(2, 4, 16, generator=g).to(device).requires_grad_(True)
    idx = torch.randint(0, 16, (2, 6, 3), generator=g).to(device)
    weight = torch.rand(2, 6, 3, generator=g).to(device).requires_grad_(True)

    def step():
        out = pointops.three_interpolate(feat, idx, weight) + pointops.gather_points(feat, idx[..., 0])
        out.square().sum().backward()

    with torch._dynamo.config.patch(trace_autograd_ops=False):
        explanation = torch._dynamo.explain(step)()
    assert breaks_in_pointops(explanation) == []
    expected = torch.autograd.grad(
        (pointops.three_interpolate(feat, idx, weight) + pointops.gather_points(feat, idx[..., 0]))
        .square()
        .sum(),
        (feat, weight),
    )
    # explain ran the step once: the gradients are those of one eager step
    torch.testing.assert_close(feat.grad, expected[0])
    torch.testing.assert_close(weight.grad, expected[1])


@pytest.mark.skipif(importlib.util.find_spec("pyg_lib") is not None, reason="pyg-lib owns torch.ops.pyg here")
def test_pyg_grid_cluster_compiles_with_fullgraph(device):
    pyg_lib.install_pyg_ops(torch_geometric_flags=False)
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(1)
    pos = (torch.rand(200, 3, generator=g) * 4).to(device)
    size = torch.tensor([0.5, 0.5, 0.5], device=device)

    def cluster(pos):
        return torch.ops.pyg.grid_cluster(pos, size)

    got = torch.compile(cluster, fullgraph=True, backend=BACKEND)(pos)
    assert got.dtype == torch.int64 and got.shape == (200,)
    assert torch.equal(got, cluster(pos))


def test_knn_query_compiles_on_an_offset_of_run_time_length(device):
    g = torch.Generator().manual_seed(2)
    coord = torch.rand(60, 3, generator=g).to(device)
    batch = torch.cat([torch.zeros(25, dtype=torch.int64), torch.ones(35, dtype=torch.int64)]).to(device)

    def neighbours(coord, batch):
        offset = torch.cumsum(batch.bincount(), dim=0)  # Pointcept's batch2offset: its length is data
        return pointcept.knn_query(8, coord, offset)

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        idx, dist = torch.compile(neighbours, fullgraph=True, backend=BACKEND)(coord, batch)
    expected_idx, expected_dist = neighbours(coord, batch)
    assert torch.equal(idx, expected_idx)
    torch.testing.assert_close(dist, expected_dist)


def test_compiled_knn_query_refuses_an_empty_offset(device):
    coord = torch.rand(0, 3, device=device)

    def static_offset(coord):
        return pointcept.knn_query(8, coord, torch.zeros(0, dtype=torch.int32, device=coord.device))

    def run_time_offset(coord, batch):
        return pointcept.knn_query(8, coord, torch.cumsum(batch.bincount(), dim=0))

    torch._dynamo.reset()
    with pytest.raises(ValueError, match="offset must be a non-empty 1-D tensor"):
        torch.compile(static_offset, backend=BACKEND)(coord)
    # a length known only when the graph runs: its run-time assertion (eager raises ValueError)
    torch._dynamo.reset()
    batch = torch.zeros(0, dtype=torch.int64, device=device)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        with pytest.raises(RuntimeError, match="Runtime assertion failed"):
            torch.compile(run_time_offset, fullgraph=True, backend=BACKEND)(coord, batch)
