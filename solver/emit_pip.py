"""Format what `solver make-env --format pip|uv` decided (solver.pip_plan): a requirements file that
`pip install -r` and `uv pip install -r` both read, a pyproject.toml for a uv project, and the --json
document. Writing them is solver.output's job.

    requirements_txt(plan), pyproject_toml(plan), json_document(plan, "pip")
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from solver import __version__
from solver.emit import MADE_BY, _comment, describe_target, target_fields
from solver.pip_plan import MARKERS, PipPlan
from solver.published import wheel_note


def _line(text: str) -> str:
    """One comment line that pip, uv and TOML readers all take as a comment (no line break, control
    character or trailing backslash, which pip would read as a line continuation)."""
    return _comment(text).replace("\\", "/")


def _header(plan: PipPlan, fmt: str) -> list[str]:
    lines = [
        f"# {'Requirements' if fmt == 'pip' else 'uv project'} for {_line(describe_target(plan))}",
        f"# {MADE_BY} --format {fmt}` (pointops-solver {__version__}) on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; from the solver's tables, "
        "no index was contacted.",
        "# Why:",
    ]
    lines += [f"#   - {_line(reason)}" for reason in plan.reasons]
    if plan.warnings:
        lines.append("# Warnings:")
        lines += [f"#   - {_line(warning)}" for warning in plan.warnings]
    notes = unpublished_notes(plan)
    if notes:
        lines.append("# Not yet published:")
        lines += [f"#   - {_line(note)}" for note in notes]
    return lines


def unpublished_notes(plan: PipPlan) -> list[str]:
    """What the file names that is not on PyPI yet: the pointops wheel, then each --with wheel."""
    notes = [wheel_note(plan.wheel)] + [wheel_note(w.wheel) for w in plan.with_wheels]
    return [note for note in notes if note]


def requirements_txt(plan: PipPlan) -> str:
    """requirements.txt: torch from PyTorch's index (an extra index, so that pointops still comes
    from PyPI), pointops' wheel from PyPI."""
    lines = _header(plan, "pip")
    python = plan.python or f">= {plan.python_min}"
    lines.append(
        f"# Requires Python {python}: pip installs into the interpreter that runs it, it cannot choose one."
    )
    lines.append("# Install with: python -m pip install -r <this file>   (or: uv pip install -r <this file>)")
    if plan.source.url:
        local = f"{plan.torch}.0+{plan.source.tag}"
        lines += [
            f"# torch comes from {plan.source.url}, {plan.wheel.distribution} from PyPI. pip takes the",
            f"# highest version on either index, and PEP 440 sorts {local} after PyPI's {plan.torch}.0,",
            "# so for the same release the index's build wins; uv tries an extra index before PyPI.",
            f"--extra-index-url {plan.source.url}",
        ]
    lines += plan.requirements()
    return "\n".join(lines) + "\n"


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TOML_UNSAFE = re.compile('["\\\\\x00-\x1f\x7f\ud800-\udfff]')


def toml_string(text: str) -> str:
    """A TOML basic string that reads back as `text` (lone surrogates, which no TOML string can hold,
    become U+FFFD)."""

    def escape(match: re.Match) -> str:
        char = match.group()
        if "\ud800" <= char <= "\udfff":
            return "\ufffd"
        return _TOML_ESCAPES.get(char) or f"\\u{ord(char):04x}"

    return f'"{_TOML_UNSAFE.sub(escape, text)}"'


def pyproject_toml(plan: PipPlan) -> str:
    """A pyproject.toml of a uv project (not itself a package): the dependencies, requires-python,
    resolution for the target platform alone, and torch pinned to PyTorch's index (explicit, so no
    other package is looked up there)."""
    lines = _header(plan, "uv")
    lines += [
        "# Use: save as pyproject.toml in a new folder and run `uv sync`, or merge [project] dependencies,",
        "# requires-python and the [tool.uv...] tables into your own pyproject.toml.",
        "[project]",
        f"name = {toml_string('pointops-env')}",
        f"version = {toml_string('0.1.0')}",
        f"requires-python = {toml_string(plan.requires_python)}",
        "dependencies = [",
    ]
    lines += [f"    {toml_string(spec)}," for spec in plan.requirements()]
    lines += ["]", "", "[tool.uv]", f"environments = [{toml_string(MARKERS[plan.target.platform])}]"]
    if plan.source.url:
        lines += [
            "",
            "[[tool.uv.index]]",
            f"name = {toml_string(plan.source.name)}",
            f"url = {toml_string(plan.source.url)}",
            "explicit = true",
            "",
            "[tool.uv.sources]",
            f"torch = {{ index = {toml_string(plan.source.name)} }}",
        ]
    return "\n".join(lines) + "\n"


def render(plan: PipPlan, fmt: str) -> str:
    return requirements_txt(plan) if fmt == "pip" else pyproject_toml(plan)


def json_document(plan: PipPlan | None, fmt: str, target=None, errors: list[str] | None = None) -> dict:
    """The --json document of --format pip|uv (also printed when planning fails, with `errors`)."""
    t = plan.target if plan else target
    source = plan.source if plan else None
    wheel = plan.wheel if plan else None
    return {
        "format": fmt,
        **target_fields(t),
        "requires_python": plan.requires_python if plan else None,
        "python": plan.python if plan else None,
        "torch": plan.torch if plan else None,
        "torch_requirement": plan.torch_requirement if plan else None,
        # null for PyPI alone (macOS)
        "index": (
            {"tag": source.tag, "url": source.url, "cuda": source.cuda} if source and source.url else None
        ),
        "pointops": (
            {
                "distribution": wheel.distribution,
                "version": plan.pointops_version,
                "requirement": plan.pointops_requirement,
                "cuda": wheel.cuda_version,
                "variant": wheel.variant,
            }
            if plan
            else None
        ),
        "requirements": plan.requirements() if plan else [],
        "with": [
            {
                "name": w.package.name,
                "distribution": w.distribution,
                "extra": w.extra,
                "version": w.wheel.version,
                "requirement": w.requirement,
                "not_published": wheel_note(w.wheel),
            }
            for w in (plan.with_wheels if plan else [])
        ],
        "driver_compatibility": plan.driver_mode if plan else {},
        "arch_coverage": plan.coverage if plan else {},
        "reasons": plan.reasons if plan else (list(t.notes) if t else []),
        "warnings": plan.warnings if plan else [],
        "errors": errors or [],
        "not_published": wheel_note(wheel) if wheel else None,
    }
