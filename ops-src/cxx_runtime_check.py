"""setup.py's checks that the extension uses the C++ runtime of the process that loads it.

torch loads the shared libstdc++; an extension linked with its own static copy (a compiler
wrapper that adds -static-libstdc++ does this) keeps a second set of iostream globals, and the
first error message that formats a number crashes the interpreter. An extension linked against a
newer libstdc++ than the process loads fails to import. Both are caught at build time:

- before compiling, the linker's dry run (`-###`: the driver prints the link it would run and
  runs nothing) must not link libstdc++ statically;
- after linking, a child interpreter imports torch, loads the product and makes one of its ops
  raise an error whose message holds a number.

Loaded by path from setup.py (it is not part of the installed package).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

_STATIC_LINK_SIGNS = (
    re.compile(r"-static-libstdc\+\+"),
    re.compile(r"-Bstatic\s+\"?-lstdc\+\+"),
    re.compile(r"libstdc\+\+\.a\b"),
)

# Run by the child: the op's C++ check formats the index into its message (an ostream).
_LOAD_PROBE = """
import sys
import torch
torch.ops.load_library(sys.argv[1])
try:
    torch.ops.pointops.gather(torch.rand(1, 2, 5), torch.tensor([[[7]]]), None)
except RuntimeError as error:
    print(error)
"""
_PROBE_EXPECTED = "idx holds index 7"
_LOADER_WORDS = re.compile(
    r"undefined symbol|GLIBCXX|CXXABI|cannot open shared object|^\w*(OS|Import)Error: (?!Could not load)"
)


def _run(command: list[str]) -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout + out.stderr


def _libstdcxx_found_first(linker: list[str]) -> Path | None:
    """The file `-lstdc++` resolves to: as ld does, the first library directory holding
    libstdc++.so or libstdc++.a, the shared one first within a directory."""
    text = _run([*linker, "-print-search-dirs"]) or ""
    found = re.search(r"^libraries: =(.*)$", text, flags=re.MULTILINE)
    for directory in found.group(1).split(os.pathsep) if found else []:
        for name in ("libstdc++.so", "libstdc++.a"):
            if directory and (Path(directory) / name).exists():
                return Path(directory) / name
    return None


def static_libstdcxx_sign(linker: list[str]) -> str | None:
    """What shows that this linker links libstdc++ statically, or None (also when the driver
    cannot be asked): a static flag in its dry-run link line, or a libstdc++.a found before any
    libstdc++.so on its library path (a toolchain that ships only the archive)."""
    text = _run([*linker, "-###", "-shared", "-o", "probe.so", "probe.o"])
    if text is None:
        return None
    for sign in _STATIC_LINK_SIGNS:
        found = sign.search(text)
        if found:
            return found.group(0).replace('"', "")
    first = _libstdcxx_found_first(linker)
    if first is not None and first.suffix == ".a":
        return f"-lstdc++ finds {first} before any libstdc++.so"
    return None


def _compilers_on_path() -> list[str]:
    names = ["g++", "c++", "clang++"]
    seen, found = set(), []
    for directory in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin"]:
        for name in names:
            candidate = Path(directory or ".") / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                real = os.path.realpath(candidate)
                if real not in seen:
                    seen.add(real)
                    found.append(str(candidate))
    return found


def shared_runtime_compilers(exclude: str) -> list[str]:
    """Compilers on PATH (and /usr/bin) that link libstdc++ as a shared library, other than
    `exclude`."""
    excluded = os.path.realpath(shutil.which(exclude) or exclude)
    return [
        c
        for c in _compilers_on_path()
        if os.path.realpath(c) != excluded and static_libstdcxx_sign([c]) is None
    ]


def compiler_fix(program: str) -> str:
    """The fix for a compiler whose C++ runtime is not torch's: the checked alternatives."""
    alternatives = shared_runtime_compilers(program)
    if alternatives:
        return (
            f"Build with one that links the shared runtime, e.g. `CXX={alternatives[0]}` before the same "
            f"pip command (checked: {', '.join(alternatives)})."
        )
    return (
        "Build with a compiler that links the shared runtime: set CXX to the system g++ (the one "
        "torch was built to run with), or drop -static-libstdc++ from the wrapper."
    )


def static_link_message(linker: list[str], sign: str, description: str) -> str:
    program = linker[0]
    where = shutil.which(program) or program
    fix = compiler_fix(program)
    return (
        f"the C++ compiler `{' '.join(linker)}` ({where}; {description}) links libstdc++ statically "
        f"(its link line has `{sign}`). The extension would carry a private C++ runtime beside the "
        "shared one torch loads, and its first error message would crash the interpreter (SIGSEGV in "
        f"std::ostream). {fix}"
    )


def load_check_skipped() -> str | None:
    """Why the product cannot or need not be loaded here, or None."""
    if os.environ.get("POINTOPS_LOAD_CHECK", "").strip() == "0":
        return "POINTOPS_LOAD_CHECK=0"
    if os.environ.get("CONDA_BUILD_CROSS_COMPILATION", "") == "1":
        return "cross-compiling"
    if sys.platform == "win32":
        return "Windows (MSVC links its runtime as a DLL)"
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def load_problem(library: str) -> str | None:
    """Loads the built library beside torch in a child interpreter and makes it format an
    error: None when that works, else what went wrong."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", _LOAD_PROBE, library], capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return "loading it beside torch did not finish within 300 s"
    if out.returncode < 0:
        return (
            f"loading it beside torch and raising one of its errors killed the interpreter "
            f"({_signal_name(-out.returncode)}); for a library just linked, the usual cause is a C++ "
            "runtime other than the one torch uses"
        )
    if _PROBE_EXPECTED in out.stdout:
        return None
    lines = out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or ["no output"]
    # the loader's own words (undefined symbol, missing version) sit in the chained exception
    causes = [line.strip() for line in lines if _LOADER_WORDS.search(line)]
    detail = causes[0] if causes else lines[-1].strip()
    if "GLIBCXX" in detail or "CXXABI" in detail:
        return (
            f"it needs a newer libstdc++ than the one torch's process loads ({detail}): build with the "
            "compiler of the libstdc++ torch runs with (e.g. the system g++), or update that libstdc++"
        )
    if out.returncode == 0:
        return f"its error message lost its text (got {out.stdout.strip()!r}): the C++ runtime is broken"
    return f"it does not load beside torch: {detail}"
