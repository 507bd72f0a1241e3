"""pointops.compat.pointnet2_utils against pointnet2_ops' documented conventions."""

import ops_reference as ref
import pointops
import pytest
import torch
from ops_data import cloud
from pointops.compat import pointnet2_utils as pn2


def pn2_r2(radius, dtype=torch.float32):
    """pointnet2_ops' r^2: the radius rounded to float32, squared in float32 (float64 inputs,
    which pointnet2_ops does not take, square in double)."""
    r = torch.tensor(radius, dtype=dtype)
    return r * r


def pn2_ball_query_model(radius, nsample, xyz, new_xyz):
    """pointnet2_ops semantics: first nsample points with d^2 < r^2, pad with the first hit,
    an empty ball gives all 0; int32."""
    B, M = new_xyz.shape[:2]
    out = torch.zeros(B, M, nsample, dtype=torch.int32)
    r2 = pn2_r2(radius, xyz.dtype)
    for b in range(B):
        for m in range(M):
            d = xyz[b] - new_xyz[b, m]
            d2 = d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2]
            hits = torch.nonzero(d2 < r2).flatten()[:nsample]
            if hits.numel():
                out[b, m] = hits[0]
                out[b, m, : hits.numel()] = hits
    return out


def test_ball_query_strict_radius_padding_and_empty_ball(device):
    xyz = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [0.5, 0, 0], [3, 3, 3]]])
    new_xyz = torch.tensor([[[0.0, 0, 0], [10, 10, 10]]])
    idx = pn2.ball_query(1.0, 3, xyz.to(device), new_xyz.to(device))
    assert idx.dtype == torch.int32
    # point 1 sits exactly on the radius: excluded by the strict test
    assert idx.cpu().tolist() == [[[0, 2, 0], [0, 0, 0]]]


@pytest.mark.parametrize("kind", ["random", "grid", "duplicates"])
def test_ball_query_matches_pointnet2_model(device, kind):
    xyz = cloud(kind, 2, 30, dtype=torch.float32)
    new_xyz = cloud(kind, 2, 7, dtype=torch.float32, seed=9)
    got = pn2.ball_query(0.4 if kind != "grid" else 1.0, 5, xyz.to(device), new_xyz.to(device))
    assert torch.equal(got.cpu(), pn2_ball_query_model(0.4 if kind != "grid" else 1.0, 5, xyz, new_xyz))


def _points_around_radius(radius, dtype, ulps=4):
    """Points (x, y, 0) whose d^2 to the origin (dx*dx + dy*dy + dz*dz in `dtype`, as the
    kernels compute it) lies within `ulps` ulps of r^2, with x the values of `dtype` nearest
    the radius and small y filling the gaps between their squares. Returns xyz [1, n, 3], d^2."""
    r = torch.tensor(radius, dtype=dtype)
    xs = [r]
    for _ in range(8):
        xs = (
            [torch.nextafter(xs[0], torch.tensor(0, dtype=dtype))]
            + xs
            + [torch.nextafter(xs[-1], torch.tensor(1e30, dtype=dtype))]
        )
    x = torch.stack(xs)[:, None].expand(-1, 65)
    y = (torch.arange(65, dtype=dtype) * 2.0**-16 * radius)[None, :].expand_as(x)
    xyz = torch.stack([x, y, torch.zeros_like(x)], dim=2).reshape(-1, 3)
    d2 = xyz[:, 0] * xyz[:, 0] + xyz[:, 1] * xyz[:, 1] + xyz[:, 2] * xyz[:, 2]
    r2 = r * r
    ulp = torch.nextafter(r2, torch.tensor(1e30, dtype=dtype)) - r2
    near = (d2 - r2).abs() <= ulps * ulp
    return xyz[near][None].contiguous(), d2[near]


@pytest.mark.parametrize("radius", [0.05, 0.1, 0.2, 0.3, 0.4, 0.8, 1 / 3, 1.7])
def test_ball_query_rounds_r2_as_pointnet2_ops(device, radius):
    # pointnet2_ops squares the float32 radius in float32; the native ops round r * r computed in
    # double. For r = 0.2 these are 0.040000003 and 0.039999999, and a point at d^2 between them
    # is in pointnet2_ops' ball (seen in Pointnet2_PyTorch's segmentation models on random data).
    xyz, d2 = _points_around_radius(radius, torch.float32)
    n = xyz.shape[1]
    idx = pn2.ball_query(radius, n, xyz.to(device), torch.zeros(1, 1, 3, device=device))
    inside = torch.nonzero(d2 < pn2_r2(radius)).flatten()
    expect = torch.full((n,), int(inside[0]), dtype=torch.int32)
    expect[: inside.numel()] = inside.to(torch.int32)
    assert idx.cpu()[0, 0].tolist() == expect.tolist()
    native_r2 = torch.tensor(radius * radius, dtype=torch.float64).float()
    if native_r2 != pn2_r2(radius):  # e.g. 0.2: then some points lie between the two
        assert bool(
            (
                (d2 >= torch.minimum(native_r2, pn2_r2(radius)))
                & (d2 < torch.maximum(native_r2, pn2_r2(radius)))
            ).any()
        )


def test_float32_rounding_matches_torch_on_ties_subnormals_and_overflow():
    # The compat layer rounds radii to float32 in plain Python (so that torch.compile can trace
    # it); torch's own double -> float32 conversion is the reference.
    gen = torch.Generator().manual_seed(0)
    mantissa = torch.rand(4000, generator=gen, dtype=torch.float64) + 0.5
    exponent = torch.randint(-160, 130, (4000,), generator=gen)
    values = (mantissa * torch.pow(2.0, exponent.double())).tolist()
    values += [(1 + (2 * k + 1) * 2.0**-24) * 2.0**e for k in range(64) for e in (-130, -20, 0, 60)]  # ties
    values += [
        0.0,
        -0.2,
        0.2,
        0.3,
        2.0**-149,
        2.0**-150,
        3 * 2.0**-151,
        2.0**-126,
        5e-324,
        3.4028235e38,
        3.4028235677973366e38,
        3.4028236e38,
        2.0**128,
        1e300,
        -1e300,
    ]
    got = torch.tensor([pn2._float32(v) for v in values], dtype=torch.float64)
    expected = torch.tensor(values, dtype=torch.float64).float().double()
    assert torch.equal(got, expected)


def test_ball_query_radius_rounding_holds_under_dynamic_compile():
    # QueryAndGroup keeps radius as a float attribute; dynamic=True makes it a symbolic float.
    torch._dynamo.reset()
    xyz, _ = _points_around_radius(0.2, torch.float32)
    centre = torch.zeros(1, 1, 3)
    group = pn2.QueryAndGroup(0.2, xyz.shape[1])
    compiled = torch.compile(group, fullgraph=True, dynamic=True)
    assert torch.equal(compiled(xyz, centre), group(xyz, centre))
    assert torch.equal(
        pn2.ball_query(0.2, xyz.shape[1], xyz, centre),
        torch.compile(pn2.ball_query, fullgraph=True, dynamic=True)(0.2, xyz.shape[1], xyz, centre),
    )


def test_ball_query_float64_squares_the_radius_in_double():
    xyz, d2 = _points_around_radius(0.2, torch.float64)
    idx = pn2.ball_query(0.2, xyz.shape[1], xyz, torch.zeros(1, 1, 3, dtype=torch.float64))
    inside = torch.nonzero(d2 < 0.2 * 0.2).flatten()
    assert 0 < inside.numel() < xyz.shape[1]
    assert idx[0, 0, : inside.numel()].tolist() == inside.tolist()
    assert set(idx[0, 0].tolist()) == set(inside.tolist())


def test_three_nn_returns_euclidean_distances_and_int32(device):
    known = cloud("random", 2, 6, dtype=torch.float32)
    unknown = cloud("random", 2, 4, dtype=torch.float32, seed=2)
    dist, idx = pn2.three_nn(unknown.to(device), known.to(device))
    dist2, idx64 = pointops.three_nn(unknown, known)
    assert idx.dtype == torch.int32 and torch.equal(idx.cpu().long(), idx64)
    torch.testing.assert_close(dist.cpu(), dist2.sqrt())
    dist, idx = pn2.three_nn(unknown.to(device), known[:, :2].to(device))
    assert (idx.cpu()[..., 2] == 0).all() and torch.isinf(dist.cpu()[..., 2]).all()


def test_fps_starts_at_zero_and_does_not_skip_the_origin(device):
    xyz = torch.tensor([[[0.0, 0, 0], [0.01, 0, 0], [1, 1, 1], [0.02, 0.0, 0.0]]])
    idx = pn2.furthest_point_sample(xyz.to(device), 3)
    assert idx.dtype == torch.int32
    # pointnet2_ops never picks points with |p|^2 <= 1e-3 (indices 1 and 3 here); we do
    assert idx.cpu().tolist() == [[0, 2, 3]]
    assert pn2.furthest_point_sample(xyz.to(device), 6).cpu().tolist() == [[0, 2, 3, 1, 0, 0]]


def test_gather_and_grouping_accept_int32(device):
    feat = torch.randn(2, 3, 8, device=device)
    idx = torch.randint(0, 8, (2, 5), dtype=torch.int32, device=device)
    torch.testing.assert_close(pn2.gather_operation(feat, idx), pointops.gather_points(feat, idx.long()))
    gidx = torch.randint(0, 8, (2, 5, 4), dtype=torch.int32, device=device)
    out = pn2.grouping_operation(feat, gidx)
    assert out.shape == (2, 3, 5, 4)
    torch.testing.assert_close(out[1, :, 2, 3], feat[1, :, gidx[1, 2, 3]])


def test_three_interpolate_has_a_weight_gradient(device):
    feat = torch.randn(1, 2, 5, device=device)
    idx = torch.tensor([[[0, 1, 2], [2, 3, 4]]], dtype=torch.int32, device=device)
    weight = torch.rand(1, 2, 3, device=device, requires_grad=True)
    pn2.three_interpolate(feat, idx, weight).sum().backward()
    assert weight.grad.abs().sum() > 0


def test_query_and_group_and_group_all(device):
    xyz = cloud("random", 2, 20, dtype=torch.float32).to(device)
    new_xyz = xyz[:, :4].clone()
    feat = torch.randn(2, 5, 20, device=device)
    out = pn2.QueryAndGroup(0.5, 6)(xyz, new_xyz, feat)
    assert out.shape == (2, 8, 4, 6)
    idx = pn2.ball_query(0.5, 6, xyz, new_xyz)
    expected_xyz = pn2.grouping_operation(xyz.transpose(1, 2).contiguous(), idx) - new_xyz.transpose(
        1, 2
    ).unsqueeze(-1)
    torch.testing.assert_close(out[:, :3], expected_xyz)
    torch.testing.assert_close(out[:, 3:], pn2.grouping_operation(feat, idx))
    # every centre is a point of the cloud, so its own relative position (0) is in its group
    assert (out[:, :3].abs().sum(1).min(-1).values == 0).all()
    assert pn2.QueryAndGroup(0.5, 6, use_xyz=False)(xyz, new_xyz, feat).shape == (2, 5, 4, 6)
    all_out = pn2.GroupAll()(xyz, None, feat)
    assert all_out.shape == (2, 8, 1, 20)
    torch.testing.assert_close(all_out[:, :3, 0], xyz.transpose(1, 2))
    assert pn2.GroupAll()(xyz).shape == (2, 3, 1, 20)


def _feature_propagation_with_coincident_points(device, three_nn, three_interpolate, gather, eps):
    """PointNet++ feature propagation where every coarse point is also a dense point (FPS picks
    them from the cloud): dense features interpolated by inverse-distance weights from the
    coarse ones. Returns the dense points' gradient and the weights' distances."""
    xyz = cloud("random", 2, 24, dtype=torch.float32).to(device).requires_grad_(True)
    centre_idx = pointops.furthest_point_sample(xyz.detach(), 6)
    centres = gather(xyz.transpose(1, 2).contiguous(), centre_idx).transpose(1, 2).contiguous()
    coarse_feat = torch.cat([centres.transpose(1, 2), centres.transpose(1, 2).square()], dim=1)
    dist, idx = three_nn(xyz, centres)
    dist_recip = 1.0 / (dist + eps)
    weight = dist_recip / dist_recip.sum(dim=2, keepdim=True)
    dense = three_interpolate(coarse_feat, idx, weight)
    (grad,) = torch.autograd.grad(dense.square().sum(), xyz)
    return grad, dist


def test_feature_propagation_gradient_is_finite_with_coincident_points(device):
    grad, dist = _feature_propagation_with_coincident_points(
        device, pn2.three_nn, pn2.three_interpolate, pn2.gather_operation, 1e-8
    )
    assert (dist == 0).any()  # the coarse points do coincide with dense ones
    assert not dist.requires_grad  # pointnet2_ops marks three_nn's outputs non-differentiable
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_native_three_nn_dist2_is_no_nan_trap_with_coincident_points(device):
    # The native API's squared distances have the gradient 2 (q - x), finite (0) where points
    # coincide, so the same weights built on dist2 keep every gradient finite; it equals the
    # gradient of the same formula in plain torch ops.
    grad, dist2 = _feature_propagation_with_coincident_points(
        device, pointops.three_nn, pointops.three_interpolate, pointops.gather_points, 1e-8
    )
    assert (dist2 == 0).any() and torch.isfinite(grad).all()

    def plain_three_nn(unknown, known):
        _, idx = pointops.three_nn(unknown.detach(), known.detach())
        return ref.knn_dist2_differentiable(known, unknown, idx), idx

    expected, _ = _feature_propagation_with_coincident_points(
        device, plain_three_nn, pointops.three_interpolate, pointops.gather_points, 1e-8
    )
    torch.testing.assert_close(grad, expected)


# --- QueryAndGroup / GroupAll in channels_last memory ---------------------------------------------


def _groups_both_layouts(monkeypatch, device, use_xyz, with_features, xyz_grad):
    """QueryAndGroup's output and gradients with the channels_last groups and without, on a
    batch with an empty ball and a short one."""
    g = torch.Generator().manual_seed(3)
    xyz = torch.rand(3, 40, 3, generator=g).to(device)
    centres = torch.cat([xyz[:, :5], torch.full((3, 1, 3), 4.0, device=device)], dim=1)  # last: empty
    feat = torch.randn(3, 6, 40, generator=g).to(device) if with_features else None
    weight = torch.randn(3, (3 if use_xyz else 0) + (6 if with_features else 0), 6, 8, generator=g).to(device)
    results = []
    for layout in (False, True):
        monkeypatch.setattr(pn2, "CHANNELS_LAST", layout)
        inputs = [xyz.clone().requires_grad_(xyz_grad), centres.clone().requires_grad_(True)]
        if with_features:
            inputs.append(feat.clone().requires_grad_(True))
        out = pn2.QueryAndGroup(0.25, 8, use_xyz=use_xyz)(*inputs)
        used = [t for t in inputs if t.requires_grad and (use_xyz or t is inputs[-1])]
        grads = torch.autograd.grad((out * weight).sum(), used)
        results.append((out, grads))
    return results


@pytest.mark.parametrize("use_xyz,with_features", [(True, True), (True, False), (False, True)])
def test_query_and_group_channels_last_gives_the_same_groups(monkeypatch, device, use_xyz, with_features):
    (plain, plain_grads), (cl, cl_grads) = _groups_both_layouts(
        monkeypatch, device, use_xyz, with_features, True
    )
    assert plain.is_contiguous() and cl.is_contiguous(memory_format=torch.channels_last)
    assert not cl.is_contiguous()
    assert cl.shape == plain.shape
    assert torch.equal(cl, plain)  # copies and one subtraction: the same bits
    # the empty ball (last centre) groups point 0 of its cloud, relative to the centre
    if use_xyz:
        assert torch.equal(cl[:, :3, 5, 0], plain[:, :3, 5, 0])
    for a, b in zip(cl_grads, plain_grads, strict=True):
        # feature gradients are the same deterministic sums; the centres' sums over the group
        # run over another memory order
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    if with_features:
        assert torch.equal(cl_grads[-1], plain_grads[-1])


def test_query_and_group_channels_last_by_default_on_cuda_only(monkeypatch, device):
    monkeypatch.setattr(pn2, "CHANNELS_LAST", None)
    xyz = torch.rand(2, 30, 3).to(device)
    feat = torch.randn(2, 4, 30).to(device)
    out = pn2.QueryAndGroup(0.3, 5)(xyz, xyz[:, :6].contiguous(), feat)
    grouped_all = pn2.GroupAll()(xyz, None, feat)
    on_cuda = device == "cuda"
    assert out.is_contiguous(memory_format=torch.channels_last) is on_cuda
    assert out.is_contiguous() is not on_cuda
    assert grouped_all.is_contiguous(memory_format=torch.channels_last) is on_cuda
    # features of another dtype keep the contiguous layout (they are concatenated with xyz)
    assert pn2.QueryAndGroup(0.3, 5)(xyz, xyz[:, :6].contiguous(), feat.double()).is_contiguous()


def test_group_all_channels_last_matches(monkeypatch, device):
    xyz = torch.rand(2, 9, 3).to(device).requires_grad_(True)
    feat = torch.randn(2, 4, 9).to(device).requires_grad_(True)
    outs = []
    for layout in (False, True):
        monkeypatch.setattr(pn2, "CHANNELS_LAST", layout)
        out = pn2.GroupAll()(xyz, None, feat)
        outs.append((out, torch.autograd.grad(out.square().sum(), (xyz, feat))))
    (plain, plain_grads), (cl, cl_grads) = outs
    assert cl.is_contiguous(memory_format=torch.channels_last) and torch.equal(cl, plain)
    for a, b in zip(cl_grads, plain_grads, strict=True):
        assert torch.equal(a, b)


def test_query_and_group_channels_last_refuses_mismatched_features(monkeypatch, device):
    monkeypatch.setattr(pn2, "CHANNELS_LAST", True)
    xyz = torch.rand(2, 30, 3).to(device)
    with pytest.raises(ValueError, match=r"features must have shape \[B, C, N\] = \[2, C, 30\]"):
        pn2.QueryAndGroup(0.3, 5)(xyz, xyz[:, :6], torch.randn(2, 4, 29).to(device))
    with pytest.raises(ValueError, match="needs features"):
        pn2.QueryAndGroup(0.3, 5, use_xyz=False)(xyz, xyz[:, :6])


def test_query_and_group_channels_last_in_a_cuda_graph(monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    monkeypatch.setattr(pn2, "CHANNELS_LAST", True)
    monkeypatch.setattr(pn2, "_CLOUD_STARTS", {})
    xyz = torch.rand(2, 64, 3, device="cuda")
    feat = torch.randn(2, 5, 64, device="cuda")
    group = pn2.QueryAndGroup(0.3, 8)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on another cloud size: the capture meets a new size
        group(xyz[:, :48], xyz[:, :16], feat[:, :, :48])
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = group(xyz, xyz[:, :16], feat)
    assert (xyz.device, 2, 64) not in pn2._CLOUD_STARTS  # nothing from the graph's pool is kept
    xyz.copy_(torch.rand(2, 64, 3, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    monkeypatch.setattr(pn2, "CHANNELS_LAST", False)
    assert torch.equal(out, group(xyz, xyz[:, :16], feat))


def test_channels_last_setting_from_the_environment(monkeypatch):
    for raw, expected in (("auto", None), ("", None), ("1", True), ("on", True), ("0", False), ("no", False)):
        monkeypatch.setenv("POINTOPS_PN2_CHANNELS_LAST", raw)
        assert pn2._channels_last_from_env() is expected
    monkeypatch.setenv("POINTOPS_PN2_CHANNELS_LAST", "sometimes")
    with pytest.warns(RuntimeWarning, match="POINTOPS_PN2_CHANNELS_LAST='sometimes' is not understood"):
        assert pn2._channels_last_from_env() is None
