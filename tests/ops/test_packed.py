"""Packed batches (pointops.packed): every op equals the padded op run cloud by cloud, with
global row indices; gradients are right; bad row pointers are refused; the layout converters
round-trip. On CUDA too when present (the `device` fixture)."""

import pointops
import pytest
import torch
from pointops import packed

COUNTS = [37, 0, 120, 5, 64]  # an empty cloud and a tiny one among them
QUERY_COUNTS = [10, 3, 0, 5, 40]


def batch(device, dtype=torch.float32, seed=0, counts=COUNTS, query_counts=QUERY_COUNTS):
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(sum(counts), 3, generator=g, dtype=torch.float64).to(device, dtype)
    query = torch.rand(sum(query_counts), 3, generator=g, dtype=torch.float64).to(device, dtype)
    ptr = packed.ptr_from_counts(torch.tensor(counts, device=device))
    query_ptr = packed.ptr_from_counts(torch.tensor(query_counts, device=device))
    return xyz, ptr, query, query_ptr


def clouds(ptr):
    bounds = ptr.tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def globalize(idx, first):
    return torch.where(idx >= 0, idx + first, idx)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_knn_and_ball_query_equal_the_padded_ops_per_cloud(device, dtype):
    xyz, ptr, query, query_ptr = batch(device, dtype)
    dist2, idx = packed.knn(xyz, ptr, query, query_ptr, 6)
    b_idx, b_count, b_dist2 = packed.ball_query(xyz, ptr, query, query_ptr, 0.3, 8, return_dist2=True)
    x_idx, x_count = packed.ball_query(xyz, ptr, query, query_ptr, 0.3, 8, inclusive=False)
    for (p0, p1), (q0, q1) in zip(clouds(ptr), clouds(query_ptr), strict=True):
        if q1 == q0:
            continue
        if p1 == p0:
            assert (
                (idx[q0:q1] == -1).all() and torch.isinf(dist2[q0:q1]).all() and (b_count[q0:q1] == 0).all()
            )
            continue
        d, i = pointops.knn(xyz[None, p0:p1], query[None, q0:q1], 6)
        assert torch.equal(idx[q0:q1], globalize(i[0], p0)) and torch.equal(dist2[q0:q1], d[0])
        i, c, d = pointops.ball_query(xyz[None, p0:p1], query[None, q0:q1], 0.3, 8, return_dist2=True)
        assert torch.equal(b_idx[q0:q1], globalize(i[0], p0)) and torch.equal(b_count[q0:q1], c[0])
        assert torch.equal(b_dist2[q0:q1], d[0])
        strict = torch.ops.pointops.ball_query(
            xyz[None, p0:p1], query[None, q0:q1], 0.3, 8, None, None, False, False
        )
        assert torch.equal(x_idx[q0:q1], globalize(strict[0][0], p0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fps_equals_the_padded_op_per_cloud(device, dtype):
    xyz, ptr, _, _ = batch(device, dtype, seed=1)
    sample_counts = torch.tensor([10, 4, 30, 9, 16], device=device)  # 9 > 5 points: -1 padded
    sample_ptr = packed.ptr_from_counts(sample_counts)
    picks = packed.furthest_point_sample(xyz, ptr, sample_ptr, max_points=max(COUNTS))
    unbounded = packed.furthest_point_sample(xyz, ptr, sample_ptr, num_samples=int(sample_counts.sum()))
    assert torch.equal(picks, unbounded)
    for (p0, p1), (s0, s1) in zip(clouds(ptr), clouds(sample_ptr), strict=True):
        if p1 == p0:
            assert (picks[s0:s1] == -1).all()
            continue
        expected = pointops.furthest_point_sample(xyz[None, p0:p1], s1 - s0)[0]
        assert torch.equal(picks[s0:s1], globalize(expected, p0))


def test_gather_and_interpolate(device):
    g = torch.Generator().manual_seed(2)
    feat = torch.rand(50, 7, generator=g, dtype=torch.float64).to(device)
    idx = torch.randint(-1, 50, (12, 3), generator=g).to(device)
    weight = torch.rand(12, 3, generator=g, dtype=torch.float64).to(device)
    rows = packed.gather(feat, idx)
    safe = feat[idx.clamp_min(0)] * (idx >= 0).unsqueeze(-1)
    assert rows.shape == (12, 3, 7) and torch.equal(rows, safe)
    expected = (safe * weight.unsqueeze(-1)).sum(1)
    torch.testing.assert_close(packed.interpolate(feat, idx, weight), expected)


def test_gradients(device):
    xyz, ptr, query, query_ptr = batch(device, torch.float64, seed=3)
    xyz.requires_grad_(True)
    query.requires_grad_(True)
    # (slots with no point hold +inf, whose finite differences are nan: compare the others)
    assert torch.autograd.gradcheck(
        lambda a, b: packed.knn(a, ptr, b, query_ptr, 4)[0].nan_to_num(posinf=0.0), (xyz, query)
    )
    assert torch.autograd.gradcheck(
        lambda a, b: packed.ball_query(a, ptr, b, query_ptr, 0.4, 5, return_dist2=True)[2].nan_to_num(
            posinf=0.0
        ),
        (xyz, query),
    )
    g = torch.Generator().manual_seed(4)
    feat = torch.rand(30, 4, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    idx = torch.randint(-1, 30, (9, 3), generator=g).to(device)
    weight = torch.rand(9, 3, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f, w: packed.interpolate(f, idx, w), (feat, weight))
    assert torch.autograd.gradgradcheck(lambda f, w: packed.interpolate(f, idx, w), (feat, weight))
    assert torch.autograd.gradcheck(lambda f: packed.gather(f, idx), (feat,))


def _shifted(values: torch.Tensor, shift: int, device) -> torch.Tensor:
    """values on device as a view `shift` elements into a larger buffer (off 16-byte alignment)."""
    buffer = torch.zeros(values.numel() + shift, dtype=values.dtype, device=device)
    buffer[shift:] = values.reshape(-1).to(device)
    return buffer[shift:].view(values.shape)


def _gather_rows_and_grad(feat_values, idx, grad_values, shift, device):
    feat = _shifted(feat_values, shift, device).detach().requires_grad_(True)
    rows = packed.gather(feat, idx.to(device))
    rows.backward(_shifted(grad_values, shift, device))
    return rows.detach(), feat.grad


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 8, 64, 67])
def test_gather_rows_every_row_width_and_alignment(device, channels):
    # CUDA copies rows in 16/8/4-byte chunks and sums the gradient 16 bytes of channels at a time
    # where the row size and the pointers allow; a view one element into its buffer takes the
    # narrower paths. All give the CPU kernels' bits (float32/float64); float16/bfloat16 (CUDA
    # only) agree between the paths.
    if device == "cpu":
        pytest.skip("the CPU kernel is the reference here")
    g = torch.Generator().manual_seed(channels)
    idx = torch.randint(-1, 500, (700, 16), generator=g)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        feat = torch.rand(500, channels, generator=g).to(dtype)
        grad = torch.rand(700, 16, channels, generator=g).to(dtype)
        runs = [_gather_rows_and_grad(feat, idx, grad, shift, device) for shift in (0, 1)]
        if dtype in (torch.float32, torch.float64):
            runs.append(_gather_rows_and_grad(feat, idx, grad, 0, "cpu"))
        for rows, feat_grad in runs[1:]:
            assert torch.equal(rows.cpu(), runs[0][0].cpu()), dtype
            assert torch.equal(feat_grad.cpu(), runs[0][1].cpu()), dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(300, 64, 200, 16), (70000, 8, 3000, 4), (40, 3, 500, 3)])
def test_int32_indices_give_the_int64_bits(device, dtype, shape):
    # int32 (Pointcept's) indices are read as they are, without a conversion copy; the results,
    # gradients included, are the int64 ones bit for bit (shape 2: few used rows among many)
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("float16 runs on CUDA only")
    P, C, Q, T = shape
    g = torch.Generator().manual_seed(P)
    feat = torch.rand(P, C, generator=g).to(device, dtype)
    idx = torch.randint(-1, P, (Q, T), generator=g).to(device)
    grad = torch.rand(Q, T, C, generator=g).to(device, dtype)
    weight = torch.rand(Q, T, generator=g).to(device, dtype)
    runs = []
    for index in (idx, idx.int()):
        f = feat.clone().requires_grad_(True)
        w = weight.clone().requires_grad_(True)
        rows = packed.gather(f, index)
        (rows * grad).sum().backward()
        mixed = packed.interpolate(f, index, w)
        grad_f, grad_w = torch.autograd.grad(mixed, (f, w), grad[:, 0])
        runs.append((rows, f.grad, mixed, grad_f, grad_w))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)


def test_both_row_buildings_give_the_same_gradient_bits(device):
    # the radix-sort rows (default below 2^31 entries) and the counting-sort rows (beyond, or
    # forced by the knob) sum each row in the same ascending entry order
    if device == "cpu":
        pytest.skip("the two row buildings are CUDA paths")
    g = torch.Generator().manual_seed(9)
    feat = torch.rand(5000, 64, generator=g).to(device).requires_grad_(True)
    idx = torch.randint(-1, 5000, (20000, 16), generator=g).to(device)
    grad = torch.randn(20000, 16, 64, generator=g).to(device)
    grads = []
    for counted in (None, 1):
        with pointops._tuning.override(GATHER_ROWS_COUNTED=counted):
            grads.append(torch.autograd.grad(packed.gather(feat, idx), feat, grad)[0])
    assert torch.equal(grads[0], grads[1])


def test_feature_gradient_is_deterministic_and_exact(device):
    feat = torch.zeros(4, 2, dtype=torch.float32, device=device, requires_grad=True)
    idx = torch.tensor([[1], [1], [3], [1]], device=device)
    grad = torch.tensor([[1e8, 1.0], [1.0, 2.0], [5.0, 5.0], [-1e8, 3.0]], device=device)
    packed.gather(feat, idx).view(4, 2).backward(grad)
    # rows summed in ascending entry order: (1e8 + 1) - 1e8 = 0 in float32
    expected = torch.tensor([[0.0, 0.0], [0.0, 6.0], [0.0, 0.0], [5.0, 5.0]], device=device)
    assert torch.equal(feat.grad, expected)


def test_bad_row_pointers_are_refused_on_cpu():
    xyz, ptr, query, query_ptr = batch("cpu")
    with pytest.raises(ValueError, match="ptr decreases at entry 2"):
        packed.knn(xyz, torch.tensor([0, 50, 40, 200, 226, 226]), query, query_ptr, 2)
    with pytest.raises(ValueError, match=r"ptr\[0\] = 3; a row pointer starts at 0"):
        packed.knn(xyz, ptr + 3, query, query_ptr, 2)
    with pytest.raises(ValueError, match="query_ptr ends at 57 but query has 58 rows"):
        packed.ball_query(xyz, ptr, query, torch.tensor([0, 10, 13, 13, 18, 57]), 0.1, 2)
    with pytest.raises(ValueError, match="ptr describes 5 clouds but query_ptr 2"):
        packed.knn(xyz, ptr, query, torch.tensor([0, 8, 58]), 2)
    with pytest.raises(ValueError, match=r"must have shape \[P, 3\]"):
        packed.knn(xyz[None], ptr, query, query_ptr, 2)


def test_layout_converters_round_trip():
    counts = torch.tensor([3, 0, 2, 5])
    ptr = packed.ptr_from_counts(counts)
    assert ptr.tolist() == [0, 3, 3, 5, 10]
    assert torch.equal(packed.counts_from_ptr(ptr), counts)
    offset = packed.offset_from_ptr(ptr)
    assert offset.dtype == torch.int32 and offset.tolist() == [3, 3, 5, 10]
    assert torch.equal(packed.ptr_from_offset(offset), ptr)
    batch_ids = packed.batch_from_ptr(ptr)
    assert batch_ids.tolist() == [0, 0, 0, 2, 2, 3, 3, 3, 3, 3]
    assert torch.equal(packed.ptr_from_batch(batch_ids, num_clouds=4), ptr)
    assert packed.ptr_from_batch(batch_ids).tolist() == [0, 3, 3, 5, 10]


def test_compiles_with_fullgraph():
    xyz, ptr, query, query_ptr = batch("cpu", seed=5)

    def step(a, b):
        d, i = packed.knn(a, ptr, b, query_ptr, 3)
        feat = packed.gather(torch.cat([a, a], 1), i)
        return d.sum() + feat.sum()

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(xyz, query), step(xyz, query))


def test_opcheck_of_the_packed_ops():
    xyz, ptr, query, query_ptr = batch("cpu", torch.float64, seed=6)
    feat = torch.rand(xyz.shape[0], 4, dtype=torch.float64, requires_grad=True)
    idx = torch.randint(-1, xyz.shape[0], (8, 3))
    weight = torch.rand(8, 3, dtype=torch.float64, requires_grad=True)
    ops = torch.ops.pointops
    for op, args in [
        (ops.knn_packed, (xyz, ptr, query, query_ptr, 3)),
        (ops.ball_query_packed, (xyz, ptr, query, query_ptr, 0.3, 4, True, True)),
        (ops.furthest_point_sample_packed, (xyz, ptr, ptr, xyz.shape[0], 0)),
        (ops.gather_rows, (feat, idx, weight)),
        (ops.gather_rows, (feat, idx.int(), None)),
    ]:
        torch.library.opcheck(
            op, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
        )
