"""Compiled point-cloud extensions against the libstdc++ the process loads with torch.

Two ways an extension breaks in a process where torch already loaded the system libstdc++:
- it carries its own copy (linked with -static-libstdc++, as some compiler wrappers do): two copies
  of the iostream and locale state in one process, and formatting an error message crashes (SIGSEGV);
- it needs a GLIBCXX_3.4.N / CXXABI_1.3.N version the loaded libstdc++ does not define (built with a
  newer compiler): the import fails with "version `GLIBCXX_3.4.32' not found".

Gathering reads the ELF headers of every shared object inside the point-cloud packages' folders
(solver.elf, no import needed) and the version definitions of the libstdc++ the probe child had
mapped after `import torch`; the check compares them.
"""

from __future__ import annotations

import re
from pathlib import Path

from solver.elf import read_elf

from .dists import DistOrigin, InstalledDist, owners, read_installed, rebuild_command
from .facts import BinaryFact, Facts, LibstdcxxFacts
from .findings import Finding, failed, info, passed

CHECK = "extensions.libstdcxx"
# top-level packages (folders) or modules (pointnet2_batch_cuda*.so) of point-cloud extensions
POINT_CLOUD_PACKAGES = (
    "pointops",
    "pointnet2_ops",
    "pointnet2_batch_cuda",
    "mmcv",
    "torch_cluster",
    "torch_scatter",
    "torch_sparse",
    "torch_points_kernels",
    "pointgroup_ops",
)
MAX_BINARIES = 200
LIBSTDCXX = "libstdc++.so.6"
# what libstdc++ itself defines and an extension that uses iostreams only references: std::ostream
# members, std::cout, the iostream initialiser
CARRIED_SYMBOL = re.compile(r"^(_ZNSo|_ZSt4cout$|_ZNSt8ios_base4Init)")
LIBSTDCXX_VERSION = re.compile(r"^(GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$")


# ---------------------------------------------------------------- gathering


def _shared_objects(site: Path) -> list[tuple[str, Path]]:
    """(package, file) for every shared object of the point-cloud packages in one site-packages."""
    found: list[tuple[str, Path]] = []
    for package in POINT_CLOUD_PACKAGES:
        folder = site / package
        files = sorted(folder.rglob("*.so")) if folder.is_dir() else []
        files += sorted(site.glob(f"{package}*.so"))
        found += [(package, f) for f in files if f.is_file()]
    return found[:MAX_BINARIES]


def describe_binary(path: Path, package: str, origin: DistOrigin | None = None) -> BinaryFact:
    elf = read_elf(path)
    carried = sorted(s for s in elf.symbols if CARRIED_SYMBOL.match(s))
    return BinaryFact(
        path=str(path),
        package=package,
        origin=origin,
        needs_libstdcxx=LIBSTDCXX in elf.needed,
        carried=carried[:5],
        exports_carried=any(s in elf.dynamic_symbols for s in carried),
        needed_versions=[v for v in elf.needed_versions.get(LIBSTDCXX, []) if LIBSTDCXX_VERSION.match(v)],
        error=elf.error,
    )


def gather_binaries(
    site_dirs: list[Path],
    installed: list[InstalledDist] | None = None,
    elsewhere: list[tuple[str, Path]] = (),
) -> list[BinaryFact]:
    """The shared objects of the point-cloud packages in these site-packages, and in `elsewhere`
    ((package, folder) of packages installed outside them: an editable mmcv's checkout).
    `installed`: read_installed() of the same folders (read here when not given), for each owner."""
    recorded = owners(read_installed(site_dirs) if installed is None else installed)
    found = [(package, path) for site in site_dirs for package, path in _shared_objects(site)]
    for package, folder in elsewhere:
        if folder.parent not in site_dirs:
            found += [(package, f) for f in sorted(folder.rglob("*.so")) if f.is_file()]
    return [describe_binary(path, package, recorded.get(path)) for package, path in found[:MAX_BINARIES]]


def gather_libstdcxx(path: str) -> LibstdcxxFacts:
    """The versions the libstdc++ at `path` (the one the probe child had mapped) defines."""
    if not path:
        return LibstdcxxFacts()
    elf = read_elf(path, symbols=False)
    versions = [v for v in elf.defined_versions if LIBSTDCXX_VERSION.match(v)]
    return LibstdcxxFacts(path=path, versions=versions, error=elf.error)


# ---------------------------------------------------------------- the check


def version_key(name: str) -> tuple[str, tuple[int, ...]]:
    match = LIBSTDCXX_VERSION.match(name)
    if not match:
        return name, ()
    return match.group(1), tuple(int(p) for p in match.group(2).split("."))


def newest(versions: list[str], family: str) -> str:
    mine = [v for v in versions if v.startswith(family + "_")]
    return max(mine, key=version_key) if mine else "none"


def missing_versions(binary: BinaryFact, provided: list[str]) -> list[str]:
    """The versions it needs that the loaded libstdc++ does not define, in the binary's order (the
    dynamic loader names the first)."""
    return list(dict.fromkeys(v for v in binary.needed_versions if v not in provided))


def compiler_for(facts: Facts) -> str:
    """The compiler whose libstdc++ the process loads: the system one, or the conda environment's."""
    loaded = facts.libstdcxx.path
    prefix = str(facts.conda.prefix) if facts.conda.prefix is not None else ""
    if prefix and loaded.startswith(prefix.rstrip("/") + "/"):
        return f"{prefix.rstrip('/')}/bin/g++"
    return "/usr/bin/g++"


def _fix(binary: BinaryFact, facts: Facts) -> str:
    from .pointops_owners import rebuild_pointops

    if binary.package == "mmcv":
        from .mmcv import libstdcxx_fix

        return libstdcxx_fix(binary, facts)
    cxx = compiler_for(facts)
    if binary.package == "pointops":
        rebuild = rebuild_pointops(facts, cxx)
        channel = "conda install pointops from the project's channel"
    else:
        origin = binary.origin or DistOrigin(binary.package, "")
        rebuild = rebuild_command(origin, cxx)
        channel = f"install a {origin.name} built by conda-forge or its own channel"
    conda_gxx = " (conda install gxx first)" if cxx != "/usr/bin/g++" else ""
    return f"rebuild it with the compiler that matches this libstdc++{conda_gxx}: {rebuild}; or {channel}"


def _who(binary: BinaryFact) -> str:
    origin = binary.origin
    return f"{binary.path} ({origin.name} {origin.version})".rstrip() if origin else binary.path


def _carried_finding(binary: BinaryFact, facts: Facts) -> Finding:
    where = "exported in its dynamic symbol table" if binary.exports_carried else "in its symbol table"
    return failed(
        CHECK,
        f"{_who(binary)} carries its own libstdc++ (linked with -static-libstdc++); beside the one torch "
        "loads, its iostreams break: text formatted wrong or a crash (SIGSEGV) when it formats a message",
        f"{LIBSTDCXX} is not in its DT_NEEDED, yet it defines {', '.join(binary.carried[:3])} ({where})",
        _fix(binary, facts),
    )


def _missing_finding(binary: BinaryFact, missing: list[str], facts: Facts) -> Finding:
    provided = facts.libstdcxx.versions
    return failed(
        CHECK,
        f"{_who(binary)} needs {', '.join(missing)}, newer than the libstdc++ this Python loads with "
        f'torch: importing it fails with "version `{missing[0]}\' not found"',
        f"{facts.libstdcxx.path} provides up to {newest(provided, 'GLIBCXX')} and {newest(provided, 'CXXABI')}",
        _fix(binary, facts),
    )


def binary_findings(binary: BinaryFact, facts: Facts) -> list[Finding]:
    found = []
    if binary.carried and not binary.needs_libstdcxx:
        found.append(_carried_finding(binary, facts))
    if facts.libstdcxx.versions:
        missing = missing_versions(binary, facts.libstdcxx.versions)
        if missing:
            found.append(_missing_finding(binary, missing, facts))
    return found


def check_libstdcxx(facts: Facts, kb) -> list[Finding]:
    readable = [b for b in facts.binaries if not b.error]
    findings = [f for b in readable for f in binary_findings(b, facts)]
    unread = [b for b in facts.binaries if b.error]
    if unread:
        findings.append(
            info(
                CHECK,
                f"{len(unread)} extension file(s) could not be read as ELF, so not checked here",
                "; ".join(f"{b.path}: {b.error}" for b in unread[:3]),
            )
        )
    if readable and not any(f.status == "fail" for f in findings):
        compared = (
            f"against {facts.libstdcxx.path} (up to {newest(facts.libstdcxx.versions, 'GLIBCXX')})"
            if facts.libstdcxx.versions
            else "(the libstdc++ torch loads is not known: versions not compared)"
        )
        findings.append(
            passed(
                CHECK,
                f"{len(readable)} point-cloud extension file(s) share the process's libstdc++",
                f"none carries its own libstdc++; versions needed {compared}",
            )
        )
    return findings
