"""The solver's knowledge: NVIDIA drivers, GPUs, Jetson stacks, CUDA toolkits, conda-forge
pytorch builds and pointops builds, read from the YAML files next to this module (each names
its sources). This module loads, validates and answers questions; the words it speaks
(platforms, versions, variant tags) come from solver.vocabulary.

Stable API (also used by `solver doctor`):

    kb = load()                              # parsed and validated once, then cached
    kb.driver_max_cuda("550.54.14")          # -> "12.4" (driver branch -> highest CUDA it runs)
    kb.driver_branch("566.03")               # -> DriverBranch(branch=565, max_cuda="12.7", ...)
    kb.first_branch_for_cuda("12.8")         # -> DriverBranch(branch=570, ...)
    kb.cuda_min_driver("12.9", "linux")      # -> "575.51.03" (full compatibility)
    kb.mvc_min_driver(12, "windows")         # -> "528.33" (minor-version compatibility)
    kb.driver_runs_cuda("12.4", "12.9", "550.54.14", "linux")  # -> "mvc" | "full" | None
    kb.gpu_compute_capability("NVIDIA GeForce RTX 4090")        # -> "8.9" (None if unknown)
    kb.gpu_driver_floor("NVIDIA B200").minimum("linux")         # -> "570.133.20" (one GPU's own floor)
    kb.architecture("12.0")                  # -> Architecture(family="Blackwell", first_cuda="12.8", ...)
    kb.is_compute_capability("13.5")         # -> False (no GPU has it)
    kb.jetson_module("8.7")                  # -> JetsonModule(name="Jetson Orin", stacks=...)
    kb.toolkit("13.0")                       # -> Toolkit(archs=(...), gcc_max=15, ...)
    kb.pytorch_releases                      # newest first: PytorchRelease(version, pythons, builds, ...)
    kb.pointops_builds("linux-64")           # -> [PointopsBuild(variant="cpu"...), ...]
    arch_coverage("8.9", arch_list)          # -> "sass" | "ptx" | None

Versions are strings in the API ("12.9", "8.6"); `parse_version` turns them into int tuples for
comparisons. Bad data raises KnowledgeError naming the file and the field.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from solver.vocabulary import (
    ARM_VARIANTS,
    DEFAULT_ARM_VARIANT,
    PLATFORMS,
    cuda_of_variant,
    has_arm_variants,
    major_minor,
    os_of_platform,
    parse_version,
    variant_of_cuda,
)

__all__ = [
    "PLATFORMS",
    "ArchList",
    "Architecture",
    "DriverBranch",
    "DriverFloor",
    "GpuEntry",
    "JetsonModule",
    "JetsonStack",
    "Knowledge",
    "KnowledgeError",
    "PointopsBuild",
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


class KnowledgeError(ValueError):
    """A knowledge file is missing or malformed."""


@dataclass(frozen=True)
class ArchList:
    """Compute capabilities a binary carries: SASS per arch, plus PTX of one arch (or None)."""

    sass: tuple[str, ...]
    ptx: str | None

    def describe(self) -> str:
        return ";".join(self.sass) + (f"+PTX({self.ptx})" if self.ptx else "")


def arch_coverage(compute_capability: str, archs: ArchList, tegra: bool = False) -> str | None:
    """How a GPU of this compute capability runs a binary with these archs.

    'sass': SASS of the same major with an equal or lower minor exists (runs natively; on a
    Tegra GPU only SASS of the exact compute capability counts); 'ptx': only PTX of a lower or
    equal arch exists (the driver JIT-compiles it, which needs a driver at least as new as the
    toolkit that built it); None: the binary cannot run.
    """
    cc = parse_version(compute_capability)
    for sass in archs.sass:
        arch = parse_version(sass)
        if arch == cc or (not tegra and arch[0] == cc[0] and arch[1] <= cc[1]):
            return "sass"
    if archs.ptx and parse_version(archs.ptx) <= cc:
        return "ptx"
    return None


@dataclass(frozen=True)
class DriverBranch:
    branch: int
    max_cuda: str
    linux_first: str


@dataclass(frozen=True)
class Architecture:
    family: str
    last_branch: int | None  # newest driver branch that still runs it; None = current
    first_cuda: str | None = None  # first CUDA toolkit that knows it; None = older than every CUDA 11
    tegra: bool = False  # a Jetson GPU: no SASS compatibility across minor versions
    renamed_to: str | None = None  # the number newer CUDA versions give the same GPU


@dataclass(frozen=True)
class Toolkit:
    version: str
    linux_min: str
    windows_min: str
    gcc_max: int
    archs: tuple[str, ...]


@dataclass(frozen=True)
class TorchBuild:
    """One CUDA build of a pytorch release on one platform."""

    variant: str  # build-string tag, "cuda129"
    arm_variant: str | None  # "sbsa" / "tegra" on linux-aarch64, None elsewhere
    archs: ArchList  # what the newest builds carry
    since_build_number: int | None = None  # archs hold from this package build number on ...
    older_archs: ArchList | None = None  # ... and older builds carry these

    @property
    def key(self) -> str:
        """'cuda129', or 'cuda129-tegra' for a non-default arm variant."""
        return (
            self.variant
            if self.arm_variant in (None, DEFAULT_ARM_VARIANT)
            else f"{self.variant}-{self.arm_variant}"
        )

    @property
    def cuda_version(self) -> str:
        return cuda_of_variant(self.variant)


@dataclass(frozen=True)
class PytorchRelease:
    version: str
    pythons: tuple[str, ...]
    builds: dict[str, tuple[TorchBuild, ...]]  # platform -> CUDA builds, newest CUDA first
    cpu_platforms: tuple[str, ...]

    @property
    def cuda(self) -> dict[str, dict[str, ArchList]]:
        """platform -> variant -> archs of the default (sbsa) arm variant."""
        return {
            platform: {b.variant: b.archs for b in builds if b.arm_variant in (None, DEFAULT_ARM_VARIANT)}
            for platform, builds in self.builds.items()
        }

    def variants(self, platform: str) -> list[str]:
        """CUDA variants on this platform (default arm variant), newest CUDA first."""
        return [
            b.variant for b in self.builds.get(platform, ()) if b.arm_variant in (None, DEFAULT_ARM_VARIANT)
        ]

    def cuda_builds(self, platform: str) -> tuple[TorchBuild, ...]:
        """Every CUDA build on this platform, all arm variants, newest CUDA first."""
        return self.builds.get(platform, ())


@dataclass(frozen=True)
class PointopsBuild:
    platform: str
    variant: str  # "cpu", "cuda129", ...
    cuda_version: str | None
    archs: ArchList | None
    arm_variant: str | None = None  # "sbsa" / "tegra" for linux-aarch64 CUDA builds


@dataclass(frozen=True)
class PointopsWheel:
    """One pip/uv wheel: the distribution name and the conda variant whose binary it carries."""

    distribution: str  # "pointops", "pointops-cu12", "pointops-cu13"
    platform: str
    variant: str
    cuda_version: str | None
    archs: ArchList | None


@dataclass(frozen=True)
class DriverFloor:
    """A minimum driver NVIDIA names for one GPU product, above its generation's first branch."""

    gpu: str  # the table name it belongs to ("NVIDIA B200")
    linux: str | None  # "570.133.20"
    windows: str | None  # None: NVIDIA names no Windows build (numbered apart from Linux)
    source: str

    def minimum(self, os_name: str) -> str | None:
        return self.windows if os_name == "windows" else self.linux


@dataclass(frozen=True)
class GpuEntry:
    name: str
    compute_capability: str
    tokens: tuple[str, ...] = field(repr=False)
    driver_floor: DriverFloor | None = None


@dataclass(frozen=True)
class JetsonStack:
    key: str  # "jetpack6", "unified"
    label: str
    arm_variant: str  # which conda-forge CUDA builds run on it
    driver_series: int | None  # first component of its driver version (540 for JetPack 6) ...
    driver_min: int | None  # ... or the lowest first component (580: desktop numbering)
    cuda: str | None  # what its driver reports, when it has a series of its own
    glibc: str | None  # of the OS it ships, when known


@dataclass(frozen=True)
class JetsonModule:
    compute_capability: str
    name: str
    stacks: dict[str, str]  # stack key -> the JetPack releases it covers for this module
    last_stack: str | None  # for modules without a CUDA 12/13 stack: the last one there is
    assumed: dict[str, str] = field(
        default_factory=dict
    )  # stack key -> how its driver is recognised, unsourced


_IGNORED_NAME_WORDS = {"nvidia", "geforce", "tesla", "quadro", "generation"}
# Data-center boards print a suffix after the model: "Tesla K40m", "K20Xm", "K40c", "A100X".
_BOARD_SUFFIX_RE = re.compile(r"^([a-z]\d{1,3})(?:xm|st|m|c|x|s|t|d)$")


def _name_tokens(name: str) -> tuple[str, ...]:
    words = re.split(r"[^0-9a-z]+", name.lower())
    return tuple(w for w in words if w and w not in _IGNORED_NAME_WORDS)


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


class Knowledge:
    """All knowledge tables, parsed and validated. Build with `load()`."""

    def __init__(self, raw: dict[str, dict]):
        self.branches = _parse_branches(raw["drivers"])
        self.mvc = _parse_mvc(raw["drivers"])
        self.toolkits = _parse_toolkits(raw["toolkits"])
        self.architectures, self.gpus = _parse_gpus(raw["gpus"], self.toolkits, self.branches)
        self.jetson_stacks, self.jetson_modules = _parse_jetson(raw["jetson"], self.architectures)
        self.pytorch_releases, self.min_glibc = _parse_pytorch(raw["pytorch"])
        self.pointops = raw["pointops_builds"]
        self._pointops_builds = _parse_pointops(raw["pointops_builds"])
        self._pointops_wheels = _parse_pointops_wheels(raw["pointops_builds"], self._pointops_builds)

    # -- drivers ---------------------------------------------------------------------------
    def driver_branch(self, driver: str) -> DriverBranch | None:
        """Branch of a Linux (550.54.14) or Windows (566.03) driver version; None if older than all.

        Desktop and server drivers only: a Jetson's driver (540.4.0 on JetPack 6) is not a
        branch; see jetson_stack_of_driver.
        """
        first = parse_version(driver)[0]
        found = None
        for branch in self.branches:
            if branch.branch <= first:
                found = branch
        return found

    def driver_max_cuda(self, driver: str) -> str | None:
        branch = self.driver_branch(driver)
        return branch.max_cuda if branch else None

    def first_branch_for_cuda(self, cuda: str) -> DriverBranch | None:
        """The oldest branch whose driver runs toolkit `cuda` fully (12.8 -> R570)."""
        return _first_branch_for_cuda(self.branches, cuda)

    def cuda_min_driver(self, cuda: str, os_name: str) -> str:
        toolkit = self.toolkit(cuda)
        return toolkit.windows_min if os_name == "windows" else toolkit.linux_min

    def mvc_min_driver(self, major: int, os_name: str) -> str | None:
        entry = self.mvc.get(int(major))
        return None if entry is None else entry["windows" if os_name == "windows" else "linux"]

    def driver_runs_cuda(self, driver_cuda: str, cuda: str, driver: str | None, os_name: str) -> str | None:
        """Whether a driver reporting `driver_cuda` runs binaries built with toolkit `cuda`.

        'full': cuda <= driver_cuda. 'mvc': newer minor of the same major through minor-version
        compatibility (only valid when every binary carries SASS for the GPU). None: not at all.
        Pass driver=None to skip the desktop minimum-driver check (a Jetson's own driver).
        """
        have, want = parse_version(driver_cuda)[:2], parse_version(cuda)[:2]
        if want <= have:
            return "full"
        if want[0] != have[0]:
            return None
        minimum = self.mvc_min_driver(want[0], os_name)
        if minimum is None:
            return None
        if driver is not None and parse_version(driver) < parse_version(minimum):
            return None
        return "mvc"

    # -- GPUs --------------------------------------------------------------------------------
    def gpu_lookup(self, name: str) -> GpuEntry | None:
        """The table entry for a GPU name as nvidia-smi / NVML print it or as a user types it."""
        tokens = _name_tokens(name)
        if not tokens:
            return None
        best = self._longest_entry_in(tokens)
        if best is None:  # "Tesla K40m" -> "K40"
            stripped = tuple(_BOARD_SUFFIX_RE.sub(r"\1", t) for t in tokens)
            if stripped != tokens:
                best = self._longest_entry_in(stripped)
        if best is not None:
            return best
        # A shortened name ("RTX PRO 6000", "Orin") is fine when every entry it abbreviates agrees.
        partial = [entry for entry in self.gpus if _contains(entry.tokens, tokens)]
        if partial and len({entry.compute_capability for entry in partial}) == 1:
            return partial[0]
        return None

    def _longest_entry_in(self, tokens: tuple[str, ...]) -> GpuEntry | None:
        best = None
        for entry in self.gpus:
            if _contains(tokens, entry.tokens) and (best is None or len(entry.tokens) > len(best.tokens)):
                best = entry
        return best

    def gpu_compute_capability(self, name: str) -> str | None:
        entry = self.gpu_lookup(name)
        return entry.compute_capability if entry else None

    def gpu_driver_floor(self, name: str) -> DriverFloor | None:
        """The minimum driver NVIDIA names for this GPU product, if any (HGX B200: 570.133.20)."""
        entry = self.gpu_lookup(name)
        return entry.driver_floor if entry else None

    def architecture(self, compute_capability: str) -> Architecture | None:
        """Family and driver support of a compute capability (an unknown minor falls back to its major)."""
        key = major_minor(compute_capability)
        if key in self.architectures:
            return self.architectures[key]
        major = parse_version(key)[0]
        same_major = [k for k in self.architectures if parse_version(k)[0] == major]
        return self.architectures[max(same_major, key=parse_version)] if same_major else None

    def is_compute_capability(self, compute_capability: str) -> bool:
        """Whether an NVIDIA GPU of exactly this compute capability exists (per the tables)."""
        return major_minor(compute_capability) in self.architectures

    def known_compute_capabilities(self) -> list[str]:
        return sorted(self.architectures, key=parse_version)

    def jetson_module(self, compute_capability: str) -> JetsonModule | None:
        return self.jetson_modules.get(major_minor(compute_capability))

    def jetson_stack_of_driver(
        self, module: JetsonModule, driver: str | None, driver_cuda: str | None
    ) -> JetsonStack | None:
        """The JetPack stack a Jetson's driver belongs to, from its version or the CUDA it reports.

        None when neither matches a stack this module has (a desktop driver number, or a JetPack
        without CUDA 12).
        """
        stacks = [self.jetson_stacks[key] for key in module.stacks]
        if driver is not None:
            first = parse_version(driver)[0]
            for stack in stacks:
                if stack.driver_series == first or (
                    stack.driver_min is not None and first >= stack.driver_min
                ):
                    return stack
            return None
        if driver_cuda is not None:
            major = parse_version(driver_cuda)[0]
            for stack in stacks:
                reported = stack.cuda or self.driver_max_cuda(str(stack.driver_min))
                if reported is None:
                    continue
                if major == parse_version(reported)[0] or (
                    stack.driver_min is not None and major > parse_version(reported)[0]
                ):
                    return stack
        return None

    # -- toolkits, pytorch, pointops ---------------------------------------------------------
    def toolkit(self, cuda: str) -> Toolkit:
        key = major_minor(cuda)
        if key not in self.toolkits:
            raise KeyError(f"no knowledge of CUDA toolkit {cuda}")
        return self.toolkits[key]

    def pytorch_release(self, version: str) -> PytorchRelease | None:
        for release in self.pytorch_releases:
            if release.version == version:
                return release
        return None

    def pointops_wheels(self, platform: str) -> list[PointopsWheel]:
        """The pip/uv wheels built for `platform`, cpu first."""
        return [w for w in self._pointops_wheels if w.platform == platform]

    def pointops_builds(self, platform: str) -> list[PointopsBuild]:
        return [b for b in self._pointops_builds if b.platform == platform]

    def pointops_build(
        self, platform: str, variant: str, arm_variant: str | None = None
    ) -> PointopsBuild | None:
        for build in self._pointops_builds:
            if (
                build.platform == platform
                and build.variant == variant
                and (arm_variant is None or build.arm_variant in (None, arm_variant))
            ):
                return build
        return None

    def glibc_floor(self, build: TorchBuild) -> str | None:
        """Lowest glibc the CUDA builds of this key need on Linux."""
        return self.min_glibc.get(build.key)


# -- parsing and validation -------------------------------------------------------------------


def _need(mapping: dict, key: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise KnowledgeError(f"{where}: missing field '{key}'")
    return mapping[key]


def _version_str(value, where: str) -> str:
    text = str(value)
    try:
        parse_version(text)
    except ValueError:
        raise KnowledgeError(f"{where}: {text!r} is not a version number") from None
    return text


def _arch_list(raw: dict, where: str) -> ArchList:
    sass = tuple(_version_str(a, f"{where}.sass") for a in _need(raw, "sass", where))
    if list(sass) != sorted(sass, key=parse_version):
        raise KnowledgeError(f"{where}.sass: archs must be in ascending order")
    ptx = raw.get("ptx")
    return ArchList(sass=sass, ptx=_version_str(ptx, f"{where}.ptx") if ptx is not None else None)


def _parse_branches(raw: dict) -> list[DriverBranch]:
    branches = []
    for i, item in enumerate(_need(raw, "branches", "drivers.yaml")):
        where = f"drivers.yaml branches[{i}]"
        branches.append(
            DriverBranch(
                branch=int(_need(item, "branch", where)),
                max_cuda=_version_str(_need(item, "max_cuda", where), where),
                linux_first=_version_str(_need(item, "linux_first", where), where),
            )
        )
    numbers = [b.branch for b in branches]
    if numbers != sorted(numbers):
        raise KnowledgeError("drivers.yaml branches: must be in ascending order")
    if [parse_version(b.max_cuda) for b in branches] != sorted(parse_version(b.max_cuda) for b in branches):
        raise KnowledgeError("drivers.yaml branches: max_cuda must grow with the branch")
    return branches


def _parse_mvc(raw: dict) -> dict[int, dict[str, str]]:
    result = {}
    for major, item in _need(raw, "minor_version_compatibility", "drivers.yaml").items():
        where = f"drivers.yaml minor_version_compatibility.{major}"
        result[int(major)] = {
            os_name: _version_str(_need(item, os_name, where), where) for os_name in ("linux", "windows")
        }
    return result


def _parse_toolkits(raw: dict) -> dict[str, Toolkit]:
    result = {}
    for version, item in _need(raw, "toolkits", "toolkits.yaml").items():
        where = f"toolkits.yaml toolkits.{version}"
        archs = tuple(_version_str(a, where) for a in _need(item, "archs", where))
        result[_version_str(version, where)] = Toolkit(
            version=version,
            linux_min=_version_str(_need(item, "linux_min", where), where),
            windows_min=_version_str(_need(item, "windows_min", where), where),
            gcc_max=int(_need(item, "gcc_max", where)),
            archs=archs,
        )
    return result


def _first_branch_for_cuda(branches: list[DriverBranch], cuda: str) -> DriverBranch | None:
    wanted = parse_version(cuda)[:2]
    return next((b for b in branches if parse_version(b.max_cuda)[:2] >= wanted), None)


def _parse_driver_floor(
    item, name: str, cc: str, arch: Architecture, branches: list[DriverBranch], where: str
) -> DriverFloor:
    """min_driver of a GPU entry: {linux: X.Y.Z, windows: X.Y, src: ...}; at least the generation's first branch."""
    where = f"{where}.min_driver"
    source = str(_need(item, "src", where))
    values = {}
    for os_name in ("linux", "windows"):
        if item.get(os_name) is None:
            values[os_name] = None
            continue
        value = _version_str(item[os_name], f"{where}.{os_name}")
        if len(parse_version(value)) < 2:
            raise KnowledgeError(f"{where}.{os_name}: {value!r} is a branch, not a driver build")
        values[os_name] = value
    if values["linux"] is None and values["windows"] is None:
        raise KnowledgeError(f"{where}: give linux or windows")
    if arch.first_cuda is not None:
        first = _first_branch_for_cuda(branches, arch.first_cuda)
        for os_name, value in values.items():
            if first is not None and value is not None and parse_version(value)[0] < first.branch:
                raise KnowledgeError(
                    f"{where}.{os_name}: {value} is older than R{first.branch}, the first "
                    f"branch of compute capability {cc} (CUDA {arch.first_cuda})"
                )
    return DriverFloor(gpu=name, linux=values["linux"], windows=values["windows"], source=source)


def _parse_gpus(
    raw: dict, toolkits: dict[str, Toolkit], branches: list[DriverBranch]
) -> tuple[dict[str, Architecture], list[GpuEntry]]:
    architectures = {}
    for cc, item in _need(raw, "architectures", "gpus.yaml").items():
        where = f"gpus.yaml architectures.{cc}"
        last = item.get("last_branch")
        first_cuda = item.get("first_cuda")
        if (
            first_cuda is not None
            and parse_version(_version_str(first_cuda, where)) >= (12, 0)
            and str(first_cuda) not in toolkits
        ):
            raise KnowledgeError(f"{where}: first_cuda {first_cuda} has no entry in toolkits.yaml")
        architectures[_version_str(cc, where)] = Architecture(
            family=str(_need(item, "family", where)),
            last_branch=int(last) if last is not None else None,
            first_cuda=str(first_cuda) if first_cuda is not None else None,
            tegra=bool(item.get("tegra", False)),
            renamed_to=str(item["renamed_to"]) if item.get("renamed_to") else None,
        )
    for cc, arch in architectures.items():
        if arch.renamed_to is not None and arch.renamed_to not in architectures:
            raise KnowledgeError(f"gpus.yaml architectures.{cc}: renamed_to {arch.renamed_to} has no entry")
    gpus = []
    for i, item in enumerate(_need(raw, "gpus", "gpus.yaml")):
        where = f"gpus.yaml gpus[{i}]"
        name = str(_need(item, "name", where))
        cc = _version_str(_need(item, "cc", where), where)
        if cc not in architectures:
            raise KnowledgeError(
                f"{where}: compute capability {cc} of {name!r} has no entry in architectures"
            )
        if not _name_tokens(name):
            raise KnowledgeError(f"{where}: {name!r} has no word left to match")
        floor = (
            _parse_driver_floor(item["min_driver"], name, cc, architectures[cc], branches, where)
            if item.get("min_driver") is not None
            else None
        )
        gpus.append(GpuEntry(name=name, compute_capability=cc, tokens=_name_tokens(name), driver_floor=floor))
    seen: dict[tuple[str, ...], GpuEntry] = {}
    for entry in gpus:
        other = seen.setdefault(entry.tokens, entry)
        if other is not entry and other.compute_capability != entry.compute_capability:
            raise KnowledgeError(
                f"gpus.yaml gpus: {other.name!r} and {entry.name!r} match the same words "
                "with different compute capabilities"
            )
    return architectures, gpus


def _parse_jetson(
    raw: dict, architectures: dict[str, Architecture]
) -> tuple[dict[str, JetsonStack], dict[str, JetsonModule]]:
    stacks = {}
    for key, item in _need(raw, "stacks", "jetson.yaml").items():
        where = f"jetson.yaml stacks.{key}"
        arm_variant = str(_need(item, "arm_variant", where))
        if arm_variant not in ARM_VARIANTS:
            raise KnowledgeError(f"{where}: arm_variant must be one of {', '.join(ARM_VARIANTS)}")
        series, minimum = item.get("driver_series"), item.get("driver_min")
        if (series is None) == (minimum is None):
            raise KnowledgeError(f"{where}: give exactly one of driver_series and driver_min")
        stacks[key] = JetsonStack(
            key=key,
            label=str(_need(item, "label", where)),
            arm_variant=arm_variant,
            driver_series=int(series) if series is not None else None,
            driver_min=int(minimum) if minimum is not None else None,
            cuda=_version_str(item["cuda"], where) if item.get("cuda") else None,
            glibc=_version_str(item["glibc"], where) if item.get("glibc") else None,
        )
    modules = {}
    for cc, item in _need(raw, "modules", "jetson.yaml").items():
        where = f"jetson.yaml modules.{cc}"
        cc = _version_str(cc, where)
        if cc not in architectures or not architectures[cc].tegra:
            raise KnowledgeError(f"{where}: not a Jetson (tegra) compute capability in gpus.yaml")
        module_stacks = dict(item.get("stacks") or {})
        for key in module_stacks:
            if key not in stacks:
                raise KnowledgeError(f"{where}.stacks: unknown stack {key!r}")
        if not module_stacks and not item.get("last_stack"):
            raise KnowledgeError(f"{where}: give stacks, or last_stack for a module without one")
        assumed = {str(key): " ".join(str(text).split()) for key, text in (item.get("assumed") or {}).items()}
        for key in assumed:
            if key not in module_stacks:
                raise KnowledgeError(f"{where}.assumed: {key!r} is not one of this module's stacks")
        modules[cc] = JetsonModule(
            compute_capability=cc,
            name=str(_need(item, "name", where)),
            stacks=module_stacks,
            last_stack=item.get("last_stack"),
            assumed=assumed,
        )
    return stacks, modules


_BUILD_KEY_RE = re.compile(r"^(cuda\d{3})(?:-(\w+))?$")


def _parse_torch_build(
    platform: str, key: str, value, arch_lists: dict[str, ArchList], where: str
) -> TorchBuild:
    match = _BUILD_KEY_RE.match(key)
    if not match:
        raise KnowledgeError(f"{where}: {key!r} is not a CUDA build key such as cuda129 or cuda129-tegra")
    variant, arm_variant = match.group(1), match.group(2)
    if has_arm_variants(platform):
        arm_variant = arm_variant or DEFAULT_ARM_VARIANT
        if arm_variant not in ARM_VARIANTS:
            raise KnowledgeError(f"{where}: unknown arm variant {arm_variant!r}")
    elif arm_variant is not None:
        raise KnowledgeError(f"{where}: {platform} has no arm variants")

    def archs(name) -> ArchList:
        if name not in arch_lists:
            raise KnowledgeError(f"{where}: unknown arch list {name!r}")
        return arch_lists[name]

    if isinstance(value, dict):
        since = int(_need(value, "since_build_number", where))
        return TorchBuild(
            variant,
            arm_variant,
            archs(_need(value, "archs", where)),
            since,
            archs(_need(value, "older_archs", where)),
        )
    return TorchBuild(variant, arm_variant, archs(value))


def _parse_pytorch(raw: dict) -> tuple[list[PytorchRelease], dict[str, str]]:
    arch_lists = {
        key: _arch_list(item, f"pytorch.yaml arch_lists.{key}")
        for key, item in _need(raw, "arch_lists", "pytorch.yaml").items()
    }
    releases = []
    for i, item in enumerate(_need(raw, "releases", "pytorch.yaml")):
        where = f"pytorch.yaml releases[{i}]"
        version = _version_str(_need(item, "version", where), where)
        builds: dict[str, tuple[TorchBuild, ...]] = {}
        for platform, entries in (item.get("cuda") or {}).items():
            if platform not in PLATFORMS:
                raise KnowledgeError(f"{where}.cuda: unknown platform {platform!r}")
            parsed = [
                _parse_torch_build(platform, key, value, arch_lists, f"{where}.cuda.{platform}.{key}")
                for key, value in entries.items()
            ]
            builds[platform] = tuple(
                sorted(parsed, key=lambda b: parse_version(b.cuda_version), reverse=True)
            )
        pythons = tuple(_version_str(p, where) for p in _need(item, "python", where))
        cpu = tuple(_need(item, "cpu", where))
        for platform in cpu:
            if platform not in PLATFORMS:
                raise KnowledgeError(f"{where}.cpu: unknown platform {platform!r}")
        releases.append(PytorchRelease(version=version, pythons=pythons, builds=builds, cpu_platforms=cpu))
    versions = [parse_version(r.version) for r in releases]
    if versions != sorted(versions, reverse=True):
        raise KnowledgeError("pytorch.yaml releases: must be listed newest first")
    min_glibc = {
        k: _version_str(v, "pytorch.yaml min_glibc")
        for k, v in _need(raw, "min_glibc", "pytorch.yaml").items()
    }
    for release in releases:
        for builds in release.builds.values():
            for build in builds:
                if build.key not in min_glibc:
                    raise KnowledgeError(f"pytorch.yaml min_glibc: no entry for {build.key}")
    return releases, min_glibc


def _parse_pointops(raw: dict) -> list[PointopsBuild]:
    where = "pointops_builds.yaml"
    for key in ("package", "version", "torch_min", "python_min"):
        _need(raw, key, where)
    variants = {}
    extra_sass = {}  # (platform, variant) -> the arch list with that platform's extra SASS
    for variant, item in _need(raw, "variants", where).items():
        cuda = item.get("cuda_version")
        if variant == "cpu":
            variants[variant] = (None, None)
            continue
        if cuda is None or variant != variant_of_cuda(str(cuda)):
            raise KnowledgeError(f"{where} variants.{variant}: cuda_version must match the variant name")
        variants[variant] = (str(cuda), _arch_list(item, f"{where} variants.{variant}"))
        for platform, extra in (item.get("extra_sass") or {}).items():
            base = variants[variant][1]
            sass = tuple(sorted(set(base.sass) | {str(a) for a in extra}, key=parse_version))
            extra_sass[(platform, variant)] = ArchList(sass=sass, ptx=base.ptx)
    builds = []
    for platform, names in _need(raw, "platforms", where).items():
        if platform not in PLATFORMS:
            raise KnowledgeError(f"{where} platforms: unknown platform {platform!r}")
        for variant in names:
            if variant not in variants:
                raise KnowledgeError(f"{where} platforms.{platform}: unknown variant {variant!r}")
            cuda, archs = variants[variant]
            archs = extra_sass.get((platform, variant), archs)
            arm_variant = DEFAULT_ARM_VARIANT if cuda and has_arm_variants(platform) else None
            builds.append(PointopsBuild(platform, variant, cuda, archs, arm_variant))
    for variant, item in (raw.get("tegra") or {}).items():
        if variant not in variants or variants[variant][0] is None:
            raise KnowledgeError(f"{where} tegra.{variant}: not a CUDA variant of `variants`")
        builds.append(
            PointopsBuild(
                "linux-aarch64",
                variant,
                variants[variant][0],
                _arch_list(item, f"{where} tegra.{variant}"),
                "tegra",
            )
        )
    return builds


def _parse_pointops_wheels(raw: dict, parsed_builds: list[PointopsBuild]) -> list[PointopsWheel]:
    where = "pointops_builds.yaml wheels"
    builds = [b for b in parsed_builds if b.arm_variant != "tegra"]
    wheels = []
    for name, platforms in (raw.get("wheels") or {}).items():
        if not isinstance(platforms, dict) or not platforms:
            raise KnowledgeError(f"{where}.{name}: expected a mapping platform -> variant")
        for platform, variant in platforms.items():
            # the wheel carries the binary of the conda build of that platform and variant
            build = next((b for b in builds if b.platform == platform and b.variant == variant), None)
            if build is None:
                raise KnowledgeError(f"{where}.{name}: no {variant} build for {platform} in `platforms`")
            wheels.append(PointopsWheel(name, platform, variant, build.cuda_version, build.archs))
    return wheels


_FILES = ("drivers", "toolkits", "gpus", "jetson", "pytorch", "pointops_builds")


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
