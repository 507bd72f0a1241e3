"""pointnet2_ops.pointnet2_modules (the drop-in on pointops): upstream's layer structure and
state_dict keys, the layers' outputs against brute-force references in float64, output layouts,
gradients, and hostile input (bad sizes and radii, bad shapes, every dtype, nan/inf, empty
clouds and batches, npoint > N, nsample 0, devices, 1 and 2 threads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pointnet2_ops
import pytest
import torch
from bad_values import raises_bad_value
from hostile_params import ALL_DTYPES, DEVICES, HAS_CUDA
from pointnet2_dropin import DROPIN  # noqa: E402
from pointnet2_ops import pointnet2_modules, pointnet2_utils
from pointnet2_ops.pointnet2_modules import (
    PointnetFPModule,
    PointnetSAModule,
    PointnetSAModuleMSG,
    build_shared_mlp,
)
from pointops.compat import pointnet2_utils as compat
from torch import nn

CUDA_BAD_COORDINATE = "held nan, inf or a coordinate too large"


@pytest.fixture(autouse=True)
def full_float32_convolutions():
    """cuDNN's default TF32 convolutions round to 10 bits, and the layers' channels_last groups
    (CUDA) pick other algorithms than the references' contiguous ones: compare in full float32."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def cloud(device, B=2, N=40, C=3, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(B, N, 3, generator=g, dtype=torch.float64)
    features = torch.randn(B, C, N, generator=g, dtype=torch.float64)
    return xyz.to(device, dtype), features.to(device, dtype)


def msg_layer(device, C=3, use_xyz=True, npoint=8, bn=True):
    torch.manual_seed(0)
    layer = PointnetSAModuleMSG(npoint, [0.3, 0.6], [5, 9], [[C, 8, 16], [C, 8, 12]], bn=bn, use_xyz=use_xyz)
    return layer.to(device)


# --- brute-force references (float64) -----------------------------------------------------------


def fps_reference(xyz: torch.Tensor, npoint: int) -> torch.Tensor:
    """[N, 3] -> [npoint]: start at 0, then the point furthest from the picked ones."""
    picked, nearest = [0], ((xyz - xyz[0]) ** 2).sum(1)
    for _ in range(npoint - 1):
        picked.append(int(nearest.argmax()))
        nearest = torch.minimum(nearest, ((xyz - xyz[picked[-1]]) ** 2).sum(1))
    return torch.tensor(picked)


def ball_reference(xyz: torch.Tensor, centre: torch.Tensor, radius: float, nsample: int) -> torch.Tensor:
    """The first nsample points with d^2 < r^2, padded with the first hit (index 0 if none)."""
    hits = torch.nonzero(((xyz - centre) ** 2).sum(1) < radius * radius).flatten()[:nsample].tolist()
    hits = hits or [0]
    return torch.tensor(hits + [hits[0]] * (nsample - len(hits)))


def sa_reference(layer, xyz, features):
    """(new_xyz, new_features) of a set-abstraction layer: sampling and grouping by brute force,
    the layer's own shared MLPs on the groups, max over each group."""
    xyz64 = xyz.double().cpu()
    feats64 = None if features is None else features.double().cpu()
    B = xyz.shape[0]
    centres = torch.stack([fps_reference(xyz64[b], layer.npoint) for b in range(B)])
    new_xyz = torch.stack([xyz64[b, centres[b]] for b in range(B)])
    outputs = []
    for grouper, mlp in zip(layer.groupers, layer.mlps, strict=True):
        groups = []
        for b in range(B):
            balls = torch.stack(
                [ball_reference(xyz64[b], c, grouper.radius, grouper.nsample) for c in new_xyz[b]]
            )  # [npoint, nsample]
            parts = []
            if layer.use_xyz or feats64 is None:
                parts.append((xyz64[b][balls] - new_xyz[b][:, None]).permute(2, 0, 1))
            if feats64 is not None:
                parts.append(feats64[b][:, balls])
            groups.append(torch.cat(parts, 0))
        grouped = torch.stack(groups).to(xyz.device, xyz.dtype)
        outputs.append(mlp(grouped).amax(dim=3))
    return new_xyz, torch.cat(outputs, 1)


def fp_reference(layer, unknown, known, unknow_feats, known_feats):
    """Inverse-distance interpolation from the three nearest known points, by brute force."""
    d = torch.cdist(unknown.double().cpu(), known.double().cpu())  # [B, n, m]
    dist, idx = d.topk(min(3, known.shape[1]), dim=2, largest=False)
    recip = 1.0 / (dist + 1e-8)
    weight = recip / recip.sum(2, keepdim=True)
    kf = known_feats.double().cpu()
    interpolated = torch.stack(
        [(kf[b][:, idx[b]] * weight[b][None]).sum(2) for b in range(unknown.shape[0])]
    )  # [B, C2, n]
    if unknow_feats is not None:
        interpolated = torch.cat([interpolated, unknow_feats.double().cpu()], 1)
    return layer.mlp(interpolated.to(unknown.device, unknown.dtype).unsqueeze(-1)).squeeze(-1)


# --- upstream's structure -----------------------------------------------------------------------


def test_upstream_s_import_lines_work():
    import pointnet2_ops.pointnet2_modules as modules_alias
    import pointnet2_ops.pointnet2_utils as utils_alias

    assert modules_alias is pointnet2_modules and utils_alias is pointnet2_utils
    assert (
        pointnet2_ops.pointnet2_modules is pointnet2_modules
        and pointnet2_ops.pointnet2_utils is pointnet2_utils
    )
    assert pointnet2_ops.__version__.startswith("3.0.0.post")
    assert Path(pointnet2_ops.__file__).is_relative_to(DROPIN)  # the source tree's


@pytest.mark.parametrize(
    "name",
    [
        "furthest_point_sample",
        "gather_operation",
        "three_nn",
        "three_interpolate",
        "grouping_operation",
        "ball_query",
        "QueryAndGroup",
        "GroupAll",
    ],
)
def test_utils_are_pointops_compat(name):
    assert getattr(pointnet2_utils, name) is getattr(compat, name)


@pytest.mark.parametrize(
    "cls, function",
    [
        ("FurthestPointSampling", "furthest_point_sample"),
        ("GatherOperation", "gather_operation"),
        ("ThreeNN", "three_nn"),
        ("ThreeInterpolate", "three_interpolate"),
        ("GroupingOperation", "grouping_operation"),
        ("BallQuery", "ball_query"),
    ],
)
def test_upstream_s_function_classes_apply_the_functions(cls, function):
    assert getattr(pointnet2_utils, cls).apply is getattr(compat, function)
    xyz, _ = cloud("cpu")
    if cls == "FurthestPointSampling":
        assert torch.equal(
            pointnet2_utils.FurthestPointSampling.apply(xyz, 5), compat.furthest_point_sample(xyz, 5)
        )


@pytest.mark.parametrize("bn", [True, False])
def test_build_shared_mlp_is_conv_batchnorm_relu(bn):
    mlp = build_shared_mlp([4, 8, 16], bn=bn)
    per_layer = [nn.Conv2d, nn.BatchNorm2d, nn.ReLU] if bn else [nn.Conv2d, nn.ReLU]
    assert [type(m) for m in mlp] == per_layer * 2
    convs = [m for m in mlp if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size) for c in convs] == [
        (4, 8, (1, 1)),
        (8, 16, (1, 1)),
    ]
    assert all((c.bias is None) == bn for c in convs)  # a bias only without batch norm
    assert all(m.inplace for m in mlp if isinstance(m, nn.ReLU))
    assert len(build_shared_mlp([7])) == 0


def test_state_dict_keys_are_upstream_s():
    sa = PointnetSAModuleMSG(4, [0.1, 0.2], [3, 5], [[2, 8], [2, 6, 4]])
    fp = PointnetFPModule([5, 8], bn=False)
    batch_norm = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    # per scale: conv (no bias: batch norm follows), batch norm, relu; again for each width
    assert list(sa.state_dict()) == [
        "mlps.0.0.weight",
        *[f"mlps.0.1.{key}" for key in batch_norm],
        "mlps.1.0.weight",
        *[f"mlps.1.1.{key}" for key in batch_norm],
        "mlps.1.3.weight",
        *[f"mlps.1.4.{key}" for key in batch_norm],
    ]
    assert list(fp.state_dict()) == ["mlp.0.weight", "mlp.0.bias"]
    assert sa.npoint == 4 and [type(g).__name__ for g in sa.groupers] == ["QueryAndGroup"] * 2
    assert [(g.radius, g.nsample, g.use_xyz) for g in sa.groupers] == [(0.1, 3, True), (0.2, 5, True)]


@pytest.mark.parametrize("use_xyz, first_width", [(True, 5), (False, 2)])
def test_use_xyz_adds_three_input_channels_without_changing_the_caller_s_list(use_xyz, first_width):
    mlps = [[2, 8], [2, 4]]
    sa = PointnetSAModuleMSG(4, [0.1, 0.2], [3, 5], mlps, use_xyz=use_xyz)
    assert [m[0].in_channels for m in sa.mlps] == [first_width, first_width]
    assert mlps == [[2, 8], [2, 4]]  # upstream adds 3 to the caller's lists in place


def test_single_scale_and_group_all():
    sa = PointnetSAModule([3, 8], npoint=4, radius=0.2, nsample=6)
    assert sa.npoint == 4 and (sa.groupers[0].radius, sa.groupers[0].nsample) == (0.2, 6)
    group_all = PointnetSAModule([3, 8])
    assert group_all.npoint is None and type(group_all.groupers[0]).__name__ == "GroupAll"
    assert group_all.groupers[0].use_xyz


def test_numpy_sizes_are_taken():
    sa = PointnetSAModuleMSG(np.int64(4), [np.float32(0.25)], [np.int32(3)], [[np.int64(2), 8]])
    assert sa.npoint == 4 and type(sa.npoint) is int and sa.groupers[0].nsample == 3
    assert sa.groupers[0].radius == 0.25


def test_layers_call_the_utils_through_pointnet2_utils(monkeypatch):
    """As upstream's: patching pointnet2_ops.pointnet2_utils reaches the layers (the training
    harness records the calls this way)."""
    seen = []
    for name in ("furthest_point_sample", "gather_operation", "three_nn", "three_interpolate"):
        original = getattr(pointnet2_utils, name)

        def recorded(*args, _name=name, _original=original):
            seen.append(_name)
            return _original(*args)

        monkeypatch.setattr(pointnet2_utils, name, recorded)
    xyz, features = cloud("cpu")
    new_xyz, new_features = msg_layer("cpu")(xyz, features)
    PointnetFPModule([28 + 3, 8])(xyz, new_xyz, features, new_features)
    assert seen == ["furthest_point_sample", "gather_operation", "three_nn", "three_interpolate"]


# --- outputs against brute force ----------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_xyz", [True, False])
def test_msg_layer_matches_brute_force(device, use_xyz, threads):
    xyz, features = cloud(device)
    layer = msg_layer(device, use_xyz=use_xyz)
    new_xyz, new_features = layer(xyz, features)
    ref_xyz, ref_features = sa_reference(layer, xyz, features)
    assert new_xyz.shape == (2, 8, 3) and new_features.shape == (2, 16 + 12, 8)
    torch.testing.assert_close(new_xyz.cpu().double(), ref_xyz)
    torch.testing.assert_close(new_features, ref_features, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_layer_without_features_groups_relative_xyz(device):
    xyz, _ = cloud(device)
    layer = PointnetSAModule([0, 8, 16], npoint=6, radius=0.4, nsample=7).to(device)
    assert layer.mlps[0][0].in_channels == 3
    new_xyz, new_features = layer(xyz, None)
    torch.testing.assert_close(new_features, sa_reference(layer, xyz, None)[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_xyz", [True, False])
def test_group_all_pools_every_point(device, use_xyz):
    xyz, features = cloud(device)
    layer = PointnetSAModule([3, 8, 16], use_xyz=use_xyz).to(device)
    new_xyz, new_features = layer(xyz, features)
    assert new_xyz is None and new_features.shape == (2, 16, 1)
    grouped = torch.cat([xyz.transpose(1, 2), features], 1) if use_xyz else features  # absolute xyz
    expected = layer.mlps[0](grouped.unsqueeze(2)).amax(dim=3)
    torch.testing.assert_close(new_features, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_unknow_feats", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3, 17])
def test_fp_layer_matches_brute_force(device, with_unknow_feats, m, threads):
    unknown, unknow_feats = cloud(device, N=30, C=4, seed=1)
    known, known_feats = cloud(device, N=m, C=5, seed=2)
    unknow_feats = unknow_feats if with_unknow_feats else None
    torch.manual_seed(0)
    layer = PointnetFPModule([5 + (4 if with_unknow_feats else 0), 8, 6]).to(device)
    out = layer(unknown, known, unknow_feats, known_feats)
    assert out.shape == (2, 6, 30) and out.is_contiguous()
    expected = fp_reference(layer, unknown, known, unknow_feats, known_feats)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_fp_layer_without_known_points_gives_each_point_the_cloud_s_feature(device):
    """known=None: known_feats [B, C2, 1] reaches every unknown point (upstream raises a
    TypeError there: torch.Size + list)."""
    unknown, unknow_feats = cloud(device, N=10, C=2)
    global_feats = torch.randn(2, 4, 1, device=device)
    layer = PointnetFPModule([6, 8]).to(device)
    out = layer(unknown, None, unknow_feats, global_feats)
    expected = layer.mlp(torch.cat([global_feats.expand(2, 4, 10), unknow_feats], 1).unsqueeze(-1)).squeeze(
        -1
    )
    torch.testing.assert_close(out, expected)


def test_coincident_points_get_the_known_feature():
    """dist 0: weight 1 / 1e-8 dominates, as upstream's (no inf / inf)."""
    known, known_feats = cloud("cpu", N=5, C=2)
    layer = PointnetFPModule([2, 2], bn=False)
    with torch.no_grad():
        layer.mlp[0].weight.copy_(torch.eye(2).view(2, 2, 1, 1))
        layer.mlp[0].bias.zero_()
    out = layer(known, known, None, known_feats)
    torch.testing.assert_close(out, known_feats.clamp_min(0))  # the ReLU of the feature itself


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_outputs_are_contiguous_like_upstream_s(device, channels_last, monkeypatch):
    """Whatever layout QueryAndGroup's groups have (channels_last on CUDA by default), the layers
    return upstream's contiguous [B, C, npoint] features and [B, npoint, 3] centres."""
    monkeypatch.setattr(compat, "CHANNELS_LAST", channels_last)
    xyz, features = cloud(device)
    for layer in (msg_layer(device), PointnetSAModule([3, 8], npoint=5, radius=0.3, nsample=4).to(device)):
        new_xyz, new_features = layer(xyz, features)
        assert new_xyz.is_contiguous() and new_features.is_contiguous()
        new_features.view(2, -1)  # upstream's layout allows view across the channels


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_match_finite_differences(device):
    xyz, features = cloud(device, N=16, C=2, dtype=torch.float64)
    torch.manual_seed(0)
    sa = PointnetSAModuleMSG(4, [0.5, 0.9], [3, 6], [[2, 4], [2, 3]], bn=False).to(device).double()
    fp = PointnetFPModule([7 + 2, 3], bn=False).to(device).double()
    features.requires_grad_(True)

    def network(feats):
        new_xyz, new_features = sa(xyz, feats)
        return fp(xyz, new_xyz, feats, new_features)

    assert torch.autograd.gradcheck(network, (features,), eps=1e-6, atol=1e-5)


# --- hostile arguments --------------------------------------------------------------------------


def _msg(**changes):
    args = {"npoint": 4, "radii": [0.2], "nsamples": [3], "mlps": [[2, 8]]}
    args.update(changes)
    return lambda: PointnetSAModuleMSG(**args)


@pytest.mark.parametrize(
    "build, error, match",
    [
        (_msg(npoint=0), ValueError, r"npoint must be between 1 and 2\*\*31 - 1"),
        (_msg(npoint=-3), ValueError, "npoint must be between 1"),
        (_msg(npoint=2**31), ValueError, "npoint must be between 1 and 2"),
        (_msg(npoint=True), TypeError, "npoint must be an int, got a bool"),
        (_msg(npoint=2.0), TypeError, "npoint must be an int, got float"),
        (_msg(npoint="4"), TypeError, "npoint must be an int, got str"),
        (_msg(nsamples=[0]), ValueError, r"nsamples\[0\] must be between 1 and .*points per ball"),
        (_msg(nsamples=[-1]), ValueError, r"nsamples\[0\] must be between 1"),
        (_msg(nsamples=[2**40]), ValueError, r"nsamples\[0\] must be between 1 and 2\*\*31 - 1"),
        (_msg(nsamples=[None]), TypeError, r"nsamples\[0\] must be an int, got NoneType"),
        (_msg(radii=[-0.1]), ValueError, r"radii\[0\] must be >= 0"),
        (_msg(radii=[float("nan")]), ValueError, r"radii\[0\] must be >= 0 .*got nan"),
        (_msg(radii=[None]), TypeError, r"radii\[0\] must be a number, got NoneType"),
        (_msg(radii=["0.2"]), TypeError, r"radii\[0\] must be a number, got str"),
        (_msg(radii=[True]), TypeError, r"radii\[0\] must be a number, got bool"),
        (_msg(radii=[0.1, 0.2]), ValueError, "one entry per scale each, got 2, 1 and 1"),
        (_msg(radii=[], nsamples=[], mlps=[]), ValueError, "give at least one scale"),
        (_msg(radii=0.2), TypeError, "radii must be a list"),
        (_msg(mlps=[[]]), ValueError, r"mlps\[0\] is empty"),
        (_msg(mlps=[[2, 0]]), ValueError, r"mlps\[0\]\[1\] must be between 1"),
        (_msg(mlps=[[-1, 8]]), ValueError, r"mlps\[0\]\[0\] must be between 0"),
        (_msg(mlps=[[2, 8.5]]), TypeError, r"mlps\[0\]\[1\] must be an int, got float"),
        (_msg(mlps=["28"]), TypeError, r"mlps\[0\] must be a list of channel counts"),
        (_msg(mlps=[torch.tensor([2, 8])]), TypeError, r"mlps\[0\] must be a list of channel counts"),
        (
            _msg(radii=[0.1, 0.2], nsamples=[2, 3], mlps=[[2, 8], [3, 8]]),
            ValueError,
            r"mlps\[1\]\[0\] = 3 but mlps\[0\]\[0\] = 2",
        ),
        (
            lambda: PointnetSAModuleMSG(4, [0.2], [3], [[0, 8]], use_xyz=False),
            ValueError,
            "no input channels",
        ),
        (
            lambda: PointnetSAModule([2, 8], npoint=4),
            TypeError,
            "radii\\[0\\] must be a number, got NoneType",
        ),
        (lambda: build_shared_mlp([]), ValueError, "mlp_spec is empty"),
        (lambda: build_shared_mlp([0, 4]), ValueError, r"mlp_spec\[0\] must be between 1"),
        (lambda: build_shared_mlp(8), TypeError, "mlp_spec must be a list"),
        (lambda: PointnetFPModule([0, 4]), ValueError, r"mlp_spec\[0\] must be between 1"),
    ],
)
def test_bad_layer_arguments_are_refused(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_infinite_radius_takes_every_point():
    xyz, features = cloud("cpu", N=6)
    layer = PointnetSAModuleMSG(2, [float("inf")], [6], [[3, 4]])
    balls = compat.ball_query(layer.groupers[0].radius, 6, xyz, xyz[:, :2])
    assert sorted(balls[0, 0].tolist()) == list(range(6))
    layer(xyz, features)


# --- hostile inputs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "xyz, features, error, match",
    [
        ("points", None, TypeError, "xyz must be a tensor"),
        (torch.rand(40, 3), None, ValueError, r"xyz must have shape \[B, N, 3\], got \[40, 3\]"),
        (torch.rand(2, 40, 4), None, ValueError, r"xyz must have shape \[B, N, 3\], got \[2, 40, 4\]"),
        (torch.rand(2, 0, 3), torch.rand(2, 3, 0), ValueError, r"xyz is an empty cloud \(N = 0\)"),
        (torch.rand(2, 7, 3), torch.rand(2, 3, 7), ValueError, "npoint = 8 centres asked of clouds of N = 7"),
        (torch.rand(2, 40, 3), torch.rand(2, 3, 39), ValueError, r"\[B, C, N\] = \[2, C, 40\]"),
        (torch.rand(2, 40, 3), torch.rand(3, 3, 40), ValueError, r"\[B, C, N\] = \[2, C, 40\]"),
        (torch.rand(2, 40, 3), torch.rand(2, 40), ValueError, r"features must have shape \[B, C, N\]"),
        (torch.rand(2, 40, 3), np.zeros((2, 3, 40)), TypeError, "features must be a tensor"),
        (
            torch.rand(2, 40, 3),
            torch.rand(2, 4, 40),
            ValueError,
            "features has 4 channels but the layer was built for 3",
        ),
        (
            torch.rand(2, 40, 3),
            None,
            ValueError,
            r"features has None \(0 channels\) but the layer was built for 3",
        ),
    ],
)
def test_bad_set_abstraction_inputs_are_refused(xyz, features, error, match):
    with pytest.raises(error, match=match):
        msg_layer("cpu")(xyz, features)


def test_features_given_to_a_layer_built_without_them_are_refused():
    with pytest.raises(ValueError, match="features has 3 channels but the layer was built for 0"):
        PointnetSAModule([0, 8], npoint=4, radius=0.3, nsample=4)(*cloud("cpu"))


def test_no_input_at_all_is_refused():
    layer = PointnetSAModule([3, 8], npoint=4, radius=0.3, nsample=4, use_xyz=False)
    with pytest.raises(ValueError, match="features has None"):
        layer(cloud("cpu")[0], None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("which", ["xyz", "features"])
def test_every_dtype_of_every_input(device, dtype, which):
    """A float32 layer takes float32 inputs; anything else is a TypeError naming the input (the
    compat ops or the layer's check), never a torch error from inside a convolution."""
    xyz, features = cloud(device)
    inputs = {"xyz": xyz, "features": features}
    inputs[which] = inputs[which].to(dtype)
    layer = msg_layer(device)
    if dtype == torch.float32:
        assert layer(**inputs)[1].dtype == torch.float32
        return
    with pytest.raises(TypeError, match=rf"{which} (has dtype|must be a floating-point tensor)"):
        layer(**inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_a_layer_converted_to_another_float_dtype_runs_in_it(device, dtype):
    xyz, features = cloud(device, dtype=dtype)
    sa = msg_layer(device).to(dtype)
    fp = PointnetFPModule([28 + 3, 8]).to(device, dtype)
    if device == "cpu" and dtype != torch.float64:
        with pytest.raises(TypeError, match="float16/bfloat16 run on CUDA only"):
            sa(xyz, features)
        return
    new_xyz, new_features = sa(xyz, features)
    out = fp(xyz, new_xyz, features, new_features)
    assert out.dtype == dtype and bool(torch.isfinite(out).all())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_coordinates_are_refused(device, bad):
    xyz, features = cloud(device)
    xyz[1, 5, 2] = bad
    with raises_bad_value(device, "pointops: xyz contains nan or inf", CUDA_BAD_COORDINATE):
        msg_layer(device)(xyz, features)
    unknown, known = cloud(device, N=12)[0], cloud(device, N=5, seed=3)[0]
    layer = PointnetFPModule([3, 4]).to(device)
    unknown[0, 1, 0] = bad
    with raises_bad_value(device, "pointops: unknown contains nan or inf", CUDA_BAD_COORDINATE):
        layer(unknown, known, None, torch.randn(2, 3, 5, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_features_propagate(device, bad):
    """nan/inf in features go through the MLP as in any torch layer: the output shows them."""
    xyz, features = cloud(device)
    features[0, 1, 3] = bad
    _, new_features = msg_layer(device)(xyz, features)
    assert not bool(torch.isfinite(new_features).all())
    known_feats = torch.randn(2, 3, 8, device=device)
    known_feats[1, 0, 2] = bad
    out = PointnetFPModule([3, 4]).to(device)(xyz, xyz[:, :8].contiguous(), None, known_feats)
    assert not bool(torch.isfinite(out).all())


@pytest.mark.parametrize("device", DEVICES)
def test_group_all_takes_xyz_as_features(device):
    """The group-all layer runs no neighbour search: nan coordinates reach its output like nan
    features (checking them would cost a host sync on CUDA, which upstream does not have)."""
    xyz, features = cloud(device)
    xyz[0, 0, 0] = float("nan")
    _, out = PointnetSAModule([3, 8]).to(device)(xyz, features)
    assert bool(torch.isnan(out).any())


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((torch.rand(2, 0, 3), torch.rand(2, 4, 3), None, torch.rand(2, 3, 4)), ValueError, r"unknown is an empty cloud"),
        ((torch.rand(2, 6, 3), torch.rand(2, 0, 3), None, torch.rand(2, 3, 0)), ValueError, r"known is an empty cloud \(m = 0\)"),
        ((torch.rand(2, 6, 3), torch.rand(3, 4, 3), None, torch.rand(3, 3, 4)), ValueError, "known has 3 clouds but unknown has 2"),
        ((torch.rand(2, 6, 2), torch.rand(2, 4, 3), None, torch.rand(2, 3, 4)), ValueError, r"unknown must have shape \[B, N, 3\]"),
        ((torch.rand(2, 6, 3), "known", None, torch.rand(2, 3, 4)), TypeError, r"known must be a tensor"),
        ((torch.rand(2, 6, 3), torch.rand(2, 4, 3), None, torch.rand(2, 3, 5)), ValueError, r"known_feats must have shape \[B, C, N\] = \[2, C, 4\]"),
        ((torch.rand(2, 6, 3), None, None, torch.rand(2, 3, 4)), ValueError, r"known_feats must have shape \[B, C, N\] = \[2, C, 1\] \(known is None"),
        ((torch.rand(2, 6, 3), torch.rand(2, 4, 3), torch.rand(2, 1, 5), torch.rand(2, 2, 4)), ValueError, r"unknow_feats must have shape \[B, C, N\] = \[2, C, 6\]"),
        ((torch.rand(2, 6, 3), torch.rand(2, 4, 3), torch.rand(2, 1, 6), torch.rand(2, 3, 4)), ValueError, r"4 channels together but the layer was built for mlp\[0\] = 3"),
        ((torch.rand(2, 6, 3), torch.rand(2, 4, 3), None, torch.rand(2, 2, 4)), ValueError, r"2 channels together"),
        ((torch.rand(2, 6, 3), torch.rand(2, 4, 3), None, torch.rand(2, 3, 4).double()), TypeError, r"known_feats has dtype torch.float64 but the module's parameters are torch.float32"),
        ((torch.rand(2, 6, 3), torch.rand(2, 4, 3), None, torch.ones(2, 3, 4, dtype=torch.int64)), TypeError, r"known_feats must be a floating-point tensor"),
        ((torch.rand(2, 6, 3).int(), torch.rand(2, 4, 3), None, torch.rand(2, 3, 4)), TypeError, r"unknown must be a floating-point tensor"),
    ],
)  # fmt: skip
def test_bad_feature_propagation_inputs_are_refused(args, error, match):
    with pytest.raises(error, match=match):
        PointnetFPModule([3, 4])(*args)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batches_give_empty_outputs(device):
    xyz, features = cloud(device, B=0)
    new_xyz, new_features = msg_layer(device)(xyz, features)
    assert new_xyz.shape == (0, 8, 3) and new_features.shape == (0, 28, 8)
    out = PointnetFPModule([28 + 3, 8]).to(device)(xyz, new_xyz, features, new_features)
    assert out.shape == (0, 8, 40)


def test_inputs_on_another_device_than_the_layer_are_refused():
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device")
    xyz, features = cloud("cpu")
    with pytest.raises(ValueError, match="xyz is on cpu but the module's parameters are on cuda:0"):
        msg_layer("cuda")(xyz, features)
    with pytest.raises(ValueError, match="known_feats is on cuda:0 but the module's parameters are on cpu"):
        PointnetFPModule([3, 4])(xyz, xyz, None, features.cuda())


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_autocast_training_step_on_cuda():
    """Under torch.autocast the layers take float32 points with float16 features (each layer's
    output) and the interpolation weights follow the features' dtype."""
    xyz, features = cloud("cuda", N=64)
    sa1, sa2 = msg_layer("cuda"), PointnetSAModule([28, 16], npoint=4, radius=0.6, nsample=5).cuda()
    fp = PointnetFPModule([16 + 28, 8]).cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        xyz1, f1 = sa1(xyz, features)
        xyz2, f2 = sa2(xyz1, f1)
        out = fp(xyz1, xyz2, f1, f2)
    loss = out.float().square().mean()
    loss.backward()
    assert bool(torch.isfinite(loss))
    assert all(bool(torch.isfinite(p.grad).all()) for p in [*sa1.parameters(), *fp.parameters()])


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_interpolation_at_coincident_points_is_finite(dtype):
    """In float16 1e-8 vanishes: a distance of 0 would give the weight inf / inf = nan."""
    known, known_feats = cloud("cuda", N=5, C=2, dtype=dtype)
    layer = PointnetFPModule([2, 4]).to("cuda", dtype)
    out = layer(known, known, None, known_feats)
    assert bool(torch.isfinite(out).all())
