"""pointops.chamfer_distance against a plain cdist formulation (pytorch3d's semantics)."""

import pointops
import pytest
import torch


def ref_direction(x, x_len, y, y_len, norm, squared):
    """Per-point distance of each valid x point to its nearest valid y point (0 for padding)."""
    out = torch.zeros(x.shape[:2], dtype=x.dtype)
    for b in range(x.shape[0]):
        nx, ny = int(x_len[b]), int(y_len[b])
        if nx == 0 or ny == 0:
            continue
        d = torch.cdist(x[b, :nx], y[b, :ny], p=float(norm))
        best = d.min(1).values
        out[b, :nx] = best**2 if (norm == 2 and squared) else best
    return out


def clouds(device, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(3, 40, 3, generator=g, dtype=dtype).to(device)
    y = torch.rand(3, 30, 3, generator=g, dtype=dtype).to(device)
    xl, yl = torch.tensor([40, 25, 0], device=device), torch.tensor([30, 30, 12], device=device)
    return x, y, xl, yl


@pytest.mark.parametrize("norm,squared", [(2, True), (2, False), (1, False)])
@pytest.mark.parametrize("point_reduction", ["mean", "sum", "max"])
def test_values_match_cdist(norm, squared, point_reduction, device):
    x, y, xl, yl = clouds(device)
    loss, normals = pointops.chamfer_distance(
        x, y, xl, yl, norm=norm, squared=squared, point_reduction=point_reduction, batch_reduction=None
    )
    assert normals is None
    cx = ref_direction(x.cpu(), xl, y.cpu(), yl, norm, squared)
    cy = ref_direction(y.cpu(), yl, x.cpu(), xl, norm, squared)
    if point_reduction == "max":
        ref = torch.maximum(cx.max(1).values, cy.max(1).values)
    else:
        sx, sy = cx.sum(1), cy.sum(1)
        if point_reduction == "mean":
            sx, sy = sx / xl.cpu().clamp_min(1), sy / yl.cpu().clamp_min(1)
        ref = sx + sy
    assert torch.allclose(loss.cpu(), ref, rtol=1e-9, atol=1e-12)


def test_l1_picks_the_l1_nearest_point():
    # under L2 the nearest of x is y0; under L1 it is y1
    x = torch.tensor([[[0.0, 0.0, 0.0]]], dtype=torch.float64)
    y = torch.tensor([[[0.9, 0.9, 0.0], [1.5, 0.0, 0.0]]], dtype=torch.float64)
    l1, _ = pointops.chamfer_distance(x, y, norm=1, single_directional=True)
    l2, _ = pointops.chamfer_distance(x, y, norm=2, single_directional=True)
    assert float(l1) == pytest.approx(1.5) and float(l2) == pytest.approx(1.62)


def test_reductions_weights_single_direction_and_per_point():
    x, y, xl, yl = clouds("cpu")
    w = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    per = pointops.chamfer_distance(x, y, xl, yl, weights=w, batch_reduction=None)[0]
    assert torch.allclose(pointops.chamfer_distance(x, y, xl, yl, weights=w)[0], per.sum() / w.sum())
    assert torch.allclose(
        pointops.chamfer_distance(x, y, xl, yl, weights=w, batch_reduction="sum")[0], per.sum()
    )
    cx, cy = pointops.chamfer_distance(x, y, xl, yl, point_reduction=None, batch_reduction=None)[0]
    assert cx.shape == (3, 40) and cy.shape == (3, 30) and float(cx[1, 25:].abs().sum()) == 0
    one = pointops.chamfer_distance(x, y, xl, yl, single_directional=True, batch_reduction=None)[0]
    assert torch.allclose(one, cx.sum(1) / xl.clamp_min(1))


def test_gradients_match_cdist_autograd(device):
    x, y, xl, yl = clouds(device, seed=3)
    for norm in (1, 2):
        xa, ya = x.clone().requires_grad_(), y.clone().requires_grad_()
        pointops.chamfer_distance(xa, ya, xl, yl, norm=norm)[0].backward()
        xb, yb = x.cpu().clone().requires_grad_(), y.cpu().clone().requires_grad_()
        cx = ref_direction(xb, xl.cpu(), yb, yl.cpu(), norm, True)
        cy = ref_direction(yb, yl.cpu(), xb, xl.cpu(), norm, True)
        ((cx.sum(1) / xl.cpu().clamp_min(1) + cy.sum(1) / yl.cpu().clamp_min(1)).mean()).backward()
        assert torch.allclose(xa.grad.cpu(), xb.grad, atol=1e-10)
        assert torch.allclose(ya.grad.cpu(), yb.grad, atol=1e-10)


def test_normals_and_feature_dimension():
    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(2, 20, 6, generator=g), torch.rand(2, 15, 6, generator=g)
    loss, _ = pointops.chamfer_distance(x, y)
    ref = (
        ref_direction(x, [20, 20], y, [15, 15], 2, True).mean(1)
        + ref_direction(y, [15, 15], x, [20, 20], 2, True).mean(1)
    ).mean()
    assert torch.allclose(loss, ref, rtol=1e-5)
    p, q = torch.rand(1, 10, 3), torch.rand(1, 8, 3)
    n = torch.nn.functional.normalize(torch.rand(1, 10, 3), dim=-1)
    _, ln = pointops.chamfer_distance(p, q, x_normals=n, y_normals=-n[:, :8], abs_cosine=True)
    assert ln is not None and float(ln) >= 0


def test_errors_are_named():
    x = torch.rand(2, 5, 3)
    with pytest.raises(ValueError, match="norm=1"):
        pointops.chamfer_distance(x, x, norm=3)
    with pytest.raises(ValueError, match="batch_reduction must be None"):
        pointops.chamfer_distance(x, x, point_reduction=None)
    with pytest.raises(ValueError, match="squared=True applies to norm=2"):
        pointops.chamfer_distance(x, x, norm=1, squared=True)
    with pytest.raises(ValueError, match="x_lengths values"):
        pointops.chamfer_distance(x, x, x_lengths=torch.tensor([6, 1]))
