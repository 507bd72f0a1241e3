"""The solver's error model: every failure a user can fix is a SolverError that carries its exit
status and, where one exists, the fix. `solver.cli` is the one place that turns them into exit
statuses and the one-line message on stderr.

Exit statuses (as pip and conda use them: 0 success, 1 a failure, 2 a usage error):

    EXIT_OK 0           the command did what was asked
    EXIT_FAILURE 1      it could not (no consistent environment, an output that cannot be written,
                        a check that failed); the message names the cause and the fix
    EXIT_USAGE 2        the command line or the environment variables are malformed
    EXIT_INTERRUPTED 130  Ctrl-C
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class SolverError(Exception):
    """A problem the user can fix. str(error) is the message; `fix` the remedy, when it is not
    already part of the message; `exit_code` what the command exits with."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, fix: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.fix = fix
        if exit_code is not None:
            self.exit_code = exit_code

    def one_line(self) -> str:
        """Message and fix as one line, without line breaks that would split it on stderr."""
        text = str(self)
        if self.fix:
            text = f"{text.rstrip('.')}; {self.fix}"
        return " ".join(text.split())


class UsageError(SolverError):
    """A malformed flag, flag combination or environment variable."""

    exit_code = EXIT_USAGE


class OutputError(SolverError):
    """An output file or stream could not be written; the message names the user's path."""


class ChannelAccessError(SolverError):
    """The channels could not be read (network, TLS, proxy, a missing channel)."""


class SolveError(SolverError):
    """The channels were read but hold no environment that matches the plan."""


class WorkerError(SolverError):
    """Work run in a child interpreter (solver.worker) did not finish in time, or crashed."""
