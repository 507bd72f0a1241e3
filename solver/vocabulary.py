"""The solver's shared vocabulary: conda platforms and what they imply (OS, CPU architecture,
arm variant), version numbers, CUDA variant tags, compute capabilities, and the virtual packages
assumed for a target machine that is not this one.

Constants and pure functions only: no knowledge tables, no I/O. Every other solver module takes
these names from here.

    parse_version("12.9")                     # -> (12, 9)
    os_of_platform("win-64")                  # -> "windows"
    archspec_of_platform("linux-aarch64")     # -> "aarch64"
    cuda_of_variant("cuda129")                # -> "12.9";  variant_of_cuda("13.0") -> "cuda130"
    normalize_compute_capability("sm_86")     # -> "8.6"
    virtual_packages("linux-64", glibc="2.28", cuda="12.4", cuda_arch="8.6")
"""

from __future__ import annotations

import re

# conda subdirs pointops supports.
PLATFORMS = ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")

# linux-aarch64 CUDA builds come in two flavours, selected by conda-forge's `arm-variant` package:
# sbsa for servers (Grace, Ampere Altra, ...) and, since JetPack 7, Jetson; tegra for Jetson on
# JetPack 6 (L4T r36). Their build strings are equal, only the arm-variant dependency differs.
ARM_VARIANTS = ("sbsa", "tegra")
DEFAULT_ARM_VARIANT = "sbsa"
ARM_VARIANT_PLATFORM = "linux-aarch64"

# Virtual packages assumed for a target that is not this machine (CEP 26 names).
DEFAULT_GLIBC = "2.28"  # conda-forge's CUDA 13 floor; a planned Linux target is assumed to meet it
DEFAULT_LINUX_KERNEL = "5.15"
DEFAULT_MACOS = {"osx-64": "12.0", "osx-arm64": "13.0"}

_OS_OF_PREFIX = {"linux": "linux", "win": "windows", "osx": "osx"}
_ARCHSPEC_OF_SUFFIX = {"64": "x86_64", "aarch64": "aarch64", "arm64": "arm64"}
_VERSION_RE = re.compile(r"^\d+(\.\d+)*$")


def parse_version(text: str) -> tuple[int, ...]:
    """'12.9' -> (12, 9); '550.54.14' -> (550, 54, 14). Raises ValueError on anything else."""
    text = str(text).strip()
    if not _VERSION_RE.match(text):
        raise ValueError(f"not a version number: {text!r}")
    return tuple(int(part) for part in text.split("."))


def major_minor(version: str) -> str:
    """'12.9.1' -> '12.9'; '13' -> '13.0'."""
    parts = parse_version(version)
    return f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}"


def os_of_platform(platform: str) -> str:
    """'win-64' -> 'windows', 'linux-aarch64' -> 'linux', 'osx-arm64' -> 'osx'."""
    return _OS_OF_PREFIX[platform.split("-")[0]]


def os_word(os_name: str) -> str:
    """'windows' -> 'Windows', as messages print it."""
    return {"windows": "Windows", "linux": "Linux", "osx": "macOS"}[os_name]


def archspec_of_platform(platform: str) -> str:
    """'linux-64' -> 'x86_64', 'linux-aarch64' -> 'aarch64', 'osx-arm64' -> 'arm64'."""
    return _ARCHSPEC_OF_SUFFIX[platform.split("-")[1]]


def has_arm_variants(platform: str) -> bool:
    """Whether CUDA builds of this platform come in sbsa and tegra flavours."""
    return platform == ARM_VARIANT_PLATFORM


def cuda_of_variant(variant: str) -> str:
    """'cuda129' -> '12.9', 'cuda130' -> '13.0'."""
    digits = variant[len("cuda") :]
    return f"{digits[:-1]}.{digits[-1]}"


def variant_of_cuda(cuda: str) -> str:
    """'12.9' -> 'cuda129'."""
    major, minor = parse_version(cuda)[:2]
    return f"cuda{major}{minor}"


def normalize_compute_capability(text: str) -> str | None:
    """'8.6', 'sm_86', '86', 'sm86' -> '8.6'; '12.0' and 'sm_120' -> '12.0'; None if not one.

    Only the form is checked here; whether a GPU of that capability exists is the knowledge
    tables' question (Knowledge.is_compute_capability).
    """
    value = text.strip().lower()
    if re.match(r"^\d{1,2}\.\d$", value):
        major, minor = value.split(".")
        return f"{int(major)}.{int(minor)}"
    match = re.match(r"^(?:sm_?)?(\d{2,3})$", value)
    if match:
        digits = match.group(1)
        return f"{int(digits[:-1])}.{digits[-1]}"
    return None


def virtual_packages(
    platform: str, glibc: str | None = None, cuda: str | None = None, cuda_arch: str | None = None
) -> list[str]:
    """Virtual packages of a target machine as name=version=build strings, for a solver."""
    os_name = os_of_platform(platform)
    if os_name == "linux":
        result = ["__unix=0=0", f"__linux={DEFAULT_LINUX_KERNEL}=0", f"__glibc={glibc or DEFAULT_GLIBC}=0"]
    elif os_name == "windows":
        result = ["__win=0=0"]
    else:
        result = ["__unix=0=0", f"__osx={DEFAULT_MACOS[platform]}=0"]
    result.append(f"__archspec=1={archspec_of_platform(platform)}")
    if cuda:
        result.append(f"__cuda={cuda}=0")
        if cuda_arch:
            result.append(f"__cuda_arch={cuda_arch}=0")
    return result
