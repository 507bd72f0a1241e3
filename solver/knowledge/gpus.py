"""gpus.yaml: GPU names -> compute capability; per compute capability its family, the first CUDA
toolkit that knows it and the last driver branch that runs it; per GPU product the first drivers
that list it (min_driver) and the only platform it exists on (only_on). "Which driver does this
GPU need" is answered here.

Names are matched word by word, ignoring case, punctuation, spacing ("1080Ti" = "1080 Ti") and the
words NVIDIA, GeForce, Tesla, Quadro and Generation; the longest table name found in the given one
wins; a board suffix on a data-center model ("Tesla K40m") matches its base model; an abbreviation
is accepted when every name it could mean has one compute capability.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from solver.knowledge._fields import KnowledgeError, need, version_str
from solver.knowledge.drivers import DriverTable
from solver.knowledge.toolkits import Toolkit
from solver.vocabulary import PLATFORMS, major_minor, os_word, parse_version


@dataclass(frozen=True)
class Architecture:
    family: str
    last_branch: int | None  # newest driver branch that still runs it; None = current
    first_cuda: str | None = None  # first CUDA toolkit that knows it; None = older than every CUDA 11
    tegra: bool = False  # a Jetson GPU: no SASS compatibility across minor versions
    renamed_to: str | None = None  # the number newer CUDA versions give the same GPU


@dataclass(frozen=True)
class BranchStart:
    """Where one driver branch starts to drive a GPU product."""

    branch: int
    first: str | None  # the first build of the branch that lists the GPU ...
    none_through: str | None = None  # ... or: no build of the branch up to this one lists it

    def runs(self, driver: str) -> bool:
        if self.first is not None:
            return parse_version(driver) >= parse_version(self.first)
        return parse_version(driver) > parse_version(self.none_through)  # newer builds: not read

    def describe(self) -> str:
        if self.first is not None:
            return f"R{self.branch} from {self.first}"
        return f"no R{self.branch} build through {self.none_through}"


@dataclass(frozen=True)
class DriverFloor:
    """The drivers that drive one GPU product, where they start later than its generation's first
    branch: per OS, per branch the first build that lists it (ascending; the first is its first
    driver). A branch newer than the first and not listed drives it from its first build."""

    gpu: str  # the table name it belongs to ("NVIDIA B200")
    linux_starts: tuple[BranchStart, ...]
    windows_starts: tuple[BranchStart, ...]  # empty: NVIDIA names no Windows build
    source: str

    def starts(self, os_name: str) -> tuple[BranchStart, ...]:
        return self.windows_starts if os_name == "windows" else self.linux_starts

    def minimum(self, os_name: str) -> str | None:
        """The first driver of this OS that drives the GPU ("570.153.02"), None if none is named."""
        starts = self.starts(os_name)
        return starts[0].first if starts else None

    @property
    def linux(self) -> str | None:
        return self.minimum("linux")

    @property
    def windows(self) -> str | None:
        return self.minimum("windows")

    def first_branch(self, os_name: str) -> int:
        """The first branch that drives it; on an OS without numbers, that of the other OS."""
        starts = self.starts(os_name) or self.linux_starts or self.windows_starts
        return starts[0].branch

    def runs(self, driver: str, branch: int, os_name: str) -> bool | None:
        """Whether `driver` (of branch R<branch>) drives the GPU; None: no numbers for this OS."""
        starts = self.starts(os_name)
        if not starts:
            return None
        if branch < starts[0].branch:
            return False
        own = next((s for s in starts if s.branch == branch), None)
        return True if own is None else own.runs(driver)

    def advice(self, os_name: str) -> str:
        """'570.153.02 or later on Linux (R575 from 575.57.08)': the drivers to install."""
        starts = self.starts(os_name)
        later = "; ".join(s.describe() for s in starts[1:])
        return f"{starts[0].first} or later on {os_word(os_name)}" + (f" ({later})" if later else "")


@dataclass(frozen=True)
class GpuEntry:
    name: str
    compute_capability: str
    tokens: tuple[str, ...] = field(repr=False)
    driver_floor: DriverFloor | None = None
    only_on: str | None = None  # the one platform machines with this GPU are ("linux-aarch64")
    only_on_source: str | None = None
    words: _Words = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "words", _words(self.tokens))  # matched on every lookup


# -- name matching ------------------------------------------------------------------------------

_IGNORED_NAME_WORDS = {"nvidia", "geforce", "tesla", "quadro", "generation"}
# Data-center boards print a suffix after the model: "Tesla K40m", "K20Xm", "K40c", "A100X".
_BOARD_SUFFIX_RE = re.compile(r"^([a-z]\d{1,3})(?:xm|st|m|c|x|s|t|d)$")


def name_tokens(name: str) -> tuple[str, ...]:
    words = re.split(r"[^0-9a-z]+", name.lower())
    return tuple(w for w in words if w and w not in _IGNORED_NAME_WORDS)


@dataclass(frozen=True)
class _Words:
    """A name's words run together ("gtx1080ti") and where each word starts and ends in it, so
    that "1080Ti" matches "1080 Ti" while "K6000M" does not match "K6000"."""

    text: str
    bounds: frozenset[int]


def _words(tokens: tuple[str, ...]) -> _Words:
    bounds, at = {0}, 0
    for token in tokens:
        at += len(token)
        bounds.add(at)
    return _Words("".join(tokens), frozenset(bounds))


def _appears_in(needle: _Words, haystack: _Words) -> bool:
    """Whether `needle` runs through `haystack` from one of its word bounds to another."""
    if not needle.text:
        return False
    start = haystack.text.find(needle.text)
    while start != -1:
        if start in haystack.bounds and start + len(needle.text) in haystack.bounds:
            return True
        start = haystack.text.find(needle.text, start + 1)
    return False


# -- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuTable:
    architectures: dict[str, Architecture]
    entries: tuple[GpuEntry, ...]

    def lookup(self, name: str) -> GpuEntry | None:
        """The table entry for a GPU name as nvidia-smi / NVML print it or as a user types it."""
        tokens = name_tokens(name)
        if not tokens:
            return None
        best = self._longest_entry_in(_words(tokens))
        if best is None:  # "Tesla K40m" -> "K40"
            stripped = tuple(_BOARD_SUFFIX_RE.sub(r"\1", t) for t in tokens)
            if stripped != tokens:
                best = self._longest_entry_in(_words(stripped))
        if best is not None:
            return best
        # A shortened name ("RTX PRO 6000", "Orin") is fine when every entry it abbreviates agrees.
        given = _words(tokens)
        partial = [entry for entry in self.entries if _appears_in(given, entry.words)]
        if partial and len({entry.compute_capability for entry in partial}) == 1:
            return partial[0]
        return None

    def _longest_entry_in(self, given: _Words) -> GpuEntry | None:
        found = [entry for entry in self.entries if _appears_in(entry.words, given)]
        return max(found, key=lambda e: (len(e.words.text), len(e.tokens)), default=None)

    def architecture(self, compute_capability: str) -> Architecture | None:
        """Family and driver support of a compute capability (an unknown minor falls back to its major)."""
        key = major_minor(compute_capability)
        if key in self.architectures:
            return self.architectures[key]
        major = parse_version(key)[0]
        same_major = [k for k in self.architectures if parse_version(k)[0] == major]
        return self.architectures[max(same_major, key=parse_version)] if same_major else None

    def _of_compute_capability(self, compute_capability: str) -> list[GpuEntry]:
        key = major_minor(compute_capability)
        return [e for e in self.entries if e.compute_capability == key]

    def product(self, name: str | None, compute_capability: str | None) -> GpuEntry | None:
        """The entry of a named GPU, if the name is a known product of that compute capability."""
        entry = self.lookup(name) if name else None
        if entry is None or (compute_capability and entry.compute_capability != compute_capability):
            return None
        return entry

    def driver_floor(self, name: str | None, compute_capability: str | None) -> DriverFloor | None:
        """The first drivers of a GPU product; for a compute capability alone (or an unknown name),
        the floor every known product of it shares (10.3: B300 and GB300), else None."""
        entry = self.product(name, compute_capability)
        if entry is not None:
            return entry.driver_floor
        if not compute_capability:
            return None
        products = self._of_compute_capability(compute_capability)
        floors = {
            (e.driver_floor.linux_starts, e.driver_floor.windows_starts) for e in products if e.driver_floor
        }
        if not products or len(floors) != 1 or any(e.driver_floor is None for e in products):
            return None
        shared = products[0].driver_floor
        names = " and ".join(e.name for e in products)
        return DriverFloor(names, shared.linux_starts, shared.windows_starts, shared.source)

    def only_platform(self, name: str | None, compute_capability: str | None) -> GpuEntry | None:
        """The named product's entry when it exists on one platform only (GB10: linux-aarch64). A
        compute capability alone is not held to it: a product of it may come on another platform."""
        entry = self.product(name, compute_capability)
        return entry if entry is not None and entry.only_on else None


# -- parsing ------------------------------------------------------------------------------------


def _branch_start(value, branch: int, where: str) -> BranchStart:
    if isinstance(value, dict):
        through = version_str(need(value, "none_through", where), where)
        return BranchStart(branch, None, through)
    build = version_str(value, where)
    if len(parse_version(build)) < 2:
        raise KnowledgeError(f"{where}: {build!r} is a branch, not a driver build")
    return BranchStart(branch, build)


def _parse_starts(value, drivers: DriverTable, where: str) -> tuple[BranchStart, ...]:
    """ "570.123.07" (one branch), or {570: "570.153.02", 575: "575.57.08", 590: {none_through: ...}}."""
    if not isinstance(value, dict):
        value = {parse_version(version_str(value, where))[0]: value}
    starts = []
    for key, item in value.items():
        at = f"{where}.{key}"
        start = _branch_start(item, int(key), at)
        if drivers.branch_numbered(start.branch) is None:
            raise KnowledgeError(f"{at}: R{key} is not a branch in drivers.yaml")
        build = start.first or start.none_through
        branch = drivers.branch_of(build)
        if branch is None or branch.branch != start.branch:
            raise KnowledgeError(f"{at}: {build} is not an R{key} driver")
        starts.append(start)
    if [s.branch for s in starts] != sorted(s.branch for s in starts):
        raise KnowledgeError(f"{where}: branches must be in ascending order")
    if starts[0].first is None:
        raise KnowledgeError(f"{where}: the first branch must name the first build that lists the GPU")
    return tuple(starts)


def _source(item: dict, sources: dict[str, str], where: str) -> str:
    """An entry's src: a key of the file's `sources` stands for the citation it names."""
    src = str(need(item, "src", where))
    return sources.get(src, src)


def _parse_driver_floor(
    item, name: str, cc: str, arch: Architecture, drivers: DriverTable, sources: dict[str, str], where: str
) -> DriverFloor:
    """min_driver of a GPU entry: {linux: ..., windows: ..., src: ...}; at least the generation's first branch."""
    where = f"{where}.min_driver"
    source = _source(item, sources, where)
    starts = {
        os_name: _parse_starts(item[os_name], drivers, f"{where}.{os_name}") if item.get(os_name) else ()
        for os_name in ("linux", "windows")
    }
    if not starts["linux"] and not starts["windows"]:
        raise KnowledgeError(f"{where}: give linux or windows")
    first = drivers.first_branch_for_cuda(arch.first_cuda) if arch.first_cuda else None
    for os_name, os_starts in starts.items():
        if first is not None and os_starts and os_starts[0].branch < first.branch:
            raise KnowledgeError(
                f"{where}.{os_name}: {os_starts[0].first} is older than R{first.branch}, the first "
                f"branch of compute capability {cc} (CUDA {arch.first_cuda})"
            )
    return DriverFloor(
        gpu=name, linux_starts=starts["linux"], windows_starts=starts["windows"], source=source
    )


def _parse_architectures(raw: dict, toolkits: dict[str, Toolkit]) -> dict[str, Architecture]:
    architectures = {}
    for cc, item in need(raw, "architectures", "gpus.yaml").items():
        where = f"gpus.yaml architectures.{cc}"
        last = item.get("last_branch")
        first_cuda = item.get("first_cuda")
        if (
            first_cuda is not None
            and parse_version(version_str(first_cuda, where)) >= (12, 0)
            and str(first_cuda) not in toolkits
        ):
            raise KnowledgeError(f"{where}: first_cuda {first_cuda} has no entry in toolkits.yaml")
        architectures[version_str(cc, where)] = Architecture(
            family=str(need(item, "family", where)),
            last_branch=int(last) if last is not None else None,
            first_cuda=str(first_cuda) if first_cuda is not None else None,
            tegra=bool(item.get("tegra", False)),
            renamed_to=str(item["renamed_to"]) if item.get("renamed_to") else None,
        )
    for cc, arch in architectures.items():
        if arch.renamed_to is not None and arch.renamed_to not in architectures:
            raise KnowledgeError(f"gpus.yaml architectures.{cc}: renamed_to {arch.renamed_to} has no entry")
    return architectures


def _parse_only_on(item, sources: dict[str, str], where: str) -> tuple[str | None, str | None]:
    if item is None:
        return None, None
    where = f"{where}.only_on"
    platform = str(need(item, "platform", where))
    if platform not in PLATFORMS:
        raise KnowledgeError(f"{where}: unknown platform {platform!r}")
    return platform, _source(item, sources, where)


def _parse_entry(
    item, i: int, architectures: dict[str, Architecture], drivers: DriverTable, sources: dict[str, str]
) -> GpuEntry:
    where = f"gpus.yaml gpus[{i}]"
    name = str(need(item, "name", where))
    cc = version_str(need(item, "cc", where), where)
    if cc not in architectures:
        raise KnowledgeError(f"{where}: compute capability {cc} of {name!r} has no entry in architectures")
    tokens = name_tokens(name)
    if not tokens:
        raise KnowledgeError(f"{where}: {name!r} has no word left to match")
    floor = (
        _parse_driver_floor(item["min_driver"], name, cc, architectures[cc], drivers, sources, where)
        if item.get("min_driver") is not None
        else None
    )
    only_on, only_on_source = _parse_only_on(item.get("only_on"), sources, where)
    return GpuEntry(name, cc, tokens, floor, only_on, only_on_source)


def parse_gpus(raw: dict, toolkits: dict[str, Toolkit], drivers: DriverTable) -> GpuTable:
    """gpus.yaml -> GpuTable; two names that read the same must have one compute capability."""
    architectures = _parse_architectures(raw, toolkits)
    sources = {str(key): " ".join(str(text).split()) for key, text in (raw.get("sources") or {}).items()}
    entries = [
        _parse_entry(item, i, architectures, drivers, sources)
        for i, item in enumerate(need(raw, "gpus", "gpus.yaml"))
    ]
    seen: dict[str, GpuEntry] = {}
    for entry in entries:
        other = seen.setdefault(entry.words.text, entry)
        if other is not entry and other.compute_capability != entry.compute_capability:
            raise KnowledgeError(
                f"gpus.yaml gpus: {other.name!r} and {entry.name!r} match the same words "
                "with different compute capabilities"
            )
    return GpuTable(architectures=architectures, entries=tuple(entries))
