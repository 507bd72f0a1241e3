"""pytorch.yaml: conda-forge pytorch releases, their CUDA builds per platform and arm variant, the
archs each build carries, and the glibc each build key needs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.knowledge._fields import KnowledgeError, need, version_str
from solver.knowledge.archs import ArchList, parse_arch_list
from solver.vocabulary import (
    ARM_VARIANTS,
    DEFAULT_ARM_VARIANT,
    PLATFORMS,
    cuda_of_variant,
    has_arm_variants,
    parse_version,
)


@dataclass(frozen=True)
class TorchBuild:
    """One CUDA build of a pytorch release on one platform."""

    variant: str  # build-string tag, "cuda129"
    arm_variant: str | None  # "sbsa" / "tegra" on linux-aarch64, None elsewhere
    archs: ArchList  # what the newest builds carry
    since_build_number: int | None = None  # archs hold from this package build number on ...
    older_archs: ArchList | None = None  # ... and older builds carry these

    @property
    def key(self) -> str:
        """'cuda129', or 'cuda129-tegra' for a non-default arm variant."""
        return (
            self.variant
            if self.arm_variant in (None, DEFAULT_ARM_VARIANT)
            else f"{self.variant}-{self.arm_variant}"
        )

    @property
    def cuda_version(self) -> str:
        return cuda_of_variant(self.variant)


@dataclass(frozen=True)
class PytorchRelease:
    version: str
    pythons: tuple[str, ...]
    builds: dict[str, tuple[TorchBuild, ...]]  # platform -> CUDA builds, newest CUDA first
    cpu_platforms: tuple[str, ...]

    @property
    def cuda(self) -> dict[str, dict[str, ArchList]]:
        """platform -> variant -> archs of the default (sbsa) arm variant."""
        return {
            platform: {b.variant: b.archs for b in builds if b.arm_variant in (None, DEFAULT_ARM_VARIANT)}
            for platform, builds in self.builds.items()
        }

    def variants(self, platform: str) -> list[str]:
        """CUDA variants on this platform (default arm variant), newest CUDA first."""
        return [
            b.variant for b in self.builds.get(platform, ()) if b.arm_variant in (None, DEFAULT_ARM_VARIANT)
        ]

    def cuda_builds(self, platform: str) -> tuple[TorchBuild, ...]:
        """Every CUDA build on this platform, all arm variants, newest CUDA first."""
        return self.builds.get(platform, ())


@dataclass(frozen=True)
class PytorchTable:
    releases: tuple[PytorchRelease, ...]  # newest first
    min_glibc: dict[str, str]  # build key -> lowest glibc on Linux

    def release(self, version: str) -> PytorchRelease | None:
        return next((r for r in self.releases if r.version == version), None)

    def glibc_floor(self, build: TorchBuild) -> str | None:
        """Lowest glibc the CUDA builds of this key need on Linux."""
        return self.min_glibc.get(build.key)


_BUILD_KEY_RE = re.compile(r"^(cuda\d{3})(?:-(\w+))?$")


def _parse_torch_build(
    platform: str, key: str, value, arch_lists: dict[str, ArchList], where: str
) -> TorchBuild:
    match = _BUILD_KEY_RE.match(key)
    if not match:
        raise KnowledgeError(f"{where}: {key!r} is not a CUDA build key such as cuda129 or cuda129-tegra")
    variant, arm_variant = match.group(1), match.group(2)
    if has_arm_variants(platform):
        arm_variant = arm_variant or DEFAULT_ARM_VARIANT
        if arm_variant not in ARM_VARIANTS:
            raise KnowledgeError(f"{where}: unknown arm variant {arm_variant!r}")
    elif arm_variant is not None:
        raise KnowledgeError(f"{where}: {platform} has no arm variants")

    def archs(name) -> ArchList:
        if name not in arch_lists:
            raise KnowledgeError(f"{where}: unknown arch list {name!r}")
        return arch_lists[name]

    if isinstance(value, dict):
        since = int(need(value, "since_build_number", where))
        return TorchBuild(
            variant,
            arm_variant,
            archs(need(value, "archs", where)),
            since,
            archs(need(value, "older_archs", where)),
        )
    return TorchBuild(variant, arm_variant, archs(value))


def _parse_release(i: int, item: dict, arch_lists: dict[str, ArchList]) -> PytorchRelease:
    where = f"pytorch.yaml releases[{i}]"
    version = version_str(need(item, "version", where), where)
    builds: dict[str, tuple[TorchBuild, ...]] = {}
    for platform, entries in (item.get("cuda") or {}).items():
        if platform not in PLATFORMS:
            raise KnowledgeError(f"{where}.cuda: unknown platform {platform!r}")
        parsed = [
            _parse_torch_build(platform, key, value, arch_lists, f"{where}.cuda.{platform}.{key}")
            for key, value in entries.items()
        ]
        builds[platform] = tuple(sorted(parsed, key=lambda b: parse_version(b.cuda_version), reverse=True))
    pythons = tuple(version_str(p, where) for p in need(item, "python", where))
    cpu = tuple(need(item, "cpu", where))
    for platform in cpu:
        if platform not in PLATFORMS:
            raise KnowledgeError(f"{where}.cpu: unknown platform {platform!r}")
    return PytorchRelease(version=version, pythons=pythons, builds=builds, cpu_platforms=cpu)


def parse_pytorch(raw: dict) -> PytorchTable:
    """pytorch.yaml -> PytorchTable (releases newest first; a glibc floor for every build key)."""
    arch_lists = {
        key: parse_arch_list(item, f"pytorch.yaml arch_lists.{key}")
        for key, item in need(raw, "arch_lists", "pytorch.yaml").items()
    }
    releases = [
        _parse_release(i, item, arch_lists) for i, item in enumerate(need(raw, "releases", "pytorch.yaml"))
    ]
    versions = [parse_version(r.version) for r in releases]
    if versions != sorted(versions, reverse=True):
        raise KnowledgeError("pytorch.yaml releases: must be listed newest first")
    min_glibc = {
        k: version_str(v, "pytorch.yaml min_glibc") for k, v in need(raw, "min_glibc", "pytorch.yaml").items()
    }
    for release in releases:
        for builds in release.builds.values():
            for build in builds:
                if build.key not in min_glibc:
                    raise KnowledgeError(f"pytorch.yaml min_glibc: no entry for {build.key}")
    return PytorchTable(releases=tuple(releases), min_glibc=min_glibc)
