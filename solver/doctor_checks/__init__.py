"""The checks of `solver doctor`: a named registry of functions with one signature,
`check(facts, kb) -> list[Finding]`, over facts gathered beforehand (gather.py is the only code that
looks at the machine; a check only reads facts and the knowledge tables).

    facts = gather.gather(gather.default_options(prefix=None, python=None))
    findings = run_checks(facts)            # list[Finding], every registered check in order
"""

from __future__ import annotations

from collections.abc import Callable

from solver.knowledge import Knowledge

from . import conda_env, gpu, imports, libstdcxx, mmcv, network, pointops_owners, toolchain, windows
from .facts import Facts
from .findings import Finding, warned

Check = Callable[[Facts, Knowledge], list[Finding]]

# name -> check, in report order
CHECKS: dict[str, Check] = {
    "gpu": gpu.check_gpu,
    "toolchain": toolchain.check_toolchain,
    "conda.pip-shadowing": conda_env.check_pip_shadowing,
    "conda.resolve": conda_env.check_resolve,
    "extensions": imports.check_imports,
    "libstdcxx": libstdcxx.check_libstdcxx,
    "mmcv": mmcv.check_mmcv,
    "pointops.installations": pointops_owners.check_pointops_installations,
    "windows": windows.check_windows,
    "network": network.check_network,
}


def run_checks(facts: Facts, kb: Knowledge | None = None) -> list[Finding]:
    """Every registered check over the facts; a check that breaks reports itself instead of stopping doctor."""
    if kb is None:
        from solver.knowledge import load

        kb = load()
    findings: list[Finding] = []
    for name, check in CHECKS.items():
        try:
            findings += check(facts, kb)
        except Exception as exc:
            findings.append(
                warned(
                    f"{name}.internal",
                    f"the {name} checks could not run",
                    f"{type(exc).__name__}: {exc}",
                    "please report this with the output of `solver doctor --json`",
                )
            )
    return findings
