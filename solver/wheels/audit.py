"""Check a built pointops wheel against what the knowledge says it must be.

    audit_wheel(path) -> list of problems (empty: the wheel is fit to publish)

A pure-Python wheel of the knowledge's `pure_wheels:` (pointnet2_ops) has its own rules
(solver/wheels/pure.py: py3-none-any, its extras, no binary); the rules below are the binary ones.

- the file name: a known distribution, cp310-abi3 (one wheel for every CPython >= 3.10), a
  platform tag of a platform that distribution is built for;
- METADATA: the same name and version, `torch>=2.10` required, Python >= 3.10;
- contents: the extension library, the `pointops` and `pointnet2_batch_cuda` modules, and no copy
  of libtorch, libc10, libpython or a shared CUDA runtime (torch's come from the user's torch;
  the CUDA runtime is linked statically);
- _build_info.json: a CUDA build of the distribution's CUDA version with exactly the knowledge's
  arch list, or a CPU build for `pointops`;
- the Linux library: needs libtorch_cpu from outside and nothing of CUDA's (ELF DT_NEEDED);
- abi3audit: no symbol outside Python 3.10's limited API.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from solver.errors import SolverError
from solver.knowledge import load
from solver.wheels.naming import ABI_TAG, PLATFORM_TAGS, PYTHON_TAG, file_name_of, parse_wheel_name
from solver.wheels.pure import audit_pure_wheel, pure_entry

# files no pointops wheel may carry: they must come from the user's torch, Python or driver
_FORBIDDEN = re.compile(
    r"(^|/)(lib)?(torch|torch_cpu|torch_cuda|c10|c10_cuda|python3?\d*|cudart)[^/]*\.(so|dll|dylib)"
)
_EXTENSION = re.compile(r"^pointops/_C\.(abi3\.so|pyd)$")


def _platforms_of(name: str) -> dict[str, object]:
    """conda platform -> PointopsWheel for the distribution whose file name is `name`."""
    kb = load()
    found = {}
    for platform in PLATFORM_TAGS:
        for wheel in kb.pointops_wheels(platform):
            if file_name_of(wheel.distribution) == name:
                found[platform] = wheel
    return found


def _check_name(path: Path, problems: list[str]):
    parsed = parse_wheel_name(path.name)
    if (parsed.python, parsed.abi) != (PYTHON_TAG, ABI_TAG):
        problems.append(f"tags {parsed.python}-{parsed.abi}, expected {PYTHON_TAG}-{ABI_TAG}")
    entries = _platforms_of(parsed.distribution)
    if not entries:
        problems.append(f"{parsed.distribution} is not a pointops distribution")
        return parsed, None
    # a platform tag may be compound (manylinux_2_17_x86_64.manylinux2014_x86_64): any part may match
    tags = parsed.platform.split(".")
    for platform, wheel in entries.items():
        if any(PLATFORM_TAGS[platform].match(tag) for tag in tags):
            return parsed, wheel
    problems.append(f"platform tag {parsed.platform} is not one of {parsed.distribution}'s platforms")
    return parsed, None


def _check_metadata(zf: zipfile.ZipFile, parsed, wheel, problems: list[str]) -> None:
    try:
        text = zf.read(f"{parsed.distribution}-{parsed.version}.dist-info/METADATA").decode("utf-8")
    except KeyError:
        problems.append("no METADATA in the .dist-info folder named after the file")
        return
    meta = Parser().parsestr(text)
    if wheel and meta["Name"] != wheel.distribution:
        problems.append(f"METADATA Name {meta['Name']!r}, expected {wheel.distribution!r}")
    if meta["Version"] != parsed.version:
        problems.append(f"METADATA Version {meta['Version']!r}, the file name says {parsed.version!r}")
    kb = load()
    requires = [r.replace(" ", "") for r in meta.get_all("Requires-Dist") or []]
    if f"torch>={kb.pointops['torch_min']}" not in requires:
        problems.append(f"Requires-Dist lacks torch>={kb.pointops['torch_min']} (has {requires})")
    if (meta["Requires-Python"] or "").replace(" ", "") != f">={kb.pointops['python_min']}":
        problems.append(
            f"Requires-Python {meta['Requires-Python']!r}, expected >={kb.pointops['python_min']}"
        )


def _check_build_info(zf: zipfile.ZipFile, wheel, problems: list[str]) -> None:
    try:
        info = json.loads(zf.read("pointops/_build_info.json"))
    except KeyError:
        problems.append("no pointops/_build_info.json")
        return
    if wheel is None:
        return
    if not wheel.cuda_version:
        if info.get("cuda"):
            problems.append(f"{wheel.distribution} must be a CPU build, but it has CUDA kernels")
        return
    if not info.get("cuda") or info.get("cuda_version") != wheel.cuda_version:
        problems.append(
            f"built with CUDA {info.get('cuda_version')}, {wheel.distribution} for {wheel.platform} "
            f"is the CUDA {wheel.cuda_version} build"
        )
    if tuple(info.get("sass_archs") or ()) != wheel.archs.sass or info.get("ptx_arch") != wheel.archs.ptx:
        problems.append(
            f"archs SASS {info.get('sass_archs')} PTX {info.get('ptx_arch')}; the knowledge says "
            f"SASS {list(wheel.archs.sass)} PTX {wheel.archs.ptx}"
        )


def _needed_libraries(data: bytes) -> list[str] | None:
    """DT_NEEDED of an ELF library, or None when it is not ELF or pyelftools is missing."""
    if not data.startswith(b"\x7fELF"):
        return None
    try:
        import io

        from elftools.elf.dynamic import DynamicSection
        from elftools.elf.elffile import ELFFile
    except ImportError:
        return None
    elf = ELFFile(io.BytesIO(data))
    needed = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed += [tag.needed for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
    return needed


def _check_contents(zf: zipfile.ZipFile, problems: list[str]) -> bytes | None:
    names = zf.namelist()
    for name in names:
        if _FORBIDDEN.search(name):
            problems.append(f"{name} is bundled; it must come from the user's torch, Python or driver")
    extensions = [n for n in names if _EXTENSION.match(n)]
    for module in ("pointops/__init__.py", "pointnet2_batch_cuda.py"):
        if module not in names:
            problems.append(f"{module} is missing")
    if len(extensions) != 1:
        problems.append(f"expected one extension library pointops/_C.abi3.so or .pyd, found {extensions}")
        return None
    return zf.read(extensions[0])


def _check_library(library: bytes, wheel, problems: list[str]) -> None:
    needed = _needed_libraries(library)
    if needed is None:
        return
    cuda = [n for n in needed if n.startswith(("libcudart", "libcuda.", "libtorch_cuda", "libc10_cuda"))]
    if cuda:
        problems.append(f"the library needs {cuda}; it must load under a CPU torch too (static runtime)")
    if "libtorch_cpu.so" not in needed:
        problems.append(f"the library does not link libtorch_cpu.so (needs {needed})")


def _abi3audit(path: Path, problems: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "abi3audit", "--strict", "--assume-minimum-abi3", "3.10", str(path)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        detail = " ".join((result.stdout + result.stderr).split())[-300:]
        problems.append(f"abi3audit failed: {detail}")


def audit_wheel(path: Path, run_abi3audit: bool = True) -> list[str]:
    """`run_abi3audit`: for a binary wheel; a pure one has no library to check."""
    try:
        named = parse_wheel_name(path.name)
    except SolverError as exc:
        return [str(exc)]
    pure = pure_entry(named.distribution)
    if pure is not None:
        return audit_pure_wheel(path, named, pure)
    problems: list[str] = []
    parsed, wheel = _check_name(path, problems)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        return [*problems, f"{path.name} cannot be read as a zip archive: {exc}"]
    with zf:
        _check_metadata(zf, parsed, wheel, problems)
        _check_build_info(zf, wheel, problems)
        library = _check_contents(zf, problems)
        if library is not None:
            _check_library(library, wheel, problems)
    if run_abi3audit:
        _abi3audit(path, problems)
    return problems
