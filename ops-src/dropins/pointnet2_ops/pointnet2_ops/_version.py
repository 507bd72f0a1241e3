# The API mirrored: Pointnet2_PyTorch's pointnet2_ops_lib 3.0.0. The post-release number counts
# this package's own releases of it (the conda recipe repeats the version; tests/dropins checks).
__version__ = "3.0.0.post1"
