"""gather_points and group_points take the common call (int64 idx, a float feat on the same device)
without converting or re-checking it in Python (ops._plain_gather_args); every other call goes
through the checks that convert it or name what is wrong. Hostile inputs on the fast path must
give what the checked path gives: the same values and gradients, the same errors.

The checked path is reached with the same indices as int32, which it converts to int64."""

import pointops
import pytest
import torch

GATHERS = {
    "gather_points": (pointops.gather_points, 2),
    "group_points": (pointops.group_points, 3),
}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def index(B, M, N, dims, device, seed=0):
    shape = (B, M) if dims == 2 else (B, M, 3)
    g = torch.Generator().manual_seed(seed)
    if N == 0:
        return torch.full(shape, -1, dtype=torch.int64).to(device)
    return torch.randint(-1, N, shape, generator=g).to(device)


def both_paths(fn, feat, idx):
    """(fast, checked): the call with int64 idx, and the same call through the conversion."""
    return fn(feat, idx), fn(feat, idx.to(torch.int32))


def raised(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*args)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name", GATHERS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "B, C, M, N", [(0, 3, 4, 5), (2, 0, 4, 5), (2, 3, 0, 5), (2, 3, 4, 0), (1, 1, 1, 1), (3, 5, 17, 40)]
)
def test_values_and_gradients_match_the_checked_path(device, threads, name, dtype, B, C, M, N):
    fn, dims = GATHERS[name]
    feat = torch.randn(B, C, N, dtype=torch.float64).to(device=device, dtype=dtype).requires_grad_(True)
    idx = index(B, M, N, dims, device)
    if device == "cpu" and dtype in (torch.float16, torch.bfloat16):  # CUDA-only dtypes
        fast_error = raised(fn, feat, idx)
        assert fast_error[0] is TypeError and "float16/bfloat16 run on CUDA only" in fast_error[1]
        assert raised(fn, feat, idx.to(torch.int32)) == fast_error
        return
    fast, checked = both_paths(fn, feat, idx)
    assert fast.dtype == dtype and fast.device == feat.device
    assert torch.equal(fast, checked)
    if fast.numel() == 0:
        return
    grad = torch.randn(fast.shape, dtype=torch.float64).to(device=device, dtype=dtype)
    (g_fast,) = torch.autograd.grad(fast, feat, grad)
    (g_checked,) = torch.autograd.grad(checked, feat, grad)
    assert torch.equal(g_fast, g_checked)


@pytest.mark.parametrize("name", GATHERS)
def test_missing_indices_give_zero_and_nan_inf_features_pass_through(device, name):
    fn, dims = GATHERS[name]
    feat = torch.tensor([[[1.0, float("nan"), float("inf"), -float("inf")]]], device=device)
    idx = torch.tensor([[-1, 0, 1, 2, 3, -1]], device=device)
    idx = idx if dims == 2 else idx.view(1, 3, 2)
    fast, checked = both_paths(fn, feat, idx)
    expected = torch.tensor([0.0, 1.0, float("nan"), float("inf"), -float("inf"), 0.0], device=device)
    assert torch.equal(fast.isnan(), checked.isnan())
    torch.testing.assert_close(fast.flatten(), expected, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(checked.flatten(), expected, equal_nan=True, rtol=0, atol=0)


def out_of_range_result(fn, feat, idx):
    """(output, error type, message) of a call given an out-of-range index. On CPU the call raises
    (no output). On CUDA the checks do not wait for the GPU: the call returns, what it read
    through the bad index is NaN, and pointops.check_errors() raises what the GPU found."""
    if feat.device.type != "cuda":
        return (None, *raised(fn, feat, idx))
    pointops.check_errors()  # nothing left from other tests
    out = fn(feat, idx)
    return (out, *raised(pointops.check_errors))


@pytest.mark.parametrize("name", GATHERS)
@pytest.mark.parametrize("bad", [-2, 5, 2**40, -(2**40)])
def test_out_of_range_indices_raise_the_same_error(device, name, bad):
    fn, dims = GATHERS[name]
    feat = torch.rand(2, 3, 5, device=device)
    idx = index(2, 4, 5, dims, device)
    idx.view(-1)[3] = bad
    fast_out, fast_type, fast_message = out_of_range_result(fn, feat, idx)
    assert fast_type is ValueError
    if fast_out is None:
        assert "idx values must lie in -1..4 (-1 = no point)" in fast_message
        assert str(bad) in fast_message.rsplit("got", 1)[1]  # the range it found names the bad index
    else:
        assert "idx held a value outside its range" in fast_message
        assert fast_out.isnan().any()
    if -(2**31) <= bad < 2**31:  # int32 holds it: the checked path must say the same
        checked_out, *checked_error = out_of_range_result(fn, feat, idx.to(torch.int32))
        assert tuple(checked_error) == (fast_type, fast_message)
        if fast_out is not None:
            assert torch.equal(checked_out.isnan(), fast_out.isnan())
            assert torch.equal(checked_out.nan_to_num(), fast_out.nan_to_num())


@pytest.mark.parametrize("name", GATHERS)
def test_non_contiguous_inputs_give_the_contiguous_result(device, name):
    fn, dims = GATHERS[name]
    feat_full = torch.randn(2, 6, 11, device=device)
    feat = feat_full[:, ::2, 1:]  # [2, 3, 10], strided
    idx_full = index(2, 9, 10, dims, device)
    idx = idx_full.transpose(0, 1).contiguous().transpose(0, 1)  # same values, transposed strides
    assert not feat.is_contiguous() and not idx.is_contiguous()
    fast, checked = both_paths(fn, feat, idx)
    assert torch.equal(fast, fn(feat.contiguous(), idx.contiguous()))
    assert torch.equal(fast, checked)


@pytest.mark.parametrize("name", GATHERS)
@pytest.mark.parametrize(
    "feat_dtype, error", [(torch.int64, TypeError), (torch.bool, TypeError), (torch.complex64, TypeError)]
)
def test_features_that_are_not_floats_are_refused(device, name, feat_dtype, error):
    fn, dims = GATHERS[name]
    feat = torch.zeros(1, 2, 5, dtype=feat_dtype, device=device)
    kind, message = raised(fn, feat, index(1, 3, 5, dims, device))
    assert issubclass(kind, error) and "feat" in message


@pytest.mark.parametrize("name", GATHERS)
def test_wrong_shapes_name_the_layout(device, name):
    fn, dims = GATHERS[name]
    layout = "[B, M]" if dims == 2 else "[B, M, K]"
    feat = torch.rand(2, 3, 5, device=device)
    other_dims = torch.zeros((2, 4, 1, 1)[: 5 - dims], dtype=torch.int64, device=device)
    for idx in (other_dims, index(3, 4, 5, dims, device)):  # wrong rank, wrong batch
        kind, message = raised(fn, feat, idx)
        assert kind is ValueError and f"idx must have shape {layout} with B = 2" in message
    kind, message = raised(fn, torch.rand(2, 5, device=device), index(2, 4, 5, dims, device))
    assert kind is ValueError and "feat" in message


@pytest.mark.parametrize("name", GATHERS)
def test_indices_that_are_not_integers_are_refused(device, name):
    fn, dims = GATHERS[name]
    feat = torch.rand(1, 2, 5, device=device)
    idx = index(1, 3, 5, dims, device).to(torch.float32)
    kind, message = raised(fn, feat, idx)
    assert issubclass(kind, TypeError) and "idx" in message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", GATHERS)
def test_inputs_on_different_devices_are_refused(name):
    fn, dims = GATHERS[name]
    feat = torch.rand(1, 2, 5, device="cuda")
    kind, message = raised(fn, feat, index(1, 3, 5, dims, "cpu"))
    assert kind is ValueError and "device" in message
