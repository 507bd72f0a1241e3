"""Choose, for `solver make-env --format pip|uv`, the PyTorch wheel index, the torch release and the
pointops wheel for a Target, from the knowledge tables alone (no index is contacted).

    plan = make_pip_plan(kb, load_wheels(), target)
    plan.source.tag, plan.torch, plan.wheel.distribution   # -> "cu130", "2.14", "pointops-cu13"

Rules:
- the conda plan's refusals hold here too (solver.plan.check_gpu_target): macOS has no CUDA, a
  driver that cannot drive the GPU or is too old for CUDA 12, a GPU dropped by the driver's branch,
  a Jetson without a stack pointops runs on;
- torch: solver.pytorch_wheels' rules (releases >= pointops' floor, newest first; within one, the
  newest CUDA index the driver runs fully, else through minor-version compatibility, which needs
  SASS for the GPU; the wheels' SASS or PTX must cover the GPU, on a Jetson SASS of its exact arch);
  unlike a choice from the driver alone, an index whose wheels lack the GPU's arch is never taken;
- pointops: a CUDA 12.x index pairs with the CUDA 12 wheel (pointops-cu12), 13.x with pointops-cu13,
  the CPU index with pointops. The wheel is held to the same rules as torch, on its own arch list and
  its own CUDA version (it is built with another minor than torch's index, e.g. 12.9 beside cu126);
- the newest (torch release, index) pair where both fit wins; a pair skipped for pointops alone is
  named in the reasons. --torch pins the release, --cuda the index's CUDA version; a pinned
  X.Y.Z must be a release the knowledge names (X.Y.0 of a listed minor, or a conda-forge patch), as
  for --format conda;
- CPU: PyTorch's CPU index on Linux and Windows, PyPI alone on macOS arm64 (PyTorch's macOS wheels
  are on PyPI); osx-64 has no torch wheel pointops can use.
- Python: pip cannot choose the interpreter; --python is recorded (a comment for pip,
  requires-python for uv), and must be >= pointops' floor.
- --with: a channel package with a wheel of ours (channel_packages.yaml `pip.wheel`, a pure
  wheel of pointops_builds.yaml) goes beside the pointops wheel, with the extra that names that wheel
  (pointnet2_ops[cu13]); one no index carries for current torch (mmcv) is refused, pointing at the
  conda plan.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from solver.knowledge import ChannelPackage, Knowledge, PointopsWheel, arch_coverage
from solver.knowledge.pointops import PureWheel
from solver.plan import (
    PlanError,
    WithRequest,
    _describe_gpu,
    _driver_floor_warnings,
    check_gpu_target,
    check_torch_floor,
    refuse_cuda_without_gpu,
)
from solver.pytorch_wheels import WheelChoice, WheelIndex, WheelTable
from solver.sources import wheel_release_note
from solver.target import Target
from solver.vocabulary import os_word, parse_version

# The environment markers of each platform (uv's `environments`: resolve for the target alone).
MARKERS = {
    "linux-64": "sys_platform == 'linux' and platform_machine == 'x86_64'",
    "linux-aarch64": "sys_platform == 'linux' and platform_machine == 'aarch64'",
    "win-64": "sys_platform == 'win32' and platform_machine == 'AMD64'",
    "osx-arm64": "sys_platform == 'darwin' and platform_machine == 'arm64'",
}


@dataclass(frozen=True)
class TorchSource:
    """Where torch comes from: an index on PyTorch's server ("cu130", "cpu"), or PyPI alone."""

    tag: str | None  # None: PyPI
    url: str | None
    cuda: str | None  # the index's CUDA version; None for cpu / PyPI

    @property
    def name(self) -> str:
        """The name a uv project gives the index."""
        return f"pytorch-{self.tag}"


@dataclass(frozen=True)
class WithWheel:
    """A --with package's wheel, installed beside the pointops wheel through the matching extra."""

    package: ChannelPackage
    wheel: PureWheel
    extra: str  # "cu13"

    @property
    def distribution(self) -> str:
        return self.wheel.distribution

    @property
    def requirement(self) -> str:
        return f"{self.distribution}[{self.extra}]=={self.wheel.version}"


@dataclass
class PipPlan:
    target: Target
    torch: str  # release, "2.14"
    source: TorchSource
    wheel: PointopsWheel
    pointops_version: str
    python_min: str  # pointops' floor
    python: str | None = None  # --python
    torch_exact: str | None = None  # --torch X.Y.Z
    driver_mode: dict[str, str] = field(default_factory=dict)  # "torch"/"pointops" -> "full"/"mvc"
    coverage: dict[str, str] = field(default_factory=dict)  # "torch"/"pointops" -> "sass"/"ptx"
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    with_wheels: list[WithWheel] = field(default_factory=list)

    @property
    def torch_requirement(self) -> str:
        return f"torch=={self.torch_exact or self.torch + '.*'}"

    @property
    def pointops_requirement(self) -> str:
        return f"{self.wheel.distribution}=={self.pointops_version}"

    @property
    def requires_python(self) -> str:
        return f"=={self.python}.*" if self.python else f">={self.python_min}"

    def requirements(self) -> list[str]:
        return [self.torch_requirement, self.pointops_requirement] + [w.requirement for w in self.with_wheels]


@dataclass(frozen=True)
class _Fit:
    wheel: PointopsWheel
    mode: str
    coverage: str


def make_pip_plan(
    kb: Knowledge,
    table: WheelTable,
    target: Target,
    python: str | None = None,
    torch: str | None = None,
    cuda: str | None = None,
    requests: list[WithRequest] = (),
) -> PipPlan:
    """The newest torch index and pointops wheel that both fit the target, or PlanError saying why
    none does (exit 1; 2 for a flag that cannot apply). `requests` (--with) add their wheels."""
    for request in requests:
        _check_with_wheel(kb, request, python)
    python_min = kb.pointops["python_min"]
    if python is not None and parse_version(python) < parse_version(python_min):
        raise PlanError(
            f"pointops' wheels need Python >= {python_min} (they are abi3 wheels for {python_min} and "
            f"newer); --python {python} is older. Pass --python {python_min} or newer."
        )
    releases = _releases(kb, table, torch)
    if not target.has_gpu:
        refuse_cuda_without_gpu(cuda)
        plan = _cpu_plan(kb, table, target, releases)
    else:
        plan = _gpu_plan(kb, table, target, releases, cuda)
    plan.python = python
    if torch is None:
        note = wheel_release_note(kb, target.platform, plan.torch)
        if note:
            plan.reasons.append(note)
    plan.torch_exact = torch if torch is not None and len(parse_version(torch)) > 2 else None
    if plan.torch_exact:
        plan.reasons.append(f"torch {plan.torch_exact}: as asked (--torch)")
    plan.reasons.append(
        f"Python {python}: as asked; pip does not choose the interpreter, so run the install with it"
        if python
        else f"Python >= {python_min}: pointops' abi3 wheels; pip installs into the Python that runs it"
    )
    plan.with_wheels = [_with_wheel(plan, request) for request in requests]
    return plan


def _check_with_wheel(kb: Knowledge, request: WithRequest, python: str | None) -> None:
    """A --with package without a wheel of ours: no index carries it for the torch releases pointops
    supports; the fix is the conda plan. A --python its wheel is not for is refused too."""
    package, pip = request.package, request.package.pip
    if pip.wheel is None:
        carried = " and ".join(f"{v} up to torch {t}" for v, t in pip.newest_torch.items())
        specs = " ".join(f"--with {shlex.quote(text)}" for text in request.specs)
        built = (
            f" (the pointops channel builds it for pytorch {', '.join(package.torch)})"
            if package.torch
            else ""
        )
        raise PlanError(
            f"no pip or uv index carries {package.name} for torch {kb.pointops.torch_min} or newer: "
            f"{pip.index} has {package.name} {carried}, and PyPI only its source. Use the conda plan: "
            f"`solver make-env {specs}` with the same flags and no --format{built}."
        )
    if pip.wheel.version not in request.versions:
        texts = " and ".join(f"--with {shlex.quote(t)}" for t in request.specs)
        raise PlanError(
            f"the {pip.wheel.distribution} wheel is version {pip.wheel.version}, which {texts} does not "
            f"allow. Pass --with {package.name}, or use the conda plan (--format conda)."
        )
    if python is not None and not package.built_for_python(python):
        raise PlanError(
            f"{pip.wheel.distribution}'s wheel is for Python {package.describe_pythons()}; --python {python} is "
            "not one of them. Pass one of those to --python, or drop --python."
        )


def _with_wheel(plan: PipPlan, request: WithRequest) -> WithWheel:
    """The package's wheel with the extra that installs the planned pointops wheel."""
    package = request.package
    pure = package.pip.wheel
    extra = package.pip.extra_for(plan.wheel.distribution)
    if extra is None:
        raise PlanError(
            f"{pure.distribution} has no extra that installs {plan.wheel.distribution} (it has "
            f"{', '.join(pure.extras)}). Use the conda plan (--format conda), or drop --with "
            f"{shlex.quote(request.specs[0])}."
        )
    wheel = WithWheel(package, pure, extra)
    plan.reasons.append(
        f"{wheel.requirement}: pure Python, beside {plan.wheel.distribution} (its [{extra}] extra names "
        "that wheel, so pip installs no other pointops wheel over it)"
    )
    return wheel


def _releases(kb: Knowledge, table: WheelTable, torch: str | None) -> list[str]:
    """torch minors of the wheel table that pointops supports, newest first, matching --torch."""
    floor = kb.pointops["torch_min"]
    known = sorted(
        (t for t in table.releases if parse_version(t) >= parse_version(floor)),
        key=parse_version,
        reverse=True,
    )
    if torch is None:
        return known
    check_torch_floor(kb, torch, "torch")
    wanted = parse_version(torch)[:2]
    matching = [t for t in known if parse_version(t) == wanted]
    if not matching:
        raise PlanError(
            f"the solver knows no PyTorch wheels of torch {torch} (known: "
            f"{', '.join(sorted(known, key=parse_version))}). Pass one of those to --torch."
        )
    if len(parse_version(torch)) > 2:
        _check_patch_release(kb, matching[0], torch)
    return matching


def known_patch_releases(kb: Knowledge, minor: str) -> list[str]:
    """The X.Y.Z releases of torch `minor` the solver knows to exist: X.Y.0 (the wheel table lists
    the minor), and every patch conda-forge built (pytorch.yaml; conda-forge packages PyTorch's
    own releases under their version numbers)."""
    releases = {f"{minor}.0"} | {
        r.version for r in kb.pytorch_releases if parse_version(r.version)[:2] == parse_version(minor)
    }
    return sorted(releases, key=parse_version)


def _check_patch_release(kb: Knowledge, minor: str, torch: str) -> None:
    """--torch X.Y.Z must be a release the solver knows, as for --format conda: a pin of a release
    that does not exist makes a file pip cannot install."""
    known = known_patch_releases(kb, minor)
    if parse_version(torch) not in {parse_version(v) for v in known}:
        raise PlanError(
            f"the solver knows no PyTorch wheels of torch {torch} (known: {', '.join(known)}). Pass one "
            f"of those to --torch, or --torch {minor} for the newest {minor} release."
        )


def _cpu_plan(kb: Knowledge, table: WheelTable, target: Target, releases: list[str]) -> PipPlan:
    wheel = next((w for w in kb.pointops_wheels(target.platform) if w.cuda_version is None), None)
    if target.platform == "osx-64" or wheel is None:
        raise PlanError(
            f"no pip environment exists for {target.platform}: pointops publishes no wheel for it"
            + (
                ", and PyTorch's last macOS x86_64 wheels are torch 2.2, older than pointops' floor "
                f"{kb.pointops['torch_min']}"
                if target.platform == "osx-64"
                else ""
            )
            + ". Use --format conda (conda-forge builds pytorch and pointops for it)."
        )
    torch = releases[0]
    if target.os == "osx":
        source = TorchSource(None, None, None)
        where = "from PyPI, where PyTorch's macOS wheels are (CPU, and the MPS backend): no extra index"
    else:
        source = TorchSource("cpu", table.url("cpu"), None)
        where = f"from PyTorch's CPU index {source.url}: CPU-only wheels"
    plan = PipPlan(
        target=target,
        torch=torch,
        source=source,
        wheel=wheel,
        pointops_version=kb.pointops["version"],
        python_min=kb.pointops["python_min"],
    )
    plan.reasons.extend(target.notes)
    plan.reasons.append(f"torch {torch} {where}; the newest release there that pointops supports")
    plan.reasons.append(f"{wheel.distribution} {plan.pointops_version}: the CPU wheel for {target.platform}")
    return plan


def _gpu_plan(
    kb: Knowledge, table: WheelTable, target: Target, releases: list[str], cuda: str | None
) -> PipPlan:
    stack = check_gpu_target(kb, target, cuda)
    cc = target.compute_capability
    if cc is None:
        raise PlanError(
            f"the compute capability of the {target.gpu_name} is unknown, and a wheel index can be "
            "chosen only against it (PyTorch's indexes differ in the archs their wheels carry). Give it: "
            "--gpu 'NAME:X.Y' or CONDA_OVERRIDE_CUDA_ARCH=X.Y, or pass --gpu none for a CPU environment."
        )
    tegra = stack is not None
    # A Jetson's own driver (JetPack 6 numbering) is not held to the desktop minor-version minimums.
    driver = None if stack is not None and stack.driver_series is not None else target.driver_version
    if cuda is not None:
        _check_cuda_pin(kb, table, target, releases, cuda)
    skipped: list[tuple[WheelChoice, str]] = []
    for choice in table.candidates(kb, target.platform, cc, target.driver_cuda, driver, tegra):
        if choice.torch not in releases or (cuda is not None and choice.index.cuda != cuda):
            continue
        fit, problem = _pointops_fit(kb, target, choice.index.cuda, tegra, driver)
        if fit is None:
            skipped.append((choice, problem))
            continue
        return _gpu_result(kb, table, target, releases, choice, fit, skipped, tegra, driver)
    raise PlanError(_explain(kb, table, target, releases, cuda, skipped, tegra))


def _wheel_of_major(kb: Knowledge, platform: str, major: int) -> PointopsWheel | None:
    return next(
        (
            w
            for w in kb.pointops_wheels(platform)
            if w.cuda_version and parse_version(w.cuda_version)[0] == major
        ),
        None,
    )


def _required_driver(kb: Knowledge, cuda: str, coverage: str, os_name: str) -> str:
    """The oldest driver that runs binaries of `cuda` covering the GPU so (MVC needs SASS)."""
    mvc = kb.mvc_min_driver(parse_version(cuda)[0], os_name) if coverage == "sass" else None
    return mvc or kb.cuda_min_driver(cuda, os_name)


def _pointops_fit(
    kb: Knowledge, target: Target, index_cuda: str, tegra: bool, driver: str | None
) -> tuple[_Fit | None, str]:
    """The pointops wheel for a torch index of CUDA `index_cuda`, if it runs on the target; else why not."""
    major = parse_version(index_cuda)[0]
    wheel = _wheel_of_major(kb, target.platform, major)
    cc = target.compute_capability
    if wheel is None:
        return None, f"pointops publishes no CUDA {major} wheel for {target.platform}"
    coverage = arch_coverage(cc, wheel.archs, tegra)
    if coverage is None:
        return None, f"{wheel.distribution} carries {wheel.archs.describe()}, no code for {cc}"
    mode = kb.driver_runs_cuda(target.driver_cuda, wheel.cuda_version, driver, target.os)
    if mode is None:
        need = _required_driver(kb, wheel.cuda_version, coverage, target.os)
        return None, f"{wheel.distribution} (CUDA {wheel.cuda_version}) needs driver >= {need}"
    if mode == "mvc" and coverage != "sass":
        return None, (
            f"only PTX covers {cc} in {wheel.distribution}, and its CUDA {wheel.cuda_version} would need "
            "minor-version compatibility"
        )
    return _Fit(wheel, mode, coverage), ""


def _why_not_index(
    kb: Knowledge, target: Target, index: WheelIndex, tegra: bool, driver: str | None, chosen: WheelChoice
) -> str:
    """Why the wheels of an index were not taken (for the reasons; the choice is solver.pytorch_wheels')."""
    cc = target.compute_capability
    archs = index.archs.get(target.platform)
    if not archs:
        return "its arch list is not recorded"
    coverage = arch_coverage(cc, archs, tegra)
    if coverage is None:
        return f"its wheels carry {archs.describe()}, no code for {cc}"
    mode = kb.driver_runs_cuda(target.driver_cuda, index.cuda, driver, target.os)
    if mode is None:
        return f"needs driver >= {_required_driver(kb, index.cuda, coverage, target.os)}"
    if mode == "mvc" and coverage != "sass":
        return f"only PTX covers {cc} there, and CUDA {index.cuda} would need minor-version compatibility"
    if mode == "mvc":
        return f"minor-version compatibility only; the driver runs {chosen.index.tag} fully"
    return f"older CUDA than {chosen.index.tag}"


def _source(index: WheelIndex) -> TorchSource:
    return TorchSource(index.tag, index.url, index.cuda)


def _gpu_result(
    kb: Knowledge,
    table: WheelTable,
    target: Target,
    releases: list[str],
    choice: WheelChoice,
    fit: _Fit,
    skipped: list[tuple[WheelChoice, str]],
    tegra: bool,
    driver: str | None,
) -> PipPlan:
    cc = target.compute_capability
    plan = PipPlan(
        target=target,
        torch=choice.torch,
        source=_source(choice.index),
        wheel=fit.wheel,
        pointops_version=kb.pointops["version"],
        python_min=kb.pointops["python_min"],
        driver_mode={"torch": choice.mode, "pointops": fit.mode},
        coverage={"torch": choice.coverage, "pointops": fit.coverage},
    )
    driver_text = f"driver {target.driver_version}" if target.driver_version else "the driver"
    plan.reasons.append(f"GPU: {_describe_gpu(kb, target)}")
    plan.reasons.append(f"{driver_text} runs CUDA <= {target.driver_cuda}")
    plan.reasons.extend(target.notes)
    pointops_skipped = {(c.torch, c.index.tag): problem for c, problem in skipped}
    newer = [t for t in releases if parse_version(t) > parse_version(choice.torch)]
    if newer:
        why = sorted(
            {
                f"{i.tag} ({pointops_skipped.get((t, i.tag)) or _why_not_index(kb, target, i, tegra, driver, choice)})"
                for t in newer
                for i in table.indexes_for(t)
            }
        )
        plan.reasons.append(f"torch {', '.join(sorted(newer, key=parse_version))} skipped: {'; '.join(why)}")
    others = [
        f"{i.tag} ({pointops_skipped.get((choice.torch, i.tag)) or _why_not_index(kb, target, i, tegra, driver, choice)})"
        for i in table.indexes_for(choice.torch)
        if i.tag != choice.index.tag
    ]
    plan.reasons.append(
        f"torch {choice.torch} from {choice.index.url}: the newest torch and CUDA index whose wheels carry "
        f"{'SASS' if choice.coverage == 'sass' else 'PTX'} for {cc} and run on this driver, with a "
        "pointops wheel that does too" + (f"; not {'; '.join(others)}" if others else "")
    )
    wheel = fit.wheel
    plan.reasons.append(
        f"{wheel.distribution} {plan.pointops_version}: pointops' wheel for CUDA "
        f"{parse_version(wheel.cuda_version)[0]} indexes, built with CUDA {wheel.cuda_version} for "
        f"{wheel.archs.describe()}"
    )
    for what, mode in (
        (f"the {choice.index.tag} torch wheels (CUDA {choice.index.cuda}) run", choice.mode),
        (f"{wheel.distribution} (CUDA {wheel.cuda_version}) runs", fit.mode),
    ):
        if mode == "mvc":
            plan.reasons.append(
                f"{what} on this driver through minor-version compatibility, with SASS for {cc}"
            )
    ptx = [k for k in ("torch", "pointops") if plan.coverage[k] == "ptx"]
    if ptx:
        plan.warnings.append(
            f"only PTX covers compute capability {cc} in {' and '.join(ptx)}: kernels are JIT-compiled "
            "by the driver on first use (slow first start)"
        )
    plan.warnings.extend(_driver_floor_warnings(kb, target))
    arch = kb.architecture(cc)
    if arch and arch.last_branch and arch.last_branch >= 580 and not tegra:
        plan.warnings.append(
            f"{arch.family} GPUs are supported up to driver R{arch.last_branch} only, and CUDA 13 "
            "wheels no longer target them: this machine stays on CUDA 12 wheels"
        )
    return plan


def _pairs_ignoring_driver(
    kb: Knowledge, table: WheelTable, target: Target, releases: list[str], cuda: str | None, tegra: bool
) -> list[tuple[str, str]]:
    """(oldest driver, what it is for) of each (torch index, pointops wheel) pair covering the GPU."""
    cc, needs = target.compute_capability, []
    for torch in releases:
        for index in table.indexes_for(torch):
            archs = index.archs.get(target.platform)
            major = parse_version(index.cuda)[0]
            wheel = _wheel_of_major(kb, target.platform, major)
            if not archs or wheel is None or (cuda is not None and index.cuda != cuda):
                continue
            torch_cov, ops_cov = arch_coverage(cc, archs, tegra), arch_coverage(cc, wheel.archs, tegra)
            if not (torch_cov and ops_cov):
                continue
            need = max(
                _required_driver(kb, index.cuda, torch_cov, target.os),
                _required_driver(kb, wheel.cuda_version, ops_cov, target.os),
                key=parse_version,
            )
            # through minor-version compatibility any driver of the major will do: name the major only
            newest = max(index.cuda, wheel.cuda_version, key=parse_version)
            needs.append(
                (need, f"CUDA {major}" if need == kb.mvc_min_driver(major, target.os) else f"CUDA {newest}")
            )
    return needs


def _explain(
    kb: Knowledge,
    table: WheelTable,
    target: Target,
    releases: list[str],
    cuda: str | None,
    skipped: list[tuple[WheelChoice, str]],
    tegra: bool,
) -> str:
    """One or two sentences: why no pair fits, and a fix that works."""
    gpu = _describe_gpu(kb, target)
    pinned = f" (--cuda {cuda})" if cuda else ""
    cpu = "pass --gpu none for a CPU environment"
    if skipped:
        pairs = "; ".join(f"torch {c.torch} {c.index.tag}: {problem}" for c, problem in skipped)
        return (
            f"PyTorch's wheels{pinned} fit {gpu} and this driver, but no pointops wheel beside them does "
            f"({pairs}). {_conda_or_cpu(kb, target)}"
        )
    needs = _pairs_ignoring_driver(kb, table, target, releases, cuda, tegra)
    if needs:
        need, what = min(needs, key=lambda n: parse_version(n[0]))
        driver_text = f"driver {target.driver_version}" if target.driver_version else "the driver"
        return (
            f"{driver_text} runs CUDA <= {target.driver_cuda}; PyTorch's and pointops' CUDA wheels{pinned} "
            f"for this GPU need {what}, i.e. driver >= {need} on {os_word(target.os)}. "
            f"Upgrade the driver, or {cpu}."
        )
    if cuda is not None:
        unpinned = _gpu_plan(kb, table, target, releases, None)  # raises the refusal without --cuda
        fix = (
            f"Drop --cuda (torch {unpinned.torch} {unpinned.source.tag} fits), or pass --gpu none for a "
            "CPU environment."
        )
    else:
        fix = _conda_or_cpu(kb, target)
    carried = sorted(
        {
            f"{i.tag} carries {i.archs[target.platform].describe()}"
            for t in releases
            for i in table.indexes_for(t)
            if target.platform in i.archs and (cuda is None or i.cuda == cuda)
        }
    )
    exact = f"; a Jetson needs SASS for exactly {target.compute_capability}" if tegra else ""
    return (
        f"no PyTorch CUDA wheel for {target.platform}{pinned} runs on {gpu} with a pointops wheel beside "
        f"it: {'; '.join(carried) or 'no arch list is recorded'}{exact}. {fix}"
    )


def _conda_or_cpu(kb: Knowledge, target: Target) -> str:
    """The fix: the conda plan when it exists for this target, else a CPU environment."""
    from solver.plan import make_plan

    try:
        plan = make_plan(kb, target)
    except PlanError:
        return "Pass --gpu none for a CPU environment."
    return (
        f"Use --format conda (conda-forge's pytorch {plan.pytorch_minor} {plan.variant} builds fit), "
        "or pass --gpu none for a CPU environment."
    )


def _check_cuda_pin(kb: Knowledge, table: WheelTable, target: Target, releases: list[str], cuda: str) -> None:
    """--cuda naming a CUDA version no index of these releases has: name those it has, and those that
    plan for this GPU and driver."""
    have = sorted(
        {i.cuda for t in releases for i in table.indexes_for(t) if target.platform in i.archs},
        key=parse_version,
    )
    if cuda in have:
        return
    fitting = []
    for version in have:
        try:
            _gpu_plan(kb, table, target, releases, version)
        except PlanError:
            continue
        fitting.append(version)
    where = f"torch {', '.join(sorted(releases, key=parse_version))}"
    message = f"PyTorch has no CUDA {cuda} wheel index for {where} (it has {', '.join(have)})"
    if not fitting:
        _gpu_plan(kb, table, target, releases, None)  # raises the refusal that holds without --cuda
        raise PlanError(f"{message}, and none fits this GPU and driver. Drop --cuda.")
    if fitting == have:
        raise PlanError(f"{message}. Pass one of those to --cuda, or drop --cuda.")
    raise PlanError(
        f"{message}; {' and '.join(fitting)} {'fits' if len(fitting) == 1 else 'fit'} this GPU and driver. "
        f"Pass --cuda {fitting[-1]}, or drop --cuda."
    )
