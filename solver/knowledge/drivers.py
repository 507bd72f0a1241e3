"""drivers.yaml: NVIDIA driver branches, the highest CUDA each runs, and the minimum drivers for
CUDA minor-version compatibility. Linux and Windows builds of a branch are numbered apart, so build
numbers are compared within one OS only; a driver's branch is the greatest branch <= its first
component on both."""

from __future__ import annotations

from dataclasses import dataclass

from solver.knowledge._fields import KnowledgeError, need, version_str
from solver.knowledge.toolkits import Toolkit
from solver.vocabulary import parse_version


@dataclass(frozen=True)
class DriverBranch:
    branch: int
    max_cuda: str
    linux_first: str


@dataclass(frozen=True)
class DriverTable:
    branches: tuple[DriverBranch, ...]  # ascending
    mvc: dict[int, dict[str, str]]  # CUDA major -> os -> oldest driver for minor-version compatibility

    def branch_of(self, driver: str) -> DriverBranch | None:
        """Branch of a Linux (550.54.14) or Windows (566.03) driver version; None if older than all.

        Desktop and server drivers only: a Jetson's driver (540.4.0 on JetPack 6) is not a
        branch (see solver.knowledge.jetson).
        """
        first = parse_version(driver)[0]
        found = None
        for branch in self.branches:
            if branch.branch <= first:
                found = branch
        return found

    def branch_numbered(self, number: int) -> DriverBranch | None:
        """The branch called R<number>, if the table has it (550 -> R550; 540 -> None)."""
        return next((b for b in self.branches if b.branch == number), None)

    def max_cuda(self, driver: str) -> str | None:
        branch = self.branch_of(driver)
        return branch.max_cuda if branch else None

    def first_branch_for_cuda(self, cuda: str) -> DriverBranch | None:
        """The oldest branch whose driver runs toolkit `cuda` fully (12.8 -> R570)."""
        wanted = parse_version(cuda)[:2]
        return next((b for b in self.branches if parse_version(b.max_cuda)[:2] >= wanted), None)

    def mvc_min_driver(self, major: int, os_name: str) -> str | None:
        entry = self.mvc.get(int(major))
        return None if entry is None else entry["windows" if os_name == "windows" else "linux"]

    def runs_cuda(self, driver_cuda: str, cuda: str, driver: str | None, os_name: str) -> str | None:
        """Whether a driver reporting `driver_cuda` runs binaries built with toolkit `cuda`.

        'full': cuda <= driver_cuda. 'mvc': newer minor of the same major through minor-version
        compatibility (only valid when every binary carries SASS for the GPU). None: not at all.
        Pass driver=None to skip the desktop minimum-driver check (a Jetson's own driver).
        """
        have, want = parse_version(driver_cuda)[:2], parse_version(cuda)[:2]
        if want <= have:
            return "full"
        if want[0] != have[0]:
            return None
        minimum = self.mvc_min_driver(want[0], os_name)
        if minimum is None:
            return None
        if driver is not None and parse_version(driver) < parse_version(minimum):
            return None
        return "mvc"

    def first_driver_of_branch(self, number: int, os_name: str, toolkits: dict[str, Toolkit]) -> str | None:
        """The oldest driver of branch R<number> the tables know, for `--driver 550`: on Linux the
        branch's first build; on Windows the Windows minimum of the toolkit it shipped with (R550 ->
        CUDA 12.4 -> 551.61), else the bare branch ("565": any driver of it). None: no such branch."""
        branch = self.branch_numbered(number)
        if branch is None:
            return None
        if os_name != "windows":
            return branch.linux_first
        bundled = next((t for t in toolkits.values() if t.linux_min == branch.linux_first), None)
        if bundled is not None and self.branch_of(bundled.windows_min) == branch:
            return bundled.windows_min
        return str(branch.branch)


def parse_drivers(raw: dict) -> DriverTable:
    """drivers.yaml -> DriverTable (branches ascending, max_cuda growing with the branch)."""
    branches = []
    for i, item in enumerate(need(raw, "branches", "drivers.yaml")):
        where = f"drivers.yaml branches[{i}]"
        branches.append(
            DriverBranch(
                branch=int(need(item, "branch", where)),
                max_cuda=version_str(need(item, "max_cuda", where), where),
                linux_first=version_str(need(item, "linux_first", where), where),
            )
        )
    numbers = [b.branch for b in branches]
    if numbers != sorted(numbers):
        raise KnowledgeError("drivers.yaml branches: must be in ascending order")
    if [parse_version(b.max_cuda) for b in branches] != sorted(parse_version(b.max_cuda) for b in branches):
        raise KnowledgeError("drivers.yaml branches: max_cuda must grow with the branch")
    mvc = {}
    for major, item in need(raw, "minor_version_compatibility", "drivers.yaml").items():
        where = f"drivers.yaml minor_version_compatibility.{major}"
        mvc[int(major)] = {
            os_name: version_str(need(item, os_name, where), where) for os_name in ("linux", "windows")
        }
    return DriverTable(branches=tuple(branches), mvc=mvc)
