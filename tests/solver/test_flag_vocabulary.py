"""One vocabulary of flags for every `solver` subcommand (solver.flags): each subcommand and action
has a --help description, a flag name means one thing wherever it appears (-o/--output, --platform,
--json, --quiet parse to the same destination the same way), every action that writes takes -o,
and the old spellings still parse without being shown."""

from __future__ import annotations

import argparse

import pytest
from solver_cli import run_cli

from solver import cli

# subcommand (and action) -> the shared flags it takes
JSON = {"make-env", "doctor", "channel render", "wheels list", "wheels check"}
QUIET = {
    "make-env",
    "doctor",
    "channel render",
    "channel package-local",
    "channel index",
    "channel upload",
    "wheels build",
    "wheels check",
}
WRITES = {"make-env", "channel build", "channel package-local", "channel feedstock", "wheels build"}
PLATFORM = {"make-env", "channel render", "channel build", "wheels list"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def every_parser() -> dict[str, argparse.ArgumentParser]:
    """'make-env', 'channel', 'channel build', ... -> its parser."""
    parsers = {}
    for name in cli.SUBCOMMANDS:
        _, parser = cli.subcommand_parser(name)
        parsers[name] = parser
        for action, child in _subparsers(parser).items():
            parsers[f"{name} {action}"] = child
    return parsers


PARSERS = every_parser()
COMMANDS = sorted(PARSERS)
LEAVES = sorted(name for name, parser in PARSERS.items() if not _subparsers(parser))


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return parser._option_string_actions.get(flag)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_has_a_description_in_its_help(capsys, command):
    parser = PARSERS[command]
    assert parser.description and parser.description.strip(), command
    code, out, err = run_cli(capsys, *command.split(), "--help")
    assert code == 0, err
    first_words = " ".join(parser.description.split()[:4])
    assert first_words in " ".join(out.split()), out


@pytest.mark.parametrize("command", LEAVES)
def test_the_shared_flags_are_where_they_belong_and_parse_the_same(command):
    parser = PARSERS[command]
    for flag, wanted in (("--json", JSON), ("--quiet", QUIET)):
        action = option(parser, flag)
        assert (action is not None) == (command in wanted), f"{command} {flag}"
        if action is not None:
            assert isinstance(action, argparse._StoreTrueAction) and action.dest == flag[2:]
    output = option(parser, "--output")
    assert (output is not None) == (command in WRITES), command
    if output is not None:
        assert option(parser, "-o") is output and output.dest == "output"
    platform = option(parser, "--platform")
    assert (platform is not None) == (command in PLATFORM), command
    if platform is not None:
        assert platform.dest == "platform"


@pytest.mark.parametrize(
    "argv,dest,value",
    [
        (["channel", "build", "--target-platform", "osx-64"], "platform", "osx-64"),
        (["channel", "build", "--platform", "osx-64"], "platform", "osx-64"),
        (["channel", "build", "--output", "x"], "output", "x"),
        (["channel", "build", "-o", "x"], "output", "x"),
        (["wheels", "build", "pointops", "-o", "x"], "output", "x"),
        (["wheels", "build", "pointops", "--output", "x"], "output", "x"),
        (["channel", "package-local", "-o", "x"], "output", "x"),
        (
            ["channel", "feedstock", "--url", "u", "--homepage", "h", "--maintainer", "m", "-o", "x"],
            "output",
            "x",
        ),
        (["make-env", "-o", "x"], "output", "x"),
    ],
)
def test_old_and_new_spellings_parse_to_one_destination(argv, dest, value):
    _, parser = cli.subcommand_parser(argv[0])
    args = parser.parse_args(argv[1:])
    assert str(getattr(args, dest)) == value


def test_old_spellings_are_not_shown(capsys):
    code, out, _ = run_cli(capsys, "channel", "build", "--help")
    assert code == 0 and "--platform" in out and "--target-platform" not in out


def test_wheels_list_json_is_the_text_listing(capsys):
    import json

    code, text, _ = run_cli(capsys, "wheels", "list", "--platform", "linux-64")
    assert code == 0
    code, out, _ = run_cli(capsys, "wheels", "list", "--platform", "linux-64", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["distribution"] for r in rows] == [line.split()[0] for line in text.splitlines()]
    # binary wheels are per platform; the pure-Python pointnet2_ops wheel fits any
    assert all(r["platform"] == ("any" if r["distribution"] == "pointnet2_ops" else "linux-64") for r in rows)
    assert [r["cuda"] for r in rows if r["distribution"] == "pointops"] == [None]


def test_channel_index_quiet_prints_nothing(capsys, tmp_path):
    code, out, err = run_cli(capsys, "channel", "index", str(tmp_path), "--quiet")
    assert code == 0 and out == "" and err == ""
    code, out, err = run_cli(capsys, "channel", "index", str(tmp_path))
    assert code == 0 and f"indexed {tmp_path}" in err
