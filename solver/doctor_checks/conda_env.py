"""A conda environment's own records: pip wheels shadowing conda packages, and an offline re-solve of
conda-meta against this machine's virtual packages (is this environment still valid for this driver/GPU?).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .dists import InstalledDist, read_installed
from .facts import CondaFacts, CondaRecord, Facts, PythonDist
from .findings import Finding, failed, info, passed, warned

# conda package name -> the Python distribution it installs, where the two differ
CONDA_TO_DIST = {"pytorch": "torch", "pytorch-gpu": "torch", "pytorch-cpu": "torch", "pyyaml": "pyyaml"}
# conda packages that hold the CUDA libraries nvidia-* wheels also carry
CONDA_CUDA_LIBRARIES = re.compile(
    r"^(cuda-(cudart|nvrtc|cupti|nvtx)|libcu(blas|fft|rand|solver|sparse|file)|"
    r"libnvjitlink|libnvjpeg|cudnn|libcudnn|nccl|libnccl|cudatoolkit)"
)
TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "pointops", "triton"}
MAKE_ENV_FIX = "solver make-env --gpu auto > env.yml && conda env create -f env.yml"


def normalise_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------- gathering


def read_conda_records(prefix: Path) -> tuple[list[CondaRecord], list[str]]:
    records, errors = [], []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            records.append(
                CondaRecord(
                    name=str(data["name"]),
                    version=str(data["version"]),
                    build=str(data.get("build", "")),
                    depends=list(data.get("depends") or []),
                    constrains=list(data.get("constrains") or []),
                    files=list(data.get("files") or []),
                    channel=str(data.get("channel") or ""),
                )
            )
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            errors.append(f"{path.name}: {type(exc).__name__}: {exc}")
    return records, errors


def site_packages_dirs(prefix: Path) -> list[Path]:
    candidates = sorted(prefix.glob("lib/python3*/site-packages")) + [prefix / "Lib" / "site-packages"]
    return [path for path in candidates if path.is_dir()]


def read_python_dists(prefix: Path, installed: list[InstalledDist]) -> list[PythonDist]:
    dists = []
    for dist in installed:
        try:
            where = str(dist.meta_dir.relative_to(prefix)).replace("\\", "/")
        except ValueError:
            where = str(dist.meta_dir)
        dists.append(PythonDist(normalise_name(dist.name), dist.version, dist.installer, where))
    return dists


def gather_conda(prefix: Path, installed: list[InstalledDist] | None = None) -> CondaFacts:
    """conda-meta and the Python distributions of the prefix (`installed`: read_installed() of its
    site-packages, read here when not given)."""
    if installed is None:
        installed = read_installed(site_packages_dirs(prefix))
    dists = read_python_dists(prefix, installed)
    if not (prefix / "conda-meta").is_dir():
        return CondaFacts(prefix=None, dists=dists)
    records, errors = read_conda_records(prefix)
    return CondaFacts(prefix=prefix, records=records, dists=dists, read_errors=errors)


# ---------------------------------------------------------------- checks: pip over conda


def _owned_by_conda(dist: PythonDist, conda_files: set[str]) -> bool:
    """INSTALLER decides when present (pip rewrites it when it reinstalls the same version over conda's)."""
    if dist.installer:
        return dist.installer.lower() == "conda"
    return f"{dist.path}/METADATA" in conda_files or f"{dist.path}/PKG-INFO" in conda_files  # egg-info


def check_pip_shadowing(facts: Facts, kb) -> list[Finding]:
    return pip_shadowing_findings(facts.conda)


def pip_shadowing_findings(conda: CondaFacts) -> list[Finding]:
    if conda.prefix is None:
        return [
            info("conda.pip-shadowing", "not a conda environment (no conda-meta); nothing to compare", "", "")
        ]
    conda_files = {f.replace("\\", "/") for record in conda.records for f in record.files}
    by_dist = {}
    for record in conda.records:
        by_dist.setdefault(CONDA_TO_DIST.get(record.name, normalise_name(record.name)), record)
    foreign = [d for d in conda.dists if not _owned_by_conda(d, conda_files)]
    findings = []
    pip_torch = next((d for d in foreign if d.name == "torch"), None)
    wheels = sorted(d.name for d in foreign if d.name.startswith("nvidia-"))
    for dist in foreign:
        record = by_dist.get(dist.name)
        if record is None:
            continue
        installer = dist.installer or "an unknown installer"
        extra = f" {' '.join(wheels)}" if dist.name == "torch" and wheels else ""
        # Shadowing torch or its extensions breaks the CUDA build; shadowing anything else is untidy.
        verdict = failed if dist.name in TORCH_FAMILY else warned
        findings.append(
            verdict(
                "conda.pip-shadowing",
                f"{dist.name} {dist.version} from {installer} has replaced conda's {record.name} {record.version}; "
                "conda still believes its own build is installed",
                f"{dist.path} (INSTALLER={dist.installer or '-'}); conda-meta: {record.name}-{record.version}-{record.build}",
                f"pip uninstall -y {dist.name}{extra} && conda install --force-reinstall {record.name}",
            )
        )
    conda_cuda = sorted(r.name for r in conda.records if CONDA_CUDA_LIBRARIES.match(r.name))
    if wheels and conda_cuda and not (pip_torch and pip_torch.name in by_dist):
        findings.append(
            failed(
                "conda.pip-shadowing",
                "pip nvidia-* wheels sit next to conda's CUDA libraries; two copies of "
                "cuBLAS/cuDNN/cudart load in one process",
                f"wheels: {', '.join(wheels)}; conda: {', '.join(conda_cuda)}",
                f"pip uninstall -y {' '.join(wheels)}",
            )
        )
    if pip_torch and "torch" not in by_dist:
        findings.append(
            warned(
                "conda.pip-torch",
                f"torch {pip_torch.version} comes from {pip_torch.installer or 'pip'}, not conda; "
                "conda cannot see it and a later `conda install` may add a second torch",
                pip_torch.path,
                f"pip uninstall -y {' '.join(['torch', *wheels])} && conda install 'pytorch=*=cuda*'  "
                f"(or recreate: {MAKE_ENV_FIX})",
            )
        )
    if not findings:
        findings.append(
            passed(
                "conda.pip-shadowing",
                "no pip-installed distribution shadows a conda package",
                f"{len(conda.records)} conda records, {len(foreign)} non-conda distributions",
            )
        )
    return findings


# ---------------------------------------------------------------- checks: offline re-solve


@dataclass(frozen=True)
class VirtualConflict:
    package: str  # the virtual package, e.g. "__cuda"
    missing: bool  # True: the machine lacks it; False: it has the wrong version
    sentence: str
    spec: str = ""  # the version it needs, e.g. ">=12.6"


def virtual_package_conflicts(
    records: list[CondaRecord], virtual_packages: list[str]
) -> list[VirtualConflict]:
    """One conflict per virtual-package requirement this machine does not meet.

    The solver's own message says "no candidates were found" both for a missing virtual package and for
    one that exists with the wrong version, so doctor explains from the records themselves.
    """
    from rattler import MatchSpec, Version, VersionSpec

    machine = {}
    for text in virtual_packages:
        name, version = (text.split("=") + [""])[:2]
        machine[name] = version
    conflicts: dict[str, VirtualConflict] = {}
    for record in records:
        owner = f"{record.name} {record.version} ({record.build})"
        for kind, specs in (("depends", record.depends), ("constrains", record.constrains)):
            for spec_text in specs:
                if not spec_text.startswith("__"):
                    continue
                try:
                    spec = MatchSpec(spec_text)
                    name, version_spec = spec.name.normalized, spec.version or ""
                    fits = (
                        name not in machine
                        or not version_spec
                        or VersionSpec(version_spec).matches(Version(machine[name]))
                    )
                except Exception:  # a spec rattler cannot parse is the re-solve's to report
                    continue
                if name not in machine:
                    if kind == "depends":  # a constraint on an absent virtual package holds
                        sentence = f"{owner} needs {name}, which this machine does not have"
                        conflicts.setdefault(sentence, VirtualConflict(name, True, sentence))
                elif not fits:
                    sentence = f"{owner} needs {name} {version_spec}; this machine has {name} {machine[name]}"
                    conflicts.setdefault(sentence, VirtualConflict(name, False, sentence, version_spec))
    return list(conflicts.values())


def _driver_for(conflicts: list[VirtualConflict], platform: str) -> str:
    """'>= 575.51.03' for the highest `__cuda >=X.Y` asked for, from the knowledge tables; '' if unknown."""
    from solver.knowledge import load, os_of_platform, parse_version

    wanted = []
    for conflict in conflicts:
        match = re.search(r">=\s*(\d+(?:\.\d+)?)", conflict.spec) if conflict.package == "__cuda" else None
        if match:
            wanted.append(match.group(1) if "." in match.group(1) else match.group(1) + ".0")
    if not wanted:
        return ""
    cuda = max(wanted, key=parse_version)
    try:
        return f"{load().cuda_min_driver(cuda, os_of_platform(platform))} (CUDA {cuda})"
    except (KeyError, ValueError):
        return ""


def _fix_for_conflicts(conflicts: list[VirtualConflict], platform: str) -> str:
    names = {c.package for c in conflicts}
    if "__cuda" in names:
        if any(c.missing for c in conflicts if c.package == "__cuda"):
            return f"no NVIDIA driver is visible: check `nvidia-smi`; for a machine without a GPU: {MAKE_ENV_FIX}"
        driver = _driver_for(conflicts, platform)
        target = f"driver >= {driver}" if driver else "driver for the CUDA version named"
        return f"upgrade the NVIDIA {target}, or rebuild the environment for this driver: {MAKE_ENV_FIX}"
    if "__cuda_arch" in names:
        return f"these builds do not support this GPU's compute capability: {MAKE_ENV_FIX}"
    return f"recreate the environment for this machine: {MAKE_ENV_FIX}"


def _empty_channel(root: Path, subdir: str):
    from rattler import Channel, SparseRepoData

    sparse = []
    for name in dict.fromkeys((subdir, "noarch")):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "repodata.json").write_text(
            json.dumps({"info": {"subdir": name}, "packages": {}, "packages.conda": {}})
        )
    channel = Channel(str(root.resolve()))
    for name in dict.fromkeys((subdir, "noarch")):
        sparse.append(SparseRepoData(channel, name, str(root / name / "repodata.json")))
    return sparse


def resolve_offline(prefix: Path, subdir: str, virtual_packages: list[str], timeout_s: float = 60.0) -> str:
    """Re-solve the installed records, each pinned, against an empty channel: "" when consistent, else why not."""
    from rattler import (
        BuildString,
        GenericVirtualPackage,
        MatchSpec,
        PackageName,
        PackageRecord,
        PrefixRecord,
        Version,
        solve_with_sparse_repodata,
    )
    from rattler.exceptions import SolverError, ValidatePackageRecordsError

    installed = []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            installed.append(PrefixRecord.from_path(path))
        except Exception:  # unreadable records are reported on their own (CondaFacts.read_errors)
            continue
    try:
        PackageRecord.validate(installed)
    except ValidatePackageRecordsError as exc:
        return str(exc)
    machine = []
    for text in virtual_packages:
        name, version, build = (text.split("=") + ["", ""])[:3]
        machine.append(
            GenericVirtualPackage(PackageName(name), Version(version or "0"), BuildString(build or "0"))
        )
    with tempfile.TemporaryDirectory(prefix="solver-doctor-") as scratch:
        sparse = _empty_channel(Path(scratch), subdir)
        try:
            asyncio.run(
                solve_with_sparse_repodata(
                    [MatchSpec(r.name.normalized) for r in installed],
                    sparse,
                    locked_packages=installed,
                    pinned_packages=installed,
                    virtual_packages=machine,
                    timeout=datetime.timedelta(seconds=timeout_s),
                )
            )
        except SolverError as exc:
            return str(exc)
    return ""


def check_resolve(facts: Facts, kb) -> list[Finding]:
    conda = facts.conda
    check = "conda.resolve"
    if conda.prefix is None:
        if facts.rattler_missing:
            return [
                info(
                    check,
                    "not a conda environment, and py-rattler is not installed: no offline re-solve",
                    facts.rattler_missing,
                    "",
                )
            ]
        return [info(check, "not a conda environment; no records to re-solve")]
    findings = []
    if conda.read_errors:
        findings.append(
            failed(
                check,
                f"{len(conda.read_errors)} conda-meta record(s) cannot be read",
                "; ".join(conda.read_errors[:3]),
                "reinstall the named packages (conda install --force-reinstall <name>)",
            )
        )
    if facts.rattler_missing:
        return findings + [
            info(
                check,
                "py-rattler is not installed; the offline re-solve was skipped",
                facts.rattler_missing,
                "pip install 'py-rattler>=0.28,<0.29'",
            )
        ]
    if facts.virtual_packages is None:
        return findings + [
            warned(
                check,
                "this machine's virtual packages could not be detected; re-solve skipped",
                facts.virtual_packages_error,
                "check CONDA_OVERRIDE_CUDA / CONDA_OVERRIDE_CUDA_ARCH",
            )
        ]
    conflicts = virtual_package_conflicts(conda.records, facts.virtual_packages)
    problem = conda.resolve_problem
    machine = " ".join(facts.virtual_packages)
    if conflicts:
        sentences = [c.sentence for c in conflicts]
        findings.append(
            failed(
                check,
                f"the environment does not fit this machine: {sentences[0]}",
                "; ".join(sentences[1:4] + [f"machine: {machine}"]),
                _fix_for_conflicts(conflicts, facts.platform),
            )
        )
    elif problem is None:
        findings.append(info(check, "the offline re-solve was not run", machine))
    elif problem:
        first = next((line for line in problem.splitlines() if line.strip()), problem)
        missing = re.search(r"dependency '([^']+)'", problem)
        fix = f'conda install "{missing.group(1)}"' if missing else f"conda update --all, or {MAKE_ENV_FIX}"
        findings.append(failed(check, "the installed records are inconsistent", first[:300], fix))
    else:
        findings.append(
            passed(check, f"all {len(conda.records)} records re-solve offline against this machine", machine)
        )
    return findings


def resolve_conda(
    conda: CondaFacts,
    subdir: str,
    virtual_packages: list[str] | None,
    rattler_missing: str,
    timeout_s: float = 90.0,
) -> None:
    """Gathering: the offline re-solve of the prefix's records, in a child interpreter (solver.worker),
    into conda.resolve_problem. Skipped (None) outside conda, without py-rattler or virtual packages."""
    if conda.prefix is None or rattler_missing or virtual_packages is None:
        return
    from solver import worker
    from solver.errors import SolverError

    request = {"prefix": str(conda.prefix), "subdir": subdir, "virtual_packages": list(virtual_packages)}
    try:
        conda.resolve_problem = worker.call(
            "solver.doctor_checks.conda_env:resolve_offline_text",
            request,
            timeout_s,
            what="the offline re-solve",
        )
    except SolverError as exc:
        conda.resolve_problem = exc.one_line()


def resolve_offline_text(prefix: str, subdir: str, virtual_packages: list[str]) -> str:
    """resolve_offline() for solver.worker: any exception is the problem found."""
    try:
        return resolve_offline(Path(prefix), subdir, virtual_packages)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
