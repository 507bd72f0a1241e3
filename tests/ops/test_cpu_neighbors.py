"""CPU kNN / ball query: the kd-tree search returns exactly the brute force's results.

The CPU_NEIGHBORS_PATH knob (kdtree|brute) forces one search for every cloud (unset: the cost model
chooses). Small cases are checked against the plain-PyTorch reference; larger ones compare the
kd-tree with the brute-force kernel, which the reference tests pin down. Every case runs on 1 and
2 torch threads: the results must not depend on the thread count.
"""

import math

import ops_reference as ref
import pointops
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DTYPES = [torch.float32, torch.float64]


def _with_path(monkeypatch, path, fn, *args, **kwargs):
    """fn(*args, **kwargs) with the search forced to `path`."""
    with pointops._tuning.override(CPU_NEIGHBORS_PATH=path):
        return fn(*args, **kwargs)


def _cloud(kind, B, N, M, dtype, seed):
    """xyz [B,N,3], query [B,M,3] of one of the shapes the search must handle."""
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        xyz, q = torch.rand(B, N, 3, generator=g), torch.rand(B, M, 3, generator=g)
    elif kind == "lattice":  # many exact ties, points exactly on integer radii
        xyz = torch.randint(0, 6, (B, N, 3), generator=g).float()
        q = torch.randint(-1, 7, (B, M, 3), generator=g).float()
    elif kind == "equal":  # every point the same
        xyz = torch.full((B, N, 3), 0.5)
        q = torch.cat([torch.full((B, M // 2, 3), 0.5), torch.rand(B, M - M // 2, 3, generator=g)], 1)
    elif kind == "line":
        t = torch.rand(B, N, 1, generator=g)
        xyz = torch.cat([t, 2 * t - 1, torch.zeros_like(t)], -1)
        q = torch.rand(B, M, 3, generator=g)
    elif kind == "plane":
        xyz = torch.cat([torch.rand(B, N, 2, generator=g), torch.full((B, N, 1), 0.25)], -1)
        q = torch.rand(B, M, 3, generator=g)
    elif kind == "outlier":  # one point far away stretches every box of the tree
        xyz = torch.rand(B, N, 3, generator=g)
        xyz[:, N // 3] = 1e6
        q = torch.rand(B, M, 3, generator=g)
        q[:, 0] = 1e6
    elif kind == "clustered":
        centres = torch.rand(B, 4, 3, generator=g) * 100
        pick = torch.randint(0, 4, (B, N), generator=g)
        xyz = torch.gather(centres, 1, pick.unsqueeze(-1).expand(B, N, 3)) + 1e-3 * torch.randn(
            B, N, 3, generator=g
        )
        q = torch.gather(centres, 1, torch.randint(0, 4, (B, M, 1), generator=g).expand(B, M, 3))
        q = q + 1e-3 * torch.randn(B, M, 3, generator=g)
    else:
        raise ValueError(kind)
    return xyz.to(dtype), q.to(dtype)


KINDS = ["random", "lattice", "equal", "line", "plane", "outlier", "clustered"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_kdtree_knn_matches_reference(monkeypatch, kind, dtype):
    xyz, q = _cloud(kind, 2, 300, 20, dtype, seed=1)
    lengths, query_lengths = torch.tensor([300, 137]), torch.tensor([13, 20])
    for k in (1, 3, 16, 301):
        got = _with_path(monkeypatch, "kdtree", pointops.knn, xyz, q, k, lengths, query_lengths)
        want = ref.knn(xyz, q, k, lengths, query_lengths)
        assert torch.equal(got[1], want[1]) and torch.equal(got[0], want[0]), (kind, k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_kdtree_ball_query_matches_reference(monkeypatch, kind, dtype):
    xyz, q = _cloud(kind, 2, 300, 20, dtype, seed=2)
    lengths, query_lengths = torch.tensor([300, 137]), torch.tensor([20, 7])
    for radius, k in ((0.0, 3), (0.1, 16), (1.0, 1), (math.sqrt(2.0), 400), (2.0, 16), (1e7, 5)):
        got = _with_path(
            monkeypatch,
            "kdtree",
            pointops.ball_query,
            xyz,
            q,
            radius,
            k,
            lengths,
            query_lengths,
            return_dist2=True,
        )
        want = ref.ball_query(xyz, q, radius, k, lengths, query_lengths)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), (kind, radius, k)


def _knn_both(monkeypatch, xyz, q, k, lengths=None, query_lengths=None):
    args = (xyz, q, k, lengths, query_lengths)
    return (
        _with_path(monkeypatch, "kdtree", pointops.knn, *args),
        _with_path(monkeypatch, "brute", pointops.knn, *args),
    )


def _ball_both(monkeypatch, xyz, q, radius, k, lengths=None, query_lengths=None):
    args = (xyz, q, radius, k, lengths, query_lengths)
    return (
        _with_path(monkeypatch, "kdtree", pointops.ball_query, *args, return_dist2=True),
        _with_path(monkeypatch, "brute", pointops.ball_query, *args, return_dist2=True),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", "lattice", "equal", "outlier"])
def test_kdtree_equals_brute_force_on_large_clouds(monkeypatch, threads, kind, dtype):
    """Large enough for deep trees and the parallel build (> 32768 points), several clouds."""
    xyz, q = _cloud(kind, 2, 40000, 500, dtype, seed=3)
    lengths = torch.tensor([40000, 20001])
    for k in (1, 16):
        tree, brute = _knn_both(monkeypatch, xyz, q, k, lengths)
        assert torch.equal(tree[1], brute[1]) and torch.equal(tree[0], brute[0]), (kind, k)
    for radius in (0.02, 1.0):
        tree, brute = _ball_both(monkeypatch, xyz, q, radius, 32, lengths)
        assert all(torch.equal(a, b) for a, b in zip(tree, brute, strict=True)), (kind, radius)


@pytest.mark.parametrize("dtype", DTYPES)
def test_points_exactly_on_the_radius(monkeypatch, threads, dtype):
    """Radii equal to a point's distance as the kernel rounds it: inclusive keeps it."""
    xyz, q = _cloud("random", 1, 3000, 50, dtype, seed=4)
    d2 = ref.squared_distances(xyz[0], q[0, 0])
    for j in (0, 7, 1234):
        radius = math.sqrt(float(d2[j]))
        r2 = torch.tensor(radius * radius, dtype=torch.float64).to(dtype)
        tree, brute = _ball_both(monkeypatch, xyz, q, radius, 3000)
        assert all(torch.equal(a, b) for a, b in zip(tree, brute, strict=True))
        hits = tree[0][0, 0, : int(tree[1][0, 0])]
        assert bool((d2[hits] <= r2).all()) and int(tree[1][0, 0]) == int((d2 <= r2).sum())


@pytest.mark.parametrize("dtype", DTYPES)
def test_largest_accepted_coordinates_tie_by_index(monkeypatch, threads, dtype):
    """Coordinates at the coordinate limit (larger ones are refused): huge squared distances,
    ties broken by index, the same through the tree and the scan."""
    big = pointops.coordinate_limit(dtype) / 2
    g = torch.Generator().manual_seed(5)
    xyz = ((torch.rand(1, 2000, 3, generator=g, dtype=torch.float64) - 0.5) * 2 * big).to(dtype)
    q = ((torch.rand(1, 30, 3, generator=g, dtype=torch.float64) - 0.5) * 2 * big).to(dtype)
    xyz[0, :4] = xyz[0, 4]  # exact ties
    tree, brute = _knn_both(monkeypatch, xyz, q, 8)
    assert torch.equal(tree[1], brute[1]) and torch.equal(tree[0], brute[0])
    assert torch.isfinite(tree[0]).all()


def test_empty_inputs(monkeypatch, threads):
    xyz, q = _cloud("random", 2, 64, 8, torch.float32, seed=6)
    for path in ("kdtree", "auto"):
        d, i = _with_path(
            monkeypatch, path, pointops.knn, xyz, q, 4, torch.tensor([0, 64]), torch.tensor([8, 0])
        )
        assert bool((i[0] == -1).all()) and bool(torch.isinf(d[0]).all())
        assert bool((i[1] == -1).all())
        idx, count = _with_path(monkeypatch, path, pointops.ball_query, xyz[:, :0], q, 1.0, 3)
        assert bool((idx == -1).all()) and bool((count == 0).all())
        d, i = _with_path(monkeypatch, path, pointops.knn, xyz, q[:, :0], 4)
        assert d.shape == (2, 0, 4)


def test_unknown_search_path_is_a_clear_error():
    with pytest.raises(ValueError, match="knob CPU_NEIGHBORS_PATH takes one of"):
        pointops._tuning.set_knob("CPU_NEIGHBORS_PATH", "octree")


@st.composite
def _clouds(draw):
    B = draw(st.integers(1, 2))
    N = draw(st.integers(0, 70))
    M = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**16))
    dtype = draw(st.sampled_from(DTYPES))
    g = torch.Generator().manual_seed(seed)
    if draw(st.booleans()):  # integer grid: exact ties and points exactly on integer radii
        xyz = torch.randint(-2, 3, (B, N, 3), generator=g).double()
        q = torch.randint(-2, 3, (B, M, 3), generator=g).double()
    else:
        # the largest scale stays inside the dtype's coordinate limit (2^62 float32, 2^510 float64);
        # points past it are refused, which test_value_checks covers
        largest = 1e30 if dtype == torch.float64 else 1e18
        scale = draw(st.sampled_from([1e-30, 1e-3, 1.0, 1e5, largest]))
        xyz = torch.rand(B, N, 3, generator=g, dtype=torch.float64) * scale
        q = torch.rand(B, M, 3, generator=g, dtype=torch.float64) * scale
    lengths = torch.tensor(draw(st.lists(st.integers(0, N), min_size=B, max_size=B)))
    query_lengths = torch.tensor(draw(st.lists(st.integers(0, M), min_size=B, max_size=B)))
    return xyz.to(dtype), q.to(dtype), lengths, query_lengths


_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(_clouds(), st.integers(1, 20), st.sampled_from([0.0, 1e-30, 0.5, 1.0, 2.0, 3.0, 1e4, 1e30]))
def test_kdtree_property(monkeypatch, data, k, radius):
    xyz, q, lengths, query_lengths = data
    got = _with_path(monkeypatch, "kdtree", pointops.knn, xyz, q, k, lengths, query_lengths)
    want = ref.knn(xyz, q, k, lengths, query_lengths)
    assert torch.equal(got[1], want[1]) and torch.equal(got[0], want[0])
    got = _with_path(
        monkeypatch,
        "kdtree",
        pointops.ball_query,
        xyz,
        q,
        radius,
        k,
        lengths,
        query_lengths,
        return_dist2=True,
    )
    want = ref.ball_query(xyz, q, radius, k, lengths, query_lengths)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
