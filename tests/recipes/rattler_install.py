"""Solve specs against channels with py-rattler and install the result into a prefix.

    python rattler_install.py '{"channels": [...], "specs": [...], "prefix": "...",
                                "virtual_packages": ["__linux=6.1", ...], "cache": "..."}'

Prints the installed records as JSON ({"name": ..., "build": ...} per line of a list), or
{"error": "..."} with exit code 3 when the specs cannot be solved. Runs as its own process and
leaves through os._exit, because the rattler runtime can crash while Python shuts down after a
solve (it would fail a passing test).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


async def solve_and_install(args: dict) -> list[dict]:
    from rattler import (
        BuildString,
        Channel,
        GenericVirtualPackage,
        MatchSpec,
        PackageName,
        Subdir,
        Version,
        install,
        solve,
    )

    platform = str(Subdir.current())
    virtual = []
    for item in args["virtual_packages"]:
        name, version = item.split("=")
        virtual.append(GenericVirtualPackage(PackageName(name), Version(version), BuildString("0")))
    records = await solve(
        [Channel(c) for c in args["channels"]],
        [MatchSpec(s) for s in args["specs"]],
        platforms=[platform, "noarch"],
        virtual_packages=virtual,
    )
    await install(records, args["prefix"], cache_dir=Path(args["cache"]), show_progress=False)
    return [{"name": r.name.normalized, "version": str(r.version), "build": str(r.build)} for r in records]


def main() -> int:
    args = json.loads(sys.argv[1])
    try:
        result, code = asyncio.run(solve_and_install(args)), 0
    except Exception as exc:  # SolverError and friends: report, the test decides
        result, code = {"error": f"{type(exc).__name__}: {exc}"}, 3
    print(json.dumps(result))
    return code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
