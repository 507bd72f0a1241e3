"""`solver make-env`: turn a GPU and a driver into a consistent env.yml.

detect -> target -> plan -> solve -> verify -> emit. Exit status: 0 an environment was written
(verified by a solve, or a plan alone when the channels cannot be reached / --offline);
1 no consistent environment exists (the message names the cause and the fix); 2 bad flags.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

_solved = False  # a py-rattler solve ran: leave through os._exit (py-rattler may crash at exit)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print a conda environment file (CEP 24) whose python, pytorch build, cuda-version and "
                          "pointops build fit the GPU and driver; explanations go to stderr.")
    parser.add_argument("--gpu", default="auto", metavar="GPU",
                        help="auto (detect: NVML, then nvidia-smi), none (CPU), a GPU name ('RTX 4090'), a compute "
                             "capability (8.6 or sm_86), or 'NAME:8.6' for a GPU the table lacks (default: auto)")
    parser.add_argument("--driver", metavar="VERSION",
                        help="NVIDIA driver version of the target, Linux (550.54.14) or Windows (566.03) style")
    parser.add_argument("--platform", metavar="SUBDIR",
                        help="linux-64, linux-aarch64, win-64, osx-64 or osx-arm64 (default: this machine)")
    parser.add_argument("--python", metavar="X.Y", help="pin the Python version")
    parser.add_argument("--torch", metavar="X.Y", help="pin the pytorch version")
    parser.add_argument("--cuda", metavar="X.Y", help="pin the CUDA version (cuda-version)")
    parser.add_argument("--channel", action="append", metavar="CHANNEL",
                        help="channel name, URL or directory; repeatable, in priority order "
                             "(default: pointops, then conda-forge)")
    parser.add_argument("--name", default="pointops", help="environment name (default: pointops)")
    parser.add_argument("--offline", action="store_true",
                        help="do not contact the channels: emit the plan alone, marked as not verified")
    parser.add_argument("-o", "--output", metavar="FILE", help="write env.yml to FILE (atomically) instead of stdout")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of env.yml on stdout")
    parser.add_argument("--explicit", metavar="FILE", help="also write a CEP 23 explicit file (needs a solve)")
    parser.add_argument("--lock", metavar="FILE", help="also write a rattler lock file (needs a solve)")


def _err(message: str) -> None:
    print(f"solver make-env: {message}", file=sys.stderr)


_XY = re.compile(r"^\d+\.\d+$")
_XYZ = re.compile(r"^\d+\.\d+(\.\d+)?$")


def _check_flags(args) -> str | None:
    if args.python is not None and not _XY.match(args.python):
        return f"--python {args.python!r} is not a version; expected X.Y such as 3.12."
    if args.torch is not None and not _XYZ.match(args.torch):
        return f"--torch {args.torch!r} is not a version; expected X.Y such as 2.13."
    if args.cuda is not None and not _XY.match(args.cuda):
        return f"--cuda {args.cuda!r} is not a version; expected X.Y such as 12.9."
    if args.offline and (args.explicit or args.lock):
        return "--explicit and --lock record a real solve; drop --offline (or drop them)."
    if not args.name.strip() or any(c in args.name for c in "/\\: #"):
        return f"--name {args.name!r} is not a usable environment name; use letters, digits, '-', '_' or '.'."
    for channel in args.channel or []:
        if not channel.strip():
            return "--channel needs a value: a channel name, URL or directory."
    return None


def make_env(args) -> int:
    """The whole command; returns the exit status."""
    global _solved
    from solver.knowledge import KnowledgeError, load
    from solver.plan import PlanError, make_plan
    from solver.target import TargetError, build_target

    problem = _check_flags(args)
    if problem:
        _err(problem)
        return 2
    channels = list(args.channel or ["pointops", "conda-forge"])
    try:
        kb = load()
    except KnowledgeError as exc:
        _err(f"the solver's knowledge files are broken: {exc}. Reinstall pointops-solver.")
        return 1

    target = plan = None
    try:
        target = build_target(kb, gpu=args.gpu, driver=args.driver, platform=args.platform)
        plan = make_plan(kb, target, python=args.python, torch=args.torch, cuda=args.cuda)
    except (TargetError, PlanError) as exc:
        _err(str(exc))
        if args.json:
            from solver.emit import json_document

            print(json.dumps(json_document(None, target, channels, False, "no plan", [], [str(exc)]), indent=2))
        return exc.exit_code

    verified, records, solve_result = False, None, None
    warnings = list(plan.warnings)
    if args.offline:
        status = "--offline (the plan follows the solver's knowledge tables)"
    else:
        from solver.solve import ChannelError, SolveError, solve_plan

        _solved = True
        try:
            solve_result = solve_plan(plan, channels)
        except ChannelError as exc:
            status = f"channels not reachable ({exc}); the plan follows the solver's knowledge tables"
            _err(f"not verified: {exc}")
            warnings.append(f"not verified by a solve: {exc}")
        except SolveError as exc:
            _err(str(exc))
            if args.json:
                from solver.emit import json_document

                print(json.dumps(json_document(plan, None, channels, False, "solve failed", warnings, [str(exc)]),
                                 indent=2))
            return 1
        else:
            from solver.verify import verify

            records = solve_result.records
            problems = verify(kb, plan, records)
            if problems:
                message = "the solve broke the plan's rules: " + "; ".join(problems)
                _err(message)
                if args.json:
                    from solver.emit import json_document

                    print(json.dumps(json_document(plan, None, channels, False, "verification failed", warnings,
                                                   [message]), indent=2))
                return 1
            verified = True
            shown = [v.rsplit("=", 1)[0] for v in solve_result.virtual_packages
                     if not v.startswith(("__unix", "__archspec"))]
            status = f"solved against {', '.join(channels)} with {' '.join(shown)}"

    return _emit(args, kb, plan, channels, verified, status, warnings, records, solve_result)


def _emit(args, kb, plan, channels, verified, status, warnings, records, solve_result) -> int:
    from solver.emit import env_yml, json_document, write_atomic

    solved = None
    if records is not None:
        wanted = ("python", "pytorch", "libtorch", "cuda-version", "pointops")
        solved = [f"{r.name.normalized} {r.version} {str(r.build)}" for r in sorted(records, key=lambda r: r.name.normalized)
                  if r.name.normalized in wanted]
    from solver.solve import channel_for_env_file

    text = env_yml(plan, [channel_for_env_file(c) for c in channels], args.name, verified, status, solved)
    for reason in plan.reasons:
        _err(reason)
    for warning in plan.warnings:
        _err(f"warning: {warning}")

    rc = 0
    try:
        if args.output:
            write_atomic(args.output, text)
            _err(f"wrote {args.output}")
        if records is not None and args.explicit:
            from solver.emit import explicit_file

            write_atomic(args.explicit, explicit_file(records, plan.target.platform))
            _err(f"wrote {args.explicit}")
        if records is not None and args.lock:
            from solver.emit import write_lock

            write_lock(args.lock, records, plan.target.platform, solve_result.channels,
                       solve_result.virtual_packages)
            _err(f"wrote {args.lock}")
    except OSError as exc:
        _err(f"cannot write {exc.filename}: {exc.strerror}. Choose a writable path.")
        return 1
    if records is None and (args.explicit or args.lock):
        _err("--explicit/--lock not written: they need a solve, and the channels could not be reached.")
        rc = 1

    if args.json:
        print(json.dumps(json_document(plan, None, channels, verified, status, warnings, [], records), indent=2))
    elif not args.output:
        sys.stdout.write(text)
    return rc


def run(args) -> int:
    try:
        rc = make_env(args)
    except KeyboardInterrupt:
        rc = 130
    except Exception as exc:  # a bug: say so in one line instead of a traceback
        _err(f"internal error ({type(exc).__name__}: {exc}); please report it with the command line used.")
        rc = 1
    if _solved:
        # py-rattler can crash in a background thread while the interpreter exits: flush and leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc
