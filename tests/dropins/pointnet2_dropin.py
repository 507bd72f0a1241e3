"""Paths and helpers of the pointnet2_ops drop-in tests (a module of its own: test modules of
other folders import their own `conftest`, so these cannot live there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DROPIN = REPO / "ops-src" / "dropins" / "pointnet2_ops"


def pip(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def child_env(site: Path) -> dict[str, str]:
    """This process's environment with `site` first on the child's import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env
