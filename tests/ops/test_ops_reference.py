"""Every operator against the plain-PyTorch references in ops_reference.py."""

import ops_reference as ref
import pointops
import pytest
import torch
from ops_data import KINDS, cloud, queries

SIZES = [0, 1, 2, 3, 5, 8, 33]


def radius_for(kind):
    return {"large": 4e4, "grid": 1.0}.get(kind, 0.3)


# --- farthest point sampling ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N", SIZES)
@pytest.mark.parametrize("k", [1, 4, 12])
def test_fps_matches_reference(device, kind, N, k):
    xyz = cloud(kind, 2, N)
    got = pointops.furthest_point_sample(xyz.to(device), k)
    assert got.dtype == torch.int64 and got.shape == (2, k)
    assert torch.equal(got.cpu(), ref.fps(xyz, k))


@pytest.mark.parametrize("start", [0, 3, 100])
def test_fps_start_and_ragged_lengths(device, start):
    xyz = cloud("random", 4, 10)
    lengths = torch.tensor([10, 0, 1, 6])
    got = pointops.furthest_point_sample(xyz.to(device), 8, lengths=lengths.to(device), start=start)
    expected = ref.fps(xyz, 8, lengths, start)
    assert torch.equal(got.cpu(), expected)
    assert (got[1] == -1).all()  # the empty cloud
    assert got[2, 0] == 0 and (got[2, 1:] == -1).all()


def test_fps_picks_unique_points_on_distinct_data(device):
    xyz = cloud("random", 3, 50)
    got = pointops.furthest_point_sample(xyz.to(device), 50).cpu()
    for row in got:
        assert sorted(row.tolist()) == list(range(50))


def test_fps_float32_matches_float32_reference(device):
    xyz = cloud("random", 2, 200, dtype=torch.float32)
    assert torch.equal(pointops.furthest_point_sample(xyz.to(device), 40).cpu(), ref.fps(xyz, 40))


def test_fps_large_cloud_uses_chunked_path_identically():
    # N above the in-cloud parallel threshold of the CPU kernel: the chunked argmax must give
    # the same picks as the serial scan (the reference).
    xyz = cloud("grid", 1, 270000, dtype=torch.float32)
    got = pointops.furthest_point_sample(xyz, 6)
    assert torch.equal(got, ref.fps(xyz, 6))


# --- ball query -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N", SIZES)
@pytest.mark.parametrize("k", [1, 4, 40])
def test_ball_query_matches_reference(device, kind, N, k):
    xyz, q = cloud(kind, 2, N), queries(kind, 2, 6)
    if N:
        q[:, 0] = xyz[:, 0]  # at least one ball centred on a point
    r = radius_for(kind)
    idx, count, dist2 = pointops.ball_query(xyz.to(device), q.to(device), r, k, return_dist2=True)
    e_idx, e_count, e_dist2 = ref.ball_query(xyz, q, r, k)
    assert torch.equal(idx.cpu(), e_idx)
    assert torch.equal(count.cpu(), e_count)
    assert torch.equal(dist2.cpu(), e_dist2)


def test_ball_query_radius_zero_is_inclusive(device):
    xyz = cloud("duplicates", 1, 6)
    q = xyz[:, :3].clone()
    idx, count = pointops.ball_query(xyz.to(device), q.to(device), 0.0, 4)
    # inclusive test: d^2 <= 0 finds exactly the point and its duplicate
    assert count.cpu().tolist() == [[2, 2, 2]]
    assert idx.cpu()[0, 0].tolist() == [0, 1, 0, 0]


def test_ball_query_empty_balls_and_ragged(device):
    xyz = cloud("random", 3, 8)
    q = torch.full((3, 4, 3), 50.0, dtype=torch.float64)
    q[0, 0] = xyz[0, 2]
    lengths = torch.tensor([8, 0, 5])
    query_lengths = torch.tensor([4, 4, 2])
    idx, count, dist2 = pointops.ball_query(
        xyz.to(device),
        q.to(device),
        0.5,
        3,
        lengths=lengths.to(device),
        query_lengths=query_lengths.to(device),
        return_dist2=True,
    )
    e = ref.ball_query(xyz, q, 0.5, 3, lengths, query_lengths)
    assert torch.equal(idx.cpu(), e[0]) and torch.equal(count.cpu(), e[1]) and torch.equal(dist2.cpu(), e[2])
    assert (idx.cpu()[0, 1:] == -1).all() and torch.isinf(dist2.cpu()[0, 1:]).all()
    assert (idx.cpu()[1] == -1).all()


def test_ball_query_first_hits_in_index_order_and_padding(device):
    xyz = torch.tensor([[[5.0, 0, 0], [0.1, 0, 0], [9, 9, 9], [0.2, 0, 0], [0.0, 0, 0]]], dtype=torch.float64)
    q = torch.zeros(1, 1, 3, dtype=torch.float64)
    idx, count = pointops.ball_query(xyz.to(device), q.to(device), 0.25, 5)
    assert idx.cpu().tolist() == [[[1, 3, 4, 1, 1]]] and count.item() == 3
    idx, count = pointops.ball_query(xyz.to(device), q.to(device), 0.25, 2)
    assert idx.cpu().tolist() == [[[1, 3]]] and count.item() == 2


# --- knn --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("N", SIZES)
@pytest.mark.parametrize("k", [1, 3, 12])
def test_knn_matches_reference(device, kind, N, k):
    xyz, q = cloud(kind, 2, N), queries(kind, 2, 5)
    dist2, idx = pointops.knn(xyz.to(device), q.to(device), k)
    e_dist2, e_idx = ref.knn(xyz, q, k)
    assert torch.equal(idx.cpu(), e_idx)
    assert torch.equal(dist2.cpu(), e_dist2)


def test_knn_ragged_lengths_with_empty_cloud(device):
    xyz, q = cloud("random", 3, 9), queries("random", 3, 4)
    lengths, query_lengths = torch.tensor([9, 0, 2]), torch.tensor([4, 1, 3])
    dist2, idx = pointops.knn(
        xyz.to(device), q.to(device), 4, lengths=lengths.to(device), query_lengths=query_lengths.to(device)
    )
    e_dist2, e_idx = ref.knn(xyz, q, 4, lengths, query_lengths)
    assert torch.equal(idx.cpu(), e_idx) and torch.equal(dist2.cpu(), e_dist2)
    assert (idx.cpu()[1] == -1).all() and (idx.cpu()[2, :, 2:] == -1).all()


def test_knn_large_k_has_no_fixed_limit(device):
    xyz, q = cloud("random", 1, 300), queries("random", 1, 3)
    dist2, idx = pointops.knn(xyz.to(device), q.to(device), 257)
    e_dist2, e_idx = ref.knn(xyz, q, 257)
    assert torch.equal(idx.cpu(), e_idx) and torch.equal(dist2.cpu(), e_dist2)


def test_three_nn_is_knn_with_k3(device):
    known, unknown = cloud("random", 2, 7), queries("random", 2, 5)
    dist2, idx = pointops.three_nn(unknown.to(device), known.to(device))
    e_dist2, e_idx = ref.knn(known, unknown, 3)
    assert torch.equal(idx.cpu(), e_idx) and torch.equal(dist2.cpu(), e_dist2)
    dist2, idx = pointops.three_nn(unknown.to(device), known[:, :2].to(device))
    assert (idx.cpu()[..., 2] == -1).all() and torch.isinf(dist2.cpu()[..., 2]).all()


# --- gather family ----------------------------------------------------------------------------


def random_index(shape, n, seed=0, with_missing=True):
    g = torch.Generator().manual_seed(seed)
    low = -1 if with_missing and n else 0
    if n == 0:
        return torch.full(shape, -1, dtype=torch.int64)
    return torch.randint(low, n, shape, generator=g)


@pytest.mark.parametrize("N", [0, 1, 5, 40])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_gather_points(device, N, index_dtype):
    feat = torch.randn(2, 4, N, dtype=torch.float64)
    idx = random_index((2, 7), N)
    got = pointops.gather_points(feat.to(device), idx.to(index_dtype).to(device))
    assert got.shape == (2, 4, 7)
    assert torch.equal(got.cpu(), ref.gather(feat, idx.unsqueeze(-1)))


@pytest.mark.parametrize("N", [0, 1, 5, 40])
def test_gather_op_takes_idx_without_its_last_dimension(device, N):
    # the op's idx [B, P] (gather_points' own) is idx [B, P, 1]: forward and gradient
    feat = torch.randn(2, 4, N, dtype=torch.float64, device=device, requires_grad=True)
    idx = random_index((2, 7), N, seed=5).to(device)
    op = torch.ops.pointops.gather
    flat, unsqueezed = op(feat, idx, None), op(feat, idx.unsqueeze(-1), None)
    assert torch.equal(flat, unsqueezed)
    grad = torch.randn_like(flat)
    (g_flat,) = torch.autograd.grad(flat, feat, grad)
    (g_unsqueezed,) = torch.autograd.grad(unsqueezed, feat, grad)
    assert torch.equal(g_flat, g_unsqueezed)


@pytest.mark.parametrize("N", [0, 1, 5, 40])
def test_group_points(device, N):
    feat = torch.randn(2, 3, N, dtype=torch.float64)
    idx = random_index((2, 6, 5), N, seed=3)
    got = pointops.group_points(feat.to(device), idx.int().to(device))
    assert got.shape == (2, 3, 6, 5)
    expected = ref.gather(feat, idx.reshape(2, 30, 1)).view(2, 3, 6, 5)
    assert torch.equal(got.cpu(), expected)
    assert (got.cpu()[idx.unsqueeze(1).expand(2, 3, 6, 5) == -1] == 0).all()


@pytest.mark.parametrize("m", [1, 2, 3, 16])
def test_three_interpolate(device, m):
    feat = torch.randn(2, 5, m, dtype=torch.float64)
    idx = random_index((2, 9, 3), m, seed=4)
    weight = torch.rand(2, 9, 3, dtype=torch.float64)
    got = pointops.three_interpolate(feat.to(device), idx.to(device), weight.to(device))
    torch.testing.assert_close(got.cpu(), ref.gather(feat, idx, weight), rtol=1e-12, atol=1e-12)


def test_non_contiguous_inputs(device):
    base = cloud("random", 2, 20)
    xyz = base.transpose(0, 1).contiguous().transpose(0, 1)  # same values, batch-major strides
    assert not xyz.is_contiguous()
    q = torch.rand(2, 3, 6, dtype=torch.float64).transpose(1, 2)  # [2, 6, 3] non-contiguous
    assert torch.equal(pointops.furthest_point_sample(xyz.to(device), 5).cpu(), ref.fps(base, 5))
    d, i = pointops.knn(xyz.to(device), q.to(device), 4)
    e_d, e_i = ref.knn(base, q.contiguous(), 4)
    assert torch.equal(i.cpu(), e_i) and torch.equal(d.cpu(), e_d)
    feat = torch.randn(6, 2, 20, dtype=torch.float64).transpose(0, 1)  # [2, 6, 20]
    idx = torch.randint(0, 20, (5, 2)).t()
    assert torch.equal(
        pointops.gather_points(feat.to(device), idx.to(device)).cpu(),
        ref.gather(feat.contiguous(), idx.contiguous().unsqueeze(-1)),
    )


def test_empty_batch_shapes(device):
    xyz = torch.zeros(0, 5, 3, dtype=torch.float64, device=device)
    assert pointops.furthest_point_sample(xyz, 3).shape == (0, 3)
    d, i = pointops.knn(xyz, xyz, 2)
    assert d.shape == (0, 5, 2) and i.shape == (0, 5, 2)
    idx, count = pointops.ball_query(xyz, xyz[:, :0], 1.0, 2)
    assert idx.shape == (0, 0, 2) and count.shape == (0, 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("C", [0, 1, 3])
def test_outputs_are_contiguous_with_the_expected_dtype_and_device(device, dtype, C):
    # The ops allocate their outputs through the C shim with strides they compute themselves;
    # they must match torch's own contiguous layout, size-0 and size-1 dimensions included.
    if dtype == torch.float16 and device == "cpu":
        pytest.skip("float16 runs on CUDA only")

    def same_layout(t, shape, want_dtype):
        expected = torch.empty(shape, dtype=want_dtype)
        assert t.shape == expected.shape and t.stride() == expected.stride()
        assert t.dtype == want_dtype and t.device.type == device

    xyz = cloud("random", 2, 9).to(device, dtype)
    same_layout(pointops.furthest_point_sample(xyz, 1), (2, 1), torch.int64)
    d, i = pointops.knn(xyz, xyz[:, :4], 3)
    same_layout(d, (2, 4, 3), dtype)
    same_layout(i, (2, 4, 3), torch.int64)
    idx, count = pointops.ball_query(xyz, xyz[:, :1], 0.5, 2)
    same_layout(idx, (2, 1, 2), torch.int64)
    same_layout(count, (2, 1), torch.int64)
    feat = torch.randn(2, C, 9, dtype=dtype, device=device, requires_grad=True)
    g_idx = torch.randint(0, 9, (2, 5), device=device)
    out = pointops.gather_points(feat, g_idx)
    same_layout(out, (2, C, 5), dtype)
    (grad,) = torch.autograd.grad(out.sum(), feat)
    same_layout(grad, (2, C, 9), dtype)
    same_layout(pointops.group_points(feat, g_idx.view(2, 5, 1).expand(2, 5, 2)), (2, C, 5, 2), dtype)
    w = torch.rand(2, 5, 3, dtype=dtype, device=device)
    same_layout(pointops.three_interpolate(feat, g_idx.view(2, 5, 1).expand(2, 5, 3), w), (2, C, 5), dtype)
