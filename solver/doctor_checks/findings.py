"""What every check returns: one finding per thing looked at, with its evidence and the fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass

PASS = "pass"
WARN = "warn"
FAIL = "fail"
INFO = "info"  # not applicable here, or skipped for a stated reason

STATUSES = (PASS, WARN, FAIL, INFO)


@dataclass(frozen=True)
class Finding:
    check: str  # stable id, e.g. "gpu.torch-build"
    status: str  # one of STATUSES
    summary: str  # what is wrong (or right), in one sentence
    evidence: str = ""  # the facts the verdict rests on
    fix: str = ""  # one line: what to run or change

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown finding status {self.status!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def passed(check: str, summary: str, evidence: str = "") -> Finding:
    return Finding(check, PASS, summary, evidence)


def warned(check: str, summary: str, evidence: str = "", fix: str = "") -> Finding:
    return Finding(check, WARN, summary, evidence, fix)


def failed(check: str, summary: str, evidence: str = "", fix: str = "") -> Finding:
    return Finding(check, FAIL, summary, evidence, fix)


def info(check: str, summary: str, evidence: str = "", fix: str = "") -> Finding:
    return Finding(check, INFO, summary, evidence, fix)
