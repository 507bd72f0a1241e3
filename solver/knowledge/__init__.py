"""The solver's knowledge: NVIDIA drivers, GPUs, Jetson stacks, CUDA toolkits, conda-forge
pytorch builds and pointops builds, read from the YAML files next to this package (each names its
sources). One module per table holds its records, its loader and its queries:

    drivers.py   branches, the CUDA each runs, minor-version compatibility minimums
    toolkits.py  per CUDA toolkit: minimum drivers, nvcc archs, newest gcc
    gpus.py      GPU names -> compute capability; per GPU product its first drivers and platform
    jetson.py    Jetson modules and JetPack stacks
    pytorch.py   conda-forge pytorch releases and builds
    pointops.py  the pointops package, its conda builds and pip wheels
    channel_packages.py  the channel's other packages (mmcv, pointnet2_ops), for make-env --with
    archs.py     arch lists and whether a GPU runs them

`Knowledge` ties them together (some answers need two tables); the words it speaks (platforms,
versions, variant tags) come from solver.vocabulary. Stable API (also used by `solver doctor`):

    kb = load()                              # parsed and validated once, then cached
    kb.driver_max_cuda("550.54.14")          # -> "12.4" (driver branch -> highest CUDA it runs)
    kb.driver_branch("566.03")               # -> DriverBranch(branch=565, max_cuda="12.7", ...)
    kb.branch_first_driver(550, "linux")     # -> "550.54.14" (`--driver 550`)
    kb.first_branch_for_cuda("12.8")         # -> DriverBranch(branch=570, ...)
    kb.cuda_min_driver("12.9", "linux")      # -> "575.51.03" (full compatibility)
    kb.mvc_min_driver(12, "windows")         # -> "528.33" (minor-version compatibility)
    kb.driver_runs_cuda("12.4", "12.9", "550.54.14", "linux")  # -> "mvc" | "full" | None
    kb.gpu_compute_capability("NVIDIA GeForce RTX 4090")        # -> "8.9" (None if unknown)
    kb.gpu_driver_floor("NVIDIA B300")                          # -> DriverFloor (first drivers: 580.82.07)
    kb.driver_floor("sm_103 GPU", "10.3")    # -> the floor every 10.3 product shares
    kb.only_platform("NVIDIA GB10", "12.1")  # -> GpuEntry(only_on="linux-aarch64", ...)
    kb.architecture("12.0")                  # -> Architecture(family="Blackwell", first_cuda="12.8", ...)
    kb.is_compute_capability("13.5")         # -> False (no GPU has it)
    kb.jetson_module("8.7")                  # -> JetsonModule(name="Jetson Orin", stacks=...)
    kb.toolkit("13.0")                       # -> Toolkit(archs=(...), gcc_max=15, ...)
    kb.pytorch_releases                      # newest first: PytorchRelease(version, pythons, builds, ...)
    kb.pointops.torch_min                    # -> "2.10" (a frozen record; kb.pointops["torch_min"] too)
    kb.pointops_builds("linux-64")           # -> [PointopsBuild(variant="cpu"...), ...]
    kb.channel_package("mmcv")               # -> ChannelPackage(versions=("2.2.0", "2.1.0"), ...)
    arch_coverage("8.9", arch_list)          # -> "sass" | "ptx" | None

Versions are strings in the API ("12.9", "8.6"); `parse_version` turns them into int tuples for
comparisons. Bad data raises KnowledgeError naming the file and the field.
"""

from __future__ import annotations

import functools
from pathlib import Path

from solver.knowledge._fields import KnowledgeError
from solver.knowledge.archs import ArchList, arch_coverage
from solver.knowledge.channel_packages import (
    ChannelBuild,
    ChannelPackage,
    PipInfo,
    parse_channel_packages,
)
from solver.knowledge.drivers import DriverBranch, parse_drivers
from solver.knowledge.gpus import Architecture, BranchStart, DriverFloor, GpuEntry, parse_gpus
from solver.knowledge.jetson import JetsonModule, JetsonStack, parse_jetson
from solver.knowledge.pointops import (
    PointopsBuild,
    PointopsInfo,
    PointopsWheel,
    parse_pointops,
)
from solver.knowledge.pytorch import PytorchRelease, TorchBuild, parse_pytorch
from solver.knowledge.toolkits import Toolkit, parse_toolkits, toolkit_of
from solver.vocabulary import (
    PLATFORMS,
    cuda_of_variant,
    major_minor,
    os_of_platform,
    parse_version,
    variant_of_cuda,
)

__all__ = [
    "PLATFORMS",
    "ArchList",
    "Architecture",
    "BranchStart",
    "ChannelBuild",
    "ChannelPackage",
    "DriverBranch",
    "DriverFloor",
    "GpuEntry",
    "JetsonModule",
    "JetsonStack",
    "PipInfo",
    "Knowledge",
    "KnowledgeError",
    "PointopsBuild",
    "PointopsInfo",
    "PointopsWheel",
    "PytorchRelease",
    "Toolkit",
    "TorchBuild",
    "arch_coverage",
    "cuda_of_variant",
    "load",
    "os_of_platform",
    "parse_version",
    "read_raw",
    "variant_of_cuda",
]

KNOWLEDGE_DIR = Path(__file__).resolve().parent


class Knowledge:
    """All knowledge tables, parsed and validated. Build with `load()`. Each query is answered by
    the module of its table; the methods here only route it (or join two tables)."""

    def __init__(self, raw: dict[str, dict]):
        self.drivers = parse_drivers(raw["drivers"])
        self.toolkits = parse_toolkits(raw["toolkits"])
        self.gpu_table = parse_gpus(raw["gpus"], self.toolkits, self.drivers)
        self.jetson = parse_jetson(raw["jetson"], self.gpu_table.architectures)
        self.pytorch = parse_pytorch(raw["pytorch"])
        self.pointops_table = parse_pointops(raw["pointops_builds"])
        self.channel_packages = parse_channel_packages(raw["channel_packages"], self.pointops_table)
        # The tables' records, under the names callers read them by.
        self.branches = list(self.drivers.branches)
        self.mvc = self.drivers.mvc
        self.architectures = self.gpu_table.architectures
        self.gpus = list(self.gpu_table.entries)
        self.jetson_stacks = self.jetson.stacks
        self.jetson_modules = self.jetson.modules
        self.pytorch_releases = list(self.pytorch.releases)
        self.min_glibc = self.pytorch.min_glibc
        self.pointops: PointopsInfo = self.pointops_table.info

    # -- drivers.py ------------------------------------------------------------------------
    def driver_branch(self, driver: str) -> DriverBranch | None:
        return self.drivers.branch_of(driver)

    def driver_max_cuda(self, driver: str) -> str | None:
        return self.drivers.max_cuda(driver)

    def first_branch_for_cuda(self, cuda: str) -> DriverBranch | None:
        return self.drivers.first_branch_for_cuda(cuda)

    def mvc_min_driver(self, major: int, os_name: str) -> str | None:
        return self.drivers.mvc_min_driver(major, os_name)

    def driver_runs_cuda(self, driver_cuda: str, cuda: str, driver: str | None, os_name: str) -> str | None:
        return self.drivers.runs_cuda(driver_cuda, cuda, driver, os_name)

    def branch_first_driver(self, number: int, os_name: str) -> str | None:
        """The oldest driver of branch R<number> the tables know on this OS; None: no such branch."""
        return self.drivers.first_driver_of_branch(number, os_name, self.toolkits)

    # -- toolkits.py -----------------------------------------------------------------------
    def toolkit(self, cuda: str) -> Toolkit:
        return toolkit_of(self.toolkits, cuda)

    def cuda_min_driver(self, cuda: str, os_name: str) -> str:
        return self.toolkit(cuda).min_driver(os_name)

    # -- gpus.py ---------------------------------------------------------------------------
    def gpu_lookup(self, name: str) -> GpuEntry | None:
        return self.gpu_table.lookup(name)

    def gpu_compute_capability(self, name: str) -> str | None:
        entry = self.gpu_table.lookup(name)
        return entry.compute_capability if entry else None

    def gpu_driver_floor(self, name: str) -> DriverFloor | None:
        """The first drivers NVIDIA lists for this GPU product, if later than its generation's."""
        entry = self.gpu_table.lookup(name)
        return entry.driver_floor if entry else None

    def driver_floor(self, name: str | None, compute_capability: str | None) -> DriverFloor | None:
        return self.gpu_table.driver_floor(name, compute_capability)

    def only_platform(self, name: str | None, compute_capability: str | None) -> GpuEntry | None:
        return self.gpu_table.only_platform(name, compute_capability)

    def architecture(self, compute_capability: str) -> Architecture | None:
        return self.gpu_table.architecture(compute_capability)

    def is_compute_capability(self, compute_capability: str) -> bool:
        """Whether an NVIDIA GPU of exactly this compute capability exists (per the tables)."""
        return major_minor(compute_capability) in self.architectures

    def known_compute_capabilities(self) -> list[str]:
        return sorted(self.architectures, key=parse_version)

    # -- jetson.py -------------------------------------------------------------------------
    def jetson_module(self, compute_capability: str) -> JetsonModule | None:
        return self.jetson.module(compute_capability)

    def jetson_stack_of_driver(
        self, module: JetsonModule, driver: str | None, driver_cuda: str | None
    ) -> JetsonStack | None:
        return self.jetson.stack_of_driver(module, driver, driver_cuda, self.drivers.max_cuda)

    # -- pytorch.py, pointops.py -----------------------------------------------------------
    def pytorch_release(self, version: str) -> PytorchRelease | None:
        return self.pytorch.release(version)

    def glibc_floor(self, build: TorchBuild) -> str | None:
        return self.pytorch.glibc_floor(build)

    def pointops_builds(self, platform: str) -> list[PointopsBuild]:
        return self.pointops_table.builds_for(platform)

    def pointops_build(
        self, platform: str, variant: str, arm_variant: str | None = None
    ) -> PointopsBuild | None:
        return self.pointops_table.build(platform, variant, arm_variant)

    def pointops_wheels(self, platform: str) -> list[PointopsWheel]:
        return self.pointops_table.wheels_for(platform)

    # -- channel_packages.py ---------------------------------------------------------------
    def channel_package(self, name: str) -> ChannelPackage | None:
        return self.channel_packages.package(name)


_FILES = ("drivers", "toolkits", "gpus", "jetson", "pytorch", "pointops_builds", "channel_packages")


def read_raw(directory: Path = KNOWLEDGE_DIR) -> dict[str, dict]:
    """The YAML files as plain data (C loader when available: this is on the startup path)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    raw = {}
    for name in _FILES:
        path = Path(directory) / f"{name}.yaml"
        try:
            with open(path, encoding="utf-8") as handle:
                raw[name] = yaml.load(handle, Loader=loader)
        except OSError as exc:
            raise KnowledgeError(f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise KnowledgeError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(raw[name], dict):
            raise KnowledgeError(f"{path}: expected a mapping at the top level")
    return raw


@functools.lru_cache(maxsize=4)
def load(directory: str | None = None) -> Knowledge:
    """Parse and validate the knowledge files once (cached per directory)."""
    return Knowledge(read_raw(Path(directory) if directory else KNOWLEDGE_DIR))
