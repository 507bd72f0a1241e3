"""Hostile input for the pointnet2_ops drop-in (`pointops.compat.pointnet2_utils`): empty clouds
and zero sample counts, every dtype of every tensor argument, nan/inf, huge and bad radii,
mismatched shapes and devices, non-contiguous inputs, 1 and 2 threads, and gradients
(gradcheck in float64). Results are compared with brute-force references in float64."""

from __future__ import annotations

import math
import re

import pytest
import torch
from bad_values import raises_bad_value
from hostile_params import ALL_DTYPES, DEVICES
from pointops.compat import pointnet2_utils as pn2

FLOATS = {"cpu": [torch.float32, torch.float64], "cuda": [torch.float32, torch.float64, torch.float16]}
CUDA_BAD_COORDINATE = "held nan, inf or a coordinate too large"


@pytest.fixture(params=[False, True], ids=["contiguous", "channels_last"])
def layout(request, monkeypatch):
    """QueryAndGroup / GroupAll build their groups both ways (channels_last is CUDA's default)."""
    monkeypatch.setattr(pn2, "CHANNELS_LAST", request.param)
    return request.param


def clouds(device, dtype=torch.float32, B=2, N=9, M=4, C=3, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.rand(*shape, generator=g, dtype=torch.float64).to(dtype).to(device)

    return rand(B, N, 3), rand(B, M, 3), rand(B, C, N)


def indices(B, M, K, N, device, seed=0, missing=False):
    """int32 indices [B, M, K] into N points (-1 where N is 0, or in about 1 of 5 slots if missing)."""
    g = torch.Generator().manual_seed(seed)
    if N == 0:
        return torch.full((B, M, K), -1, dtype=torch.int32, device=device)
    idx = torch.randint(0, N, (B, M, K), generator=g, dtype=torch.int32)
    if missing:
        idx = torch.where(torch.rand(B, M, K, generator=g) < 0.2, -1, idx).to(torch.int32)
    return idx.to(device)


# ------------------------------------------------------------------------------------------
# brute-force references (float64 on CPU)


def ref_fps(xyz, npoint):
    xyz = xyz.cpu().double()
    B, N, _ = xyz.shape
    idx = torch.zeros(B, npoint, dtype=torch.int32)
    for b in range(B if N else 0):
        best = ((xyz[b] - xyz[b, 0]) ** 2).sum(1)
        for j in range(1, min(npoint, N)):
            idx[b, j] = int(best.argmax())
            best = torch.minimum(best, ((xyz[b] - xyz[b, idx[b, j]]) ** 2).sum(1))
    return idx


def ref_gather(features, idx):
    """features [B, C, N] at idx [B, ...] (-1: 0) -> [B, C, ...]."""
    features, idx = features.cpu().double(), idx.cpu().long()
    B, C, N = features.shape
    flat = idx.reshape(B, math.prod(idx.shape[1:]))
    if N == 0:
        out = torch.zeros(B, C, flat.shape[1], dtype=torch.float64)
    else:
        out = torch.gather(features, 2, flat.clamp_min(0)[:, None, :].expand(B, C, -1))
        out = torch.where(flat[:, None, :] >= 0, out, torch.zeros((), dtype=torch.float64))
    return out.reshape(B, C, *idx.shape[1:])


def r_squared(radius, dtype):
    if dtype == torch.float64:
        return radius * radius
    r = torch.tensor(radius, dtype=torch.float32)
    return float(r * r)


def ref_ball_query(radius, nsample, xyz, new_xyz):
    r2 = r_squared(radius, xyz.dtype)
    xyz, new_xyz = xyz.cpu().double(), new_xyz.cpu().double()
    B, M = new_xyz.shape[0], new_xyz.shape[1]
    idx = torch.zeros(B, M, nsample, dtype=torch.int32)  # an empty ball: all 0
    for b in range(B):
        for q in range(M):
            d2 = ((xyz[b] - new_xyz[b, q]) ** 2).sum(1)
            hits = [j for j in range(xyz.shape[1]) if float(d2[j]) < r2][:nsample]
            if hits:
                idx[b, q] = torch.tensor(hits + [hits[0]] * (nsample - len(hits)), dtype=torch.int32)
    return idx


def ref_three_nn(unknown, known):
    unknown, known = unknown.cpu().double(), known.cpu().double()
    B, n, m = unknown.shape[0], unknown.shape[1], known.shape[1]
    dist = torch.full((B, n, 3), math.inf, dtype=torch.float64)
    idx = torch.zeros(B, n, 3, dtype=torch.int32)
    for b in range(B):
        for i in range(n):
            d2 = ((known[b] - unknown[b, i]) ** 2).sum(1)
            for slot, j in enumerate(sorted(range(m), key=lambda j: (float(d2[j]), j))[:3]):
                dist[b, i, slot], idx[b, i, slot] = d2[j].sqrt(), j
    return dist, idx


def ref_three_interpolate(features, idx, weight):
    grouped = ref_gather(features, idx)  # [B, C, n, 3]
    w = torch.where(idx.cpu() >= 0, weight.cpu().double(), 0)
    return (grouped * w[:, None]).sum(-1)


def ref_query_and_group(radius, nsample, xyz, new_xyz, features, use_xyz):
    idx = ref_ball_query(radius, nsample, xyz, new_xyz)
    parts = []
    if use_xyz or features is None:
        grouped = ref_gather(xyz.transpose(1, 2), idx)
        parts.append(grouped - new_xyz.cpu().double().transpose(1, 2)[..., None])
    if features is not None:
        parts.append(ref_gather(features, idx))
    return torch.cat(parts, 1)


def assert_close(got, want, dtype):
    tol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 2e-2)
    assert got.dtype == dtype, (got.dtype, dtype)
    torch.testing.assert_close(got.cpu().double(), want, rtol=tol, atol=tol, equal_nan=True)


def assert_indices(got, want):
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), want), (got, want)


# ------------------------------------------------------------------------------------------
# results for every size, dtype and thread count

SIZES = {
    "plain": {},
    "B=0": {"B": 0},
    "N=0": {"N": 0},
    "M=0": {"M": 0},
    "C=0": {"C": 0},
    "N=1": {"N": 1},
    "M>N": {"N": 2, "M": 5},
}


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("device", DEVICES)
def test_every_function_matches_the_reference(device, sizes, threads, layout):
    for dtype in FLOATS[device]:
        xyz, new_xyz, features = clouds(device, dtype, seed=threads, **sizes)
        B, N, M, C = xyz.shape[0], xyz.shape[1], new_xyz.shape[1], features.shape[1]
        for npoint in (0, M):
            assert_indices(pn2.furthest_point_sample(xyz, npoint), ref_fps(xyz, npoint))
        idx = indices(B, M, 3, N, device, missing=True)
        assert_close(pn2.gather_operation(features, idx[..., 0]), ref_gather(features, idx[..., 0]), dtype)
        assert_close(pn2.grouping_operation(features, idx), ref_gather(features, idx), dtype)
        weight = torch.rand(B, M, 3, dtype=torch.float64).to(dtype).to(device)
        want = ref_three_interpolate(features, idx, weight)
        assert_close(pn2.three_interpolate(features, idx, weight), want, dtype)
        dist, nearest = pn2.three_nn(new_xyz, xyz)
        want_dist, want_idx = ref_three_nn(new_xyz, xyz)
        assert_close(dist, want_dist, dtype)
        assert_indices(nearest, want_idx)
        for nsample in (0, 1, 4):
            want = ref_ball_query(0.5, nsample, xyz, new_xyz)
            assert_indices(pn2.ball_query(0.5, nsample, xyz, new_xyz), want)
            for use_xyz, feats in ((True, features), (False, features), (True, None)):
                got = pn2.QueryAndGroup(0.5, nsample, use_xyz)(xyz, new_xyz, feats)
                assert got.shape == (B, 3 * use_xyz + C * (feats is not None), M, nsample)
                assert_close(got, ref_query_and_group(0.5, nsample, xyz, new_xyz, feats, use_xyz), dtype)
        everything = pn2.GroupAll()(xyz, None, features)
        assert_close(
            everything, torch.cat([xyz.transpose(1, 2), features], 1).unsqueeze(2).cpu().double(), dtype
        )


@pytest.mark.parametrize("device", DEVICES)
def test_larger_clouds_match_the_reference(device, threads):
    xyz, new_xyz, features = clouds(device, B=2, N=400, M=50, C=4, seed=5)
    assert_indices(pn2.furthest_point_sample(xyz, 50), ref_fps(xyz, 50))
    assert_indices(pn2.ball_query(0.2, 16, xyz, new_xyz), ref_ball_query(0.2, 16, xyz, new_xyz))
    dist, idx = pn2.three_nn(new_xyz, xyz)
    want_dist, want_idx = ref_three_nn(new_xyz, xyz)
    assert_indices(idx, want_idx)
    assert_close(dist, want_dist, torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_give_the_same_results(device, layout):
    xyz, new_xyz, features = clouds(device, N=11, M=5)
    idx = indices(2, 5, 3, 11, device)
    weight = torch.rand(2, 5, 3, device=device)

    def strided(t):
        return t.transpose(0, -1).contiguous().transpose(0, -1)

    def run(xyz, new_xyz, features, idx, weight):
        return (
            pn2.furthest_point_sample(xyz, 5),
            pn2.gather_operation(features, idx[..., 0]),
            pn2.grouping_operation(features, idx),
            pn2.three_interpolate(features, idx, weight),
            *pn2.three_nn(new_xyz, xyz),
            pn2.ball_query(0.4, 4, xyz, new_xyz),
            pn2.QueryAndGroup(0.4, 4)(xyz, new_xyz, features),
            pn2.GroupAll()(xyz, None, features),
        )

    plain = run(xyz, new_xyz, features, idx, weight)
    args = [strided(t) for t in (xyz, new_xyz, features, idx, weight)]
    assert not any(t.is_contiguous() for t in args)
    for a, b in zip(plain, run(*args), strict=True):
        assert torch.equal(a, b)


# ------------------------------------------------------------------------------------------
# sample counts and the radius


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (-1, ValueError, "must be >= 0, got -1"),
        (2.0, TypeError, "must be an int, got float"),
        (True, TypeError, "must be an int, got bool"),
        (None, TypeError, "must be an int, got NoneType"),
    ],
)
def test_sample_counts_are_ints_at_least_zero(bad, error, words):
    xyz, new_xyz, features = clouds("cpu")
    with pytest.raises(error, match=f"npoint {words}"):
        pn2.furthest_point_sample(xyz, bad)
    with pytest.raises(error, match=f"nsample {words}"):
        pn2.ball_query(0.5, bad, xyz, new_xyz)
    with pytest.raises(error, match=f"nsample {words}"):
        pn2.QueryAndGroup(0.5, bad)(xyz, new_xyz, features)


@pytest.mark.parametrize("radius", [1e20, 1e39, 1e200, math.inf])
@pytest.mark.parametrize("device", DEVICES)
def test_a_radius_whose_square_overflows_takes_every_point(device, radius, layout):
    for dtype in FLOATS[device]:
        big = 3e4 if dtype == torch.float16 else 1e18
        xyz = torch.tensor([[[0.0, 0, 0], [big, 0, 0], [-big, big, 0], [3.0, 4, 5]]], dtype=dtype).to(device)
        assert pn2.ball_query(radius, 6, xyz, xyz[:, :2]).tolist() == [[[0, 1, 2, 3, 0, 0]] * 2]
        grouped = pn2.QueryAndGroup(radius, 6, use_xyz=False)(xyz, xyz[:, :2], xyz.transpose(1, 2))
        assert torch.equal(grouped[0, :, 0, :4], xyz[0].T)


@pytest.mark.parametrize(
    "radius, error, words",
    [
        (-1.0, ValueError, "radius must be a number >= 0"),
        (-1e-30, ValueError, "radius must be a number >= 0"),
        (-math.inf, ValueError, "radius must be a number >= 0"),
        (math.nan, ValueError, "radius must be a number >= 0"),
        (None, TypeError, "radius must be a number, got NoneType"),
        (True, TypeError, "radius must be a number, got bool"),
        (torch.tensor(0.5), TypeError, "radius must be a number, got Tensor"),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_bad_radii_are_refused_for_every_dtype(device, radius, error, words, layout):
    for dtype in FLOATS[device]:
        xyz, new_xyz, features = clouds(device, dtype)
        with pytest.raises(error, match=words):
            pn2.ball_query(radius, 4, xyz, new_xyz)
        with pytest.raises(error, match=words):
            pn2.QueryAndGroup(radius, 4)(xyz, new_xyz, features)


# ------------------------------------------------------------------------------------------
# dtypes, types, shapes and devices of the tensor arguments


def _arguments(device):
    xyz, new_xyz, features = clouds(device)
    idx = indices(2, 4, 3, 9, device)
    return {
        "xyz": xyz,
        "new_xyz": new_xyz,
        "features": features,
        "idx": idx,
        "idx1": idx[..., 0].contiguous(),
        "weight": torch.rand(2, 4, 3, device=device),
    }


# test id -> (call with the argument under test replaced by `bad`, its name, the valid value's
# key in _arguments, the dtypes it takes, shapes it refuses). Taken: "index" int32/int64;
# "floats" every float of the device (the argument's dtype stands alone or carries over);
# "same" only the dtype of the other arguments (float32 here).
CASES = {
    "furthest_point_sample-xyz": (
        lambda a, bad: pn2.furthest_point_sample(bad, 3),
        "xyz",
        "xyz",
        "floats",
        [(9, 3), (2, 9, 2)],
    ),
    "gather_operation-features": (
        lambda a, bad: pn2.gather_operation(bad, a["idx1"]),
        "features",
        "features",
        "floats",
        [(3, 9), (3, 3, 9)],
    ),
    "gather_operation-idx": (
        lambda a, bad: pn2.gather_operation(a["features"], bad),
        "idx",
        "idx1",
        "index",
        [(4,), (3, 4), (2, 4, 1)],
    ),
    "grouping_operation-features": (
        lambda a, bad: pn2.grouping_operation(bad, a["idx"]),
        "features",
        "features",
        "floats",
        [(3, 9), (3, 3, 9)],
    ),
    "grouping_operation-idx": (
        lambda a, bad: pn2.grouping_operation(a["features"], bad),
        "idx",
        "idx",
        "index",
        [(4, 3), (3, 4, 3)],
    ),
    "three_interpolate-features": (
        lambda a, bad: pn2.three_interpolate(bad, a["idx"], a["weight"]),
        "features",
        "features",
        "same",
        [(3, 9), (3, 3, 9)],
    ),
    "three_interpolate-idx": (
        lambda a, bad: pn2.three_interpolate(a["features"], bad, a["weight"]),
        "idx",
        "idx",
        "index",
        [(4, 3), (3, 4, 3), (2, 4, 2)],
    ),
    "three_interpolate-weight": (
        lambda a, bad: pn2.three_interpolate(a["features"], a["idx"], bad),
        "weight",
        "weight",
        "same",
        [(4, 3), (2, 4, 2), (2, 5, 3)],
    ),
    "three_nn-unknown": (
        lambda a, bad: pn2.three_nn(bad, a["xyz"]),
        "unknown",
        "new_xyz",
        "same",
        [(4, 3), (3, 4, 3), (2, 4, 2)],
    ),
    "three_nn-known": (
        lambda a, bad: pn2.three_nn(a["new_xyz"], bad),
        "known",
        "xyz",
        "same",
        [(9, 3), (3, 9, 3), (2, 9, 4)],
    ),
    "ball_query-xyz": (
        lambda a, bad: pn2.ball_query(0.5, 3, bad, a["new_xyz"]),
        "xyz",
        "xyz",
        "same",
        [(9, 3), (3, 9, 3)],
    ),
    "ball_query-new_xyz": (
        lambda a, bad: pn2.ball_query(0.5, 3, a["xyz"], bad),
        "new_xyz",
        "new_xyz",
        "same",
        [(4, 3), (2, 4, 1)],
    ),
    "QueryAndGroup-xyz": (
        lambda a, bad: pn2.QueryAndGroup(0.5, 3)(bad, a["new_xyz"], a["features"]),
        "xyz",
        "xyz",
        "same",
        [(9, 3), (3, 9, 3), (2, 10, 3)],
    ),
    "QueryAndGroup-new_xyz": (
        lambda a, bad: pn2.QueryAndGroup(0.5, 3)(a["xyz"], bad, a["features"]),
        "new_xyz",
        "new_xyz",
        "same",
        [(4, 3), (3, 4, 3), (2, 4, 2)],
    ),
    "QueryAndGroup-features": (
        lambda a, bad: pn2.QueryAndGroup(0.5, 3)(a["xyz"], a["new_xyz"], bad),
        "features",
        "features",
        "floats",
        [(3, 9), (3, 3, 9), (2, 3, 8)],
    ),
    "GroupAll-xyz": (
        lambda a, bad: pn2.GroupAll()(bad, None, a["features"]),
        "xyz",
        "xyz",
        "floats",
        [(9, 3), (3, 9, 3), (2, 8, 3)],
    ),
    "GroupAll-features": (
        lambda a, bad: pn2.GroupAll()(a["xyz"], None, bad),
        "features",
        "features",
        "floats",
        [(3, 9), (3, 3, 9), (2, 3, 8)],
    ),
}
INTERNAL_NAMES = r"\bfeat\b|\bquery\b|\bk\b"  # the native API's names, not the caller's


def _takes(kind, dtype, device):
    if kind == "index":
        return dtype in (torch.int32, torch.int64)
    if kind == "floats":
        return dtype in FLOATS[device] or (device == "cuda" and dtype == torch.bfloat16)
    return dtype == torch.float32


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("device", DEVICES)
def test_every_dtype_of_every_tensor_argument(device, case, layout):
    run, name, key, kind, _ = case
    args = _arguments(device)
    for dtype in ALL_DTYPES:
        bad = args[key].to(dtype)
        if _takes(kind, dtype, device):
            run(args, bad)
            continue
        with pytest.raises(TypeError, match=rf"{name} has dtype|but {name} has") as info:
            run(args, bad)
        assert not re.search(INTERNAL_NAMES, str(info.value)), str(info.value)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("bad", [[[0.0, 0.0, 0.0]], 1.0, None], ids=["list", "float", "None"])
def test_arguments_that_are_not_tensors_are_refused(case, bad):
    run, name, *_ = case
    args = _arguments("cpu")
    if (
        bad is None
        and name == "features"
        and run in (CASES["QueryAndGroup-features"][0], CASES["GroupAll-features"][0])
    ):
        run(args, bad)  # optional there
        return
    with pytest.raises(TypeError, match=rf"pointops: {name} must be a torch\.Tensor"):
        run(args, bad)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("device", DEVICES)
def test_arguments_of_the_wrong_shape_are_refused(device, case, layout):
    run, name, key, _, shapes = case
    args = _arguments(device)
    for shape in shapes:
        bad = torch.zeros(shape, dtype=args[key].dtype, device=device)
        with pytest.raises(ValueError, match=r"must have shape|has batch size|must have the shape") as info:
            run(args, bad)
        assert not re.search(INTERNAL_NAMES, str(info.value)), str(info.value)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("device", DEVICES)
def test_arguments_on_another_device_are_refused(device, case, layout):
    run, name, key, *_ = case
    args = _arguments(device)
    bad = args[key].to("meta" if device == "cpu" else "cpu")
    if device == "cuda" and case is CASES["furthest_point_sample-xyz"]:
        run(args, bad)  # its only tensor: a plain CPU call
        return
    with pytest.raises(ValueError, match=r"is on device type 'meta'|is on cpu but|is on cuda:0 but") as info:
        run(args, bad)
    assert not re.search(INTERNAL_NAMES, str(info.value)), str(info.value)


# ------------------------------------------------------------------------------------------
# values: nan, inf and huge coordinates; indices out of range

COORDINATE_CALLS = {
    "furthest_point_sample-xyz": (lambda xyz, new_xyz: pn2.furthest_point_sample(xyz, 3), "xyz", 0),
    "ball_query-xyz": (lambda xyz, new_xyz: pn2.ball_query(0.5, 3, xyz, new_xyz), "xyz", 0),
    "ball_query-new_xyz": (lambda xyz, new_xyz: pn2.ball_query(0.5, 3, xyz, new_xyz), "new_xyz", 1),
    "three_nn-known": (lambda xyz, new_xyz: pn2.three_nn(new_xyz, xyz), "known", 0),
    "three_nn-unknown": (lambda xyz, new_xyz: pn2.three_nn(new_xyz, xyz), "unknown", 1),
    "QueryAndGroup-xyz": (lambda xyz, new_xyz: pn2.QueryAndGroup(0.5, 3)(xyz, new_xyz), "xyz", 0),
    "QueryAndGroup-new_xyz": (lambda xyz, new_xyz: pn2.QueryAndGroup(0.5, 3)(xyz, new_xyz), "new_xyz", 1),
}


@pytest.mark.parametrize("case", COORDINATE_CALLS.values(), ids=COORDINATE_CALLS.keys())
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e19], ids=["nan", "inf", "-inf", "1e19"])
@pytest.mark.parametrize("device", DEVICES)
def test_bad_coordinates_are_refused(device, case, value, layout):
    run, name, position = case
    points = list(clouds(device)[:2])
    points[position][-1, -1, 0] = value
    words = "contains nan or inf" if not math.isfinite(value) else r"holds a coordinate of magnitude 1e\+19"
    with raises_bad_value(device, rf"pointops: {name} {words}", CUDA_BAD_COORDINATE):
        run(*points)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_features_and_weights_propagate(device, value, layout):
    xyz, new_xyz, features = clouds(device)
    features.view(-1)[::4] = value
    idx = indices(2, 4, 3, 9, device)
    weight = torch.rand(2, 4, 3, device=device)
    assert_close(
        pn2.gather_operation(features, idx[..., 0]), ref_gather(features, idx[..., 0]), torch.float32
    )
    assert_close(pn2.grouping_operation(features, idx), ref_gather(features, idx), torch.float32)
    assert_close(
        pn2.three_interpolate(features, idx, weight),
        ref_three_interpolate(features, idx, weight),
        torch.float32,
    )
    clean = clouds(device)[2]
    weight.view(-1)[::5] = value
    assert_close(
        pn2.three_interpolate(clean, idx, weight), ref_three_interpolate(clean, idx, weight), torch.float32
    )
    want = ref_query_and_group(0.5, 4, xyz, new_xyz, features, True)
    assert_close(pn2.QueryAndGroup(0.5, 4)(xyz, new_xyz, features), want, torch.float32)
    want = torch.cat([xyz.transpose(1, 2), features], 1).unsqueeze(2).cpu().double()
    assert_close(pn2.GroupAll()(xyz, None, features), want, torch.float32)


@pytest.mark.parametrize("bad", [-2, 9], ids=["below", "above"])
@pytest.mark.parametrize("device", DEVICES)
def test_index_values_out_of_range_are_refused(device, bad):
    _, _, features = clouds(device)
    idx = indices(2, 4, 3, 9, device)
    idx[-1, -1, -1] = bad
    weight = torch.rand(2, 4, 3, device=device)
    for run in (
        lambda: pn2.gather_operation(features, idx[..., -1].contiguous()),
        lambda: pn2.grouping_operation(features, idx),
        lambda: pn2.three_interpolate(features, idx, weight),
    ):
        with raises_bad_value(device, r"idx values must lie in -1\.\.8", "idx"):
            run()


def test_features_must_fit_the_points():
    xyz, new_xyz, features = clouds("cpu")
    for bad in (features[:, :, :-1], features[:1]):
        for use_xyz in (True, False):
            with pytest.raises(ValueError, match=r"features must have shape \[B, C, N\] = \[2, C, 9\]"):
                pn2.QueryAndGroup(0.5, 3, use_xyz)(xyz, new_xyz, bad)
            with pytest.raises(ValueError, match=r"features must have shape \[B, C, N\] = \[2, C, 9\]"):
                pn2.GroupAll(use_xyz)(xyz, None, bad)


# ------------------------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_of_the_differentiable_functions(device, layout):
    xyz, new_xyz, features = clouds(device, torch.float64, N=7, M=3)
    idx = indices(2, 3, 3, 7, device, missing=True)
    weight = torch.rand(2, 3, 3, dtype=torch.float64, device=device)
    for t in (xyz, new_xyz, features, weight):
        t.requires_grad_()
    gradcheck = torch.autograd.gradcheck
    assert gradcheck(lambda f: pn2.gather_operation(f, idx[..., 0].contiguous()), (features,))
    assert gradcheck(lambda f: pn2.grouping_operation(f, idx), (features,))
    assert gradcheck(lambda f, w: pn2.three_interpolate(f, idx, w), (features, weight))
    for use_xyz in (True, False):
        group = pn2.QueryAndGroup(0.6, 4, use_xyz)
        assert gradcheck(lambda p, q, f, group=group: group(p, q, f), (xyz, new_xyz, features))
        assert gradcheck(lambda p, f, use_xyz=use_xyz: pn2.GroupAll(use_xyz)(p, None, f), (xyz, features))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_with_nothing_sampled_are_zero(device, layout):
    xyz, new_xyz, features = clouds(device, torch.float64)
    for t in (xyz, new_xyz, features):
        t.requires_grad_()
    empty_idx = torch.zeros(2, 0, 3, dtype=torch.int32, device=device)
    outputs = [
        pn2.grouping_operation(features, empty_idx),
        pn2.gather_operation(features, empty_idx[..., 0]),
        pn2.three_interpolate(features, empty_idx, torch.zeros(2, 0, 3, dtype=torch.float64, device=device)),
        pn2.QueryAndGroup(0.5, 0)(xyz, new_xyz, features),
        pn2.QueryAndGroup(0.5, 3)(xyz, new_xyz[:, :0], features),
    ]
    for out in outputs:
        assert out.numel() == 0
        grads = torch.autograd.grad(out.sum(), (features,), allow_unused=True)
        assert grads[0] is None or torch.equal(grads[0], torch.zeros_like(features))
    # a cloud with no points: the gradient has its (empty) shape
    empty = torch.rand(2, 3, 0, dtype=torch.float64, device=device, requires_grad=True)
    out = pn2.grouping_operation(empty, torch.full((2, 4, 2), -1, dtype=torch.int32, device=device))
    assert torch.equal(out, torch.zeros(2, 3, 4, 2, dtype=torch.float64, device=device))
    assert torch.autograd.grad(out.sum(), empty)[0].shape == (2, 3, 0)
