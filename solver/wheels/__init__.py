"""pip / uv wheels of pointops: one abi3 wheel per platform and CUDA major.

    build_wheel("pointops-cu13", Path("ops-src"), Path("out/wheels"))   # -> the repaired wheel
    audit_wheel(Path("out/wheels/pointops_cu13-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"))
        # -> [] when it is what the knowledge says it should be, else the problems found

The distributions (pointops, pointops-cu12, pointops-cu13) and the conda build each one carries
are listed in solver/knowledge/pointops_builds.yaml (`wheels:`). They all install the same
`pointops` import package: the CUDA wheels hold the CPU kernels too, and the binary loads under
any torch >= 2.10 (stable ABI) and any Python >= 3.10 (limited API). libtorch is never bundled;
it comes from the user's torch. The CUDA runtime is linked statically.

pointnet2_ops (`pure_wheels:` of the same file) is a pure-Python wheel that runs on them: one
py3-none-any file, built and audited by its own rules (solver/wheels/pure.py).
"""

from solver.wheels.audit import audit_wheel
from solver.wheels.build import build_wheel

__all__ = ["audit_wheel", "build_wheel"]
