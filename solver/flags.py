"""One vocabulary of flags for every `solver` subcommand: a flag name means the same thing wherever
it appears, and is defined here once.

    -o/--output PATH    where the command writes: a file (make-env) or a folder (channel, wheels)
    --platform SUBDIR   the conda subdir to plan or build for (linux-64, win-64, ...)
    --json              one JSON document on stdout instead of the text output
    --quiet             print only problems (warnings and errors), no notes or progress

Old spellings still parse as hidden aliases (`channel build --target-platform`), so no script
breaks; --help shows the one name.
"""

from __future__ import annotations

import argparse

JSON_HELP = "print one JSON document on stdout instead of the text output"
QUIET_HELP = "print only problems (warnings and errors), no notes or progress"


def add_json(parser: argparse.ArgumentParser, help_text: str = JSON_HELP) -> None:
    parser.add_argument("--json", action="store_true", help=help_text)


def add_quiet(parser: argparse.ArgumentParser, help_text: str = QUIET_HELP) -> None:
    parser.add_argument("--quiet", action="store_true", help=help_text)


def add_output(parser: argparse.ArgumentParser, help_text: str, **kwargs) -> None:
    """-o/--output, dest `output`; kwargs: metavar, type, default, required."""
    kwargs.setdefault("metavar", "PATH")
    parser.add_argument("-o", "--output", dest="output", help=help_text, **kwargs)


def add_platform(parser: argparse.ArgumentParser, help_text: str, *aliases: str, **kwargs) -> None:
    """--platform, dest `platform`; `aliases`: old spellings, accepted but not shown in --help."""
    kwargs.setdefault("metavar", "SUBDIR")
    parser.add_argument("--platform", dest="platform", help=help_text, **kwargs)
    for alias in aliases:
        parser.add_argument(alias, dest="platform", help=argparse.SUPPRESS, **kwargs)


def subcommand(sub, name: str, description: str) -> argparse.ArgumentParser:
    """An action of a subcommand (`solver channel build`), with the same text for the list in the
    parent's --help and as the description of its own --help."""
    return sub.add_parser(name, help=description, description=description[:1].upper() + description[1:] + ".")
