"""The one error type of `solver channel`: a SolverError (solver/errors.py), so the CLI maps it
to its exit status and one line like every other failure; and the check that py-rattler-build,
which every action but `index` needs, is installed."""

from __future__ import annotations

import sys

from solver.errors import EXIT_USAGE, SolverError

# The pin of pyproject.toml's `test` extra (tests/solver/test_cli_usage_errors.py keeps them equal):
# the py-rattler-build whose API solver.channel is written against.
RATTLER_BUILD_REQUIREMENT = "py-rattler-build>=0.73,<0.74"


class ChannelError(SolverError):
    """A problem the user can fix; the message names it and the fix."""


def usage_error(message: str) -> ChannelError:
    """A malformed flag of `solver channel`: exit 2, as argparse's own errors."""
    return ChannelError(message, exit_code=EXIT_USAGE)


def _install_command() -> str:
    python = f'"{sys.executable}"' if " " in sys.executable else sys.executable
    return f'{python} -m pip install "{RATTLER_BUILD_REQUIREMENT}"'


def require_rattler_build() -> None:
    """ChannelError (exit 1: the environment lacks it) with the install command when the
    `rattler_build` module of py-rattler-build cannot be imported; the caller imports it after."""
    try:
        import rattler_build  # noqa: F401
    except ImportError as exc:
        raise ChannelError(
            f"py-rattler-build is missing ({exc}); `solver channel` renders, builds and packages the "
            "recipe with it",
            f"install it into the solver's Python: {_install_command()}",
        ) from None
