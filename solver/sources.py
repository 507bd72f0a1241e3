"""Which source limits the torch release of a plan: conda-forge's pytorch builds (the conda plan,
solver/knowledge/pytorch.yaml) or PyTorch's own wheel indexes (the pip and uv plans,
solver/knowledge/pytorch_wheels.yaml). The two publish releases at their own pace, so the same
machine can get pytorch 2.13 from conda and torch 2.14 from pip; each plan says why.

    conda_release_note(kb, table, plan.target.platform, plan.pytorch_minor)   # or None
    wheel_release_note(kb, plan.target.platform, plan.torch)                  # or None
"""

from __future__ import annotations

from solver.knowledge import Knowledge
from solver.pytorch_wheels import WheelTable
from solver.vocabulary import parse_version


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def conda_forge_newest(kb: Knowledge, platform: str) -> str | None:
    """The newest pytorch minor conda-forge has built for `platform` (CPU builds exist for every
    release on a platform it lists)."""
    for release in kb.pytorch_releases:  # newest first
        if platform in release.cpu_platforms or release.cuda_builds(platform):
            return _minor(release.version)
    return None


def wheel_index_newest(kb: Knowledge, table: WheelTable) -> str | None:
    """The newest torch minor on PyTorch's wheel indexes that pointops supports."""
    floor = parse_version(kb.pointops["torch_min"])
    known = [t for t in table.releases if parse_version(t) >= floor]
    return max(known, key=parse_version) if known else None


def conda_release_note(kb: Knowledge, table: WheelTable, platform: str, chosen: str) -> str | None:
    """For the conda plan: when conda-forge's newest pytorch is what was chosen and PyTorch's
    indexes already have a newer torch, say that conda-forge is the limit."""
    newest_wheel = wheel_index_newest(kb, table)
    if conda_forge_newest(kb, platform) != chosen or newest_wheel is None:
        return None
    if parse_version(newest_wheel) <= parse_version(chosen):
        return None
    return (
        f"pytorch {chosen} is the newest release conda-forge has built (its pytorch packages, "
        f"solver/knowledge/pytorch.yaml); PyTorch's own wheel index already has torch {newest_wheel}, "
        "which --format pip|uv plans"
    )


def wheel_release_note(kb: Knowledge, platform: str, chosen: str) -> str | None:
    """For the pip and uv plans: when PyTorch's indexes give a torch newer than any conda-forge
    pytorch, say that conda-forge is why --format conda plans an older one."""
    newest_conda = conda_forge_newest(kb, platform)
    if newest_conda is None or parse_version(chosen) <= parse_version(newest_conda):
        return None
    return (
        f"torch {chosen} is a release PyTorch publishes wheels of (solver/knowledge/pytorch_wheels.yaml); "
        f"conda-forge has built pytorch up to {newest_conda} only (solver/knowledge/pytorch.yaml), "
        f"so --format conda plans pytorch {newest_conda} or older"
    )
