"""Run an external program with a hard time limit: every call the solver makes to another program
(nvidia-smi, nvcc, gcc, another Python) goes through `run`, so nothing it starts can hang it.

    done = run(["nvidia-smi", "-q"], timeout_s=10)
    done.ok, done.returncode, done.stdout, done.timed_out, done.start_error

The program runs in its own process group (POSIX), and the whole group is killed at the limit, so a
wrapper script's children go too. Output is decoded as UTF-8 with replacement characters: a program
that prints garbage cannot raise UnicodeDecodeError in the caller.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass
class Completed:
    returncode: int | None  # None when it did not run to its end (not started, or killed at the limit)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    start_error: str = ""  # why it could not be started: "not found", or the OS error

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a child started with start_new_session and everything it started (Windows: the child)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass


def run(
    cmd: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> Completed:
    """Run `cmd` (stdin from the null device) for at most `timeout_s` seconds; never raises for the
    program's sake."""
    try:
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=os.name == "posix",
        )
    except FileNotFoundError:
        return Completed(None, start_error="not found")
    except OSError as exc:
        return Completed(None, start_error=exc.strerror or str(exc))
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes open
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
            out, err = b"", b""
        return Completed(None, _decode(out), _decode(err), timed_out=True)
    return Completed(proc.returncode, _decode(out), _decode(err))


def signal_text(returncode: int) -> str:
    """'exit status 3', or 'signal 11 (SIGSEGV)' for a negative POSIX return code."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = ""
        return f"signal {-returncode}" + (f" ({name})" if name else "")
    return f"exit status {returncode}"
