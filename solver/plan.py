"""Choose python, the pytorch release and build (CPU or CUDA variant), cuda-version and the
pointops build for a Target, from the knowledge tables alone (no channel access).

Rules (newest pytorch first, then newest CUDA, unless flags pin them):
- a GPU target never gets a CPU pytorch; build strings are pinned (pytorch=2.13.*=cuda129*);
- cuda-version within what the driver runs: fully, or through minor-version compatibility only
  when pytorch and pointops both carry SASS for the GPU (an older driver cannot JIT newer PTX);
- the GPU is covered by SASS of its major (lower minor is fine; on a Jetson only its exact
  compute capability) or by PTX of a lower arch;
- the driver must know the GPU: a generation first supported by CUDA X.Y needs the driver branch
  of X.Y (Blackwell 10.0/12.0 -> R570), and a product NVIDIA's drivers list only later needs those
  drivers, per branch (B300: 580.82.07; RTX PRO 5000 Blackwell: 570.153.02, in R575 575.57.08;
  Linux numbers, the branch alone on Windows); the fix named is always a driver that drives it.
  GPUs a branch no longer supports (Kepler after R470; Maxwell/Pascal/Volta after R580) are
  refused with the driver to install. Driver numbers are compared as the OS that numbers them
  (Target.driver_os: Windows under WSL2);
- a Jetson is planned from its JetPack stack: JetPack 7.2 (Orin) and 7 (Thor) get the sbsa
  builds; JetPack 6 runs only conda-forge's tegra builds, which pointops does not publish, so it
  is refused before any --cuda/--torch choice, naming the JetPack that works; modules without a
  CUDA 12 stack are refused;
- on linux-aarch64 `arm-variant` is pinned, since sbsa and tegra builds share build strings;
- --with packages (channel_packages.yaml) narrow the choice to the pytorch minors, variants and
  Pythons the channel builds them for, with binaries that cover the GPU (SASS where minor-version
  compatibility is used); each is pinned to the build of that minor, variant and Python. Where
  none fits, the refusal without them comes first, else one naming what did not fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from solver.errors import SolverError, UsageError
from solver.knowledge import (
    ChannelPackage,
    DriverFloor,
    JetsonStack,
    Knowledge,
    PytorchRelease,
    TorchBuild,
    arch_coverage,
)
from solver.target import Target
from solver.vocabulary import (
    DEFAULT_ARM_VARIANT,
    cuda_of_variant,
    has_arm_variants,
    os_word,
    parse_version,
    variant_of_cuda,
)


class PlanError(SolverError):
    """No consistent environment exists (exit 1, or 2 for a flag that cannot apply); the message
    names the cause and the fix."""


@dataclass(frozen=True)
class Pin:
    """One dependency of the env.yml: a package, its version and build-string patterns."""

    name: str
    version: str  # "3.13", "2.13.*", "2.2.0", "*"
    build: str | None = None  # "cuda130*"; None: any build
    build_number_min: int | None = None

    def spec(self) -> str:
        """As a conda MatchSpec string: pytorch=2.13.*=cuda130*."""
        text = f"{self.name}={self.version}" + (f"={self.build}" if self.build else "")
        if self.build_number_min is not None:
            text += f"[build_number='>={self.build_number_min}']"
        return text

    def as_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "build": self.build}


@dataclass
class Plan:
    target: Target
    python: str  # "3.13"
    pytorch_version: str  # release, e.g. "2.13.0"
    variant: str  # "cpu" or "cuda129"
    cuda_version: str | None  # "12.9"; None for CPU
    pointops_version: str
    driver_mode: str | None = None  # "full" or "mvc"
    coverage: dict[str, str] = field(default_factory=dict)  # package -> "sass" / "ptx"
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    arm_variant: str | None = None  # "sbsa" / "tegra": linux-aarch64 CUDA plans
    pytorch_min_build_number: int | None = None  # only builds from this one carry the GPU's arch
    pytorch_exact: bool = False  # --torch X.Y.Z: pin that release instead of X.Y.*
    with_pins: list[Pin] = field(default_factory=list)  # the --with packages (channel_packages.yaml)

    @property
    def pytorch_minor(self) -> str:
        return ".".join(self.pytorch_version.split(".")[:2])

    @property
    def pytorch_build(self) -> str:
        """Build-string pattern both pytorch and pointops are pinned to."""
        return f"{self.variant}*"

    def pins(self) -> list[Pin]:
        """Every package the env.yml pins, in its order."""
        torch = self.pytorch_version if self.pytorch_exact else f"{self.pytorch_minor}.*"
        if self.pytorch_min_build_number is not None:
            torch = self.pytorch_version
        pins = [
            Pin("python", self.python),
            Pin("pytorch", torch, self.pytorch_build, self.pytorch_min_build_number),
        ]
        if self.cuda_version:
            pins.append(Pin("cuda-version", self.cuda_version))
        if self.arm_variant:
            pins.append(Pin("arm-variant", "*", self.arm_variant))
        pins.append(Pin("pointops", self.pointops_version, self.pytorch_build))
        return pins + self.with_pins

    def specs(self) -> list[str]:
        """The env.yml dependencies (conda MatchSpec strings, build strings pinned)."""
        return [pin.spec() for pin in self.pins()]


@dataclass
class _Rejection:
    release: str
    variant: str
    kind: str  # "arch", "driver", "mvc-ptx", "glibc", "build"
    detail: str
    required_driver: str | None = None


# -- --with SPEC: the channel's other packages (solver/knowledge/channel_packages.yaml) ---------------


@dataclass(frozen=True)
class WithSpec:
    """One `--with SPEC` (a conda match spec): its text, the package name and version constraint."""

    text: str
    name: str
    version: str | None  # a conda version spec ("<2.2", "2.1.*"); None: any version


@dataclass(frozen=True)
class WithRequest:
    """A channel package asked for by one or more --with specs, and its versions they all allow."""

    package: ChannelPackage
    specs: tuple[str, ...]  # the --with texts naming it
    versions: tuple[str, ...]  # newest first

    @property
    def version(self) -> str:
        return self.versions[0]


def parse_with_spec(text: str) -> WithSpec:
    """A --with value -> WithSpec. A malformed spec, or one with parts the plan decides itself (a
    build string, channel, subdir ...), is a UsageError (exit 2)."""
    from rattler import MatchSpec

    example = 'e.g. --with mmcv or --with "mmcv<2.2"'
    try:
        spec = MatchSpec(text.strip())
        name = spec.name.as_package_name().normalized
        version = spec.version if spec.version not in (None, "*") else None
        given = spec.to_canonical_string()
        # what the spec reads as when it holds a name and a version only (and perhaps build "*")
        fields = [f'version="{spec.version}"'] if spec.version else []
        fields += ['build="*"'] if spec.build == "*" else []
        plain = MatchSpec(name + (f"[{','.join(fields)}]" if fields else "")).to_canonical_string()
    except Exception as exc:  # InvalidMatchSpecError, CanonicalMatchSpecError, ...
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(
            f"--with {text!r} is not a conda match spec ({reason}); give a package name and, if you "
            f"like, a version: {example}."
        ) from None
    if plain != given:
        raise UsageError(
            f"--with {text!r} gives more than a name and a version ({given}); the plan picks the build "
            f"and channel to fit pytorch's. Give a name and a version only: {example}."
        )
    return WithSpec(text=text, name=name, version=version)


def _matching_versions(package: ChannelPackage, specs: list[WithSpec]) -> tuple[str, ...]:
    from rattler import Version, VersionSpec

    constraints = [VersionSpec(s.version) for s in specs if s.version]
    return tuple(v for v in package.versions if all(c.matches(Version(v)) for c in constraints))


def with_requests(kb: Knowledge, specs: list[WithSpec]) -> list[WithRequest]:
    """The --with specs grouped by package: an unknown package is a UsageError (exit 2), versions
    that no spec allows a PlanError (exit 1)."""
    names = kb.channel_packages.names
    requests = []
    for name in dict.fromkeys(s.name for s in specs):
        given = [s for s in specs if s.name == name]
        package = kb.channel_package(name)
        if package is None:
            raise UsageError(_unknown_package(name, given[0].text, names))
        versions = _matching_versions(package, given)
        if not versions:
            texts = " and ".join(f"--with {s.text!r}" for s in given)
            built = " and ".join(package.versions)
            raise PlanError(
                f"the pointops channel builds {name} {built}, and none matches {texts}. Pass a spec one "
                f"of them meets (--with {name}={package.versions[0]}), or drop {texts}."
            )
        requests.append(WithRequest(package, tuple(s.text for s in given), versions))
    return requests


def _unknown_package(name: str, text: str, names: tuple[str, ...]) -> str:
    known = ", ".join(names)
    if name == "pointops":
        return f"pointops is in every plan; --with adds the pointops channel's other packages ({known})."
    spelled = next((n for n in names if n.replace("-", "_") == name.replace("-", "_")), None)
    if spelled:
        return f"--with {text!r}: conda spells the package {spelled}; pass --with {spelled}."
    return (
        f"--with {text!r}: the solver plans only the pointops channel's packages ({known}); install "
        "other packages into the environment afterwards."
    )


def _check_with_pins(
    target: Target, requests: list[WithRequest], python: str | None, torch: str | None
) -> None:
    """Refusals that no choice of pytorch, CUDA or Python can lift: a platform or kind (CPU, CUDA)
    the channel does not build a package for, and a --torch or --python pin it is not built for."""
    for request in requests:
        package, given = request.package, " ".join(f"--with {t!r}" for t in request.specs)
        variants = package.variants(target.platform)
        kind = [v for v in variants if (v == "cpu") != target.has_gpu or v == "*"]
        if not variants:
            raise PlanError(
                f"the pointops channel builds {package.name} for {', '.join(package.platforms)}, not "
                f"{target.platform}. Plan for one of those (--platform), or drop {given}."
            )
        if not kind:
            other = "--gpu none for a CPU environment" if target.has_gpu else "--gpu NAME --driver VERSION"
            what = "CUDA" if target.has_gpu else "CPU"
            raise PlanError(
                f"the pointops channel has no {what} build of {package.name} for {target.platform} (it "
                f"has {', '.join(variants)}). Pass {other}, or drop {given}."
            )
        if torch is not None and not package.built_for_torch(_minor(torch)):
            raise PlanError(
                f"{package.name} is built for pytorch {', '.join(package.torch)} only (its binary "
                f"needs the pytorch minor it was built with); --torch {torch} is none of them. Pass "
                f"--torch {package.torch[-1]}, or drop --torch."
            )
        if python is not None and not package.built_for_python(python):
            newest = package.pythons[-1] if package.pythons else package.python_min
            raise PlanError(
                f"{package.name} is built for Python {package.describe_pythons()}; --python {python} "
                f"is not one of them. Pass --python {newest}, or drop --python."
            )


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _with_torch_misfit(requests: list[WithRequest], release: PytorchRelease) -> str | None:
    """Why this pytorch release cannot carry the --with packages (one built per minor), or None."""
    minor = _minor(release.version)
    lacking = [r.package for r in requests if not r.package.built_for_torch(minor)]
    if not lacking:
        return None
    package = lacking[0]
    return f"pytorch {minor}: {package.name} is built for pytorch {', '.join(package.torch)}"


def _with_python_misfit(
    kb: Knowledge, requests: list[WithRequest], release: PytorchRelease, python: str | None
) -> str | None:
    """Why no Python fits both this pytorch release and the --with packages, or None."""
    if not requests or _python_for(release, python, kb, requests) is not None:
        return None
    if _python_for(release, python, kb) is None:
        return None  # pytorch itself lacks it: not the packages' doing
    names = " and ".join(r.package.name for r in requests)
    return f"pytorch {_minor(release.version)}: no Python it is built for is one {names} is built for"


def _with_build_fit(
    requests: list[WithRequest],
    target: Target,
    variant: str,
    arm_variant: str | None,
    mode: str,
    tegra: bool,
) -> tuple[dict[str, str], str | None]:
    """(coverage of the GPU by each --with package's build of this variant, None), or ({}, why one
    does not fit): no such build, no code for the GPU, or only PTX where minor-version
    compatibility needs SASS."""
    cc, coverage = target.compute_capability, {}
    for request in requests:
        package = request.package
        build = package.build(target.platform, variant, arm_variant)
        if build is None:
            return {}, f"{package.name} has no {variant} build for {target.platform}"
        if build.archs is None:
            continue  # no CUDA code of its own
        covered = arch_coverage(cc, build.archs, tegra) if cc else "unknown"
        if covered is None:
            return {}, f"{package.name} {variant} carries {build.archs.describe()}, no code for {cc}"
        if mode == "mvc" and covered != "sass":
            return {}, (
                f"only PTX covers {cc} in {package.name} {variant}, and its CUDA {build.cuda_version} "
                "would need minor-version compatibility"
            )
        coverage[package.name] = covered
    return coverage, None


def _with_pins(requests: list[WithRequest], variant: str, release: PytorchRelease, python: str) -> list[Pin]:
    return [
        Pin(r.package.name, r.version, r.package.pin(variant, _minor(release.version), python))
        for r in requests
    ]


def _with_reasons(plan: Plan, requests: list[WithRequest], misfits: list[str]) -> None:
    for request, pin in zip(requests, plan.with_pins, strict=True):
        package = request.package
        newest = "newest version the channel builds" + (
            f" that {' '.join(repr(t) for t in request.specs)} allows"
            if request.version != package.versions[0]
            else ""
        )
        tied = (
            ""
            if package.torch is None
            else f", the build for pytorch {plan.pytorch_minor} and Python {plan.python}"
        )
        plan.reasons.append(f"{package.name} {pin.version} {pin.build}: {newest}{tied}")
    if misfits:
        plan.reasons.append(f"skipped for --with: {'; '.join(dict.fromkeys(misfits))}")


def _explain_with(target: Target, requests: list[WithRequest], misfits: list[str]) -> str:
    """The --with packages are why no plan exists (one exists without them): what did not fit."""
    given = " ".join(f"--with {t!r}" for r in requests for t in r.specs)
    details = "; ".join(list(dict.fromkeys(misfits))[:4]) or "no build fits"
    cpu = "" if not target.has_gpu else ", or pass --gpu none for a CPU environment"
    return (
        f"no build of {' and '.join(r.package.name for r in requests)} in the pointops channel fits beside "
        f"the pytorch builds that fit {target.platform} and this machine ({details}). Drop {given}{cpu}."
    )


def check_torch_floor(kb: Knowledge, torch: str, package: str) -> None:
    """--torch below pointops' stable-ABI floor, for any format (`package`: pytorch or torch)."""
    floor = kb.pointops.torch_min
    if parse_version(torch)[:2] < parse_version(floor):
        raise PlanError(
            f"pointops needs {package} >= {floor} (its stable-ABI floor); --torch {torch} is older. "
            f"Drop --torch or pass --torch {floor} or newer."
        )


def refuse_cuda_without_gpu(cuda: str | None) -> None:
    """--cuda for a CPU target, for any format: a usage error."""
    if cuda is not None:
        raise PlanError(
            f"--cuda {cuda} needs a GPU target; drop it for a CPU environment, "
            "or pass --gpu NAME --driver VERSION.",
            exit_code=2,
        )


def _releases(kb: Knowledge, torch: str | None) -> list[PytorchRelease]:
    """One release per pytorch minor (newest patch), >= pointops' minimum, matching --torch."""
    minimum = parse_version(kb.pointops.torch_min)
    known = [r for r in kb.pytorch_releases if parse_version(r.version)[:2] >= minimum]
    if torch is not None:
        check_torch_floor(kb, torch, "pytorch")
        wanted = parse_version(torch)
        matching = [r for r in known if parse_version(r.version)[: len(wanted)] == wanted]
        if not matching:
            versions = sorted({".".join(r.version.split(".")[:2]) for r in known}, key=parse_version)
            raise PlanError(
                f"conda-forge has no pytorch {torch} that pointops supports (known: "
                f"{', '.join(versions)}). Pass one of those to --torch."
            )
        known = matching
    seen, result = set(), []
    for release in known:
        minor = parse_version(release.version)[:2]
        if minor not in seen:
            seen.add(minor)
            result.append(release)
    return result


def _python_for(
    release: PytorchRelease, python: str | None, kb: Knowledge, requests: list[WithRequest] = ()
) -> str | None:
    """The asked Python, else the newest, that pytorch, pointops and the --with packages are built for."""
    allowed = [
        p
        for p in release.pythons
        if parse_version(p) >= parse_version(kb.pointops.python_min)
        and all(r.package.built_for_python(p) for r in requests)
    ]
    if python is None:
        return max(allowed, key=parse_version) if allowed else None
    return python if python in allowed else None


def make_plan(
    kb: Knowledge,
    target: Target,
    python: str | None = None,
    torch: str | None = None,
    cuda: str | None = None,
    requests: list[WithRequest] = (),
) -> Plan:
    """The newest consistent plan for the target, or PlanError saying why none exists. `requests`
    (--with) add channel packages: the plan is then the newest one they are built for too."""
    releases = _releases(kb, torch)
    if not target.has_gpu:
        refuse_cuda_without_gpu(cuda)
    requests = list(requests)
    if requests:
        _check_with_pins(target, requests, python, torch)
    misfits: list[str] = []  # why candidates that fit without the --with packages were skipped
    try:
        if not target.has_gpu:
            plan = _cpu_plan(kb, target, releases, python, requests, misfits)
        else:
            plan = _gpu_plan(kb, target, releases, python, cuda, requests, misfits)
    except PlanError:
        if not requests:
            raise
        make_plan(kb, target, python, torch, cuda)  # the refusal that holds without --with comes first
        raise PlanError(_explain_with(target, requests, misfits)) from None
    plan.pytorch_exact = torch is not None and len(parse_version(torch)) > 2
    _with_reasons(plan, requests, misfits)
    return plan


def _python_reason(plan: Plan, python: str | None, requests: list[WithRequest]) -> str:
    if python:
        return f"python {plan.python}: as asked"
    names = [f"pytorch {plan.pytorch_minor}"] + [r.package.name for r in requests]
    built_for = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"python {plan.python}: newest Python that {built_for} {'is' if not requests else 'are'} built for"


def _no_python(python: str, releases: list[PytorchRelease]) -> PlanError:
    supported = sorted({p for r in releases for p in r.pythons}, key=parse_version)
    return PlanError(
        f"--python {python} has no conda-forge pytorch build that pointops supports "
        f"(those are built for Python {', '.join(supported)}). Pass one of those to --python."
    )


def _cpu_plan(
    kb: Knowledge,
    target: Target,
    releases: list[PytorchRelease],
    python: str | None,
    requests: list[WithRequest] = (),
    misfits: list[str] | None = None,
) -> Plan:
    misfits = [] if misfits is None else misfits
    for release in releases:
        if target.platform not in release.cpu_platforms:
            continue
        misfit = _with_torch_misfit(requests, release) or _with_python_misfit(kb, requests, release, python)
        misfit = misfit or _with_build_fit(requests, target, "cpu", None, "full", False)[1]
        if misfit:
            misfits.append(misfit)
            continue
        chosen_python = _python_for(release, python, kb, requests)
        if chosen_python is None:
            continue
        plan = Plan(
            target=target,
            python=chosen_python,
            pytorch_version=release.version,
            variant="cpu",
            cuda_version=None,
            pointops_version=kb.pointops.version,
        )
        plan.reasons.extend(target.notes)
        plan.reasons.append(
            f"pytorch {plan.pytorch_minor} CPU build: newest conda-forge release that pointops supports on "
            f"{target.platform}"
        )
        plan.reasons.append(_python_reason(plan, python, requests))
        plan.with_pins = _with_pins(requests, "cpu", release, chosen_python)
        return plan
    if python is not None:
        raise _no_python(python, releases)
    raise PlanError(f"conda-forge has no CPU pytorch >= {kb.pointops.torch_min} for {target.platform}.")


def _describe_gpu(kb: Knowledge, target: Target) -> str:
    cc = target.compute_capability
    arch = kb.architecture(cc) if cc else None
    module = kb.jetson_module(cc) if cc else None
    family = f", {module.name}" if module else (f", {arch.family}" if arch else "")
    return f"{target.gpu_name} (compute capability {cc or 'unknown'}{family})"


def _driver_text(target: Target) -> str:
    if target.driver_version:
        return f"driver {target.driver_version}"
    return "the driver"


def _min_driver_text(minimum: str, os_name: str) -> str:
    """'570.26' -> ' (570.26 or later on Linux)'; a bare branch ('615') needs no parenthesis."""
    if "." not in minimum:
        return ""
    return f" ({minimum} or later on {os_word(os_name)})"


def _driver_floor(kb: Knowledge, target: Target) -> DriverFloor | None:
    """The first drivers of the target's GPU product, later than its generation's branch (a name
    given with another compute capability is not that product; a compute capability alone takes
    the floor all its products share)."""
    if not target.compute_capability:
        return None
    return kb.driver_floor(target.gpu_name, target.compute_capability)


def _branch_of(kb: Knowledge, target: Target):
    return kb.driver_branch(target.driver_version) if target.driver_version else None


def _check_driver_supports_gpu(kb: Knowledge, target: Target) -> None:
    """Refuse GPUs the driver does not know yet or no longer supports, and GPUs no CUDA 12+ build targets."""
    cc = target.compute_capability
    arch = kb.architecture(cc) if cc else None
    os_name = target.driver_os
    if target.driver_version and arch and arch.last_branch:
        branch = kb.driver_branch(target.driver_version)
        if branch and branch.branch > arch.last_branch:
            raise PlanError(
                f"driver {target.driver_version} (R{branch.branch}) no longer supports {_describe_gpu(kb, target)}; "
                f"R{arch.last_branch} is the last driver branch for {arch.family}. Install an R{arch.last_branch} "
                f"({arch.last_branch}.xx) driver, or pass --gpu none for a CPU environment."
            )
    if target.driver_cuda is None:
        minimum = kb.mvc_min_driver(12, os_name)
        raise PlanError(
            f"driver {target.driver_version} is older than every driver branch the solver knows (R450+); "
            f"pointops' GPU builds need CUDA 12, i.e. driver >= {minimum} on {os_word(os_name)}. "
            "Upgrade the driver, or pass --gpu none for a CPU environment."
        )
    floor = _driver_floor(kb, target)
    if floor is not None:
        _check_product_drivers(kb, target, floor)
    _check_generation_branch(kb, target, arch, floor)
    if cc and parse_version(cc) < (5, 0):
        family = arch.family if arch else "This"
        raise PlanError(
            f"{_describe_gpu(kb, target)} cannot run any pointops GPU build: {family} GPUs need CUDA <= 11.8 "
            f"(and driver R{arch.last_branch if arch and arch.last_branch else 470} or older), while pointops' "
            "GPU builds need CUDA 12 or newer. Pass --gpu none for a CPU environment."
        )


def _install_text(floor: DriverFloor, os_name: str) -> str:
    """What to install for a GPU with first drivers of its own: numbers of this OS, or on an OS
    NVIDIA names none for, the branch of the other OS's first driver."""
    if floor.minimum(os_name) is not None:
        return f"driver {floor.advice(os_name)}"
    other = "windows" if os_name != "windows" else "linux"
    return (
        f"an R{floor.first_branch(os_name)} or newer {os_word(os_name)} driver that lists it (NVIDIA names "
        f"none by number for {os_word(os_name)}; {floor.advice(other)})"
    )


def _branch_reporting(kb: Knowledge, cuda: str | None):
    """The one driver branch that reports this CUDA version (12.8 -> R570), for a driver known only by
    the CUDA version it reports; None when no branch reports exactly it."""
    if not cuda:
        return None
    wanted = parse_version(cuda)[:2]
    return next((b for b in kb.branches if parse_version(b.max_cuda)[:2] == wanted), None)


def _check_product_drivers(kb: Knowledge, target: Target, floor: DriverFloor) -> None:
    """A GPU product driven by later drivers than its generation's first branch (RTX PRO 6000
    Blackwell Server Edition: 575.57.08; B300: 580.82.07): refuse a driver that does not drive it.
    A driver known only by the CUDA version it reports is refused when its branch is too old; a
    build of a branch that drives the product from some build on is left to a warning."""
    os_name, branch = target.driver_os, _branch_of(kb, target)
    if branch is not None:
        runs = floor.runs(target.driver_version, branch.branch, os_name)
        if runs is None:  # no numbers for this OS: its branch must be that of the other OS's first driver
            runs = branch.branch >= floor.first_branch(os_name)
        which = f"driver {target.driver_version} (R{branch.branch})"
    else:
        branch = _branch_reporting(kb, target.driver_cuda)
        runs = branch is None or branch.branch >= floor.first_branch(os_name)
        which = (
            f"the driver (it reports CUDA {target.driver_cuda}: an R{branch.branch} driver)" if branch else ""
        )
    if runs:
        return
    own = [s for s in floor.starts(os_name) if s.branch == branch.branch]
    verb = "cannot drive" if own and own[0].first is None else "is too old for"
    own_number = floor.minimum(os_name)
    listed = (
        f"NVIDIA's {os_word(os_name)} drivers list it from {own_number} (R{floor.first_branch(os_name)})"
        if own_number
        else f"NVIDIA's drivers list it from R{floor.first_branch(os_name)}"
    )
    raise PlanError(
        f"{which} {verb} {_describe_gpu(kb, target)}: {listed}, per {floor.source}. Install "
        f"{_install_text(floor, os_name)}, or pass --gpu none for a CPU environment."
    )


def _check_generation_branch(kb: Knowledge, target: Target, arch, floor: DriverFloor | None) -> None:
    """A generation first known to CUDA 12.x/13.x needs that release's driver branch; older ones are
    driven by any driver new enough for CUDA 12, which the plan asks for anyway. Here the driver is
    known by the CUDA version it reports (its version may be unknown)."""
    cc = target.compute_capability
    if not (
        arch
        and arch.first_cuda
        and cc
        and kb.is_compute_capability(cc)
        and parse_version(arch.first_cuda)[:2] > (12, 0)
        and parse_version(target.driver_cuda)[:2] < parse_version(arch.first_cuda)[:2]
    ):
        return
    first = kb.first_branch_for_cuda(arch.first_cuda)
    branch = _branch_of(kb, target)
    which = (
        f"{_driver_text(target)} (R{branch.branch})"
        if branch
        else f"{_driver_text(target)} (CUDA {target.driver_cuda})"
    )
    if floor is not None:
        raise PlanError(
            f"{which} cannot drive {_describe_gpu(kb, target)}: NVIDIA's drivers list it from "
            f"R{floor.first_branch(target.driver_os)}, per {floor.source}. Install "
            f"{_install_text(floor, target.driver_os)}, or pass --gpu none for a CPU environment."
        )
    minimum = kb.cuda_min_driver(arch.first_cuda, target.driver_os)
    raise PlanError(
        f"{which} cannot drive {_describe_gpu(kb, target)}: compute capability {cc} first appears in CUDA "
        f"{arch.first_cuda}, and only R{first.branch} and newer drivers know it. Install an R{first.branch} or "
        f"newer driver{_min_driver_text(minimum, target.driver_os)}, or pass --gpu none for a CPU environment."
    )


def _check_jetson(kb: Knowledge, target: Target) -> JetsonStack:
    """The JetPack stack of a Jetson target, or the refusal: no CUDA 12 stack, or a driver of none."""
    module = kb.jetson_module(target.compute_capability)
    gpu = _describe_gpu(kb, target)
    if not module.stacks:
        raise PlanError(
            f"{gpu} has no CUDA 12 or 13 stack: the last NVIDIA ships for {module.name} is {module.last_stack}, "
            "and pointops' GPU builds need CUDA 12 or newer. Pass --gpu none for a CPU environment."
        )
    if target.jetson_stack is not None:
        return kb.jetson_stacks[target.jetson_stack]
    if target.driver_version:
        offered = " or ".join(
            f"{module.stacks[key]} (driver {_jetson_driver_text(kb.jetson_stacks[key])})"
            for key in module.stacks
        )
        raise PlanError(
            f"driver {target.driver_version} is not a {module.name} driver: {module.name} runs {offered}. "
            "Check --driver (nvidia-smi on the Jetson prints it), or pass --gpu none for a CPU environment."
        )
    raise PlanError(
        f"the driver runs CUDA <= {target.driver_cuda}, and {module.name} runs pointops only on "
        f"{_stacks_with_pointops(kb, target)}. Upgrade JetPack, or pass --gpu none for a CPU environment."
    )


def _has_pointops(kb: Knowledge, platform: str, arm_variant: str) -> bool:
    """Whether pointops publishes any CUDA build for this arm variant."""
    return any(b.cuda_version and b.arm_variant in (None, arm_variant) for b in kb.pointops_builds(platform))


def _stacks_with_pointops(kb: Knowledge, target: Target) -> str:
    """'JetPack 7.2 (L4T r39.2) or newer (driver 580 or newer)': the module's stacks pointops has builds for."""
    module = kb.jetson_module(target.compute_capability)
    working = [
        key for key in module.stacks if _has_pointops(kb, target.platform, kb.jetson_stacks[key].arm_variant)
    ]
    return (
        " or ".join(
            f"{module.stacks[key]} (driver {_jetson_driver_text(kb.jetson_stacks[key])})" for key in working
        )
        or "no JetPack release"
    )


def _refuse_stack_without_pointops(
    kb: Knowledge, target: Target, stack: JetsonStack, cuda: str | None
) -> None:
    """JetPack 6: conda-forge has tegra pytorch builds, pointops none. Refused whatever --cuda/--torch say,
    so the fix named is one that works."""
    if _has_pointops(kb, target.platform, stack.arm_variant):
        return
    module = kb.jetson_module(target.compute_capability)
    cpu = "pass --gpu none without --cuda" if cuda else "pass --gpu none"
    raise PlanError(
        f"pointops publishes no build for the {stack.arm_variant} CUDA stack of {module.name} on {stack.label}, "
        f"the only CUDA builds its driver runs; {module.name} runs pointops on "
        f"{_stacks_with_pointops(kb, target)}. Upgrade JetPack, or {cpu} for a CPU environment."
    )


def _jetson_driver_text(stack: JetsonStack) -> str:
    return f"{stack.driver_series}.x" if stack.driver_series is not None else f"{stack.driver_min} or newer"


def _allowed_arm_variant(target: Target, stack: JetsonStack | None) -> str | None:
    if stack is not None:
        return stack.arm_variant
    return DEFAULT_ARM_VARIANT if has_arm_variants(target.platform) else None


def _where(kb: Knowledge, target: Target, stack: JetsonStack | None) -> str:
    """Where builds are looked for: 'linux-64', or 'Jetson Orin on JetPack 6 (L4T r36)'."""
    if stack is None:
        return target.platform
    module = kb.jetson_module(target.compute_capability)
    return f"{module.name} on {module.stacks.get(stack.key, stack.label)}"


def _coverage(cc: str | None, build: TorchBuild, tegra: bool) -> tuple[str | None, int | None]:
    """Coverage of the GPU by a pytorch build, and the build number from which it holds (or None)."""
    if cc is None:
        return "unknown", None
    newest = arch_coverage(cc, build.archs, tegra)
    if build.since_build_number is None or newest is None:
        return newest, None
    older = arch_coverage(cc, build.older_archs, tegra)
    return newest, (None if older == newest else build.since_build_number)


def check_gpu_target(kb: Knowledge, target: Target, cuda: str | None = None) -> JetsonStack | None:
    """The refusals that hold whatever gets installed (conda or pip): macOS, a driver that cannot
    drive the GPU or is too old for CUDA 12, a GPU no CUDA 12 build targets, a Jetson without a
    stack pointops runs on. Returns a Jetson's JetPack stack, None for other GPUs."""
    if target.os == "osx":
        raise PlanError("macOS has no CUDA: pass --gpu none for a CPU environment.")
    cc = target.compute_capability
    arch = kb.architecture(cc) if cc else None
    if arch and arch.tegra and kb.jetson_module(cc):
        stack = _check_jetson(kb, target)
        _refuse_stack_without_pointops(kb, target, stack, cuda)
        return stack
    _check_driver_supports_gpu(kb, target)
    return None


def _gpu_plan(
    kb: Knowledge,
    target: Target,
    releases: list[PytorchRelease],
    python: str | None,
    cuda: str | None,
    requests: list[WithRequest] = (),
    misfits: list[str] | None = None,
) -> Plan:
    misfits = [] if misfits is None else misfits
    stack = check_gpu_target(kb, target, cuda)
    cc = target.compute_capability
    tegra = stack is not None
    arm_variant = _allowed_arm_variant(target, stack)
    # A Jetson's own driver (JetPack 6) is not held to the desktop minor-version minimums.
    mvc_driver = None if stack is not None and stack.driver_series is not None else target.driver_version
    wanted_variant = variant_of_cuda(cuda) if cuda else None
    rejections: list[_Rejection] = []
    python_missing = True
    variant_seen = False
    for release in releases:
        misfit = _with_torch_misfit(requests, release) or _with_python_misfit(kb, requests, release, python)
        if misfit:
            misfits.append(misfit)
            python_missing = False
            continue
        chosen_python = _python_for(release, python, kb, requests)
        if chosen_python is None:
            continue
        python_missing = False
        for torch_build in release.cuda_builds(target.platform):
            variant = torch_build.variant
            if torch_build.arm_variant != arm_variant or (wanted_variant and variant != wanted_variant):
                continue
            variant_seen = True
            cuda_version = cuda_of_variant(variant)
            build = kb.pointops_build(target.platform, variant, arm_variant)
            if build is None:
                rejections.append(
                    _Rejection(
                        release.version,
                        variant,
                        "build",
                        f"pointops has no {torch_build.key} build for {target.platform}",
                    )
                )
                continue
            min_glibc = kb.glibc_floor(torch_build)
            if (
                target.os == "linux"
                and target.glibc
                and min_glibc
                and parse_version(target.glibc) < parse_version(min_glibc)
            ):
                rejections.append(
                    _Rejection(
                        release.version,
                        variant,
                        "glibc",
                        f"the CUDA {cuda_version} {_flavour(torch_build)}builds need glibc >= "
                        f"{min_glibc}, the target has {target.glibc}",
                    )
                )
                continue
            torch_cov, since = _coverage(cc, torch_build, tegra)
            ops_cov = arch_coverage(cc, build.archs, tegra) if cc else "unknown"
            if torch_cov is None or ops_cov is None:
                lacking = "pytorch" if torch_cov is None else "pointops"
                archs = torch_build.archs if torch_cov is None else build.archs
                rejections.append(
                    _Rejection(
                        release.version,
                        variant,
                        "arch",
                        f"{lacking} {torch_build.key} carries {archs.describe()}",
                    )
                )
                continue
            both_sass = torch_cov == "sass" and ops_cov == "sass"
            mode = kb.driver_runs_cuda(target.driver_cuda, cuda_version, mvc_driver, target.driver_os)
            required = (
                kb.mvc_min_driver(parse_version(cuda_version)[0], target.driver_os)
                if both_sass
                else kb.cuda_min_driver(cuda_version, target.driver_os)
            )
            if mode is None:
                rejections.append(
                    _Rejection(release.version, variant, "driver", f"needs driver >= {required}", required)
                )
                continue
            if mode == "mvc" and cc is None:
                rejections.append(
                    _Rejection(
                        release.version,
                        variant,
                        "mvc-unknown",
                        f"CUDA {cuda_version} would need minor-version compatibility, which "
                        "needs SASS for the GPU, and its compute capability is unknown",
                        kb.cuda_min_driver(cuda_version, target.driver_os),
                    )
                )
                continue
            if mode == "mvc" and not both_sass:
                rejections.append(
                    _Rejection(
                        release.version,
                        variant,
                        "mvc-ptx",
                        f"only PTX covers compute capability {cc} in the CUDA {cuda_version} "
                        "builds, and an older driver cannot JIT newer PTX",
                        kb.cuda_min_driver(cuda_version, target.driver_os),
                    )
                )
                continue
            with_coverage, misfit = _with_build_fit(requests, target, variant, arm_variant, mode, tegra)
            if misfit:
                misfits.append(f"pytorch {_minor(release.version)} {torch_build.key}: {misfit}")
                continue
            plan = _gpu_result(
                kb,
                target,
                release,
                torch_build,
                chosen_python,
                python,
                mode,
                torch_cov,
                ops_cov,
                rejections,
                stack,
                since,
                requests,
                with_coverage,
            )
            plan.with_pins = _with_pins(requests, variant, release, chosen_python)
            return plan
    if python_missing and python is not None:
        raise _no_python(python, releases)
    if wanted_variant and not variant_seen:
        raise _no_such_cuda(kb, target, releases, python, cuda, arm_variant, stack, requests)
    raise PlanError(_explain(kb, target, rejections, cuda, stack))


def _no_such_cuda(
    kb: Knowledge,
    target: Target,
    releases: list[PytorchRelease],
    python: str | None,
    cuda: str,
    arm_variant: str | None,
    stack: JetsonStack | None,
    requests: list[WithRequest] = (),
) -> PlanError:
    """--cuda names a version conda-forge lacks here: name the ones it has, and the ones among them
    that plan for this GPU and driver (the fix must work); none: the refusal without --cuda."""
    built = sorted(
        {
            b.cuda_version
            for r in releases
            for b in r.cuda_builds(target.platform)
            if b.arm_variant == arm_variant
            and kb.pointops_build(target.platform, b.variant, arm_variant) is not None
        },
        key=parse_version,
    )
    fitting = []
    for version in built:
        try:
            _gpu_plan(kb, target, releases, python, version, requests)
        except PlanError:
            continue
        fitting.append(version)
    if not fitting:
        try:
            _gpu_plan(kb, target, releases, python, None, requests)
        except PlanError as refusal:
            return refusal
    have = f"conda-forge pytorch has no CUDA {cuda} build for {_where(kb, target, stack)} (it has {', '.join(built)})"
    if fitting == built:
        return PlanError(f"{have}. Pass one of those to --cuda, or drop --cuda.")
    return PlanError(
        f"{have}; {' and '.join(fitting)} {'fits' if len(fitting) == 1 else 'fit'} this GPU and driver. "
        f"Pass --cuda {fitting[-1]}, or drop --cuda."
    )


def _flavour(build: TorchBuild) -> str:
    return f"{build.arm_variant} " if build.arm_variant and build.arm_variant != DEFAULT_ARM_VARIANT else ""


def _gpu_result(
    kb,
    target,
    release,
    torch_build,
    chosen_python,
    python,
    mode,
    torch_cov,
    ops_cov,
    rejections,
    stack,
    since,
    requests=(),
    with_coverage=None,
) -> Plan:
    variant = torch_build.variant
    cuda_version = cuda_of_variant(variant)
    plan = Plan(
        target=target,
        python=chosen_python,
        pytorch_version=release.version,
        variant=variant,
        cuda_version=cuda_version,
        pointops_version=kb.pointops.version,
        driver_mode=mode,
        coverage={"pytorch": torch_cov, "pointops": ops_cov, **(with_coverage or {})},
        arm_variant=torch_build.arm_variant,
        pytorch_min_build_number=since,
    )
    plan.reasons.append(f"GPU: {_describe_gpu(kb, target)}")
    plan.reasons.append(f"{_driver_text(target)} runs CUDA <= {target.driver_cuda}")
    plan.reasons.extend(target.notes)
    skipped = sorted(
        {f"{cuda_of_variant(r.variant)} ({r.detail})" for r in rejections if r.release == release.version}
    )
    plan.reasons.append(
        f"pytorch {plan.pytorch_minor} {torch_build.key}: newest pytorch and CUDA that fit"
        + (f"; skipped CUDA {'; '.join(skipped)}" if skipped else "")
    )
    if stack is not None:
        module = kb.jetson_module(target.compute_capability)
        plan.reasons.append(
            f"{_where(kb, target, stack)}: conda-forge's "
            f"{stack.arm_variant} builds, the ones its CUDA driver runs (arm-variant="
            f"{stack.arm_variant} pinned); only SASS for exactly {target.compute_capability} or "
            "PTX counts on a Jetson"
        )
        if stack.key in module.assumed and target.driver_version is not None:
            plan.reasons.append(f"assumed: {module.assumed[stack.key]}")
    elif torch_build.arm_variant:
        plan.reasons.append(
            f"arm-variant={torch_build.arm_variant} pinned: {target.platform} servers run the "
            f"{torch_build.arm_variant} builds, never the Jetson (tegra) ones that share their "
            "build strings"
        )
    if since is not None:
        plan.reasons.append(
            f"pytorch {release.version} build number >= {since}: its older builds lack SASS for "
            f"{target.compute_capability}"
        )
    min_glibc = kb.glibc_floor(torch_build)
    if target.os == "linux" and min_glibc and parse_version(min_glibc) > (2, 17):
        assumed = ", assumed" if target.glibc_assumed else ""
        plan.reasons.append(
            f"CUDA {cuda_version} {_flavour(torch_build)}builds need glibc >= {min_glibc} on the "
            f"target: conda-forge builds them against glibc {min_glibc} (target glibc "
            f"{target.glibc}{assumed})"
        )
    binaries = list(plan.coverage)  # pytorch, pointops, then the --with packages with CUDA code
    if mode == "mvc":
        carriers = (
            "pytorch and pointops both"
            if len(binaries) == 2
            else ", ".join(binaries[:-1]) + " and " + binaries[-1]
        )
        plan.reasons.append(
            f"CUDA {cuda_version} runs on this driver through minor-version compatibility: "
            f"{carriers} carry SASS for {target.compute_capability}"
        )
    if "ptx" in plan.coverage.values():
        which = " and ".join(k for k in binaries if plan.coverage[k] == "ptx")
        plan.warnings.append(
            f"only PTX covers compute capability {target.compute_capability} in {which} "
            f"{variant}: kernels are JIT-compiled by the driver on first use (slow first start)"
        )
    if torch_cov == "unknown":
        plan.warnings.append(
            "the GPU's compute capability is unknown, so arch coverage was not checked; "
            "pass --gpu 'NAME:X.Y' to check it"
        )
    plan.warnings.extend(_driver_floor_warnings(kb, target))
    arch = kb.architecture(target.compute_capability) if target.compute_capability else None
    if arch and arch.last_branch and arch.last_branch >= 580 and stack is None:
        plan.warnings.append(
            f"{arch.family} GPUs are supported up to driver R{arch.last_branch} only, and CUDA 13 "
            "builds no longer target them: this machine stays on CUDA 12 builds"
        )
    plan.reasons.append(_python_reason(plan, python, requests))
    return plan


def _driver_floor_warnings(kb: Knowledge, target: Target) -> list[str]:
    """A GPU's own first drivers that could not be checked: none named for this OS (only the branch
    was checked), or a driver known only by the CUDA version it reports (a CONDA_OVERRIDE_CUDA or a
    detection without a version) whose branch drives the product from some build on."""
    floor = _driver_floor(kb, target)
    if floor is None or target.driver_assumed:
        return []
    os_name = target.driver_os
    if floor.minimum(os_name) is None:
        other = "windows" if os_name != "windows" else "linux"
        return [
            f"NVIDIA's first drivers for the {floor.gpu} are known only on {os_word(other)}: "
            f"{floor.advice(other)} ({floor.source}); {os_word(os_name)} drivers of a branch are numbered apart "
            f"from {os_word(other)} ones, so only the R{floor.first_branch(os_name)} branch was checked here"
        ]
    reported = _branch_reporting(kb, target.driver_cuda) if target.driver_version is None else None
    if reported is not None and any(s.branch == reported.branch for s in floor.starts(os_name)):
        return [
            f"the driver's version is unknown (it reports CUDA {target.driver_cuda}, an R{reported.branch} "
            f"driver): NVIDIA's drivers drive the {floor.gpu} from {floor.advice(os_name)} "
            f"({floor.source}); check the version nvidia-smi prints"
        ]
    return []


def _explain(
    kb: Knowledge,
    target: Target,
    rejections: list[_Rejection],
    cuda: str | None,
    stack: JetsonStack | None = None,
) -> str:
    """One or two sentences: the system cause and the fix."""
    gpu = _describe_gpu(kb, target)
    fix_cpu = "or pass --gpu none for a CPU environment."
    unknown = [r for r in rejections if r.kind == "mvc-unknown"]
    if unknown and not [r for r in rejections if r.kind == "arch"]:
        return (
            f"{_driver_text(target)} runs CUDA <= {target.driver_cuda}, so the CUDA "
            f"{cuda_of_variant(unknown[0].variant)} builds need minor-version compatibility, which is safe only "
            "for a GPU with SASS in them, and the GPU's compute capability is unknown. Give it "
            "(CONDA_OVERRIDE_CUDA_ARCH=X.Y, or --gpu 'NAME:X.Y', with the X.Y nvidia-smi "
            f"--query-gpu=compute_cap --format=csv prints), {fix_cpu}"
        )
    driver_blocked = [
        r for r in rejections if r.kind in ("driver", "mvc-ptx", "mvc-unknown") and r.required_driver
    ]
    if driver_blocked:
        need = min(driver_blocked, key=lambda r: parse_version(r.required_driver))
        need_cuda = cuda_of_variant(need.variant)
        major = parse_version(need_cuda)[0]
        # Through minor-version compatibility any driver of the major will do: name the major only.
        what = (
            f"CUDA {major}"
            if need.required_driver == kb.mvc_min_driver(major, target.driver_os)
            else f"CUDA {need_cuda}"
        )
        ptx = (
            " (only PTX covers this GPU there, and an older driver cannot JIT newer PTX)"
            if need.kind == "mvc-ptx"
            else ""
        )
        return (
            f"{_driver_text(target)} runs CUDA <= {target.driver_cuda}; pointops' GPU builds for this GPU need "
            f"{what}{ptx}, i.e. driver >= {need.required_driver} on {os_word(target.driver_os)}. Upgrade the driver, "
            f"{fix_cpu}"
        )
    arch_blocked = [r for r in rejections if r.kind == "arch"]
    if arch_blocked:
        details = sorted({r.detail for r in arch_blocked})
        pinned = f" with --cuda {cuda}" if cuda else ""
        fix = "Drop --cuda, or pass --gpu none" if cuda else "Pass --gpu none"
        exact = (
            f" (a Jetson needs SASS for exactly {target.compute_capability}, or PTX of an older arch)"
            if stack is not None
            else ""
        )
        return (
            f"no pytorch/pointops CUDA build for {_where(kb, target, stack)}{pinned} runs on {gpu}{exact}: "
            f"{'; '.join(details)}. {fix} for a CPU environment."
        )
    glibc_blocked = [r for r in rejections if r.kind == "glibc"]
    if glibc_blocked:
        return (
            f"{glibc_blocked[0].detail}, and no other CUDA build fits. Plan on a newer Linux "
            f"(or set CONDA_OVERRIDE_GLIBC if the target differs), {fix_cpu}"
        )
    if rejections:
        return f"{rejections[0].detail}. Pass --gpu none for a CPU environment."
    return (
        f"conda-forge has no CUDA pytorch build for {_where(kb, target, stack)}. "
        "Pass --gpu none for a CPU environment."
    )
