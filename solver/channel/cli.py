"""`solver channel`: the conda packages of recipes/ (pointops, pointnet2_ops, mmcv), from recipe
to channel.

    solver channel render [--platform P]... [--json]    the variant matrix (same as --render-only)
    solver channel render --solve --channel URL ...     ... with run_exports resolved against URL
    solver channel build [--platform P] [--variant V]... [--channel URL]... [-o DIR]
                                                        rattler-build the variants of one platform
                                                        (a noarch recipe: its one package)
    solver channel package-local [--wheel W | --source DIR | --from-installed] [--variant cpu] [-o DIR]
                                                        offline: a local pointops build -> .conda
    solver channel index DIR                            write repodata for a channel directory
    solver channel upload DIR [--owner pointops]        upload its packages to anaconda.org
    solver channel feedstock --url U --homepage H --maintainer M... [--sdist S] -o DIR
                                                        the conda-forge recipe of a release

Flags mean what they mean in every solver command (solver.flags): -o/--output where it writes,
--platform the conda subdir (`--target-platform` still parses), --json, --quiet (no notes).

Every action but index and upload reads a recipe and its variant files with py-rattler-build,
whose absence is one error line with the install command (exit 1). `--recipe` (before or after the
action) names it: a name under recipes/ (pointops, the default; pointnet2_ops; mmcv) or the path
of a recipe folder; `--variant-config FILE` (render, build) adds a variant file read after the
recipe's. package-local and feedstock are pointops' alone. Errors are SolverErrors, which
solver/cli.py prints; malformed flags exit 2. The library is solver.channel; this module only
parses and prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from solver.channel.build import build_channel, check_reachable
from solver.channel.errors import ChannelError, require_rattler_build
from solver.channel.feedstock import write_feedstock_recipe
from solver.channel.index import index_channel
from solver.channel.local import package_local
from solver.channel.recipe import RECIPE_ENV, RecipeFiles, find_recipe
from solver.channel.render import (
    PLATFORMS,
    RenderedBuild,
    platforms_to_render,
    render_platform,
    render_with_solve,
)
from solver.channel.upload import upload_channel
from solver.errors import UsageError
from solver.flags import add_json, add_output, add_platform, add_quiet, subcommand
from solver.output import path_argument, text_argument

DEFAULT_CHANNELS = ("https://conda.anaconda.org/conda-forge",)
DEFAULT_OUTPUT = Path("out") / "channel"


RECIPE_HELP = (
    "a recipe of recipes/ by name (pointops, pointnet2_ops, mmcv) or the path of its folder or "
    f"recipe.yaml (default: ${RECIPE_ENV}, else pointops; found from the current directory upwards)"
)


def _add_recipe(parser: argparse.ArgumentParser, in_action: bool) -> None:
    """--recipe, on `solver channel` and on each action that reads a recipe. An action's default is
    SUPPRESS, so that `solver channel --recipe X build` keeps X."""
    extra = {"default": argparse.SUPPRESS} if in_action else {}
    parser.add_argument("--recipe", type=path_argument, help=RECIPE_HELP, **extra)


def _add_variant_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variant-config",
        action="append",
        type=path_argument,
        metavar="FILE",
        help="a variant file read after the recipe's (its keys win; e.g. python_min: ['3.12']), repeatable",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--render-only", action="store_true", help="print the variant matrix and exit (= `render`)"
    )
    _add_recipe(parser, in_action=False)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")

    render = subcommand(sub, "render", "print the variant matrix the recipe renders")
    _add_recipe(render, in_action=True)
    _add_variant_config(render)
    add_platform(render, "only these platforms (repeatable)", action="append", choices=PLATFORMS)
    add_json(render)
    add_quiet(render, "no progress lines on stderr")
    render.add_argument(
        "--solve", action="store_true", help="resolve build/host envs to show the final run requirements"
    )
    render.add_argument(
        "--channel", action="append", type=text_argument, help="channel for --solve (default: conda-forge)"
    )

    build = subcommand(sub, "build", "rattler-build the variants of one platform and index the result")
    _add_recipe(build, in_action=True)
    _add_variant_config(build)
    build.add_argument(
        "--channel", action="append", type=text_argument, help="dependency channel (default: conda-forge)"
    )
    add_platform(
        build,
        "platform to build for, one of %(choices)s (default: this machine's; osx-64 cross-compiles on "
        "osx-arm64)",
        "--target-platform",
        choices=PLATFORMS,
    )
    build.add_argument(
        "--variant", action="append", help="only these variants, e.g. cpu or cuda129 (repeatable)"
    )
    add_output(build, "channel directory (default: %(default)s)", type=path_argument, default=DEFAULT_OUTPUT)
    build.add_argument("--no-test", action="store_true", help="skip the recipe's tests")

    local = subcommand(
        sub, "package-local", "offline: package a pointops built here into a .conda and index it"
    )
    _add_recipe(local, in_action=True)
    source = local.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=path_argument, help="a pointops wheel built here (abi3)")
    source.add_argument(
        "--source", type=path_argument, help="build a wheel from this ops-src directory (default)"
    )
    source.add_argument(
        "--from-installed", action="store_true", help="use the pointops installed in this Python"
    )
    local.add_argument(
        "--variant", default="cpu", help="recipe variant whose metadata to use (default: %(default)s)"
    )
    add_output(local, "channel directory (default: %(default)s)", type=path_argument, default=DEFAULT_OUTPUT)
    add_quiet(local, "no note on stderr; the package's path still goes to stdout")

    index = subcommand(sub, "index", "write repodata for a channel directory (re-index it)")
    index.add_argument("directory", type=path_argument)
    add_quiet(index, "no note on stderr")

    upload = subcommand(
        sub, "upload", "upload a channel directory's packages to anaconda.org (needs ANACONDA_API_KEY)"
    )
    upload.add_argument("directory", type=path_argument)
    upload.add_argument(
        "--owner", default="pointops", type=text_argument, help="anaconda.org channel (default: %(default)s)"
    )
    add_quiet(upload, "no note on stderr")

    feedstock = subcommand(sub, "feedstock", "write the conda-forge recipe folder of a release")
    _add_recipe(feedstock, in_action=True)
    feedstock.add_argument("--url", required=True, help="https address of the release sdist")
    feedstock.add_argument("--homepage", required=True, help="the project's home (its repository)")
    feedstock.add_argument("--maintainer", action="append", required=True, help="GitHub handle (repeatable)")
    feedstock.add_argument(
        "--sdist", type=path_argument, help="the release sdist (default: build one from ops-src)"
    )
    add_output(feedstock, "folder for recipe/ (and the sdist)", type=path_argument, required=True)


def _note(args: argparse.Namespace, message: str) -> None:
    """A note on stderr, unless --quiet (actions without --quiet always print it)."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr, flush=True)


def _print_matrix(builds: list[RenderedBuild]) -> None:
    print(f"{'platform':14s} {'variant':8s} {'build string':24s} {'cuda':5s} {'__cuda_arch':12s} archs")
    for b in builds:
        archs = (
            ";".join(b.sass_archs) + (f"+PTX({b.ptx_arch})" if b.ptx_arch else "") if b.cuda_version else "-"
        )
        arch_min = f">={b.cuda_arch_min}" if b.cuda_arch_min else "-"
        print(
            f"{b.platform:14s} {b.variant:8s} {b.build_string:24s} {b.cuda_version or '-':5s} {arch_min:12s} {archs}"
        )
        line = f"{'':14s} run: {', '.join(b.run)}"
        if b.run_constraints:
            line += f"; constrains: {', '.join(b.run_constraints)}"
        print(line)


def _with_variant_configs(files: RecipeFiles, extra: list[Path] | None) -> RecipeFiles:
    """The recipe's variant files, then --variant-config's, in the order given."""
    for path in extra or []:
        if not path.is_file():
            raise ChannelError(f"--variant-config {path} is not a file; give a conda_build_config-style YAML")
    added = tuple(path.resolve() for path in extra or [])
    return dataclasses.replace(files, variant_configs=files.variant_configs + added)


def _render(args: argparse.Namespace, files: RecipeFiles) -> int:
    platforms = platforms_to_render(files, getattr(args, "platform", None) or list(PLATFORMS))
    if getattr(args, "solve", False):
        channels = args.channel or list(DEFAULT_CHANNELS)
        check_reachable(channels)
        key = (lambda p: "noarch") if files.noarch else (lambda p: p)
        print(json.dumps({key(p): render_with_solve(p, channels, files) for p in platforms}, indent=2))
        return 0
    builds = []
    for n, platform in enumerate(platforms, 1):
        if files.noarch:
            _note(args, f"rendering {files.package}: noarch, one package for every platform ...")
        else:
            _note(args, f"rendering {files.package} for {platform} ({n}/{len(platforms)}) ...")
        builds += render_platform(platform, files)
    if getattr(args, "json", False):
        print(json.dumps([b.as_dict() for b in builds], indent=2))
    else:
        _print_matrix(builds)
    return 0


def run(args: argparse.Namespace) -> int:
    action = "render" if args.render_only and args.action in (None, "render") else args.action
    if action is None:
        raise UsageError(
            "choose an action: render, build, package-local, index, upload or feedstock "
            "(see `solver channel --help`)"
        )
    if action != "index":
        require_rattler_build()  # before any work: package-local may build a wheel first
    try:
        if action == "index":
            index_channel(args.directory)
            _note(args, f"indexed {args.directory}")
            return 0
        if action == "upload":
            packages = upload_channel(args.directory, args.owner, os.environ.get("ANACONDA_API_KEY"))
            _note(args, f"uploaded {len(packages)} packages to anaconda.org/{args.owner}")
            return 0
        files = _with_variant_configs(find_recipe(args.recipe), getattr(args, "variant_config", None))
        if action == "render":
            return _render(args, files)
        if action == "build":
            packages = build_channel(
                args.output,
                args.channel or list(DEFAULT_CHANNELS),
                args.variant,
                not args.no_test,
                args.platform,
                files,
            )
            print("\n".join(str(p) for p in packages))
            print(f"indexed {args.output}", file=sys.stderr)
            return 0
        if action == "package-local":
            path = package_local(
                args.output,
                args.variant,
                wheel=args.wheel,
                source=args.source,
                from_installed=args.from_installed,
                files=files,
                progress=(lambda _line: None) if args.quiet else None,
            )
            print(path)
            _note(
                args,
                f"indexed {args.output}; install with: conda install -c {Path(args.output).resolve().as_uri()} "
                "-c conda-forge pointops",
            )
            return 0
        if action == "feedstock":
            recipe = write_feedstock_recipe(
                args.output, args.url, args.homepage, args.maintainer, args.sdist, files
            )
            print(recipe)
            return 0
        raise AssertionError(action)  # argparse only lets the actions above through
    except OSError as exc:  # an output path that is a file, a full disk, no permission, ...
        print(
            f"solver channel: error: {exc.strerror or exc}: {exc.filename or ''}; "
            "check the --output / directory argument",
            file=sys.stderr,
        )
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
