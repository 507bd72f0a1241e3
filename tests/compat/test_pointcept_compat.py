"""Pointcept's pointops API at the top level of pointops: the call patterns of Pointcept's
PTv1/PTv2 models and its evaluator, checked against plain-torch references."""

import pointops
import pytest
import torch
from pointops.compat import pointcept


def packed_cloud(sizes, device, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    xyz = (torch.rand(sum(sizes), 3, generator=g) * scale).to(device)
    offset = torch.tensor(sizes).cumsum(0).int().to(device)
    return xyz, offset


def bounds(offset):
    ends = offset.tolist()
    return list(zip([0] + ends[:-1], ends, strict=True))


def ref_knn(xyz, offset, new_xyz, new_offset, k):
    idx = torch.full((new_xyz.shape[0], k), -1, dtype=torch.int64)
    dist = torch.full((new_xyz.shape[0], k), float("inf"), dtype=torch.float64)
    for (p0, p1), (q0, q1) in zip(bounds(offset), bounds(new_offset), strict=True):
        for q in range(q0, q1):
            d2 = ((xyz[p0:p1].double() - new_xyz[q].double()) ** 2).sum(1)
            order = sorted(range(p1 - p0), key=lambda j: (d2[j].item(), j))[:k]
            idx[q, : len(order)] = torch.tensor(order, dtype=torch.int64) + p0
            dist[q, : len(order)] = d2[order].sqrt()
    return idx, dist


def test_knn_query_matches_reference_with_missing_slots_and_large_k(device):
    xyz, offset = packed_cloud([50, 140, 7], device)
    new_xyz, new_offset = packed_cloud([5, 6, 4], device, seed=1)
    idx, dist = pointops.knn_query(130, xyz, offset, new_xyz, new_offset)  # > 128, > 7 points
    assert idx.dtype == torch.int32 and idx.shape == (15, 130)
    ref_idx, ref_dist = ref_knn(xyz.cpu(), offset.cpu(), new_xyz.cpu(), new_offset.cpu(), 130)
    assert torch.equal(idx.cpu().long(), ref_idx)
    assert torch.allclose(dist.cpu().double(), ref_dist, rtol=1e-5, atol=1e-6)
    assert bool(torch.isinf(dist[-4:, 7:]).all()) and bool((idx[-4:, 7:] == -1).all())
    self_idx, self_dist = pointops.knn_query(1, xyz, offset)  # queries default to xyz
    assert torch.equal(self_idx[:, 0].long().cpu(), torch.arange(xyz.shape[0]))
    assert float(self_dist.abs().max()) == 0.0


def test_knn_query_test_time_mapping_accepts_int64_offsets():
    xyz, offset = packed_cloud([30, 40], "cpu")
    origin, origin_offset = packed_cloud([20, 25], "cpu", seed=3)
    a, _ = pointops.knn_query(1, xyz, offset.long(), origin, origin_offset.long())
    b, _ = pointops.knn_query(1, xyz, offset, origin, origin_offset)
    assert torch.equal(a, b)
    assert bool((a[:20] < 30).all()) and bool((a[20:] >= 30).all())


def ref_ball(xyz, offset, new_xyz, new_offset, nsample, max_r, min_r):
    max_r2 = float(torch.tensor(max_r, dtype=torch.float32) ** 2)
    min_r2 = float(torch.tensor(min_r, dtype=torch.float32) ** 2)
    idx = torch.full((new_xyz.shape[0], nsample), -1, dtype=torch.int64)
    dist = torch.full((new_xyz.shape[0], nsample), float("inf"))
    for (p0, p1), (q0, q1) in zip(bounds(offset), bounds(new_offset), strict=True):
        for q in range(q0, q1):
            d2 = ((xyz[p0:p1] - new_xyz[q]) ** 2).sum(1)
            cand = sorted(
                (d2[j].item(), j) for j in range(p1 - p0) if d2[j] <= 1e-5 or (min_r2 <= d2[j] < max_r2)
            )
            if len(cand) <= nsample:
                pick = cand
            else:
                sep = torch.tensor(len(cand), dtype=torch.float32) / nsample
                pick = [cand[int(sep * torch.tensor(float(i)))] for i in range(nsample)]
            for s, (d, j) in enumerate(pick):
                idx[q, s] = j + p0
                dist[q, s] = d**0.5
    return idx, dist


def test_pointcept_ball_query_beyond_its_buffers():
    # 3000 points in one small ball: more than Pointcept's 2048-candidate buffer
    xyz, offset = packed_cloud([3000, 60], "cpu", scale=0.1)
    new_xyz, new_offset = xyz[[0, 5, 3001]].contiguous(), torch.tensor([2, 3], dtype=torch.int32)
    idx, dist = pointops.ball_query(16, 0.2, 0.01, xyz, offset, new_xyz, new_offset)
    ref_idx, ref_dist = ref_ball(xyz, offset, new_xyz, new_offset, 16, 0.2, 0.01)
    assert idx.dtype == torch.int32
    assert torch.equal(idx.long(), ref_idx)
    assert torch.allclose(dist, ref_dist, rtol=1e-5, atol=1e-6)
    assert float(dist[idx >= 0].max()) < 0.2  # distances, never point indices


def clustered_cloud(sizes, device, dtype=torch.float32, seed=0):
    """Packed clouds where every 7th point has an exact twin (equal distances)."""
    xyz, offset = packed_cloud(sizes, "cpu", seed=seed, scale=0.5)
    xyz[1::7] = xyz[::7][: xyz[1::7].shape[0]]
    return xyz.to(device=device, dtype=dtype), offset.to(device)


@pytest.fixture
def first_pass(monkeypatch):
    """How each ball query ended its first pass (the native search): True when every ball fit."""
    outcomes = []
    native = pointcept._ball_hits

    def recorded(*args):
        found = native(*args)
        outcomes.append(found is not None)
        return found

    monkeypatch.setattr(pointcept, "_ball_hits", recorded)
    return outcomes


@pytest.mark.parametrize("min_r", [0.0, 0.04])
def test_pointcept_ball_query_matches_reference_when_balls_fit(device, min_r, first_pass):
    xyz, offset = clustered_cloud([900, 0, 1500], device)
    new_xyz, new_offset = xyz[::29].contiguous(), torch.tensor([31, 31, 83], dtype=torch.int32, device=device)
    idx, dist = pointops.ball_query(32, 0.07, min_r, xyz, offset, new_xyz, new_offset)
    assert first_pass == [True]
    ref_idx, ref_dist = ref_ball(xyz.cpu(), offset.cpu(), new_xyz.cpu(), new_offset.cpu(), 32, 0.07, min_r)
    assert float((ref_idx >= 0).sum(1).float().mean()) > 3
    assert torch.equal(idx.cpu().long(), ref_idx)
    assert torch.allclose(dist.cpu(), ref_dist, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("nsample", [2, 40])
def test_pointcept_ball_query_first_pass_equals_knn_growth(device, dtype, nsample, first_pass):
    # the native first pass against the kNN growth it stands in for when no ball overflows
    # (nsample=40); with nsample=2 balls overflow and the kNN answers
    if device == "cpu" and dtype in (torch.float16, torch.bfloat16):
        pytest.skip("float16/bfloat16 run on CUDA only")
    xyz, offset = clustered_cloud([700, 1300], device, dtype)
    new_xyz, new_offset = xyz[::5].contiguous(), torch.tensor([140, 400], dtype=torch.int32, device=device)
    for min_r in (0.0, 0.03):
        fast = pointops.ball_query(nsample, 0.06, min_r, xyz, offset, new_xyz, new_offset)
        torch.manual_seed(3)
        fast_random = pointcept.random_ball_query(nsample, 0.06, min_r, xyz, offset, new_xyz, new_offset)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(pointcept, "_ball_hits", lambda *args: None)
            slow = pointops.ball_query(nsample, 0.06, min_r, xyz, offset, new_xyz, new_offset)
            torch.manual_seed(3)
            slow_random = pointcept.random_ball_query(nsample, 0.06, min_r, xyz, offset, new_xyz, new_offset)
        for a, b in ((fast, slow), (fast_random, slow_random)):
            assert torch.equal(a[0], b[0])
            assert torch.equal(a[1], b[1])
    assert first_pass == [nsample == 40] * 4


def test_ball_query_serves_both_apis():
    xyz, offset = packed_cloud([40], "cpu")
    native_idx, count = pointops.ball_query(xyz[None], xyz[None], 0.3, 8)
    assert native_idx.dtype == torch.int64 and count.shape == (1, 40)
    idx, dist = pointops.ball_query(nsample=8, max_radius=0.3, min_radius=0.0, xyz=xyz, offset=offset)
    assert idx.dtype == torch.int32 and dist.shape == (40, 8)
    # the point itself is always in its ball; native keeps index order, Pointcept distance order
    assert bool((idx[:, 0].long() == torch.arange(40)).all())


def test_farthest_point_sampling_global_rows_from_each_cloud_start(device):
    xyz, offset = packed_cloud([30, 50, 3], device)
    new_offset = torch.tensor([10, 30, 35], dtype=torch.int32, device=device)  # last cloud: 5 of 3
    idx = pointops.farthest_point_sampling(xyz, offset, new_offset)
    assert idx.dtype == torch.int32 and idx.shape == (35,)
    idx = idx.long().cpu()
    for (p0, p1), (s0, s1) in zip([(0, 30), (30, 80)], [(0, 10), (10, 30)], strict=True):
        ref = pointops.furthest_point_sample(xyz[None, p0:p1], s1 - s0)[0].cpu() + p0
        assert torch.equal(idx[s0:s1], ref)
    assert idx[30:33].tolist() == [80, 81, 82] or sorted(idx[30:33].tolist()) == [80, 81, 82]
    assert idx[33:].tolist() == [80, 80]  # past the cloud's size: its first point, as Pointcept


def test_grouping_with_xyz_and_missing_neighbours_and_gradient(device):
    xyz, offset = packed_cloud([20, 4], device)
    feat = torch.rand(24, 5, device=device, requires_grad=True)
    idx, _ = pointops.knn_query(6, xyz, offset)  # the 4-point cloud has 2 missing slots
    out = pointops.grouping(idx, feat, xyz, with_xyz=True)
    assert out.shape == (24, 6, 8)
    safe = idx.long().clamp_min(0)
    valid = (idx >= 0).unsqueeze(-1)
    rel = torch.where(valid, xyz[safe] - xyz.unsqueeze(1), 0.0)
    ref = torch.cat([rel, torch.where(valid, feat[safe], 0.0)], -1)
    assert torch.allclose(out, ref)
    out.sum().backward()
    expected = torch.bincount(idx.long()[idx >= 0].cpu(), minlength=24).float()
    assert torch.allclose(feat.grad.sum(1).cpu(), expected * 5)
    assert torch.equal(pointops.grouping2(feat, idx), pointops.grouping(idx, feat, xyz))


def test_interpolation_inverse_distance_weights_and_missing_neighbours():
    xyz, offset = packed_cloud([10, 2], "cpu")
    new_xyz, new_offset = packed_cloud([7, 5], "cpu", seed=4)
    feat = torch.rand(12, 4, requires_grad=True)
    out = pointops.interpolation(xyz, new_xyz, feat, offset, new_offset)
    idx, dist = ref_knn(xyz, offset, new_xyz, new_offset, 3)
    w = 1.0 / (dist + 1e-8)
    w = w / w.sum(1, keepdim=True)
    ref = (feat.detach()[idx.clamp_min(0)].double() * w.unsqueeze(-1)).sum(1)
    assert torch.allclose(out.double(), ref, atol=1e-5)
    out.sum().backward()
    assert feat.grad is not None and bool(torch.isfinite(feat.grad).all())
    assert torch.allclose(pointops.interpolation2(xyz, new_xyz, feat, offset, new_offset), out)


def test_query_and_group_dilation_and_short_cloud():
    xyz, offset = packed_cloud([40, 6], "cpu")
    feat = torch.rand(46, 3)
    idx = pointops.query_and_group(4, xyz, xyz, feat, None, offset, offset, dilation=1, with_feat=False)
    wide, _ = pointops.knn_query(7, xyz, offset)
    assert torch.equal(idx[:40], wide[:40, [0, 2, 4, 6]])
    soft = (6 - 1) / (4 - 1) - 1  # Pointcept's soft dilation for a 6-point cloud
    assert torch.equal(idx[40:], wide[40:, [int((soft + 1) * i) for i in range(4)]])
    grouped, _ = pointops.query_and_group(4, xyz, xyz, feat, idx, offset, offset)
    assert grouped.shape == (46, 4, 6)


def test_offset_batch_conversions():
    offset = torch.tensor([3, 3, 7], dtype=torch.int32)
    batch = pointops.offset2batch(offset)
    assert batch.tolist() == [0, 0, 0, 2, 2, 2, 2] and batch.dtype == torch.int64
    assert pointops.batch2offset(batch).tolist() == [3, 3, 7]
    assert pointops.batch2offset(batch).dtype == torch.int32


def test_point_transformer_v1_helpers_against_loops():
    torch.manual_seed(0)
    n, s, c, g = 6, 3, 4, 2
    x1, x2 = torch.rand(n, c, requires_grad=True), torch.rand(n, c)
    idx = torch.randint(0, n, (n, s), dtype=torch.int32)
    sub = pointops.subtraction(x1, x2, idx)
    assert torch.allclose(sub, x1.unsqueeze(1) - x2[idx.long()])
    pos, w = torch.rand(n, s, c), torch.rand(n, s, 2)
    agg = pointops.aggregation(x2, pos, w, idx)
    ref = torch.stack(
        [sum((x2[idx[i, j]] + pos[i, j]) * w[i, j].repeat(2) for j in range(s)) for i in range(n)]
    )
    assert torch.allclose(agg, ref)
    q, k, wc = torch.rand(n, g, c), torch.rand(n, g, c), torch.rand(c, requires_grad=True)
    t, r = torch.tensor([0, 1, 1, 5]), torch.tensor([2, 2, 0, 5])
    rel = pointops.attention_relation_step(q, k, wc, t, r)
    assert torch.allclose(rel, (q[t] * k[r] * wc).sum(-1))
    rel.sum().backward()
    assert wc.grad is not None  # Pointcept drops this gradient; pointops returns it
    fused = pointops.attention_fusion_step(rel.detach(), k, t, r)
    ref = torch.zeros_like(k)
    for m in range(4):
        ref[t[m]] += rel.detach()[m].unsqueeze(-1) * k[r[m]]
    assert torch.allclose(fused, ref)


def test_bad_offsets_are_named():
    xyz, _ = packed_cloud([10], "cpu")
    with pytest.raises(ValueError, match="offset must be nondecreasing and end at 10"):
        pointops.knn_query(3, xyz, torch.tensor([12], dtype=torch.int32))
    with pytest.raises(ValueError, match="nsample"):
        pointops.knn_query(0, xyz, torch.tensor([10]))
    with pytest.raises(ValueError, match="min_radius < max_radius"):
        pointops.ball_query(4, 0.1, 0.2, xyz, torch.tensor([10]))
    with pytest.raises(ValueError, match="idx values"):
        pointops.grouping(torch.tensor([[10]]), torch.rand(10, 2), xyz)


def test_grouping_on_cuda_reports_a_bad_index_without_waiting(device):
    # grouping/grouping2 leave the index check to the gather kernel (no sync on the hot path)
    if device == "cpu":
        pytest.skip("on CPU the error comes at once (test_bad_offsets_are_named)")
    xyz = torch.rand(10, 3, device=device)
    bad = torch.tensor([[3, 10]], dtype=torch.int32, device=device)
    for grouped in (lambda: pointops.grouping(bad, xyz, xyz), lambda: pointops.grouping2(xyz, bad)):
        out = grouped()
        with pytest.raises(ValueError, match="idx"):
            pointops.check_errors()
        assert bool(out[0, 1].isnan().all())  # the bad slot's row: NaN, never a plausible value
        assert torch.equal(out[0, 0], xyz[3]) or bool(out[0, 0].isnan().all())


def test_compat_module_exports_the_same_functions():
    for name in pointcept.__all__:
        if name != "ball_query":
            assert getattr(pointops, name) is getattr(pointcept, name)
