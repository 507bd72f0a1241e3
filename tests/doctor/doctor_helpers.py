"""Builders for the broken environments the doctor tests diagnose: conda prefixes with conda-meta
records, site-packages with dist-info folders, and machine facts read from real nvidia-smi output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from solver.detect import parse_nvidia_smi_csv, parse_nvidia_smi_cuda, parse_nvidia_smi_driver
from solver.doctor_checks.conda_env import gather_conda, resolve_conda
from solver.doctor_checks.facts import DriverFacts, Facts, GpuFact, TorchFacts

REPO = Path(__file__).resolve().parents[2]
DEVICE_DATA = REPO / "tests" / "solver" / "data" / "device"
SITE = "lib/python3.11/site-packages"


def write_record(
    prefix: Path, name: str, version: str, build: str, depends=(), constrains=(), files=()
) -> None:
    """One conda-meta/<name>-<version>-<build>.json record, as conda writes it."""
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True, exist_ok=True)
    record = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": 0,
        "depends": list(depends),
        "constrains": list(constrains),
        "subdir": "linux-64",
        "channel": "https://conda.anaconda.org/conda-forge/",
        "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-{version}-{build}.conda",
        "fn": f"{name}-{version}-{build}.conda",
        "md5": "0" * 32,
        "files": list(files),
        "paths_data": {"paths": [], "paths_version": 1},
        "requested_spec": name,
    }
    (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(record))


def write_dist(prefix: Path, name: str, version: str, installer: str, requires=(), record_files=()) -> Path:
    """A <name>-<version>.dist-info folder in the prefix's site-packages; returns site-packages."""
    site = prefix / SITE
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (meta / "METADATA").write_text("\n".join(lines) + "\n")
    if installer:
        (meta / "INSTALLER").write_text(installer + "\n")
    (meta / "RECORD").write_text("".join(f"{f},," + "\n" for f in record_files))
    return site


def conda_pytorch_env(
    prefix: Path, pytorch_build: str = "cuda126_mkl_py311_h0_300", cuda_version: str = "12.8"
) -> Path:
    """A consistent conda environment: python, cuda-version, a CUDA pytorch, conda's own torch dist-info."""
    write_record(prefix, "python", "3.11.9", "h0_0_cpython", depends=["__glibc >=2.17,<3.0.a0"])
    write_record(
        prefix,
        "cuda-version",
        cuda_version,
        "h0_3",
        constrains=[f"__cuda >={cuda_version.split('.')[0]}", f"cudatoolkit {cuda_version}|{cuda_version}.*"],
    )
    torch_meta = f"{SITE}/torch-2.5.1.dist-info"
    write_record(
        prefix,
        "pytorch",
        "2.5.1",
        pytorch_build,
        depends=["python >=3.11,<3.12.0a0", "cuda-version >=12.6,<13", "__cuda"]
        if "cuda" in pytorch_build
        else ["python >=3.11,<3.12.0a0"],
        files=[f"{torch_meta}/METADATA", f"{torch_meta}/INSTALLER"],
    )
    write_dist(prefix, "torch", "2.5.1", "conda")
    return prefix


def facts_for_prefix(prefix: Path, virtual_packages=None, rattler_missing: str = "", **fields) -> Facts:
    """The facts gathering collects for a prefix on a machine with these virtual packages, including
    the offline re-solve (a real py-rattler solve in a child interpreter)."""
    facts = Facts(platform="linux-64", conda=gather_conda(prefix), **fields)
    facts.virtual_packages = virtual_packages
    facts.rattler_missing = rattler_missing
    resolve_conda(facts.conda, facts.platform, virtual_packages, rattler_missing)
    return facts


def h200_driver() -> DriverFacts:
    """The H200 machine's readings, parsed from its real nvidia-smi output."""
    gpus = parse_nvidia_smi_csv((DEVICE_DATA / "nvidia-smi-query-header.csv").read_text())
    plain = (DEVICE_DATA / "nvidia-smi.txt").read_text()
    return DriverFacts(
        version=parse_nvidia_smi_driver(plain),
        cuda=parse_nvidia_smi_cuda(plain),
        gpus=[GpuFact(g.name, g.compute_capability) for g in gpus],
        source="nvidia-smi",
    )


def h200_torch() -> TorchFacts:
    """torch 2.11.0+cu130 as it reported itself on the H200 machine (torch.txt)."""
    line = (DEVICE_DATA / "torch.txt").read_text().splitlines()[1]
    version, cuda = line.split()[:2]
    arch_list = line[line.index("[") + 1 : line.index("]")].replace("'", "").split(", ")
    return TorchFacts(
        importable=True,
        version=version,
        cuda=cuda,
        arch_list=arch_list,
        cuda_available=True,
        device_capabilities=["9.0"],
    )


def driver(version: str, cuda: str, *gpus: tuple[str, str]) -> DriverFacts:
    return DriverFacts(
        version=version, cuda=cuda, gpus=[GpuFact(name, cc) for name, cc in gpus], source="test"
    )


def by_check(findings, check: str):
    return [f for f in findings if f.check == check]


def statuses(findings, check: str) -> list[str]:
    return [f.status for f in by_check(findings, check)]


def doctor(
    *args: str,
    env_updates: dict[str, str] | None = None,
    pythonpath: list[str] | None = None,
    stdout=subprocess.PIPE,
    timeout: float = 300,
):
    """`python -m solver doctor ARGS` in a child process."""
    env = dict(os.environ)
    env.update(env_updates or {})
    env["PYTHONPATH"] = os.pathsep.join([*(pythonpath or []), str(REPO)])
    return subprocess.run(
        [sys.executable, "-m", "solver", "doctor", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
    )


def findings_of(stdout: str) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for finding in json.loads(stdout)["findings"]:
        grouped.setdefault(finding["check"], []).append(finding)
    return grouped


def without_nvml(tmp_path: Path) -> Path:
    """A pynvml that cannot load, as on a machine without libnvidia-ml: detection falls back to nvidia-smi."""
    folder = tmp_path / "no-nvml"
    folder.mkdir(exist_ok=True)
    (folder / "pynvml.py").write_text("raise ImportError('no NVML here')\n")
    return folder
