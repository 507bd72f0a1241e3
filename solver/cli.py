"""Entry point of the `solver` command: one subcommand per module.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int`, and raises
solver.errors.SolverError for anything the user can fix. This module is the one place that turns
errors into exit statuses (solver.errors: 0 ok, 1 failure, 2 usage, 130 interrupted) and into one
line on stderr: no traceback, whatever happens. Only the chosen module is imported, so
`solver make-env` does not pay for `solver doctor`'s imports.

Flags that several subcommands take (-o/--output, --platform, --json, --quiet) are defined once, in
solver.flags; make-env and doctor get --json and --quiet here, the actions of channel and wheels
where they make sense.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from solver import __version__
from solver.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OutputError,
    SolverError,
    UsageError,
)

# subcommand -> (module, one-line help, takes the shared --json/--quiet)
SUBCOMMANDS = {
    "make-env": (
        "solver.make_env",
        "print a conda env.yml (or pip/uv requirements) that fits this (or a given) GPU and driver",
        True,
    ),
    "doctor": ("solver.doctor", "diagnose the current PyTorch/CUDA environment and say the fix", True),
    "channel": (
        "solver.channel.cli",
        "build, package and index pointops conda packages into a channel",
        False,
    ),
    "wheels": ("solver.wheels.cli", "build and audit the pointops pip/uv wheels", False),
}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (raised, so that main reports it like any other)."""

    def error(self, message: str):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _top_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="solver",
        description="Plan and check conda environments for PyTorch CUDA extensions.",
        epilog="\n".join(f"  {name:10s} {help_text}" for name, (_, help_text, _) in SUBCOMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"solver {__version__} (pointops-solver)")
    parser.add_argument("command", choices=sorted(SUBCOMMANDS), metavar="COMMAND", help="one of: %(choices)s")
    return parser


def _say(prog: str, message: str) -> None:
    """One line on stderr, if there still is a stderr."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(f"{prog}: error: {' '.join(message.split())}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _run(argv: list[str]) -> int:
    top = _top_parser()
    if argv and argv[0] in ("-h", "--help", "--version"):
        top.parse_args(argv[:1])  # prints and exits 0
    if not argv:
        raise UsageError(f"choose a command: {', '.join(SUBCOMMANDS)} (see `solver --help`)")
    if argv[0] not in SUBCOMMANDS:
        top.parse_args(argv[:1])  # argparse's "invalid choice" message, as a UsageError
    module, parser = subcommand_parser(argv[0])
    args = parser.parse_args(argv[1:])
    return int(module.run(args) or 0)


def subcommand_parser(name: str):
    """(module, parser) of `solver NAME`: the module imported, its flags added."""
    from solver.flags import add_json, add_quiet

    module_name, help_text, shared = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    parser = _Parser(prog=f"solver {name}", description=help_text[:1].upper() + help_text[1:] + ".")
    if shared:
        add_json(parser)
        add_quiet(parser)
    module.add_arguments(parser)
    return module, parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = f"solver {argv[0]}" if argv and argv[0] in SUBCOMMANDS else "solver"
    try:
        return _run(argv)
    except SolverError as exc:
        if isinstance(exc, OutputError):
            from solver.output import silence_stdout

            silence_stdout()  # a broken or full stdout must not print a second error at exit
        _say(prog, exc.one_line())
        return exc.exit_code
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
    except KeyboardInterrupt:
        _say(prog, "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        from solver.output import silence_stdout

        silence_stdout()
        _say(prog, "standard output was closed before everything was written (broken pipe)")
        return EXIT_FAILURE
    except Exception as exc:  # a bug: one line that says so, instead of a traceback
        _say(
            prog, f"internal error ({type(exc).__name__}: {exc}); please report it with the command line used"
        )
        return EXIT_FAILURE
