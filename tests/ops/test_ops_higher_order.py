"""Second-order gradients (gradgradcheck, float64) and torch.func (grad, jacrev, vmap) for every
operator, padded and packed (pointops.packed), against the eager autograd, which
test_ops_autograd.py and test_packed.py gradcheck."""

import pointops
import pytest
import torch
from bad_values import raises_bad_value
from ops_data import cloud
from pointops import packed
from torch.autograd import gradgradcheck
from torch.func import grad, jacrev, vmap
from transform_checks import (
    assert_grad_equals_eager,
    assert_jacrev_equals_eager,
    assert_second_order_equals_eager,
    leaf,
)

ops = torch.ops.pointops


def _index(shape, n, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, n, shape, generator=g).to(device)


def _rand(*shape, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64).to(device)


# Every differentiable path of the API: (name, function of the differentiable inputs, inputs).
# Index inputs repeat points (collisions in the scatter-sums) and hold -1 slots; ball_query's
# radius covers the whole cloud so no slot is empty (an empty slot's dist2 is +inf). The packed
# batch has an empty cloud with a query in it: its slots are -1 / +inf, taken as 0 (the
# knn_lengths way), and every other query has at least k points.
def _packed_cases(device):
    xyz = _rand(9, 3, seed=11, device=device)
    query = _rand(5, 3, seed=12, device=device)
    ptr = torch.tensor([0, 5, 5, 9], device=device)
    query_ptr = torch.tensor([0, 2, 3, 5], device=device)
    feat = _rand(9, 3, seed=13, device=device)
    idx = _index((5, 3), 9, seed=14, device=device)
    weight = _rand(5, 3, seed=15, device=device)
    return {
        "packed_knn": (
            lambda a, b: packed.knn(a, ptr, b, query_ptr, 3)[0].nan_to_num(posinf=0.0),
            (xyz, query),
        ),
        "packed_three_nn": (
            lambda a, b: packed.three_nn(b, query_ptr, a, ptr)[0].nan_to_num(posinf=0.0),
            (xyz, query),
        ),
        "packed_ball_query": (
            lambda a, b: packed.ball_query(a, ptr, b, query_ptr, 2.0, 4, return_dist2=True)[2].nan_to_num(
                posinf=0.0
            ),
            (xyz, query),
        ),
        "packed_gather": (lambda f: packed.gather(f, idx), (feat,)),
        "packed_interpolate": (lambda f, w: packed.interpolate(f, idx, w), (feat, weight)),
    }


def _cases(device):
    xyz = cloud("random", 2, 7).to(device)
    query = cloud("random", 2, 4, seed=5).to(device)
    feat = _rand(2, 3, 6, seed=1, device=device)
    idx2 = _index((2, 5), 6, seed=2, device=device)
    idx3 = _index((2, 4, 3), 6, seed=3, device=device)
    weight = _rand(2, 4, 3, seed=4, device=device)
    lengths = torch.tensor([7, 4], device=device)
    return {
        "gather_points": (lambda f: pointops.gather_points(f, idx2), (feat,)),
        "group_points": (lambda f: pointops.group_points(f, idx3), (feat,)),
        "three_interpolate": (lambda f, w: pointops.three_interpolate(f, idx3, w), (feat, weight)),
        "knn": (lambda a, b: pointops.knn(a, b, 3)[0], (xyz, query)),
        "knn_lengths": (
            lambda a, b: pointops.knn(a, b, 3, lengths=lengths)[0].nan_to_num(posinf=0.0),
            (xyz, query),
        ),
        "three_nn": (lambda a, b: pointops.three_nn(b, a)[0], (xyz, query)),
        "ball_query": (lambda a, b: pointops.ball_query(a, b, 2.0, 5, return_dist2=True)[2], (xyz, query)),
        **_packed_cases(device),
    }


CASES = list(_cases("cpu"))


# --- double backward ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_gradgradcheck(device, name):
    fn, inputs = _cases(device)[name]
    assert gradgradcheck(fn, tuple(leaf(t) for t in inputs))


def test_gradgradcheck_of_the_backward_ops(device):
    # the backward ops are differentiable themselves (in every argument but the indices), so
    # gradients of any order stay on the deterministic kernels
    idx = _index((2, 5, 3), 6, seed=7, device=device)
    grad_out = leaf(_rand(2, 3, 5, seed=8, device=device))
    weight = leaf(_rand(2, 5, 3, seed=9, device=device))
    feat = leaf(_rand(2, 3, 6, seed=10, device=device))
    back_feat = lambda g, w: ops.gather_backward_feat(g, idx, w, 6)  # noqa: E731
    back_weight = lambda g, f: ops.gather_backward_weight(g, f, idx)  # noqa: E731
    for fn, inputs in ((back_feat, (grad_out, weight)), (back_weight, (grad_out, feat))):
        assert torch.autograd.gradcheck(fn, inputs)
        assert gradgradcheck(fn, inputs)


def test_second_derivative_is_not_silently_zero(device):
    # d2 = |q - x|^2 has the Hessian 2 I w.r.t. q: the second derivative must be exactly that
    xyz = cloud("random", 1, 5).to(device)
    query = leaf(cloud("random", 1, 1, seed=3).to(device))
    dist2, _ = pointops.knn(xyz, query, 1)
    (g,) = torch.autograd.grad(dist2.sum(), query, create_graph=True)
    (h,) = torch.autograd.grad(g[0, 0, 0], query)
    torch.testing.assert_close(h, torch.tensor([[[2.0, 0.0, 0.0]]], dtype=torch.float64, device=device))
    # feat * weight: the mixed second derivative of three_interpolate is the gathered feature
    feat = leaf(_rand(1, 2, 4, device=device))
    weight = leaf(_rand(1, 1, 3, seed=1, device=device))
    idx = torch.tensor([[[0, 2, 2]]], device=device)
    out = pointops.three_interpolate(feat, idx, weight)
    (gw,) = torch.autograd.grad(out.sum(), weight, create_graph=True)
    (gf,) = torch.autograd.grad(gw[0, 0, 1], feat)
    expected = torch.zeros(1, 2, 4, dtype=torch.float64, device=device)
    expected[0, :, 2] = 1.0
    torch.testing.assert_close(gf, expected)


def test_no_backward_op_warns_about_a_missing_autograd_kernel(recwarn):
    feat = leaf(_rand(1, 2, 4))
    weight = leaf(_rand(1, 3, 2, seed=1))
    idx = _index((1, 3, 2), 4, seed=2)
    out = pointops.three_interpolate(feat, idx, weight)
    (g,) = torch.autograd.grad(out.square().sum(), feat, create_graph=True)
    g.sum().backward()
    assert not [w for w in recwarn if "autograd kernel was not registered" in str(w.message)]


# --- torch.func -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_func_jacrev_equals_eager_autograd(device, name):
    fn, inputs = _cases(device)[name]
    assert_jacrev_equals_eager(fn, inputs)


@pytest.mark.parametrize("name", CASES)
def test_func_grad_equals_eager_autograd(device, name):
    fn, inputs = _cases(device)[name]
    assert_grad_equals_eager(fn, inputs)


def test_func_grad_through_furthest_point_sample(device):
    # FPS has no gradient of its own; the picked points' coordinates carry one
    xyz = cloud("random", 2, 9).to(device)

    def loss(x):
        picked = pointops.gather_points(x.transpose(1, 2), pointops.furthest_point_sample(x, 4))
        return picked.square().sum()

    xyz_leaf = leaf(xyz)
    (expected,) = torch.autograd.grad(loss(xyz_leaf), xyz_leaf)
    torch.testing.assert_close(grad(loss)(xyz), expected)
    torch.testing.assert_close(jacrev(loss)(xyz), expected)


def test_func_grad_through_packed_furthest_point_sample(device):
    xyz = _rand(10, 3, seed=60, device=device)
    ptr = torch.tensor([0, 6, 10], device=device)
    sample_ptr = torch.tensor([0, 3, 5], device=device)

    def loss(x):
        return packed.gather(x, packed.furthest_point_sample(x, ptr, sample_ptr, 5)).square().sum()

    xyz_leaf = leaf(xyz)
    (expected,) = torch.autograd.grad(loss(xyz_leaf), xyz_leaf)
    assert torch.count_nonzero(expected)
    torch.testing.assert_close(grad(loss)(xyz), expected)
    torch.testing.assert_close(jacrev(loss)(xyz), expected)


@pytest.mark.parametrize(
    "name",
    ["knn", "three_interpolate", "group_points", "packed_knn", "packed_ball_query", "packed_interpolate"],
)
def test_func_second_order_equals_eager_double_backward(device, name):
    fn, inputs = _cases(device)[name]
    assert_second_order_equals_eager(fn, inputs)


def test_direct_op_calls_under_torch_func_give_a_clear_error():
    xyz, query = cloud("random", 1, 5), cloud("random", 1, 2, seed=1)
    with pytest.raises(RuntimeError, match="call it through the pointops API"):
        grad(lambda a: ops.knn(a, query, 2, None, None)[0].sum())(xyz)


# --- vmap: the vmapped dimension joins the batch dimension -----------------------------------------


def _stack(fn, per_sample):
    outs = [fn(*args) for args in per_sample]
    if isinstance(outs[0], tuple):
        return tuple(torch.stack(parts) for parts in zip(*outs, strict=True))
    return torch.stack(outs)


def _assert_same(got, expected):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_vmap_every_op_equals_a_loop(device):
    V = 3
    xyz = torch.stack([cloud("random", 2, 10, seed=s) for s in range(V)]).to(device)
    query = torch.stack([cloud("random", 2, 4, seed=10 + s) for s in range(V)]).to(device)
    lengths = torch.tensor([10, 6], device=device)
    feat = _rand(V, 2, 3, 10, seed=20, device=device)
    idx3 = torch.stack([_index((2, 4, 3), 10, seed=30 + s) for s in range(V)]).to(device)
    weight = _rand(V, 2, 4, 3, seed=40, device=device)
    checks = [
        # (function, vmapped args, unbatched args appended after them)
        (lambda x: pointops.furthest_point_sample(x, 5, lengths=lengths), (xyz,)),
        (lambda x, q: pointops.knn(x, q, 3, lengths=lengths), (xyz, query)),
        (lambda x, q: pointops.ball_query(x, q, 0.5, 4, return_dist2=True), (xyz, query)),
        (lambda x, q: pointops.ball_query(x, q, 0.5, 4), (xyz, query)),
        (lambda f, i: pointops.group_points(f, i), (feat, idx3)),
        (lambda f, i: pointops.gather_points(f, i[..., 0]), (feat, idx3)),
        (lambda f, i, w: pointops.three_interpolate(f, i, w), (feat, idx3, weight)),
        # one input vmapped, the other shared by every sample
        (lambda x: pointops.knn(x, query[0], 3), (xyz,)),
        (lambda f: pointops.three_interpolate(f, idx3[0], weight[0]), (feat,)),
        (lambda w: pointops.three_interpolate(feat[1], idx3[1], w), (weight,)),
    ]
    for fn, args in checks:
        got = vmap(fn)(*args)
        expected = _stack(fn, list(zip(*args, strict=True)))
        _assert_same(got, expected)


def test_vmap_over_a_middle_dimension(device):
    xyz = cloud("random", 4, 12).to(device).view(2, 2, 12, 3)  # vmapped over dim 1
    query = cloud("random", 4, 3, seed=1).to(device).view(2, 2, 3, 3)
    got = vmap(lambda x, q: pointops.knn(x, q, 2), in_dims=1, out_dims=1)(xyz, query)
    expected = pointops.knn(xyz.reshape(4, 12, 3), query.reshape(4, 3, 3), 2)
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a.reshape(b.shape), b)


@pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")
def test_vmap_packed_ops_equal_a_loop(device):
    # the packed ops have no batching rule of their own: torch's fallback runs them once per
    # sample (and warns about the performance), with the same results as a loop
    V = 3
    ptr = torch.tensor([0, 6, 6, 10], device=device)
    query_ptr = torch.tensor([0, 2, 3, 4], device=device)
    sample_ptr = torch.tensor([0, 3, 3, 5], device=device)
    xyz = _rand(V, 10, 3, seed=50, device=device)
    query = _rand(V, 4, 3, seed=51, device=device)
    feat = _rand(V, 10, 2, seed=52, device=device)
    idx = _index((4, 3), 10, seed=53, device=device)
    weight = _rand(V, 4, 3, seed=54, device=device)
    checks = [
        (lambda x, q: packed.knn(x, ptr, q, query_ptr, 3), (xyz, query)),
        (lambda x, q: packed.ball_query(x, ptr, q, query_ptr, 0.5, 4, return_dist2=True), (xyz, query)),
        (lambda x: packed.furthest_point_sample(x, ptr, sample_ptr, 5), (xyz,)),
        (lambda f: packed.gather(f, idx), (feat,)),
        (lambda f, w: packed.interpolate(f, idx, w), (feat, weight)),
        (lambda x: packed.knn(x, ptr, query[0], query_ptr, 3), (xyz,)),  # the query shared by every sample
    ]
    for fn, args in checks:
        _assert_same(vmap(fn)(*args), _stack(fn, list(zip(*args, strict=True))))


def test_value_checks_still_raise_under_transforms(device):
    xyz = torch.stack([cloud("random", 1, 6, seed=s) for s in range(3)]).to(device)
    xyz[2, 0, 4, 1] = float("nan")  # one sample of the vmapped batch is bad
    query = cloud("random", 1, 2, seed=9).to(device)
    with raises_bad_value(device, "xyz contains nan or inf", "xyz held nan"):
        vmap(lambda x: pointops.knn(x, query, 2))(xyz)
    with raises_bad_value(device, "xyz contains nan or inf", "xyz held nan"):
        grad(lambda x: pointops.knn(x, query, 2)[0].sum())(xyz[2])
    feat = _rand(3, 1, 2, 6, device=device)
    bad_idx = torch.tensor([[0, 6]], device=device)
    with raises_bad_value(device, "idx values must lie in -1..5", "idx held a value outside its range"):
        vmap(lambda f: pointops.gather_points(f, bad_idx))(feat)
