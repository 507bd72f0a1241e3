"""`solver doctor`: diagnose a PyTorch/CUDA extension environment and say the fix, one finding per line.

Exit status: 0 when nothing fails (warnings allowed), 1 when a check fails, 2 on a usage error (one
line on stderr). A broken machine (a driver that does not answer, a malformed CONDA_OVERRIDE_*) is a
finding, not an error. The facts are gathered first (solver/doctor_checks/gather.py), then each
registered check reads them.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from solver.errors import UsageError

STATUS_LABEL = {"fail": "FAIL", "warn": "WARN", "pass": "ok  ", "info": "info"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prefix", metavar="DIR", help="environment to inspect (default: the one this Python runs in)"
    )
    parser.add_argument(
        "--python",
        metavar="EXE",
        help="interpreter that imports torch and the extensions (default: the prefix's python)",
    )
    parser.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="also try importing this extension module (repeatable)",
    )
    parser.add_argument(
        "--probe", action="store_true", help="try to reach each configured conda channel and the pip index"
    )
    parser.add_argument(
        "--probe-url",
        action="append",
        default=[],
        metavar="URL",
        help="also probe this URL (implies --probe; repeatable)",
    )
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds per connectivity probe (default 5)",
    )
    parser.add_argument(
        "--runtime-timeout",
        type=float,
        default=180.0,
        metavar="S",
        help="seconds allowed for importing torch and the extensions (default 180)",
    )
    parser.add_argument(
        "--driver-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds allowed for nvidia-smi / NVML, and again for py-rattler's virtual-package "
        "detection (default 10)",
    )


def exit_status(findings) -> int:
    return 1 if any(f.status == "fail" for f in findings) else 0


def render_text(findings, header: str, quiet: bool = False) -> str:
    lines = [header]
    for finding in findings:
        if quiet and finding.status not in ("fail", "warn"):
            continue
        lines.append(f"{STATUS_LABEL[finding.status]}  {finding.check}: {finding.summary}")
        if finding.evidence and finding.status in ("fail", "warn"):
            lines.append(f"        evidence: {finding.evidence}")
        elif finding.evidence:
            lines[-1] += f"  [{finding.evidence}]"
        if finding.fix and finding.status in ("fail", "warn"):
            lines.append(f"        fix: {finding.fix}")
    counts = {
        status: sum(1 for f in findings if f.status == status) for status in ("fail", "warn", "pass", "info")
    }
    lines.append(
        f"{counts['fail']} failed, {counts['warn']} warnings, {counts['pass']} passed, {counts['info']} notes"
    )
    return "\n".join(lines) + "\n"


def render_json(findings, facts, prefix: Path) -> str:
    document = {
        "platform": facts.platform,
        "prefix": str(prefix),
        "conda_environment": facts.conda.prefix is not None,
        "torch": facts.torch.version,
        "torch_cuda": facts.torch.cuda,
        "driver": facts.driver.version,
        "driver_cuda": facts.driver.cuda,
        "driver_problem": facts.driver.problem or None,
        "gpus": [{"name": g.name, "compute_capability": g.compute_capability} for g in facts.driver.gpus],
        "nvcc": facts.toolchain.nvcc_version,
        "gcc": facts.toolchain.gcc_version,
        "libstdcxx": facts.libstdcxx.path or None,
        "virtual_packages": facts.virtual_packages,
        "status": "fail" if exit_status(findings) else "ok",
        "findings": [f.to_dict() for f in findings],
    }
    return json.dumps(document, indent=2) + "\n"


def _empty_value(flag: str, env) -> str:
    """An empty --prefix is mostly "$CONDA_PREFIX" outside an activated conda environment."""
    if flag == "--python":
        return (
            "--python is empty; give the path of the environment's interpreter (e.g. /path/to/env/bin/python)"
        )
    cause = ""
    if not env.get("CONDA_PREFIX"):
        cause = ' (CONDA_PREFIX is not set: was it --prefix "$CONDA_PREFIX" outside an activated conda environment?)'
    return (
        f"--prefix is empty{cause}; give the environment's path, or activate it first (conda activate NAME)"
    )


def check_arguments(args: argparse.Namespace) -> None:
    """Usage errors (exit 2), before anything is gathered."""
    import math

    from solver.doctor_checks.gather import python_of_prefix
    from solver.doctor_checks.network import probe_url_problem

    for flag, value in (("--prefix", args.prefix), ("--python", args.python)):
        if value is not None and not value.strip():
            raise UsageError(_empty_value(flag, os.environ))
    if args.prefix is not None and not Path(args.prefix).is_dir():
        raise UsageError(
            f"--prefix {args.prefix}: no such directory; give the path of an environment (e.g. $CONDA_PREFIX)"
        )
    if args.prefix is not None and args.python is None and python_of_prefix(Path(args.prefix)) is None:
        raise UsageError(
            f"--prefix {args.prefix} has no python; pass --python <interpreter of that environment>"
        )
    if args.python is not None and not Path(args.python).is_file():
        raise UsageError(f"--python {args.python}: no such file")
    for name in ("probe_timeout", "runtime_timeout", "driver_timeout"):
        value = getattr(args, name)
        if not (value > 0 and math.isfinite(value)):
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number of seconds")
    for url in args.probe_url:
        problem = probe_url_problem(url)
        if problem:
            raise UsageError(
                f"--probe-url {url!r}: {problem}; give a URL such as "
                "https://conda.anaconda.org/conda-forge/noarch/repodata.json"
            )


def run(args: argparse.Namespace) -> int:
    from solver.doctor_checks import run_checks
    from solver.doctor_checks.gather import default_options, gather
    from solver.output import write_stdout

    check_arguments(args)
    options = default_options(args.prefix, args.python)
    options.probe_network = args.probe or bool(args.probe_url)
    options.probe_urls = list(args.probe_url)
    options.probe_timeout_s = args.probe_timeout
    options.runtime_timeout_s = args.runtime_timeout
    options.driver_timeout_s = args.driver_timeout
    options.extra_modules = list(args.modules)
    facts = gather(options)
    findings = run_checks(facts)
    if args.json:
        write_stdout(render_json(findings, facts, options.prefix))
    else:
        header = f"solver doctor: {facts.platform}, environment {options.prefix} (python {options.python})"
        write_stdout(render_text(findings, header, quiet=args.quiet))
    return exit_status(findings)
