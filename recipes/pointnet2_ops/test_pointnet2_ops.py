"""The recipe's test: upstream's import lines work, and one set-abstraction layer of each kind
(multi-scale, single-scale, group-all) and a feature-propagation layer run forward and backward on
the CPU, with the output shapes of Pointnet2_PyTorch's pointnet2_ops."""

from __future__ import annotations

import pointnet2_ops
import pointnet2_ops.pointnet2_modules as pointnet2_modules
import torch
from pointnet2_ops import pointnet2_utils
from pointnet2_ops.pointnet2_modules import PointnetFPModule, PointnetSAModule, PointnetSAModuleMSG


def main() -> None:
    assert pointnet2_ops.pointnet2_modules is pointnet2_modules
    assert pointnet2_utils.FurthestPointSampling.apply is pointnet2_utils.furthest_point_sample
    torch.manual_seed(0)
    xyz, features = torch.rand(2, 64, 3), torch.randn(2, 3, 64)
    msg = PointnetSAModuleMSG(16, [0.2, 0.4], [8, 16], [[3, 8, 16], [3, 8, 32]])
    new_xyz, new_features = msg(xyz, features)
    assert new_xyz.shape == (2, 16, 3) and new_features.shape == (2, 48, 16)
    _, single = PointnetSAModule([48, 32], npoint=4, radius=0.5, nsample=8)(new_xyz, new_features)
    assert single.shape == (2, 32, 4)
    none_xyz, pooled = PointnetSAModule([48, 64])(new_xyz, new_features)
    assert none_xyz is None and pooled.shape == (2, 64, 1)
    out = PointnetFPModule([48 + 3, 16])(xyz, new_xyz, features, new_features)
    assert out.shape == (2, 16, 64)
    (out.sum() + pooled.sum() + single.sum()).backward()
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in msg.parameters())
    print(f"pointnet2_ops recipe test passed ({pointnet2_ops.__version__}, {pointnet2_ops.__file__})")


if __name__ == "__main__":
    main()
