"""jetson.yaml: Jetson (Tegra) modules and their JetPack stacks. A Jetson's driver numbers are not
desktop branches (JetPack 6 prints 540.4.0 with CUDA 12.6), so a driver is matched to a stack by
its own series, or by the CUDA version it reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from solver.knowledge._fields import KnowledgeError, need, version_str
from solver.knowledge.gpus import Architecture
from solver.vocabulary import ARM_VARIANTS, major_minor, parse_version


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


@dataclass(frozen=True)
class JetsonTable:
    stacks: dict[str, JetsonStack]
    modules: dict[str, JetsonModule]

    def module(self, compute_capability: str) -> JetsonModule | None:
        return self.modules.get(major_minor(compute_capability))

    def stack_of_driver(
        self,
        module: JetsonModule,
        driver: str | None,
        driver_cuda: str | None,
        desktop_max_cuda: Callable[[str], str | None],
    ) -> JetsonStack | None:
        """The JetPack stack a Jetson's driver belongs to, from its version or the CUDA it reports.

        None when neither matches a stack this module has (a desktop driver number, or a JetPack
        without CUDA 12). `desktop_max_cuda` maps a desktop-numbered driver to its CUDA version.
        """
        stacks = [self.stacks[key] for key in module.stacks]
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
                reported = stack.cuda or desktop_max_cuda(str(stack.driver_min))
                if reported is None:
                    continue
                if major == parse_version(reported)[0] or (
                    stack.driver_min is not None and major > parse_version(reported)[0]
                ):
                    return stack
        return None


def _parse_stack(key: str, item: dict) -> JetsonStack:
    where = f"jetson.yaml stacks.{key}"
    arm_variant = str(need(item, "arm_variant", where))
    if arm_variant not in ARM_VARIANTS:
        raise KnowledgeError(f"{where}: arm_variant must be one of {', '.join(ARM_VARIANTS)}")
    series, minimum = item.get("driver_series"), item.get("driver_min")
    if (series is None) == (minimum is None):
        raise KnowledgeError(f"{where}: give exactly one of driver_series and driver_min")
    return JetsonStack(
        key=key,
        label=str(need(item, "label", where)),
        arm_variant=arm_variant,
        driver_series=int(series) if series is not None else None,
        driver_min=int(minimum) if minimum is not None else None,
        cuda=version_str(item["cuda"], where) if item.get("cuda") else None,
        glibc=version_str(item["glibc"], where) if item.get("glibc") else None,
    )


def _parse_module(cc, item: dict, stacks: dict[str, JetsonStack], architectures: dict[str, Architecture]):
    where = f"jetson.yaml modules.{cc}"
    cc = version_str(cc, where)
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
    return JetsonModule(
        compute_capability=cc,
        name=str(need(item, "name", where)),
        stacks=module_stacks,
        last_stack=item.get("last_stack"),
        assumed=assumed,
    )


def parse_jetson(raw: dict, architectures: dict[str, Architecture]) -> JetsonTable:
    """jetson.yaml -> JetsonTable; each module is a tegra compute capability of gpus.yaml."""
    stacks = {key: _parse_stack(key, item) for key, item in need(raw, "stacks", "jetson.yaml").items()}
    modules = {}
    for cc, item in need(raw, "modules", "jetson.yaml").items():
        module = _parse_module(cc, item, stacks, architectures)
        modules[module.compute_capability] = module
    return JetsonTable(stacks=stacks, modules=modules)
