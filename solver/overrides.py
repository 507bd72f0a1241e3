"""CONDA_OVERRIDE_CUDA, CONDA_OVERRIDE_CUDA_ARCH and CONDA_OVERRIDE_GLIBC, read one way everywhere.

conda, pixi and py-rattler refuse a malformed value, so the solver does too: `read_overrides`
raises UsageError naming the variable and the fix, instead of ignoring the value in one place and
reading it differently in another.

    read_overrides(os.environ)   # -> Overrides(cuda="12.4", cuda_arch="8.6", glibc=None)

cuda: None when unset, "" when set empty (conda's "no CUDA driver"), else "major.minor".
cuda_arch: None when unset or empty, else "major.minor" (the form conda and rattler accept).
glibc: None when unset or empty, else "major.minor".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from solver.errors import UsageError

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.\d+)?$")
_ARCH = re.compile(r"^(\d{1,2})\.(\d)$")


@dataclass(frozen=True)
class Overrides:
    cuda: str | None = None
    cuda_arch: str | None = None
    glibc: str | None = None


def _version(name: str, value: str, example: str) -> str:
    match = _VERSION.match(value)
    if not match:
        raise UsageError(
            f"{name}={value!r} is not a version",
            f"set it like {name}={example} (conda, pixi and rattler refuse it too), or unset it",
        )
    return f"{int(match.group(1))}.{int(match.group(2) or 0)}"


def read_overrides(env: Mapping[str, str]) -> Overrides:
    cuda = env.get("CONDA_OVERRIDE_CUDA")
    if cuda is not None:
        cuda = cuda.strip()
        cuda = _version("CONDA_OVERRIDE_CUDA", cuda, "12.4") if cuda else ""
    arch = (env.get("CONDA_OVERRIDE_CUDA_ARCH") or "").strip() or None
    if arch is not None:
        match = _ARCH.match(arch)
        if not match:
            raise UsageError(
                f"CONDA_OVERRIDE_CUDA_ARCH={arch!r} is not a compute capability",
                "set it as major.minor, e.g. CONDA_OVERRIDE_CUDA_ARCH=8.6 (the form conda and "
                "rattler accept), or unset it",
            )
        arch = f"{int(match.group(1))}.{match.group(2)}"
    glibc = (env.get("CONDA_OVERRIDE_GLIBC") or "").strip() or None
    if glibc is not None:
        glibc = _version("CONDA_OVERRIDE_GLIBC", glibc, "2.28")
    return Overrides(cuda=cuda, cuda_arch=arch, glibc=glibc)
