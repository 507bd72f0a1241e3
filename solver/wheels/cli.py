"""`solver wheels`: the pip / uv wheels of pointops.

    solver wheels list [--platform P]                  the distributions built for a platform
    solver wheels build DIST [--source ops-src] [--output out/wheels] [--jobs N]
                                                       build DIST's wheel for this machine, audited
    solver wheels check WHEEL...                       audit built wheels (exit 1 on a problem)

DIST is pointops (CPU), pointops-cu12 or pointops-cu13 (solver/knowledge/pointops_builds.yaml).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from solver.errors import SolverError, UsageError
from solver.output import path_argument
from solver.vocabulary import PLATFORMS

DEFAULT_OUTPUT = Path("out") / "wheels"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = sub.add_parser("list", help="the distributions built for a platform")
    listing.add_argument(
        "--platform", choices=PLATFORMS, help="conda subdir, one of %(choices)s (default: this machine)"
    )
    build = sub.add_parser("build", help="build one distribution's wheel for this machine")
    build.add_argument("distribution", help="pointops, pointops-cu12 or pointops-cu13")
    build.add_argument("--source", type=path_argument, default=Path("ops-src"), help="default: %(default)s")
    build.add_argument("--output", type=path_argument, default=DEFAULT_OUTPUT, help="default: %(default)s")
    build.add_argument("--jobs", type=int, help="parallel compile jobs (MAX_JOBS; default: all cores)")
    check = sub.add_parser("check", help="audit built wheels")
    check.add_argument("wheels", nargs="+", type=path_argument)


def _list(platform: str | None) -> int:
    from solver.knowledge import load
    from solver.wheels.build import arch_list
    from solver.wheels.naming import conda_platform

    platform = platform or conda_platform()
    wheels = load().pointops_wheels(platform)
    if not wheels:
        raise SolverError(f"no pointops wheels are built for {platform}")
    for wheel in wheels:
        cuda = f"CUDA {wheel.cuda_version}, archs {arch_list(wheel.archs)}" if wheel.cuda_version else "CPU"
        print(f"{wheel.distribution:15} {platform:14} {cuda}")
    return 0


def _check_distribution(distribution: str) -> None:
    """A name that is no pointops distribution is a usage error (exit 2); a real one that is not
    built for this platform is not (solver.wheels.build says so, exit 1)."""
    from solver.knowledge import load

    known = list(load().pointops["wheels"])
    if distribution not in known:
        raise UsageError(
            f"{distribution!r} is not a pointops distribution; choose one of: {', '.join(known)}"
        )


def run(args) -> int:
    if args.action is None:
        raise UsageError("give an action: list, build or check (see `solver wheels --help`)")
    if args.action == "list":
        return _list(args.platform)
    if args.action == "build":
        from solver.wheels.build import build_wheel

        if args.jobs is not None and args.jobs < 1:
            raise UsageError(f"--jobs {args.jobs} must be a positive number")
        _check_distribution(args.distribution)
        print(build_wheel(args.distribution, args.source, args.output, args.jobs))
        return 0
    from solver.wheels.audit import audit_wheel

    failed = 0
    for wheel in args.wheels:
        if not wheel.is_file():
            raise SolverError(f"{wheel} is not a file", "give the path of a built .whl")
        problems = audit_wheel(wheel)
        print(f"{wheel.name}: {'ok' if not problems else 'FAILED'}")
        for problem in problems:
            print(f"  - {problem}")
        failed += bool(problems)
    return 1 if failed else 0
