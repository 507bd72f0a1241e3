"""Children of `solver make-env --create` (the py-rattler install, the new environment's check),
run so that their output is read while they run, and so that nothing outlives the command.

`run_child` streams the child's stdout lines to a callback, keeps its stderr in a file (a pipe
nobody reads could fill and stall it), kills the child's process group when it stays silent too
long or when the command is interrupted (Ctrl-C), and returns how it ended. `Progress` turns the
install's progress events (solver.create_install) into one rewritten line on a terminal, or
plain lines in a log.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from solver.bounded import kill_group, signal_text


@dataclass
class Ended:
    returncode: int | None  # None: killed for silence
    stderr: str  # its last lines
    silent_for_s: float = 0.0  # > 0 when it was killed for staying silent that long

    def how(self) -> str:
        if self.returncode is None:
            return f"it printed nothing for {self.silent_for_s:g} s and was stopped"
        return signal_text(self.returncode)


def _kill_group(proc: subprocess.Popen) -> None:
    kill_group(proc)
    proc.wait()


def _tail(handle, lines: int = 3) -> str:
    handle.seek(0)
    text = handle.read().decode("utf-8", errors="replace")
    return " ".join(text.strip().splitlines()[-lines:])[-400:]


def run_child(
    cmd: Sequence[str],
    on_line: Callable[[str], None],
    silence_limit_s: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> Ended:
    """Run cmd, calling on_line for each line it prints; kill it (and its children) when it prints
    nothing for silence_limit_s, or when anything (KeyboardInterrupt included) escapes."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=cwd,
            start_new_session=os.name == "posix",  # a terminal's Ctrl-C reaches us, and we stop it
        )
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            for raw in proc.stdout:
                lines.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            while True:
                try:
                    line = lines.get(timeout=silence_limit_s)
                except queue.Empty:
                    _kill_group(proc)
                    return Ended(None, _tail(stderr), silent_for_s=silence_limit_s)
                if line is None:
                    break
                on_line(line)
            proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
        return Ended(proc.returncode, _tail(stderr))


def _size(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"


class Progress:
    """The install's progress on stderr: one line rewritten in place on a terminal, plain lines
    (one per downloaded package, one when linking ends) otherwise; nothing with --quiet."""

    def __init__(self, prefix: str, quiet: bool, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet or self.stream is None
        self.tty = not self.quiet and _isatty(self.stream)
        self.prefix = prefix
        self.packages = self.to_download = self.total_bytes = 0
        self.downloaded = self.linked = self.bytes = 0
        self.cache = ""
        self._shown = 0.0
        self._line_open = False
        self._finished = False

    def event(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "plan":
            self.packages, self.to_download = event["packages"], event["download"]
            self.total_bytes, self.cache = event["bytes"], event["cache"]
            self._say(
                f"installing {self.packages} packages into {self.prefix}: {self.to_download} to download "
                f"({_size(self.total_bytes)}), {self.packages - self.to_download} already in the "
                f"package cache {self.cache}"
            )
        elif kind == "bytes":
            self.bytes = max(self.bytes, event["bytes"])
        elif kind == "downloaded":
            self.downloaded += 1
            self.bytes = max(self.bytes, event.get("done", 0))
            if not self.tty:
                self._say(
                    f"downloaded {event['name']} ({_size(event['bytes'] or 0)}) "
                    f"[{self.downloaded}/{self.to_download}]"
                )
        elif kind == "linked":
            self.linked += 1
        self._redraw(force=kind in ("plan", "downloaded"))

    def finish(self) -> None:
        """Ends the rewritten line (also after a failure), and says what was linked; once."""
        if self._finished:
            return
        self._finished = True
        if self.tty and self._line_open:
            self._redraw(force=True)  # the counts as they ended
            self._write("\n")
            self._line_open = False
        if self.linked:
            self._say(f"linked {self.linked}/{self.packages} packages")

    def say(self, message: str) -> None:
        """A line of its own, also in the middle of a rewritten progress line."""
        self._say(message)

    def _redraw(self, force: bool) -> None:
        now = time.monotonic()
        if not self.tty or (not force and now - self._shown < 0.1):
            return
        self._shown = now
        shown_bytes = min(max(self.bytes, 0), self.total_bytes) if self.total_bytes else self.bytes
        self._write(
            f"\r\x1b[Ksolver make-env: downloaded {self.downloaded}/{self.to_download} packages "
            f"({_size(shown_bytes)}/{_size(self.total_bytes)}), linked {self.linked}/{self.packages}"
        )
        self._line_open = True

    def _say(self, message: str) -> None:
        if self.quiet:
            return
        if self._line_open:
            self._write("\n")
            self._line_open = False
        self._write(f"solver make-env: {message}\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr must not fail the install
            self.quiet = True


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
