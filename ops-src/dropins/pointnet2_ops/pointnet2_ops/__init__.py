"""pointnet2_ops served by pointops: `from pointnet2_ops import pointnet2_utils` and
`from pointnet2_ops import pointnet2_modules` work as with Pointnet2_PyTorch's compiled library
(3.0.0), with pointops' CPU and CUDA kernels underneath. What differs: README.md of this
distribution and docs/pointnet2_ops.md."""

from pointnet2_ops import pointnet2_modules, pointnet2_utils
from pointnet2_ops._version import __version__

__all__ = ["__version__", "pointnet2_modules", "pointnet2_utils"]
