"""Write what make-env decided: a CEP-24 env.yml (header comment with target and reasons), the
--json document, a CEP-23 explicit file with sha256, and a rattler lock file. Files are written
atomically (temp file in the same directory + os.replace)."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from solver import __version__
from solver.plan import Plan


@contextmanager
def atomic_destination(path: str | os.PathLike):
    """Yield a temp path beside `path`; on success it replaces `path`, on failure it is removed,
    so the user's existing file is never left half written."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_destination(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


def describe_target(plan: Plan) -> str:
    t = plan.target
    if not t.has_gpu:
        return f"{t.platform}, CPU only"
    driver = f"driver {t.driver_version}" if t.driver_version else "driver"
    assumed = ", assumed" if t.driver_assumed else ""
    return (f"{t.platform}, {t.gpu_name} (compute capability {t.compute_capability or 'unknown'}), "
            f"{driver} (CUDA <= {t.driver_cuda}{assumed})")


def _yaml_scalar(text: str) -> str:
    """Quote a YAML scalar when it could be misread (channel URLs and paths are fine as-is)."""
    if text == "" or text[0] in "!&*{}[]|>'\"%@`#,?:-" or ": " in text or " #" in text:
        return json.dumps(text)
    return text


def env_yml(plan: Plan, channels: list[str], name: str, verified: bool, status: str,
            solved: list[str] | None = None) -> str:
    """The environment file. `status` says how it was verified (or why not)."""
    lines = [
        f"# Environment for {describe_target(plan)}",
        f"# Made by `solver make-env` (pointops-solver {__version__}) on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        f"# {'Verified' if verified else 'NOT verified'} by a solve: {status}",
        "# Why:",
    ]
    lines += [f"#   - {reason}" for reason in plan.reasons]
    if plan.warnings:
        lines.append("# Warnings:")
        lines += [f"#   - {warning}" for warning in plan.warnings]
    if solved:
        lines.append("# Solved builds:")
        lines += [f"#   {entry}" for entry in solved]
    lines.append("# Create it with: conda env create -f <this file>   (or mamba / micromamba)")
    lines.append(f"name: {_yaml_scalar(name)}")
    lines.append("channels:")
    lines += [f"  - {_yaml_scalar(channel)}" for channel in channels]
    lines.append("dependencies:")
    lines += [f"  - {_yaml_scalar(spec)}" for spec in plan.specs()]
    return "\n".join(lines) + "\n"


def json_document(plan: Plan | None, target, channels: list[str], verified: bool, status: str,
                  warnings: list[str], errors: list[str], solved_records=None) -> dict:
    """The --json document (also printed when planning fails, with `errors` filled)."""
    t = plan.target if plan else target
    doc = {
        "platform": t.platform if t else None,
        # Same shape for CPU targets, with nulls, so readers need no special case.
        "gpu": {"name": t.gpu_name if t else None, "compute_capability": t.compute_capability if t else None},
        "driver": {"version": t.driver_version if t else None, "cuda": t.driver_cuda if t else None,
                   "assumed": bool(t and t.driver_assumed)},
        "python": plan.python if plan else None,
        "pytorch": plan.pytorch_minor if plan else None,
        "pytorch_build": plan.pytorch_build if plan else None,
        "cuda_version": plan.cuda_version if plan else None,
        "pointops": ({"version": plan.pointops_version, "build": plan.pytorch_build} if plan else None),
        "dependencies": plan.specs() if plan else [],
        "channels": channels,
        "driver_compatibility": plan.driver_mode if plan else None,
        "arch_coverage": plan.coverage if plan else {},
        "verified": verified,
        "verification": status,
        "reasons": plan.reasons if plan else (t.notes if t else []),
        "warnings": warnings,
        "errors": errors,
    }
    if solved_records is not None:
        doc["solution"] = [{"name": r.name.normalized, "version": str(r.version), "build": str(r.build),
                            "url": str(r.url), "sha256": r.sha256.hex() if r.sha256 else None}
                           for r in solved_records]
    return doc


def explicit_file(records, platform: str) -> str:
    """CEP 23 explicit file: URLs with #sha256, dependencies before dependents."""
    from rattler import PackageRecord

    by_name = {r.name.normalized: r for r in records}
    # sort_topologically returns plain PackageRecords (no URL): map them back by name.
    ordered = [by_name[p.name.normalized] for p in PackageRecord.sort_topologically(list(records))]
    lines = ["# Generated by `solver make-env`; install with: conda create -n NAME --file <this file>",
             f"# platform: {platform}", "@EXPLICIT"]
    for record in ordered:
        digest = f"#sha256:{record.sha256.hex()}" if record.sha256 else (f"#{record.md5.hex()}" if record.md5 else "")
        lines.append(f"{record.url}{digest}")
    return "\n".join(lines) + "\n"


def write_lock(path: str, records, platform: str, channels: list[str], virtual_packages: list[str]) -> None:
    """A rattler/pixi lock file (format v7) recording the target's virtual packages."""
    from rattler import LockChannel, LockFile, LockPlatform

    lock_platform = LockPlatform(platform, virtual_packages=virtual_packages)
    lock = LockFile([lock_platform])
    lock.set_channels("default", [LockChannel(c) for c in channels])
    for record in records:
        lock.add_conda_package("default", lock_platform, record)
    with atomic_destination(path) as tmp:
        lock.to_path(tmp)
