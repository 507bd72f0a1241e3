"""The one error type of `solver channel`: a SolverError (solver/errors.py), so the CLI maps it
to its exit status and one line like every other failure."""

from solver.errors import SolverError


class ChannelError(SolverError):
    """A problem the user can fix; the message names it and the fix."""
