"""Building ops-src's C++ for x86_64 Windows with mingw-w64, and running Windows programs under wine.

Sources are found by globbing ops-src/csrc, so new files are picked up without editing this
module. A source that includes no torch header, directly or through the project's own headers,
is torch-free: compiled without torch's include path and linkable into a plain program (every
kernel under csrc/cpu/ must be one, as kernels.h promises). The others are the binding layer,
compiled against torch's stable headers.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OPS_SRC = REPO / "ops-src"
CSRC = OPS_SRC / "csrc"
HERE = Path(__file__).resolve().parent

MINGW_CXX = "x86_64-w64-mingw32-g++"
MINGW_PREFIX = "x86_64-w64-mingw32-"
INSTALL_HINT = (
    "on Debian: apt-get install --no-install-recommends g++-mingw-w64-x86-64 wine64, which "
    "tests/run.sh runs when run as root"
)

# setup.py's code generation for gcc (-ffp-contract=off keeps the float results bitwise
# comparable), plus the warnings that matter on Windows: -Wconversion reports an int64_t stored
# in a `long` (32 bits under LLP64) and -Wpedantic GNU extensions that MSVC lacks.
CODEGEN = ["-std=c++17", "-O3", "-ffp-contract=off"]
WARNINGS = ["-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Werror"]
# No libstdc++/libgcc DLL next to the program: it needs only the system's DLLs, as an MSVC
# build needs only the VC runtime.
STATIC_RUNTIME = ["-static-libgcc", "-static-libstdc++"]

# DLLs every Windows program may import: the kernel and the C runtime (msvcrt for Debian's
# mingw-w64, the UCRT for a UCRT toolchain).
SYSTEM_DLLS = {"kernel32.dll", "msvcrt.dll", "ucrtbase.dll"}


def is_system_dll(name: str) -> bool:
    lowered = name.lower()
    return lowered in SYSTEM_DLLS or lowered.startswith("api-ms-win-crt-")


TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*<(torch|ATen|c10)/", re.M)
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def includes_torch(source: Path, seen: set[Path] | None = None) -> bool:
    """Whether `source` includes a torch header itself or through a header of ops-src."""
    seen = set() if seen is None else seen
    if source in seen:
        return False
    seen.add(source)
    text = source.read_text(encoding="utf-8", errors="replace")
    if TORCH_INCLUDE.search(text):
        return True
    for name in LOCAL_INCLUDE.findall(text):
        for base in (source.parent, CSRC):
            header = (base / name).resolve()
            if header.is_file():
                if includes_torch(header, seen):
                    return True
                break
    return False


def cpp_sources() -> list[Path]:
    return sorted(CSRC.rglob("*.cpp"))


def torch_free_sources() -> list[Path]:
    return [p for p in cpp_sources() if not includes_torch(p)]


def binding_sources() -> list[Path]:
    return [p for p in cpp_sources() if includes_torch(p)]


def kernel_sources() -> list[Path]:
    return [p for p in cpp_sources() if (CSRC / "cpu") in p.parents]


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def torch_include() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    include = Path(spec.origin).parent / "include"
    return include if include.is_dir() else None


def torch_target_defines() -> list[str]:
    """The macros setup.py defines for the binding (TORCH_TARGET_VERSION, Py_LIMITED_API)."""
    text = (OPS_SRC / "setup.py").read_text()
    major, minor = re.search(r"TORCH_TARGET = \((\d+), (\d+)\)", text).groups()
    limited = re.search(r'PY_LIMITED_API = "(0x[0-9A-Fa-f]+)"', text).group(1)
    return [
        f"-DTORCH_TARGET_VERSION=0x{int(major):02x}{int(minor):02x}000000000000",
        f"-DPy_LIMITED_API={limited}",
    ]


def find_wine() -> str | None:
    """The 64-bit wine loader: `wine`/`wine64` on PATH, or Debian's wine64 package's loader
    (which that package alone does not put on PATH)."""
    for name in ("wine64", "wine"):
        found = shutil.which(name)
        if found:
            return found
    for candidate in ("/usr/lib/wine/wine64", "/usr/lib/x86_64-linux-gnu/wine/wine64"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def find_wineserver(wine: str) -> str | None:
    for candidate in (
        Path(wine).with_name("wineserver"),
        Path("/usr/lib/wine/wineserver64"),
        Path("/usr/lib/wine/wineserver"),
    ):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("wineserver")


@dataclass
class Compiled:
    source: Path
    obj: Path
    result: subprocess.CompletedProcess

    @property
    def ok(self) -> bool:
        return self.result.returncode == 0

    def log(self) -> str:
        return f"{' '.join(self.result.args)}\n{self.result.stdout}{self.result.stderr}"


def compile_cxx(cxx: str, source: Path, out_dir: Path, flags: list[str]) -> Compiled:
    """Compiles one source into out_dir (object named after its path under the repo)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    obj = out_dir / (relative(source).replace("/", "__") + ".o")
    cmd = [cxx, *CODEGEN, *WARNINGS, *flags, "-c", str(source), "-o", str(obj)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return Compiled(source, obj, result)


def objects_or_fail(compiled: dict[Path, Compiled], what: str) -> list[Path]:
    failed = [relative(c.source) for c in compiled.values() if not c.ok]
    if failed:
        pytest.fail(f"{what} did not compile for Windows: {', '.join(failed)} (see their compile tests)")
    return [c.obj for c in compiled.values()]


def torch_free_flags() -> list[str]:
    return [f"-I{CSRC}"]


def binding_flags(include: Path) -> list[str]:
    # torch's headers are -isystem: their own warnings are not ours to fix.
    return [
        f"-I{CSRC}",
        "-isystem",
        str(include),
        "-isystem",
        str(include / "torch" / "csrc" / "api" / "include"),
        *torch_target_defines(),
    ]


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kwargs)


def imported_dlls(binary: Path) -> dict[str, list[str]]:
    """The DLLs a PE binary imports and the symbols it takes from each (objdump -p)."""
    out = run([MINGW_PREFIX + "objdump", "-p", binary])
    out.check_returncode()
    imports: dict[str, list[str]] = {}
    current = None
    for line in out.stdout.splitlines():
        m = re.match(r"\s*DLL Name: (\S+)", line)
        if m:
            current = imports.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*[0-9a-f]+\s+\d+\s+(\S+)$", line)
        if current is not None and m:
            current.append(m.group(1))
        elif not line.strip():
            current = None
    return imports


def import_library(symbols: list[str], dll: str, out_dir: Path) -> Path:
    """An import library for `dll` exporting `symbols` (dlltool from a .def file)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(dll).stem
    definition = out_dir / f"{stem}.def"
    definition.write_text(f"LIBRARY {dll}\nEXPORTS\n" + "".join(f"  {s}\n" for s in symbols))
    lib = out_dir / f"lib{stem}.dll.a"
    run(
        [MINGW_PREFIX + "dlltool", "--def", definition, "--dllname", dll, "--output-lib", lib]
    ).check_returncode()
    return lib


class Wine:
    """Runs Windows programs in one wine prefix. Creating the prefix takes 5-15 s, mostly waiting,
    so it starts in the background when this object is made and runs overlap the compiles."""

    def __init__(self, loader: str, prefix: Path):
        self.loader = loader
        self.server = find_wineserver(loader)
        self.env = {
            **os.environ,
            "WINEPREFIX": str(prefix),
            "WINEDEBUG": "-all",
            # no Mono/Gecko installers while the prefix is created
            "WINEDLLOVERRIDES": "mscoree,mshtml=",
        }
        self.env.pop("DISPLAY", None)
        self.env.pop("POINTOPS_CPU_FPS_PATH", None)
        if self.server:
            # One server for the whole session (it exits after 30 s idle even if stop() never
            # runs), instead of a server start of about 2 s per program run.
            subprocess.run(
                [self.server, "-p30"],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
        self._boot = subprocess.Popen(
            [loader, "wineboot", "--init"],
            env=self.env,
            cwd=prefix,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def run(
        self, exe: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300
    ) -> subprocess.CompletedProcess:
        """Runs exe; `env` adds variables (wine passes the environment on to the program)."""
        self._boot.wait(timeout=300)
        result = subprocess.run(
            [self.loader, str(exe), *args],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=timeout,
        )
        # msvcrt writes text-mode stdout: \r\n line ends
        result.stdout = result.stdout.replace("\r\n", "\n")
        return result

    def stop(self) -> None:
        if self._boot.poll() is None:
            self._boot.kill()
            self._boot.wait()
        if self.server:
            subprocess.run(
                [self.server, "-k"],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
