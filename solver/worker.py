"""Run a solver function in a child interpreter, for work done by py-rattler.

py-rattler can crash while the interpreter exits after a solve (reference rattler.md, G4), and its
virtual-package detection runs nvidia-smi without a time limit. Running that work here keeps both
away from the command's own process: the child leaves through os._exit after printing its result,
and it is killed at a time limit.

    result = call("solver.solve:solve_specs", {"specs": [...], ...}, timeout_s=180, what="the solve")

The function receives the request's items as keyword arguments and returns something JSON can
carry. A SolverError raised in the child is raised again in the caller with its class, message, fix
and exit status; anything else (a crash, a timeout, an unexpected exception) becomes WorkerError.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from solver import bounded, errors

_MARKER = "solver-worker-result: "
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's environment, with this solver package importable (also from a checkout)."""
    child = dict(os.environ if env is None else env)
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, child.get("PYTHONPATH")]))
    child.setdefault("PYTHONIOENCODING", "utf-8")
    return child


def call(function: str, request: Mapping, timeout_s: float, what: str, env: Mapping[str, str] | None = None):
    """`function` is "solver.module:name"; returns its result. Raises SolverError subclasses."""
    if not function.startswith("solver.") or ":" not in function:
        raise ValueError(f"not a solver function: {function!r}")
    cmd = [sys.executable, "-m", "solver.worker", function, json.dumps(dict(request))]
    done = bounded.run(cmd, timeout_s, env=_child_env(env))
    if done.timed_out:
        raise errors.WorkerError(f"{what} did not finish within {timeout_s:g} s")
    if done.start_error:
        raise errors.WorkerError(f"{what} could not start a Python interpreter ({done.start_error})")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_MARKER):
            reply = json.loads(line[len(_MARKER) :])
            break
    else:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])[-300:]
        raise errors.WorkerError(
            f"{what} crashed ({bounded.signal_text(done.returncode or 0)})" + (f": {tail}" if tail else "")
        )
    if "result" in reply:
        return reply["result"]
    failure = reply["error"]
    kind = getattr(errors, failure.get("class") or "", None)
    if isinstance(kind, type) and issubclass(kind, errors.SolverError):
        raise kind(failure["message"], failure.get("fix", ""), failure.get("exit_code"))
    raise errors.WorkerError(f"{what} failed: {failure['message']}")


def _main(argv: list[str]) -> None:
    function, request = argv[0], json.loads(argv[1])
    module_name, _, name = function.partition(":")
    try:
        if not module_name.startswith("solver."):
            raise ValueError(f"not a solver function: {function!r}")
        result = {"result": getattr(importlib.import_module(module_name), name)(**request)}
    except errors.SolverError as exc:
        result = {
            "error": {
                "class": type(exc).__name__,
                "message": str(exc),
                "fix": exc.fix,
                "exit_code": exc.exit_code,
            }
        }
    except Exception as exc:  # reported to the caller, which names the work that failed
        result = {"error": {"class": "", "message": f"{type(exc).__name__}: {exc}"}}
    sys.stdout.write(_MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # py-rattler may crash while the interpreter shuts down (rattler.md G4)


if __name__ == "__main__":
    _main(sys.argv[1:])
