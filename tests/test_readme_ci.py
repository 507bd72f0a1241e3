"""The README's quick start and CI must not drift apart: CI runs the README's test command."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's Quick start has no ```bash block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_quick_start_has_exactly_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2, commands
    assert "solver make-env --gpu auto" in commands[0]


def test_ci_runs_the_readme_test_command():
    test_command = quick_start_commands()[1]
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines, f"{test_command!r} is not a line of .ci/run"


def test_readme_test_script_exists_and_runs_ruff_and_pytest():
    script = ROOT / shlex.split(quick_start_commands()[1])[-1]
    text = script.read_text()
    assert "ruff check" in text and "pytest" in text


def test_solver_entry_point_prints_help():
    out = subprocess.run(
        [sys.executable, "-m", "solver", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    for sub in ("make-env", "doctor", "channel"):
        assert sub in out.stdout


def test_solver_rejects_unknown_subcommand_with_exit_2():
    out = subprocess.run(
        [sys.executable, "-m", "solver", "frobnicate"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert "invalid choice" in out.stderr


LONG_STEP = re.compile(r"-m venv|pip install|solver wheels build")


def test_run_sh_announces_each_long_step_before_it_starts():
    """tests/run.sh's first steps take about a minute with pip -q: each prints a line first."""
    lines = [ln.strip() for ln in (ROOT / "tests" / "run.sh").read_text().splitlines()]
    commands = [n for n, ln in enumerate(lines) if LONG_STEP.search(ln) and not ln.startswith(("#", "step"))]
    assert commands, "run.sh runs no pip step"
    previous = -1
    for n in commands:
        announced = [ln for ln in lines[previous + 1 : n] if ln.startswith(("step ", 'echo "== '))]
        assert announced, f"no step line before: {lines[n]}"
        previous = n
    build = next(ln for ln in lines if "solver wheels build" in ln and not ln.startswith(("#", "step")))
    assert "2>" not in build and "--quiet" not in build, "the wheel build's progress must reach the log"


def test_run_sh_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(ROOT / "tests" / "run.sh")], capture_output=True).returncode == 0
