"""`solver make-env`: turn a GPU and a driver into a consistent env.yml.

detect -> target -> plan -> solve -> verify -> emit -> output. Exit status (solver.cli): 0 an
environment was written (verified by a solve, or a plan alone when the channels cannot be reached /
--offline); 1 no consistent environment exists, or an output cannot be written (one line: the cause
and the fix; nothing else on stderr); 2 bad flags or a malformed CONDA_OVERRIDE_*. Outputs are
written all or none (solver.output), after everything else succeeded.

--format pip|uv: detect -> target -> solver.pip_plan -> solver.emit_pip -> output, same exit statuses;
no solve (pip and uv resolve at install time), and the conda-only flags are usage errors.

--with SPEC (repeatable): packages of the pointops channel (solver/knowledge/channel_packages.yaml)
added to either plan; the specs are parsed (exit 2 when malformed) before anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from solver.errors import ChannelAccessError, SolverError, UsageError

DEFAULT_CHANNELS = ("pointops", "conda-forge")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from solver.flags import add_output, add_platform

    parser.description = (
        "Print a conda environment file (CEP 24) whose python, pytorch build, cuda-version and "
        "pointops build fit the GPU and driver (--format pip or uv: a requirements.txt or a uv "
        "pyproject.toml naming the PyTorch wheel index and pointops wheel that fit); explanations "
        "go to stderr."
    )
    parser.add_argument(
        "--gpu",
        default="auto",
        metavar="GPU",
        help="auto (detect: NVML, then nvidia-smi), none (CPU), a GPU name ('RTX 4090'), a compute "
        "capability (8.6 or sm_86), or 'NAME:8.6' for a GPU the table lacks (default: auto)",
    )
    parser.add_argument(
        "--driver",
        metavar="VERSION",
        help="NVIDIA driver version of the target, Linux (550.54.14) or Windows (566.03) style",
    )
    add_platform(parser, "linux-64, linux-aarch64, win-64, osx-64 or osx-arm64 (default: this machine)")
    parser.add_argument("--python", metavar="X.Y", help="pin the Python version")
    parser.add_argument(
        "--torch", metavar="X.Y[.Z]", help="pin the pytorch version (X.Y.Z pins that release)"
    )
    parser.add_argument("--cuda", metavar="X.Y", help="pin the CUDA version (cuda-version)")
    parser.add_argument(
        "--with",
        dest="with_",
        action="append",
        metavar="SPEC",
        help="add a package of the pointops channel, as a conda match spec: mmcv, 'mmcv<2.2', "
        "pointnet2_ops (repeatable); the plan picks a pytorch, CUDA and Python it is built for and "
        "pins its build to pytorch's",
    )
    parser.add_argument(
        "--channel",
        action="append",
        metavar="CHANNEL",
        help="channel name (conda-forge, owner/label/dev), URL or directory (./dir, /dir, or one "
        "that exists); repeatable, in priority order (default: pointops, then conda-forge)",
    )
    parser.add_argument("--name", help="environment name (default: pointops)")
    parser.add_argument(
        "--format",
        choices=("conda", "pip", "uv"),
        default="conda",
        help="conda: an env.yml (default); pip: a requirements.txt for pip or `uv pip`; uv: a "
        "pyproject.toml for a uv project (both pin PyTorch's wheel index that fits the GPU)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="do not contact the channels: emit the plan alone, marked as not verified",
    )
    add_output(
        parser,
        metavar="FILE",
        help_text="write the output (env.yml, requirements.txt or pyproject.toml, as --format says) to FILE "
        "instead of stdout (a symlink is written through, a FIFO or device written to, a regular file "
        "replaced whole, but never a pyproject.toml that make-env did not write; /dev/stdout, "
        "/dev/fd/N are written to the open descriptor, so `>> log` appends)",
    )
    parser.add_argument(
        "--explicit", metavar="FILE", help="also write a CEP 23 explicit file (needs a solve)"
    )
    parser.add_argument("--lock", metavar="FILE", help="also write a rattler lock file (needs a solve)")
    from solver import create

    create.add_arguments(parser)  # --create PREFIX, --force


class _Notes:
    """make-env's stderr: reasons and warnings unless --quiet; errors go through solver.cli."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def say(self, message: str) -> None:
        if not self.quiet and sys.stderr is not None:
            print(f"solver make-env: {' '.join(message.split())}", file=sys.stderr)

    def warn(self, message: str) -> None:
        if sys.stderr is not None:
            print(f"solver make-env: warning: {' '.join(message.split())}", file=sys.stderr)


_XY = re.compile(r"^\d+\.\d+$")
_XYZ = re.compile(r"^\d+\.\d+(\.\d+)?$")
# conda refuses these in environment names; control characters would break the YAML and the shell.
_BAD_NAME = re.compile(r"[/\\:#\s\x00-\x1f\x7f]")


def _encodable(text: str) -> bool:
    """Text that can be written as UTF-8 (argv bytes that were not UTF-8 arrive as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_CONDA_ONLY = (
    ("--channel", "channel", "conda channels"),
    ("--name", "name", "the conda environment's name"),
    ("--explicit", "explicit", "a conda explicit file"),
    ("--lock", "lock", "a conda lock file"),
)


def _check_format(args) -> None:
    """--format pip|uv takes no flag that only means something to conda."""
    for flag, attr, what in _CONDA_ONLY:
        if args.format != "conda" and getattr(args, attr) is not None:
            raise UsageError(f"{flag} ({what}) is for --format conda; drop it with --format {args.format}.")
    if args.name is None:
        args.name = "pointops"


def check_flags(args) -> None:
    """Malformed flags and flag combinations: UsageError (exit 2), before anything is done."""
    _check_format(args)
    if args.python is not None and not _XY.match(args.python):
        raise UsageError(f"--python {args.python!r} is not a version; expected X.Y such as 3.12.")
    if args.torch is not None and not _XYZ.match(args.torch):
        raise UsageError(f"--torch {args.torch!r} is not a version; expected X.Y such as 2.13, or X.Y.Z.")
    if args.cuda is not None and not _XY.match(args.cuda):
        raise UsageError(f"--cuda {args.cuda!r} is not a version; expected X.Y such as 12.9.")
    args.with_specs = _parse_with(args)
    if args.offline and (args.explicit is not None or args.lock is not None):
        raise UsageError("--explicit and --lock record a real solve; drop --offline (or drop them).")
    name = args.name
    if not name.strip() or _BAD_NAME.search(name) or name.startswith("-") or not _encodable(name):
        raise UsageError(
            f"--name {name!r} is not a usable environment name; use letters, digits, '-', '_' "
            "or '.' (no spaces, '/', '\\', ':', '#' or control characters)."
        )
    for channel in args.channel or []:
        if not channel.strip() or any(ord(c) < 32 or c == "\x7f" for c in channel) or not _encodable(channel):
            raise UsageError(
                f"--channel {channel!r} is not a channel: give a channel name, URL or directory."
            )
    from solver.output import check_destinations

    check_destinations(_destinations(args))


def _parse_with(args) -> list:
    """--with SPEC values -> solver.plan.WithSpec (a malformed one is a usage error)."""
    texts = getattr(args, "with_", None) or []
    if not texts:
        return []
    from solver.plan import parse_with_spec

    for text in texts:
        if not _encodable(text) or any(ord(c) < 32 or c == "\x7f" for c in text):
            raise UsageError(f"--with {text!r} is not a conda match spec: give a name such as mmcv.")
    return [parse_with_spec(text) for text in texts]


def _with_requests(args, kb) -> list:
    """The --with packages looked up in the knowledge tables (solver.plan.WithRequest)."""
    from solver.plan import with_requests

    specs = getattr(args, "with_specs", None)
    return with_requests(kb, specs) if specs else []


def _with_channel_note(note: str | None, requests: list) -> str | None:
    """The unpublished channel's note (solver.published) also holds the --with packages."""
    if not note or not requests:
        return note
    names = " and ".join(r.package.name for r in requests)
    recipes = ", ".join(f"recipes/{r.package.name}" for r in requests)
    return (
        f"{note}. {names} {'comes' if len(requests) == 1 else 'come'} from that channel too: build "
        f"{recipes} into the local channel with rattler-build, or drop the --with packages"
    )


def _destinations(args) -> list:
    from solver.output import Destination

    named = (("-o", args.output), ("--explicit", args.explicit), ("--lock", args.lock))
    return [Destination(flag, path) for flag, path in named if path is not None]


def _is_project_file(path: str) -> bool:
    names = {os.path.basename(path), os.path.basename(os.path.realpath(path))}
    return "pyproject.toml" in names


def _written_by_make_env(path: str) -> bool:
    """True when the regular file at `path` carries make-env's header (or cannot be read: the
    output's own checks name that problem)."""
    from solver.emit import MADE_BY

    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return True
    return MADE_BY.encode() in head


def refuse_foreign_project_files(args) -> None:
    """A pyproject.toml that make-env did not write is a project's own (the README's uv command,
    run in a checkout, once replaced this repository's): refuse it before any work, exit 1."""
    from solver.output import own_descriptor

    for dest in _destinations(args):
        path = dest.path
        if not _is_project_file(path) or own_descriptor(path) is not None or not os.path.isfile(path):
            continue
        if not _written_by_make_env(path):
            raise SolverError(
                f"{path} is a pyproject.toml that `solver make-env` did not write (it lacks make-env's "
                "header), so replacing it would lose that project's own settings; nothing was written",
                "write the uv project into a new folder (mkdir pointops-env && solver make-env --format uv "
                "... -o pointops-env/pyproject.toml && cd pointops-env && uv sync), or print it without -o "
                "and merge its [project] dependencies and [tool.uv] tables into this file",
            )


def _detector(args):
    """For --gpu auto: detect once, and refuse a broken driver instead of planning a CPU environment."""
    if args.gpu.strip().lower() != "auto":
        return None
    from solver.detect import detect

    info = detect()
    if info.problem and info.source != "override":  # CONDA_OVERRIDE_CUDA states the driver instead
        raise SolverError(
            f"{info.problem}, so this machine's GPU cannot be planned for",
            "fix the driver (nvidia-smi must answer), or plan explicitly: --gpu NAME --driver "
            "VERSION, or --gpu none for a CPU environment",
        )
    return lambda: info


def make_env(args) -> int:
    """The whole command; returns the exit status, raises SolverError."""
    from solver.emit import Outcome, env_yml, json_document
    from solver.knowledge import KnowledgeError, load
    from solver.overrides import read_overrides
    from solver.plan import make_plan
    from solver.published import conda_note
    from solver.solve import channel_for_env_file
    from solver.target import build_target, check_overrides

    check_flags(args)
    if args.create is not None or args.force:
        from solver.create import check_flags as check_create_flags

        check_create_flags(args)
    read_overrides(os.environ)  # a malformed CONDA_OVERRIDE_* is a usage error, here and everywhere
    refuse_foreign_project_files(args)
    notes = _Notes(args.quiet)
    channels = list(args.channel or DEFAULT_CHANNELS)
    try:
        kb = load()
    except KnowledgeError as exc:
        raise SolverError(
            f"the solver's knowledge files are broken: {exc}", "reinstall pointops-solver"
        ) from None
    check_overrides(kb)  # CONDA_OVERRIDE_CUDA_ARCH=13.5 is refused as --gpu 13.5 is, before detection
    if args.format != "conda":
        return _make_wheel_env(args, kb, notes)

    outcome = Outcome(
        plan=None,
        target=None,
        channels=channels,
        name=args.name,
        env_channels=[channel_for_env_file(c) for c in channels],
        unpublished=conda_note(channels),
    )
    try:
        requests = _with_requests(args, kb)
        outcome.unpublished = _with_channel_note(outcome.unpublished, requests)
        outcome.target = build_target(
            kb, gpu=args.gpu, driver=args.driver, platform=args.platform, detector=_detector(args)
        )
        outcome.plan = make_plan(
            kb, outcome.target, python=args.python, torch=args.torch, cuda=args.cuda, requests=requests
        )
        if args.torch is None:
            _say_which_source_limits(kb, outcome.plan)
        _verify_by_solve(args, kb, outcome, notes)
    except SolverError as exc:
        if args.json:
            outcome.errors.append(exc.one_line())
            outcome.status = outcome.status or "no plan"
            _print_json(json_document(outcome))
        raise

    if args.create is not None:
        from solver.create import create_environment

        return create_environment(args, outcome, notes)
    plan = outcome.plan
    if outcome.solution is None and (args.explicit is not None or args.lock is not None):
        raise SolverError(
            f"--explicit/--lock need a solve, and none ran ({outcome.status}); nothing was written",
            "make the channels reachable, or drop --explicit/--lock",
        )
    text = env_yml(outcome)
    files = []
    for dest in _destinations(args):
        if dest.flag == "-o":
            files.append((dest, text))
        elif dest.flag == "--explicit":
            files.append((dest, outcome.solution.explicit))
        else:
            files.append((dest, outcome.solution.lock))
    return _deliver(
        args,
        notes,
        files,
        text,
        lambda: json_document(outcome),
        plan.reasons,
        outcome.warnings,
        [outcome.unpublished] if outcome.unpublished else [],
    )


def _say_which_source_limits(kb, plan) -> None:
    """The pip plan of the same machine may give a newer torch: say that conda-forge is the limit."""
    from solver.knowledge import KnowledgeError
    from solver.pytorch_wheels import load_wheels
    from solver.sources import conda_release_note

    try:
        table = load_wheels()
    except KnowledgeError:
        return  # the conda plan does not need the wheel table; --format pip reports it broken
    note = conda_release_note(kb, table, plan.target.platform, plan.pytorch_minor)
    if note:
        plan.reasons.append(note)


def _deliver(args, notes: _Notes, files: list, text: str, document, reasons, warnings, unpublished) -> int:
    """Writes the output files (all or none), then prints the text (no -o) or the JSON document
    (--json; `document` makes it), then the reasons, warnings, what the file names that is not
    published yet (`unpublished`: notes as the file's header has them, solver.published) and what
    was written."""
    from solver.output import write_files, write_stdout

    written = write_files(files)
    if args.json:
        _print_json(document())
    elif args.output is None:
        write_stdout(text, "pass -o FILE")
    for reason in reasons:
        notes.say(reason)
    for warning in warnings:
        notes.warn(warning)
    for note in unpublished:
        notes.say(f"not yet published: {note}")
    for path in written:
        notes.say(f"wrote {path}")
    return 0


def _make_wheel_env(args, kb, notes: _Notes) -> int:
    """--format pip|uv: the same target as for conda, a wheel plan (solver.pip_plan) instead of a
    conda one, rendered by solver.emit_pip; nothing is solved (pip and uv resolve at install)."""
    from solver.emit_pip import json_document, render, unpublished_notes
    from solver.knowledge import KnowledgeError
    from solver.pip_plan import make_pip_plan
    from solver.pytorch_wheels import load_wheels
    from solver.target import build_target

    target = None
    try:
        try:
            table = load_wheels()
        except KnowledgeError as exc:
            raise SolverError(
                f"the solver's knowledge files are broken: {exc}", "reinstall pointops-solver"
            ) from None
        target = build_target(
            kb, gpu=args.gpu, driver=args.driver, platform=args.platform, detector=_detector(args)
        )
        requests = _with_requests(args, kb)
        plan = make_pip_plan(
            kb, table, target, python=args.python, torch=args.torch, cuda=args.cuda, requests=requests
        )
    except SolverError as exc:
        if args.json:
            _print_json(json_document(None, args.format, target=target, errors=[exc.one_line()]))
        raise
    text = render(plan, args.format)
    files = [(dest, text) for dest in _destinations(args)]
    return _deliver(
        args,
        notes,
        files,
        text,
        lambda: json_document(plan, args.format),
        plan.reasons,
        plan.warnings,
        unpublished_notes(plan),
    )


def _print_json(document: dict) -> None:
    from solver.output import write_stdout

    write_stdout(json.dumps(document, indent=2) + "\n")


def _verify_by_solve(args, kb, outcome, notes: _Notes) -> None:
    """Solve the plan against the channels and check the result; a channel that cannot be read
    leaves the plan unverified (exit 0), a solve that contradicts the plan is an error."""
    plan = outcome.plan
    outcome.warnings = list(plan.warnings)
    if args.offline:
        outcome.status = "--offline (the plan follows the solver's knowledge tables)"
        return
    from solver.solve import solve_plan
    from solver.verify import verify

    try:
        result = solve_plan(plan, outcome.channels)
    except ChannelAccessError as exc:
        outcome.status = (
            f"channels not reachable ({exc.one_line()}); the plan follows the solver's knowledge tables"
        )
        outcome.warnings.append(f"not verified by a solve: {exc.one_line()}")
        return
    except SolverError:
        outcome.status = "solve failed"
        raise
    problems = verify(kb, plan, result.packages)
    if problems:
        outcome.status = "verification failed"
        raise SolverError(
            "the solve broke the plan's rules: " + "; ".join(problems),
            "report this with the command line used",
        )
    outcome.verified = True
    outcome.solution = result
    shown = [
        v.rsplit("=", 1)[0] for v in result.virtual_packages if not v.startswith(("__unix", "__archspec"))
    ]
    outcome.status = f"solved against {', '.join(outcome.channels)} with {' '.join(shown)}"


def run(args) -> int:
    return make_env(args)
