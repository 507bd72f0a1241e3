"""Check a solved environment against the planning rules, independently of how it was found:
no CPU pytorch for a GPU target, the planned CUDA variant and cuda-version, a cuda-version the
driver runs, the planned Python, the planned arm variant (sbsa and tegra builds share build
strings), a pytorch build new enough for the GPU, __cuda_arch constraints the GPU satisfies, and
each --with package in the version and build the plan pinned."""

from __future__ import annotations

import fnmatch
import re

from solver.knowledge import Knowledge, parse_version
from solver.plan import Plan


def verify(kb: Knowledge, plan: Plan, records) -> list[str]:
    """Problems found in the solved packages (solver.solve.SolvedPackage); empty when all is well."""
    by_name = {r.name: r for r in records}
    missing = [
        f"the solution has no {name}" for name in ("python", "pytorch", "pointops") if name not in by_name
    ]
    if missing:
        return missing
    problems = []
    for check in (_versions, _variants, _arm_variant, _cuda_version, _arch_constraints, _with_packages):
        problems += check(kb, plan, by_name, records)
    return problems


def _versions(kb, plan, by_name, records) -> list[str]:
    problems = []
    python = str(by_name["python"].version)
    if parse_version(python)[:2] != parse_version(plan.python)[:2]:
        problems.append(f"python {python} was solved, {plan.python} was planned")
    torch = by_name["pytorch"]
    planned = plan.pytorch_version if plan.pytorch_exact else plan.pytorch_minor
    if parse_version(str(torch.version))[: len(parse_version(planned))] != parse_version(planned):
        problems.append(f"pytorch {torch.version} was solved, {planned} was planned")
    if plan.pytorch_min_build_number is not None and torch.build_number < plan.pytorch_min_build_number:
        problems.append(
            f"pytorch {torch.version} {torch.build} has build number {torch.build_number}; only "
            f"{plan.pytorch_min_build_number} and newer carry SASS for {plan.target.compute_capability}"
        )
    return problems


def _variants(kb, plan, by_name, records) -> list[str]:
    problems = []
    for name in ("pytorch", "libtorch", "pointops"):
        record = by_name.get(name)
        if record is None:
            continue
        build = str(record.build)
        if plan.target.has_gpu and build.startswith("cpu"):
            problems.append(f"{name} {record.version} {build} is a CPU build, but a GPU was asked for")
        elif not build.startswith(plan.variant):
            problems.append(f"{name} build {build} is not the planned {plan.variant} variant")
    return problems


def _arm_variant(kb, plan, by_name, records) -> list[str]:
    if not plan.arm_variant:
        return []
    arm = by_name.get("arm-variant")
    if arm is None:
        return [f"the solution has no arm-variant package (arm-variant={plan.arm_variant} was planned)"]
    if str(arm.build) != plan.arm_variant:
        return [f"arm-variant {arm.build} was solved, {plan.arm_variant} was planned"]
    return []


def _cuda_version(kb, plan, by_name, records) -> list[str]:
    target, cuda_record = plan.target, by_name.get("cuda-version")
    if not plan.cuda_version:
        return (
            [f"cuda-version {cuda_record.version} in a plan without CUDA"]
            if cuda_record and target.has_gpu
            else []
        )
    if cuda_record is None:
        return ["the solution has no cuda-version package"]
    problems = []
    solved = ".".join(str(cuda_record.version).split(".")[:2])
    if solved != plan.cuda_version:
        problems.append(f"cuda-version {solved} was solved, {plan.cuda_version} was planned")
    mode = kb.driver_runs_cuda(target.driver_cuda, solved, target.driver_version, target.os)
    if mode is None:
        problems.append(f"cuda-version {solved} is newer than the driver runs (CUDA <= {target.driver_cuda})")
    elif mode == "mvc" and set(plan.coverage.values()) != {"sass"}:
        problems.append(
            f"cuda-version {solved} needs minor-version compatibility, which needs SASS for "
            f"compute capability {target.compute_capability}"
        )
    return problems


def _arch_constraints(kb, plan, by_name, records) -> list[str]:
    capability = plan.target.compute_capability
    if not capability:
        return []
    problems = []
    cc = parse_version(capability)
    for record in records:
        for constraint in list(record.constrains) + list(record.depends):
            match = re.match(r"^__cuda_arch\s*>=\s*([\d.]+)", str(constraint))
            if match and cc < parse_version(match.group(1)):
                problems.append(
                    f"{record.name} {record.build} needs compute capability >= "
                    f"{match.group(1)}, the GPU has {capability}"
                )
    return problems


def _with_packages(kb, plan, by_name, records) -> list[str]:
    """Each --with package solved, in the planned version and a build of the pinned pattern."""
    problems = []
    for pin in plan.with_pins:
        record = by_name.get(pin.name)
        if record is None:
            problems.append(f"the solution has no {pin.name} (--with)")
        elif str(record.version) != pin.version:
            problems.append(f"{pin.name} {record.version} was solved, {pin.version} was planned")
        elif not fnmatch.fnmatchcase(str(record.build), pin.build):
            problems.append(f"{pin.name} build {record.build} is not the planned {pin.build}")
    return problems
