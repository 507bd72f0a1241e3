"""`solver wheels`: the pip / uv wheels of pointops.

    solver wheels list [--platform P] [--json]         the distributions built for a platform
    solver wheels build DIST [--source DIR] [-o out/wheels] [--jobs N] [--quiet]
                                                       build DIST's wheel for this machine, audited
    solver wheels check WHEEL... [--json] [--quiet]    audit built wheels (exit 1 on a problem)

DIST is pointops (CPU), pointops-cu12 or pointops-cu13 (`wheels:` of
solver/knowledge/pointops_builds.yaml), or pointnet2_ops, the pure-Python wheel that runs on them
(`pure_wheels:`; one py3-none-any file for every platform, its source ops-src/dropins/pointnet2_ops).
Flags mean what they mean in every solver command (solver.flags).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from solver.errors import SolverError, UsageError
from solver.flags import add_json, add_output, add_platform, add_quiet, subcommand
from solver.output import path_argument
from solver.vocabulary import PLATFORMS

DEFAULT_OUTPUT = Path("out") / "wheels"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = subcommand(sub, "list", "the pointops distributions built for a platform, with their archs")
    add_platform(listing, "conda subdir, one of %(choices)s (default: this machine)", choices=PLATFORMS)
    add_json(listing)
    build = subcommand(sub, "build", "build one distribution's wheel for this machine, repaired and audited")
    build.add_argument("distribution", help="pointops, pointops-cu12, pointops-cu13 or pointnet2_ops")
    build.add_argument(
        "--source",
        type=path_argument,
        help="its source tree (default: ops-src; pointnet2_ops: ops-src/dropins/pointnet2_ops)",
    )
    add_output(
        build, "folder for the wheel (default: %(default)s)", type=path_argument, default=DEFAULT_OUTPUT
    )
    build.add_argument(
        "--jobs",
        type=int,
        help="parallel compile jobs (MAX_JOBS; default: all cores; pure wheels compile nothing)",
    )
    add_quiet(build, "no progress lines on stderr; the wheel's path still goes to stdout")
    check = subcommand(sub, "check", "audit built wheels: tags, metadata, bundled libraries, arch list")
    check.add_argument("wheels", nargs="+", type=path_argument)
    add_json(check)
    add_quiet(check, "print only the wheels that fail, with their problems")


def _pure_rows() -> list[dict]:
    """The pure-Python wheels: one file for every platform, installing a pointops wheel per extra."""
    from solver.knowledge import load

    return [
        {"distribution": w.distribution, "platform": "any", "cuda": None, "archs": None, "extras": w.extras}
        for w in load().pointops_table.pure_wheels
    ]


def _list(platform: str | None, as_json: bool) -> int:
    from solver.knowledge import load
    from solver.wheels.build import arch_list
    from solver.wheels.naming import conda_platform

    platform = platform or conda_platform()
    wheels = load().pointops_wheels(platform)
    if not wheels:
        raise SolverError(f"no pointops wheels are built for {platform}")
    if as_json:
        rows = [
            {
                "distribution": w.distribution,
                "platform": platform,
                "cuda": w.cuda_version,
                "archs": arch_list(w.archs) if w.cuda_version else None,
            }
            for w in wheels
        ]
        print(json.dumps(rows + _pure_rows(), indent=2))
        return 0
    for wheel in wheels:
        cuda = f"CUDA {wheel.cuda_version}, archs {arch_list(wheel.archs)}" if wheel.cuda_version else "CPU"
        print(f"{wheel.distribution:15} {platform:14} {cuda}")
    for row in _pure_rows():
        extras = ", ".join(f"[{extra}] {dist}" for extra, dist in row["extras"].items())
        print(f"{row['distribution']:15} {'any':14} pure Python (py3-none-any); extras: {extras}")
    return 0


def _progress(quiet: bool):
    """Where `wheels build` reports its steps: stderr (stdout is for the wheel's path), or nowhere."""
    from solver.wheels.build import timed

    if quiet:
        return lambda _line: None
    return timed(lambda line: print(f"solver wheels build: {line}", file=sys.stderr, flush=True))


def _check_distribution(distribution: str) -> None:
    """A name that is no pointops distribution is a usage error (exit 2); a real one that is not
    built for this platform is not (solver.wheels.build says so, exit 1)."""
    from solver.knowledge import load
    from solver.wheels.pure import pure_distributions, pure_entry

    known = [*load().pointops["wheels"], *pure_distributions()]
    if distribution not in known and pure_entry(distribution) is None:  # pointnet2-ops is pointnet2_ops
        raise UsageError(
            f"{distribution!r} is not a pointops distribution; choose one of: {', '.join(known)}"
        )


def _check(wheels: list[Path], as_json: bool, quiet: bool) -> int:
    from solver.wheels.audit import audit_wheel

    for wheel in wheels:
        if not wheel.is_file():
            raise SolverError(f"{wheel} is not a file", "give the path of a built .whl")
    results = {wheel: audit_wheel(wheel) for wheel in wheels}
    if as_json:
        document = [
            {"wheel": str(w), "ok": not problems, "problems": problems} for w, problems in results.items()
        ]
        print(json.dumps(document, indent=2))
    for wheel, problems in results.items():
        if as_json or (quiet and not problems):
            continue
        print(f"{wheel.name}: {'ok' if not problems else 'FAILED'}")
        for problem in problems:
            print(f"  - {problem}")
    return 1 if any(results.values()) else 0


def run(args) -> int:
    if args.action is None:
        raise UsageError("give an action: list, build or check (see `solver wheels --help`)")
    if args.action == "list":
        return _list(args.platform, args.json)
    if args.action == "build":
        from solver.wheels.build import build_wheel

        if args.jobs is not None and args.jobs < 1:
            raise UsageError(f"--jobs {args.jobs} must be a positive number")
        _check_distribution(args.distribution)
        print(build_wheel(args.distribution, args.source, args.output, args.jobs, _progress(args.quiet)))
        return 0
    return _check(args.wheels, args.json, args.quiet)
