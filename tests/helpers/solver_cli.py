"""The `solver` CLI in this process, for tests that check its output and exit status."""

from __future__ import annotations

from solver import cli


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `solver ARGS...`."""
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    """An error as the CLI must give it: one line on stderr, never a traceback."""
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
