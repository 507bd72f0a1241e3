"""Property-based cases: random shapes, k, radius and ragged lengths against the references."""

import ops_reference as ref
import pointops
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clouds(draw):
    B = draw(st.integers(1, 3))
    N = draw(st.integers(0, 12))
    M = draw(st.integers(1, 5))
    grid = draw(st.booleans())  # integer grid: exact ties
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    if grid:
        xyz = torch.randint(-2, 3, (B, N, 3), generator=g).double()
        q = torch.randint(-2, 3, (B, M, 3), generator=g).double()
    else:
        scale = draw(st.sampled_from([1e-3, 1.0, 1e5]))
        xyz = torch.rand(B, N, 3, generator=g, dtype=torch.float64) * scale
        q = torch.rand(B, M, 3, generator=g, dtype=torch.float64) * scale
    lengths = torch.tensor(draw(st.lists(st.integers(0, N), min_size=B, max_size=B)))
    query_lengths = torch.tensor(draw(st.lists(st.integers(0, M), min_size=B, max_size=B)))
    use_lengths = draw(st.booleans())
    return xyz, q, (lengths if use_lengths else None), (query_lengths if use_lengths else None)


@SETTINGS
@given(clouds(), st.integers(1, 15), st.integers(0, 20))
def test_fps_property(data, k, start):
    xyz, _, lengths, _ = data
    assert torch.equal(
        pointops.furthest_point_sample(xyz, k, lengths, start), ref.fps(xyz, k, lengths, start)
    )


@SETTINGS
@given(clouds(), st.integers(1, 15), st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e4]))
def test_ball_query_property(data, k, radius):
    xyz, q, lengths, query_lengths = data
    idx, count, dist2 = pointops.ball_query(xyz, q, radius, k, lengths, query_lengths, return_dist2=True)
    e_idx, e_count, e_dist2 = ref.ball_query(xyz, q, radius, k, lengths, query_lengths)
    assert torch.equal(idx, e_idx) and torch.equal(count, e_count) and torch.equal(dist2, e_dist2)


@SETTINGS
@given(clouds(), st.integers(1, 15))
def test_knn_property(data, k):
    xyz, q, lengths, query_lengths = data
    dist2, idx = pointops.knn(xyz, q, k, lengths, query_lengths)
    e_dist2, e_idx = ref.knn(xyz, q, k, lengths, query_lengths)
    assert torch.equal(idx, e_idx) and torch.equal(dist2, e_dist2)


@SETTINGS
@given(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(0, 9),
    st.integers(0, 7),
    st.integers(1, 4),
    st.integers(0, 2**16),
)
def test_weighted_gather_property(B, C, N, P, T, seed):
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn(B, C, N, generator=g, dtype=torch.float64)
    idx = torch.randint(-1, N, (B, P, T), generator=g) if N else torch.full((B, P, T), -1)
    weight = torch.rand(B, P, T, generator=g, dtype=torch.float64)
    got = torch.ops.pointops.gather(feat, idx, weight)
    torch.testing.assert_close(got, ref.gather(feat, idx, weight), rtol=1e-12, atol=1e-12)
