"""Entry point of the `solver` command: one subcommand per module.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int`. Only the chosen
module is imported, so `solver make-env` does not pay for `solver doctor`'s imports.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, one-line help)
SUBCOMMANDS = {
    "make-env": ("solver.make_env", "print a conda environment file that fits this (or a given) GPU and driver"),
    "doctor": ("solver.doctor", "diagnose the current PyTorch/CUDA environment and say the fix"),
    "channel": ("solver.channel.cli", "build, package and index pointops conda packages into a channel"),
}


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="solver",
        description="Plan and check conda environments for PyTorch CUDA extensions.",
        epilog="\n".join(f"  {name:10s} {help_text}" for name, (_, help_text) in SUBCOMMANDS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=sorted(SUBCOMMANDS), metavar="COMMAND", help="one of: %(choices)s")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0 if argv else 2
    if argv[0] not in SUBCOMMANDS:
        top.parse_args(argv[:1])  # exits 2 with argparse's "invalid choice" message
    name, rest = argv[0], argv[1:]
    module_name, help_text = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"solver {name}", description=help_text)
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    return int(module.run(args) or 0)
