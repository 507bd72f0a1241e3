"""Wheel file names (PEP 427 / the binary distribution format) and the pointops distributions."""

from __future__ import annotations

import re
import sys
import sysconfig
from dataclasses import dataclass

from solver.errors import SolverError

PYTHON_TAG = "cp310"  # the limited API of Python 3.10: one wheel for every CPython >= 3.10
ABI_TAG = "abi3"


@dataclass(frozen=True)
class WheelName:
    distribution: str  # normalized for file names: "pointops_cu13"
    version: str
    python: str
    abi: str
    platform: str  # "manylinux_2_34_x86_64", "win_amd64", "macosx_11_0_arm64"

    @property
    def filename(self) -> str:
        return f"{self.distribution}-{self.version}-{self.python}-{self.abi}-{self.platform}.whl"

    @property
    def dist_info(self) -> str:
        return f"{self.distribution}-{self.version}.dist-info"


def file_name_of(distribution: str) -> str:
    """'pointops-cu13' -> 'pointops_cu13' (the binary distribution format's escaping)."""
    return re.sub(r"[-_.]+", "_", distribution).lower()


def parse_wheel_name(filename: str) -> WheelName:
    stem = filename.removesuffix(".whl")
    parts = stem.split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise SolverError(f"{filename} is not a wheel file name (name-version-python-abi-platform.whl)")
    distribution, version = parts[0], parts[1]
    python, abi, platform = parts[-3:]
    return WheelName(distribution, version, python, abi, platform)


def conda_platform() -> str:
    """This machine as a conda subdir (the key of the knowledge's `wheels:` table)."""
    machine = sysconfig.get_platform()  # linux-x86_64, win-amd64, macosx-11.0-arm64
    if sys.platform.startswith("linux"):
        return "linux-aarch64" if machine.endswith("aarch64") else "linux-64"
    if sys.platform == "win32":
        return "win-64"
    if sys.platform == "darwin":
        return "osx-arm64" if machine.endswith("arm64") else "osx-64"
    raise SolverError(f"no pointops wheels are built for {sys.platform}")


# the platform tags a wheel for each conda subdir may carry
PLATFORM_TAGS = {
    "linux-64": re.compile(r"^manylinux_2_\d+_x86_64$"),
    "linux-aarch64": re.compile(r"^manylinux_2_\d+_aarch64$"),
    "win-64": re.compile(r"^win_amd64$"),
    "osx-arm64": re.compile(r"^macosx_\d+_\d+_arm64$"),
}
