"""mmcv (OpenMMLab) and the packages built on it (mmdet, mmdet3d, mmseg ...): their classic
failures, recognised by the messages users see, each with the fix that fits.

- `import mmcv.ops` fails with "No module named 'mmcv._ext'": mmcv-lite (no compiled ops by design),
  an mmcv built without its ops, an _ext deleted after install or made for another Python, or a
  source checkout on sys.path hiding the built package;
- "undefined symbol" in mmcv/_ext*.so: built for another torch (both versions named), another
  libstdc++, or an incomplete build;
- mmdet's "MMCV==X is used but incompatible. Please install mmcv>=A, <B.": the installed mmcv,
  the range the package asks for (its message and its METADATA) and a version that fits;
- "no kernel image is available for execution on the device": _ext has no code for the GPU (its
  fat binaries read from the file, no kernel run), check gpu.mmcv-archs;
- a private libstdc++ in _ext: extensions.libstdcxx scans mmcv's folder and takes its fix from here.

mmcv's _ext uses PyTorch's full C++ ABI, so a build runs with the torch minor it was built for only.
The fix for a wrong build is the channel's package made for the installed torch (recipes/mmcv: build
strings `<cpu|cudaXYZ>_torch<XY>_py<XY>_...`), never `pip install mmcv`, which builds against
whatever torch pip picks; every pip command here has --no-deps.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
import shlex
from pathlib import Path

from .dists import DistOrigin, InstalledDist, reinstall_command
from .facts import BinaryFact, Facts, ImportFact, MmcvDependent, MmcvFacts, MmcvInstall
from .findings import Finding, failed, info, warned

IMPORT_CHECK = "extensions.import"
ARCH_CHECK = "gpu.mmcv-archs"
INSTALL_CHECK = "mmcv.installations"
OPS_MODULE = "mmcv.ops"  # what loads _ext, as users import it (`import mmcv` alone does not)
MMCV_NAMES = ("mmcv", "mmcv-full", "mmcv-lite")
CHANNEL = "conda install -c pointops -c conda-forge"
_EXT = re.compile(r"^mmcv/_ext(\.[^/]*)?\.(so|pyd)$")
# mmdet/mmdet3d/mmseg's own check of the mmcv (or mmengine) they import, as the message reads
INCOMPATIBLE = re.compile(
    r"(?P<what>[\w-]+)==(?P<installed>\S+) is used but incompatible\. "
    r"Please install (?P<wanted>[A-Za-z][\w-]*)(?P<range>[^\n]*?)\.?$",
    re.MULTILINE,
)
_TORCH_NAMESPACE = re.compile(r"^_ZNK?(3c10|2at|5torch|6caffe2)")
_STD_NAMESPACE = re.compile(r"^_Z(NK?)?St")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------- versions and ranges


def _version_key(version: str) -> tuple:
    """'2.0.0rc4' -> ((2, 0, 0, 0), 2, 4): a pre-release sorts before its release."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)(?:[.-]?(a|b|rc)(\d*))?", version)
    if not match:
        return ((0,), -1, 0)
    release = tuple(int(p) for p in match.group(1).split("."))
    release += (0,) * (4 - len(release))
    stage = {"a": 0, "b": 1, "rc": 2}.get(match.group(2) or "", 3)
    return release, stage, int(match.group(3) or 0)


def _specifier(requirement: str) -> str:
    """'mmcv<2.2.0,>=2.0.0rc4; extra == "mim"' -> '<2.2.0,>=2.0.0rc4'."""
    text = requirement.split(";")[0]
    text = re.sub(r"^\s*[A-Za-z0-9._-]+\s*(\[[^\]]*\])?", "", text)
    return text.strip().strip("()").replace(" ", "")


_COMPARE = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}


def _compatible(have: tuple, wanted: str) -> bool:
    """'~=2.1.0': >= 2.1.0 and == 2.1.*."""
    parts = re.match(r"\d+(?:\.\d+)*", wanted).group(0).split(".")
    prefix = tuple(int(p) for p in parts[:-1])
    return have >= _version_key(wanted) and have[0][: len(prefix)] == prefix


def satisfies(version: str, specifier: str) -> bool:
    """PEP 440 comparisons enough for mmcv's ranges; a clause that cannot be read does not exclude."""
    have = _version_key(version)
    for op, wanted in re.findall(r"(>=|<=|==|!=|~=|<|>)\s*(\d[\w.]*)", specifier):
        if op == "~=":
            holds = _compatible(have, wanted)
        elif op == "!=":
            holds = have != _version_key(wanted)
        else:
            holds = _COMPARE[op](have, _version_key(wanted))
        if not holds:
            return False
    return True


def _torch_minor(version: str | None) -> str:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else ""


# ---------------------------------------------------------------- gathering


def _package_of(dist: InstalledDist) -> Path | None:
    """The mmcv folder a distribution installed: listed in its RECORD, or an editable install's."""
    if dist.lists("mmcv/__init__.py"):
        return dist.site / "mmcv"
    origin = dist.origin
    if origin and origin.kind == "editable" and (Path(origin.location) / "mmcv" / "__init__.py").is_file():
        return Path(origin.location) / "mmcv"
    return None


def _read_archs(install: MmcvInstall) -> None:
    from solver.elf import read_cuda_archs

    first = install.ext_files[0] if install.ext_files else ""
    if not first:
        return
    if first.endswith(".pyd"):
        install.archs_error = "a Windows DLL: its GPU code is not read here"
        return
    code = read_cuda_archs(first)
    install.cuda_archs, install.archs_error = code.names, code.error


def _top_module(dist: InstalledDist) -> str:
    for recorded in dist.files:
        parts = recorded.path.split("/")
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier():
            return parts[0]
    return dist.name.replace("-", "_")


def gather_mmcv(installed: list[InstalledDist]) -> MmcvFacts:
    """Every installed mmcv folder (one per folder, the distributions that list it) and the packages
    that require mmcv; reads _ext's GPU archs."""
    by_folder: dict[str, MmcvInstall] = {}
    # a distribution that lists _ext first: with mmcv-lite installed over mmcv, the folder is mmcv's
    ordered = sorted(installed, key=lambda d: not any(_EXT.match(f.path) for f in d.files))
    for dist in ordered:
        package = _package_of(dist)
        if package is None:
            continue
        key = str(package)
        if key in by_folder:
            by_folder[key].others.append(f"{dist.name} {dist.version}")
            continue
        recorded = [f.path for f in dist.files if _EXT.match(f.path)]
        by_folder[key] = MmcvInstall(key, dist.name, dist.version, dist.origin, recorded_ext=recorded)
    for install in by_folder.values():
        found = [
            p for p in Path(install.package).glob("_ext*") if p.suffix in (".so", ".pyd") and p.is_file()
        ]
        install.ext_files = sorted(str(p) for p in found)
        _read_archs(install)
    dependents = []
    for dist in installed:
        if normalise(dist.name) in MMCV_NAMES:
            continue
        requirement = next(
            (r for r in dist.requires if normalise(re.split(r"[\s;<>=!~(\[]", r)[0]) in MMCV_NAMES), ""
        )
        if requirement:
            dependents.append(MmcvDependent(_top_module(dist), dist.name, dist.version, requirement))
    return MmcvFacts(installs=list(by_folder.values()), dependents=dependents)


def import_modules(mmcv: MmcvFacts) -> list[ImportFact]:
    """What the runtime probe imports for mmcv: mmcv.ops (which loads _ext), then each dependent."""
    found = []
    if mmcv.installs:
        first = mmcv.installs[0]
        found.append(ImportFact(OPS_MODULE, first.distribution, first.version, origin=first.origin))
    for dependent in mmcv.dependents:
        if all(dependent.module != m.module for m in found):
            found.append(ImportFact(dependent.module, dependent.distribution, dependent.version))
    return found


def same_spelling(imports: list[ImportFact], mmcv: MmcvFacts) -> list[ImportFact]:
    """Gathering: the folder an import found, spelled as the install it is (a path through a
    symbolic link is the same folder), so that checks compare text only."""

    def resolved(path: str) -> Path:
        try:
            return Path(path).resolve()
        except OSError:
            return Path(path)

    packages = {resolved(i.package): i.package for i in mmcv.installs}
    return [
        dataclasses.replace(m, path=packages.get(resolved(m.path), m.path)) if m.path else m for m in imports
    ]


# ---------------------------------------------------------------- the fix: the channel's build


def _build_glob(facts: Facts) -> str:
    """The channel's build string for the installed torch: 'cpu_torch213_*', 'cuda*_torch211_*'."""
    minor = _torch_minor(facts.torch.version)
    if not minor:
        return "*"
    kind = "cuda*" if facts.torch.cuda else "cpu"
    return f"{kind}_torch{minor.replace('.', '')}_*"


@functools.lru_cache(maxsize=1)
def channel_versions() -> tuple[str, ...]:
    """The mmcv versions the channel builds, newest first (the knowledge's channel_packages table,
    which a test keeps equal to recipes/mmcv)."""
    from solver.knowledge import load

    package = load().channel_package("mmcv")
    return package.versions if package is not None else ()


def channel_version(facts: Facts, specifier: str = "") -> str:
    """The mmcv version the channel builds that fits every dependent and `specifier`, the installed
    one when it does ("" when none fits)."""
    ranges = [_specifier(d.requirement) for d in facts.mmcv.dependents] + [specifier]
    fitting = [v for v in channel_versions() if all(satisfies(v, r) for r in ranges)]
    installed = facts.mmcv.installs[0].version.split("+")[0] if facts.mmcv.installs else ""
    return installed if installed in fitting else (fitting[0] if fitting else "")


def _removal(install: MmcvInstall | None) -> str:
    """What takes a pip-installed mmcv away before conda installs its own (conda replaces its own)."""
    if install is None or (install.origin is not None and install.origin.kind == "conda"):
        return ""
    names = [install.distribution, *(other.split()[0] for other in install.others)]
    return f"pip uninstall -y {' '.join(names)} && "


def _source_build(facts: Facts, specifier: str) -> str:
    """No channel build fits (an mmdet 2.x wants mmcv-full 1.x): build the one asked for from source
    against the installed torch."""
    asked = facts.mmcv.dependents[0].requirement if facts.mmcv.dependents else "mmcv"
    name = normalise(re.split(r"[\s;<>=!~(\[]", asked)[0]) or "mmcv"
    wanted = specifier or _specifier(asked)
    return (
        f"the channel builds mmcv {' and '.join(sorted(channel_versions()))}, none in {wanted}: build {name} from "
        f"source against this torch: MMCV_WITH_OPS=1 pip install --no-deps --no-build-isolation --no-binary "
        f'{name} "{name}{wanted}"'
    )


def channel_fix(facts: Facts, specifier: str = "", replacing: MmcvInstall | None = None) -> str:
    """Install the channel's mmcv built for this torch: into this conda environment (in place of
    `replacing`) when conda owns its pytorch, else a new environment planned by make-env."""
    version = channel_version(facts, specifier)
    if not version:
        return _source_build(facts, specifier)
    conda_torch = any(r.name in ("pytorch", "libtorch") for r in facts.conda.records)
    if facts.conda.prefix is not None and conda_torch:
        return (
            f'{_removal(replacing)}{CHANNEL} "mmcv={version}={_build_glob(facts)}"  '
            f"(the channel's mmcv {version} built for this torch)"
        )
    return (
        f'solver make-env --gpu auto --with "mmcv={version}" > env.yml && conda env create -f env.yml  '
        f"(a conda environment with the channel's mmcv {version} and the torch it was built for)"
    )


# ---------------------------------------------------------------- "No module named 'mmcv._ext'"


def _who(install: MmcvInstall) -> str:
    return f"{install.distribution} {install.version}".strip()


def _imported_install(result: ImportFact, facts: Facts) -> MmcvInstall | None:
    """The install `import mmcv` got (gathering spelled the imported folder as the install's)."""
    installs = facts.mmcv.installs
    if result.path:
        return next((i for i in installs if i.package == result.path), None)
    return installs[0] if installs else None


def _is_lite(install: MmcvInstall) -> bool:
    name = normalise(install.distribution)
    return name == "mmcv-lite" or (name == "mmcv" and _version_key(install.version)[0][0] < 2)


def _python_tag(path: str) -> str:
    match = re.search(r"\.cpython-(\d)(\d+)", Path(path).name)
    return f"{match.group(1)}.{match.group(2)}" if match else ""


def _site_python(install: MmcvInstall) -> str:
    match = re.search(r"python(\d+\.\d+)", install.package)
    return match.group(1) if match else ""


def _no_ext_shadowed(result: ImportFact, facts: Facts) -> Finding:
    installed, where = facts.mmcv.installs, Path(result.path)
    if not installed:
        return failed(
            IMPORT_CHECK,
            f"mmcv.ops (no distribution): `import mmcv` gets {where}, which has no compiled _ext, and no "
            "distribution installed mmcv here: a source checkout that was never built",
            result.error[:300],
            channel_fix(facts),
        )
    return failed(
        IMPORT_CHECK,
        f"mmcv.ops ({_who(installed[0])}): `import mmcv` gets {where}, not the installed "
        f"{installed[0].package}: a source checkout on sys.path (the current folder or PYTHONPATH) hides "
        "the built package, and it has no compiled _ext",
        result.error[:300],
        f"run from another folder, or take {where.parent} out of PYTHONPATH",
    )


def _no_ext(result: ImportFact, facts: Facts) -> Finding:
    install = _imported_install(result, facts)
    if install is None:
        return _no_ext_shadowed(result, facts)
    who, error = _who(install), result.error[:300]
    overlap = (
        f"; {' and '.join(install.others)} also installed into {install.package}" if install.others else ""
    )
    if _is_lite(install):
        return failed(
            IMPORT_CHECK,
            f"mmcv.ops ({who}): {install.distribution} is mmcv without its compiled ops (mmcv-lite), so "
            "`import mmcv.ops` fails",
            error + overlap,
            channel_fix(facts, replacing=install),
        )
    if install.recorded_ext and not install.ext_files:
        fix = channel_fix(facts, replacing=install)
        if install.origin and install.origin.kind == "wheel" and install.origin.location_exists:
            fix = reinstall_command(install.origin)
        return failed(
            IMPORT_CHECK,
            f"mmcv.ops ({who}): its compiled ops were deleted after install",
            f"{', '.join(install.recorded_ext)} is in its RECORD but missing{overlap}",
            fix,
        )
    if not install.ext_files:
        return failed(
            IMPORT_CHECK,
            f"mmcv.ops ({who}): this mmcv was built without its compiled ops (MMCV_WITH_OPS=0): its RECORD "
            "lists no mmcv/_ext and its folder has none",
            f"{error}; {install.package}{overlap}",
            channel_fix(facts, replacing=install),
        )
    ext = install.ext_files[0]
    made_for, python = _python_tag(ext), _site_python(install)
    for_python = f"made for Python {made_for}" if made_for else "named for another Python"
    return failed(
        IMPORT_CHECK,
        f"mmcv.ops ({who}): its _ext is {for_python}"
        + (f", and this environment's Python is {python}" if python else "")
        + ", so the import does not see it",
        f"{ext}; {error}",
        channel_fix(facts, replacing=install),
    )


# ---------------------------------------------------------------- "undefined symbol" in _ext


def _conda_pin(install: MmcvInstall, facts: Facts) -> tuple[str, str]:
    """(torch minor, evidence) from the install's conda record: its pytorch pin, or its build string."""
    record = next((r for r in facts.conda.records if r.name == normalise(install.distribution)), None)
    if record is None:
        return "", ""
    package = f"{record.name}-{record.version}-{record.build}"
    for depend in record.depends:
        pinned = re.search(r"(\d+\.\d+)", depend)
        if depend.split(" ")[0] in ("pytorch", "libtorch") and pinned:
            return pinned.group(1), f"its conda package {package} needs {depend}"
    tag = re.search(r"torch(\d)(\d+)", record.build)
    return (f"{tag.group(1)}.{tag.group(2)}", f"its conda build string {record.build}") if tag else ("", "")


def built_for_torch(install: MmcvInstall, facts: Facts) -> tuple[str, str]:
    """(torch minor, where that was read) for the torch this mmcv was built against; ('', '') unknown.

    Read from its conda record (the pytorch pin, the build string's torchXY), a torch tag in its
    version ('+pt21cu121', '+torch2.1'), or the address it was installed from (OpenMMLab's wheel
    indexes are laid out as .../cu121/torch2.1.0/)."""
    pinned = _conda_pin(install, facts)
    if pinned[0]:
        return pinned
    tag = re.search(r"\+.*?(?:pt|torch)(\d)\.?(\d+)", install.version)
    if tag:
        return f"{tag.group(1)}.{tag.group(2)}", f"its version {install.version}"
    location = install.origin.location if install.origin else ""
    tag = re.search(r"torch[-_]?(\d+\.\d+)", location)
    return (tag.group(1), f"it was installed from {location}") if tag else ("", "")


def _torch_mismatch(install: MmcvInstall | None, facts: Facts) -> tuple[str, str]:
    """(summary, where the torch it was built for was read) of an _ext missing a torch symbol."""
    installed = f"torch {facts.torch.version or '?'}"
    minor, source = built_for_torch(install, facts) if install else ("", "")
    if not minor:
        return (
            f"its _ext was built for another torch than the installed {installed} (its metadata does not say "
            "which); torch's C++ ABI changes with every release",
            "the torch it was built for is in none of its metadata (a pip or source build)",
        )
    if minor == _torch_minor(facts.torch.version):
        return (
            f"its _ext was built for torch {minor} like the installed {installed}, yet a torch symbol is "
            "missing: it was built against another build of that torch (another C++ ABI setting)",
            source,
        )
    return (
        f"its _ext was built for torch {minor}, and this environment has {installed}; torch's C++ ABI "
        "changes with every release",
        source,
    )


def _undefined_symbol(result: ImportFact, symbol: str, facts: Facts) -> Finding:
    install = _imported_install(result, facts) or (facts.mmcv.installs or [None])[0]
    who = _who(install) if install else result.distribution
    evidence = f"{install.ext_files[0] if install and install.ext_files else 'mmcv/_ext'}: undefined symbol {symbol[:120]}"
    if _TORCH_NAMESPACE.match(symbol):
        summary, source = _torch_mismatch(install, facts)
        evidence += f"; {source}"
    elif _STD_NAMESPACE.match(symbol):
        summary = "its _ext needs a C++ standard library symbol the loaded libstdc++ lacks (built with another compiler)"
    else:
        summary = (
            f"its _ext uses {symbol[:80]}, which nothing defines: an incomplete build (an op left out of it)"
        )
    return failed(
        IMPORT_CHECK, f"mmcv.ops ({who}): {summary}", evidence, channel_fix(facts, replacing=install)
    )


# ---------------------------------------------------------------- packages that require mmcv


def _incompatible(result: ImportFact, dependent: MmcvDependent, match: re.Match, facts: Facts) -> Finding:
    wanted, specifier = match["wanted"], match["range"].replace(" ", "")
    who = f"{dependent.distribution} {dependent.version}"
    said = f'"{match.group(0)}"'
    if normalise(wanted) not in MMCV_NAMES:  # mmengine: pure Python
        return failed(
            IMPORT_CHECK,
            f"{dependent.module} ({who}) refuses the installed {wanted} {match['installed']}: it needs {wanted}{specifier}",
            said,
            f'pip install --no-deps "{wanted}{specifier}"',
        )
    installs = facts.mmcv.installs
    have = ", ".join(
        f"{_who(i)} ({i.origin.installer or i.origin.kind})" if i.origin else _who(i) for i in installs
    )
    declared = dependent.requirement.replace('"', "'")
    readable = bool(re.search(r"[<>=]\s*\d", specifier)) and "(" not in specifier
    fix = channel_fix(facts, specifier if readable else "", installs[0] if installs else None)
    return failed(
        IMPORT_CHECK,
        f"{dependent.module} ({who}) refuses the installed mmcv {match['installed']}: it needs {wanted}{specifier}",
        f"{said}; {dependent.distribution}'s METADATA: Requires-Dist {declared}; installed: {have or 'no mmcv'}",
        fix,
    )


def _dependent_finding(result: ImportFact, dependent: MmcvDependent, facts: Facts) -> Finding | None:
    match = INCOMPATIBLE.search(result.error)
    if match:
        return _incompatible(result, dependent, match, facts)
    ops = next((m for m in facts.imports if m.module == OPS_MODULE), None)
    if ops is not None and ops.error and "mmcv" in result.error:
        return info(
            IMPORT_CHECK,
            f"{dependent.module} ({dependent.distribution} {dependent.version}) does not import because "
            "mmcv.ops does not (the mmcv.ops finding says why and the fix)",
            result.error[:300],
        )
    return None


# ---------------------------------------------------------------- entry points


def import_finding(result: ImportFact, facts: Facts) -> Finding | None:
    """The finding for a failed import of mmcv.ops or of a package that requires mmcv; None when this
    module has nothing to add (the generic classification then applies)."""
    from .imports import classify_import_error

    if not result.error:
        return None
    dependent = next((d for d in facts.mmcv.dependents if d.module == result.module), None)
    if dependent is not None:
        return _dependent_finding(result, dependent, facts)
    if result.module != OPS_MODULE:
        return None
    cause, detail = classify_import_error(result.error)
    if cause == "missing-module" and detail == "mmcv._ext":
        return _no_ext(result, facts)
    if cause == "abi" and detail.startswith("_Z"):  # a C++ symbol; Windows names no symbol
        return _undefined_symbol(result, detail, facts)
    return None


def reinstall(facts: Facts) -> str:
    """The fix for any other failure of mmcv.ops (a crash, a missing library)."""
    install = facts.mmcv.installs[0] if facts.mmcv.installs else None
    return channel_fix(facts, replacing=install)


def _source_rebuild(origin: DistOrigin | None, variables: str) -> str:
    """Build it again from the folder it was installed from ("" when it came from elsewhere)."""
    if not (origin and origin.kind in ("source", "editable") and origin.location_exists):
        return ""
    editable = "-e " if origin.kind == "editable" else ""
    return (
        f"{variables}pip install --no-deps --no-build-isolation --force-reinstall "
        f"{editable}{shlex.quote(origin.location)}"
    )


def libstdcxx_fix(binary: BinaryFact, facts: Facts) -> str:
    """extensions.libstdcxx's fix for a file of mmcv's folder: the channel's build (made with
    conda-forge's compilers, linked to the environment's libstdc++), or a rebuild from its source
    folder with the compiler of the loaded libstdc++."""
    from .libstdcxx import compiler_for

    install = next((i for i in facts.mmcv.installs if binary.path.startswith(i.package + "/")), None)
    origin = install.origin if install else binary.origin
    same = f"=={origin.version.split('+')[0]}" if origin and origin.version and install is None else ""
    fix = channel_fix(facts, same if channel_version(facts, same) else "", install)
    rebuild = _source_rebuild(origin, f"CXX={shlex.quote(compiler_for(facts))} MMCV_WITH_OPS=1 ")
    if rebuild:
        fix += f"; or rebuild it from {origin.location} with this libstdc++'s compiler: {rebuild}"
    return fix


# ---------------------------------------------------------------- checks: archs and overlaps


def _ext_arch_findings(install: MmcvInstall, facts: Facts) -> list[Finding]:
    from .gpu import arch_findings, arch_list_from_names

    what = f"mmcv {install.version}'s _ext"
    if install.archs_error:
        return [
            info(
                ARCH_CHECK,
                f"the GPU code in {what} could not be read, so its archs were not compared with the GPU",
                f"{install.ext_files[0]}: {install.archs_error}; to check by hand: cuobjdump --list-elf "
                f"--list-ptx {install.ext_files[0]} (CUDA toolkit), or run an op on the GPU: python -c "
                '"import torch, mmcv.ops; print(mmcv.ops.nms(torch.rand(4, 4).cumsum(1).cuda(), '
                'torch.rand(4).cuda(), 0.5))"',
            )
        ]
    if not install.cuda_archs:
        return [
            warned(
                ARCH_CHECK,
                f"{what} is a CPU build on a machine with an NVIDIA GPU: its ops refuse CUDA tensors",
                f"{install.ext_files[0]} has no .nv_fatbin (no GPU code)",
                channel_fix(facts, replacing=install),
            )
        ]
    archs, exact = arch_list_from_names(install.cuda_archs)
    record = next((r for r in facts.conda.records if r.name == normalise(install.distribution)), None)
    cuda = re.search(r"cuda(\d+)(\d)_", record.build) if record else None
    binary_cuda = f"{cuda.group(1)}.{cuda.group(2)}" if cuda else None
    fix = channel_fix(facts, replacing=install)
    rebuild = _source_rebuild(install.origin, 'TORCH_CUDA_ARCH_LIST="{cc}" MMCV_WITH_OPS=1 FORCE_CUDA=1 ')
    if rebuild:
        fix += f"; or rebuild it for this GPU: {rebuild}"
    return arch_findings(
        ARCH_CHECK, what, archs, exact, binary_cuda, facts, lambda cc: fix.replace("{cc}", cc)
    )


def _overlap(install: MmcvInstall) -> Finding:
    names = [_who(install), *install.others]
    return warned(
        INSTALL_CHECK,
        f"{' and '.join(names)} are installed into the same {install.package}: its files are those of "
        "whichever was installed last, and uninstalling one deletes files of the other",
        f"{len(names)} .dist-info records list mmcv/__init__.py",
        f"pip uninstall -y {' '.join(n.split()[0] for n in names)}, then install one mmcv (the channel's: "
        "solver make-env --with mmcv)",
    )


def check_mmcv(facts: Facts, kb) -> list[Finding]:
    findings = [_overlap(i) for i in facts.mmcv.installs if i.others]
    if facts.driver.gpus and facts.torch.cuda:
        for install in facts.mmcv.installs:
            if install.ext_files:
                findings += _ext_arch_findings(install, facts)
    return findings
