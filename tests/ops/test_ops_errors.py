"""Bad input gives an error that names the argument, through the Python API and through direct
torch.ops calls (the C++ checks), never a crash."""

import math

import pointops
import pytest
import torch

ops = torch.ops.pointops


def pts(B=1, N=4, dtype=torch.float32, device="cpu"):
    return torch.rand(B, N, 3, dtype=dtype, device=device)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (
            lambda: pointops.furthest_point_sample(torch.rand(4, 3), 2),
            ValueError,
            "xyz must have shape [B, N, 3]",
        ),
        (lambda: pointops.furthest_point_sample(torch.rand(1, 4, 2), 2), ValueError, "xyz must have shape"),
        (
            lambda: pointops.furthest_point_sample(torch.ones(1, 4, 3, dtype=torch.int64), 2),
            TypeError,
            "xyz has dtype",
        ),
        (lambda: pointops.furthest_point_sample(pts(dtype=torch.float16), 2), TypeError, "CUDA only"),
        (lambda: pointops.furthest_point_sample([[0, 0, 0]], 2), TypeError, "xyz must be a torch.Tensor"),
        (lambda: pointops.furthest_point_sample(pts(), 0), ValueError, "k must be > 0"),
        (lambda: pointops.furthest_point_sample(pts(), 2.5), TypeError, "k must be an int"),
        (lambda: pointops.furthest_point_sample(pts(), 2, start=-1), ValueError, "start"),
        (
            lambda: pointops.furthest_point_sample(pts(), 2, lengths=torch.tensor([5])),
            ValueError,
            "lengths values",
        ),
        (
            lambda: pointops.furthest_point_sample(pts(), 2, lengths=torch.tensor([1.0])),
            TypeError,
            "lengths has dtype",
        ),
        (
            lambda: pointops.furthest_point_sample(pts(B=2), 2, lengths=torch.tensor([1])),
            ValueError,
            "lengths must have shape [B]",
        ),
        (
            lambda: pointops.furthest_point_sample(torch.tensor([[[0.0, math.nan, 0]]]), 1),
            ValueError,
            "xyz contains nan",
        ),
        (
            lambda: pointops.knn(pts(), torch.tensor([[[math.inf, 0, 0]]]), 1),
            ValueError,
            "query contains nan or inf",
        ),
        (lambda: pointops.knn(pts(), pts(dtype=torch.float64), 1), TypeError, "query has dtype"),
        (lambda: pointops.knn(pts(B=2), pts(B=3), 1), ValueError, "batch size"),
        (lambda: pointops.knn(pts(), pts(), -3), ValueError, "k must be > 0"),
        (lambda: pointops.ball_query(pts(), pts(), -0.1, 2), ValueError, "radius must be finite and >= 0"),
        (lambda: pointops.ball_query(pts(), pts(), math.nan, 2), ValueError, "radius"),
        (
            lambda: pointops.ball_query(pts(), pts(), 0.1, 2, query_lengths=torch.tensor([-1])),
            ValueError,
            "query_lengths values",
        ),
        (
            lambda: pointops.gather_points(torch.rand(1, 2, 5), torch.tensor([[5]])),
            ValueError,
            "idx values must lie in -1..4",
        ),
        (lambda: pointops.gather_points(torch.rand(1, 2, 5), torch.tensor([[-2]])), ValueError, "idx values"),
        (
            lambda: pointops.gather_points(torch.rand(1, 2, 5), torch.tensor([[0.0]])),
            TypeError,
            "idx has dtype",
        ),
        (
            lambda: pointops.gather_points(torch.rand(2, 5), torch.tensor([[0]])),
            ValueError,
            "feat must have shape [B, C, N]",
        ),
        (
            lambda: pointops.group_points(torch.rand(1, 2, 5), torch.tensor([[0]])),
            ValueError,
            "idx must have shape [B, M, K]",
        ),
        (
            lambda: pointops.three_interpolate(
                torch.rand(1, 2, 5), torch.zeros(1, 3, 3, dtype=torch.long), torch.rand(1, 3, 2)
            ),
            ValueError,
            "weight must have the shape of idx",
        ),
        (
            lambda: pointops.three_interpolate(
                torch.rand(1, 2, 5),
                torch.zeros(1, 3, 3, dtype=torch.long),
                torch.rand(1, 3, 3, dtype=torch.float64),
            ),
            TypeError,
            "weight has dtype",
        ),
    ],
)
def test_python_api_errors_name_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: ops.furthest_point_sample(torch.rand(4, 3), 2, None, 0), "xyz must have shape [B, N, 3]"),
        (lambda: ops.furthest_point_sample(pts(), 0, None, 0), "k must be > 0"),
        (lambda: ops.furthest_point_sample(pts(), 2, torch.tensor([9]), 0), "lengths[0] = 9 is outside 0..4"),
        (
            lambda: ops.furthest_point_sample(pts(), 2, torch.tensor([1], dtype=torch.int32), 0),
            "lengths must be an int64",
        ),
        (
            lambda: ops.furthest_point_sample(torch.full((1, 2, 3), math.nan), 1, None, 0),
            "xyz contains a non-finite",
        ),
        (lambda: ops.knn(pts(), pts(dtype=torch.float64), 1, None, None), "query must have the same dtype"),
        (
            lambda: ops.ball_query(pts(), pts(), -1.0, 1, None, None, True, False),
            "radius must be finite and >= 0",
        ),
        (lambda: ops.gather(torch.rand(1, 2, 5), torch.tensor([[[7]]]), None), "idx holds index 7"),
        (
            lambda: ops.gather(torch.rand(1, 2, 5), torch.tensor([[[1]]]), torch.rand(1, 2, 1)),
            "weight must have the same shape",
        ),
        (
            lambda: ops.gather(torch.rand(1, 2, 5), torch.tensor([[1]]), torch.rand(1, 1, 1)),
            "a weighted gather needs idx of shape [B, P, T]",
        ),
        (
            lambda: ops.gather(torch.rand(1, 2, 5), torch.tensor([1]), None),
            "idx must have shape [B, P, T] (or [B, P])",
        ),
        (
            lambda: ops.gather_backward_feat(torch.rand(1, 2, 1), torch.tensor([[[3]]]), None, 2),
            "idx holds index 3",
        ),
        (
            lambda: ops.gather_backward_weight(
                torch.rand(1, 2, 2), torch.rand(1, 2, 5), torch.tensor([[[1]]])
            ),
            "grad_out must have shape",
        ),
        (
            lambda: ops.furthest_point_sample(torch.ones(1, 4, 3, dtype=torch.float16), 2, None, 0),
            "CUDA only",
        ),
    ],
)
def test_direct_op_calls_are_checked_in_cpp(call, words):
    with pytest.raises(RuntimeError) as info:
        call()
    assert words in str(info.value)


def test_cuda_tensor_mixed_with_cpu_is_rejected():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with pytest.raises(ValueError, match="same device"):
        pointops.knn(pts(), pts(device="cuda"), 1)


def test_errors_use_the_callers_argument_names():
    from pointops.compat import pointnet2_utils as pn2

    with pytest.raises(ValueError, match="unknown must have shape"):
        pointops.three_nn(torch.rand(2, 3), pts())
    with pytest.raises(ValueError, match="new_xyz contains nan"):
        pn2.ball_query(0.1, 2, pts(), torch.full((1, 1, 3), math.nan))


def test_device_type_checks():
    from pointops import ops as native

    with pytest.raises(ValueError, match="has no CUDA kernels; reinstall"):
        native._check_device_type("cuda", "xyz", has_cuda_kernels=False)
    native._check_device_type("cuda", "xyz", has_cuda_kernels=True)
    with pytest.raises(ValueError, match="device type 'meta'"):
        pointops.knn(torch.rand(1, 3, 3, device="meta"), torch.rand(1, 3, 3, device="meta"), 1)


def _meta(*size, dtype=torch.float32):
    return torch.zeros(*size, dtype=dtype, device="meta")


# One tensor of each call on the meta device beside CPU ones: the dispatcher sends such a call to
# the op's fake kernel, which must refuse it as the binding refuses mixed devices (it once
# returned an uninitialized CPU tensor).
@pytest.mark.parametrize(
    "call",
    [
        lambda: ops.gather(torch.rand(1, 2, 8), _meta(1, 4, 1, dtype=torch.int64), None),
        lambda: ops.gather(torch.rand(1, 2, 8), torch.zeros(1, 4, 3, dtype=torch.int64), _meta(1, 4, 3)),
        lambda: ops.gather_backward_feat(torch.rand(1, 2, 4), _meta(1, 4, 1, dtype=torch.int64), None, 8),
        lambda: ops.gather_backward_weight(_meta(1, 2, 4), torch.rand(1, 2, 8), torch.zeros(1, 4, 3).long()),
        lambda: ops.knn(pts(N=8), _meta(1, 4, 3), 2, None, None),
        lambda: ops.knn(pts(N=8), pts(N=4), 2, _meta(1, dtype=torch.int64), None),
        lambda: ops.ball_query(pts(N=8), _meta(1, 4, 3), 0.3, 2, None, None, True, False),
        lambda: ops.furthest_point_sample(pts(N=8), 2, _meta(1, dtype=torch.int64), 0),
        lambda: ops.grid_cluster(torch.rand(8, 3), _meta(3), None, None),
        lambda: ops.knn_packed(
            torch.rand(8, 3), _meta(2, dtype=torch.int64), torch.rand(4, 3), torch.tensor([0, 4]), 2
        ),
        lambda: ops.gather_rows(torch.rand(8, 2), _meta(4, 1, dtype=torch.int64), None),
    ],
)
def test_raw_ops_refuse_a_meta_tensor_beside_cpu_ones(call):
    with pytest.raises(RuntimeError, match="every tensor argument must be on one device, got cpu, meta"):
        call()


def test_raw_ops_on_meta_tensors_alone_still_give_shapes():
    out = ops.gather(_meta(2, 3, 8), _meta(2, 5, 1, dtype=torch.int64), None)
    assert out.device.type == "meta" and out.shape == (2, 3, 5)
    dist2, idx = ops.knn(_meta(2, 8, 3), _meta(2, 4, 3), 3, None, None)
    assert dist2.shape == idx.shape == (2, 4, 3) and idx.dtype == torch.int64
