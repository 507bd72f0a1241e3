"""Helpers shared by the benchmark scripts (run as `python benchmarks/<script>.py`, so this
module is importable as a sibling)."""

from __future__ import annotations

import json
import os
import tempfile


def write_json(path: str, payload: dict) -> None:
    """Write a results file atomically: an interrupted run never leaves a half-written file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".bench-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
