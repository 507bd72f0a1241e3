"""`solver make-env --create PREFIX`: install the environment make-env planned and solved, on this
machine, and check that it works before calling it done.

plan and solve (solver.make_env, as for env.yml) -> install with py-rattler into a temporary prefix
beside PREFIX (solver.create_install, in a child interpreter) -> write env.yml, the explicit file
and the lock file into its conda-meta/solver/ -> check it with its own python (solver.create_check:
python runs, torch imports and sees the GPU when one was planned, pointops and every --with package
import and run one op) -> rename it to PREFIX.

Nothing half made is left that looks usable: the temporary prefix is hidden
(`.NAME.creating-XXXX`) and removed on any failure, Ctrl-C included. An existing PREFIX is
refused (exit 2) unless it is empty, or holds a conda environment (conda-meta/) and --force is
given; then the old environment is moved aside (`.NAME.replaced-XXXX`) only once the new one passed
its check, and deleted once the new one is in place. A directory that is not an environment is
never deleted, --force or not. Packages are cached in CONDA_PKGS_DIRS (conda's variable; its
first writable directory takes new packages), else in rattler's cache (RATTLER_CACHE_DIR/pkgs,
the one pixi uses), so a second environment downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from solver.errors import EXIT_INTERRUPTED, SolverError, UsageError

INSTALL_SILENCE_LIMIT_S = 900  # no progress line at all for this long: the install is stuck
CHECK_SILENCE_LIMIT_S = 300  # importing a CUDA torch from a cold disk takes a minute at worst
FILES_DIR = "conda-meta/solver"  # where env.yml, explicit.txt and rattler.lock go in PREFIX
FILE_NAMES = {"env.yml": "env.yml", "explicit": "explicit.txt", "lock": "rattler.lock"}
# Directories that make a prefix a conda installation (its base environment), not one environment.
_INSTALLATION_MARKS = ("condabin", "envs", "pkgs")
# --with packages whose import name or smoke op is known: conda name -> (module, op); others are
# imported under their name ('-' read as '_'). The op is evaluated with torch, `device` and the
# module's top package in scope.
WITH_CHECKS = {
    "mmcv": (
        "mmcv.ops",
        "mmcv.ops.nms(torch.rand(4, 4).cumsum(1).to(device), torch.rand(4).to(device), 0.5)",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """make-env's --create and --force."""
    from solver.output import path_argument

    parser.add_argument(
        "--create",
        metavar="PREFIX",
        type=path_argument,
        help="install the environment into PREFIX (a new or empty directory) with py-rattler, check "
        "that torch and pointops work there, and write env.yml, explicit.txt and rattler.lock into "
        f"PREFIX/{FILES_DIR}/; for this machine only (--gpu auto or none, no other --platform)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --create: replace a conda environment already at PREFIX (kept until the new one "
        "passes its check); a directory that is not an environment is never replaced",
    )


def check_flags(args) -> None:
    """--create's usage errors (exit 2), before anything is detected or solved."""
    if args.force and args.create is None:
        raise UsageError("--force only applies to --create PREFIX; drop it, or add --create PREFIX.")
    if args.create is None:
        return
    _check_combinations(args)
    _check_this_machine(args)
    prefix_state(prefix_of(args), args.force)


def _check_combinations(args) -> None:
    if args.format != "conda":
        raise UsageError(
            f"--create installs a conda environment; --format {args.format} prints a file for "
            f"{args.format} to install: drop one of them."
        )
    if args.offline:
        raise UsageError("--create needs the channels (it solves and downloads); drop --offline.")
    for flag, value in (("-o", args.output), ("--explicit", args.explicit), ("--lock", args.lock)):
        if value is not None:
            raise UsageError(
                f"--create writes env.yml, explicit.txt and rattler.lock into PREFIX/{FILES_DIR}/; "
                f"drop {flag} (copy the file from there if you need it elsewhere)."
            )


def _check_this_machine(args) -> None:
    """An environment is installed for the machine it runs on: a plan for another one is printed
    instead (make-env without --create)."""
    from solver.detect import host_platform
    from solver.target import parse_gpu_flag

    here = host_platform()
    if args.platform is not None and args.platform != here:
        raise UsageError(
            f"--create installs for this machine ({here}), and --platform {args.platform} plans for "
            "another; drop --create to print its env.yml, or drop --platform."
        )
    kind, _, _ = parse_gpu_flag(args.gpu)
    if kind == "given":
        raise UsageError(
            f"--create installs for this machine's GPU, and --gpu {args.gpu.strip()!r} names one: use "
            "--gpu auto (detect it) or --gpu none (CPU), or drop --create to print that machine's env.yml."
        )


def prefix_state(prefix: Path, force: bool) -> str:
    """'new' (nothing there), 'empty' (an empty directory) or 'replace' (an environment, --force);
    anything else is a UsageError naming what is there and what to do."""
    if prefix.is_symlink():
        raise UsageError(f"--create {prefix}: is a symbolic link; give the directory itself, or a new path.")
    if not prefix.exists():
        return "new"
    if not prefix.is_dir():
        raise UsageError(f"--create {prefix}: is a file, not a directory; give a new or empty directory.")
    try:
        entries = {entry.name for entry in os.scandir(prefix)}
    except OSError as exc:
        raise UsageError(f"--create {prefix}: cannot be read ({exc.strerror}); give another path.") from None
    if not entries:
        return "empty"
    if not (prefix / "conda-meta").is_dir():
        raise UsageError(
            f"--create {prefix}: exists and holds files that are not a conda environment; give a new "
            "or empty directory (--force replaces only an environment, a directory with conda-meta/)."
        )
    if not force:
        raise UsageError(
            f"--create {prefix}: already holds a conda environment; pass --force to replace it (the "
            "old one is kept until the new one passes its check), or give another path."
        )
    _check_replaceable(prefix, entries)
    return "replace"


def _check_replaceable(prefix: Path, entries: set[str]) -> None:
    """--force replaces one environment: never a conda installation, nor one in use."""
    marks = sorted(entries & set(_INSTALLATION_MARKS))
    if marks:
        raise UsageError(
            f"--create {prefix} --force: this is a conda installation ({', '.join(m + '/' for m in marks)}), "
            "not one environment, and is never replaced; give the path of an environment."
        )
    here = Path(os.path.abspath(sys.prefix))
    active = os.environ.get("CONDA_PREFIX")
    if _same(prefix, here) or here.is_relative_to(prefix):
        raise UsageError(
            f"--create {prefix} --force: the solver itself runs from this environment; run the "
            "solver from another one to replace it."
        )
    if active and _same(prefix, Path(active)):
        raise UsageError(
            f"--create {prefix} --force: this is the active environment (CONDA_PREFIX); deactivate "
            "it first (conda deactivate)."
        )


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def package_cache_dirs(env=None) -> list[str]:
    """CONDA_PKGS_DIRS (comma-separated, as conda reads it), else rattler's own package cache."""
    env = os.environ if env is None else env
    given = [d.strip() for d in env.get("CONDA_PKGS_DIRS", "").split(",") if d.strip()]
    if given:
        return [os.path.abspath(os.path.expanduser(d)) for d in given]
    if env.get("RATTLER_CACHE_DIR"):
        root = Path(env["RATTLER_CACHE_DIR"]).expanduser()
    elif sys.platform == "win32":
        root = Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "rattler" / "cache"
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches" / "rattler" / "cache"
    else:
        root = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rattler" / "cache"
    return [str(Path(os.path.abspath(root)) / "pkgs")]


def with_packages(args) -> list[str]:
    """The package names of make-env's --with specs ("mmcv<2.2" -> "mmcv"), if it has that flag."""
    specs = getattr(args, "with", None) or getattr(args, "with_", None) or []
    names = []
    for spec in specs:
        match = re.match(r"\s*(?:[^:\s]+::)?([A-Za-z0-9_.\-]+)", spec)
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


def extra_checks(names: list[str]) -> list[dict]:
    """What create_check runs for each --with package."""
    out = []
    for name in names:
        module, op = WITH_CHECKS.get(name, (name.replace("-", "_"), ""))
        out.append({"package": name, "module": module, "op": op})
    return out


def prefix_of(args) -> Path:
    """--create's PREFIX as an absolute path ('~' expanded even when the shell did not)."""
    return Path(os.path.abspath(os.path.expanduser(args.create)))


def python_of(prefix: Path) -> Path:
    return prefix / "python.exe" if sys.platform == "win32" else prefix / "bin" / "python"


# -- the command --------------------------------------------------------------------------------


def create_environment(args, outcome, notes) -> int:
    """Install, check and put in place the environment make-env solved; returns the exit status,
    raises SolverError (exit 1; 130 for Ctrl-C) with nothing left at PREFIX that looks usable."""
    from solver.emit import env_yml, json_document

    try:
        if outcome.solution is None:
            raise SolverError(
                f"--create needs a solve against the channels, and none ran ({outcome.status}); "
                "nothing was installed",
                "make the channels reachable and run the command again",
            )
        for reason in outcome.plan.reasons:
            notes.say(reason)
        for warning in outcome.warnings:
            notes.warn(warning)
        prefix = prefix_of(args)
        files = {
            FILE_NAMES["env.yml"]: env_yml(outcome),
            FILE_NAMES["explicit"]: outcome.solution.explicit,
            FILE_NAMES["lock"]: outcome.solution.lock,
        }
        report = _create(prefix, args, outcome, files)
    except SolverError as exc:
        if args.json:
            outcome.errors.append(exc.one_line())
            _print_json(json_document(outcome))
        raise
    if args.json:
        _print_json({**json_document(outcome), "created": report})
    for line in report["checks"]:
        notes.say(f"checked: {line}")
    for line in report["not_checked"]:
        notes.warn(line)
    notes.say(
        f"created {prefix}; use it with {python_of(prefix)}, or `conda activate {prefix}` "
        f"(env.yml, explicit.txt and rattler.lock are in {prefix / FILES_DIR})"
    )
    return 0


def _create(prefix: Path, args, outcome, files: dict[str, str]) -> dict:
    from solver.create_run import Progress

    state = prefix_state(prefix, args.force)  # again: the directory may have changed meanwhile
    progress = Progress(str(prefix), args.quiet)
    staging = _make_staging(prefix)
    try:
        for name, text in files.items():
            (staging / FILES_DIR).mkdir(parents=True, exist_ok=True)
            (staging / FILES_DIR / name).write_text(text, encoding="utf-8")
        cache_dirs = package_cache_dirs()
        installed = _install(staging, prefix, outcome, cache_dirs, progress)
        gpu = ", the GPU" if gpu_checked(outcome.plan.target) else ""
        progress.say(f"checking the new environment: python, torch{gpu}, pointops")
        checks = _check(staging, prefix, outcome, with_packages(args))
        _put_in_place(staging, prefix, state)
    except KeyboardInterrupt:
        progress.finish()
        _remove(staging)
        raise SolverError(
            f"interrupted; nothing was left at {prefix}",
            "run the command again to create it",
            exit_code=EXIT_INTERRUPTED,
        ) from None
    except OSError as exc:
        progress.finish()
        _remove(staging)
        raise _os_failure(exc, prefix) from None
    except BaseException:
        progress.finish()
        _remove(staging)
        raise
    return {
        "prefix": str(prefix),
        "python": str(python_of(prefix)),
        "files": {key: str(prefix / FILES_DIR / name) for key, name in FILE_NAMES.items()},
        "packages": installed["packages"],
        "downloaded": installed["downloaded"],
        "package_cache": cache_dirs,
        "replaced": state == "replace",
        "checks": checks,
        "not_checked": _not_checked(outcome.plan.target, prefix),
    }


def _make_staging(prefix: Path) -> Path:
    """A hidden, empty directory beside PREFIX (same file system, so the final rename is atomic)."""
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{prefix.name}.creating-", dir=prefix.parent))
    except OSError as exc:
        raise _os_failure(exc, prefix) from None


def _os_failure(exc: OSError, prefix: Path) -> SolverError:
    import errno

    where = exc.filename or prefix.parent
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return SolverError(
            f"the disk is full at {where} ({exc.strerror}); nothing was left at {prefix}",
            "free some space, or choose a PREFIX on another disk",
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return SolverError(
            f"cannot write {where} ({exc.strerror}); nothing was left at {prefix}",
            "choose a PREFIX in a directory you can write",
        )
    return SolverError(f"cannot create {prefix}: {exc.strerror or exc} ({where}); nothing was left there")


def _install(staging: Path, prefix: Path, outcome, cache_dirs: list[str], progress) -> dict:
    """py-rattler's install, in a child interpreter (solver.worker), its progress shown as it comes."""
    from solver import worker
    from solver.create_install import PROGRESS_MARKER
    from solver.create_run import run_child

    request = {
        "lock": str(staging / FILES_DIR / FILE_NAMES["lock"]),
        "platform": outcome.plan.target.platform,
        "prefix": str(staging),
        "final_prefix": str(prefix),
        "cache_dirs": cache_dirs,
    }
    reply: dict = {}

    def on_line(line: str) -> None:
        if line.startswith(PROGRESS_MARKER):
            progress.event(json.loads(line[len(PROGRESS_MARKER) :]))
        elif line.startswith(worker._MARKER):
            reply.update(json.loads(line[len(worker._MARKER) :]))

    cmd = [sys.executable, "-m", "solver.worker", "solver.create_install:install_prefix", json.dumps(request)]
    ended = run_child(cmd, on_line, INSTALL_SILENCE_LIMIT_S, env=worker._child_env(None))
    progress.finish()
    if "result" in reply:
        return reply["result"]
    if "error" in reply:
        failure = reply["error"]
        message = failure["message"] if failure.get("class") else f"the install failed: {failure['message']}"
        raise SolverError(f"{message}; nothing was left at {prefix}", failure.get("fix", ""))
    tail = f": {ended.stderr}" if ended.stderr else ""
    raise SolverError(
        f"the install stopped ({ended.how()}){tail}; nothing was left at {prefix}",
        "run the command again (downloaded packages stay in the package cache)",
    )


def _check(staging: Path, prefix: Path, outcome, extras: list[str]) -> list[str]:
    """Run solver/create_check.py with the new environment's python; the lines of what passed, or
    a SolverError naming what failed."""
    from solver.create_check import MARKER
    from solver.create_run import run_child

    python = python_of(staging)
    if not python.is_file():
        raise SolverError(
            f"the new environment has no python ({python.relative_to(staging)} is missing); it was "
            f"removed, nothing was left at {prefix}",
            "check that the channels' python package is complete",
        )
    request = {"gpu": gpu_checked(outcome.plan.target), "extras": extra_checks(extras)}
    script = Path(__file__).with_name("create_check.py")
    results: list[dict] = []

    def on_line(line: str) -> None:
        if line.startswith(MARKER):  # other lines: what the imported packages print
            results.append(json.loads(line[len(MARKER) :]))

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    cmd = [str(python), "-I", "-B", str(script), json.dumps(request)]
    ended = run_child(cmd, on_line, CHECK_SILENCE_LIMIT_S, env=env, cwd=str(staging))
    failed = [r for r in results if r.get("check") != "done" and not r.get("ok")]
    if failed:
        raise SolverError(
            f"the new environment failed its check: {'; '.join(r['detail'] for r in failed)}; it was "
            f"removed, nothing was left at {prefix}",
            "run `solver doctor` to check this machine's driver and GPU, or report it with the "
            "command line used",
        )
    if not results or results[-1].get("check") != "done":
        last = results[-1]["detail"] if results else "before its first check"
        raise SolverError(
            f"the new environment's python stopped ({ended.how()}) after: {last}"
            + (f" ({ended.stderr})" if ended.stderr else "")
            + f"; it was removed, nothing was left at {prefix}",
            "report it with the command line used",
        )
    # the details name the staging directory where the environment ran; it is PREFIX from now on
    return [r["detail"].replace(str(staging), str(prefix)) for r in results if r.get("check") != "done"]


def _not_checked(target, prefix: Path) -> list[str]:
    if not target.has_gpu or gpu_checked(target):
        return []
    return [
        "the GPU was not checked: CONDA_OVERRIDE_CUDA states the driver, so this machine may have no "
        f"GPU; run `solver doctor --prefix {prefix}` on the GPU machine"
    ]


def gpu_checked(target) -> bool:
    """Whether the check needs torch to use a GPU: when one was planned, and found on this machine
    rather than stated by CONDA_OVERRIDE_CUDA (an environment made on a cluster's login node for
    its GPU nodes installs without a GPU in sight)."""
    return target.has_gpu and target.source != "override"


def _put_in_place(staging: Path, prefix: Path, state: str) -> None:
    """Rename the checked environment to PREFIX. A replaced environment is moved aside first and
    deleted only after the rename; Ctrl-C waits until the renames are done."""
    now = _state_now(prefix, state)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
    aside = None
    try:
        if now == "empty":
            prefix.rmdir()  # refuses if something arrived meanwhile
        elif now == "replace":
            aside = Path(tempfile.mkdtemp(prefix=f".{prefix.name}.replaced-", dir=prefix.parent))
            os.replace(prefix, aside / "env")
        try:
            os.rename(staging, prefix)
        except OSError:
            if aside is not None:
                os.replace(aside / "env", prefix)  # put the old environment back
                _remove(aside)
            raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if aside is not None:
        _remove(aside)


def _state_now(prefix: Path, planned: str) -> str:
    """PREFIX's state again, just before the rename: what was there may have changed meanwhile."""
    try:
        now = prefix_state(prefix, force=planned == "replace")
    except UsageError as exc:
        now = str(exc)
    if now in ("new", "empty") and planned in ("new", "empty") or now == planned:
        return now
    raise SolverError(
        f"{prefix} changed while the environment was installed ({now}); the new environment was "
        "removed and what is there was left alone",
        "run the command again",
    )


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _print_json(document: dict) -> None:
    from solver.output import write_stdout

    write_stdout(json.dumps(document, indent=2) + "\n")
