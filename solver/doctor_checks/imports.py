"""Compiled PyTorch extensions that fail to import, named by cause.

`undefined symbol: _ZN3c10...` means the extension was built against another torch than the one
installed (the C++ ABI of torch changes with every release); a missing `libcudart.so.11.0` means it
was built for another CUDA; "DLL load failed" on Windows names the DLL that could not be found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .dists import DistOrigin, InstalledDist, rebuild_command
from .facts import CondaRecord, Facts, ImportFact
from .findings import Finding, failed, info, passed, warned

MAX_MODULES = 40
MAX_MODULES_PER_DISTRIBUTION = 4
_EXTENSION_SUFFIX = re.compile(r"\.(so|pyd)$")
_REQUIRES_TORCH = re.compile(r"^torch(\s|[<>=!~;(\[]|$)", re.IGNORECASE)
_ONLY_FOR_AN_EXTRA = re.compile(r";.*\bextra\s*==")


def _needs_torch(requirement: str) -> bool:
    """A hard requirement on torch; `torch; extra == "torch"` (safetensors, say) is an optional one."""
    text = requirement.strip()
    return bool(_REQUIRES_TORCH.match(text)) and not _ONLY_FOR_AN_EXTRA.search(text)


# ---------------------------------------------------------------- gathering


def _module_of(record_path: str) -> str | None:
    """The top-level module to import for a compiled file: 'pointops/_C.abi3.so' -> 'pointops'.

    Importing the package is what users do, and it is what loads extensions registered through
    torch.ops.load_library (those .so files are not Python modules of their own).
    """
    parts = record_path.replace("\\", "/").split("/")
    if ".." in parts or any(p.endswith((".libs", ".data", ".dist-info")) for p in parts[:-1]):
        return None
    top = parts[0] if len(parts) > 1 else parts[0].split(".")[0]
    return top if top.isidentifier() else None


def discover_extensions(installed: list[InstalledDist]) -> list[ImportFact]:
    """The compiled modules to try, of distributions that require torch (error still empty).

    pointops is always included, as the project's own extension.
    """
    found: list[ImportFact] = []
    for dist in installed:
        torch_requirements = [r.strip() for r in dist.requires if _needs_torch(r)]
        if dist.name.lower() != "pointops" and not torch_requirements:
            continue
        modules = []
        for path in dist.compiled_files():
            module = _module_of(path) if _EXTENSION_SUFFIX.search(path) else None
            if module and module not in modules:
                modules.append(module)
        for module in modules[:MAX_MODULES_PER_DISTRIBUTION]:
            if all(module != seen.module for seen in found):
                found.append(
                    ImportFact(
                        module,
                        dist.name,
                        dist.version,
                        torch_requirement="; ".join(torch_requirements),
                        origin=dist.origin,
                    )
                )
    return found[:MAX_MODULES]


# ---------------------------------------------------------------- classification


def _torch_pin(version: str) -> str:
    """A torch version often rides in a wheel's local version: '2.1.0+pt25cu121' -> 'torch 2.5'."""
    match = re.search(r"pt(\d)(\d+)", version)
    return f"built for torch {match.group(1)}.{match.group(2)}" if match else ""


def classify_import_error(error: str) -> tuple[str, str]:
    """(cause, detail) of an import failure: cause is one of
    'abi', 'missing-library', 'dll', 'libstdcxx', 'crash', 'timeout', 'missing-module', 'other'."""
    symbol = re.search(r"undefined symbol:\s*(\S+)", error)
    if symbol:
        return "abi", symbol.group(1)
    if (
        "procedure could not be located" in error.lower()
        or "specified procedure could not be found" in error.lower()
    ):
        return "abi", "a procedure in a torch DLL"
    library = re.search(r"(\S+\.so[.\d]*|\S+\.dylib): cannot open shared object file", error) or re.search(
        r"Library not loaded: (\S+)", error
    )
    if library:
        return "missing-library", library.group(1)
    dll = re.search(r"DLL load failed[^:]*:?\s*(.*)", error)
    if dll:
        named = re.search(r"([\w.-]+\.dll)", error, re.IGNORECASE)
        return "dll", named.group(1) if named else dll.group(1).strip()
    version = re.search(r"version `((?:GLIBCXX|CXXABI)_[\d.]+)' not found", error)
    if version:
        return "libstdcxx", version.group(1)
    if error.startswith(("crashed", "ended the interpreter")):
        return "crash", error
    if error.startswith("timed out"):
        return "timeout", error
    missing = re.match(r"ModuleNotFoundError: No module named '([\w.]+)'", error)
    if missing:
        return "missing-module", missing.group(1)
    return "other", error


def _abi_detail(symbol: str) -> str:
    if "c10" in symbol or "at6" in symbol or "torch" in symbol:
        return f"missing torch symbol {symbol[:120]}"
    return f"missing symbol {symbol[:120]}"


def built_for(result: ImportFact, records: list[CondaRecord]) -> str:
    """What the extension says it was built for: its conda record's pytorch/libtorch pin, its wheel's
    torch requirement, or a torch tag in its version ('+pt24cu121')."""
    record = _conda_record(result.distribution, records)
    pins = [d for d in record.depends if d.split(" ")[0] in ("pytorch", "libtorch")] if record else []
    if pins:
        return f"conda {record.name} {record.version} ({record.build}) needs {', '.join(pins)}"
    parts = []
    if result.torch_requirement:
        parts.append(
            f"{result.distribution} {result.distribution_version} requires {result.torch_requirement}"
        )
    pin = _torch_pin(result.distribution_version)
    if pin:
        parts.append(pin)
    return "; ".join(parts)


def _conda_record(distribution: str, records: list[CondaRecord]) -> CondaRecord | None:
    name = distribution.lower().replace("_", "-")
    return next((r for r in records if r.name == name), None)


def _reinstall(dist: str, records: list[CondaRecord], torch_version: str | None) -> str:
    """conda's own package is replaced through conda (which picks a build for the installed pytorch)."""
    torch_release = (torch_version or "").split("+")[0]
    record = _conda_record(dist, records)
    if record is not None:
        pin = f' "pytorch={torch_release}"' if torch_release else ""
        return f'conda install "{record.name}"{pin}  (a build made for this pytorch)'
    return (
        f"pip install --force-reinstall --no-cache-dir --no-deps {dist}  (a build for torch {torch_version}), "
        "or rebuild it from source in this environment"
    )


@dataclass(frozen=True)
class _Failure:
    """One failed import, with what every kind of finding about it needs."""

    result: ImportFact
    who: str  # "mmcv (mmcv 2.1.0)"
    installed: str  # "installed torch 2.5.1 (CUDA 12.4)"
    versions: str  # what it says it was built for
    reinstall: str  # the command that puts it back
    torch_version: str | None
    check: str = "extensions.import"

    @property
    def damage(self) -> str:
        origin = self.result.origin
        return "; ".join(origin.damaged) if origin and origin.damaged else ""


def _abi(failure: _Failure, detail: str) -> Finding:
    return failed(
        failure.check,
        f"{failure.who}: torch/extension ABI mismatch; it was built against a different torch than the "
        f"{failure.installed}",
        f"{_abi_detail(detail)}; {failure.versions}",
        failure.reinstall,
    )


def _missing_library(failure: _Failure, detail: str) -> Finding:
    if re.search(r"libcudart|libcublas|libcudnn|libnvrtc|libcusparse|libcufft|libcurand", detail):
        what = f"built for another CUDA than the {failure.installed}"
    elif "torch" in detail or "c10" in detail:
        what = f"built against another torch (its library {detail} is not in the {failure.installed})"
    else:
        what = "a shared library it needs is missing"
    return failed(
        failure.check,
        f"{failure.who}: {what}",
        f"cannot open {detail}; {failure.versions}",
        failure.reinstall,
    )


def _dll(failure: _Failure, detail: str) -> Finding:
    dist = failure.result.distribution or failure.result.module
    fix = (
        f"install the Microsoft Visual C++ Redistributable, `conda install -c conda-forge vc14_runtime`, "
        f"and activate the environment; if {detail} belongs to torch, reinstall {dist} for torch "
        f"{failure.torch_version}"
    )
    return failed(
        failure.check, f"{failure.who}: DLL load failed ({detail})", failure.result.error[:300], fix
    )


def _libstdcxx(failure: _Failure, detail: str) -> Finding:
    origin = failure.result.origin or DistOrigin(failure.result.distribution or failure.result.module, "")
    return failed(
        failure.check,
        f"{failure.who}: it needs {detail} from libstdc++, newer than the libstdc++ this Python loads "
        "with torch (built with a newer compiler)",
        failure.result.error[:300],
        f"rebuild it with the compiler that matches this libstdc++: {rebuild_command(origin, '/usr/bin/g++')}",
    )


def _crash(failure: _Failure, detail: str) -> Finding:
    damage = failure.damage
    evidence = f"its files were changed after install: {damage}" if damage else "the child interpreter died"
    return failed(failure.check, f"{failure.who}: importing it {detail}", evidence, failure.reinstall)


def _timeout(failure: _Failure, detail: str) -> Finding:
    module = failure.result.module
    return warned(
        failure.check,
        f"{failure.who}: import did not finish",
        detail,
        f"python -c 'import {module}' to see where it hangs",
    )


def _missing_module(failure: _Failure, detail: str) -> Finding:
    return warned(
        failure.check,
        f"{failure.who} fails to import: it needs the module {detail}, which is not installed",
        failure.result.error[:300],
        f"install what provides {detail} (`pip check` lists the requirements that are missing)",
    )


def _other(failure: _Failure, detail: str) -> Finding:
    error, module = failure.result.error, failure.result.module
    damage = f"; its files were changed after install: {failure.damage}" if failure.damage else ""
    if module == "pointops":  # its failures are known: the fix puts it back from where it came
        return failed(
            failure.check, f"{failure.who} fails to import", error[:600] + damage, failure.reinstall
        )
    # an error shown whole needs no re-run of the import to be read
    fix = failure.reinstall if len(error) <= 600 else f"python -c 'import {module}' for the full error"
    return warned(failure.check, f"{failure.who} fails to import", error[:600] + damage, fix)


_BY_CAUSE = {
    "abi": _abi,
    "missing-library": _missing_library,
    "dll": _dll,
    "libstdcxx": _libstdcxx,
    "crash": _crash,
    "timeout": _timeout,
    "missing-module": _missing_module,
    "other": _other,
}


def finding_for_import(
    result: ImportFact,
    torch_version: str | None,
    torch_cuda: str | None,
    records: list[CondaRecord] | None = None,
    reinstall: str = "",
) -> Finding:
    """`reinstall`: the command that puts this extension back (default: conda or pip by name)."""
    origin = f"{result.distribution} {result.distribution_version}".strip()
    who = f"{result.module} ({origin})" if origin else result.module
    if not result.error:
        return passed("extensions.import", f"{who} imports", f"torch {torch_version}")
    cause, detail = classify_import_error(result.error)
    dist = result.distribution or result.module.split(".")[0]
    installed = f"installed torch {torch_version or '?'}" + (
        f" (CUDA {torch_cuda})" if torch_cuda else " (CPU)"
    )
    failure = _Failure(
        result=result,
        who=who,
        installed=installed,
        versions=built_for(result, records or []) or f"{dist} {result.distribution_version}".strip(),
        reinstall=reinstall or _reinstall(dist, records or [], torch_version),
        torch_version=torch_version,
    )
    return _BY_CAUSE[cause](failure, detail)


def _explained_elsewhere(result: ImportFact, facts: Facts) -> bool:
    """A libstdc++ version failure that extensions.libstdcxx reports, with the file and the fix."""
    from .libstdcxx import missing_versions

    if classify_import_error(result.error)[0] != "libstdcxx" or not facts.libstdcxx.versions:
        return False
    top = result.module.split(".")[0]
    return any(b.package == top and missing_versions(b, facts.libstdcxx.versions) for b in facts.binaries)


def _finding(result: ImportFact, facts: Facts) -> Finding:
    from . import mmcv
    from .pointops_owners import reinstall_pointops

    if _explained_elsewhere(result, facts):
        return info(
            "extensions.import",
            f"{result.module} does not import: it needs a newer libstdc++ than the one torch loads "
            "(extensions.libstdcxx names the file and the fix)",
            result.error[:300],
        )
    known = mmcv.import_finding(result, facts)  # mmcv's failures, by their own messages
    if known is not None:
        return known
    reinstall = ""
    if result.module == "pointops":
        reinstall = reinstall_pointops(facts)
    elif result.module == mmcv.OPS_MODULE:
        reinstall = mmcv.reinstall(facts)
    return finding_for_import(result, facts.torch.version, facts.torch.cuda, facts.conda.records, reinstall)


def check_imports(facts: Facts, kb) -> list[Finding]:
    if not facts.torch.importable:
        return [info("extensions.import", "torch does not import, so extensions were not tried")]
    if not facts.imports:
        return [info("extensions.import", "no compiled extension that requires torch is installed")]
    return [_finding(r, facts) for r in facts.imports]
