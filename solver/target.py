"""The machine to plan for: detected (`--gpu auto`) or given by flags (`--gpu`, `--driver`,
`--platform`), so a laptop can plan for a cluster node without a GPU of its own.

CONDA_OVERRIDE_CUDA and CONDA_OVERRIDE_CUDA_ARCH do what they do in conda: they replace what
detection finds (`--gpu auto`); CONDA_OVERRIDE_CUDA also stands in for a `--driver` not given with
`--gpu NAME`. A flag that states the same thing wins (`--driver` over CONDA_OVERRIDE_CUDA; `--gpu
NAME`, a compute capability or `none` over CONDA_OVERRIDE_CUDA_ARCH), with one note saying the
variable was ignored when its value differs. A CONDA_OVERRIDE_CUDA_ARCH no GPU has (13.5) is a
usage error, as `--gpu 13.5` is, whatever the flags."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from solver.errors import EXIT_USAGE, SolverError
from solver.knowledge import Knowledge
from solver.overrides import Overrides, read_overrides
from solver.vocabulary import (
    ARM_VARIANT_PLATFORM,
    DEFAULT_GLIBC,
    PLATFORMS,
    normalize_compute_capability,
    os_of_platform,
    os_word,
    parse_version,
    virtual_packages,
)


class TargetError(SolverError):
    """A flag is malformed (exit_code 2) or the target cannot have CUDA at all (exit_code 1)."""

    exit_code = EXIT_USAGE


@dataclass
class Target:
    platform: str  # conda subdir, e.g. "linux-64"
    os: str  # "linux", "windows" or "osx"
    glibc: str | None  # None on Windows/macOS
    gpu_name: str | None  # None: plan a CPU environment
    compute_capability: str | None  # "8.6"; None when a GPU of unknown capability was detected
    driver_version: str | None  # "550.54.14"; None when only its CUDA version is known
    driver_cuda: str | None  # highest CUDA the driver runs
    source: str  # "detected", "flags" or "override"
    driver_assumed: bool = False  # no driver given: the newest branch for this GPU is assumed
    notes: list[str] = field(default_factory=list)
    glibc_assumed: bool = False  # glibc is DEFAULT_GLIBC, not this machine's or an override
    jetson_stack: str | None = None  # Jetson only: the JetPack stack of its driver ("jetpack6", "unified")
    wsl: bool = False  # Linux under WSL2: the driver is the Windows host's, numbered as Windows drivers are

    @property
    def has_gpu(self) -> bool:
        return self.gpu_name is not None

    @property
    def driver_os(self) -> str:
        """The OS whose numbering the driver version follows: Windows under WSL2, else the target's."""
        return "windows" if self.wsl else self.os


def virtual_package_strings(target: Target) -> list[str]:
    """Virtual packages of the target machine as name=version=build strings, for a solver."""
    gpu = target.has_gpu and target.driver_cuda
    return virtual_packages(
        target.platform,
        glibc=target.glibc,
        cuda=target.driver_cuda if gpu else None,
        cuda_arch=target.compute_capability if gpu else None,
    )


_DRIVER_RE = re.compile(r"^\d{3}(\.\d{1,3}(\.\d{1,3})?)?$")


def parse_driver_flag(text: str) -> str:
    """A driver version as nvidia-smi prints it (550.54.14, 566.03), or a branch number (550)."""
    value = text.strip()
    if not _DRIVER_RE.match(value):
        raise TargetError(
            f"--driver {text!r} is not an NVIDIA driver version; expected e.g. 550.54.14 (Linux) "
            "or 566.03 (Windows), as nvidia-smi prints it, or a branch such as 550."
        )
    return value


def _branch_floor(kb: Knowledge, driver: str | None, os_name: str) -> tuple[str | None, str | None]:
    """`--driver 550`: the oldest driver of that branch the tables know on this OS, and a note saying
    so. A full version passes through unchanged."""
    if driver is None or "." in driver:
        return driver, None
    first = kb.branch_first_driver(int(driver), os_name)
    if first is None:
        known = ", ".join(f"R{b.branch}" for b in kb.branches)
        raise TargetError(
            f"--driver {driver} is not a driver branch the solver knows ({known}); give the full version "
            "nvidia-smi --query-gpu=driver_version --format=csv,noheader prints, e.g. 550.54.14."
        )
    read_as = (
        f"{first}, the first R{driver} {os_word(os_name)} driver the solver knows"
        if "." in first
        else f"the oldest R{driver} {os_word(os_name)} driver (no build number of it is recorded)"
    )
    return (
        first,
        f"--driver {driver} read as {read_as}; pass the full version nvidia-smi prints for an exact plan",
    )


def parse_platform_flag(text: str) -> str:
    if text not in PLATFORMS:
        raise TargetError(f"--platform {text!r} is not supported; use one of: {', '.join(PLATFORMS)}.")
    return text


def parse_gpu_flag(text: str) -> tuple[str, str | None, str | None]:
    """--gpu value -> (kind, name, compute capability); kind is 'auto', 'none' or 'given'.

    Accepted: auto, none, a compute capability (8.6, sm_86), a GPU name ("RTX 4090"), or a
    name with its compute capability ("My GPU:8.6") for GPUs the table does not know.
    """
    value = text.strip()
    if value.lower() in ("auto", "none", "cpu"):
        return ("none" if value.lower() == "cpu" else value.lower(), None, None)
    cc = normalize_compute_capability(value)
    if cc is not None:
        return ("given", None, cc)
    if ":" in value:
        name, _, cc_text = value.rpartition(":")
        cc = normalize_compute_capability(cc_text)
        if cc is None or not name.strip():
            raise TargetError(f"--gpu {text!r}: after ':' give a compute capability such as 8.6 or sm_86.")
        return ("given", name.strip(), cc)
    if not value:
        raise TargetError("--gpu needs a value: auto, none, a GPU name, or a compute capability such as 8.6.")
    return ("given", value, None)


def _glibc_override() -> str | None:
    return read_overrides(os.environ).glibc


def check_overrides(kb: Knowledge) -> Overrides:
    """CONDA_OVERRIDE_*, read (a malformed value is a UsageError) and checked against the tables: a
    compute capability no NVIDIA GPU has is refused as `--gpu 13.5` is (TargetError, exit 2)."""
    overrides = read_overrides(os.environ)
    arch = overrides.cuda_arch
    if arch is not None and not kb.is_compute_capability(arch):
        known = ", ".join(kb.known_compute_capabilities())
        raise TargetError(
            f"CONDA_OVERRIDE_CUDA_ARCH={arch}: no NVIDIA GPU has compute capability {arch}; set it "
            f"as major.minor to one that exists ({known}; nvidia-smi --query-gpu=compute_cap "
            "--format=csv prints the GPU's), or unset it"
        )
    return overrides


def build_target(
    kb: Knowledge, gpu: str = "auto", driver: str | None = None, platform: str | None = None, detector=None
) -> Target:
    """Resolve the flags (and, for --gpu auto, this machine) into a Target."""
    kind, name, cc = parse_gpu_flag(gpu)
    driver = parse_driver_flag(driver) if driver is not None else None
    platform = parse_platform_flag(platform) if platform is not None else None
    overrides = check_overrides(kb)

    if kind == "auto":
        target = _detected_target(kb, driver, platform, detector)
        if driver is not None and target.has_gpu:
            _note_driver_override(kb, target, overrides, driver)
        return target

    from solver.detect import host_platform

    platform = platform or host_platform()
    if platform not in PLATFORMS:
        raise TargetError(
            f"this machine ({platform}) is not a conda platform pointops supports; "
            f"pass --platform with one of: {', '.join(PLATFORMS)}."
        )
    os_name = os_of_platform(platform)
    glibc = (_glibc_override() or DEFAULT_GLIBC) if os_name == "linux" else None
    target = Target(
        platform=platform,
        os=os_name,
        glibc=glibc,
        gpu_name=None,
        compute_capability=None,
        driver_version=None,
        driver_cuda=None,
        source="flags",
        glibc_assumed=os_name == "linux" and _glibc_override() is None,
    )
    if kind == "none":
        target.notes.append("--gpu none: CPU environment")
        if driver:
            target.notes.append(f"--driver {driver} ignored: no GPU was asked for")
        ignored = [f"CONDA_OVERRIDE_CUDA={overrides.cuda}"] if overrides.cuda else []
        ignored += [f"CONDA_OVERRIDE_CUDA_ARCH={overrides.cuda_arch}"] if overrides.cuda_arch else []
        if ignored:
            target.notes.append(f"{' and '.join(ignored)} ignored: --gpu none plans a CPU environment")
        return target

    entry = kb.gpu_lookup(name) if name else None
    if cc is not None:
        cc = _checked_compute_capability(kb, gpu, name, cc, entry, target)
    elif name is not None:
        if entry is None:
            # Never a number here: a guessed compute capability would be planned as if it were true.
            raise TargetError(
                f"unknown GPU {name!r}; give its compute capability too: --gpu '{name}:X.Y', with the X.Y "
                "that nvidia-smi --query-gpu=compute_cap --format=csv prints on that machine, or NVIDIA's "
                "table at https://developer.nvidia.com/cuda-gpus gives."
            )
        cc = entry.compute_capability
    if os_name == "osx":
        raise TargetError(
            "macOS has no CUDA: pytorch and pointops run on the CPU there. "
            "Pass --gpu none, or --platform linux-64/win-64 for an NVIDIA machine.",
            exit_code=1,
        )
    target.gpu_name = entry.name if entry else (name or f"sm_{cc.replace('.', '')} GPU")
    target.compute_capability = cc
    _check_jetson_platform(kb, target)
    _check_only_platform(kb, target)
    _note_arch_override(kb, target, overrides, gpu)
    driver, branch_note = _branch_floor(kb, driver, os_name)
    if branch_note:
        target.notes.append(branch_note)
    _set_driver(kb, target, driver)
    if driver is not None:
        _note_driver_override(kb, target, overrides, driver)
    elif overrides.cuda == "":
        target.notes.append(
            f"CONDA_OVERRIDE_CUDA is empty (no driver) but --gpu {gpu.strip()!r} asks for a GPU: "
            "the variable was ignored"
        )
    _set_jetson_stack(kb, target)
    return target


def _note_arch_override(kb: Knowledge, target: Target, overrides: Overrides, gpu: str) -> None:
    """--gpu NAME or a compute capability: CONDA_OVERRIDE_CUDA_ARCH stands in for detection only."""
    arch = overrides.cuda_arch
    if arch is None or target.compute_capability in (arch, kb.architecture(arch).renamed_to):
        return
    target.notes.append(
        f"CONDA_OVERRIDE_CUDA_ARCH={arch} ignored: --gpu {gpu.strip()!r} gives compute capability "
        f"{target.compute_capability} (the variable replaces detection, --gpu auto)"
    )


def _note_driver_override(kb: Knowledge, target: Target, overrides: Overrides, driver: str) -> None:
    """--driver: CONDA_OVERRIDE_CUDA stands in for a driver that is not given."""
    cuda = overrides.cuda
    if not cuda or cuda == target.driver_cuda:
        return
    target.notes = [
        n for n in target.notes if not n.startswith(f"CONDA_OVERRIDE_CUDA={cuda}:")
    ]  # detection's
    target.notes.append(
        f"CONDA_OVERRIDE_CUDA={cuda} ignored: --driver {driver} runs CUDA <= "
        f"{target.driver_cuda or 'unknown'}"
    )


def _checked_compute_capability(
    kb: Knowledge, flag: str, name: str | None, cc: str, entry, target: Target
) -> str:
    """A typed compute capability must belong to a GPU that exists, and to the GPU named with it."""
    if not kb.is_compute_capability(cc):
        known = ", ".join(kb.known_compute_capabilities())
        raise TargetError(
            f"--gpu {flag!r}: no NVIDIA GPU has compute capability {cc} (known: {known}). Check "
            "the value (nvidia-smi --query-gpu=compute_cap --format=csv prints it), or update "
            "pointops-solver if the GPU is newer than its tables."
        )
    if entry is not None and entry.compute_capability != cc:
        raise TargetError(
            f"--gpu {flag!r}: the {entry.name} has compute capability {entry.compute_capability}, "
            f"not {cc}. Pass --gpu {name!r} alone, or --gpu {cc} alone if the name is wrong."
        )
    renamed = kb.architecture(cc).renamed_to
    if renamed:
        target.notes.append(
            f"compute capability {cc} is the CUDA 12 number of what CUDA 13 calls {renamed}: "
            f"planning for {renamed}"
        )
        return renamed
    return cc


def _set_driver(kb: Knowledge, target: Target, driver: str | None) -> None:
    if driver is not None:
        target.driver_version = driver
        target.driver_cuda = _driver_cuda(kb, driver, target.compute_capability)
        return
    override = read_overrides(os.environ).cuda
    if override:
        target.driver_cuda = override
        target.notes.append(f"driver CUDA version {override} from CONDA_OVERRIDE_CUDA")
        return
    # No driver given: assume the newest driver that still supports this GPU.
    arch = kb.architecture(target.compute_capability) if target.compute_capability else None
    branches = kb.branches
    if arch and arch.last_branch:
        branches = [b for b in branches if b.branch <= arch.last_branch]
    newest = branches[-1]
    target.driver_cuda = newest.max_cuda
    target.driver_assumed = True
    module = kb.jetson_module(target.compute_capability) if target.compute_capability else None
    if module is not None and module.stacks:
        stack = kb.jetson_stacks[list(module.stacks)[-1]]
        target.jetson_stack = stack.key
        target.driver_cuda = stack.cuda or newest.max_cuda
        target.notes.append(
            f"no --driver given: assuming {module.stacks[stack.key]}, the newest stack for "
            f"{module.name}; pass --driver to plan for an older one"
        )
        return
    target.notes.append(
        f"no --driver given: assuming a current driver for this GPU (R{newest.branch}, "
        f"CUDA {newest.max_cuda}); pass --driver to plan for an older one"
    )


def _driver_cuda(kb: Knowledge, driver: str, compute_capability: str | None) -> str | None:
    """Highest CUDA a driver runs. A Jetson's JetPack 6 driver (540.x) has numbers of its own."""
    module = kb.jetson_module(compute_capability) if compute_capability else None
    if module is not None and module.stacks:
        stack = kb.jetson_stack_of_driver(module, driver, None)
        if stack is not None and stack.cuda is not None:
            return stack.cuda
    return kb.driver_max_cuda(driver)


def _check_jetson_platform(kb: Knowledge, target: Target) -> None:
    module = kb.jetson_module(target.compute_capability) if target.compute_capability else None
    if module is not None and target.platform != ARM_VARIANT_PLATFORM:
        raise TargetError(
            f"{module.name} (compute capability {target.compute_capability}) is a Jetson, a "
            f"{ARM_VARIANT_PLATFORM} machine, not {target.platform}. Pass --platform "
            f"{ARM_VARIANT_PLATFORM}.",
            exit_code=1,
        )


def _check_only_platform(kb: Knowledge, target: Target) -> None:
    """GB10, GH200, GB200, GB300 exist only in Arm machines: another platform is no such machine."""
    only = kb.only_platform(target.gpu_name, target.compute_capability)
    if only is None or only.only_on == target.platform:
        return
    raise TargetError(
        f"{target.gpu_name} (compute capability {target.compute_capability}) exists only in "
        f"{only.only_on} machines ({only.only_on_source}), not {target.platform}. Pass --platform {only.only_on}.",
        exit_code=1,
    )


def _set_jetson_stack(kb: Knowledge, target: Target) -> None:
    """A Jetson's driver belongs to a JetPack stack: name it, and assume the glibc of its OS."""
    module = kb.jetson_module(target.compute_capability) if target.compute_capability else None
    if module is None or not module.stacks:
        return
    if target.jetson_stack is None:
        stack = kb.jetson_stack_of_driver(module, target.driver_version, target.driver_cuda)
        if stack is None:
            return  # the planner refuses: a driver of no JetPack stack this module has
        target.jetson_stack = stack.key
    stack = kb.jetson_stacks[target.jetson_stack]
    if (
        stack.glibc
        and target.glibc_assumed
        and target.glibc
        and parse_version(stack.glibc) > parse_version(target.glibc)
    ):
        target.glibc = stack.glibc
        target.notes.append(f"glibc {stack.glibc} assumed: the Ubuntu release {stack.label} is built on")


def _detected_target(kb: Knowledge, driver: str | None, platform: str | None, detector) -> Target:
    from solver.detect import detect

    info = (detector or detect)()
    plan_platform = platform or info.platform
    if plan_platform not in PLATFORMS:
        raise TargetError(
            f"this machine ({info.platform}) is not a conda platform pointops supports; "
            f"pass --platform with one of: {', '.join(PLATFORMS)}."
        )
    os_name = os_of_platform(plan_platform)
    same_machine = plan_platform == info.platform
    wsl = bool(getattr(info, "wsl", False))
    driver, branch_note = _branch_floor(kb, driver, "windows" if wsl else os_name)
    glibc = None
    if os_name == "linux":
        glibc = _glibc_override() or (info.glibc if same_machine else None) or DEFAULT_GLIBC
    target = Target(
        platform=plan_platform,
        os=os_name,
        glibc=glibc,
        gpu_name=None,
        compute_capability=None,
        driver_version=driver or info.driver_version,
        driver_cuda=info.driver_cuda,
        source="override" if info.source == "override" else "detected",
        notes=list(info.notes) + ([branch_note] if branch_note else []),
        wsl=wsl,
        glibc_assumed=os_name == "linux"
        and glibc == DEFAULT_GLIBC
        and _glibc_override() is None
        and not (same_machine and info.glibc),
    )
    if driver is not None:
        target.driver_cuda = kb.driver_max_cuda(driver)
    if info.driver_cuda and not info.gpus and info.source == "override" and os_name != "osx":
        # CONDA_OVERRIDE_CUDA without CONDA_OVERRIDE_CUDA_ARCH: a GPU of unknown capability.
        target.gpu_name = "unidentified GPU"
        target.notes.append(
            "CONDA_OVERRIDE_CUDA_ARCH is not set: the GPU's compute capability is unknown, "
            "so arch coverage is not checked"
        )
        return target
    if os_name == "osx":
        target.driver_version = target.driver_cuda = None
        target.notes = ["macOS has no CUDA: CPU environment"]
        return target
    if (info.driver_cuda is None and driver is None) or not info.gpus:
        why = "; ".join(info.notes) or "no NVIDIA driver answered"
        target.driver_version = target.driver_cuda = None
        target.notes = [
            f"no usable NVIDIA GPU found ({why}): CPU environment; "
            "pass --gpu NAME --driver VERSION to plan for another machine"
        ]
        if driver is not None:
            target.notes.append(f"--driver {driver} ignored: there is no GPU to plan for")
        return target
    lowest = info.min_compute_capability
    chosen = next((g for g in info.gpus if g.compute_capability == lowest), info.gpus[0])
    target.gpu_name, target.compute_capability = chosen.name, chosen.compute_capability
    distinct = {g.compute_capability for g in info.gpus}
    if len(distinct) > 1:
        target.notes.append(
            f"{len(info.gpus)} GPUs with compute capabilities {sorted(distinct, key=str)}: "
            f"planning for the lowest ({lowest})"
        )
    if target.compute_capability is None:
        target.notes.append(
            f"the compute capability of {chosen.name} is unknown: arch coverage is not checked"
        )
    if target.driver_version:
        try:
            parse_version(target.driver_version)
        except ValueError:
            target.driver_version = None
    if target.driver_version and wsl:
        target.notes.append(
            f"WSL2: driver {target.driver_version} is the Windows host's driver (nvidia-smi inside WSL prints "
            "its number), so it is compared with NVIDIA's Windows minimums"
        )
    if target.compute_capability:
        _check_jetson_platform(kb, target)
        _check_only_platform(kb, target)
        if driver is not None:
            target.driver_cuda = _driver_cuda(kb, driver, target.compute_capability)
        _set_jetson_stack(kb, target)
    return target
