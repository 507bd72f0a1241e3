"""Hostile input for pointops.chamfer_distance: empty clouds on either side (values and
gradients), one value rule (nan / inf / huge coordinates) for every norm and dimension, every
dtype of every tensor argument, bad weights, lengths and options, errors that name the caller's
arguments, non-contiguous inputs, 1 and 2 threads, and gradcheck in float64. Results are
compared with a brute-force reference in float64."""

from __future__ import annotations

import math

import pointops
import pytest
import torch
import torch.nn.functional as F
from bad_values import raises_bad_value
from hostile_params import ALL_DTYPES, CUDA, DEVICES

# (norm, squared, D): the knn path (L2 in 3-D) and the exact searches (L1, other dimensions)
PATHS = [(2, True, 3), (2, False, 3), (1, False, 3), (2, True, 5), (1, False, 2)]
PATH_IDS = ["l2sq-3d", "l2-3d", "l1-3d", "l2sq-5d", "l1-2d"]
INTERNAL_NAMES = ("query", "xyz")


def clouds(device, N=3, P1=8, P2=6, D=3, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(N, P1, D, generator=g, dtype=torch.float64).to(dtype).to(device)
    y = torch.rand(N, P2, D, generator=g, dtype=torch.float64).to(dtype).to(device)
    return x, y


def ref_direction(x, xl, y, yl, norm, squared, xn=None, yn=None, abs_cosine=True):
    """Per-point terms [N, P1] (distance, normal term) of each valid x point to its nearest valid
    y point; 0 for padding and where the y cloud is empty. Differentiable (float64)."""
    N, P1 = x.shape[:2]
    cham = [[x.new_zeros(()) for _ in range(P1)] for _ in range(N)]
    normal = [[x.new_zeros(()) for _ in range(P1)] for _ in range(N)]
    for b in range(N):
        nx, ny = int(xl[b]), int(yl[b])
        if nx == 0 or ny == 0:
            continue
        diff = x[b, :nx, None, :] - y[b, None, :ny, :]
        d = diff.abs().sum(-1) if norm == 1 else (diff * diff).sum(-1)
        j = d.detach().argmin(1)
        best = d.gather(1, j[:, None])[:, 0]
        if norm == 2 and not squared:
            best = best.sqrt()
        for i in range(nx):
            cham[b][i] = best[i]
        if xn is not None:
            cos = F.cosine_similarity(xn[b, :nx], yn[b, j], dim=1, eps=1e-6)
            term = 1 - (cos.abs() if abs_cosine else cos)
            for i in range(nx):
                normal[b][i] = term[i]

    def stack(rows):
        if N == 0:
            return x.new_zeros(0, P1)
        return torch.stack([torch.stack(r) if r else x.new_zeros(0) for r in rows])

    return stack(cham), stack(normal)


def reference(
    x, y, xl, yl, norm, squared, point_reduction="mean", batch_reduction="mean", single=False, weights=None
):
    """chamfer_distance's loss from the per-point reference terms."""
    cx, _ = ref_direction(x, xl, y, yl, norm, squared)
    cy, _ = ref_direction(y, yl, x, xl, norm, squared)
    if weights is not None:
        cx, cy = cx * weights[:, None], cy * weights[:, None]
    if point_reduction is None:
        return cx if single else (cx, cy)
    if point_reduction == "max":
        mx = cx.amax(1) if cx.shape[1] else cx.sum(1)
        my = cy.amax(1) if cy.shape[1] else cy.sum(1)
        per = mx if single else torch.maximum(mx, my)
    else:
        sx, sy = cx.sum(1), cy.sum(1)
        if point_reduction == "mean":
            sx, sy = sx / xl.clamp_min(1), sy / yl.clamp_min(1)
        per = sx if single else sx + sy
    if batch_reduction is None:
        return per
    if batch_reduction == "sum":
        return per.sum()
    return per.sum() / (weights.sum() if weights is not None else max(per.shape[0], 1))


def _flatten(loss):
    return loss if isinstance(loss, torch.Tensor) else torch.cat([t.reshape(-1) for t in loss])


# ------------------------------------------------------------------------------------------
# empty clouds: values and gradients

EMPTY = {
    "x empty": dict(P1=0),
    "y empty": dict(P2=0),
    "both empty": dict(P1=0, P2=0),
    "no clouds": dict(N=0),
    "no clouds, no points": dict(N=0, P1=0),
    "zero lengths": dict(lengths=([0, 3, 8], [6, 0, 2])),
}
REDUCTIONS = [("mean", "mean"), ("sum", "sum"), ("max", None), (None, None), ("mean", None)]


@pytest.mark.parametrize("case", EMPTY.values(), ids=EMPTY.keys())
@pytest.mark.parametrize("norm, squared, D", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_empty_clouds_contribute_zero_with_zero_gradients(device, norm, squared, D, case, threads):
    case = dict(case)
    lengths = case.pop("lengths", None)
    x, y = clouds(device, D=D, **case)
    xl = torch.tensor(lengths[0]) if lengths else torch.full((x.shape[0],), x.shape[1])
    yl = torch.tensor(lengths[1]) if lengths else torch.full((y.shape[0],), y.shape[1])
    for point_reduction, batch_reduction in REDUCTIONS:
        for single in (False, True):
            xa, ya = x.clone().requires_grad_(), y.clone().requires_grad_()
            kwargs = dict(
                norm=norm,
                squared=squared,
                point_reduction=point_reduction,
                batch_reduction=batch_reduction,
                single_directional=single,
            )
            if lengths:
                kwargs.update(x_lengths=xl.to(device), y_lengths=yl.to(device))
            loss, normals = pointops.chamfer_distance(xa, ya, **kwargs)
            assert normals is None
            xb, yb = x.cpu().clone().requires_grad_(), y.cpu().clone().requires_grad_()
            want = reference(xb, yb, xl, yl, norm, squared, point_reduction, batch_reduction, single)
            got, want = _flatten(loss), _flatten(want)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-12, atol=1e-12)
            # the loss keeps the graph: gradients are tensors of the inputs' shapes (zeros where
            # nothing was matched), equal to the reference's
            weights = torch.rand(got.shape, dtype=torch.float64)
            gx, gy = torch.autograd.grad((got * weights.to(device)).sum(), (xa, ya), allow_unused=True)
            rx = ry = None
            if want.requires_grad:  # (not where the reference matched nothing)
                rx, ry = torch.autograd.grad((want * weights).sum(), (xb, yb), allow_unused=True)
            for g, r, t in ((gx, rx, x), (gy, ry, y)):
                r = torch.zeros(t.shape, dtype=torch.float64) if r is None else r
                assert g is not None and g.shape == t.shape
                torch.testing.assert_close(g.cpu(), r, rtol=1e-10, atol=1e-12)


def test_the_reviewed_case_one_side_empty():
    x, y = torch.rand(2, 0, 3), torch.rand(2, 5, 3)
    for norm in (1, 2):
        loss, _ = pointops.chamfer_distance(x, y, norm=norm)
        assert float(loss) == 0.0
    xa = torch.rand(2, 4, 3, requires_grad=True)
    loss, _ = pointops.chamfer_distance(xa, torch.rand(2, 0, 3))
    loss.backward()
    assert float(loss.detach()) == 0.0 and torch.equal(xa.grad, torch.zeros_like(xa))


@pytest.mark.parametrize("side", ["x", "y"])
def test_normals_with_an_empty_side(side):
    x, y = clouds("cpu")
    if side == "x":
        x = x[:, :0]
    else:
        y = y[:, :0]
    xn, yn = torch.rand_like(x, requires_grad=True), torch.rand_like(y, requires_grad=True)
    loss, loss_normals = pointops.chamfer_distance(x, y, x_normals=xn, y_normals=yn)
    assert float(loss) == 0.0 and float(loss_normals.detach()) == 0.0
    gx, gy = torch.autograd.grad(loss_normals, (xn, yn))
    assert torch.equal(gx, torch.zeros_like(xn)) and torch.equal(gy, torch.zeros_like(yn))


# ------------------------------------------------------------------------------------------
# one value rule for every path; errors name x and y


@pytest.mark.parametrize("where", ["valid point", "padding"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("side", ["x", "y"])
@pytest.mark.parametrize("norm, squared, D", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_coordinates_are_refused_on_every_path(device, norm, squared, D, side, value, where):
    x, y = clouds(device, D=D, dtype=torch.float32)
    lengths = (
        torch.tensor([x.shape[1] - 1] * 3, device=device),
        torch.tensor([y.shape[1] - 1] * 3, device=device),
    )
    target = x if side == "x" else y
    target[1, -1 if where == "padding" else 0, D - 1] = value
    with raises_bad_value(device, rf"^pointops: {side} contains nan or inf", r"nan|inf"):
        pointops.chamfer_distance(x, y, *lengths, norm=norm, squared=squared)


@pytest.mark.parametrize("norm, squared, D", PATHS, ids=PATH_IDS)
def test_errors_name_x_and_y(norm, squared, D):
    for side in ("x", "y"):
        x, y = clouds("cpu", D=D, dtype=torch.float32)
        (x if side == "x" else y)[0, 0, 0] = math.nan
        with pytest.raises(ValueError) as info:
            pointops.chamfer_distance(x, y, norm=norm, squared=squared)
        assert str(info.value).startswith(f"pointops: {side} ")
        assert not any(word in str(info.value) for word in INTERNAL_NAMES)


@pytest.mark.parametrize("D, value", [(3, 1e19), (5, 3e18), (13, 1.5e18)])
@pytest.mark.parametrize("norm", [1, 2])
@pytest.mark.parametrize("device", DEVICES)
def test_coordinates_too_large_for_finite_distances_are_refused(device, norm, D, value):
    for side in ("x", "y"):
        x, y = clouds(device, D=D, dtype=torch.float32)
        (x if side == "x" else y)[0, 0, 0] = -value
        cpu_words = rf"^pointops: {side} holds a coordinate of magnitude {value:.4g}".replace("+", r"\+")
        with raises_bad_value(device, cpu_words, "coordinate"):
            pointops.chamfer_distance(x, y, norm=norm)


@pytest.mark.parametrize("D", [3, 5, 12])
@pytest.mark.parametrize("device", DEVICES)
def test_coordinates_at_the_limit_give_finite_exact_distances(device, D):
    # the per-point distances stay finite (their sums over many points may not: that is float32)
    limit = pointops.coordinate_limit(torch.float32) / 2.0 ** math.ceil(max(0.0, math.log2(D / 3) / 2))
    x, y = clouds("cpu", D=D)
    x, y = (x * 2 - 1).sign() * limit, (y * 2 - 1).sign() * limit  # corners: the largest distances
    y[:, 0] = x[:, 0]
    full = torch.tensor([8] * 3), torch.tensor([6] * 3)
    for norm in (1, 2):
        got = pointops.chamfer_distance(
            x.float().to(device), y.float().to(device), norm=norm, point_reduction=None, batch_reduction=None
        )[0]
        want = reference(x, y, *full, norm, norm == 2, point_reduction=None, batch_reduction=None)
        for a, b in zip(got, want, strict=True):
            assert bool(torch.isfinite(a).all())
            torch.testing.assert_close(a.double().cpu(), b, rtol=1e-6, atol=0)


# ------------------------------------------------------------------------------------------
# dtypes, types, shapes and devices


@pytest.mark.parametrize("norm, squared, D", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_every_dtype_of_x_and_y(device, norm, squared, D):
    base_x, base_y = clouds(device, D=D)
    for dtype in ALL_DTYPES:
        x, y = base_x.to(dtype), base_y.to(dtype)
        if not dtype.is_floating_point:
            with pytest.raises(TypeError, match=rf"x must be a floating-point tensor, got {dtype}"):
                pointops.chamfer_distance(x, y, norm=norm, squared=squared)
            with pytest.raises(TypeError, match=rf"y must be a floating-point tensor, got {dtype}"):
                pointops.chamfer_distance(base_x, y, norm=norm, squared=squared)
            continue
        loss, _ = pointops.chamfer_distance(x, y, norm=norm, squared=squared)
        assert loss.dtype == dtype
        full = torch.tensor([8] * 3), torch.tensor([6] * 3)
        want = reference(x.double().cpu(), y.double().cpu(), *full, norm, squared)
        tol = 1e-12 if dtype == torch.float64 else (1e-5 if dtype == torch.float32 else 3e-2)
        torch.testing.assert_close(loss.double().cpu(), want, rtol=tol, atol=tol)
        other = torch.float32 if dtype != torch.float32 else torch.float64
        with pytest.raises(ValueError, match=r"y \(.*\) must match x"):
            pointops.chamfer_distance(x, y.to(other), norm=norm, squared=squared)


@pytest.mark.parametrize("device", DEVICES)
def test_every_dtype_of_normals_weights_and_lengths(device):
    x, y = clouds(device)
    for dtype in ALL_DTYPES:
        if dtype != torch.float64:
            with pytest.raises(TypeError, match=f"x_normals has dtype {dtype} but x has torch.float64"):
                pointops.chamfer_distance(x, y, x_normals=x.to(dtype), y_normals=y)
            with pytest.raises(TypeError, match=f"y_normals has dtype {dtype} but x has torch.float64"):
                pointops.chamfer_distance(x, y, x_normals=x, y_normals=y.to(dtype))
            with pytest.raises(TypeError, match=f"weights has dtype {dtype} but x has torch.float64"):
                pointops.chamfer_distance(x, y, weights=torch.ones(3, device=device).to(dtype))
        lengths = torch.tensor([8, 2, 0], device=device).to(dtype)
        if dtype in (torch.int32, torch.int64):
            pointops.chamfer_distance(x, y, x_lengths=lengths, y_lengths=lengths.clamp_max(6))
            continue
        with pytest.raises(TypeError, match=f"x_lengths must be int32 or int64, got {dtype}"):
            pointops.chamfer_distance(x, y, x_lengths=lengths)
        with pytest.raises(TypeError, match=f"y_lengths must be int32 or int64, got {dtype}"):
            pointops.chamfer_distance(x, y, y_lengths=lengths)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(x=[[[0.0, 0.0, 0.0]]]), TypeError, "x must be a tensor"),
        (dict(y=None), TypeError, "y must be a tensor"),
        (dict(x_normals=[0.0], y_normals=[0.0]), TypeError, "x_normals must be a tensor"),
        (dict(weights=[1.0, 1.0, 1.0]), TypeError, "weights must be a tensor"),
        (dict(x_lengths=[8, 8, 8]), ValueError, "x_lengths must be a tensor of shape"),
        (dict(x=torch.rand(3, 8)), ValueError, r"x must have shape \[N, P, D\]"),
        (dict(y=torch.rand(2, 6, 3, dtype=torch.float64)), ValueError, r"y must have shape \[3, P2, 3\]"),
        (dict(y=torch.rand(3, 6, 4, dtype=torch.float64)), ValueError, r"y must have shape \[3, P2, 3\]"),
        (dict(x_lengths=torch.tensor([9, 1, 1])), ValueError, r"x_lengths values must lie in 0\.\.8"),
        (dict(y_lengths=torch.tensor([-1, 1, 1])), ValueError, r"y_lengths values must lie in 0\.\.6"),
        (dict(x_lengths=torch.tensor([1, 1])), ValueError, r"x_lengths must be a tensor of shape \[3\]"),
        (dict(weights=torch.ones(2, dtype=torch.float64)), ValueError, r"weights must have shape \[3\]"),
        (
            dict(x_normals=torch.rand(3, 7, 3, dtype=torch.float64)),
            ValueError,
            "x_normals must have the shape",
        ),
        (dict(norm=3), ValueError, "norm=1"),
        (dict(norm=True), ValueError, "norm=1"),
        (dict(norm="2"), ValueError, "norm=1"),
        (dict(norm=1, squared=True), ValueError, "squared=True applies to norm=2"),
        (dict(point_reduction="median"), ValueError, "point_reduction must be"),
        (dict(batch_reduction="max"), ValueError, "batch_reduction must be"),
        (dict(point_reduction=None), ValueError, "batch_reduction must be None"),
        (dict(point_reduction="max", batch_reduction=None, x_normals=1), ValueError, "normals must be None"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, words):
    x, y = clouds("cpu")
    args = dict(x=x, y=y)
    args.update(kwargs)
    with pytest.raises(error, match=words):
        pointops.chamfer_distance(**args)


@pytest.mark.parametrize(
    "weights, words",
    [
        ([1.0, math.nan, 1.0], "weights contain nan or inf"),
        ([1.0, math.inf, 1.0], "weights contain nan or inf"),
        ([1.0, -math.inf, 1.0], "weights contain nan or inf"),
        ([1.0, -0.5, 1.0], "weights cannot be negative"),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_bad_weights_are_refused(device, weights, words):
    x, y = clouds(device)
    with pytest.raises(ValueError, match=words):
        pointops.chamfer_distance(x, y, weights=torch.tensor(weights, dtype=torch.float64, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_zero_weights_give_a_zero_loss_that_keeps_the_graph(device):
    x, y = clouds(device)
    x.requires_grad_()
    for batch_reduction in ("mean", "sum", None):
        loss, _ = pointops.chamfer_distance(
            x, y, weights=torch.zeros(3, dtype=torch.float64, device=device), batch_reduction=batch_reduction
        )
        assert not bool(loss.any())
        (grad,) = torch.autograd.grad(loss.sum(), x)
        assert torch.equal(grad, torch.zeros_like(x))


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("device", DEVICES)
def test_nan_normals_give_nan_normal_terms_only(device, value):
    x, y = clouds(device)
    xn, yn = torch.rand_like(x), torch.rand_like(y)
    xn[1, 2, 0] = value
    loss, loss_normals = pointops.chamfer_distance(x, y, x_normals=xn, y_normals=yn, batch_reduction=None)
    plain, _ = pointops.chamfer_distance(x, y, batch_reduction=None)
    assert torch.equal(loss, plain)
    assert math.isnan(float(loss_normals[1])) and bool(torch.isfinite(loss_normals[[0, 2]]).all())


@pytest.mark.parametrize("device", [CUDA])
def test_arguments_on_another_device_are_refused(device):
    x, y = clouds(device)
    cpu = dict(y=y.cpu(), x_normals=x.cpu(), weights=torch.ones(3, dtype=torch.float64))
    for name, value in cpu.items():
        kwargs = dict(
            y=y, x_normals=x if name == "x_normals" else None, y_normals=y if name == "x_normals" else None
        )
        kwargs[name] = value
        with pytest.raises(ValueError, match=rf"{name} .*(is on cpu|cpu.*must match)"):
            pointops.chamfer_distance(x, **kwargs)
    # lengths are moved to x's device
    loss, _ = pointops.chamfer_distance(x, y, x_lengths=torch.tensor([8, 1, 0]))
    assert loss.device == x.device


def test_meta_tensors_are_refused():
    x, y = clouds("cpu")
    with pytest.raises(ValueError, match="x is on device type 'meta'"):
        pointops.chamfer_distance(x.to("meta"), y.to("meta"))


# ------------------------------------------------------------------------------------------
# layouts, threads and gradients


@pytest.mark.parametrize("norm, squared, D", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_and_threads_give_the_reference(device, norm, squared, D, threads):
    x, y = clouds(device, P1=40, P2=30, D=D, seed=threads)
    xl, yl = torch.tensor([40, 17, 0]), torch.tensor([30, 30, 9])
    want = reference(x.cpu(), y.cpu(), xl, yl, norm, squared, batch_reduction=None)
    xs = x.transpose(0, 2).contiguous().transpose(0, 2)
    ys = y.transpose(0, 1).contiguous().transpose(0, 1)
    assert not xs.is_contiguous() and not ys.is_contiguous()
    for a, b in ((x, y), (xs, ys)):
        loss, _ = pointops.chamfer_distance(
            a, b, xl.to(device), yl.to(device), norm=norm, squared=squared, batch_reduction=None
        )
        torch.testing.assert_close(loss.cpu(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("point_reduction", ["mean", "sum", "max"])
@pytest.mark.parametrize("norm, squared, D", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device, norm, squared, D, point_reduction):
    x, y = clouds(device, P1=5, P2=4, D=D, seed=11)
    xl, yl = torch.tensor([5, 2, 0], device=device), torch.tensor([4, 4, 3], device=device)
    w = torch.tensor([1.0, 0.5, 2.0], dtype=torch.float64, device=device)
    x.requires_grad_()
    y.requires_grad_()

    def loss(x, y):
        return pointops.chamfer_distance(
            x, y, xl, yl, weights=w, norm=norm, squared=squared, point_reduction=point_reduction
        )[0]

    # on CUDA torch's gather backward (the distances' recomputation) sums in any order
    assert torch.autograd.gradcheck(loss, (x, y), nondet_tol=1e-12 if device == "cuda" else 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_of_the_normal_terms(device):
    x, y = clouds(device, P1=5, P2=4, seed=12)
    xn, yn = torch.rand_like(x, requires_grad=True), torch.rand_like(y, requires_grad=True)
    xl, yl = torch.tensor([5, 2, 0], device=device), torch.tensor([4, 4, 3], device=device)
    for abs_cosine in (True, False):
        assert torch.autograd.gradcheck(
            lambda a, b, abs_cosine=abs_cosine: pointops.chamfer_distance(
                x, y, xl, yl, x_normals=a, y_normals=b, abs_cosine=abs_cosine
            )[1],
            (xn, yn),
        )
