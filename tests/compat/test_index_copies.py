"""The drop-in layers take the peers' int32 indices with at most one int64 copy per call: each
copy is an allocation and, on CUDA, a kernel launch on the host-bound path of an eager step."""

import pointops
import torch
from pointops.compat import pointcept
from pointops.compat import pointnet2_utils as pn2
from torch.utils._python_dispatch import TorchDispatchMode


class Int64Copies(TorchDispatchMode):
    """Records the shape of every int32 tensor copied to int64 inside the block."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (
            func is torch.ops.aten._to_copy.default
            and args[0].dtype == torch.int32
            and kwargs.get("dtype") == torch.int64
        ):
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **kwargs)


def test_pointnet2_gathers_copy_int32_indices_once(device):
    g = torch.Generator().manual_seed(0)
    feat = torch.randn(2, 3, 8, generator=g).to(device)
    idx = torch.randint(0, 8, (2, 5), generator=g, dtype=torch.int32).to(device)
    groups = torch.randint(0, 8, (2, 5, 4), generator=g, dtype=torch.int32).to(device)
    near = torch.randint(0, 8, (2, 5, 3), generator=g, dtype=torch.int32).to(device)
    weight = torch.rand(2, 5, 3, generator=g).to(device)
    calls = [
        (lambda: pn2.gather_operation(feat, idx), idx, lambda: pointops.gather_points(feat, idx.long())),
        (
            lambda: pn2.grouping_operation(feat, groups),
            groups,
            lambda: pointops.group_points(feat, groups.long()),
        ),
        (
            lambda: pn2.three_interpolate(feat, near, weight),
            near,
            lambda: pointops.three_interpolate(feat, near.long(), weight),
        ),
    ]
    for call, index, native in calls:
        with Int64Copies() as copies:
            out = call()
        assert copies.shapes == [tuple(index.shape)]
        assert torch.equal(out, native())


def test_pointcept_interpolation_reads_the_knn_indices_as_they_are(device):
    g = torch.Generator().manual_seed(1)
    xyz, new_xyz = torch.rand(30, 3, generator=g).to(device), torch.rand(20, 3, generator=g).to(device)
    offset = torch.tensor([12, 30], dtype=torch.int32, device=device)
    new_offset = torch.tensor([8, 20], dtype=torch.int32, device=device)
    feat = torch.rand(30, 4, generator=g).to(device).requires_grad_(True)
    with Int64Copies() as copies:
        out = pointcept.interpolation(xyz, new_xyz, feat, offset, new_offset)
    assert (20, 3) not in copies.shapes  # the [n, 3] neighbour indices

    # the same values and feature gradient as with the indices made int64 first
    idx, dist = pointcept.knn_query(3, xyz, offset, new_xyz, new_offset)
    assert idx.dtype == torch.int32
    grad_out = torch.rand(20, 4, generator=g).to(device)
    (got,) = torch.autograd.grad(out, feat, grad_out)
    wanted_out = pointops.packed.interpolate(feat, idx.long(), pointcept._inverse_distance_weights(dist))
    (wanted,) = torch.autograd.grad(wanted_out, feat, grad_out)
    assert torch.equal(out, wanted_out)
    assert torch.equal(got, wanted)
