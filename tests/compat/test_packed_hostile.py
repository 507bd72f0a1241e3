"""Hostile input to pointops.packed (issue 42): empty clouds, empty query clouds, clouds asked for
no samples, bad row pointers and layouts, nan/inf, every dtype, zero/negative/huge/bool/float
sizes, wrong devices, on 1 and 2 threads. Each gives a clear error naming the argument or the
answer of a brute-force numpy reference. On CUDA a bad value is reported by a later pointops
call or pointops.check_errors() (bad_values.raises_bad_value)."""

import math

import numpy as np
import pointops
import pytest
import torch
from bad_values import raises_bad_value
from pointops import packed

NOT_A_ROW_POINTER = "was not a row pointer"  # the CUDA checks' words


def points(rows, device, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(rows, 3, generator=g, dtype=torch.float64).to(device, dtype)


def row_pointer(counts, device):
    return torch.tensor([0, *np.cumsum(counts).tolist()], dtype=torch.int64, device=device)


# ---------------------------------------------------------------------------------------------
# brute-force references (numpy, float64)


def ref_fps(xyz, ptr, sample_ptr):
    xyz, ptr, sample_ptr = xyz.cpu().double().numpy(), ptr.tolist(), sample_ptr.tolist()
    out = np.full(sample_ptr[-1], -1, dtype=np.int64)
    for b in range(len(ptr) - 1):
        cloud, (s0, s1) = xyz[ptr[b] : ptr[b + 1]], sample_ptr[b : b + 2]
        picks = min(s1 - s0, len(cloud))
        if picks == 0:
            continue
        mind = np.full(len(cloud), np.inf)
        current = 0
        for s in range(picks):
            out[s0 + s] = ptr[b] + current
            d = cloud - cloud[current]
            mind = np.minimum(mind, (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2])
            current = int(np.argmax(mind))  # the lowest row among equals
    return out


def ref_knn(xyz, ptr, query, query_ptr, k):
    xyz, query = xyz.cpu().double().numpy(), query.cpu().double().numpy()
    ptr, query_ptr = ptr.tolist(), query_ptr.tolist()
    dist2 = np.full((len(query), k), np.inf)
    idx = np.full((len(query), k), -1, dtype=np.int64)
    for b in range(len(ptr) - 1):
        cloud = xyz[ptr[b] : ptr[b + 1]]
        for q in range(query_ptr[b], query_ptr[b + 1]):
            d2 = ((cloud - query[q]) ** 2).sum(1)
            order = np.lexsort((np.arange(len(cloud)), d2))[:k]
            dist2[q, : len(order)], idx[q, : len(order)] = d2[order], order + ptr[b]
    return dist2, idx


def ref_ball(xyz, ptr, query, query_ptr, radius, k):
    xyz, query = xyz.cpu().double().numpy(), query.cpu().double().numpy()
    ptr, query_ptr = ptr.tolist(), query_ptr.tolist()
    idx = np.full((len(query), k), -1, dtype=np.int64)
    count = np.zeros(len(query), dtype=np.int64)
    for b in range(len(ptr) - 1):
        cloud = xyz[ptr[b] : ptr[b + 1]]
        for q in range(query_ptr[b], query_ptr[b + 1]):
            hits = np.nonzero(((cloud - query[q]) ** 2).sum(1) <= radius * radius)[0][:k] + ptr[b]
            count[q] = len(hits)
            if len(hits):
                idx[q] = hits[0]
                idx[q, : len(hits)] = hits
    return idx, count


# ---------------------------------------------------------------------------------------------
# furthest point sampling: clouds asked for no samples, empty clouds (item 1 of issue 42)

FPS_CASES = [
    # (cloud sizes, samples per cloud)
    ([2, 0, 2], [1, 400, 0]),  # the last cloud asks for none: a write past the output
    ([3000, 5, 10], [500, 0, 3]),  # a cloud asking for none before the next one's slots
    ([3, 3], [2, 0]),  # Pointcept's new_offset = [2, 2]
    ([0, 4, 0, 6], [3, 0, 0, 6]),
    ([5, 5, 5], [0, 0, 0]),
    ([0, 0], [2, 1]),
    ([700, 1], [0, 1]),  # big enough for the kd-tree sampler on the auto path
]


@pytest.mark.parametrize(("counts", "samples"), FPS_CASES)
@pytest.mark.parametrize("path", ["auto", "brute", "kdtree"])
def test_fps_writes_only_the_slots_of_clouds_that_ask_for_samples(device, threads, counts, samples, path):
    if device == "cuda" and path != "auto":
        pytest.skip("the sampler paths are CPU kernels")
    xyz = points(sum(counts), device)
    ptr, sample_ptr = row_pointer(counts, device), row_pointer(samples, device)
    expected = ref_fps(xyz, ptr.cpu(), sample_ptr.cpu())
    with pointops._tuning.override(CPU_FPS_PATH=path):
        for _ in range(5):  # the writes past a cloud's slots raced with other threads
            picks = packed.furthest_point_sample(xyz, ptr, sample_ptr, max_points=max(max(counts), 1))
            assert picks.tolist() == expected.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fps_of_an_empty_batch_and_of_no_clouds(device, dtype):
    empty = torch.empty(0, 3, dtype=dtype, device=device)
    zero = torch.zeros(1, dtype=torch.int64, device=device)
    assert packed.furthest_point_sample(empty, zero, zero).shape == (0,)
    assert packed.furthest_point_sample(empty, zero, zero, num_samples=0).shape == (0,)
    two_empty = torch.zeros(3, dtype=torch.int64, device=device)
    assert packed.furthest_point_sample(empty, two_empty, two_empty).shape == (0,)
    picks = packed.furthest_point_sample(empty, two_empty, torch.tensor([0, 2, 3], device=device))
    assert picks.tolist() == [-1, -1, -1]


def test_fps_sizes_are_checked(device):
    xyz = points(5, device)
    ptr, sample_ptr = row_pointer([5], device), row_pointer([2], device)
    for bad in (-1, True, 2.0, "2"):
        with pytest.raises(ValueError, match="num_samples must be an int >= 0"):
            packed.furthest_point_sample(xyz, ptr, sample_ptr, num_samples=bad)
    for bad in (0, -3, True, 1.5):
        with pytest.raises(ValueError, match="max_points must be an int >= 1"):
            packed.furthest_point_sample(xyz, ptr, sample_ptr, max_points=bad)
    with pytest.raises(ValueError, match="allocating an output tensor"):
        packed.furthest_point_sample(xyz, ptr, row_pointer([2**50], device), num_samples=2**50)
    with pytest.raises(
        ValueError, match="sample_ptr ends at -1; a row pointer ends at the number of samples"
    ):
        packed.furthest_point_sample(xyz, ptr, torch.tensor([0, -1], device=device))
    # num_samples other than sample_ptr[-1]: the result would not fit the pointer
    with raises_bad_value(device, "sample_ptr ends at 2 but the output", NOT_A_ROW_POINTER):
        packed.furthest_point_sample(xyz, ptr, sample_ptr, num_samples=3)


def test_fps_refuses_clouds_above_max_points(device):
    xyz = points(7, device)
    ptr, sample_ptr = row_pointer([2, 5], device), row_pointer([1, 2], device)
    with raises_bad_value(device, "cloud 1 of ptr has 5 rows, more than max_points = 4", NOT_A_ROW_POINTER):
        packed.furthest_point_sample(xyz, ptr, sample_ptr, max_points=4)
    expected = ref_fps(xyz, ptr.cpu(), sample_ptr.cpu())
    assert packed.furthest_point_sample(xyz, ptr, sample_ptr, max_points=5).tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("sample_ptr", "cpu_words"),
    [
        ([0, 3, 2], "sample_ptr decreases at entry 2"),
        ([1, 2, 3], r"sample_ptr\[0\] = 1; a row pointer starts at 0"),
        ([-1, 2, 3], r"sample_ptr\[0\] = -1"),
    ],
)
def test_fps_refuses_bad_sample_pointers(device, sample_ptr, cpu_words):
    xyz = points(6, device)
    sample_ptr = torch.tensor(sample_ptr, device=device)
    with raises_bad_value(device, cpu_words, NOT_A_ROW_POINTER):
        packed.furthest_point_sample(xyz, row_pointer([3, 3], device), sample_ptr, num_samples=3)


# ---------------------------------------------------------------------------------------------
# kNN and ball query: empty clouds, empty query clouds, batches with nothing in them

NEIGHBOUR_CASES = [
    # (cloud sizes, query cloud sizes)
    ([0, 7, 0], [3, 0, 4]),  # queries of empty clouds, an empty query cloud
    ([5, 0], [0, 6]),
    ([0, 0, 0], [2, 2, 2]),
    ([4, 4, 4], [0, 0, 0]),
    ([0], [0]),
    ([600, 3, 0, 2], [300, 0, 5, 1]),  # big enough for the kd-trees on the auto path
]


@pytest.mark.parametrize(("counts", "query_counts"), NEIGHBOUR_CASES)
@pytest.mark.parametrize("path", ["auto", "brute", "kdtree"])
def test_knn_and_ball_query_with_empty_clouds_equal_the_reference(
    device, threads, counts, query_counts, path
):
    if device == "cuda" and path != "auto":
        pytest.skip("the search paths are CPU kernels")
    xyz, query = points(sum(counts), device, seed=1), points(sum(query_counts), device, seed=2)
    ptr, query_ptr = row_pointer(counts, device), row_pointer(query_counts, device)
    with pointops._tuning.override(CPU_NEIGHBORS_PATH=path):
        for k in (1, 3, 1000):
            dist2, idx = packed.knn(xyz, ptr, query, query_ptr, k)
            ref_dist2, ref_idx = ref_knn(xyz, ptr, query, query_ptr, k)
            assert idx.tolist() == ref_idx.tolist()
            np.testing.assert_allclose(dist2.cpu().numpy(), ref_dist2, rtol=1e-12)
            b_idx, b_count = packed.ball_query(xyz, ptr, query, query_ptr, 0.35, k)
            ref_b_idx, ref_count = ref_ball(xyz, ptr, query, query_ptr, 0.35, k)
            assert b_idx.tolist() == ref_b_idx.tolist() and b_count.tolist() == ref_count.tolist()


def test_three_nn_with_an_empty_known_cloud(device):
    unknown, known = points(4, device), points(3, device, seed=5)
    dist2, idx = packed.three_nn(unknown, row_pointer([2, 2], device), known, row_pointer([0, 3], device))
    ref_dist2, ref_idx = ref_knn(known, row_pointer([0, 3], "cpu"), unknown, row_pointer([2, 2], "cpu"), 3)
    assert idx.tolist() == ref_idx.tolist()
    np.testing.assert_allclose(dist2.cpu().numpy(), ref_dist2, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# sizes, numbers, dtypes and devices of the ops' arguments


def neighbour_calls(xyz, ptr, query, query_ptr):
    """Each neighbour op with k (and radius) as the caller's arguments."""
    return {
        "knn": lambda k: packed.knn(xyz, ptr, query, query_ptr, k),
        "ball_query": lambda k: packed.ball_query(xyz, ptr, query, query_ptr, 0.2, k),
    }


@pytest.mark.parametrize("op", ["knn", "ball_query"])
def test_k_must_be_a_positive_int(device, op):
    xyz, ptr = points(5, device), row_pointer([5], device)
    call = neighbour_calls(xyz, ptr, xyz, ptr)[op]
    for bad in (0, -1, -(2**63)):
        with pytest.raises(ValueError, match="k must be > 0"):
            call(bad)
    for bad in (True, 2.0, "3", None, torch.tensor(2)):
        with pytest.raises(TypeError, match="k must be an int"):
            call(bad)
    with pytest.raises(ValueError, match="allocating an output tensor"):
        call(2**60)  # more than memory holds: a clear error, not a raw allocator one
    assert call(4096)[0].shape == (5, 4096)  # more than the cloud: padded with -1 / +inf


def test_radius_must_be_a_finite_number_at_least_0(device):
    xyz, ptr = points(5, device), row_pointer([5], device)
    for bad in (-0.1, math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="radius must be finite and >= 0"):
            packed.ball_query(xyz, ptr, xyz, ptr, bad, 2)
    for bad in (True, "0.1", None):
        with pytest.raises(TypeError, match="radius must be a number"):
            packed.ball_query(xyz, ptr, xyz, ptr, bad, 2)
    idx, count = packed.ball_query(xyz, ptr, xyz, ptr, 0.0, 2)  # each point only finds itself
    assert count.tolist() == [1] * 5 and idx[:, 0].tolist() == list(range(5))
    idx, count = packed.ball_query(xyz, ptr, xyz, ptr, 1e300, 5)  # r^2 overflows: every point
    assert count.tolist() == [5] * 5 and idx.tolist() == [list(range(5))] * 5


ALL_DTYPES = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_of_the_points(device, dtype):
    counts = [6, 0, 5]
    xyz = points(11, device).to(dtype)
    ptr = row_pointer(counts, device)
    runs = (
        lambda: packed.knn(xyz, ptr, xyz, ptr, 2),
        lambda: packed.ball_query(xyz, ptr, xyz, ptr, 0.4, 2),
        lambda: packed.furthest_point_sample(xyz, ptr, row_pointer([2, 1, 3], device)),
    )
    supported = dtype in (torch.float32, torch.float64) or (
        device == "cuda" and dtype in (torch.float16, torch.bfloat16)
    )
    if not supported:
        for run in runs:
            with pytest.raises(TypeError, match=r"xyz has dtype .*; use float32"):
                run()
        return
    exact = dtype in (torch.float32, torch.float64)  # float16/bfloat16 (CUDA): rounded distances
    dist2, idx = runs[0]()
    ref_dist2, ref_idx = ref_knn(xyz.double(), ptr.cpu(), xyz.double(), ptr.cpu(), 2)
    assert (idx[:, 0].cpu() == torch.arange(11)).all()  # each point is its own nearest
    assert not exact or idx.tolist() == ref_idx.tolist()
    np.testing.assert_allclose(dist2.double().cpu().numpy(), ref_dist2, rtol=1e-2, atol=1e-2)
    b_idx, count = runs[1]()
    ref_b_idx, ref_count = ref_ball(xyz.double(), ptr.cpu(), xyz.double(), ptr.cpu(), 0.4, 2)
    assert (count >= 1).all() and (not exact or b_idx.tolist() == ref_b_idx.tolist())
    assert not exact or count.tolist() == ref_count.tolist()
    picks = runs[2]()
    assert picks[[0, 2]].tolist() == [0, -1] and picks[3].tolist() == 6


def test_query_must_match_the_points(device):
    xyz, ptr = points(4, device), row_pointer([4], device)
    with pytest.raises(TypeError, match="query has dtype torch.float32 but xyz has torch.float64"):
        packed.knn(xyz, ptr, xyz.float(), ptr, 1)
    with pytest.raises(ValueError, match=r"query must have shape \[P, 3\]"):
        packed.knn(xyz, ptr, xyz[:, :2], ptr, 1)
    with pytest.raises(ValueError, match=r"xyz must have shape \[P, 3\]"):
        packed.ball_query(xyz[None], ptr, xyz, ptr, 0.1, 1)
    with pytest.raises(TypeError, match="xyz must be a torch.Tensor"):
        packed.furthest_point_sample(xyz.tolist(), ptr, ptr)


@pytest.mark.gpu
def test_devices_must_match():
    if not (torch.cuda.is_available() and pointops.build_info()["cuda"]):
        pytest.skip("needs a GPU and a CUDA build")
    xyz, ptr = points(4, "cuda"), row_pointer([4], "cuda")
    with pytest.raises(ValueError, match="query is on cpu but xyz is on cuda"):
        packed.knn(xyz, ptr, xyz.cpu(), ptr, 1)
    with pytest.raises(ValueError, match="ptr is on cpu but xyz is on cuda"):
        packed.ball_query(xyz, ptr.cpu(), xyz, ptr, 0.1, 1)
    with pytest.raises(ValueError, match="sample_ptr is on cpu but xyz is on cuda"):
        packed.furthest_point_sample(xyz, ptr, ptr.cpu())
    with pytest.raises(ValueError, match="idx is on cpu but feat is on cuda"):
        packed.gather(xyz, torch.zeros(1, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="weight is on cpu but feat is on cuda"):
        packed.interpolate(xyz, torch.zeros(1, 1, dtype=torch.int64, device="cuda"), torch.ones(1, 1))


@pytest.mark.parametrize(
    ("ptr", "error", "words"),
    [
        (torch.tensor([0.0, 4.0]), TypeError, "ptr has dtype torch.float32; use int32 or int64"),
        (torch.tensor([0, 4], dtype=torch.int16), TypeError, "ptr has dtype torch.int16"),
        (torch.tensor([False, True]), TypeError, "ptr has dtype torch.bool"),
        (torch.tensor([[0, 4]]), ValueError, r"ptr must be a 1-D row pointer of B \+ 1 >= 1 entries"),
        (torch.tensor(4), ValueError, "ptr must be a 1-D row pointer"),
        (torch.empty(0, dtype=torch.int64), ValueError, "ptr must be a 1-D row pointer"),
        ([0, 4], TypeError, "ptr must be a torch.Tensor"),
    ],
)
def test_row_pointers_of_the_wrong_kind(device, ptr, error, words):
    xyz, good = points(4, device), row_pointer([4], device)
    if isinstance(ptr, torch.Tensor):
        ptr = ptr.to(device)
    with pytest.raises(error, match=words):
        packed.knn(xyz, ptr, xyz, good, 1)
    with pytest.raises(error, match=words.replace("ptr", "query_ptr", 1)):
        packed.ball_query(xyz, good, xyz, ptr, 0.1, 1)
    with pytest.raises(error, match=words):
        packed.furthest_point_sample(xyz, ptr, good)


def test_int32_row_pointers_give_the_int64_results(device):
    counts, query_counts = [6, 0, 9], [2, 3, 4]
    xyz, query = points(15, device), points(9, device, seed=3)
    ptr, query_ptr = row_pointer(counts, device), row_pointer(query_counts, device)
    for run in (
        lambda p, q: packed.knn(xyz, p, query, q, 4),
        lambda p, q: packed.ball_query(xyz, p, query, q, 0.5, 4),
        lambda p, q: (packed.furthest_point_sample(xyz, p, q),),
    ):
        for a, b in zip(run(ptr, query_ptr), run(ptr.int(), query_ptr.int()), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize(
    ("bad_ptr", "cpu_words"),
    [
        ([0, 5, 3, 9], "ptr decreases at entry 2"),
        ([2, 5, 7, 9], r"ptr\[0\] = 2; a row pointer starts at 0"),
        ([-1, 5, 7, 9], r"ptr\[0\] = -1"),
        ([0, 5, 7, 8], "ptr ends at 8 but xyz has 9 rows"),
        ([0, 5, 7, 2**40], "ptr ends at 1099511627776 but xyz has 9 rows"),
        ([0, 5, 7, 10], "ptr ends at 10 but xyz has 9 rows"),
    ],
)
def test_bad_row_pointers_are_refused(device, bad_ptr, cpu_words):
    xyz = points(9, device)
    bad = torch.tensor(bad_ptr, device=device)
    good = row_pointer([5, 2, 2], device)
    with raises_bad_value(device, cpu_words, NOT_A_ROW_POINTER):
        packed.knn(xyz, bad, xyz, good, 2)
    with raises_bad_value(
        device, cpu_words.replace("ptr", "query_ptr", 1).replace("xyz", "query"), NOT_A_ROW_POINTER
    ):
        packed.ball_query(xyz, good, xyz, bad, 0.3, 2)
    with raises_bad_value(device, cpu_words, NOT_A_ROW_POINTER):
        packed.furthest_point_sample(xyz, bad, row_pointer([1, 1, 1], device))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e300])
def test_non_finite_or_huge_coordinates_are_refused(device, value):
    xyz, ptr = points(6, device), row_pointer([3, 3], device)
    bad = xyz.clone()
    bad[4, 1] = value
    cuda_words = "held nan, inf or a coordinate too large"
    with raises_bad_value(device, "xyz (contains a non-finite|holds a coordinate)", "xyz " + cuda_words):
        packed.knn(bad, ptr, xyz, ptr, 2)
    with raises_bad_value(device, "query (contains a non-finite|holds a coordinate)", "query " + cuda_words):
        packed.ball_query(xyz, ptr, bad, ptr, 0.3, 2)
    with raises_bad_value(device, "xyz (contains a non-finite|holds a coordinate)", "xyz " + cuda_words):
        packed.furthest_point_sample(bad, ptr, row_pointer([2, 2], device))


def test_bad_values_are_refused_on_cpu_with_the_checks_off():
    # the binding checks values on CPU whatever the switch says: never a read out of bounds
    xyz, ptr = points(6, "cpu"), row_pointer([3, 3], "cpu")
    nan = xyz.clone()
    nan[0, 0] = math.nan
    with pointops.value_checks(False):
        with pytest.raises(ValueError, match="ptr decreases"):
            packed.knn(xyz, torch.tensor([0, 4, 3]), xyz, ptr, 1)
        with pytest.raises(ValueError, match="xyz contains a non-finite"):
            packed.furthest_point_sample(nan, ptr, ptr)
        with pytest.raises(ValueError, match="idx holds index 6"):
            packed.gather(xyz, torch.tensor([[6]]))


# ---------------------------------------------------------------------------------------------
# gather and interpolate


def test_gather_and_interpolate_with_bad_idx(device):
    feat = points(5, device)
    for bad, words in ((5, "idx holds index 5"), (-2, "idx holds index -2"), (2**40, "idx holds index")):
        idx = torch.tensor([[0, bad]], device=device)
        with raises_bad_value(device, words, "idx held a value outside its range"):
            packed.gather(feat, idx)
        with raises_bad_value(device, words, "idx held a value outside its range"):
            packed.interpolate(feat, idx, torch.ones(1, 2, dtype=feat.dtype, device=device))
    for dtype in (torch.float32, torch.int16, torch.uint8, torch.bool):
        with pytest.raises(TypeError, match=f"idx has dtype {dtype}; use int32 or int64"):
            packed.gather(feat, torch.zeros(1, 1, device=device).to(dtype))
    with pytest.raises(TypeError, match="idx must be a torch.Tensor"):
        packed.gather(feat, [[0]])


def test_gather_and_interpolate_with_bad_feat_and_weight(device):
    feat, idx = points(5, device), torch.tensor([[0, 3], [-1, 4]], device=device)
    weight = torch.ones(2, 2, dtype=feat.dtype, device=device)
    for bad in (torch.int64, torch.bool, torch.int32):
        with pytest.raises(TypeError, match=f"feat has dtype {bad}"):
            packed.gather(feat.to(bad), idx)
        with pytest.raises(TypeError, match=f"weight has dtype {bad}"):
            packed.interpolate(feat, idx, weight.to(bad))
    with pytest.raises(TypeError, match="weight has dtype torch.float32 but feat has torch.float64"):
        packed.interpolate(feat, idx, weight.float())
    with pytest.raises(ValueError, match=r"feat must have shape \[P, C\]"):
        packed.gather(feat[None], idx)
    with pytest.raises(ValueError, match="idx and weight must both have shape"):
        packed.interpolate(feat, idx, weight[:, :1])
    with pytest.raises(ValueError, match="idx and weight must both have shape"):
        packed.interpolate(feat, idx[0], weight[0])


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_features_and_weights_propagate_as_in_torch(device, value):
    # features and weights are values, not coordinates: nan/inf carry through like feat[idx]
    feat = points(4, device)
    feat[2, 1] = value
    idx = torch.tensor([[2, 0], [-1, 1], [3, 2]], device=device)
    weight = torch.tensor([[0.5, 2.0], [value, 1.0], [1.0, 0.0]], dtype=feat.dtype, device=device)
    f, i, w = feat.cpu().numpy(), idx.cpu().numpy(), weight.cpu().numpy()
    rows = np.where((i >= 0)[..., None], f[np.maximum(i, 0)], 0.0)
    np.testing.assert_array_equal(packed.gather(feat, idx).cpu().numpy(), rows)
    # an idx -1 slot contributes 0 whatever its weight
    with np.errstate(invalid="ignore"):
        expected = np.where((i >= 0)[..., None], rows * w[..., None], 0.0).sum(1)
    np.testing.assert_allclose(packed.interpolate(feat, idx, weight).cpu().numpy(), expected, rtol=1e-12)


def test_gather_of_empty_inputs(device):
    feat = points(0, device)
    assert packed.gather(feat, torch.full((2, 3), -1, device=device)).abs().sum() == 0
    assert packed.gather(points(3, device), torch.empty(0, 4, dtype=torch.int64, device=device)).shape == (
        0,
        4,
        3,
    )
    out = packed.interpolate(
        points(3, device),
        torch.empty(2, 0, dtype=torch.int64, device=device),
        torch.empty(2, 0, dtype=torch.float64, device=device),
    )
    assert out.tolist() == [[0.0, 0.0, 0.0]] * 2


# ---------------------------------------------------------------------------------------------
# layout helpers (items 5 and 9 of issue 42): on CPU a ValueError naming the argument; on CUDA no
# sync, and a result every op refuses


def assert_refused_by_an_op(device, ptr, cpu_words):
    """ptr, made by a layout helper from a bad input, is refused by the ops on CUDA."""
    if device != "cuda":
        return
    rows = max(int(ptr[-1].clamp_min(0)), 0)
    xyz = points(rows, device)
    with raises_bad_value(device, cpu_words, NOT_A_ROW_POINTER):
        packed.knn(xyz, ptr, xyz, ptr, 1)


@pytest.mark.parametrize(
    ("offset", "cpu_words"),
    [
        ([3, 1, 5], r"offset decreases at entry 1 \(3 -> 1\)"),
        ([-2, 4], r"offset\[0\] = -2 is negative"),
        ([4, 4, -1], "offset decreases at entry 2"),
    ],
)
def test_ptr_from_offset_refuses_bad_offsets(device, offset, cpu_words):
    offset = torch.tensor(offset, dtype=torch.int32, device=device)
    if device == "cpu":
        with pytest.raises(ValueError, match=cpu_words):
            packed.ptr_from_offset(offset)
        with pytest.raises(ValueError, match=cpu_words.replace("offset", "new_offset")):
            packed.ptr_from_offset(offset, name="new_offset")
        return
    ptr = packed.ptr_from_offset(offset)
    assert ptr[0].item() == -1
    assert_refused_by_an_op(device, ptr, cpu_words)


def test_offset_from_ptr_never_wraps(device):
    ptr = torch.tensor([0, 2**31 + 5], device=device)
    if device == "cpu":
        with pytest.raises(ValueError, match="ptr ends at 2147483653 rows, more than an int32 offset holds"):
            packed.offset_from_ptr(ptr)
    else:
        assert packed.offset_from_ptr(ptr).tolist() == [-1]
    last = torch.tensor([0, 5, 2**31 - 1], device=device)
    assert packed.offset_from_ptr(last).tolist() == [5, 2**31 - 1]


@pytest.mark.parametrize(
    ("ptr", "cpu_words"),
    [
        ([0, 5, 3], r"ptr decreases at entry 2 \(5 -> 3\)"),
        ([2, 5], r"ptr\[0\] = 2; a row pointer starts at 0"),
        ([-1, 5], r"ptr\[0\] = -1; a row pointer starts at 0 \(-1: it was built on CUDA"),
    ],
)
def test_converters_of_a_ptr_refuse_a_bad_one(device, ptr, cpu_words):
    ptr = torch.tensor(ptr, device=device)
    converters = (packed.offset_from_ptr, packed.counts_from_ptr, packed.batch_from_ptr)
    for convert in converters:
        if device == "cpu":
            with pytest.raises(ValueError, match=cpu_words):
                convert(ptr)
    if device == "cpu":
        return
    assert packed.offset_from_ptr(ptr)[0].item() == -1
    assert packed.counts_from_ptr(ptr)[0].item() == -1
    with pytest.raises(ValueError, match=cpu_words):  # the sync path (no total) checks at once
        packed.batch_from_ptr(ptr)
    total = max(ptr.tolist())
    assert packed.batch_from_ptr(ptr, total)[0].item() == -1  # no sync: refused later
    assert_refused_by_an_op(device, packed.ptr_from_offset(packed.offset_from_ptr(ptr)), "")


def test_empty_or_mistyped_layouts(device):
    for convert in (packed.offset_from_ptr, packed.counts_from_ptr, packed.batch_from_ptr):
        with pytest.raises(ValueError, match="ptr is empty; a row pointer has B"):
            convert(torch.empty(0, dtype=torch.int64, device=device))
        with pytest.raises(ValueError, match="ptr must be a 1-D int32 or int64 tensor"):
            convert(torch.tensor([0.0, 1.0], device=device))
        with pytest.raises(ValueError, match="ptr must be a 1-D int32 or int64 tensor"):
            convert(torch.zeros(1, 2, dtype=torch.int64, device=device))
        with pytest.raises(TypeError, match="ptr must be a torch.Tensor"):
            convert([0, 1])
    for convert, name in ((packed.ptr_from_offset, "offset"), (packed.ptr_from_counts, "counts")):
        with pytest.raises(ValueError, match=f"{name} must be a 1-D int32 or int64 tensor"):
            convert(torch.tensor([True], device=device))
        empty = torch.empty(0, dtype=torch.int32, device=device)
        assert convert(empty).tolist() == [0]  # no clouds
    zero = torch.zeros(1, dtype=torch.int64, device=device)
    assert packed.offset_from_ptr(zero).tolist() == [] and packed.counts_from_ptr(zero).tolist() == []
    assert packed.batch_from_ptr(zero).tolist() == [] and packed.batch_from_ptr(zero, 0).tolist() == []


@pytest.mark.parametrize(
    ("counts", "cpu_words"),
    [
        ([3, -1, 2], r"counts\[1\] = -1; point counts must be >= 0"),
        ([2**62, 2**62], r"counts sum past 2\^63 - 1 rows"),
        ([-(2**63)], r"counts\[0\] = -9223372036854775808"),
    ],
)
def test_ptr_from_counts_refuses_negative_counts_and_overflow(device, counts, cpu_words):
    counts = torch.tensor(counts, device=device)
    if device == "cpu":
        with pytest.raises(ValueError, match=cpu_words):
            packed.ptr_from_counts(counts)
        return
    ptr = packed.ptr_from_counts(counts)
    assert ptr[0].item() == -1
    assert_refused_by_an_op(device, ptr, cpu_words)


def test_batch_from_ptr_checks_total(device):
    ptr = torch.tensor([0, 2, 2, 5], device=device)
    assert packed.batch_from_ptr(ptr).tolist() == [0, 0, 2, 2, 2]
    assert packed.batch_from_ptr(ptr, 5).tolist() == [0, 0, 2, 2, 2]
    for bad in (-1, True, 2.5, "5"):
        with pytest.raises(ValueError, match="total must be an int >= 0"):
            packed.batch_from_ptr(ptr, bad)
    for total in (4, 6, 0):
        if device == "cpu":
            with pytest.raises(ValueError, match=f"total is {total} but ptr ends at 5"):
                packed.batch_from_ptr(ptr, total)
            continue
        batch = packed.batch_from_ptr(ptr, total)  # no sync, memory safe: refused later
        assert batch.shape == (total,) and (total == 0 or batch[0].item() == -1)
        if total:
            with pytest.raises(ValueError, match="batch must hold cloud ids >= 0"):
                packed.ptr_from_batch(batch)


@pytest.mark.parametrize(
    ("batch", "num_clouds", "cpu_words"),
    [
        ([0, 1, 0], None, "batch must hold cloud ids >= 0 in nondecreasing order"),
        ([-1, 0], None, "batch must hold cloud ids >= 0"),
        ([0, 0, 3], 2, "batch holds cloud id 3 but num_clouds is 2"),
        ([1, 0], 2, "batch must hold cloud ids >= 0 in nondecreasing order"),
    ],
)
def test_ptr_from_batch_refuses_unsorted_or_out_of_range_ids(device, batch, num_clouds, cpu_words):
    batch = torch.tensor(batch, device=device)
    if device == "cpu" or num_clouds is None:
        with pytest.raises(ValueError, match=cpu_words):
            packed.ptr_from_batch(batch, num_clouds)
        return
    ptr = packed.ptr_from_batch(batch, num_clouds)
    assert ptr[0].item() == -1
    assert_refused_by_an_op(device, ptr, cpu_words)


def test_ptr_from_batch_sizes(device):
    batch = torch.tensor([0, 0, 2], device=device)
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError, match="num_clouds must be an int >= 0"):
            packed.ptr_from_batch(batch, bad)
    assert packed.ptr_from_batch(batch).tolist() == [0, 2, 2, 3]
    assert packed.ptr_from_batch(batch, 4).tolist() == [0, 2, 2, 3, 3]
    assert packed.ptr_from_batch(batch[:0]).tolist() == [0]
    assert packed.ptr_from_batch(batch[:0], 2).tolist() == [0, 0, 0]


def test_converters_round_trip_with_empty_clouds(device):
    counts = torch.tensor([0, 3, 0, 0, 2, 0], device=device)
    ptr = packed.ptr_from_counts(counts)
    assert ptr.tolist() == [0, 0, 3, 3, 3, 5, 5]
    assert torch.equal(packed.counts_from_ptr(ptr), counts)
    assert torch.equal(packed.ptr_from_offset(packed.offset_from_ptr(ptr)), ptr)
    batch = packed.batch_from_ptr(ptr)
    assert batch.tolist() == [1, 1, 1, 4, 4]
    assert torch.equal(packed.ptr_from_batch(batch, num_clouds=6), ptr)
    assert torch.equal(packed.batch_from_ptr(ptr.int(), 5), batch)
