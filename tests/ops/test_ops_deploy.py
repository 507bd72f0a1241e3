"""Deployment patterns: torch.compile(fullgraph=True, dynamic=True) of a PointNet++-style module
that keeps its radius as a float attribute, and torch.jit.trace of a model with parameters,
saved and loaded with torch.jit.save / torch.jit.load."""

import warnings

import pointops
import pytest
import torch
from ops_data import cloud
from pointops.compat import pointnet2_utils as pn2
from torch import nn


class SetAbstraction(nn.Module):
    """A PointNet++ set abstraction: FPS centres, ball query, grouping of relative coordinates
    and features, a shared MLP and max pooling."""

    def __init__(self, npoint: int, radius: float, nsample: int, channels: int, out_channels: int):
        super().__init__()
        self.npoint, self.radius, self.nsample = npoint, radius, nsample
        self.mlp = nn.Sequential(nn.Conv2d(3 + channels, out_channels, 1), nn.ReLU())

    def forward(self, xyz, feat):
        centres_idx = pointops.furthest_point_sample(xyz, self.npoint)
        centres = pointops.gather_points(xyz.transpose(1, 2), centres_idx)  # [B, 3, npoint]
        ball_idx, _ = pointops.ball_query(xyz, centres.transpose(1, 2), self.radius, self.nsample)
        grouped_xyz = pointops.group_points(xyz.transpose(1, 2), ball_idx) - centres.unsqueeze(-1)
        grouped = torch.cat([grouped_xyz, pointops.group_points(feat, ball_idx)], dim=1)
        return centres.transpose(1, 2), self.mlp(grouped).amax(-1)


class FeaturePropagation(nn.Module):
    """Interpolates coarse features back onto the dense points (inverse squared distance)."""

    def __init__(self, channels: int, out_channels: int):
        super().__init__()
        self.mlp = nn.Conv1d(channels, out_channels, 1)

    def forward(self, xyz, centres, coarse):
        dist2, idx = pointops.three_nn(xyz, centres)
        weight = 1.0 / (dist2 + 1e-8)
        weight = weight / weight.sum(-1, keepdim=True)
        return self.mlp(pointops.three_interpolate(coarse, idx, weight))


class PointNet2Like(nn.Module):
    def __init__(self, radius: float = 0.4):
        super().__init__()
        self.embed = nn.Conv1d(3, 4, 1)
        self.sa = SetAbstraction(npoint=8, radius=radius, nsample=6, channels=4, out_channels=8)
        self.fp = FeaturePropagation(8, 5)
        self.knn_k = 3

    def forward(self, xyz):
        feat = self.embed(xyz.transpose(1, 2))
        centres, coarse = self.sa(xyz, feat)
        dense = self.fp(xyz, centres, coarse)
        dist2, _ = pointops.knn(centres, centres, self.knn_k)
        return dense, dist2


def _grads(model, xyz):
    model.zero_grad()
    xyz = xyz.detach().clone().requires_grad_(True)
    dense, dist2 = model(xyz)
    (dense.square().sum() + dist2.sum()).backward()
    return [xyz.grad] + [p.grad for p in model.parameters()]


def _assert_grads_close(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a is not None and b is not None
        torch.testing.assert_close(a, b)


def test_compile_fullgraph_dynamic_with_a_float_radius_attribute(device):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = PointNet2Like().to(device)
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for n in (32, 47):  # a second point count runs the same dynamic graph
        xyz = cloud("random", 2, n, dtype=torch.float32).to(device)
        expected = model(xyz)
        got = compiled(xyz)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b)
        _assert_grads_close(_grads(compiled, xyz), _grads(model, xyz))
    # a new radius gives the new radius' results (the graph is specialized on the value)
    model.sa.radius = 0.2
    xyz = cloud("random", 2, 40, dtype=torch.float32).to(device)
    for a, b in zip(compiled(xyz), model(xyz), strict=True):
        torch.testing.assert_close(a, b)


def test_compile_dynamic_bad_radius_is_still_refused(device):
    torch._dynamo.reset()
    model = PointNet2Like(radius=-1.0).to(device)
    xyz = cloud("random", 1, 16, dtype=torch.float32).to(device)
    with pytest.raises(Exception, match="radius must be finite and >= 0"):
        torch.compile(model, fullgraph=True, dynamic=True)(xyz)


def test_compile_dynamic_compat_query_and_group(device):
    torch._dynamo.reset()
    group = pn2.QueryAndGroup(0.3, 5)
    xyz = cloud("random", 2, 30, dtype=torch.float32).to(device)
    centres = xyz[:, :6].contiguous()
    feat = torch.randn(2, 4, 30, device=device)
    got = torch.compile(group, fullgraph=True, dynamic=True)(xyz, centres, feat)
    torch.testing.assert_close(got, group(xyz, centres, feat))


def test_jit_trace_save_load_gives_equal_results_and_gradients(tmp_path, device):
    torch.manual_seed(0)
    model = PointNet2Like().to(device)
    xyz = cloud("random", 2, 32, dtype=torch.float32).to(device)
    with warnings.catch_warnings(record=True) as caught:
        traced = torch.jit.trace(model, (xyz,))  # runs the sanity check (check_trace=True)
    assert not [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    path = tmp_path / "pointnet2_like.pt"
    torch.jit.save(traced, str(path))
    loaded = torch.jit.load(str(path), map_location=device)
    graph = str(loaded.graph) + "".join(str(m.graph) for m in loaded.modules())
    assert "pointops::gather" in graph and "PythonOp" not in graph
    other = cloud("random", 2, 32, dtype=torch.float32, seed=3).to(device)  # new data, same shapes
    for data in (xyz, other):
        expected = model(data)
        got = loaded(data)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b)
        _assert_grads_close(_grads(loaded, data), _grads(model, data))
