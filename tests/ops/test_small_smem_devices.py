"""CUDA kernels on GPUs with less shared memory per block than Hopper's 227 KB (99 KB on most
consumer cards, 64 KB on Turing): the planners keep within the device's opt-in limit or pick a
path that needs less. POINTOPS_SMEM_LIMIT_KB makes a large GPU plan as a smaller one, and
refuses a launch that asks for more, as that GPU would. Skipped without a GPU."""

import pointops
import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (torch.cuda.is_available() and pointops.build_info()["cuda"]),
        reason="needs a CUDA device and a CUDA build of pointops",
    ),
]

LIMITS_KB = [99, 64, 48]


def _kernels(fn):
    """Names of the CUDA kernels that fn launches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]


def _grads(op, feat, *args):
    """op's output and the feature gradient for a fixed upstream gradient."""
    feat = feat.detach().clone().requires_grad_(True)
    out = op(feat, *args)
    g = torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)
    (grad,) = torch.autograd.grad(out, feat, g)
    return out.detach(), grad


@pytest.mark.parametrize("limit_kb", LIMITS_KB)
def test_gathers_and_their_backward_match_the_cpu(limit_kb):
    g = torch.Generator().manual_seed(limit_kb)
    # rows of 64 KB (staged three at a time on Hopper: 8192 picks read more than a row),
    # sparse and dense backward rows
    feat = torch.randn(2, 16, 16384, generator=g)
    idx = torch.randint(-1, 16384, (2, 8192), generator=g)
    grouped = torch.randint(-1, 16384, (2, 512, 16), generator=g)
    interp_feat = torch.randn(2, 64, 4096, generator=g)
    idx3 = torch.randint(0, 4096, (2, 16384, 3), generator=g)
    w = torch.rand(2, 16384, 3, generator=g)
    small_feat = torch.randn(4, 40, 1024, generator=g)
    small_idx3 = torch.randint(0, 1024, (4, 4096, 3), generator=g)
    small_w = torch.rand(4, 4096, 3, generator=g)
    cases = {
        "gather_points": (pointops.gather_points, feat, idx),
        "group_points": (pointops.group_points, feat, grouped),
        "three_interpolate N4096": (pointops.three_interpolate, interp_feat, idx3, w),
        "three_interpolate N1024": (pointops.three_interpolate, small_feat, small_idx3, small_w),
    }
    want = {name: _grads(op, *args) for name, (op, *args) in cases.items()}
    with pointops._tuning.override(SMEM_LIMIT_KB=limit_kb):
        got = {name: _grads(op, *(a.cuda() for a in args)) for name, (op, *args) in cases.items()}
        pointops.check_errors()
    for name in cases:
        # deterministic sums in the CPU's order: the same bits
        assert torch.equal(got[name][0].cpu(), want[name][0]), name
        assert torch.equal(got[name][1].cpu(), want[name][1]), name


@pytest.mark.parametrize("limit_kb", LIMITS_KB)
def test_fps_picks_the_cpu_points(limit_kb):
    xyz = torch.rand(2, 30000, 3, generator=torch.Generator().manual_seed(1))
    want = pointops.furthest_point_sample(xyz, 200)
    with pointops._tuning.override(SMEM_LIMIT_KB=limit_kb):
        got = pointops.furthest_point_sample(xyz.cuda(), 200)
    assert torch.equal(got.cpu(), want)


def test_rows_too_long_for_the_limit_are_gathered_directly():
    # A 64 KB row: staged on Hopper (8192 picks read more than the row), too long for a 64 KB
    # device (60 KB once the static share is set aside).
    feat = torch.randn(2, 8, 16384, device="cuda")
    idx = torch.randint(0, 16384, (2, 8192), device="cuda")
    assert any("gather_staged_kernel" in k for k in _kernels(lambda: pointops.gather_points(feat, idx)))
    with pointops._tuning.override(SMEM_LIMIT_KB=64):
        kernels = _kernels(lambda: pointops.gather_points(feat, idx))
    assert not any("gather_staged_kernel" in k for k in kernels)
    assert any("gather_forward_kernel" in k for k in kernels)
