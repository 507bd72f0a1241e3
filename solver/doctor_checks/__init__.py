"""The checks of `solver doctor`, one module per group; each check is a function of gathered facts.

    facts = gather.gather(gather.default_options(prefix=None, python=None))
    findings = run_checks(facts)            # list[Finding]
"""

from __future__ import annotations

from collections.abc import Callable

from .facts import Facts
from .findings import Finding, warned


def _groups() -> list[tuple[str, Callable[[Facts], list[Finding]]]]:
    from solver.knowledge import load

    from .conda_env import check_pip_shadowing, check_resolve
    from .gpu import check_gpu
    from .imports import check_imports
    from .network import check_network
    from .toolchain import check_toolchain
    from .windows import check_windows

    def knowledge_check(check):
        return lambda facts: check(facts, load())

    return [
        ("gpu", knowledge_check(check_gpu)),
        ("toolchain", knowledge_check(check_toolchain)),
        ("conda", lambda facts: check_pip_shadowing(facts.conda) + check_resolve(facts)),
        ("extensions", check_imports),
        ("windows", check_windows),
        ("network", lambda facts: check_network(facts.network)),
    ]


def run_checks(facts: Facts) -> list[Finding]:
    """Every check group over the facts; a group that breaks reports itself instead of stopping doctor."""
    findings: list[Finding] = []
    for name, group in _groups():
        try:
            findings += group(facts)
        except Exception as exc:
            findings.append(warned(f"{name}.internal", f"the {name} checks could not run", f"{type(exc).__name__}: {exc}",
                                   "please report this with the output of `solver doctor --json`"))
    return findings
