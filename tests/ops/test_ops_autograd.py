"""Gradients (gradcheck and against autograd of the references), determinism, opcheck and
torch.compile(fullgraph=True) for every operator."""

import ops_reference as ref
import pointops
import pytest
import torch
from ops_data import cloud


def _index(shape, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, n, shape, generator=g)


# --- gradcheck ----------------------------------------------------------------------------------


def test_gradcheck_gather_points(device):
    feat = torch.randn(2, 3, 6, dtype=torch.float64, device=device, requires_grad=True)
    idx = _index((2, 5), 6).to(device)
    assert torch.autograd.gradcheck(lambda f: pointops.gather_points(f, idx), (feat,))


def test_gradcheck_group_points_with_repeated_indices(device):
    feat = torch.randn(2, 3, 4, dtype=torch.float64, device=device, requires_grad=True)
    idx = _index((2, 5, 6), 4, seed=1).to(device)  # 30 slots over 4 points: many repeats
    assert torch.autograd.gradcheck(lambda f: pointops.group_points(f, idx), (feat,))


def test_gradcheck_three_interpolate_features_and_weights(device):
    feat = torch.randn(2, 4, 5, dtype=torch.float64, device=device, requires_grad=True)
    idx = _index((2, 7, 3), 5, seed=2).to(device)
    weight = torch.rand(2, 7, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda f, w: pointops.three_interpolate(f, idx, w), (feat, weight))


def test_three_interpolate_weight_gradient_is_not_zero(device):
    feat = torch.randn(1, 2, 4, dtype=torch.float64, device=device)
    idx = torch.tensor([[[0, 1, 2]]], device=device)
    weight = torch.rand(1, 1, 3, dtype=torch.float64, device=device, requires_grad=True)
    pointops.three_interpolate(feat, idx, weight).sum().backward()
    expected = feat[0, :, :3].sum(0)
    torch.testing.assert_close(weight.grad[0, 0], expected)


def test_gradcheck_knn_distances_both_point_sets(device):
    xyz = cloud("random", 2, 7).to(device).requires_grad_()
    q = cloud("random", 2, 4, seed=5).to(device).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: pointops.knn(a, b, 3)[0], (xyz, q))


def test_knn_gradient_matches_reference_with_missing_slots(device):
    xyz = cloud("random", 2, 5).to(device).requires_grad_()
    q = cloud("random", 2, 3, seed=6).to(device).requires_grad_()
    lengths = torch.tensor([5, 2], device=device)
    dist2, idx = pointops.knn(xyz, q, 4, lengths=lengths)
    grad = torch.rand_like(dist2)
    gx, gq = torch.autograd.grad(dist2, (xyz, q), grad)
    xr, qr = xyz.detach().clone().requires_grad_(), q.detach().clone().requires_grad_()
    d_ref = ref.knn_dist2_differentiable(xr, qr, idx)
    finite = idx >= 0
    ex, eq = torch.autograd.grad(d_ref[finite], (xr, qr), grad[finite])
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gq, eq)


def test_gradcheck_ball_query_distances(device):
    xyz = cloud("random", 1, 8).to(device).requires_grad_()
    q = cloud("random", 1, 3, seed=7).to(device).requires_grad_()
    fn = lambda a, b: pointops.ball_query(a, b, 0.7, 4, return_dist2=True)[2]  # noqa: E731
    assert torch.autograd.gradcheck(lambda a, b: torch.nan_to_num(fn(a, b), posinf=0.0), (xyz, q))


# --- determinism --------------------------------------------------------------------------------


def test_backward_is_deterministic_under_deterministic_algorithms(device):
    torch.manual_seed(0)
    feat = torch.randn(2, 8, 50, device=device, requires_grad=True)
    idx = torch.randint(0, 5, (2, 400, 3), device=device)  # heavy collisions on 5 points
    weight = torch.rand(2, 400, 3, device=device)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        grads = []
        for _ in range(3):
            feat.grad = None
            pointops.three_interpolate(feat, idx, weight).square().sum().backward()
            grads.append(feat.grad.clone())
    finally:
        torch.use_deterministic_algorithms(previous)
    assert all(torch.equal(grads[0], g) for g in grads[1:])


# --- opcheck ------------------------------------------------------------------------------------


def _opcheck_cases(device):
    xyz = cloud("random", 2, 9).to(device)
    q = cloud("random", 2, 4, seed=3).to(device)
    lengths = torch.tensor([9, 3], device=device)
    feat = torch.randn(2, 3, 9, dtype=torch.float64, device=device)
    idx = _index((2, 5, 3), 9).to(device)
    w = torch.rand(2, 5, 3, dtype=torch.float64, device=device)
    g = torch.randn(2, 3, 5, dtype=torch.float64, device=device)
    ops = torch.ops.pointops
    return [
        (ops.furthest_point_sample.default, (xyz, 4, lengths, 1)),
        (ops.ball_query.default, (xyz, q, 0.5, 3, lengths, None, True, True)),
        (ops.ball_query.default, (xyz, q, 0.5, 3, None, None, False, False)),
        (ops.knn.default, (xyz.clone().requires_grad_(), q.clone().requires_grad_(), 3, lengths, None)),
        (ops.gather.default, (feat.clone().requires_grad_(), idx, w.clone().requires_grad_())),
        (ops.gather.default, (feat.clone().requires_grad_(), idx[..., :1], None)),
        (ops.gather_backward_feat.default, (g, idx, w, 9)),
        (ops.gather_backward_weight.default, (g, feat, idx)),
        # the backward ops are differentiable too (double backward)
        (ops.gather_backward_feat.default, (g.clone().requires_grad_(), idx, w.clone().requires_grad_(), 9)),
        (
            ops.gather_backward_weight.default,
            (g.clone().requires_grad_(), feat.clone().requires_grad_(), idx),
        ),
    ]


@pytest.mark.parametrize("case", range(10))
def test_opcheck(device, case):
    op, args = _opcheck_cases(device)[case]
    torch.library.opcheck(op, args)


# --- torch.compile --------------------------------------------------------------------------------


def test_compile_fullgraph_every_op(device):
    torch._dynamo.reset()

    def pipeline(xyz, feat):
        centers_idx = pointops.furthest_point_sample(xyz, 4)
        centers = pointops.gather_points(xyz.transpose(1, 2), centers_idx).transpose(1, 2)
        ball_idx, count = pointops.ball_query(xyz, centers, 0.6, 5)
        grouped = pointops.group_points(feat, ball_idx)
        dist2, knn_idx = pointops.knn(xyz, centers, 3)
        d2, nn_idx = pointops.three_nn(xyz, centers)
        w = 1.0 / (d2 + 1e-8)
        w = w / w.sum(-1, keepdim=True)
        up = pointops.three_interpolate(grouped.mean(-1), nn_idx, w)
        return up.sum() + dist2.sum() + count.sum()

    xyz = cloud("random", 2, 16).to(device).requires_grad_()
    feat = torch.randn(2, 3, 16, dtype=torch.float64, device=device, requires_grad=True)
    eager = pipeline(xyz, feat)
    eager_grads = torch.autograd.grad(eager, (xyz, feat))
    compiled = torch.compile(pipeline, fullgraph=True)(xyz, feat)
    torch.testing.assert_close(compiled, eager)
    compiled_grads = torch.autograd.grad(compiled, (xyz, feat))
    for got, expected in zip(compiled_grads, eager_grads, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected)
    assert eager_grads[0].abs().sum() > 0  # distances (knn, three_nn weights) reach xyz
