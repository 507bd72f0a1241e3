"""The GPU and driver against what is installed: a CPU torch on a GPU machine, a torch or cuda-version
newer than the driver, and whether each GPU's compute capability is in the binaries (SASS, PTX only,
or not at all: "no kernel image is available for execution on the device").
"""

from __future__ import annotations

import re

from solver.detect import normalize_compute_capability
from solver.knowledge import ArchList, Knowledge, arch_coverage, os_of_platform, parse_version

from .facts import CondaRecord, Facts
from .findings import Finding, failed, info, passed, warned

MAKE_ENV_FIX = "solver make-env --gpu auto > env.yml && conda env create -f env.yml"
NO_TORCH = "ModuleNotFoundError: No module named 'torch'"
FOREIGN_POINTOPS_FIX = (
    "this is Pointcept's library, also named pointops: to use this project's, uninstall it (pip uninstall "
    "pointops; for a setup.py install delete its egg) and install this project's pointops (solver make-env "
    "plans it)"
)


def _record(facts: Facts, *names: str) -> CondaRecord | None:
    return next((r for r in facts.conda.records if r.name in names), None)


def _gpu_text(facts: Facts) -> str:
    gpus = ", ".join(
        f"{g.name} (sm_{(g.compute_capability or '?').replace('.', '')})" for g in facts.driver.gpus
    )
    return f"{gpus}; driver {facts.driver.version or '?'} (CUDA {facts.driver.cuda or '?'})"


def _os(facts: Facts) -> str:
    try:
        return os_of_platform(facts.platform)
    except (KeyError, IndexError):
        return "linux"


def _driver_os(facts: Facts) -> str:
    """The OS whose driver numbers the driver version follows: Windows under WSL2."""
    return "windows" if facts.driver.wsl else _os(facts)


def _lowest_cc(facts: Facts) -> str | None:
    known = [g.compute_capability for g in facts.driver.gpus if g.compute_capability]
    return min(known, key=parse_version) if known else None


def _conda_fix(facts: Facts, kb: Knowledge) -> str:
    """The pytorch build and cuda-version make-env would plan for this GPU and driver."""
    from solver.errors import SolverError
    from solver.plan import make_plan
    from solver.target import Target

    gpu = facts.driver.gpus[0] if facts.driver.gpus else None
    target = Target(
        platform=facts.platform,
        os=_os(facts),
        glibc=None,
        gpu_name=gpu.name if gpu else None,
        compute_capability=_lowest_cc(facts),
        driver_version=facts.driver.version,
        driver_cuda=facts.driver.cuda,
        source="detected",
        wsl=facts.driver.wsl,
    )
    try:
        plan = make_plan(kb, target)
    except SolverError as exc:
        return f"no conda-forge pytorch build fits this GPU and driver: {exc.one_line()}"
    except (KeyError, ValueError):
        return MAKE_ENV_FIX
    pins = " ".join(f'"{spec}"' for spec in plan.specs() if spec.startswith(("pytorch=", "cuda-version=")))
    return f"conda install {pins}  (or: {MAKE_ENV_FIX})"


def _pip_fix(facts: Facts, kb: Knowledge) -> str:
    """A PyTorch wheel index that exists, whose wheels the driver runs and that carry code for the GPU."""
    from solver.pytorch_wheels import load_wheels

    cc = _lowest_cc(facts)
    if not facts.driver.cuda or not cc:
        return f"state the GPU and driver, then follow: {MAKE_ENV_FIX}"
    choice = load_wheels().choose(kb, facts.platform, cc, facts.driver.cuda, facts.driver.version)
    if choice is None:
        return (
            f"no PyTorch CUDA wheel of a release pointops supports runs on sm_{cc.replace('.', '')} with this "
            f"driver (CUDA {facts.driver.cuda}); fix the driver or use a CPU build: pip install "
            "--force-reinstall torch --index-url https://download.pytorch.org/whl/cpu"
        )
    how = "" if choice.mode == "full" else ", through minor-version compatibility"
    return (
        f"{choice.pip_command()}  (CUDA {choice.index.cuda} wheels with "
        f"{'native code' if choice.coverage == 'sass' else 'PTX'} for sm_{cc.replace('.', '')}; the driver runs "
        f"CUDA <= {facts.driver.cuda}{how})"
    )


def _gpu_build_fix(facts: Facts, kb: Knowledge) -> str:
    """What to install for a CUDA build of torch that fits this GPU and driver: conda's pytorch in a
    conda environment, a PyTorch wheel index elsewhere."""
    if facts.conda.prefix is not None:
        return _conda_fix(facts, kb)
    return _pip_fix(facts, kb)


# ---------------------------------------------------------------- driver and GPUs


_DRIVER_FIXES = {
    "does not answer": "the driver is hung or a GPU fell off the bus: look for NVRM/Xid lines in `dmesg`, then "
    "reload the driver or reboot; `nvidia-smi` must answer",
    "not loaded": "load the driver (sudo modprobe nvidia), or reinstall it for the running kernel (after a kernel "
    "update its module must be rebuilt); `nvidia-smi` must answer",
}


def check_overrides(facts: Facts, kb: Knowledge) -> list[Finding]:
    if not facts.driver.override_error:
        return []
    return [
        failed(
            "gpu.overrides",
            "a CONDA_OVERRIDE_* variable is malformed, so conda, pixi and rattler refuse "
            "to run and nothing was overridden here",
            facts.driver.override_error,
            "set it as the message says, or unset it",
        )
    ]


def check_driver(facts: Facts, kb: Knowledge) -> list[Finding]:
    check = "gpu.driver"
    driver = facts.driver
    if driver.problem and not driver.gpus:
        fix = next(
            (text for words, text in _DRIVER_FIXES.items() if words in driver.problem),
            "run `nvidia-smi` to see the error, and reinstall the NVIDIA driver if it persists",
        )
        return [failed(check, driver.problem, driver.error, fix)]
    if not driver.gpus:
        why = driver.error or "no NVIDIA driver answered"
        return [
            info(
                check,
                "no NVIDIA GPU is visible; CUDA checks do not apply",
                why,
                "if this machine has a GPU: check `nvidia-smi` and the driver installation",
            )
        ]
    findings = []
    branch = kb.driver_branch(driver.version) if driver.version else None
    for gpu in driver.gpus:
        architecture = kb.architecture(gpu.compute_capability) if gpu.compute_capability else None
        if branch and architecture and architecture.last_branch and branch.branch > architecture.last_branch:
            findings.append(
                failed(
                    check,
                    f"driver branch R{branch.branch} no longer supports {gpu.name} ({architecture.family})",
                    _gpu_text(facts),
                    f"install an R{architecture.last_branch} driver, the last branch for {architecture.family}",
                )
            )
    if not findings:
        findings.append(
            passed(
                check,
                f"{len(driver.gpus)} NVIDIA GPU(s) and a driver that answers",
                _gpu_text(facts) + (f"; from {driver.source}" if driver.source else ""),
            )
        )
    return findings


# ---------------------------------------------------------------- torch build and cuda-version


def _driver_verdict(kb: Knowledge, facts: Facts, cuda: str) -> str | None:
    try:
        return kb.driver_runs_cuda(facts.driver.cuda, cuda, facts.driver.version, _driver_os(facts))
    except (KeyError, ValueError):
        return "full"


def _min_driver_text(kb: Knowledge, cuda: str, os_name: str) -> str:
    try:
        return f">= {kb.cuda_min_driver(cuda, os_name)}"
    except KeyError:
        return f"supporting CUDA {cuda}"


def _torch_index(version: str) -> str:
    """' --index-url <PyTorch's index>' for a version with a local tag ('2.13.0+cu130'), else ''."""
    from solver.pytorch_wheels import load_wheels

    tag = version.partition("+")[2]
    return f" --index-url {load_wheels().url(tag)}" if re.fullmatch(r"cpu|cu\d+|rocm[\d.]+", tag) else ""


def _pointops_torch(facts: Facts) -> str:
    """The torch the installed pointops was built against (its _build_info.json), when known."""
    return next((i.built_against_torch for i in facts.pointops_installs if i.built_against_torch), "")


def install_torch_fix(facts: Facts) -> str:
    """Install the torch that pointops was built against (the environment was planned with it)."""
    wanted = _pointops_torch(facts)
    if facts.conda.prefix is not None:
        pin = f' "pytorch={wanted.split("+")[0]}"' if wanted else " pytorch"
        return f"conda install{pin}" + (f"  (pointops was built against torch {wanted})" if wanted else "")
    if wanted:
        return f'pip install "torch=={wanted}"{_torch_index(wanted)}  (pointops was built against it)'
    return "pip install torch  (or plan the whole environment: solver make-env --format pip)"


def reinstall_torch_fix(facts: Facts, version: str, from_conda: bool) -> str:
    """Put the same torch back, and nothing else (--no-deps: its CUDA wheels stay as they are)."""
    if from_conda:
        return f'conda install --force-reinstall "pytorch={version}"'
    return f'pip install --no-deps --force-reinstall --no-cache-dir "torch=={version}"{_torch_index(version)}'


def _torch_import_finding(facts: Facts) -> Finding:
    """torch missing or broken: when something here needs it, this is the root cause of the rest."""
    check, torch = "gpu.torch-build", facts.torch
    pytorch = _record(facts, "pytorch")
    dist = next((d for d in facts.conda.dists if d.name == "torch"), None)
    if pytorch is not None or dist is not None:
        version = pytorch.version if pytorch else dist.version
        fix = reinstall_torch_fix(facts, version, pytorch is not None)
        return failed(
            check, f"torch {version} is installed but does not import", torch.import_error[:300], fix
        )
    if torch.import_error and not torch.import_error.startswith(NO_TORCH):  # there, but broken or crashing
        make = warned if "timed out" in torch.import_error else failed
        return make(
            check,
            "torch does not import",
            torch.import_error[:300],
            f"reinstall it: {install_torch_fix(facts)}",
        )
    needed_by = facts.torch_dependents or (["pointops"] if facts.pointops.installed else [])
    if not needed_by:
        return info(check, "torch is not installed in this environment", torch.import_error)
    return failed(
        check,
        f"torch is not installed, but {needed_by[0]}"
        + (f" (and {len(needed_by) - 1} more)" if needed_by[1:] else ""),
        torch.import_error[:300],
        install_torch_fix(facts),
    )


def check_torch_build(facts: Facts, kb: Knowledge) -> list[Finding]:
    check = "gpu.torch-build"
    torch = facts.torch
    if not torch.importable:
        return [_torch_import_finding(facts)]
    gpus = facts.driver.gpus
    build = f"torch {torch.version}" + (f" (CUDA {torch.cuda})" if torch.cuda else " (CPU build)")
    if not gpus:
        if torch.cuda:
            return [
                info(check, f"{build} on a machine with no visible GPU; it will run on the CPU only", build)
            ]
        return [passed(check, f"{build} on a machine without an NVIDIA GPU", build)]
    if not torch.cuda:
        return [
            failed(
                check,
                "CPU build of PyTorch on a machine with an NVIDIA GPU",
                f"{build}; {_gpu_text(facts)}",
                _gpu_build_fix(facts, kb),
            )
        ]
    findings = []
    verdict = _driver_verdict(kb, facts, torch.cuda) if facts.driver.cuda else "full"
    if verdict is None:
        findings.append(
            failed(
                check,
                f"{build} needs a newer driver: CUDA driver version is insufficient",
                _gpu_text(facts),
                f"upgrade the NVIDIA driver to {_min_driver_text(kb, torch.cuda, _driver_os(facts))}, or {_gpu_build_fix(facts, kb)}",
            )
        )
    elif verdict == "mvc":
        findings.append(
            warned(
                check,
                f"{build} is newer than the driver's CUDA {facts.driver.cuda}; it runs only through minor-version "
                "compatibility (SASS only, no PTX JIT)",
                _gpu_text(facts),
                f"upgrade the driver to {_min_driver_text(kb, torch.cuda, _driver_os(facts))}, or {_gpu_build_fix(facts, kb)}",
            )
        )
    if torch.cuda_available is False and verdict is not None:
        visible = torch.cuda_visible_devices
        if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
            fix = "unset CUDA_VISIBLE_DEVICES (it hides every GPU)"
        else:
            fix = 'run `python -c "import torch; torch.cuda.init()"` for the reason; check that /dev/nvidia* is accessible'
        evidence = f"{build}; {_gpu_text(facts)}" + (
            f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        )
        findings.append(
            failed(
                check,
                "torch.cuda.is_available() is False although a GPU and a CUDA build are present",
                evidence + (f"; {torch.cuda_error}" if torch.cuda_error else ""),
                fix,
            )
        )
    if not findings:
        findings.append(passed(check, f"{build} fits the driver", _gpu_text(facts)))
    return findings


def check_cuda_version_package(facts: Facts, kb: Knowledge) -> list[Finding]:
    """conda's cuda-version package sets the CUDA minor of every CUDA library in the environment."""
    check = "gpu.cuda-version"
    record = _record(facts, "cuda-version")
    if record is None:
        return []
    if not facts.driver.gpus or not facts.driver.cuda:
        return [
            info(
                check, f"cuda-version {record.version} is installed but no driver is visible to compare with"
            )
        ]
    try:
        wanted = ".".join(str(p) for p in parse_version(record.version)[:2])
    except ValueError:
        return [warned(check, f"cuda-version {record.version} is not a version number", record.build)]
    verdict = _driver_verdict(kb, facts, wanted)
    evidence = f"cuda-version {record.version}; {_gpu_text(facts)}"
    if verdict is None:
        return [
            failed(
                check,
                f"cuda-version {wanted} is newer than the driver supports",
                evidence,
                f"upgrade the driver to {_min_driver_text(kb, wanted, _driver_os(facts))}, or "
                f'conda install "cuda-version<={facts.driver.cuda}"',
            )
        ]
    if verdict == "mvc":
        return [
            warned(
                check,
                f"cuda-version {wanted} is newer than the driver's CUDA {facts.driver.cuda}: "
                'fine for SASS, but PTX JIT fails ("PTX was compiled with an unsupported toolchain")',
                evidence,
                f'conda install "cuda-version<={facts.driver.cuda}", or upgrade the driver to '
                f"{_min_driver_text(kb, wanted, _driver_os(facts))}",
            )
        ]
    return [passed(check, f"cuda-version {wanted} fits the driver (CUDA {facts.driver.cuda})", evidence)]


# ---------------------------------------------------------------- compute capability vs archs


def arch_list_from_names(names: list[str]) -> tuple[ArchList, set[str]]:
    """torch-style arch names ('sm_90', 'sm_90a', 'compute_90', '9.0') -> (archs, arch-specific CCs).

    'a' targets (sm_90a) run only on exactly that compute capability, so they are kept apart.
    """
    sass, ptx, exact = set(), [], set()
    for raw in names:
        text = str(raw).strip().lower()
        match = re.match(r"^(sm|compute)_(\d+)([af]?)$", text)
        if match:
            cc = normalize_compute_capability(match.group(2))
            if cc is None:
                continue
            if match.group(1) == "compute":
                ptx.append(cc)
            elif match.group(3) == "a":
                exact.add(cc)
            else:
                sass.add(cc)
        else:
            cc = normalize_compute_capability(text.replace("+ptx", ""))
            if cc:
                sass.add(cc)
                if text.endswith("+ptx"):
                    ptx.append(cc)
    ordered = tuple(sorted(sass, key=parse_version))
    newest_ptx = max(ptx, key=parse_version) if ptx else None
    return ArchList(sass=ordered, ptx=newest_ptx), exact


def coverage(cc: str, archs: ArchList, exact: set[str]) -> str | None:
    return "sass" if cc in exact else arch_coverage(cc, archs)


def arch_findings(
    check: str,
    what: str,
    archs: ArchList,
    exact: set[str],
    binary_cuda: str | None,
    facts: Facts,
    fix_for_gpu,
) -> list[Finding]:
    findings = []
    listed = archs.describe() + ("".join(f";{e}a" for e in sorted(exact)))
    for gpu in facts.driver.gpus:
        if not gpu.compute_capability:
            findings.append(
                warned(
                    check,
                    f"compute capability of {gpu.name} is unknown; {what} not compared",
                    listed,
                    "set CONDA_OVERRIDE_CUDA_ARCH=<major.minor> to state it",
                )
            )
            continue
        cc = gpu.compute_capability
        sm = f"sm_{cc.replace('.', '')}"
        kind = coverage(cc, archs, exact)
        evidence = f"{gpu.name} is {sm}; {what} carries {listed}"
        if kind == "sass":
            findings.append(passed(check, f"{what} has native code (SASS) for {gpu.name}", evidence))
        elif kind == "ptx":
            too_new = (
                binary_cuda
                and facts.driver.cuda
                and parse_version(binary_cuda)[:2] > parse_version(facts.driver.cuda)[:2]
            )
            if too_new:
                findings.append(
                    failed(
                        check,
                        f"{what} has only PTX for {gpu.name}, built by CUDA {binary_cuda}, newer than the "
                        f"driver's CUDA {facts.driver.cuda}: the driver cannot JIT it",
                        evidence,
                        fix_for_gpu(cc),
                    )
                )
            else:
                findings.append(
                    warned(
                        check,
                        f"{what} has only PTX for {gpu.name}: it runs after a JIT compile at first use (slow "
                        "start, cached in ~/.nv/ComputeCache)",
                        evidence,
                        fix_for_gpu(cc),
                    )
                )
        else:
            findings.append(
                failed(
                    check,
                    f'{what} has no code for {gpu.name}: "no kernel image is available for execution on the '
                    'device"',
                    evidence,
                    fix_for_gpu(cc),
                )
            )
    return findings


def check_torch_archs(facts: Facts, kb: Knowledge) -> list[Finding]:
    check = "gpu.torch-archs"
    torch = facts.torch
    if not facts.driver.gpus or not torch.importable or not torch.cuda:
        return []
    if not torch.arch_list:
        return [
            info(
                check,
                "torch.cuda.get_arch_list() is empty (CUDA not initialised); archs not compared",
                torch.cuda_error or f"torch {torch.version}",
            )
        ]
    archs, exact = arch_list_from_names(torch.arch_list)
    return arch_findings(
        check, f"torch {torch.version}", archs, exact, torch.cuda, facts, lambda cc: _gpu_build_fix(facts, kb)
    )


def pointops_archs(build_info: dict) -> tuple[str | None, ArchList, set[str]]:
    """(cuda version, archs, arch-specific CCs) from pointops.build_info(), whatever the list spelling."""
    cuda = build_info.get("cuda_version") or build_info.get("cuda")
    if not isinstance(cuda, str):  # some spell "is this a CUDA build" as cuda: true/false
        cuda = None
    sass = build_info.get("sass_archs") or build_info.get("sass") or build_info.get("archs") or []
    ptx = build_info.get("ptx_arch") or build_info.get("ptx")
    if isinstance(sass, str):
        sass = [s for s in re.split(r"[;, ]+", sass) if s]
    ptx_names = (
        [f"compute_{str(ptx).replace('.', '').replace('sm_', '').replace('compute_', '')}"] if ptx else []
    )
    archs, exact = arch_list_from_names(list(sass) + ptx_names)
    return (str(cuda) if cuda else None), archs, exact


def _describe_build(build_info: dict, cuda: str | None, archs: ArchList, exact: set[str]) -> str:
    torch_target = build_info.get("torch_target_version") or build_info.get("torch_target") or "?"
    built = build_info.get("built_against_torch")
    text = f"torch target {torch_target}" + (f", built against torch {built}" if built else "")
    if not cuda:
        return text + ", CPU build"
    listed = archs.describe() + "".join(f";{e}a" for e in sorted(exact))
    return text + f", CUDA {cuda}, archs {listed or 'none listed'}"


def _pointops_unread(facts: Facts) -> Finding | None:
    """pointops.build when the build could not be read; None when it was."""
    from .pointops_owners import reinstall_pointops

    pointops = facts.pointops
    if not facts.torch.importable and (pointops.installed or facts.pointops_installs):
        return info("pointops.build", "pointops was not checked: torch does not import (gpu.torch-build)")
    if pointops.stage == "not tried":
        return info(
            "pointops.build",
            "pointops was not checked: the runtime probe stopped before it",
            facts.torch.cuda_error,
        )
    if not pointops.installed:
        return info(
            "pointops.build",
            "pointops is not installed",
            "",
            "conda install pointops, or pip install pointops",
        )
    if pointops.stage == "import" and any(m.module == "pointops" for m in facts.imports):
        return info(
            "pointops.build", "pointops' build was not read: it does not import (extensions.import says why)"
        )
    if pointops.build_info is None:
        foreign = "not this project's package" in pointops.error
        return failed(
            "pointops.build",
            "pointops is installed but its build could not be read",
            pointops.error[:300],
            FOREIGN_POINTOPS_FIX if foreign else reinstall_pointops(facts),
        )
    return None


def check_pointops(facts: Facts, kb: Knowledge) -> list[Finding]:
    check = "gpu.pointops-archs"
    pointops = facts.pointops
    unread = _pointops_unread(facts)
    if unread is not None:
        return [unread]
    cuda, archs, exact = pointops_archs(pointops.build_info)
    summary = _describe_build(pointops.build_info, cuda, archs, exact)
    findings = [passed("pointops.build", "pointops imports and reports its build", summary)]
    if not facts.driver.gpus:
        return findings
    if not cuda:
        findings.append(
            warned(
                check,
                "pointops is a CPU build on a machine with an NVIDIA GPU; its ops will not "
                "accept CUDA tensors",
                summary,
                'conda install "pointops=*=cuda*"',
            )
        )
        return findings
    fix = 'conda install "pointops=*=cuda*" with the CUDA variant made for this GPU (' + MAKE_ENV_FIX + ")"
    return findings + arch_findings(check, "pointops", archs, exact, cuda, facts, lambda cc: fix)


def check_cuda_probe(facts: Facts, kb: Knowledge) -> list[Finding]:
    """Asking torch.cuda killed or hung the probe child (a broken driver or CUDA runtime)."""
    error = facts.torch.cuda_error
    if not facts.torch.importable or not error.startswith("asking torch.cuda "):
        return []
    make = warned if "timed out" in error else failed
    fix = 'run `python -c "import torch; torch.cuda.init()"` to see where; then check the driver (nvidia-smi)'
    return [make("gpu.torch-build", f"torch imports, but {error}", _gpu_text(facts), fix)]


def check_gpu(facts: Facts, kb: Knowledge) -> list[Finding]:
    return (
        check_overrides(facts, kb)
        + check_driver(facts, kb)
        + check_torch_build(facts, kb)
        + check_cuda_probe(facts, kb)
        + check_cuda_version_package(facts, kb)
        + check_torch_archs(facts, kb)
        + check_pointops(facts, kb)
    )
