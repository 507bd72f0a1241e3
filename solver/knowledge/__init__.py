"""The solver's knowledge: NVIDIA drivers, GPUs, CUDA toolkits, conda-forge pytorch builds and
pointops builds, read from the YAML files next to this module (each names its sources).

Stable API (also used by `solver doctor`):

    kb = load()                              # parsed and validated once, then cached
    kb.driver_max_cuda("550.54.14")          # -> "12.4" (driver branch -> highest CUDA it runs)
    kb.driver_branch("566.03")               # -> DriverBranch(branch=565, max_cuda="12.7", ...)
    kb.cuda_min_driver("12.9", "linux")      # -> "575.51.03" (full compatibility)
    kb.mvc_min_driver(12, "windows")         # -> "528.33" (minor-version compatibility)
    kb.driver_runs_cuda("12.4", "12.9", "550.54.14", "linux")  # -> "mvc" | "full" | None
    kb.gpu_compute_capability("NVIDIA GeForce RTX 4090")        # -> "8.9" (None if unknown)
    kb.architecture("6.1")                   # -> Architecture(family="Pascal", last_branch=580)
    kb.toolkit("13.0")                       # -> Toolkit(archs=(...), gcc_max=15, ...)
    kb.pytorch_releases                      # newest first: PytorchRelease(version, pythons, cuda, ...)
    kb.pointops_builds("linux-64")           # -> [PointopsBuild(variant="cpu"...), ...]
    arch_coverage("8.9", arch_list)          # -> "sass" | "ptx" | None

Versions are strings in the API ("12.9", "8.6"); `parse_version` turns them into int tuples for
comparisons. Bad data raises KnowledgeError naming the file and the field.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

KNOWLEDGE_DIR = Path(__file__).resolve().parent
PLATFORMS = ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")
_VERSION_RE = re.compile(r"^\d+(\.\d+)*$")


class KnowledgeError(ValueError):
    """A knowledge file is missing or malformed."""


def parse_version(text: str) -> tuple[int, ...]:
    """'12.9' -> (12, 9); '550.54.14' -> (550, 54, 14). Raises ValueError on anything else."""
    text = str(text).strip()
    if not _VERSION_RE.match(text):
        raise ValueError(f"not a version number: {text!r}")
    return tuple(int(part) for part in text.split("."))


def os_of_platform(platform: str) -> str:
    """'win-64' -> 'windows', 'linux-aarch64' -> 'linux', 'osx-arm64' -> 'osx'."""
    return {"win": "windows", "linux": "linux", "osx": "osx"}[platform.split("-")[0]]


@dataclass(frozen=True)
class ArchList:
    """Compute capabilities a binary carries: SASS per arch, plus PTX of one arch (or None)."""

    sass: tuple[str, ...]
    ptx: str | None

    def describe(self) -> str:
        return ";".join(self.sass) + (f"+PTX({self.ptx})" if self.ptx else "")


def arch_coverage(compute_capability: str, archs: ArchList) -> str | None:
    """How a GPU of this compute capability runs a binary with these archs.

    'sass': SASS of the same major with an equal or lower minor exists (runs natively);
    'ptx': only PTX of a lower or equal arch exists (the driver JIT-compiles it, which needs a
    driver at least as new as the toolkit that built it); None: the binary cannot run.
    """
    cc = parse_version(compute_capability)
    for sass in archs.sass:
        arch = parse_version(sass)
        if arch[0] == cc[0] and arch[1] <= cc[1]:
            return "sass"
    if archs.ptx and parse_version(archs.ptx) <= cc:
        return "ptx"
    return None


@dataclass(frozen=True)
class DriverBranch:
    branch: int
    max_cuda: str
    linux_first: str


@dataclass(frozen=True)
class Architecture:
    family: str
    last_branch: int | None  # newest driver branch that still runs it; None = current


@dataclass(frozen=True)
class Toolkit:
    version: str
    linux_min: str
    windows_min: str
    gcc_max: int
    archs: tuple[str, ...]


@dataclass(frozen=True)
class PytorchRelease:
    version: str
    pythons: tuple[str, ...]
    cuda: dict[str, dict[str, ArchList]]  # platform -> variant ("cuda129") -> archs
    cpu_platforms: tuple[str, ...]

    def variants(self, platform: str) -> list[str]:
        """CUDA variants on this platform, newest CUDA first."""
        return sorted(self.cuda.get(platform, {}), key=lambda v: parse_version(cuda_of_variant(v)), reverse=True)


@dataclass(frozen=True)
class PointopsBuild:
    platform: str
    variant: str  # "cpu", "cuda129", ...
    cuda_version: str | None
    archs: ArchList | None


@dataclass(frozen=True)
class GpuEntry:
    name: str
    compute_capability: str
    tokens: tuple[str, ...] = field(repr=False)


def cuda_of_variant(variant: str) -> str:
    """'cuda129' -> '12.9', 'cuda130' -> '13.0'."""
    digits = variant[len("cuda"):]
    return f"{digits[:-1]}.{digits[-1]}"


def variant_of_cuda(cuda: str) -> str:
    """'12.9' -> 'cuda129'."""
    major, minor = parse_version(cuda)[:2]
    return f"cuda{major}{minor}"


_IGNORED_NAME_WORDS = {"nvidia", "geforce", "tesla", "quadro"}


def _name_tokens(name: str) -> tuple[str, ...]:
    words = re.split(r"[^0-9a-z]+", name.lower())
    return tuple(w for w in words if w and w not in _IGNORED_NAME_WORDS)


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


class Knowledge:
    """All knowledge tables, parsed and validated. Build with `load()`."""

    def __init__(self, raw: dict[str, dict]):
        self.branches = _parse_branches(raw["drivers"])
        self.mvc = _parse_mvc(raw["drivers"])
        self.toolkits = _parse_toolkits(raw["toolkits"])
        self.architectures, self.gpus = _parse_gpus(raw["gpus"])
        self.pytorch_releases, self.min_glibc = _parse_pytorch(raw["pytorch"])
        self.pointops = raw["pointops_builds"]
        self._pointops_builds = _parse_pointops(raw["pointops_builds"])

    # -- drivers ---------------------------------------------------------------------------
    def driver_branch(self, driver: str) -> DriverBranch | None:
        """Branch of a Linux (550.54.14) or Windows (566.03) driver version; None if older than all."""
        first = parse_version(driver)[0]
        found = None
        for branch in self.branches:
            if branch.branch <= first:
                found = branch
        return found

    def driver_max_cuda(self, driver: str) -> str | None:
        branch = self.driver_branch(driver)
        return branch.max_cuda if branch else None

    def cuda_min_driver(self, cuda: str, os_name: str) -> str:
        toolkit = self.toolkit(cuda)
        return toolkit.windows_min if os_name == "windows" else toolkit.linux_min

    def mvc_min_driver(self, major: int, os_name: str) -> str | None:
        entry = self.mvc.get(int(major))
        return None if entry is None else entry["windows" if os_name == "windows" else "linux"]

    def driver_runs_cuda(self, driver_cuda: str, cuda: str, driver: str | None, os_name: str) -> str | None:
        """Whether a driver reporting `driver_cuda` runs binaries built with toolkit `cuda`.

        'full': cuda <= driver_cuda. 'mvc': newer minor of the same major through minor-version
        compatibility (only valid when every binary carries SASS for the GPU). None: not at all.
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

    # -- GPUs --------------------------------------------------------------------------------
    def gpu_lookup(self, name: str) -> GpuEntry | None:
        """The table entry for a GPU name as nvidia-smi prints it or as a user types it."""
        tokens = _name_tokens(name)
        if not tokens:
            return None
        best = None
        for entry in self.gpus:
            if _contains(tokens, entry.tokens) and (best is None or len(entry.tokens) > len(best.tokens)):
                best = entry
        if best is not None:
            return best
        # A shortened name ("RTX PRO 6000") is fine when every entry it abbreviates agrees.
        partial = [entry for entry in self.gpus if _contains(entry.tokens, tokens)]
        if partial and len({entry.compute_capability for entry in partial}) == 1:
            return partial[0]
        return None

    def gpu_compute_capability(self, name: str) -> str | None:
        entry = self.gpu_lookup(name)
        return entry.compute_capability if entry else None

    def architecture(self, compute_capability: str) -> Architecture | None:
        """Family and driver support end of a compute capability (falls back to its major)."""
        cc = parse_version(compute_capability)
        key = f"{cc[0]}.{cc[1] if len(cc) > 1 else 0}"
        if key in self.architectures:
            return self.architectures[key]
        same_major = [k for k in self.architectures if parse_version(k)[0] == cc[0]]
        return self.architectures[max(same_major, key=parse_version)] if same_major else None

    # -- toolkits, pytorch, pointops ---------------------------------------------------------
    def toolkit(self, cuda: str) -> Toolkit:
        key = ".".join(str(p) for p in parse_version(cuda)[:2])
        if key not in self.toolkits:
            raise KeyError(f"no knowledge of CUDA toolkit {cuda}")
        return self.toolkits[key]

    def pytorch_release(self, version: str) -> PytorchRelease | None:
        for release in self.pytorch_releases:
            if release.version == version:
                return release
        return None

    def pointops_builds(self, platform: str) -> list[PointopsBuild]:
        return [b for b in self._pointops_builds if b.platform == platform]

    def pointops_build(self, platform: str, variant: str) -> PointopsBuild | None:
        for build in self._pointops_builds:
            if build.platform == platform and build.variant == variant:
                return build
        return None


# -- parsing and validation -------------------------------------------------------------------

def _need(mapping: dict, key: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise KnowledgeError(f"{where}: missing field '{key}'")
    return mapping[key]


def _version_str(value, where: str) -> str:
    text = str(value)
    try:
        parse_version(text)
    except ValueError:
        raise KnowledgeError(f"{where}: {text!r} is not a version number") from None
    return text


def _arch_list(raw: dict, where: str) -> ArchList:
    sass = tuple(_version_str(a, f"{where}.sass") for a in _need(raw, "sass", where))
    if list(sass) != sorted(sass, key=parse_version):
        raise KnowledgeError(f"{where}.sass: archs must be in ascending order")
    ptx = raw.get("ptx")
    return ArchList(sass=sass, ptx=_version_str(ptx, f"{where}.ptx") if ptx is not None else None)


def _parse_branches(raw: dict) -> list[DriverBranch]:
    branches = []
    for i, item in enumerate(_need(raw, "branches", "drivers.yaml")):
        where = f"drivers.yaml branches[{i}]"
        branches.append(DriverBranch(
            branch=int(_need(item, "branch", where)),
            max_cuda=_version_str(_need(item, "max_cuda", where), where),
            linux_first=_version_str(_need(item, "linux_first", where), where),
        ))
    numbers = [b.branch for b in branches]
    if numbers != sorted(numbers):
        raise KnowledgeError("drivers.yaml branches: must be in ascending order")
    if [parse_version(b.max_cuda) for b in branches] != sorted(parse_version(b.max_cuda) for b in branches):
        raise KnowledgeError("drivers.yaml branches: max_cuda must grow with the branch")
    return branches


def _parse_mvc(raw: dict) -> dict[int, dict[str, str]]:
    result = {}
    for major, item in _need(raw, "minor_version_compatibility", "drivers.yaml").items():
        where = f"drivers.yaml minor_version_compatibility.{major}"
        result[int(major)] = {os_name: _version_str(_need(item, os_name, where), where)
                              for os_name in ("linux", "windows")}
    return result


def _parse_toolkits(raw: dict) -> dict[str, Toolkit]:
    result = {}
    for version, item in _need(raw, "toolkits", "toolkits.yaml").items():
        where = f"toolkits.yaml toolkits.{version}"
        archs = tuple(_version_str(a, where) for a in _need(item, "archs", where))
        result[_version_str(version, where)] = Toolkit(
            version=version,
            linux_min=_version_str(_need(item, "linux_min", where), where),
            windows_min=_version_str(_need(item, "windows_min", where), where),
            gcc_max=int(_need(item, "gcc_max", where)),
            archs=archs,
        )
    return result


def _parse_gpus(raw: dict) -> tuple[dict[str, Architecture], list[GpuEntry]]:
    architectures = {}
    for cc, item in _need(raw, "architectures", "gpus.yaml").items():
        where = f"gpus.yaml architectures.{cc}"
        last = item.get("last_branch")
        architectures[_version_str(cc, where)] = Architecture(
            family=str(_need(item, "family", where)), last_branch=int(last) if last is not None else None)
    gpus = []
    for i, item in enumerate(_need(raw, "gpus", "gpus.yaml")):
        where = f"gpus.yaml gpus[{i}]"
        name = str(_need(item, "name", where))
        cc = _version_str(_need(item, "cc", where), where)
        if cc not in architectures:
            raise KnowledgeError(f"{where}: compute capability {cc} of {name!r} has no entry in architectures")
        gpus.append(GpuEntry(name=name, compute_capability=cc, tokens=_name_tokens(name)))
    return architectures, gpus


def _parse_pytorch(raw: dict) -> tuple[list[PytorchRelease], dict[str, str]]:
    arch_lists = {key: _arch_list(item, f"pytorch.yaml arch_lists.{key}")
                  for key, item in _need(raw, "arch_lists", "pytorch.yaml").items()}
    releases = []
    for i, item in enumerate(_need(raw, "releases", "pytorch.yaml")):
        where = f"pytorch.yaml releases[{i}]"
        version = _version_str(_need(item, "version", where), where)
        cuda: dict[str, dict[str, ArchList]] = {}
        for platform, variants in (item.get("cuda") or {}).items():
            if platform not in PLATFORMS:
                raise KnowledgeError(f"{where}.cuda: unknown platform {platform!r}")
            cuda[platform] = {}
            for variant, list_key in variants.items():
                if not re.match(r"^cuda\d{3}$", variant) or list_key not in arch_lists:
                    raise KnowledgeError(f"{where}.cuda.{platform}.{variant}: unknown variant or arch list {list_key!r}")
                cuda[platform][variant] = arch_lists[list_key]
        pythons = tuple(_version_str(p, where) for p in _need(item, "python", where))
        cpu = tuple(_need(item, "cpu", where))
        for platform in cpu:
            if platform not in PLATFORMS:
                raise KnowledgeError(f"{where}.cpu: unknown platform {platform!r}")
        releases.append(PytorchRelease(version=version, pythons=pythons, cuda=cuda, cpu_platforms=cpu))
    versions = [parse_version(r.version) for r in releases]
    if versions != sorted(versions, reverse=True):
        raise KnowledgeError("pytorch.yaml releases: must be listed newest first")
    min_glibc = {k: _version_str(v, "pytorch.yaml min_glibc") for k, v in _need(raw, "min_glibc", "pytorch.yaml").items()}
    return releases, min_glibc


def _parse_pointops(raw: dict) -> list[PointopsBuild]:
    where = "pointops_builds.yaml"
    for key in ("package", "version", "torch_min", "python_min"):
        _need(raw, key, where)
    variants = {}
    for variant, item in _need(raw, "variants", where).items():
        cuda = item.get("cuda_version")
        if variant == "cpu":
            variants[variant] = (None, None)
            continue
        if cuda is None or variant != variant_of_cuda(str(cuda)):
            raise KnowledgeError(f"{where} variants.{variant}: cuda_version must match the variant name")
        variants[variant] = (str(cuda), _arch_list(item, f"{where} variants.{variant}"))
    builds = []
    for platform, names in _need(raw, "platforms", where).items():
        if platform not in PLATFORMS:
            raise KnowledgeError(f"{where} platforms: unknown platform {platform!r}")
        for variant in names:
            if variant not in variants:
                raise KnowledgeError(f"{where} platforms.{platform}: unknown variant {variant!r}")
            cuda, archs = variants[variant]
            builds.append(PointopsBuild(platform=platform, variant=variant, cuda_version=cuda, archs=archs))
    return builds


_FILES = ("drivers", "toolkits", "gpus", "pytorch", "pointops_builds")


def read_raw(directory: Path = KNOWLEDGE_DIR) -> dict[str, dict]:
    """The YAML files as plain data (C loader when available: this is on the startup path)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    raw = {}
    for name in _FILES:
        path = Path(directory) / f"{name}.yaml"
        try:
            with open(path, encoding="utf-8") as handle:
                raw[name] = yaml.load(handle, Loader=loader)
        except OSError as exc:
            raise KnowledgeError(f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise KnowledgeError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(raw[name], dict):
            raise KnowledgeError(f"{path}: expected a mapping at the top level")
    return raw


@functools.lru_cache(maxsize=4)
def load(directory: str | None = None) -> Knowledge:
    """Parse and validate the knowledge files once (cached per directory)."""
    return Knowledge(read_raw(Path(directory) if directory else KNOWLEDGE_DIR))
