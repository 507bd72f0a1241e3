"""Hostile input for `pointnet2_batch_cuda` (openpoints' out-parameter functions): every function
with empty and odd sizes, every dtype of every tensor argument, nan/inf, wrong out-parameters
(dtype, shape, device, layout, aliasing), non-contiguous inputs, 1 and 2 threads, and the
gradient functions checked against the forward ones (gradcheck). Results are compared with
brute-force references in float64."""

from __future__ import annotations

import math

import pytest
import torch
from bad_values import raises_bad_value
from hostile_params import ALL_DTYPES, DEVICES

pn2 = pytest.importorskip("pointnet2_batch_cuda")

# the float dtypes a device takes
FLOATS = {"cpu": [torch.float32, torch.float64], "cuda": [torch.float32, torch.float64, torch.float16]}
# the CUDA checks' words for a bad coordinate (the binding names the op's own arguments)
CUDA_BAD_COORDINATE = "held nan, inf or a coordinate too large"

# function -> (argument names in call order, {out-parameter: "index" | "float"})
FUNCTIONS = {
    "furthest_point_sampling_wrapper": (("b", "n", "m", "points", "temp", "idx"), {"idx": "index"}),
    "ball_query_wrapper": (
        ("b", "n", "m", "radius", "nsample", "new_xyz", "xyz", "idx"),
        {"idx": "index"},
    ),
    "group_points_wrapper": (("b", "c", "n", "npoints", "nsample", "points", "idx", "out"), {"out": "float"}),
    "group_points_grad_wrapper": (
        ("b", "c", "n", "npoints", "nsample", "grad_out", "idx", "grad_points"),
        {"grad_points": "float"},
    ),
    "gather_points_wrapper": (("b", "c", "n", "npoints", "points", "idx", "out"), {"out": "float"}),
    "gather_points_grad_wrapper": (
        ("b", "c", "n", "npoints", "grad_out", "idx", "grad_points"),
        {"grad_points": "float"},
    ),
    "three_nn_wrapper": (
        ("b", "n", "m", "unknown", "known", "dist2", "idx"),
        {"dist2": "float", "idx": "index"},
    ),
    "three_interpolate_wrapper": (("b", "c", "m", "n", "points", "idx", "weight", "out"), {"out": "float"}),
    "three_interpolate_grad_wrapper": (
        ("b", "c", "n", "m", "grad_out", "idx", "weight", "grad_points"),
        {"grad_points": "float"},
    ),
}
# the inputs whose coordinates are searched (nan/inf/huge values are refused there)
COORDINATES = {
    "furthest_point_sampling_wrapper": ("points",),
    "ball_query_wrapper": ("new_xyz", "xyz"),
    "three_nn_wrapper": ("unknown", "known"),
}


def _rand(g, *shape, dtype, device, scale=1.0):
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)


def _index(g, high, shape, device, missing=False):
    """int32 indices in 0..high-1 (-1 where high is 0, or in about 1 of 5 slots if missing)."""
    if high == 0:
        return torch.full(shape, -1, dtype=torch.int32, device=device)
    idx = torch.randint(0, high, shape, generator=g, dtype=torch.int32)
    if missing:
        idx = torch.where(torch.rand(shape, generator=g) < 0.2, -1, idx).to(torch.int32)
    return idx.to(device)


def build(fn, device, dtype=torch.float32, b=2, n=9, m=4, c=3, s=3, seed=0, missing=False):
    """Valid arguments of `fn` (a dict in call order). n: points, m: samples / queries / known
    points (three_interpolate: m known, n unknown), c: channels, s: nsample."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: _rand(g, *shape, dtype=dtype, device=device)  # noqa: E731
    i32 = lambda *shape: torch.zeros(*shape, dtype=torch.int32, device=device)  # noqa: E731
    out = lambda *shape: torch.full(shape, 7.0, dtype=dtype, device=device)  # noqa: E731
    if fn == "furthest_point_sampling_wrapper":
        temp = torch.full((b, n), 1e10, device=device)
        return dict(b=b, n=n, m=m, points=r(b, n, 3), temp=temp, idx=i32(b, m))
    if fn == "ball_query_wrapper":
        return dict(
            b=b, n=n, m=m, radius=0.4, nsample=s, new_xyz=r(b, m, 3), xyz=r(b, n, 3), idx=i32(b, m, s)
        )
    if fn == "group_points_wrapper":
        idx = _index(g, n, (b, m, s), device, missing)
        return dict(b=b, c=c, n=n, npoints=m, nsample=s, points=r(b, c, n), idx=idx, out=out(b, c, m, s))
    if fn == "group_points_grad_wrapper":
        idx = _index(g, n, (b, m, s), device, missing)
        return dict(
            b=b, c=c, n=n, npoints=m, nsample=s, grad_out=r(b, c, m, s), idx=idx, grad_points=r(b, c, n)
        )
    if fn == "gather_points_wrapper":
        idx = _index(g, n, (b, m), device, missing)
        return dict(b=b, c=c, n=n, npoints=m, points=r(b, c, n), idx=idx, out=out(b, c, m))
    if fn == "gather_points_grad_wrapper":
        idx = _index(g, n, (b, m), device, missing)
        return dict(b=b, c=c, n=n, npoints=m, grad_out=r(b, c, m), idx=idx, grad_points=r(b, c, n))
    if fn == "three_nn_wrapper":
        return dict(b=b, n=n, m=m, unknown=r(b, n, 3), known=r(b, m, 3), dist2=out(b, n, 3), idx=i32(b, n, 3))
    if fn == "three_interpolate_wrapper":
        idx = _index(g, m, (b, n, 3), device, missing)
        return dict(b=b, c=c, m=m, n=n, points=r(b, c, m), idx=idx, weight=r(b, n, 3), out=out(b, c, n))
    if fn == "three_interpolate_grad_wrapper":
        idx = _index(g, m, (b, n, 3), device, missing)
        return dict(
            b=b, c=c, n=n, m=m, grad_out=r(b, c, n), idx=idx, weight=r(b, n, 3), grad_points=r(b, c, m)
        )
    raise AssertionError(fn)


def call(fn, args):
    return getattr(pn2, fn)(*args.values())


def outputs(fn, args):
    return {name: args[name] for name in FUNCTIONS[fn][1]}


# ------------------------------------------------------------------------------------------
# brute-force references (float64 on CPU), from the arguments before the call


def _f64(t):
    return t.detach().cpu().double()


def _float32_square(radius: float) -> float:
    r = torch.tensor(radius, dtype=torch.float32)
    return float(r * r)


def _gather(points, idx):
    """points [b, c, n] at idx [b, k] (-1: 0) -> [b, c, k]."""
    b, c, _ = points.shape
    safe = idx.long().clamp_min(0)
    picked = torch.gather(points, 2, safe[:, None, :].expand(b, c, -1)) if points.shape[2] else None
    if picked is None:
        return torch.zeros(b, c, idx.shape[1], dtype=points.dtype)
    return torch.where(idx[:, None, :] >= 0, picked, torch.zeros((), dtype=points.dtype))


def _scatter(grad_out, idx, n, weight=None):
    """grad [b, c, n] = sum over slots k with idx[b, k] >= 0 of weight[b, k] * grad_out[b, c, k]."""
    b, c, _ = grad_out.shape
    grad = torch.zeros(b, c, n, dtype=grad_out.dtype)
    for bi in range(b):
        for k in range(idx.shape[1]):
            j = int(idx[bi, k])
            if j >= 0:
                grad[bi, :, j] += grad_out[bi, :, k] * (1.0 if weight is None else weight[bi, k])
    return grad


def _fps_reference(a):
    b, n, m, pts = a["b"], a["n"], a["m"], a["points"]
    idx = torch.zeros(b, m, dtype=torch.int32)  # slots past the cloud's size: 0
    for bi in range(b if n else 0):
        best = ((pts[bi] - pts[bi, 0]) ** 2).sum(1)
        for j in range(1, min(m, n)):
            idx[bi, j] = int(best.argmax())
            best = torch.minimum(best, ((pts[bi] - pts[bi, idx[bi, j]]) ** 2).sum(1))
    return {"idx": idx}


def _ball_query_reference(a):
    radius, s = a["radius"], a["nsample"]
    r2 = radius * radius if a["xyz"].dtype == torch.float64 else _float32_square(radius)
    idx = a["idx"].cpu().clone()  # empty balls keep their row
    for bi in range(a["b"]):
        for q in range(a["m"]):
            d2 = ((a["xyz"][bi].double() - a["new_xyz"][bi, q].double()) ** 2).sum(1)
            hits = [j for j in range(a["n"]) if float(d2[j]) < r2][:s]
            if hits:
                idx[bi, q] = torch.tensor(hits + [hits[0]] * (s - len(hits)), dtype=torch.int32)
    return {"idx": idx}


def _three_nn_reference(a):
    b, n, m = a["b"], a["n"], a["m"]
    dist2 = torch.full((b, n, 3), math.inf, dtype=torch.float64)
    idx = torch.zeros(b, n, 3, dtype=torch.int32)
    for bi in range(b):
        for i in range(n):
            d2 = ((a["known"][bi] - a["unknown"][bi, i]) ** 2).sum(1)
            order = sorted(range(m), key=lambda j: (float(d2[j]), j))[:3]
            for slot, j in enumerate(order):
                dist2[bi, i, slot], idx[bi, i, slot] = d2[j], j
    return {"dist2": dist2, "idx": idx}


def _three_interpolate_reference(a):
    idx, w = a["idx"].cpu(), a["weight"]
    out = torch.zeros(a["b"], a["c"], a["n"], dtype=torch.float64)
    for t in range(3):
        out += _gather(a["points"], idx[:, :, t]) * torch.where(idx[:, :, t] >= 0, w[:, :, t], 0)[:, None, :]
    return {"out": out}


def _three_interpolate_grad_reference(a):
    b, n = a["b"], a["n"]
    flat, w = a["idx"].cpu().reshape(b, n * 3), a["weight"].reshape(b, n * 3)
    spread = a["grad_out"].repeat_interleave(3, dim=2)
    return {"grad_points": a["grad_points"] + _scatter(spread, flat, a["m"], w)}


def _group_reference(a):
    b, c, m, s = a["b"], a["c"], a["npoints"], a["nsample"]
    return {"out": _gather(a["points"], a["idx"].cpu().reshape(b, m * s)).reshape(b, c, m, s)}


def _group_grad_reference(a):
    b, c, m, s = a["b"], a["c"], a["npoints"], a["nsample"]
    grad = _scatter(a["grad_out"].reshape(b, c, m * s), a["idx"].cpu().reshape(b, m * s), a["n"])
    return {"grad_points": a["grad_points"] + grad}


REFERENCES = {
    "furthest_point_sampling_wrapper": _fps_reference,
    "ball_query_wrapper": _ball_query_reference,
    "group_points_wrapper": _group_reference,
    "group_points_grad_wrapper": _group_grad_reference,
    "gather_points_wrapper": lambda a: {"out": _gather(a["points"], a["idx"].cpu())},
    "gather_points_grad_wrapper": lambda a: {
        "grad_points": a["grad_points"] + _scatter(a["grad_out"], a["idx"].cpu(), a["n"])
    },
    "three_nn_wrapper": _three_nn_reference,
    "three_interpolate_wrapper": _three_interpolate_reference,
    "three_interpolate_grad_wrapper": _three_interpolate_grad_reference,
}


def reference(fn, args):
    """The expected out-parameters after the call (float64 / int32 on CPU). Float inputs are
    taken in float64 (the ball query keeps its inputs' dtype: its r^2 depends on it)."""
    a = {
        k: (_f64(v) if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in args.items()
    }
    if fn == "ball_query_wrapper":
        a["xyz"], a["new_xyz"] = args["xyz"].detach().cpu(), args["new_xyz"].detach().cpu()
    return REFERENCES[fn](a)


def assert_outputs(fn, args, expected, dtype):
    tol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 2e-2)
    for name, want in expected.items():
        got = args[name].cpu()
        if want.dtype == torch.int32:
            assert got.dtype == torch.int32 and torch.equal(got, want), (name, got, want)
        else:
            assert got.dtype == dtype
            torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol, equal_nan=True)


def check_call(fn, args, dtype=torch.float32):
    expected = reference(fn, args)
    assert call(fn, args) == 1
    assert_outputs(fn, args, expected, dtype)


# ------------------------------------------------------------------------------------------
# results, sizes and threads

SIZES = {
    "plain": {},
    "b=0": {"b": 0},
    "n=0": {"n": 0},
    "m=0": {"m": 0},
    "c=0": {"c": 0},
    "nsample=0": {"s": 0},
    "n=1": {"n": 1},
    "m>n": {"n": 3, "m": 6},
}


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_results_match_the_reference_for_every_size(fn, device, sizes, threads):
    for dtype in FLOATS[device]:
        check_call(fn, build(fn, device, dtype, seed=threads, missing=True, **sizes), dtype)


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_larger_clouds_match_the_reference(fn, device, threads):
    # large enough for the CPU kd-tree searches and the thread split
    check_call(fn, build(fn, device, b=3, n=300, m=40, c=5, s=8, seed=7), torch.float32)


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_and_int64_indices_give_the_same_results(fn, device):
    args = build(fn, device, n=11, m=5)
    expected = reference(fn, args)
    for name in list(args):
        value = args[name]
        if isinstance(value, torch.Tensor) and name not in FUNCTIONS[fn][1] and value.dim() >= 2:
            # the same values in transposed memory
            args[name] = value.transpose(0, -1).contiguous().transpose(0, -1)
            assert not args[name].is_contiguous() or value.shape[0] == 1
        if name == "idx" and "idx" not in FUNCTIONS[fn][1]:
            args[name] = args[name].long()
    assert call(fn, args) == 1
    assert_outputs(fn, args, expected, torch.float32)


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_out_parameters_are_written_in_place(fn, device):
    args = build(fn, device, n=11, m=5)
    expected = reference(fn, args)
    parents = {}
    for name in FUNCTIONS[fn][1]:
        value = args[name]
        # every other element of a larger tensor: the skipped ones must stay as they are
        parent = torch.full((*value.shape[:-1], 2 * value.shape[-1]), 5, dtype=value.dtype, device=device)
        parent[..., ::2] = value
        args[name], parents[name] = parent[..., ::2], parent
    assert call(fn, args) == 1
    assert_outputs(fn, args, expected, torch.float32)
    for name, parent in parents.items():
        assert bool((parent[..., 1::2] == 5).all()), name


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_out_parameters_requiring_grad_are_written(fn):
    args = build(fn, "cpu")
    expected = reference(fn, args)
    for name, kind in FUNCTIONS[fn][1].items():
        if kind == "float":
            args[name].requires_grad_()
    assert call(fn, args) == 1
    assert_outputs(fn, args, expected, torch.float32)


def test_ball_query_keeps_the_rows_of_empty_balls_and_pads_short_ones():
    xyz = torch.tensor([[[0.0, 0, 0], [0.1, 0, 0], [0.3, 0, 0], [5, 5, 5]]])
    new_xyz = torch.tensor([[[0.0, 0, 0], [9.0, 9, 9]]])
    idx = torch.full((1, 2, 3), 7, dtype=torch.int32)
    pn2.ball_query_wrapper(1, 4, 2, 0.3, 3, new_xyz, xyz, idx)
    assert idx.tolist() == [[[0, 1, 0], [7, 7, 7]]]


# ------------------------------------------------------------------------------------------
# the ball query radius: one rule for every dtype


@pytest.mark.parametrize("radius", [1e20, 1e39, 1e200, math.inf])
@pytest.mark.parametrize("device", DEVICES)
def test_a_radius_whose_square_overflows_takes_every_point(device, radius):
    for dtype in FLOATS[device]:
        big = 3e4 if dtype == torch.float16 else 1e18
        xyz = torch.tensor([[[0.0, 0, 0], [big, 0, 0], [-big, big, 0], [3.0, 4, 5]]], dtype=dtype).to(device)
        idx = torch.full((1, 2, 6), 9, dtype=torch.int32, device=device)
        assert pn2.ball_query_wrapper(1, 4, 2, radius, 6, xyz[:, :2], xyz, idx) == 1
        assert idx.tolist() == [[[0, 1, 2, 3, 0, 0]] * 2], dtype


@pytest.mark.parametrize(
    "radius, error, words",
    [
        (-1.0, ValueError, "radius must be a number >= 0"),
        (-1e-30, ValueError, "radius must be a number >= 0"),
        (-math.inf, ValueError, "radius must be a number >= 0"),
        (math.nan, ValueError, "radius must be a number >= 0"),
        (None, TypeError, "radius must be a number, got NoneType"),
        (True, TypeError, "radius must be a number, got bool"),
        ("0.5", TypeError, "radius must be a number, got str"),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_bad_radii_are_refused_for_every_dtype(device, radius, error, words):
    for dtype in FLOATS[device]:
        args = build("ball_query_wrapper", device, dtype)
        args["radius"] = radius
        with pytest.raises(error, match=f"pointnet2_batch_cuda.ball_query_wrapper: {words}"):
            call("ball_query_wrapper", args)
        assert not bool(args["idx"].any())  # nothing written


@pytest.mark.parametrize("device", DEVICES)
def test_radius_zero_finds_no_point(device):
    for dtype in FLOATS[device]:
        for radius in (0, 0.0):
            args = build("ball_query_wrapper", device, dtype)
            args["radius"] = radius
            args["new_xyz"] = args["xyz"][:, :4].clone()  # queries on points: d^2 = 0 is not < 0
            args["idx"].fill_(3)
            assert call("ball_query_wrapper", args) == 1
            assert bool((args["idx"] == 3).all())


# ------------------------------------------------------------------------------------------
# out-parameters: dtype, shape, type, device, layout, aliasing


def _out_cases():
    for fn, (_, outs) in FUNCTIONS.items():
        for name in outs:
            yield pytest.param(fn, name, id=f"{fn}-{name}")


OUT_CASES = list(_out_cases())


@pytest.mark.parametrize("fn, name", OUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_out_parameters_of_another_dtype_are_refused(device, fn, name):
    args = build(fn, device)
    want = torch.int32 if FUNCTIONS[fn][1][name] == "index" else torch.float32
    for dtype in ALL_DTYPES:
        if dtype == want:
            continue
        args[name] = torch.zeros(args[name].shape, dtype=dtype, device=device)
        with pytest.raises(TypeError, match=rf"pointnet2_batch_cuda.{fn}: {name} must have dtype {want}"):
            call(fn, args)
        assert not bool(args[name].any())  # nothing written


def test_a_uint8_index_is_not_truncated():
    # the hostile review's case: pick 263 written as 7 into a uint8 idx
    xyz = torch.rand(1, 300, 3, generator=torch.Generator().manual_seed(0))
    idx = torch.zeros(1, 300, dtype=torch.uint8)
    with pytest.raises(TypeError, match="idx must have dtype torch.int32, got torch.uint8"):
        pn2.furthest_point_sampling_wrapper(1, 300, 300, xyz, None, idx)


@pytest.mark.parametrize("fn, name", OUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_out_parameters_of_another_shape_are_refused(device, fn, name):
    args = build(fn, device)
    shape = tuple(args[name].shape)
    dtype = args[name].dtype
    wrong = [(1,) + shape[1:], shape[:-1] + (1,), shape[:-1], shape + (1,), (0,) + shape[1:], ()]
    for bad in wrong:
        args[name] = torch.zeros(bad, dtype=dtype, device=device)
        with pytest.raises(ValueError, match=rf"pointnet2_batch_cuda.{fn}: {name} must have shape"):
            call(fn, args)


@pytest.mark.parametrize("fn, name", OUT_CASES)
@pytest.mark.parametrize("bad", [None, [0, 1], 3.0], ids=["None", "list", "float"])
def test_out_parameters_that_are_not_tensors_are_refused(fn, name, bad):
    args = build(fn, "cpu")
    args[name] = bad
    with pytest.raises(TypeError, match=rf"pointnet2_batch_cuda.{fn}: {name} must be a torch\.\w+ tensor"):
        call(fn, args)


@pytest.mark.parametrize("fn, name", OUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_out_parameters_on_another_device_are_refused(device, fn, name):
    args = build(fn, device)
    other = "meta" if device == "cpu" else "cpu"
    args[name] = torch.zeros(args[name].shape, dtype=args[name].dtype, device=other)
    with pytest.raises(ValueError, match=rf"pointnet2_batch_cuda.{fn}: {name} (is on|is on device type)"):
        call(fn, args)


@pytest.mark.parametrize("fn, name", OUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_expanded_out_parameters_are_refused(device, fn, name):
    args = build(fn, device)
    value = args[name]
    args[name] = value[:1].expand(value.shape) if value.shape[0] > 1 else value
    with pytest.raises(
        ValueError, match=rf"pointnet2_batch_cuda.{fn}: {name} has elements that share memory"
    ):
        call(fn, args)


def _aliasing_pairs():
    for fn, (names, outs) in FUNCTIONS.items():
        for out in outs:
            for name in names:
                if name != out and name != "temp" and name not in ("radius",) and len(name) > 1:
                    if name not in ("nsample", "npoints"):
                        yield pytest.param(fn, out, name, id=f"{fn}-{out}-{name}")


@pytest.mark.parametrize("fn, out, name", list(_aliasing_pairs()))
@pytest.mark.parametrize("device", DEVICES)
def test_out_parameters_sharing_memory_with_an_argument_are_refused(device, fn, out, name):
    args = build(fn, device)
    source, target = args[name], args[out]
    size = max(source.numel() * source.element_size(), target.numel() * target.element_size())
    raw = torch.zeros(size + 8, dtype=torch.uint8, device=device)
    shared = raw[: source.numel() * source.element_size()].view(source.dtype).view(source.shape)
    shared.copy_(source)
    args[name] = shared
    args[out] = raw[: target.numel() * target.element_size()].view(target.dtype).view(target.shape)
    before = shared.clone()
    with pytest.raises(ValueError, match=rf"pointnet2_batch_cuda.{fn}: (\w+) shares memory with (\w+)"):
        call(fn, args)
    assert torch.equal(shared, before)  # the input was not overwritten


def test_three_nn_outputs_sharing_memory_are_refused():
    args = build("three_nn_wrapper", "cpu")
    raw = torch.zeros(args["dist2"].numel(), dtype=torch.float32)
    args["dist2"] = raw.view(args["dist2"].shape)
    args["idx"] = raw.view(torch.int32).view(args["idx"].shape)
    with pytest.raises(ValueError, match="three_nn_wrapper: idx shares memory with dist2"):
        call("three_nn_wrapper", args)


# ------------------------------------------------------------------------------------------
# inputs: sizes, dtypes, types, devices, values


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_size_arguments_must_be_ints_at_least_zero_and_match_the_tensors(fn):
    names = FUNCTIONS[fn][0]
    for name in names:
        if name not in ("b", "c", "n", "m", "npoints", "nsample"):
            continue
        args = build(fn, "cpu")
        for bad, error, words in [
            (-1, ValueError, f"{name} must be >= 0, got -1"),
            (2.0, TypeError, f"{name} must be an int, got float"),
            (True, TypeError, f"{name} must be an int, got bool"),
            ("2", TypeError, f"{name} must be an int, got str"),
            (None, TypeError, f"{name} must be an int, got NoneType"),
            (torch.tensor(2.0), TypeError, f"{name} must be an int, got Tensor"),
            (args[name] + 1, ValueError, "must have shape"),
        ]:
            args[name] = bad
            with pytest.raises(error, match=rf"pointnet2_batch_cuda.{fn}: .*{words}"):
                call(fn, args)


def _input_cases():
    for fn, (names, outs) in FUNCTIONS.items():
        for name in names:
            if name not in outs and name not in ("b", "c", "n", "m", "npoints", "nsample", "radius"):
                yield pytest.param(fn, name, id=f"{fn}-{name}")


INPUT_CASES = list(_input_cases())


@pytest.mark.parametrize("fn, name", INPUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_inputs_of_a_dtype_not_taken_are_refused(device, fn, name):
    args = build(fn, device)
    value = args[name]
    if name == "idx":
        taken = (torch.int32, torch.int64)
    elif name == "temp":
        taken = (torch.float16, torch.bfloat16, torch.float32, torch.float64)  # scratch, never read
    elif fn == "furthest_point_sampling_wrapper":
        taken = tuple(FLOATS[device]) + ((torch.bfloat16,) if device == "cuda" else ())
    else:
        taken = (torch.float32,)  # the dtype of the other arguments
    for dtype in ALL_DTYPES:
        args[name] = value.to(dtype)
        if dtype in taken:
            assert call(fn, args) == 1
            continue
        with pytest.raises(TypeError, match=rf"pointnet2_batch_cuda.{fn}: \w+ (has|must have) dtype"):
            call(fn, args)


@pytest.mark.parametrize("fn, name", INPUT_CASES)
@pytest.mark.parametrize("bad", [[0.0], 1.0, "x"], ids=["list", "float", "str"])
def test_inputs_that_are_not_tensors_are_refused(fn, name, bad):
    args = build(fn, "cpu")
    args[name] = bad
    with pytest.raises(TypeError, match=rf"pointnet2_batch_cuda.{fn}: {name} must be"):
        call(fn, args)


def test_temp_may_be_none():
    args = build("furthest_point_sampling_wrapper", "cpu")
    args["temp"] = None
    check_call("furthest_point_sampling_wrapper", args)


@pytest.mark.parametrize("fn, name", INPUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_inputs_of_another_shape_are_refused(device, fn, name):
    args = build(fn, device)
    value = args[name]
    for shape in [
        (value.shape[0] + 1,) + value.shape[1:],
        value.shape[:-1] + (value.shape[-1] + 1,),
        value.shape[1:],
    ]:
        args[name] = torch.zeros(shape, dtype=value.dtype, device=device)
        with pytest.raises(ValueError, match=rf"pointnet2_batch_cuda.{fn}: {name} must have shape"):
            call(fn, args)


@pytest.mark.parametrize("fn, name", INPUT_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_inputs_on_another_device_are_refused(device, fn, name):
    args = build(fn, device)
    other = "meta" if device == "cpu" else "cpu"
    args[name] = args[name].to(other)
    with pytest.raises(ValueError, match=rf"pointnet2_batch_cuda.{fn}: \w+ (is on|is on device type)"):
        call(fn, args)


@pytest.mark.parametrize("fn, name", [(fn, name) for fn, names in COORDINATES.items() for name in names])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e19], ids=["nan", "inf", "-inf", "1e19"])
@pytest.mark.parametrize("device", DEVICES)
def test_bad_coordinates_are_refused(device, fn, name, value):
    args = build(fn, device)
    args[name][-1, -1, 1] = value
    words = "contains nan or inf" if not math.isfinite(value) else "holds a coordinate of magnitude 1e\\+19"
    with raises_bad_value(device, rf"pointnet2_batch_cuda.{fn}: {name} {words}", CUDA_BAD_COORDINATE):
        call(fn, args)


@pytest.mark.parametrize("fn", [fn for fn in FUNCTIONS if fn not in COORDINATES])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_features_propagate_as_in_the_reference(device, fn, value):
    names = [n for n in FUNCTIONS[fn][0] if n in ("points", "grad_out", "weight")]
    for name in names:
        args = build(fn, device)
        args[name].view(-1)[::5] = value
        check_call(fn, args)


@pytest.mark.parametrize(
    "fn, n_name",
    [("group_points_wrapper", "n"), ("gather_points_wrapper", "n"), ("three_interpolate_wrapper", "m")],
)
@pytest.mark.parametrize("bad", [-2, "n"], ids=["below", "above"])
@pytest.mark.parametrize("device", DEVICES)
def test_index_values_out_of_range_are_refused(device, fn, n_name, bad):
    for grad in (False, True):
        name = fn.replace("_wrapper", "_grad_wrapper") if grad else fn
        args = build(name, device)
        args["idx"].view(-1)[-1] = args[n_name] if bad == "n" else bad
        with raises_bad_value(device, rf"pointnet2_batch_cuda.{name}: idx values must lie in -1\.\.", "idx"):
            call(name, args)


# ------------------------------------------------------------------------------------------
# gradients: openpoints' autograd.Functions over the forward and gradient functions


class Group(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, idx):
        b, c, n = points.shape
        _, m, s = idx.shape
        out = points.new_empty(b, c, m, s)
        pn2.group_points_wrapper(b, c, n, m, s, points, idx, out)
        ctx.save_for_backward(idx)
        ctx.n = n
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (idx,) = ctx.saved_tensors
        b, c, m, s = grad_out.shape
        grad = grad_out.new_zeros(b, c, ctx.n)
        pn2.group_points_grad_wrapper(b, c, ctx.n, m, s, grad_out.contiguous(), idx, grad)
        return grad, None


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, idx):
        b, c, n = points.shape
        out = points.new_empty(b, c, idx.shape[1])
        pn2.gather_points_wrapper(b, c, n, idx.shape[1], points, idx, out)
        ctx.save_for_backward(idx)
        ctx.n = n
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (idx,) = ctx.saved_tensors
        b, c, m = grad_out.shape
        grad = grad_out.new_zeros(b, c, ctx.n)
        pn2.gather_points_grad_wrapper(b, c, ctx.n, m, grad_out.contiguous(), idx, grad)
        return grad, None


class Interpolate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, idx, weight):
        b, c, m = points.shape
        n = idx.shape[1]
        out = points.new_empty(b, c, n)
        pn2.three_interpolate_wrapper(b, c, m, n, points, idx, weight, out)
        ctx.save_for_backward(idx, weight)
        ctx.m = m
        return out

    @staticmethod
    def backward(ctx, grad_out):
        idx, weight = ctx.saved_tensors
        b, c, n = grad_out.shape
        grad = grad_out.new_zeros(b, c, ctx.m)
        pn2.three_interpolate_grad_wrapper(b, c, n, ctx.m, grad_out.contiguous(), idx, weight, grad)
        return grad, None, None


@pytest.mark.parametrize(
    "sizes", [{}, {"m": 0}, {"n": 1}, {"b": 0}, {"c": 0}], ids=["plain", "m=0", "n=1", "b=0", "c=0"]
)
@pytest.mark.parametrize("device", DEVICES)
def test_gradient_functions_are_the_adjoints_of_the_forward_ones(device, sizes):
    g = torch.Generator().manual_seed(3)
    b, c, n, m = sizes.get("b", 2), sizes.get("c", 3), sizes.get("n", 6), sizes.get("m", 4)
    points = torch.rand(b, c, n, generator=g, dtype=torch.float64).to(device).requires_grad_()
    idx = _index(g, n, (b, m, 3), device, missing=True)
    assert torch.autograd.gradcheck(lambda p: Group.apply(p, idx), (points,))
    assert torch.autograd.gradcheck(lambda p: Gather.apply(p, idx[:, :, 0].contiguous()), (points,))
    weight = torch.rand(b, m, 3, generator=g, dtype=torch.float64).to(device)
    assert torch.autograd.gradcheck(lambda p: Interpolate.apply(p, idx, weight), (points,))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_with_nothing_gathered_are_zero(device):
    points = torch.rand(2, 3, 5, dtype=torch.float64, device=device, requires_grad=True)
    for out in (
        Group.apply(points, torch.zeros(2, 0, 4, dtype=torch.int32, device=device)),
        Group.apply(points, torch.zeros(2, 4, 0, dtype=torch.int32, device=device)),
        Gather.apply(points, torch.zeros(2, 0, dtype=torch.int32, device=device)),
        Gather.apply(points, torch.full((2, 3), -1, dtype=torch.int32, device=device)),
    ):
        (grad,) = torch.autograd.grad(out.sum(), points)
        assert torch.equal(grad, torch.zeros_like(points))
    empty = torch.rand(2, 3, 0, dtype=torch.float64, device=device, requires_grad=True)
    out = Gather.apply(empty, torch.full((2, 4), -1, dtype=torch.int32, device=device))
    assert torch.equal(out, torch.zeros(2, 3, 4, dtype=torch.float64, device=device))
    (grad,) = torch.autograd.grad(out.sum(), empty)
    assert grad.shape == (2, 3, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_functions_add_into_their_out_parameter(device):
    for fn in ("group_points_grad_wrapper", "gather_points_grad_wrapper", "three_interpolate_grad_wrapper"):
        args = build(fn, device)
        args["grad_points"].fill_(1.5)
        check_call(fn, args)
