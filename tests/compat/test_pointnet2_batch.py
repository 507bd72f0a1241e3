"""The top-level `pointnet2_batch_cuda` module (openpoints' ops, out-parameter style)."""

import pytest
import torch

pn2 = pytest.importorskip("pointnet2_batch_cuda")


def test_fps_and_gather(device):
    g = torch.Generator().manual_seed(0)
    xyz = torch.rand(2, 64, 3, generator=g).to(device)
    idx = torch.zeros(2, 16, dtype=torch.int32, device=device)
    temp = torch.full((2, 64), 1e10, device=device)
    assert pn2.furthest_point_sampling_wrapper(2, 64, 16, xyz, temp, idx) == 1
    for b in range(2):
        pts, picks = xyz[b].cpu().double(), [0]
        best = ((pts - pts[0]) ** 2).sum(1)
        for _ in range(15):
            picks.append(int(best.argmax()))
            best = torch.minimum(best, ((pts - pts[picks[-1]]) ** 2).sum(1))
        assert idx[b].tolist() == picks
    feat = torch.rand(2, 5, 64, generator=g).to(device)
    out = torch.empty(2, 5, 16, device=device)
    pn2.gather_points_wrapper(2, 5, 64, 16, feat, idx, out)
    assert torch.equal(out, torch.gather(feat, 2, idx.long()[:, None, :].expand(-1, 5, -1)))
    grad_out, grad = torch.rand(2, 5, 16, generator=g).to(device), torch.zeros(2, 5, 64, device=device)
    pn2.gather_points_grad_wrapper(2, 5, 64, 16, grad_out, idx, grad)
    ref = torch.zeros(2, 5, 64, device=device).scatter_add(
        2, idx.long()[:, None, :].expand(-1, 5, -1), grad_out
    )
    assert torch.allclose(grad, ref)


def test_ball_query_strict_padding_and_untouched_empty_rows():
    xyz = torch.tensor([[[0.0, 0, 0], [0.1, 0, 0], [0.3, 0, 0], [5, 5, 5]]])
    new_xyz = torch.tensor([[[0.0, 0, 0], [9.0, 9, 9]]])
    idx = torch.full((1, 2, 3), 7, dtype=torch.int32)  # openpoints passes zeros; any value stays
    pn2.ball_query_wrapper(1, 4, 2, 0.3, 3, new_xyz, xyz, idx)
    assert idx[0, 0].tolist() == [0, 1, 0]  # 0.3 is not < 0.3; short ball repeats its first hit
    assert idx[0, 1].tolist() == [7, 7, 7]


def test_group_points_and_grad(device):
    g = torch.Generator().manual_seed(1)
    feat = torch.rand(2, 4, 10, generator=g).to(device)
    idx = torch.randint(0, 10, (2, 3, 5), generator=g, dtype=torch.int32).to(device)
    out = torch.empty(2, 4, 3, 5, device=device)
    pn2.group_points_wrapper(2, 4, 10, 3, 5, feat, idx, out)
    flat = idx.long().reshape(2, 1, 15).expand(-1, 4, -1)
    assert torch.equal(out, torch.gather(feat, 2, flat).reshape(2, 4, 3, 5))
    grad_out, grad = torch.rand(2, 4, 3, 5, generator=g).to(device), torch.zeros(2, 4, 10, device=device)
    pn2.group_points_grad_wrapper(2, 4, 10, 3, 5, grad_out, idx, grad)
    ref = torch.zeros(2, 4, 10, device=device).scatter_add(2, flat, grad_out.reshape(2, 4, 15))
    assert torch.allclose(grad, ref)


def test_three_nn_and_interpolate(device):
    g = torch.Generator().manual_seed(2)
    unknown, known = torch.rand(1, 6, 3, generator=g).to(device), torch.rand(1, 2, 3, generator=g).to(device)
    dist2, idx = torch.empty(1, 6, 3, device=device), torch.empty(1, 6, 3, dtype=torch.int32, device=device)
    pn2.three_nn_wrapper(1, 6, 2, unknown, known, dist2, idx)
    d = ((unknown[0, :, None] - known[0, None]) ** 2).sum(-1)
    assert torch.allclose(dist2[0, :, :2], d.sort(1).values, atol=1e-6)
    assert bool(torch.isinf(dist2[0, :, 2]).all()) and bool((idx[0, :, 2] == 0).all())  # only 2 known
    feat, w = torch.rand(1, 4, 2, generator=g).to(device), torch.rand(1, 6, 3, generator=g).to(device)
    w[..., 2] = 0
    out = torch.empty(1, 4, 6, device=device)
    pn2.three_interpolate_wrapper(1, 4, 2, 6, feat, idx, w, out)
    ref = (feat[0][:, idx[0].long()] * w[0]).sum(-1)
    assert torch.allclose(out[0], ref, atol=1e-6)
    grad = torch.zeros(1, 4, 2, device=device)
    go = torch.rand(1, 4, 6, generator=g).to(device)
    pn2.three_interpolate_grad_wrapper(1, 4, 6, 2, go, idx, w, grad)
    ref = torch.zeros(4, 2, device=device)
    for i in range(6):
        for j in range(3):
            ref[:, idx[0, i, j]] += go[0, :, i] * w[0, i, j]
    assert torch.allclose(grad[0], ref, atol=1e-6)


def test_shape_mismatch_is_named():
    with pytest.raises(ValueError, match=r"points must have shape \[2, 8, 3\]"):
        pn2.furthest_point_sampling_wrapper(
            2, 8, 4, torch.rand(2, 9, 3), None, torch.zeros(2, 4, dtype=torch.int32)
        )


def test_finds_a_compiled_module_on_sys_path(tmp_path, monkeypatch):
    # at import, such a file would be loaded instead of pointops' functions (with a warning)
    assert pn2._compiled_elsewhere() is None
    (tmp_path / "pointnet2_batch_cuda.abi3.so").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert pn2._compiled_elsewhere() == str(tmp_path / "pointnet2_batch_cuda.abi3.so")
