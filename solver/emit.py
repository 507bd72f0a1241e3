"""Format what make-env decided: a CEP-24 env.yml (header comment with target and reasons), the
--json document, and, in the solve's child process, the CEP-23 explicit file and the rattler lock
file. Writing them is solver.output's job.

    outcome = Outcome(plan=plan, target=plan.target, channels=[...], name="pointops", verified=True, ...)
    env_yml(outcome), json_document(outcome)
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from solver import __version__
from solver.plan import Plan

_WANTED_IN_HEADER = ("python", "pytorch", "libtorch", "cuda-version", "pointops")
# Every file make-env writes carries this in its header: make-env replaces only files that do (or
# that are not a project's own, such as an env.yml), never a pyproject.toml someone else wrote.
MADE_BY = "Made by `solver make-env"


@dataclass
class Outcome:
    """Everything make-env decided, for env.yml and the --json document."""

    plan: Plan | None  # None when planning failed (then `errors` says why)
    target: object | None  # solver.target.Target; the plan's own when there is a plan
    channels: list[str]  # as the user gave them (or the defaults)
    env_channels: list[str] = field(default_factory=list)  # as env.yml lists them (local dirs as file://)
    name: str = "pointops"
    verified: bool = False
    status: str = ""  # how it was verified, or why not
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    solution: object | None = None  # solver.solve.SolveResult of a solve
    unpublished: str | None = None  # solver.published.conda_note: the pointops channel is empty


def describe_target(plan: Plan) -> str:
    t = plan.target
    if not t.has_gpu:
        return f"{t.platform}, CPU only"
    driver = f"driver {t.driver_version}" if t.driver_version else "driver"
    assumed = ", assumed" if t.driver_assumed else ""
    return (
        f"{t.platform}, {t.gpu_name} (compute capability {t.compute_capability or 'unknown'}), "
        f"{driver} (CUDA <= {t.driver_cuda}{assumed})"
    )


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+\-=*<>!,/:@~]*$")
# Booleans of YAML 1.1 that PyYAML does not retype but other readers may.
_YAML11_WORDS = {"y", "n"}
# Characters a YAML reader refuses raw or reads as a line break: written as \u escapes.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def yaml_scalar(text: str) -> str:
    """A YAML scalar that reads back as exactly this string in YAML 1.1 and 1.2 readers: plain when
    neither would retype or misread it (null, yes, 0x1F, 1e3, ': ', '#'), else a double-quoted
    (JSON) string."""
    import yaml

    if (
        _PLAIN.match(text)
        and ": " not in text
        and not text.endswith(":")
        and text.lower() not in _YAML11_WORDS
    ):
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    quoted = json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


_NOT_IN_COMMENTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def _comment(text: str) -> str:
    """One comment line: a line break in a reason (a GPU name, a driver message) would end the
    comment and start YAML, and YAML readers refuse control characters even in comments."""
    return _NOT_IN_COMMENTS.sub("\ufffd", " ".join(str(text).split()))


def unpublished_lines(note: str | None) -> list[str]:
    """The header's "Not yet published" part (solver.published), empty once pointops is."""
    return ["# Not yet published:", f"#   - {_comment(note)}"] if note else []


def env_yml(outcome: Outcome) -> str:
    """The environment file."""
    plan = outcome.plan
    lines = [
        f"# Environment for {_comment(describe_target(plan))}",
        f"# {MADE_BY}` (pointops-solver {__version__}) on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        f"# {'Verified' if outcome.verified else 'NOT verified'} by a solve: {_comment(outcome.status)}",
        "# Why:",
    ]
    lines += [f"#   - {_comment(reason)}" for reason in plan.reasons]
    if plan.warnings:
        lines.append("# Warnings:")
        lines += [f"#   - {_comment(warning)}" for warning in plan.warnings]
    lines += unpublished_lines(outcome.unpublished)
    if outcome.solution is not None:
        wanted = _WANTED_IN_HEADER + tuple(pin.name for pin in plan.with_pins)
        solved = [p for p in outcome.solution.packages if p.name in wanted]
        if solved:
            lines.append("# Solved builds:")
            lines += [f"#   {p.name} {p.version} {p.build}" for p in solved]
    lines.append("# Create it with: conda env create -f <this file>   (or mamba / micromamba)")
    lines.append(f"name: {yaml_scalar(outcome.name)}")
    lines.append("channels:")
    lines += [f"  - {yaml_scalar(channel)}" for channel in outcome.env_channels or outcome.channels]
    lines.append("dependencies:")
    lines += [f"  - {yaml_scalar(spec)}" for spec in plan.specs()]
    return "\n".join(lines) + "\n"


def target_fields(t) -> dict:
    """The target's part of every --json document: platform, GPU and driver (None: no target)."""
    return {
        "platform": t.platform if t else None,
        # Same shape for CPU targets, with nulls, so readers need no special case.
        "gpu": {"name": t.gpu_name if t else None, "compute_capability": t.compute_capability if t else None},
        "driver": {
            "version": t.driver_version if t else None,
            "cuda": t.driver_cuda if t else None,
            "assumed": bool(t and t.driver_assumed),
        },
    }


def json_document(outcome: Outcome) -> dict:
    """The --json document (also printed when planning fails, with `errors` filled)."""
    plan = outcome.plan
    t = plan.target if plan else outcome.target
    doc = {
        **target_fields(t),
        "python": plan.python if plan else None,
        "pytorch": plan.pytorch_minor if plan else None,
        "pytorch_version": plan.pytorch_version if plan else None,
        "pytorch_build": plan.pytorch_build if plan else None,
        "cuda_version": plan.cuda_version if plan else None,
        "pointops": ({"version": plan.pointops_version, "build": plan.pytorch_build} if plan else None),
        "dependencies": plan.specs() if plan else [],
        # every pinned package: name, version and build-string pattern (None: any build)
        "pinned": [pin.as_dict() for pin in plan.pins()] if plan else [],
        "channels": outcome.channels,
        "driver_compatibility": plan.driver_mode if plan else None,
        "arch_coverage": plan.coverage if plan else {},
        "verified": outcome.verified,
        "verification": outcome.status,
        "reasons": plan.reasons if plan else (list(t.notes) if t else []),
        "warnings": outcome.warnings,
        "errors": outcome.errors,
        "not_published": outcome.unpublished,
    }
    if outcome.solution is not None:
        doc["solution"] = [p.as_dict() for p in outcome.solution.packages]
    return doc


# -- in the solve's child process (rattler records) ------------------------------------------


def explicit_file(records, platform: str) -> str:
    """CEP 23 explicit file: URLs with #sha256, dependencies before dependents."""
    from rattler import PackageRecord

    by_name = {r.name.normalized: r for r in records}
    # sort_topologically returns plain PackageRecords (no URL): map them back by name.
    ordered = [by_name[p.name.normalized] for p in PackageRecord.sort_topologically(list(records))]
    lines = [
        "# Generated by `solver make-env`; install with: conda create -n NAME --file <this file>",
        f"# platform: {platform}",
        "@EXPLICIT",
    ]
    for record in ordered:
        digest = (
            f"#sha256:{record.sha256.hex()}"
            if record.sha256
            else (f"#{record.md5.hex()}" if record.md5 else "")
        )
        lines.append(f"{record.url}{digest}")
    return "\n".join(lines) + "\n"


def lock_file(records, platform: str, channels: list[str], virtual_packages: list[str]) -> str:
    """A rattler/pixi lock file (format v7) recording the target's virtual packages, as text."""
    from rattler import LockChannel, LockFile, LockPlatform

    lock_platform = LockPlatform(platform, virtual_packages=virtual_packages)
    lock = LockFile([lock_platform])
    lock.set_channels("default", [LockChannel(c) for c in channels])
    for record in records:
        lock.add_conda_package("default", lock_platform, record)
    with tempfile.TemporaryDirectory(prefix="solver-lock-") as scratch:
        path = Path(scratch) / "env.lock"
        lock.to_path(path)
        return path.read_text(encoding="utf-8")
