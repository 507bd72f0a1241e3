"""pointops.compat.torch_cluster / pyg_lib: torch_cluster's signatures and output layouts, any
feature dimension, exact (distance, index) order, strict radius, no k limit. torch_cluster's
own test suite runs against this layer in benchmarks/clients/torch_cluster_tests."""

import os
import subprocess
import sys

import pytest
import torch
from pointops.compat import pyg_lib
from pointops.compat import torch_cluster as tc


def grid_points(n_side, dim, device):
    """Integer lattice points: many exactly equal distances (ties) and distances exactly r."""
    axes = torch.meshgrid(*[torch.arange(n_side, dtype=torch.float32)] * dim, indexing="ij")
    return torch.stack([a.reshape(-1) for a in axes], 1).to(device)


def ref_knn(x, y, k, batch_x, batch_y, cosine=False):
    edges = []
    for i in range(y.shape[0]):
        cand = [j for j in range(x.shape[0]) if batch_x[j] == batch_y[i]]
        if cosine:
            d = {
                j: 1
                - float(
                    torch.dot(x[j].double(), y[i].double()) / (x[j].double().norm() * y[i].double().norm())
                )
                for j in cand
            }
        else:
            d = {j: float(((x[j].double() - y[i].double()) ** 2).sum()) for j in cand}
        edges += [(i, j) for j in sorted(cand, key=lambda j: (d[j], j))[:k]]
    return edges


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_knn_any_dimension_ties_to_the_lower_index(dim, device):
    x = grid_points(4 if dim < 5 else 2, dim, device)
    batch_x = (torch.arange(x.shape[0], device=device) >= x.shape[0] // 3).long()
    y = x[::3] + 0.5
    batch_y = batch_x[::3]
    out = tc.knn(x, y, 6, batch_x, batch_y)
    assert out.dtype == torch.int64
    assert [tuple(e) for e in out.t().tolist()] == ref_knn(x.cpu(), y.cpu(), 6, batch_x.cpu(), batch_y.cpu())


def test_knn_no_k_limit_and_cosine_on_cpu():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(300, 4, generator=g), torch.randn(5, 4, generator=g)
    out = tc.knn(x, y, 150)  # torch_cluster's CUDA kernel stops at k = 100
    assert out.shape == (2, 750)
    zeros = torch.zeros(300, dtype=torch.long)
    assert [tuple(e) for e in out.t().tolist()] == ref_knn(x, y, 150, zeros, zeros[:5])
    cos = tc.knn(x, y, 7, cosine=True)
    assert [tuple(e) for e in cos.t().tolist()] == ref_knn(x, y, 7, zeros, zeros[:5], cosine=True)


def test_knn_graph_drops_self_loops_and_flows():
    x = grid_points(3, 3, "cpu") * 1.01 + torch.rand(27, 3) * 0.001
    e = tc.knn_graph(x, 4)
    assert e.shape == (2, 27 * 4) and bool((e[0] != e[1]).all())
    assert torch.equal(tc.knn_graph(x, 4, flow="target_to_source"), e.flip(0))


@pytest.mark.parametrize("dim", [3, 4])
def test_radius_is_strict_first_in_index_order(dim, device):
    x = grid_points(4, dim, device) if dim == 3 else grid_points(3, dim, device)
    y = x[::5]
    r = 1.0  # lattice neighbours lie at exactly r: excluded (d < r)
    out = tc.radius(x, y, r, max_num_neighbors=100)
    assert torch.equal(out[1], out[0] * 5)  # only the point itself is closer than 1
    out = tc.radius(x, y, 1.5, max_num_neighbors=3)
    for i in range(y.shape[0]):
        d2 = ((x - y[i]) ** 2).sum(1)
        expect = [j for j in range(x.shape[0]) if d2[j] < 2.25][:3]
        assert out[1][out[0] == i].tolist() == expect


def test_radius_graph_ignores_self_before_counting():
    x = torch.zeros(5, 3)
    e = tc.radius_graph(x, r=1.0, max_num_neighbors=2)
    assert e.shape == (2, 10) and bool((e[0] != e[1]).all())
    for i in range(5):
        assert sorted(e[0][e[1] == i].tolist()) == [j for j in range(5) if j != i][:2]


@pytest.mark.parametrize("dim", [3, 6])
def test_fps_matches_a_greedy_reference(dim, device):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(70, dim, generator=g).to(device)
    batch = torch.tensor([0] * 30 + [1] * 40, device=device)
    out = tc.fps(x, batch, ratio=0.3, random_start=False)
    expect = []
    for p0, p1 in ((0, 30), (30, 70)):
        pts = x[p0:p1].cpu().double()
        picks = [0]
        best = ((pts - pts[0]) ** 2).sum(1)
        for _ in range(1, -(-(p1 - p0) * 3 // 10)):
            picks.append(int(best.argmax()))
            best = torch.minimum(best, ((pts - pts[picks[-1]]) ** 2).sum(1))
        expect += [p + p0 for p in picks]
    assert out.tolist() == expect
    assert tc.fps(x, ptr=[0, 30, 70], ratio=0.3, random_start=False).tolist() == expect
    per_cloud = tc.fps(x, batch, ratio=torch.tensor([0.1, 0.5], device=device), random_start=False)
    assert per_cloud.shape == (3 + 20,)
    rnd = tc.fps(x, batch, ratio=0.5)
    assert bool((rnd[:15] < 30).all()) and bool((rnd[15:] >= 30).all()) and rnd.unique().numel() == 35


def test_fps_far_points_do_not_tie():
    # torch_cluster's CUDA FPS starts its distances at 5e4: beyond ~224 units every point ties
    x = torch.tensor([[0.0, 0, 0], [1000, 0, 0], [3000, 0, 0], [2000, 0, 0]])
    assert tc.fps(x, ratio=1.0, random_start=False).tolist() == [0, 2, 1, 3]


def test_nearest_and_its_errors():
    x = torch.tensor([[-1.0, -1], [-1, 1], [1, 1], [1, -1], [-2, -2], [-2, 2], [2, 2], [2, -2]])
    y = torch.tensor([[-1.0, 0], [1, 0], [-2, 0], [2, 0]])
    bx, by = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), torch.tensor([0, 0, 1, 1])
    assert tc.nearest(x, y, bx, by).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="batch_x must hold cloud ids >= 0 in nondecreasing order"):
        tc.nearest(x, y, torch.tensor([0, 0, 1, 0, 0, 0, 0, 0]), by)
    with pytest.raises(ValueError, match="do not occur"):
        tc.nearest(x, y, bx, torch.tensor([0, 0, 0, 0]))


def test_grid_cluster_and_torchscript():
    pos = torch.tensor([[0.0, 0], [11, 9], [2, 8], [2, 2], [8, 3]])
    size = torch.tensor([5.0, 5])
    assert tc.grid_cluster(pos, size).tolist() == [0, 5, 3, 0, 1]
    assert tc.grid_cluster(pos, size, end=torch.tensor([19.0, 19])).tolist() == [0, 6, 4, 0, 1]
    scripted = torch.jit.script(tc.knn)
    x = torch.rand(20, 3)
    assert torch.equal(scripted(x, x[:4], 3), tc.knn(x, x[:4], 3))
    assert torch.equal(torch.jit.script(tc.grid_cluster)(pos, size), tc.grid_cluster(pos, size))


def test_pyg_lib_ptr_forms_match_batch_forms():
    g = torch.Generator().manual_seed(2)
    x, y = torch.rand(50, 3, generator=g), torch.rand(20, 3, generator=g)
    bx, by = (torch.arange(50) >= 20).long(), (torch.arange(20) >= 8).long()
    px, py = torch.tensor([0, 20, 50]), torch.tensor([0, 8, 20])
    assert torch.equal(pyg_lib.knn(x, y, 4, px, py), tc.knn(x, y, 4, bx, by))
    assert torch.equal(pyg_lib.radius(x, y, 0.3, px, py, 5), tc.radius(x, y, 0.3, bx, by, 5))
    assert torch.equal(pyg_lib.nearest(y, x, py, px), tc.nearest(y, x, by, bx))
    assert torch.equal(pyg_lib.fps(x, px, 0.25, False), tc.fps(x, bx, 0.25, False))


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_install_torch_cluster_makes_the_import_resolve():
    done = _run(
        "import pointops.compat.torch_cluster as tc; tc.install_torch_cluster()\n"
        "import torch_cluster; from torch_cluster import knn; from torch_cluster.knn import knn_graph\n"
        "assert torch_cluster is tc and knn is tc.knn and knn_graph is tc.knn_graph\n"
        "assert 'batch_size' in torch_cluster.knn.__doc__\n"
        "import types, sys; sys.modules['torch_cluster'] = types.ModuleType('torch_cluster')\n"
        "try:\n    tc.install_torch_cluster()\nexcept RuntimeError as e:\n    print('refused', e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "refused" in done.stdout and "already imported" in done.stdout
