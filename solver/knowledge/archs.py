"""Compute capabilities a binary carries (SASS per arch, one PTX), and whether a GPU runs it."""

from __future__ import annotations

from dataclasses import dataclass

from solver.knowledge._fields import KnowledgeError, need, version_str
from solver.vocabulary import parse_version


@dataclass(frozen=True)
class ArchList:
    """Compute capabilities a binary carries: SASS per arch, plus PTX of one arch (or None)."""

    sass: tuple[str, ...]
    ptx: str | None

    def describe(self) -> str:
        return ";".join(self.sass) + (f"+PTX({self.ptx})" if self.ptx else "")


def arch_coverage(compute_capability: str, archs: ArchList, tegra: bool = False) -> str | None:
    """How a GPU of this compute capability runs a binary with these archs.

    'sass': SASS of the same major with an equal or lower minor exists (runs natively; on a
    Tegra GPU only SASS of the exact compute capability counts); 'ptx': only PTX of a lower or
    equal arch exists (the driver JIT-compiles it, which needs a driver at least as new as the
    toolkit that built it); None: the binary cannot run.
    """
    cc = parse_version(compute_capability)
    for sass in archs.sass:
        arch = parse_version(sass)
        if arch == cc or (not tegra and arch[0] == cc[0] and arch[1] <= cc[1]):
            return "sass"
    if archs.ptx and parse_version(archs.ptx) <= cc:
        return "ptx"
    return None


def parse_arch_list(raw: dict, where: str) -> ArchList:
    """{sass: [...ascending], ptx: X.Y} -> ArchList."""
    sass = tuple(version_str(a, f"{where}.sass") for a in need(raw, "sass", where))
    if list(sass) != sorted(sass, key=parse_version):
        raise KnowledgeError(f"{where}.sass: archs must be in ascending order")
    ptx = raw.get("ptx")
    return ArchList(sass=sass, ptx=version_str(ptx, f"{where}.ptx") if ptx is not None else None)
