"""Collect the facts of this machine and one Python environment (the only part of doctor that looks
at the real machine; the checks read what this returns).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from solver import bounded

from .conda_env import gather_conda, resolve_conda, site_packages_dirs
from .facts import DriverFacts, Facts, GpuFact, ImportFact, PointopsFacts, TorchFacts
from .imports import discover_extensions
from .network import gather_network, run_probes
from .pointops_owners import find_installs
from .toolchain import gather_toolchain
from .windows import gather_windows

PROBE_SCRIPT = Path(__file__).with_name("runtime_probe.py")


@dataclass
class GatherOptions:
    prefix: Path  # the environment to inspect
    python: str  # its interpreter, which runs the runtime probe
    env: Mapping[str, str]
    home: Path
    probe_network: bool = False
    probe_urls: list[str] = field(default_factory=list)
    probe_timeout_s: float = 5.0
    extra_modules: list[str] = field(default_factory=list)
    runtime_timeout_s: float = 180.0
    driver_timeout_s: float = 10.0  # nvidia-smi / NVML, and py-rattler's virtual-package detection


def python_of_prefix(prefix: Path) -> str | None:
    for candidate in (prefix / "bin" / "python", prefix / "python.exe", prefix / "bin" / "python3"):
        if candidate.is_file():
            return str(candidate)
    return None


def gather_driver(env: Mapping[str, str], timeout_s: float = 10.0) -> DriverFacts:
    from solver.detect import detect

    found = detect(dict(env), nvidia_smi_timeout=timeout_s)
    gpus = [GpuFact(g.name, g.compute_capability) for g in found.gpus]
    return DriverFacts(
        version=found.driver_version,
        cuda=found.driver_cuda,
        gpus=gpus,
        source=found.source,
        error="; ".join(found.notes),
        problem=found.problem,
        override_error=found.override_error,
    )


def detect_virtual_packages() -> dict:
    """In a child interpreter (solver.worker): py-rattler's own detection, as conda and pixi see this
    machine. It runs nvidia-smi with no time limit, hence the child."""
    try:
        from rattler import VirtualPackage, VirtualPackageOverrides
    except ImportError as exc:
        return {"missing": f"{type(exc).__name__}: {exc}"}
    try:
        detected = VirtualPackage.detect(VirtualPackageOverrides.from_env())
    except Exception as exc:  # DetectVirtualPackageError on a malformed CONDA_OVERRIDE_* value
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"packages": [str(v.into_generic()) for v in detected]}


def gather_virtual_packages(
    env: Mapping[str, str], timeout_s: float = 10.0
) -> tuple[list[str] | None, str, str]:
    """(virtual packages as 'name=version=build', why they are missing, why rattler is missing)."""
    from solver import worker
    from solver.errors import SolverError

    try:
        found = worker.call(
            "solver.doctor_checks.gather:detect_virtual_packages",
            {},
            timeout_s + 10,
            what="py-rattler's virtual-package detection",
            env=env,
        )
    except SolverError as exc:
        return None, f"{exc.one_line()} (it runs nvidia-smi without a time limit)", ""
    if "missing" in found:
        return None, "py-rattler is not installed", found["missing"]
    if "error" in found:
        return None, found["error"], ""
    return found["packages"], "", ""


def run_runtime_probe(
    python: str, modules: list[ImportFact], env: Mapping[str, str], timeout_s: float
) -> tuple[TorchFacts, PointopsFacts, list[ImportFact]]:
    """Run runtime_probe.py in the environment's Python; a crash or hang costs one module, not doctor."""
    torch, pointops = TorchFacts(), PointopsFacts()
    status = ""
    done = bounded.run([python, str(PROBE_SCRIPT), *[m.module for m in modules]], timeout_s, env=env)
    if done.start_error:
        torch.import_error = f"could not run {python}: {done.start_error}"
        return torch, pointops, []
    output, code = done.stdout, done.returncode
    if done.timed_out:
        status = f"timed out after {timeout_s:g} s"
    elif code is not None and code < 0:
        status = f"crashed the interpreter (signal {-code})"
    elif code:
        status = f"crashed the interpreter (exit status {code}): {done.stderr.strip()[-300:]}"
    started = None
    results: dict[str, str] = {}
    for line in output.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        kind = item.pop("kind", "")
        if kind == "torch":
            torch = TorchFacts(**{k: v for k, v in item.items() if k in TorchFacts.__dataclass_fields__})
        elif kind == "pointops":
            pointops = PointopsFacts(
                installed=item.get("installed", False),
                build_info=item.get("build_info"),
                error=item.get("error", ""),
                path=item.get("path", ""),
            )
        elif kind == "import-start":
            started = item["module"]
        elif kind == "import":
            results[item["module"]] = item["error"]
            started = None
    if started is not None and status:
        results[started] = status  # the module being imported when the child died
    if not output.strip() and status:
        torch.import_error = f"importing torch {status}"
    imports = [dataclasses.replace(m, error=results[m.module]) for m in modules if m.module in results]
    return torch, pointops, imports


def gather(options: GatherOptions) -> Facts:
    from solver.detect import host_platform

    facts = Facts(platform=host_platform())
    facts.driver = gather_driver(options.env, options.driver_timeout_s)
    facts.conda = gather_conda(options.prefix)
    site_dirs = site_packages_dirs(options.prefix)
    facts.pointops_installs = find_installs(site_dirs)
    modules = discover_extensions(site_dirs)
    known = {m.module for m in modules}
    modules += [ImportFact(m) for m in options.extra_modules if m not in known]
    facts.torch, facts.pointops, facts.imports = run_runtime_probe(
        options.python, modules, options.env, options.runtime_timeout_s
    )
    facts.torch.cuda_visible_devices = options.env.get("CUDA_VISIBLE_DEVICES")
    facts.toolchain = gather_toolchain(options.env)
    if facts.is_windows:
        facts.windows = gather_windows(options.env, str(options.prefix))
    facts.network = gather_network(options.env, options.home, options.prefix)
    if options.probe_network:
        facts.network.probes = run_probes(facts.network, options.probe_urls, options.probe_timeout_s)
    facts.virtual_packages, facts.virtual_packages_error, facts.rattler_missing = gather_virtual_packages(
        options.env, options.driver_timeout_s
    )
    resolve_conda(facts.conda, facts.platform, facts.virtual_packages, facts.rattler_missing)
    return facts


def prefix_of_python(python: str, timeout_s: float = 60.0) -> Path | None:
    """sys.prefix of another interpreter, so that --python alone names the environment to inspect."""
    done = bounded.run([python, "-c", "import sys; print(sys.prefix)"], timeout_s)
    lines = done.stdout.strip().splitlines()
    return Path(lines[-1]) if done.ok and lines else None


def default_options(
    prefix: str | None, python: str | None, env: Mapping[str, str] | None = None
) -> GatherOptions:
    env = dict(os.environ if env is None else env)
    if prefix:
        chosen = Path(prefix).resolve()
    elif python:
        chosen = prefix_of_python(python) or Path(sys.prefix)
    else:
        chosen = Path(sys.prefix)
    interpreter = python or (python_of_prefix(chosen) if prefix else None) or sys.executable
    return GatherOptions(prefix=chosen, python=interpreter, env=env, home=Path.home())
