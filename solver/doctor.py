"""`solver doctor`: diagnose a PyTorch/CUDA extension environment and say the fix, one finding per line.

Exit status: 0 when nothing fails (warnings allowed), 1 when a check fails, 2 on a usage error.
The facts are gathered first (solver/doctor_checks/gather.py), then each check reads them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

STATUS_LABEL = {"fail": "FAIL", "warn": "WARN", "pass": "ok  ", "info": "info"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--prefix", metavar="DIR",
                        help="environment to inspect (default: the one this Python runs in)")
    parser.add_argument("--python", metavar="EXE",
                        help="interpreter that imports torch and the extensions (default: the prefix's python)")
    parser.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE",
                        help="also try importing this extension module (repeatable)")
    parser.add_argument("--probe", action="store_true",
                        help="try to reach each configured conda channel and the pip index")
    parser.add_argument("--probe-url", action="append", default=[], metavar="URL",
                        help="also probe this URL (implies --probe; repeatable)")
    parser.add_argument("--probe-timeout", type=float, default=5.0, metavar="S",
                        help="seconds per connectivity probe (default 5)")
    parser.add_argument("--runtime-timeout", type=float, default=180.0, metavar="S",
                        help="seconds allowed for importing torch and the extensions (default 180)")
    parser.add_argument("--quiet", action="store_true", help="print only warnings and failures")


def _usage_error(message: str) -> int:
    print(f"solver doctor: error: {message}", file=sys.stderr)
    return 2


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
    counts = {status: sum(1 for f in findings if f.status == status) for status in ("fail", "warn", "pass", "info")}
    lines.append(f"{counts['fail']} failed, {counts['warn']} warnings, {counts['pass']} passed, {counts['info']} notes")
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
        "gpus": [{"name": g.name, "compute_capability": g.compute_capability} for g in facts.driver.gpus],
        "nvcc": facts.toolchain.nvcc_version,
        "gcc": facts.toolchain.gcc_version,
        "virtual_packages": facts.virtual_packages,
        "status": "fail" if exit_status(findings) else "ok",
        "findings": [f.to_dict() for f in findings],
    }
    return json.dumps(document, indent=2) + "\n"


def run(args: argparse.Namespace) -> int:
    from solver.doctor_checks import run_checks
    from solver.doctor_checks.gather import default_options, gather, python_of_prefix

    if args.prefix is not None and not Path(args.prefix).is_dir():
        return _usage_error(f"--prefix {args.prefix}: no such directory; give the path of an environment "
                            "(e.g. $CONDA_PREFIX)")
    if args.prefix is not None and args.python is None and python_of_prefix(Path(args.prefix)) is None:
        return _usage_error(f"--prefix {args.prefix} has no python; pass --python <interpreter of that environment>")
    if args.python is not None and not Path(args.python).is_file():
        return _usage_error(f"--python {args.python}: no such file")
    for name in ("probe_timeout", "runtime_timeout"):
        if getattr(args, name) <= 0:
            return _usage_error(f"--{name.replace('_', '-')} must be a positive number of seconds")

    options = default_options(args.prefix, args.python)
    options.probe_network = args.probe or bool(args.probe_url)
    options.probe_urls = list(args.probe_url)
    options.probe_timeout_s = args.probe_timeout
    options.runtime_timeout_s = args.runtime_timeout
    options.extra_modules = list(args.modules)
    facts = gather(options)
    findings = run_checks(facts)
    if args.json:
        sys.stdout.write(render_json(findings, facts, options.prefix))
    else:
        header = (f"solver doctor: {facts.platform}, environment {options.prefix} "
                  f"(python {options.python})")
        sys.stdout.write(render_text(findings, header, quiet=args.quiet))
    sys.stdout.flush()
    return exit_status(findings)
