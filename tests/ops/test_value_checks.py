"""The value checks of the Python API (finite coordinates, index and lengths ranges) and the
switch that turns them off: pointops.set_value_checks, pointops.value_checks and the
POINTOPS_VALUE_CHECKS environment variable."""

import math
import os
import subprocess
import sys

import pointops
import pytest
import torch
from bad_values import raises_bad_value
from pointops.compat import pointnet2_utils as pn2
from pointops.ops import _ValueChecks


def pts(b=1, n=4):
    return torch.rand(b, n, 3, generator=torch.Generator().manual_seed(n))


NAN_POINT = torch.tensor([[[0.0, math.nan, 0.0]]])
INF_POINT = torch.tensor([[[math.inf, 0.0, 0.0]]])
# finite, but squared distances would overflow float32 (the limit is 2^62, about 4.6e18)
BIG_POINT = torch.tensor([[[0.0, 0.0, -1e19]]])
BIG_CLOUD64 = torch.tensor([[[0.0, 0.0, 0.0], [1e160, 0.0, 0.0]]], dtype=torch.float64)

# (call with one bad value, words of the Python API's error, words of the binding's error)
BAD_VALUES = [
    (
        lambda: pointops.furthest_point_sample(NAN_POINT, 1),
        "xyz contains nan or inf",
        "xyz contains a non-finite",
    ),
    (
        lambda: pointops.furthest_point_sample(pts(), 2, lengths=torch.tensor([5])),
        "lengths values must lie in 0..4 (the size of xyz's point dimension), got 5..5",
        "lengths[0] = 5",
    ),
    (lambda: pointops.knn(pts(), INF_POINT, 1), "query contains nan or inf", "query contains a non-finite"),
    (
        lambda: pointops.knn(pts(), pts(), 1, lengths=torch.tensor([7], dtype=torch.int32)),
        "lengths values must lie in 0..4",
        "lengths[0] = 7",
    ),
    (
        lambda: pointops.knn(pts(), pts(1, 3), 1, query_lengths=torch.tensor([-1])),
        "query_lengths values must lie in 0..3 (the size of query's point dimension), got -1..-1",
        "query_lengths[0] = -1",
    ),
    (
        lambda: pointops.three_nn(pts(), NAN_POINT.expand(1, 4, 3)),
        "known contains nan or inf",
        "xyz contains a non-finite",
    ),
    (
        lambda: pointops.ball_query(NAN_POINT, pts(), 0.5, 2),
        "xyz contains nan or inf",
        "xyz contains a non-finite",
    ),
    (
        lambda: pointops.ball_query(pts(), pts(), 0.5, 2, query_lengths=torch.tensor([9])),
        "query_lengths values must lie in 0..4",
        "query_lengths[0] = 9",
    ),
    (
        lambda: pointops.gather_points(torch.rand(1, 2, 5), torch.tensor([[0, 5]])),
        "idx values must lie in -1..4 (-1 = no point), got 0..5",
        "idx holds index 5",
    ),
    (
        lambda: pointops.group_points(torch.rand(1, 2, 5), torch.tensor([[[-2, 0]]])),
        "idx values must lie in -1..4 (-1 = no point), got -2..0",
        "idx holds index -2",
    ),
    (
        lambda: pointops.three_interpolate(
            torch.rand(1, 2, 3), torch.tensor([[[0, 1, 3]]]), torch.rand(1, 1, 3)
        ),
        "idx values must lie in -1..2",
        "idx holds index 3",
    ),
    (
        lambda: pn2.gather_operation(torch.rand(1, 2, 5), torch.tensor([[6]], dtype=torch.int32)),
        "idx values must lie in -1..4",
        "idx holds index 6",
    ),
    (
        lambda: pn2.ball_query(0.1, 2, pts(), NAN_POINT),
        "new_xyz contains nan or inf",
        "query contains a non-finite",
    ),
    (
        lambda: pointops.knn(pts(), BIG_POINT, 1),
        "query holds a coordinate of magnitude 1e+19, above 4.612e+18 (2^62), the largest for which squared "
        "distances stay finite in float32 arithmetic",
        "query holds a coordinate of magnitude 1e+19, above 2^62",
    ),
    (
        lambda: pointops.furthest_point_sample(BIG_CLOUD64, 2),
        "xyz holds a coordinate of magnitude 1e+160, above 3.352e+153 (2^510)",
        "above 2^510",
    ),
    (
        lambda: pointops.ball_query(BIG_POINT.expand(1, 3, 3), pts(), 0.5, 2),
        "xyz holds a coordinate",
        "xyz holds a coordinate of magnitude 1e+19",
    ),
    (lambda: pointops.three_nn(BIG_POINT, pts()), "unknown holds a coordinate", "query holds a coordinate"),
    (
        lambda: pn2.ball_query(0.1, 2, pts(), BIG_POINT),
        "new_xyz holds a coordinate",
        "query holds a coordinate",
    ),
]
IDS = [f"case{i}" for i in range(len(BAD_VALUES))]
COORDINATE_TOO_LARGE = "%s held nan, inf or a coordinate too large"  # the CUDA checks' words


@pytest.fixture(autouse=True)
def _checks_restored():
    previous = pointops.value_checks_enabled()
    yield
    pointops.set_value_checks(previous)


@pytest.mark.parametrize(("call", "api_words", "binding_words"), BAD_VALUES, ids=IDS)
def test_checks_on_raise_the_clear_error(call, api_words, binding_words):
    assert pointops.value_checks_enabled()  # the default
    with pytest.raises(ValueError) as info:
        call()
    assert api_words in str(info.value)
    # the clear error stands alone: the binding's error is not chained into the traceback
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


@pytest.mark.parametrize(("call", "api_words", "binding_words"), BAD_VALUES, ids=IDS)
def test_checks_off_on_cpu_the_binding_still_refuses_bad_values(call, api_words, binding_words):
    # With the switch off the Python API reads no values; on CPU the binding checks them before
    # any kernel runs, so a bad value is an error, never a read out of bounds.
    with pointops.value_checks(False):
        with pytest.raises(RuntimeError) as info:
            call()
    assert binding_words in str(info.value)
    assert not isinstance(info.value, ValueError)


def test_checks_off_give_the_same_results_on_good_input():
    xyz, query = pts(2, 40), pts(2, 9)
    feat, idx = torch.rand(2, 5, 40), torch.randint(-1, 40, (2, 9, 4))
    lengths = torch.tensor([40, 17])

    def run():
        return (
            pointops.furthest_point_sample(xyz, 6, lengths=lengths),
            *pointops.knn(xyz, query, 4, lengths=lengths),
            *pointops.ball_query(xyz, query, 0.4, 3, lengths=lengths, return_dist2=True),
            pointops.group_points(feat, idx),
            pointops.gather_points(feat, idx[:, :, 0]),
        )

    on = run()
    with pointops.value_checks(False):
        off = run()
    for a, b in zip(on, off, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(("dtype", "power"), [(torch.float32, 62), (torch.float64, 510)])
def test_coordinates_up_to_the_limit_give_exact_results_and_beyond_it_an_error(device, dtype, power):
    limit = 2.0**power
    assert pointops.coordinate_limit(dtype) == limit
    corners = torch.tensor([[[limit] * 3, [0.0] * 3, [-limit] * 3]], dtype=dtype, device=device)
    dist2, idx = pointops.knn(corners, corners[:, :1], 3)
    # the farthest pair the limit admits: 3 * (2 * limit)^2 = 1.5 * 2^(2 power + 3), finite
    expected = torch.tensor([[[0.0, 3 * limit**2, 12 * limit**2]]], dtype=dtype, device=device)
    assert torch.equal(dist2, expected) and idx.tolist() == [[[0, 1, 2]]]
    assert pointops.furthest_point_sample(corners, 3).tolist() == [[0, 2, 1]]
    idx, count, d2 = pointops.ball_query(corners, corners[:, 2:], 4 * limit, 3, return_dist2=True)
    assert count.tolist() == [[3]] and torch.equal(d2, expected.flip(-1))
    above = torch.nextafter(torch.tensor(limit, dtype=dtype), torch.tensor(math.inf, dtype=dtype))
    for sign in (1, -1):
        beyond = corners.clone()
        beyond[0, 1, 2] = sign * above
        with raises_bad_value(
            device, rf"xyz holds a coordinate of magnitude .*\(2\^{power}\)", COORDINATE_TOO_LARGE % "xyz"
        ):
            pointops.knn(beyond, corners, 1)
        with raises_bad_value(
            device, rf"query holds a coordinate .*\(2\^{power}\)", COORDINATE_TOO_LARGE % "query"
        ):
            pointops.knn(corners, beyond, 1)


def test_switch_and_context_manager():
    assert pointops.set_value_checks(False) is True
    assert not pointops.value_checks_enabled()
    assert pointops.set_value_checks(True) is False
    with pytest.raises(KeyError):
        with pointops.value_checks(False):
            assert not pointops.value_checks_enabled()
            raise KeyError("leaves the block")
    assert pointops.value_checks_enabled()  # restored on the way out, error or not
    with pointops.value_checks(False), pointops.value_checks(True):
        assert pointops.value_checks_enabled()
    with pytest.raises(TypeError, match="takes True or False"):
        pointops.set_value_checks("off")


@pytest.mark.parametrize(
    ("value", "expected", "warns"),
    [("0", False, False), ("off", False, False), ("1", True, False), ("maybe", True, True)],
)
def test_environment_variable(value, expected, warns):
    code = (
        "import warnings\nwarnings.simplefilter('always')\nimport pointops\n"
        "print(pointops.value_checks_enabled())"
    )
    env = {**os.environ, "POINTOPS_VALUE_CHECKS": value}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(expected)
    assert ("POINTOPS_VALUE_CHECKS='maybe' is not understood" in done.stderr) == warns


def test_value_checks_report_the_first_failure_in_order():
    good_idx, bad_idx = torch.tensor([[0, 3]]), torch.tensor([[0, 4]])
    xyz = pts()
    assert _ValueChecks().finite(xyz, "xyz").indices(good_idx, "idx", 4).first_problem() is None
    problem = (
        _ValueChecks()
        .finite(xyz, "xyz")
        .indices(bad_idx, "idx", 4)
        .finite(NAN_POINT, "query")
        .first_problem()
    )
    assert "idx values must lie in -1..3" in str(problem)
    problem = _ValueChecks().finite(NAN_POINT, "query").indices(bad_idx, "idx", 4).first_problem()
    assert "query contains nan or inf" in str(problem)
    # empty tensors have no values to check
    empty = torch.empty(1, 0, dtype=torch.int64)
    assert (
        _ValueChecks().indices(empty, "idx", 0).lengths(None, "lengths", xyz, "xyz").first_problem() is None
    )


def test_calls_without_grad_build_no_graph_and_calls_with_grad_do():
    xyz = pts(1, 10).requires_grad_(True)
    query = pts(1, 3)
    dist2, _ = pointops.knn(xyz, query, 2)
    assert dist2.grad_fn is not None
    dist2.sum().backward()
    assert xyz.grad is not None and torch.isfinite(xyz.grad).all()
    with torch.no_grad():
        assert pointops.knn(xyz, query, 2)[0].grad_fn is None
    assert pointops.knn(xyz.detach(), query, 2)[0].grad_fn is None
    feat = torch.rand(1, 3, 10, requires_grad=True)
    weight = torch.rand(1, 3, 3, requires_grad=True)
    out = pointops.three_interpolate(feat.detach(), torch.tensor([[[0, 1, 2]] * 3]), weight)
    out.sum().backward()  # the weight alone needs grad: the autograd layer must still run
    assert weight.grad is not None and feat.grad is None


def test_api_gradients_equal_the_registered_autograd_of_the_raw_ops():
    # The API applies its own autograd.Function; the raw ops go through register_autograd.
    ops = torch.ops.pointops
    g = torch.Generator().manual_seed(3)
    xyz = torch.rand(2, 30, 3, generator=g, dtype=torch.float64)
    query = torch.rand(2, 7, 3, generator=g, dtype=torch.float64)
    feat = torch.rand(2, 4, 30, generator=g, dtype=torch.float64)
    idx = torch.randint(-1, 30, (2, 7, 3), generator=g)
    weight = torch.rand(2, 7, 3, generator=g, dtype=torch.float64)

    def grads(fn, *inputs):
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        out = fn(*leaves)
        out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out))
        return [t.grad for t in leaves]

    pairs = [
        (lambda a, b: pointops.knn(a, b, 4)[0], lambda a, b: ops.knn(a, b, 4, None, None)[0], (xyz, query)),
        (
            lambda a, b: pointops.ball_query(a, b, 0.4, 3, return_dist2=True)[2],
            lambda a, b: ops.ball_query(a, b, 0.4, 3, None, None, True, True)[2],
            (xyz, query),
        ),
        (
            lambda f, w: pointops.three_interpolate(f, idx, w),
            lambda f, w: ops.gather(f, idx, w),
            (feat, weight),
        ),
        (
            lambda f: pointops.group_points(f, idx),
            lambda f: ops.gather(f, idx.reshape(2, 21, 1), None),
            (feat,),
        ),
    ]
    for api, raw, inputs in pairs:
        for a, b in zip(grads(api, *inputs), grads(raw, *inputs), strict=True):
            assert a is not None and torch.count_nonzero(a) > 0
            torch.testing.assert_close(a, b, rtol=0, atol=0)


CUDA = torch.cuda.is_available() and pointops.build_info()["cuda"]


POISON_INDEX = -(2**63)


@pytest.mark.skipif(not CUDA, reason="needs a GPU and a CUDA build")
def test_cuda_bad_values_poison_the_outputs_and_are_raised_later():
    dev = "cuda"
    pointops.check_errors()  # nothing left from other tests
    feat = torch.rand(1, 2, 5, device=dev)
    out = pointops.gather_points(feat, torch.tensor([[0, 5, -7]], device=dev))  # no error yet: no sync
    with pytest.raises(ValueError, match=r"earlier pointops.gather .* idx held a value outside its range"):
        pointops.check_errors()
    # the gather kernel checks its own indices: what it read through a bad one is NaN (and every
    # gather output while the problem stays recorded); the errors' other outputs are poisoned whole
    assert torch.isnan(out[:, :, 1:]).all()
    pointops.check_errors()  # taken: nothing left

    xyz, query = pts(1, 6).to(dev), pts(1, 3).to(dev)
    nan_query = torch.full((1, 2, 3), math.nan, device=dev)
    dist2, idx = pointops.knn(xyz, nan_query, 2)
    torch.cuda.synchronize()
    assert torch.isnan(dist2).all() and (idx == POISON_INDEX).all()
    with pytest.raises(ValueError, match=r"pointops.knn: an earlier pointops.knn call .* query held nan"):
        pointops.knn(xyz, query, 2)  # the next call raises before it queues anything
    d, i = pointops.knn(xyz, query, 2)  # and then works again
    expected_d, expected_i = pointops.knn(xyz.cpu(), query.cpu(), 2)
    torch.testing.assert_close(i.cpu(), expected_i)
    torch.testing.assert_close(d.cpu(), expected_d)

    long_lengths = torch.tensor([50], device=dev)
    picks = pointops.furthest_point_sample(xyz, 4, lengths=long_lengths)
    with pytest.raises(ValueError, match="lengths held a value outside its range"):
        pointops.check_errors(dev)
    assert (picks == POISON_INDEX).all()
    big = torch.tensor([[[0.0, 0.0, 0.0], [6e18, 0.0, 0.0]]], device=dev)
    pointops.ball_query(big, big, 0.5, 2)
    with pytest.raises(ValueError, match="xyz held nan, inf or a coordinate too large"):
        pointops.check_errors(0)


# Every row building and sum path of the CUDA gather backward (tuning knobs; the planner's
# own pick first): each reads idx in a different first kernel.
BACKWARD_PATHS = {
    "planned": {},
    "direct": {"GATHER_STAGED": 0},
    "transposed-radix": {"GATHER_SPARSE": 0},
    "transposed-counted": {"GATHER_SPARSE": 0, "GATHER_ROWS_COUNTED": 1},
    "sparse": {"GATHER_SPARSE": 1},
    "sparse-staged": {"GATHER_SPARSE": 2},
    "fused": {"GATHER_SPARSE": 3},
    "chunked": {"GATHER_SPARSE": 4},
    "dense": {"GATHER_SPARSE": 5},
    "dense-wide": {"GATHER_SPARSE": 5, "GATHER_DENSE_WIDE": 1},
}


@pytest.mark.skipif(not CUDA, reason="needs a GPU and a CUDA build")
@pytest.mark.parametrize("path", BACKWARD_PATHS)
@pytest.mark.parametrize("T, weighted", [(1, False), (3, True), (8, False)])
@pytest.mark.parametrize("bad", [64, -2, 2**40])
def test_cuda_gather_backward_records_an_index_outside_the_range(path, T, weighted, bad):
    # Through autograd the forward has seen the same indices; a direct call of the backward op
    # must report them too, and sum every good entry as if the bad one were -1.
    ops = torch.ops.pointops
    pointops.check_errors()
    g = torch.Generator().manual_seed(T)
    B, C, N, P = 2, 8, 64, 48
    idx = torch.randint(-1, N, (B, P, T), generator=g)
    weight = torch.rand(B, P, T, generator=g) if weighted else None
    grad, feat = torch.rand(B, C, P, generator=g), torch.rand(B, C, N, generator=g)
    as_minus_one = idx.clone()
    as_minus_one[1, 5, T - 1] = -1
    idx[1, 5, T - 1] = bad
    expected_feat = ops.gather_backward_feat(grad, as_minus_one, weight, N)
    expected_weight = ops.gather_backward_weight(grad, feat, as_minus_one)
    cuda = lambda t: None if t is None else t.cuda()  # noqa: E731
    with pointops._tuning.override(**BACKWARD_PATHS[path]):
        grad_feat = ops.gather_backward_feat(grad.cuda(), idx.cuda(), cuda(weight), N)
        with pytest.raises(ValueError, match="idx held a value outside its range"):
            pointops.check_errors()
        grad_weight = ops.gather_backward_weight(grad.cuda(), feat.cuda(), idx.cuda())
        with pytest.raises(ValueError, match="idx held a value outside its range"):
            pointops.check_errors()
        with pointops.value_checks(False):
            unchecked = ops.gather_backward_feat(grad.cuda(), idx.cuda(), cuda(weight), N)
            torch.cuda.synchronize()
        pointops.check_errors()  # nothing recorded with the checks off
    torch.testing.assert_close(grad_feat.cpu(), expected_feat)
    torch.testing.assert_close(unchecked.cpu(), expected_feat)
    torch.testing.assert_close(grad_weight.cpu(), expected_weight)


@pytest.mark.skipif(not CUDA, reason="needs a GPU and a CUDA build")
@pytest.mark.parametrize("counted", [0, 1])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("bad", [40, -3])
def test_cuda_packed_gather_backward_records_an_index_outside_the_range(counted, index_dtype, bad):
    ops = torch.ops.pointops
    pointops.check_errors()
    g = torch.Generator().manual_seed(1)
    rows, C, Q, T = 40, 6, 30, 4
    idx = torch.randint(-1, rows, (Q, T), generator=g)
    weight = torch.rand(Q, T, generator=g)
    grad, feat = torch.rand(Q, C, generator=g), torch.rand(rows, C, generator=g)
    as_minus_one = idx.clone()
    as_minus_one[7, 2] = -1
    idx[7, 2] = bad
    expected_feat = ops.gather_rows_backward_feat(grad, as_minus_one, weight, rows)
    expected_weight = ops.gather_rows_backward_weight(grad, feat, as_minus_one)
    idx = idx.to(index_dtype).cuda()
    with pointops._tuning.override(GATHER_ROWS_COUNTED=counted):
        grad_feat = ops.gather_rows_backward_feat(grad.cuda(), idx, weight.cuda(), rows)
        with pytest.raises(ValueError, match="idx held a value outside its range"):
            pointops.check_errors()
        grad_weight = ops.gather_rows_backward_weight(grad.cuda(), feat.cuda(), idx)
        with pytest.raises(ValueError, match="idx held a value outside its range"):
            pointops.check_errors()
    torch.testing.assert_close(grad_feat.cpu(), expected_feat)
    torch.testing.assert_close(grad_weight.cpu(), expected_weight)


# Shapes where no gather kernel runs (nothing to read from, or nothing to write): the index
# is checked all the same, as on CPU.
UNREAD_INDEX_CALLS = {
    "gather, no points": lambda ops, i: ops.gather(torch.rand(1, 2, 0), i.view(1, 1, 1), None),
    "gather, no channels": lambda ops, i: ops.gather(torch.rand(1, 0, 4), i.view(1, 1, 1), None),
    "gather_backward_feat, n 0": lambda ops, i: ops.gather_backward_feat(
        torch.rand(1, 2, 1), i.view(1, 1, 1), None, 0
    ),
    "gather_backward_weight, no points": lambda ops, i: ops.gather_backward_weight(
        torch.rand(1, 2, 1), torch.rand(1, 2, 0), i.view(1, 1, 1)
    ),
    "packed gather, no rows": lambda ops, i: ops.gather_rows(torch.rand(0, 3), i.view(1, 1).int(), None),
    "packed gather_rows_backward_feat, rows 0": lambda ops, i: ops.gather_rows_backward_feat(
        torch.rand(1, 3), i.view(1, 1), None, 0
    ),
    "packed gather_rows_backward_weight, no channels": lambda ops, i: ops.gather_rows_backward_weight(
        torch.rand(1, 0), torch.rand(4, 0), i.view(1, 1)
    ),
}


@pytest.mark.parametrize("call", UNREAD_INDEX_CALLS)
def test_an_index_no_kernel_reads_is_still_checked(call):
    ops = torch.ops.pointops
    bad = torch.tensor([5])
    with pytest.raises(RuntimeError, match="idx holds index 5"):
        UNREAD_INDEX_CALLS[call](ops, bad)  # the CPU binding refuses it before anything runs
    if not CUDA:
        return
    pointops.check_errors()
    cuda_ops = _OnDevice(ops, "cuda")
    out = UNREAD_INDEX_CALLS[call](cuda_ops, bad.cuda())
    with pytest.raises(ValueError, match="idx held a value outside its range"):
        pointops.check_errors()
    assert out.numel() == 0 or torch.isnan(out).all()  # poisoned, not zeros
    UNREAD_INDEX_CALLS[call](cuda_ops, torch.tensor([-1], device="cuda"))
    pointops.check_errors()  # -1 is fine


class _OnDevice:
    """torch.ops.pointops with every tensor argument moved to `device` first."""

    def __init__(self, ops, device):
        self._ops, self._device = ops, device

    def __getattr__(self, name):
        op = getattr(self._ops, name)
        move = lambda a: a.to(self._device) if isinstance(a, torch.Tensor) else a  # noqa: E731
        return lambda *args: op(*(move(a) for a in args))


@pytest.mark.skipif(not CUDA, reason="needs a GPU and a CUDA build")
def test_cuda_checks_off_stay_in_bounds():
    dev = "cuda"
    feat = torch.rand(1, 2, 5, device=dev)
    bad_idx = torch.tensor([[0, 5, -7]], device=dev)
    xyz, query = pts(1, 6).to(dev), pts(1, 3).to(dev)
    long_lengths = torch.tensor([50], device=dev)
    nan_query = torch.full((1, 2, 3), math.nan, device=dev)
    with pointops.value_checks(False):
        out = pointops.gather_points(feat, bad_idx)  # out-of-range indices read as -1: zeros
        torch.testing.assert_close(out[:, :, 1:], torch.zeros(1, 2, 2, device=dev))
        dist2, idx = pointops.knn(xyz, query, 2, lengths=long_lengths)  # lengths clamped to 6
        expected_dist2, expected_idx = pointops.knn(xyz, query, 2)
        torch.testing.assert_close(idx, expected_idx)
        torch.testing.assert_close(dist2, expected_dist2)
        idx, count = pointops.ball_query(xyz, nan_query, 0.5, 2)
        fps_long = pointops.furthest_point_sample(xyz, 4, lengths=long_lengths)
        fps_nan = pointops.furthest_point_sample(torch.full((1, 6, 3), math.nan, device=dev), 4)
        torch.cuda.synchronize()  # any fault in the kernels above surfaces here
    pointops.check_errors()  # nothing was recorded with the checks off
    assert ((idx >= -1) & (idx < 6)).all() and ((count >= 0) & (count <= 2)).all()
    for picks in (fps_long, fps_nan):
        assert ((picks >= -1) & (picks < 6)).all()


@pytest.mark.skipif(not CUDA, reason="needs a GPU and a CUDA build")
def test_cuda_default_path_never_synchronizes():
    dev = "cuda"
    xyz = torch.rand(2, 500, 3, device=dev)
    feat = torch.rand(2, 8, 500, device=dev, requires_grad=True)
    weight = torch.rand(2, 100, 3, device=dev, requires_grad=True)
    pointops.knn(xyz, xyz[:, :100], 3)  # the first call allocates the check state
    torch.cuda.set_sync_debug_mode("error")
    try:
        idx = pointops.furthest_point_sample(xyz, 100)
        _, nn = pointops.knn(xyz, xyz[:, :100], 3)
        ball, _ = pointops.ball_query(xyz, xyz[:, :100], 0.2, 8)
        out = pointops.three_interpolate(feat, nn, weight) + pointops.group_points(feat, ball).sum(-1)
        out = out + pointops.gather_points(feat, idx)
        out.sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    pointops.check_errors()


@pytest.mark.skipif(not CUDA, reason="needs a GPU and a CUDA build")
def test_cuda_checks_are_captured_in_a_cuda_graph():
    dev = "cuda"
    xyz = torch.rand(1, 64, 3, device=dev)
    pointops.knn(xyz, xyz, 4)  # warm-up outside the capture, as torch.cuda.graphs asks
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist2, idx = pointops.knn(xyz, xyz, 4)
    graph.replay()
    torch.cuda.synchronize()
    expected = pointops.knn(xyz, xyz, 4)
    torch.testing.assert_close(idx, expected[1])
    xyz[0, 3, 1] = math.nan  # the replay reads the new values
    graph.replay()
    torch.cuda.synchronize()
    assert torch.isnan(dist2).all() and (idx == POISON_INDEX).all()
    with pytest.raises(ValueError, match="(xyz|query) held nan"):  # xyz is both here: either is named
        pointops.check_errors()
