"""channel_packages.yaml: the pointops channel's packages other than pointops (mmcv,
pointnet2_ops), the builds the channel has of each, the build string the plan pins and what pip/uv
indexes carry. `solver make-env --with SPEC` plans them from these records alone.

    table.package("mmcv").versions           # -> ("2.2.0", "2.1.0"), newest first
    table.package("mmcv").build("linux-64", "cuda130")   # -> ChannelBuild(archs=ArchList(...), ...)
    table.package("mmcv").pin("cuda130", "2.13", "3.12") # -> "cuda130_torch213_py312*"
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from solver.knowledge._fields import KnowledgeError, need, version_str
from solver.knowledge.archs import ArchList
from solver.knowledge.pointops import PointopsTable, PureWheel
from solver.vocabulary import PLATFORMS, cuda_of_variant, parse_version

_WHERE = "channel_packages.yaml"
# conda package names (CEP 26 normalizes them to lower case); versions as conda writes them.
_NAME = re.compile(r"^[a-z0-9_][a-z0-9_.\-]*$")
_VERSION = re.compile(r"^[0-9][0-9A-Za-z._+!]*$")
_VARIANT = re.compile(r"^(cpu|cuda\d{3})$")
_PLACEHOLDERS = {"variant", "torch", "python"}


@dataclass(frozen=True)
class ChannelBuild:
    """One build of a package for a platform and variant; archs None: no CUDA code of its own."""

    platform: str
    variant: str  # "cpu", "cuda130"; "*" for a noarch package (any)
    cuda_version: str | None
    archs: ArchList | None
    arm_variant: str | None = None  # "sbsa" for linux-aarch64 CUDA builds


@dataclass(frozen=True)
class PipInfo:
    """What pip/uv indexes carry: a pure-Python wheel of ours, or none for current torch."""

    wheel: PureWheel | None = None  # pointops_builds.yaml pure_wheels; None: no index carries it
    index: str | None = None  # the nearest index, which lacks current torch
    newest_torch: dict[str, str] = field(default_factory=dict)  # version -> newest torch minor there

    def extra_for(self, pointops_wheel: str) -> str | None:
        """The extra of the wheel that installs this pointops wheel ("pointops-cu13" -> "cu13")."""
        extras = self.wheel.extras if self.wheel else {}
        return next((extra for extra, wheel in extras.items() if wheel == pointops_wheel), None)


@dataclass(frozen=True)
class ChannelPackage:
    name: str
    summary: str
    source: str
    versions: tuple[str, ...]  # newest first
    noarch: bool
    torch: tuple[str, ...] | None  # pytorch minors built for; None: any pointops supports
    pythons: tuple[str, ...] | None  # X.Y built for; None: python_min and newer (noarch)
    python_min: str | None
    builds: tuple[ChannelBuild, ...]  # per platform and variant; empty for noarch
    build_template: str  # "{variant}_torch{torch}_py{python}*"
    pip: PipInfo

    @property
    def platforms(self) -> tuple[str, ...]:
        return PLATFORMS if self.noarch else tuple(dict.fromkeys(b.platform for b in self.builds))

    def variants(self, platform: str) -> tuple[str, ...]:
        """The variants built for `platform` ("*" for noarch: any)."""
        if self.noarch:
            return ("*",)
        return tuple(b.variant for b in self.builds if b.platform == platform)

    def build(self, platform: str, variant: str, arm_variant: str | None = None) -> ChannelBuild | None:
        """The build for this platform and variant (a noarch package has one for every pair)."""
        if self.noarch:
            return ChannelBuild(platform, variant, None, None, None)
        return next(
            (
                b
                for b in self.builds
                if (b.platform, b.variant) == (platform, variant)
                and (arm_variant is None or b.arm_variant in (None, arm_variant))
            ),
            None,
        )

    def built_for_torch(self, minor: str) -> bool:
        return self.torch is None or minor in self.torch

    def built_for_python(self, python: str) -> bool:
        if self.pythons is not None:
            return python in self.pythons
        return parse_version(python) >= parse_version(self.python_min)

    def describe_pythons(self) -> str:
        return ", ".join(self.pythons) if self.pythons is not None else f"{self.python_min} and newer"

    def pin(self, variant: str, torch: str, python: str) -> str:
        """The build-string pattern of the build for this variant, pytorch minor and Python."""
        return self.build_template.format(
            variant=variant, torch=torch.replace(".", ""), python=python.replace(".", "")
        )


@dataclass(frozen=True)
class ChannelPackageTable:
    packages: tuple[ChannelPackage, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.packages)

    def package(self, name: str) -> ChannelPackage | None:
        return next((p for p in self.packages if p.name == name), None)


def _strings(value, where: str, pattern: re.Pattern | None = None) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise KnowledgeError(f"{where}: expected a non-empty list")
    items = tuple(str(v) for v in value)
    bad = [v for v in items if pattern is not None and not pattern.match(v)]
    if bad:
        raise KnowledgeError(f"{where}: {bad[0]!r} is not valid here")
    return items


def _minors(value, where: str) -> tuple[str, ...]:
    minors = tuple(version_str(v, where) for v in _strings(value, where))
    if any(len(parse_version(m)) != 2 for m in minors):
        raise KnowledgeError(f"{where}: expected X.Y versions")
    return minors


def _parse_builds(name: str, item: dict, pointops_table: PointopsTable) -> tuple[ChannelBuild, ...]:
    """platform -> variants, each CUDA build with the channel's archs for that platform."""
    where = f"{_WHERE} packages.{name}"
    platforms = need(item, "platforms", where)
    if not isinstance(platforms, dict) or not platforms:
        raise KnowledgeError(f"{where}.platforms: expected a mapping platform -> variants")
    if item.get("archs") != "channel":
        raise KnowledgeError(f"{where}.archs: must be 'channel' (the channel's arch table)")
    builds = []
    for platform, variants in platforms.items():
        if platform not in PLATFORMS:
            raise KnowledgeError(f"{where}.platforms: unknown platform {platform!r}")
        for variant in _strings(variants, f"{where}.platforms.{platform}", _VARIANT):
            if variant == "cpu":
                builds.append(ChannelBuild(platform, variant, None, None))
                continue
            # the channel's arch table: the archs of pointops' build of this platform and variant
            channel = pointops_table.build(platform, variant)
            if channel is None or channel.archs is None:
                raise KnowledgeError(
                    f"{where}.platforms.{platform}: the channel's arch table has no {variant} for {platform}"
                )
            builds.append(
                ChannelBuild(platform, variant, cuda_of_variant(variant), channel.archs, channel.arm_variant)
            )
    return tuple(builds)


def _parse_pip(name: str, raw, pointops_table: PointopsTable) -> PipInfo:
    where = f"{_WHERE} packages.{name}.pip"
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{where}: expected a mapping")
    if raw.get("wheel"):
        wheel = pointops_table.pure_wheel(str(raw["wheel"]))
        if wheel is None:
            raise KnowledgeError(f"{where}.wheel: pointops_builds.yaml has no pure_wheels.{raw['wheel']}")
        return PipInfo(wheel=wheel)
    newest = need(raw, "newest_torch", where)
    if not isinstance(newest, dict):
        raise KnowledgeError(f"{where}.newest_torch: expected a mapping version -> torch minor")
    return PipInfo(
        index=str(need(raw, "index", where)),
        newest_torch={str(v): version_str(t, f"{where}.newest_torch") for v, t in newest.items()},
    )


def _parse_package(name: str, item: dict, pointops_table: PointopsTable) -> ChannelPackage:
    where = f"{_WHERE} packages.{name}"
    if not _NAME.match(str(name)):
        raise KnowledgeError(f"{_WHERE} packages: {name!r} is not a conda package name (lower case)")
    if not isinstance(item, dict):
        raise KnowledgeError(f"{where}: expected a mapping")
    noarch = bool(item.get("noarch", False))
    template = str(need(item, "build", where))
    used = set(re.findall(r"{(\w+)}", template))
    if used - _PLACEHOLDERS:
        raise KnowledgeError(f"{where}.build: unknown placeholder {sorted(used - _PLACEHOLDERS)[0]!r}")
    pythons = _minors(item["python"], f"{where}.python") if "python" in item else None
    python_min = version_str(item["python_min"], f"{where}.python_min") if "python_min" in item else None
    if (pythons is None) == (python_min is None):
        raise KnowledgeError(f"{where}: give python (a list) or python_min, one of them")
    return ChannelPackage(
        name=str(name),
        summary=str(item.get("summary", "")),
        source=str(need(item, "source", where)),
        versions=_strings(need(item, "versions", where), f"{where}.versions", _VERSION),
        noarch=noarch,
        torch=_minors(item["torch"], f"{where}.torch") if "torch" in item else None,
        pythons=pythons,
        python_min=python_min,
        builds=() if noarch else _parse_builds(name, item, pointops_table),
        build_template=template,
        pip=_parse_pip(name, need(item, "pip", where), pointops_table),
    )


def parse_channel_packages(raw: dict, pointops_table: PointopsTable) -> ChannelPackageTable:
    """channel_packages.yaml -> ChannelPackageTable; the channel's arch table and pure wheels come
    from pointops_builds.yaml (`pointops_table`)."""
    packages = need(raw, "packages", _WHERE)
    if not isinstance(packages, dict):
        raise KnowledgeError(f"{_WHERE} packages: expected a mapping name -> package")
    return ChannelPackageTable(tuple(_parse_package(n, item, pointops_table) for n, item in packages.items()))
