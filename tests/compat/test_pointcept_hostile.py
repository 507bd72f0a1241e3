"""Hostile input to Pointcept's names (pointops.compat.pointcept, issue 42): clouds asked for no
samples, empty clouds, bad offsets and batch vectors, nan/inf, every dtype, zero/negative/huge/
bool/float sizes and radii, mismatched shapes, on 1 and 2 threads. Each gives a clear error
naming the argument or the answer of a brute-force numpy reference. On CUDA a bad value the
layer does not read itself is reported by a later pointops call or pointops.check_errors()."""

import math

import numpy as np
import pytest
import torch
from bad_values import raises_bad_value
from pointops import packed
from pointops.compat import pointcept as pc


def cloud(sizes, device, dtype=torch.float32, seed=0):
    """(xyz [sum(sizes), 3], offset int32 [len(sizes)]), Pointcept's layout."""
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(sum(sizes), 3, generator=g, dtype=torch.float64).to(device, dtype)
    return xyz, torch.tensor(np.cumsum(sizes).tolist(), dtype=torch.int32, device=device)


def offsets(values, device):
    return torch.tensor(values, dtype=torch.int32, device=device)


def bounds(offset):
    ends = [0, *offset.tolist()]
    return list(zip(ends[:-1], ends[1:], strict=True))


# ---------------------------------------------------------------------------------------------
# brute-force references (numpy, float64)


def ref_farthest_point_sampling(xyz, offset, new_offset):
    """Pointcept's FPS: from each cloud's first point; past a cloud's size its first point; an
    empty cloud gives -1 (pointops' documented difference)."""
    xyz = xyz.cpu().double().numpy()
    out = []
    for (p0, p1), (s0, s1) in zip(bounds(offset), bounds(new_offset), strict=True):
        points, picks = xyz[p0:p1], []
        mind = np.full(len(points), np.inf)
        current = 0
        for _ in range(min(s1 - s0, len(points))):
            picks.append(p0 + current)
            d = points - points[current]
            mind = np.minimum(mind, (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2])
            current = int(np.argmax(mind))
        out += picks + [p0 if p1 > p0 else -1] * (s1 - s0 - len(picks))
    return out


def ref_knn_query(k, xyz, offset, new_xyz, new_offset):
    xyz, new_xyz = xyz.cpu().double().numpy(), new_xyz.cpu().double().numpy()
    idx = np.full((len(new_xyz), k), -1, dtype=np.int64)
    dist = np.full((len(new_xyz), k), np.inf)
    for (p0, p1), (q0, q1) in zip(bounds(offset), bounds(new_offset), strict=True):
        for q in range(q0, q1):
            d2 = ((xyz[p0:p1] - new_xyz[q]) ** 2).sum(1)
            order = np.lexsort((np.arange(p1 - p0), d2))[:k]
            idx[q, : len(order)], dist[q, : len(order)] = order + p0, np.sqrt(d2[order])
    return idx, dist


# ---------------------------------------------------------------------------------------------
# farthest_point_sampling: no samples, empty clouds (item 1 of issue 42)

FPS_CASES = [
    # (cloud sizes, samples per cloud)
    ([3, 3], [2, 0]),  # new_offset = [2, 2]: the last cloud asks for none
    ([3, 3], [0, 2]),
    ([3000, 5, 10], [500, 0, 3]),
    ([0, 4, 0], [2, 0, 1]),  # empty clouds asked for samples: -1
    ([2, 6], [5, 6]),  # more samples than points: the cloud's first point again
    ([4, 4], [0, 0]),
]


@pytest.mark.parametrize(("sizes", "samples"), FPS_CASES)
def test_farthest_point_sampling_equals_the_reference(device, threads, sizes, samples):
    xyz, offset = cloud(sizes, device, torch.float64)
    new_offset = offsets(np.cumsum(samples).tolist(), device)
    expected = ref_farthest_point_sampling(xyz, offset.cpu(), new_offset.cpu())
    for _ in range(5):  # the writes past a cloud's slots raced with other threads
        idx = pc.farthest_point_sampling(xyz, offset, new_offset)
        assert idx.dtype == torch.int32 and idx.tolist() == expected


@pytest.mark.parametrize(
    ("new_offset", "cpu_words", "cuda_words"),
    [
        ([2, 1], r"new_offset decreases at entry 1 \(2 -> 1\)", "new_offset must be nondecreasing"),
        ([-1, 2], r"new_offset\[0\] = -1 is negative", "new_offset must be nondecreasing"),
    ],
)
def test_farthest_point_sampling_refuses_bad_new_offsets(device, new_offset, cpu_words, cuda_words):
    xyz, offset = cloud([3, 3], device)
    with raises_bad_value(device, cpu_words, cuda_words):
        pc.farthest_point_sampling(xyz, offset, offsets(new_offset, device))
    for bad in ([1, 2], torch.tensor([1.0, 2.0], device=device)):
        with pytest.raises(ValueError, match="new_offset must be"):
            pc.farthest_point_sampling(xyz, offset, bad)
    with pytest.raises(ValueError, match="new_offset must be a tensor with one entry per cloud"):
        pc.farthest_point_sampling(xyz, offset, offsets([2], device))


# ---------------------------------------------------------------------------------------------
# offsets and the layout helpers (items 5 and 9 of issue 42)


@pytest.mark.parametrize(
    ("offset", "cpu_words", "read_words"),
    [
        ([3, 1, 5], r"offset decreases at entry 1 \(3 -> 1\)", "offset must be nondecreasing"),
        ([-3, 5], r"offset\[0\] = -3 is negative", r"its entries >= 0, got \[-3, 5\]"),
        ([3, 4], "offset must be nondecreasing and end at 5", "offset must be nondecreasing and end at 5"),
        ([3, 2**40], "end at 5", "end at 5"),
    ],
)
def test_bad_offsets_are_refused_by_every_query(device, offset, cpu_words, read_words):
    """On CUDA the queries read no offset on the host (no sync, as Pointcept's own kernels): the
    GPU's row-pointer check reports it, naming the converted argument (ptr, or query_ptr for
    new_offset). FPS reads its offsets for
    the output size anyway, so it refuses them at once, in the words of the CPU's end check."""
    xyz, _ = cloud([3, 2], device)
    bad = torch.tensor(offset, device=device)
    good = offsets([5] * len(offset), device)  # as many clouds as bad (all rows in the first)
    queries = (
        lambda: pc.knn_query(2, xyz, bad),
        lambda: pc.ball_query(2, 0.5, 0.0, xyz, bad),
        lambda: pc.random_ball_query(2, 0.5, 0.0, xyz, bad),
        lambda: pc.interpolation(xyz, xyz, torch.rand(5, 2, device=device), bad, good),
        lambda: pc.knn_query_and_group(torch.rand(5, 2, device=device), xyz, bad, nsample=2),
        lambda: pc.query_and_group(2, xyz, xyz, torch.rand(5, 2, device=device), None, bad, good),
    )
    for call in queries:
        # with no new_offset, bad is both the op's ptr and its query_ptr: the GPU names either
        with raises_bad_value(device, cpu_words, r"ptr was not a row pointer.*Pointcept's offset"):
            call()
    with raises_bad_value(
        device, cpu_words.replace("offset", "new_offset"), "query_ptr was not a row pointer"
    ):
        pc.knn_query(2, xyz, good, xyz, bad)
    fps_words = cpu_words if torch.device(device).type == "cpu" else read_words
    with pytest.raises(ValueError, match=fps_words):
        pc.farthest_point_sampling(xyz, bad, offsets(list(range(1, len(offset) + 1)), device))


def test_offsets_of_the_wrong_kind(device):
    xyz, offset = cloud([3, 2], device)
    with pytest.raises(TypeError, match="offset must be a torch.Tensor, got list"):
        pc.knn_query(2, xyz, [3, 5])
    with pytest.raises(ValueError, match="offset must be a non-empty 1-D tensor"):
        pc.knn_query(2, xyz, offset[None])
    with pytest.raises(ValueError, match="offset must be a non-empty 1-D tensor"):
        pc.knn_query(2, xyz, offset[:0])
    for dtype in (torch.float32, torch.int16, torch.bool):
        with pytest.raises(ValueError, match="offset must be a 1-D int32 or int64 tensor"):
            pc.knn_query(2, xyz, offset.to(dtype))
    with pytest.raises(ValueError, match="offset has 2 clouds but new_offset has 1"):
        pc.knn_query(2, xyz, offset, xyz, offsets([5], device))
    for new_xyz, new_offset in ((xyz[:2], None), (None, offsets([1, 2], device))):
        with pytest.raises(ValueError, match="give new_xyz and new_offset together"):
            pc.knn_query(2, xyz, offset, new_xyz, new_offset)
    assert torch.equal(pc.knn_query(2, xyz, offset.long())[0], pc.knn_query(2, xyz, offset)[0])


@pytest.mark.gpu
def test_offsets_on_another_device():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    xyz, offset = cloud([3, 2], "cuda")
    with pytest.raises(ValueError, match="offset is on cpu but xyz is on cuda"):
        pc.knn_query(2, xyz, offset.cpu())
    with pytest.raises(ValueError, match="new_offset is on cpu but new_xyz is on cuda"):
        pc.knn_query(2, xyz, offset, xyz, offset.cpu())
    with pytest.raises(ValueError, match="new_xyz .* must match xyz"):
        pc.knn_query(2, xyz, offset, xyz.cpu(), offset)
    with pytest.raises(ValueError, match="new_offset is on cpu but xyz is on cuda"):
        pc.farthest_point_sampling(xyz, offset, offset.cpu())


@pytest.mark.parametrize(
    ("offset", "cpu_words", "cuda_words"),
    [
        ([3, 1, 5], r"offset decreases at entry 1 \(3 -> 1\)", "offset must be nondecreasing"),
        ([-3], r"offset\[0\] = -3 is negative", "its entries >= 0"),
    ],
)
def test_offset2batch_refuses_bad_offsets(device, offset, cpu_words, cuda_words):
    with raises_bad_value(device, cpu_words, cuda_words):
        pc.offset2batch(torch.tensor(offset, device=device))


@pytest.mark.parametrize(
    "batch",
    [[1, 0, 1], [-1, 0], [0, 2, 1, 2]],
)
def test_batch2offset_refuses_unsorted_or_negative_ids(device, batch):
    with pytest.raises(ValueError, match="batch must hold cloud ids >= 0 in nondecreasing order"):
        pc.batch2offset(torch.tensor(batch, device=device))


def test_layout_helpers_of_the_wrong_kind_and_empty(device):
    for convert, name in ((pc.offset2batch, "offset"), (pc.batch2offset, "batch")):
        with pytest.raises(ValueError, match=f"{name} must be a 1-D int32 or int64 tensor"):
            convert(torch.tensor([0.0, 1.0], device=device))
        with pytest.raises(ValueError, match=f"{name} must be a (non-empty )?1-D"):
            convert(torch.zeros(1, 2, dtype=torch.int64, device=device))
        empty = torch.empty(0, dtype=torch.int64, device=device)
        assert convert(empty).tolist() == []
    with pytest.raises(TypeError, match="offset must be a torch.Tensor"):
        pc.offset2batch([3, 5])


def test_layout_helpers_round_trip_with_empty_clouds(device):
    offset = offsets([0, 3, 3, 5, 5], device)
    batch = pc.offset2batch(offset)
    assert batch.dtype == torch.int64 and batch.tolist() == [1, 1, 1, 3, 3]
    # ids past the last row are not clouds of the batch: the offset ends with the last id seen
    assert pc.batch2offset(batch).tolist() == [0, 3, 3, 5]
    assert pc.batch2offset(batch).dtype == torch.int32
    assert pc.batch2offset(batch.int()).tolist() == [0, 3, 3, 5]


# ---------------------------------------------------------------------------------------------
# sizes, radii, dtypes and values of the queries


@pytest.mark.parametrize("sizes", [[5, 0, 3], [0, 4], [6], [0, 0, 2]])
def test_knn_query_with_empty_clouds_equals_the_reference(device, threads, sizes):
    xyz, offset = cloud(sizes, device, torch.float64)
    new_xyz, new_offset = cloud([2, 3, 1][: len(sizes)], device, torch.float64, seed=1)
    for k in (1, 4, 300):
        idx, dist = pc.knn_query(k, xyz, offset, new_xyz, new_offset)
        ref_idx, ref_dist = ref_knn_query(k, xyz, offset.cpu(), new_xyz, new_offset.cpu())
        assert idx.dtype == torch.int32 and idx.tolist() == ref_idx.tolist()
        np.testing.assert_allclose(dist.cpu().numpy(), ref_dist, rtol=1e-12)


def test_sizes_must_be_positive_ints(device):
    xyz, offset = cloud([4, 3], device)
    feat = torch.rand(7, 2, device=device)
    for bad in (0, -1, True, 2.0, "2", None):
        with pytest.raises(ValueError, match="nsample must be an int > 0"):
            pc.knn_query(bad, xyz, offset)
        with pytest.raises(ValueError, match="nsample must be an int > 0"):
            pc.ball_query(bad, 0.5, 0.0, xyz, offset)
        with pytest.raises(ValueError, match="nsample must be an int > 0"):
            pc.random_ball_query(bad, 0.5, 0.0, xyz, offset)
        with pytest.raises(ValueError, match="nsample must be an int > 0"):
            pc.query_and_group(bad, xyz, xyz, feat, None, offset, offset)
        with pytest.raises(ValueError, match="k must be an int > 0"):
            pc.interpolation(xyz, xyz, feat, offset, offset, k=bad)
    with pytest.raises(ValueError, match="allocating an output tensor"):
        pc.knn_query(2**60, xyz, offset)
    for bad in (-1, True, 1.5, "1"):
        with pytest.raises(ValueError, match="dilation must be an int >= 0"):
            pc.query_and_group(2, xyz, xyz, feat, None, offset, offset, dilation=bad)
    with pytest.raises(ValueError, match="knn_query_and_group needs nsample"):
        pc.knn_query_and_group(feat, xyz, offset)


@pytest.mark.parametrize("op", ["ball_query", "random_ball_query"])
def test_radii_must_be_numbers_with_0_at_most_min_below_max(device, op):
    xyz, offset = cloud([4, 3], device)
    query = getattr(pc, op)
    for max_r, min_r in (
        (math.nan, 0.0),
        (0.5, math.nan),
        (0.1, 0.2),
        (0.2, 0.2),
        (0.5, -0.1),
        (0.5, math.inf),
    ):
        with pytest.raises(ValueError, match=f"{op} needs 0 <= min_radius < max_radius"):
            query(2, max_r, min_r, xyz, offset)
    for max_r, min_r in ((True, 0.0), ("0.5", 0.0), (0.5, None), (torch.tensor(0.5), 0.0)):
        with pytest.raises(TypeError, match=f"{op}'s (max|min)_radius must be a number"):
            query(2, max_r, min_r, xyz, offset)
    with pytest.raises(ValueError, match="ball_query needs 0 <= min_radius < max_radius"):
        pc.ball_query_and_group(torch.rand(7, 2, device=device), xyz, offset, max_radio=math.nan, nsample=2)


def test_an_infinite_ball_holds_every_point_of_the_cloud(device):
    xyz, offset = cloud([4, 3], device, torch.float64)
    idx, dist = pc.ball_query(8, math.inf, 0.0, xyz, offset)
    knn_idx, knn_dist = pc.knn_query(8, xyz, offset)
    assert torch.equal(idx, knn_idx) and torch.equal(dist, knn_dist)
    idx, _ = pc.random_ball_query(8, math.inf, 0.0, xyz, offset)
    assert torch.equal(idx.sort(1).values, knn_idx.sort(1).values)


@pytest.mark.parametrize(
    "dtype",
    [torch.float16, torch.bfloat16, torch.uint8, torch.int8, torch.int32, torch.int64, torch.bool],
    ids=str,
)
def test_unsupported_dtypes_of_the_points(device, dtype):
    xyz, offset = cloud([4, 3], device)
    xyz = xyz.to(dtype)
    if device == "cuda" and dtype in (torch.float16, torch.bfloat16):
        idx, _ = pc.knn_query(2, xyz, offset)
        assert (idx[:, 0].long().cpu() == torch.arange(7)).all()
        return
    for call in (
        lambda: pc.knn_query(2, xyz, offset),
        lambda: pc.ball_query(2, 0.5, 0.0, xyz, offset),
        lambda: pc.farthest_point_sampling(xyz, offset, offset),
    ):
        with pytest.raises(TypeError, match=f"xyz has dtype {dtype}"):
            call()


def test_points_of_the_wrong_shape_or_kind(device):
    xyz, offset = cloud([4, 3], device)
    with pytest.raises(ValueError, match=r"xyz must have shape \[n, 3\]"):
        pc.knn_query(2, xyz[:, :2], offset)
    with pytest.raises(ValueError, match=r"new_xyz must have shape \[n, 3\]"):
        pc.knn_query(2, xyz, offset, xyz[None], offset)
    with pytest.raises(TypeError, match="xyz must be a torch.Tensor"):
        pc.farthest_point_sampling(xyz.tolist(), offset, offset)
    with pytest.raises(ValueError, match="new_xyz .* must match xyz"):
        pc.knn_query(2, xyz, offset, xyz.double(), offset)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_coordinates_are_refused(device, value):
    xyz, offset = cloud([4, 3], device)
    bad = xyz.clone()
    bad[5, 2] = value
    cuda_words = "held nan, inf or a coordinate too large"
    for call, name in (
        (lambda: pc.knn_query(2, bad, offset), "xyz"),
        (lambda: pc.knn_query(2, xyz, offset, bad, offset), "query"),
        (lambda: pc.ball_query(2, 0.5, 0.0, xyz, offset, bad, offset), "query"),
        (lambda: pc.farthest_point_sampling(bad, offset, offset), "xyz"),
    ):
        with raises_bad_value(device, f"{name} contains a non-finite value", f"{name} {cuda_words}"):
            call()


# ---------------------------------------------------------------------------------------------
# grouping, interpolation and the Point Transformer helpers


def test_grouping_refuses_bad_indices_and_shapes(device):
    xyz, offset = cloud([4, 3], device)
    feat = torch.rand(7, 2, device=device)
    idx, _ = pc.knn_query(3, xyz, offset)
    for call in (lambda i: pc.grouping(i, feat, xyz), lambda i: pc.grouping2(feat, i)):
        for bad, words in ((7, "idx holds index 7|idx values must lie in -1..6"), (-2, "-2")):
            broken = idx.clone()
            broken[1, 1] = bad
            with raises_bad_value(device, words, "idx held a value outside its range"):
                call(broken)
        with pytest.raises(TypeError, match="idx must be an int32 or int64 tensor"):
            call(idx.float())
        with pytest.raises(ValueError, match=r"idx must have shape \[m, nsample\]"):
            call(idx[:, 0])
    with pytest.raises(TypeError, match="feat must be a torch.Tensor"):
        pc.grouping(idx, feat.tolist(), xyz)
    with pytest.raises(TypeError, match="input has dtype torch.int64"):
        pc.grouping2(feat.long(), idx)
    with pytest.raises(ValueError, match=r"xyz must have shape \[n, 3\] with n = 7"):
        pc.grouping(idx, feat, xyz[:5], with_xyz=True)
    with pytest.raises(ValueError, match=r"new_xyz must have shape \[m, 3\] with m = 7"):
        pc.grouping(idx, feat, xyz, xyz[:2], with_xyz=True)
    with pytest.raises(ValueError, match=r"xyz \(new_xyz is None\) must have shape \[m, 3\] with m = 2"):
        pc.grouping(idx[:2], feat, xyz, with_xyz=True)


def test_interpolation_refuses_mismatched_features(device):
    xyz, offset = cloud([4, 3], device)
    with pytest.raises(ValueError, match=r"feat must have shape \[n, c\] with n = 7"):
        pc.interpolation(xyz, xyz, torch.rand(5, 2, device=device), offset, offset)
    with pytest.raises(TypeError, match="feat has dtype torch.int64"):
        pc.interpolation(xyz, xyz, torch.ones(7, 2, dtype=torch.int64, device=device), offset, offset)


def test_interpolation_with_an_empty_cloud_gives_zeros(device):
    xyz, offset = cloud([4, 0], device, torch.float64)
    new_xyz, new_offset = cloud([2, 3], device, torch.float64, seed=2)
    feat = torch.rand(4, 3, dtype=torch.float64, device=device)
    out = pc.interpolation(xyz, new_xyz, feat, offset, new_offset)
    assert out[2:].abs().sum().item() == 0
    idx, dist = ref_knn_query(3, xyz, offset.cpu(), new_xyz, new_offset.cpu())
    w = 1.0 / (dist[:2] + 1e-8)
    expected = (feat.cpu().numpy()[idx[:2]] * (w / w.sum(1, keepdims=True))[..., None]).sum(1)
    np.testing.assert_allclose(out[:2].cpu().numpy(), expected, rtol=1e-9)


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_interpolation_short_clouds_and_bad_features_match_int64_indices(device, dtype, value, threads):
    # knn's int32 indices go to the row gather as they are: -1 (a cloud of fewer than k points)
    # and a non-finite feature row give what int64 indices give, forward and backward
    xyz, offset = cloud([2, 6], device, dtype)
    new_xyz, new_offset = cloud([3, 4], device, dtype, seed=3)
    feat = torch.rand(8, 5, dtype=dtype, device=device)
    feat[4, 1] = value
    feat.requires_grad_(True)
    out = pc.interpolation(xyz, new_xyz, feat, offset, new_offset)
    idx, dist = pc.knn_query(3, xyz, offset, new_xyz, new_offset)
    assert idx.dtype == torch.int32 and (idx[:3, 2] == -1).all()
    wanted = packed.interpolate(feat, idx.long(), pc._inverse_distance_weights(dist))
    grad_out = torch.rand(7, 5, dtype=dtype, device=device)
    (got_grad,) = torch.autograd.grad(out, feat, grad_out)
    (wanted_grad,) = torch.autograd.grad(wanted, feat, grad_out)
    torch.testing.assert_close(out, wanted, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(got_grad, wanted_grad, rtol=0, atol=0)
    uses_bad_row = (idx == 4).any(1)
    assert uses_bad_row.any()
    assert not torch.isfinite(out[uses_bad_row, 1]).any() and torch.isfinite(out[~uses_bad_row]).all()


def test_point_transformer_helpers_refuse_mismatched_shapes(device):
    n, s, c = 6, 2, 4
    x = torch.rand(n, c, device=device)
    idx = torch.zeros(n, s, dtype=torch.int64, device=device)
    with pytest.raises(TypeError, match="input2 must be a torch.Tensor"):
        pc.subtraction(x, x.tolist(), idx)
    with pytest.raises(ValueError, match=r"input2 must have shape \[m, c\] with c = 4"):
        pc.subtraction(x, torch.rand(n, 3, device=device), idx)
    with pytest.raises(ValueError, match=r"idx must have shape \[n, nsample\] with n = 6"):
        pc.subtraction(x, x, idx[:5])
    with raises_bad_value(device, "idx holds index 6|idx values must lie in -1..5", "idx held a value"):
        pc.subtraction(x, x, idx + 6)
    position, weight = torch.rand(n, s, c, device=device), torch.rand(n, s, 2, device=device)
    with pytest.raises(ValueError, match=r"position must have shape \[n, nsample, c\] = \[6, 2, 4\]"):
        pc.aggregation(x, position[:, :1], weight, idx)
    with pytest.raises(ValueError, match=r"weight must have shape \[n, nsample, w_c\]"):
        pc.aggregation(x, position, weight[:3], idx)
    for w_c in (0, 3):
        with pytest.raises(ValueError, match=f"multiple of weight's last dimension {w_c}"):
            pc.aggregation(x, position, torch.rand(n, s, w_c, device=device), idx)
    with pytest.raises(TypeError, match="position has dtype torch.int64"):
        pc.aggregation(x, position.long(), weight, idx)
    g = 2
    query, key, w = (
        torch.rand(n, g, c, device=device),
        torch.rand(n, g, c, device=device),
        torch.rand(c, device=device),
    )
    t, f = torch.tensor([0, 1, 5], device=device), torch.tensor([2, 2, 0], device=device)
    with pytest.raises(ValueError, match="index_target and index_refer must be 1-D of one length"):
        pc.attention_relation_step(query, key, w, t, f[:2])
    with pytest.raises(ValueError, match=r"weight must have shape \[c\] = \[4\]"):
        pc.attention_relation_step(query, key, w[:3], t, f)
    with pytest.raises(ValueError, match=r"key must have shape \[n, g, c\]"):
        pc.attention_relation_step(query, key[:, :1], w, t, f)
    with pytest.raises(ValueError, match=r"index_target values must lie in 0..5, got -1..5"):
        pc.attention_relation_step(query, key, w, torch.tensor([-1, 1, 5], device=device), f)
    with pytest.raises(ValueError, match=r"index_refer values must lie in 0..5, got 0..6"):
        pc.attention_fusion_step(
            torch.rand(3, g, device=device), key, t, torch.tensor([0, 6, 6], device=device)
        )
    with pytest.raises(ValueError, match=r"weight must have shape \[m, g\] = \[3, 2\]"):
        pc.attention_fusion_step(torch.rand(2, g, device=device), key, t, f)
    with pytest.raises(TypeError, match="query has dtype torch.int64"):
        pc.attention_relation_step(query.long(), key, w, t, f)
    rel = pc.attention_relation_step(query, key, w, t, f)
    ref = (query[t] * key[f] * w).sum(-1)
    torch.testing.assert_close(rel, ref)
