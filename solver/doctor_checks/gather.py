"""Collect the facts of this machine and one Python environment (the only part of doctor that looks
at the real machine; the checks read what this returns).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from solver import bounded

from .conda_env import gather_conda, resolve_conda, site_packages_dirs
from .dists import read_installed
from .facts import DriverFacts, Facts, GpuFact, ImportFact, PointopsFacts, TorchFacts
from .imports import discover_extensions
from .libstdcxx import gather_binaries, gather_libstdcxx
from .mmcv import gather_mmcv, import_modules, same_spelling
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
        wsl=bool(getattr(found, "wsl", False)),
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


@dataclass
class ProbeOutput:
    """What one run of runtime_probe.py said before it ended."""

    torch: dict | None = None
    cuda: dict | None = None
    pointops: dict | None = None
    results: dict[str, str] = field(default_factory=dict)  # module -> import error ("" imported)
    paths: dict[str, str] = field(default_factory=dict)  # module -> the folder its package was found in
    running: tuple[str, str] | None = None  # (phase, module) started and never reported: what it died in
    pointops_path: str = ""
    finished: bool = False


def parse_probe_output(stdout: str) -> ProbeOutput:
    out = ProbeOutput()
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        kind = item.pop("kind", "") if isinstance(item, dict) else ""
        if kind == "start":
            out.running = (str(item.get("phase", "")), str(item.get("module", "")))
            out.pointops_path = str(item.get("path", out.pointops_path))
        elif kind in ("torch", "cuda", "pointops"):
            setattr(out, kind, item)
            out.running = None
        elif kind == "import":
            out.results[str(item.get("module"))] = str(item.get("error", ""))
            out.paths[str(item.get("module"))] = str(item.get("path", ""))
            out.running = None
        elif kind == "done":
            out.finished = True
    return out


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def describe_death(done: bounded.Completed, timeout_s: float) -> str:
    """How a probe child that did not finish ended, as the rest of an "importing X ..." sentence."""
    code = done.returncode
    if done.timed_out:
        return f"timed out after {timeout_s:g} s"
    if code is not None and code < 0:
        return f"crashed the interpreter with {_signal_name(-code)}"
    if code is not None and code > 128 and (code - 128) in signal.valid_signals():
        return f"crashed the interpreter with {_signal_name(code - 128)} (exit status {code})"
    detail = done.stderr.strip()[-300:]
    return f"ended the interpreter with exit status {code} before it finished" + (
        f": {detail}" if detail else ""
    )


def _torch_facts(out: ProbeOutput) -> TorchFacts:
    fields = {**(out.torch or {}), **(out.cuda or {})}
    return TorchFacts(**{k: v for k, v in fields.items() if k in TorchFacts.__dataclass_fields__})


def _pointops_facts(item: dict) -> PointopsFacts:
    return PointopsFacts(
        installed=bool(item.get("installed", False)),
        build_info=item.get("build_info"),
        error=str(item.get("error", "")),
        path=str(item.get("path", "")),
        stage=str(item.get("stage", "")),
    )


def run_runtime_probe(
    python: str, modules: list[ImportFact], env: Mapping[str, str], timeout_s: float
) -> tuple[TorchFacts, PointopsFacts, list[ImportFact]]:
    """Run runtime_probe.py in the environment's Python. A child that dies (a signal, an exit) costs
    only what it was importing: that gets the death as its error, and the probe runs again without it
    for the rest, within the same time limit. A death while importing torch ends the probe."""
    torch, pointops = TorchFacts(), PointopsFacts(stage="not tried")
    results: dict[str, str] = {}
    paths: dict[str, str] = {}
    flags: list[str] = []
    pending = [m.module for m in modules]
    deadline = time.monotonic() + timeout_s
    first = True
    while True:
        done = bounded.run(
            [python, str(PROBE_SCRIPT), *flags, *pending], max(deadline - time.monotonic(), 1), env=env
        )
        if done.start_error:
            torch.import_error = f"could not run {python}: {done.start_error}"
            return torch, pointops, []
        out = parse_probe_output(done.stdout)
        if first:
            torch = _torch_facts(out)
        first = False
        if out.pointops is not None:
            pointops = _pointops_facts(out.pointops)
            flags.append("--no-pointops")
        results.update(out.results)
        paths.update(out.paths)
        if out.finished:
            break
        death = describe_death(done, timeout_s)
        phase, module = out.running or ("torch", "")
        if phase == "torch":
            torch.importable, torch.import_error = False, f"importing torch {death}"
            return torch, pointops, []
        if phase == "cuda":
            torch.cuda_error = f"asking torch.cuda {death}"
            flags.append("--no-cuda")
        elif phase == "pointops":
            pointops = PointopsFacts(installed=True, error=death, path=out.pointops_path, stage="import")
            flags.append("--no-pointops")
        else:
            results[module] = death
        pending = [m for m in pending if m not in results]
        if done.timed_out or time.monotonic() >= deadline or (not pending and "--no-pointops" in flags):
            break
    for name in pending:
        results.setdefault(name, f"timed out: not tried, the {timeout_s:g} s for all imports ran out")
    return (
        torch,
        pointops,
        [
            dataclasses.replace(m, error=results[m.module], path=paths.get(m.module, ""))
            for m in modules
            if m.module in results
        ],
    )


def with_pointops_import(
    modules: list[ImportFact], tried: list[ImportFact], pointops: PointopsFacts
) -> list[ImportFact]:
    """The import results in discovery order, pointops' taken from the probe's pointops step (one
    import, one verdict)."""
    found = {m.module: m for m in tried}
    if pointops.installed and "pointops" not in {m.module for m in modules}:
        modules = [ImportFact("pointops"), *modules]
    asked = next((m for m in modules if m.module == "pointops"), None)
    if asked is not None and pointops.stage != "not tried":
        error = pointops.error if pointops.stage == "import" else ""
        if not pointops.installed:  # asked for (--import, or a dist-info says so), yet not there
            error = "ModuleNotFoundError: No module named 'pointops'"
        found["pointops"] = dataclasses.replace(asked, error=error)
    return [found[m.module] for m in modules if m.module in found]


def with_mmcv_imports(modules: list[ImportFact], mmcv_modules: list[ImportFact]) -> list[ImportFact]:
    """The discovered modules with mmcv's: mmcv.ops replaces a plain `mmcv` (whose import does not
    load _ext), and each package that requires mmcv is imported once."""
    if not mmcv_modules:
        return modules
    taken = {m.module for m in mmcv_modules} | {"mmcv"}
    return [m for m in modules if m.module not in taken] + mmcv_modules


def torch_dependents(modules: list[ImportFact], installs: list) -> list[str]:
    """What needs torch here: 'pointops 0.1.0 requires torch>=2.10', one per distribution."""
    found: list[str] = []
    for module in modules:
        if module.distribution and module.torch_requirement:
            text = f"{module.distribution} {module.distribution_version} requires {module.torch_requirement}"
            if text not in found:
                found.append(text)
    if installs and not any(text.startswith("pointops") for text in found):
        found.append(f"pointops at {installs[0].path}")
    return found


def source_tree_of(path: str, installs: list) -> str:
    """The checkout that `import pointops` reads from, when it is not an installed package: the folder
    above the package holds the project's setup.py or pyproject.toml."""
    if any(i.path == path for i in installs):
        return ""
    folder = Path(path).parent
    return str(folder) if (folder / "setup.py").is_file() or (folder / "pyproject.toml").is_file() else ""


def gather(options: GatherOptions) -> Facts:
    from solver.detect import host_platform

    facts = Facts(platform=host_platform())
    facts.driver = gather_driver(options.env, options.driver_timeout_s)
    site_dirs = site_packages_dirs(options.prefix)
    installed = read_installed(site_dirs)  # every check reads these, nothing parses METADATA again
    facts.conda = gather_conda(options.prefix, installed)
    facts.pointops_installs = find_installs(site_dirs, installed)
    facts.mmcv = gather_mmcv(installed)
    modules = with_mmcv_imports(discover_extensions(installed), import_modules(facts.mmcv))
    known = {m.module for m in modules}
    modules += [ImportFact(m) for m in options.extra_modules if m not in known]
    facts.torch_dependents = torch_dependents(modules, facts.pointops_installs)
    others = [m for m in modules if m.module != "pointops"]  # the probe's pointops step imports it
    facts.torch, facts.pointops, tried = run_runtime_probe(
        options.python, others, options.env, options.runtime_timeout_s
    )
    facts.imports = same_spelling(with_pointops_import(modules, tried, facts.pointops), facts.mmcv)
    if facts.pointops.path:
        facts.pointops.path = str(Path(facts.pointops.path).resolve())
        facts.pointops.source_tree = source_tree_of(facts.pointops.path, facts.pointops_installs)
    if facts.platform.startswith("linux"):  # ELF files and /proc/self/maps
        facts.libstdcxx = gather_libstdcxx(facts.torch.libstdcxx)
        elsewhere = [("mmcv", Path(i.package)) for i in facts.mmcv.installs]  # an editable mmcv's checkout
        facts.binaries = gather_binaries(site_dirs, installed, elsewhere)
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
