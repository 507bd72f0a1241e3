"""CUDA-only checks (skipped without a GPU): agreement with CPU, reduced precision, streams,
CUDA-graph capture, 64-bit sizes. The device-parametrized tests of the other files also run on
CUDA when one is present."""

import ops_reference as ref
import pointops
import pytest
import torch
from bad_values import raises_bad_value
from ops_data import cloud

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (torch.cuda.is_available() and pointops.build_info()["cuda"]),
        reason="needs a CUDA device and a CUDA build of pointops",
    ),
]


def _all_ops(xyz, q, feat, idx3, w):
    """Every op once; returns a dict of outputs (moved to CPU by the caller)."""
    out = {"fps": pointops.furthest_point_sample(xyz, 64)}
    out["bq_idx"], out["bq_count"], out["bq_d2"] = pointops.ball_query(xyz, q, 0.15, 16, return_dist2=True)
    out["knn_d2"], out["knn_idx"] = pointops.knn(xyz, q, 10)
    out["gather"] = pointops.gather_points(feat, out["fps"])
    out["group"] = pointops.group_points(feat, out["bq_idx"])
    out["interp"] = pointops.three_interpolate(feat, idx3, w)
    return out


def _inputs(dtype=torch.float32, B=3, N=3000, M=700, C=8, seed=0):
    xyz = cloud("random", B, N, dtype=dtype, seed=seed)
    q = cloud("random", B, M, dtype=dtype, seed=seed + 1)
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn(B, C, N, generator=g).to(dtype)
    idx3 = torch.randint(-1, N, (B, M, 3), generator=g)
    w = torch.rand(B, M, 3, generator=g).to(dtype)
    return xyz, q, feat, idx3, w


def test_cuda_matches_cpu_on_data_without_ties():
    inputs = _inputs()
    cpu = _all_ops(*inputs)
    gpu = _all_ops(*(t.cuda() for t in inputs))
    for name in ("fps", "bq_idx", "bq_count", "knn_idx"):
        assert torch.equal(gpu[name].cpu(), cpu[name]), name
    for name in ("bq_d2", "knn_d2", "gather", "group", "interp"):
        torch.testing.assert_close(gpu[name].cpu(), cpu[name], rtol=1e-6, atol=1e-6, msg=name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_matches_float32_of_the_same_values(dtype):
    xyz, q, feat, idx3, w = _inputs(B=2, N=1500, M=300)
    xyz, q, feat, w = xyz.to(dtype), q.to(dtype), feat.to(dtype), w.to(dtype)
    gpu = _all_ops(*(t.cuda() for t in (xyz, q, feat, idx3, w)))
    # the kernels read reduced precision and accumulate in float32: the float32 CPU run on the
    # same (rounded) values gives the same neighbours
    cpu = _all_ops(xyz.float(), q.float(), feat.float(), idx3, w.float())
    assert torch.equal(gpu["fps"].cpu(), cpu["fps"])
    assert torch.equal(gpu["knn_idx"].cpu(), cpu["knn_idx"])
    assert torch.equal(gpu["bq_idx"].cpu(), cpu["bq_idx"])
    for name in ("knn_d2", "bq_d2", "gather", "group", "interp"):
        assert gpu[name].dtype == dtype
        torch.testing.assert_close(
            gpu[name].cpu().float(), cpu[name].to(dtype).float(), rtol=1e-2, atol=1e-2, msg=name
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_coordinates_accumulate_in_float32_up_to_its_limit(dtype):
    # float16 cannot exceed the limit (max 65504); bfloat16 can, and is then refused. The
    # squared distances are float32 sums rounded to the output dtype (inf in float16 here:
    # the neighbours are still right)
    limit = pointops.coordinate_limit(dtype)
    top = min(limit, torch.finfo(dtype).max)
    corners = torch.tensor([[[top] * 3, [0.0] * 3, [-top] * 3]], device="cuda").to(dtype)
    dist2, idx = pointops.knn(corners, corners[:, :1], 3)
    assert idx.tolist() == [[[0, 1, 2]]]
    expected = torch.tensor([[[0.0, 3 * top**2, 12 * top**2]]], device="cuda").to(dtype)
    assert torch.equal(dist2, expected)
    assert pointops.furthest_point_sample(corners, 3).tolist() == [[0, 2, 1]]
    if dtype == torch.bfloat16:
        beyond = corners.clone()
        beyond[0, 1, 0] = 2.0**63
        with raises_bad_value("cuda", "", "xyz held nan, inf or a coordinate too large"):  # found on the GPU
            pointops.knn(beyond, corners, 1)


def test_reduced_precision_gradients():
    feat = torch.randn(2, 4, 50, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    idx = torch.randint(0, 50, (2, 30, 3), device="cuda")
    w = torch.rand(2, 30, 3, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    pointops.three_interpolate(feat, idx, w).float().sum().backward()
    f32 = feat.detach().float().requires_grad_()
    w32 = w.detach().float().requires_grad_()
    pointops.three_interpolate(f32, idx, w32).sum().backward()
    torch.testing.assert_close(feat.grad.float(), f32.grad, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(w.grad.float(), w32.grad, rtol=2e-2, atol=2e-2)


def test_ops_run_on_the_current_stream():
    xyz, q, feat, idx3, w = (t.cuda() for t in _inputs(B=2, N=2000, M=400))
    expected = {k: v.cpu() for k, v in _all_ops(xyz, q, feat, idx3, w).items()}
    stale = [torch.zeros_like(t) for t in (xyz, q, feat, w)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        targets = [s.clone() for s in stale]
        torch.cuda._sleep(50_000_000)  # keep the side stream busy before the copies land
        for target, source in zip(targets, (xyz, q, feat, w), strict=True):
            target.copy_(source)
        # an op on another stream would read the zeros before the copies complete
        got = _all_ops(targets[0], targets[1], targets[2], idx3, targets[3])
    side.synchronize()
    for name, value in got.items():
        torch.testing.assert_close(value.cpu(), expected[name], msg=name)


def _dense_backward_case(seed):
    # 2 x 32768 entries over 2048 points: the transposed (dense) sums, with the rows built on a
    # second stream beside the transpose (from 2^16 entries on)
    g = torch.Generator().manual_seed(seed)
    B, C, N, P = 2, 8, 2048, 32768
    return torch.randint(-1, N, (B, P, 1), generator=g), torch.randn(B, C, P, generator=g), N


def test_dense_backward_rows_built_beside_the_transpose_follow_the_stream():
    ops = torch.ops.pointops
    idx, grad, N = _dense_backward_case(seed=3)
    expected = ops.gather_backward_feat(grad, idx, None, N)  # CPU: the same sums, same order
    sources = idx.cuda(), grad.cuda()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        idx_dev = torch.zeros_like(sources[0])  # valid but wrong indices until the copy lands
        grad_dev = torch.zeros_like(sources[1])
        torch.cuda._sleep(50_000_000)  # the device-to-device copies below land late
        idx_dev.copy_(sources[0])
        grad_dev.copy_(sources[1])
        got = ops.gather_backward_feat(grad_dev, idx_dev, None, N) * 1.0  # read at once, same stream
    stream.synchronize()
    assert torch.equal(got.cpu(), expected)


def test_dense_backward_rows_built_beside_the_transpose_in_a_cuda_graph():
    ops = torch.ops.pointops
    idx, grad, N = _dense_backward_case(seed=4)
    idx_dev, static_grad = idx.cuda(), grad.cuda()
    ops.gather_backward_feat(static_grad, idx_dev, None, N)  # warm up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.gather_backward_feat(static_grad, idx_dev, None, N)
    _, new_grad, _ = _dense_backward_case(seed=5)
    static_grad.copy_(new_grad)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), ops.gather_backward_feat(new_grad, idx, None, N))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize("n", [300, 2500])
def test_dense_sums_equal_the_cpu_bit_for_bit(dtype, wide, n):
    # three_interpolate's backward through the dense sums (rows built once per chunk, then summed
    # chunk by chunk): several chunks, a partial channel group, -1 entries; 16-bit against the
    # float32 CPU sums of the same values, rounded once
    ops = torch.ops.pointops
    g = torch.Generator().manual_seed(n + wide)
    B, C, P = 2, 21, 6000
    idx = torch.randint(-1, n, (B, P, 3), generator=g)
    weight = torch.rand(B, P, 3, generator=g).to(dtype)
    grad = torch.randn(B, C, P, generator=g).to(dtype)
    expected = ops.gather_backward_feat(grad.float(), idx, weight.float(), n).to(dtype)
    grad_dev, idx_dev, weight_dev = grad.cuda(), idx.cuda(), weight.cuda()
    with pointops._tuning.override(GATHER_SPARSE=5, GATHER_DENSE_WIDE=wide):
        got = ops.gather_backward_feat(grad_dev, idx_dev, weight_dev, n)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            replayed = ops.gather_backward_feat(grad_dev, idx_dev, weight_dev, n)
    grad_dev.mul_(2)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(got.cpu(), expected)
    doubled = ops.gather_backward_feat(2 * grad.float(), idx, weight.float(), n).to(dtype)
    assert torch.equal(replayed.cpu(), doubled)


@pytest.mark.parametrize("lanes", [1, 2, 8, 32, None])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize(
    ("B", "N", "M", "radius", "k"),
    [(16, 1024, 512, 0.2, 64), (3, 2500, 70, 0.1, 5), (2, 600, 33, 5.0, 40), (2, 900, 10, 0.0, 3)],
)
def test_ball_query_scan_lanes_equal_the_cpu(lanes, dtype, B, N, M, radius, k):
    # the scanning ball query with a thread per query or a group of lanes per query (None: the
    # planner's count; PointNet++'s B16 N1024 M512 shape first): the first k hits in index
    # order, their count and distances, padded with the first hit, as the CPU gives them (for
    # float16, the float32 CPU run on the same rounded values)
    xyz = cloud("random", B, N, seed=3).to(dtype)
    q = torch.cat([xyz[:, : M // 2], cloud("random", B, M - M // 2, seed=4).to(dtype)], 1)
    lengths = torch.tensor([N] + [N // 3] * (B - 1))
    on_cpu = torch.float32 if dtype == torch.float16 else dtype
    idx, count, dist2 = pointops.ball_query(
        xyz.to(on_cpu), q.to(on_cpu), radius, k, lengths=lengths, return_dist2=True
    )
    with pointops._tuning.override(BALL_QUERY_LANES=lanes):
        got = pointops.ball_query(xyz.cuda(), q.cuda(), radius, k, lengths=lengths.cuda(), return_dist2=True)
    assert torch.equal(got[0].cpu(), idx)
    assert torch.equal(got[1].cpu(), count)
    assert got[2].dtype == dtype
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    torch.testing.assert_close(got[2].cpu().double(), dist2.to(dtype).double(), rtol=tol, atol=tol)


# Knobs that force each CUDA FPS path at N = 4000 (csrc/cuda/fps.cu): the register paths run
# the float32 kernel on a 16-bit cloud widened once in the workspace; stream and general read
# 16-bit points in place. Forced G = 7 matches no cluster or grid plan at 4000 points, so the
# stream path takes the cloud.
FPS_PATHS = {
    "auto": {},
    "lean": {"FPS_GROUP": 1},
    "block": {"FPS_GROUP": 1, "FPS_LEAN": 0},
    "cluster": {"FPS_GROUP": 4},
    "grid": {"FPS_GROUP": 4, "FPS_NO_CLUSTER": 1},
    "stream": {"FPS_GROUP": 7},
    "general": {"FPS_GENERAL": 1},
}


@pytest.mark.parametrize("path", sorted(FPS_PATHS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_fps_picks_the_float32_cpu_points_on_every_path(path, dtype):
    from pointops import packed

    xyz = cloud("random", 3, 4000, seed=7).to(dtype)
    lengths = torch.tensor([4000, 1500, 1])
    expected = pointops.furthest_point_sample(xyz.float(), 300, lengths=lengths, start=11)
    flat = torch.cat([xyz[b, :n] for b, n in enumerate(lengths.tolist())]).cuda()
    ptr = packed.ptr_from_counts(lengths.cuda())
    sample_ptr = packed.ptr_from_counts(torch.tensor([300, 300, 300], device="cuda"))
    with pointops._tuning.override(**FPS_PATHS[path]):
        got = pointops.furthest_point_sample(xyz.cuda(), 300, lengths=lengths.cuda(), start=11)
        picks = packed.furthest_point_sample(flat, ptr, sample_ptr, max_points=4000).cpu()
    assert torch.equal(got.cpu(), expected)
    starts = ptr.tolist()
    for b in range(3):
        # the packed op starts at each cloud's first point
        own = pointops.furthest_point_sample(xyz[b : b + 1, : lengths[b]].float(), 300)[0]
        assert torch.equal(picks[300 * b : 300 * (b + 1)], torch.where(own >= 0, own + starts[b], own))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_fps_replays_in_a_cuda_graph(dtype):
    # the widened copy lives in the call's workspace: a replay widens the cloud's new values
    xyz = cloud("random", 2, 3000, seed=8).to(dtype).cuda()
    pointops.furthest_point_sample(xyz, 64)  # warm up (plan, allocator) outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = pointops.furthest_point_sample(xyz, 64)
    xyz.copy_(cloud("random", 2, 3000, seed=9).to(dtype))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), pointops.furthest_point_sample(xyz.cpu().float(), 64))


def test_cuda_graph_capture_and_replay():
    xyz, q, feat, idx3, w = (t.cuda() for t in _inputs(B=2, N=1000, M=200))
    _all_ops(xyz, q, feat, idx3, w)  # warm up outside the graph
    static = [t.clone() for t in (xyz, q, feat, w)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _all_ops(static[0], static[1], static[2], idx3, static[3])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = _all_ops(static[0], static[1], static[2], idx3, static[3])
    xyz2, q2, feat2, _, w2 = (t.cuda() for t in _inputs(B=2, N=1000, M=200, seed=5))
    for target, source in zip(static, (xyz2, q2, feat2, w2), strict=True):
        target.copy_(source)
    graph.replay()
    torch.cuda.synchronize()
    expected = _all_ops(xyz2, q2, feat2, idx3, w2)
    for name in outs:
        torch.testing.assert_close(outs[name], expected[name], msg=name)


def test_second_device_if_present():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    xyz = cloud("random", 2, 500, dtype=torch.float32)
    got = pointops.furthest_point_sample(xyz.to("cuda:1"), 20)
    assert got.device == torch.device("cuda:1")
    assert torch.equal(got.cpu(), pointops.furthest_point_sample(xyz, 20))


def test_gather_beyond_2_pow_31_elements():
    # output of 2^31 + 16 elements: flat offsets must be 64-bit
    C, P = 4, 2**29 + 4
    feat = torch.arange(C * 7, dtype=torch.float32, device="cuda").view(1, C, 7)
    idx = torch.full((1, P), 6, dtype=torch.int64, device="cuda")
    idx[0, -1] = 3
    out = pointops.gather_points(feat, idx)
    assert out.numel() > 2**31
    assert out[0, C - 1, -1].item() == feat[0, C - 1, 3].item()
    assert out[0, C - 1, -2].item() == feat[0, C - 1, 6].item()
    del out, idx
    torch.cuda.empty_cache()


def test_large_k_on_gpu_matches_reference():
    xyz = cloud("random", 1, 2000)
    q = cloud("random", 1, 5, seed=3)
    d2, idx = pointops.knn(xyz.cuda(), q.cuda(), 1500)
    e_d2, e_idx = ref.knn(xyz, q, 1500)
    assert torch.equal(idx.cpu(), e_idx) and torch.equal(d2.cpu(), e_d2)
    b_idx, b_count = pointops.ball_query(xyz.cuda(), q.cuda(), 10.0, 1999)
    assert (b_count.cpu() == 1999).all() and torch.equal(b_idx.cpu()[0, 0], torch.arange(1999))
