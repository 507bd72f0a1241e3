"""pointops_builds.yaml: the pointops package (version, torch and python floors), its conda builds
per platform and variant with their archs, the pip/uv wheels that carry those binaries, and the
pure-Python wheels that run on them (pointnet2_ops)."""

from __future__ import annotations

from dataclasses import dataclass

from solver.knowledge._fields import KnowledgeError, need
from solver.knowledge.archs import ArchList, parse_arch_list
from solver.vocabulary import DEFAULT_ARM_VARIANT, PLATFORMS, has_arm_variants, parse_version, variant_of_cuda


@dataclass(frozen=True)
class PointopsInfo:
    """The package itself: `kb.pointops.version`, `.torch_min` ("2.10"), `.python_min` ("3.10")."""

    package: str
    version: str
    torch_min: str
    python_min: str
    wheels: dict[str, dict[str, str]]  # distribution -> platform -> the variant it carries

    _KEYS = ("package", "version", "torch_min", "python_min", "wheels")

    def __getitem__(self, key: str):
        """`kb.pointops["torch_min"]`: the older spelling, read by callers not yet moved to attributes."""
        if key not in self._KEYS:
            raise KeyError(key)
        return getattr(self, key)


@dataclass(frozen=True)
class PointopsBuild:
    platform: str
    variant: str  # "cpu", "cuda129", ...
    cuda_version: str | None
    archs: ArchList | None
    arm_variant: str | None = None  # "sbsa" / "tegra" for linux-aarch64 CUDA builds


@dataclass(frozen=True)
class PointopsWheel:
    """One pip/uv wheel: the distribution name and the conda variant whose binary it carries."""

    distribution: str  # "pointops", "pointops-cu12", "pointops-cu13"
    platform: str
    variant: str
    cuda_version: str | None
    archs: ArchList | None


@dataclass(frozen=True)
class PureWheel:
    """A pure-Python wheel (py3-none-any) that runs on pointops, e.g. pointnet2_ops."""

    distribution: str  # "pointnet2_ops"
    version: str  # "3.0.0.post1"
    source: str  # its source folder, relative to the repository root
    files: tuple[str, ...]  # the import package's files the wheel must carry
    extras: dict[str, str]  # extra -> the pointops distribution it installs ("cu13" -> "pointops-cu13")


@dataclass(frozen=True)
class PointopsTable:
    info: PointopsInfo
    builds: tuple[PointopsBuild, ...]
    wheels: tuple[PointopsWheel, ...]
    pure_wheels: tuple[PureWheel, ...] = ()

    def builds_for(self, platform: str) -> list[PointopsBuild]:
        return [b for b in self.builds if b.platform == platform]

    def build(self, platform: str, variant: str, arm_variant: str | None = None) -> PointopsBuild | None:
        return next(
            (
                b
                for b in self.builds
                if b.platform == platform
                and b.variant == variant
                and (arm_variant is None or b.arm_variant in (None, arm_variant))
            ),
            None,
        )

    def wheels_for(self, platform: str) -> list[PointopsWheel]:
        """The pip/uv wheels built for `platform`, cpu first."""
        return [w for w in self.wheels if w.platform == platform]

    def pure_wheel(self, distribution: str) -> PureWheel | None:
        return next((w for w in self.pure_wheels if w.distribution == distribution), None)


_WHERE = "pointops_builds.yaml"


def _parse_info(raw: dict) -> PointopsInfo:
    wheels = raw.get("wheels") or {}
    for name, platforms in wheels.items():
        if not isinstance(platforms, dict) or not platforms:
            raise KnowledgeError(f"{_WHERE} wheels.{name}: expected a mapping platform -> variant")
    return PointopsInfo(
        package=str(need(raw, "package", _WHERE)),
        version=str(need(raw, "version", _WHERE)),
        torch_min=str(need(raw, "torch_min", _WHERE)),
        python_min=str(need(raw, "python_min", _WHERE)),
        wheels={
            str(name): {str(p): str(v) for p, v in platforms.items()} for name, platforms in wheels.items()
        },
    )


def _parse_variants(raw: dict):
    """(variant -> (cuda, archs), (platform, variant) -> archs with that platform's extra SASS)."""
    variants, extra_sass = {}, {}
    for variant, item in need(raw, "variants", _WHERE).items():
        cuda = item.get("cuda_version")
        if variant == "cpu":
            variants[variant] = (None, None)
            continue
        if cuda is None or variant != variant_of_cuda(str(cuda)):
            raise KnowledgeError(f"{_WHERE} variants.{variant}: cuda_version must match the variant name")
        base = parse_arch_list(item, f"{_WHERE} variants.{variant}")
        variants[variant] = (str(cuda), base)
        for platform, extra in (item.get("extra_sass") or {}).items():
            sass = tuple(sorted(set(base.sass) | {str(a) for a in extra}, key=parse_version))
            extra_sass[(platform, variant)] = ArchList(sass=sass, ptx=base.ptx)
    return variants, extra_sass


def _parse_builds(raw: dict) -> list[PointopsBuild]:
    variants, extra_sass = _parse_variants(raw)
    builds = []
    for platform, names in need(raw, "platforms", _WHERE).items():
        if platform not in PLATFORMS:
            raise KnowledgeError(f"{_WHERE} platforms: unknown platform {platform!r}")
        for variant in names:
            if variant not in variants:
                raise KnowledgeError(f"{_WHERE} platforms.{platform}: unknown variant {variant!r}")
            cuda, archs = variants[variant]
            archs = extra_sass.get((platform, variant), archs)
            arm_variant = DEFAULT_ARM_VARIANT if cuda and has_arm_variants(platform) else None
            builds.append(PointopsBuild(platform, variant, cuda, archs, arm_variant))
    for variant, item in (raw.get("tegra") or {}).items():
        if variant not in variants or variants[variant][0] is None:
            raise KnowledgeError(f"{_WHERE} tegra.{variant}: not a CUDA variant of `variants`")
        archs = parse_arch_list(item, f"{_WHERE} tegra.{variant}")
        builds.append(PointopsBuild("linux-aarch64", variant, variants[variant][0], archs, "tegra"))
    return builds


def _parse_wheels(info: PointopsInfo, parsed_builds: list[PointopsBuild]) -> list[PointopsWheel]:
    builds = [b for b in parsed_builds if b.arm_variant != "tegra"]
    wheels = []
    for name, platforms in info.wheels.items():
        for platform, variant in platforms.items():
            # the wheel carries the binary of the conda build of that platform and variant
            build = next((b for b in builds if b.platform == platform and b.variant == variant), None)
            if build is None:
                raise KnowledgeError(
                    f"{_WHERE} wheels.{name}: no {variant} build for {platform} in `platforms`"
                )
            wheels.append(PointopsWheel(name, platform, variant, build.cuda_version, build.archs))
    return wheels


def _parse_pure_wheel(name: str, item: dict, info: PointopsInfo) -> PureWheel:
    where = f"{_WHERE} pure_wheels.{name}"
    if not isinstance(item, dict):
        raise KnowledgeError(f"{where}: expected a mapping with version, source, files and extras")
    files = tuple(str(f) for f in need(item, "files", where))
    extras = {str(k): str(v) for k, v in (need(item, "extras", where) or {}).items()}
    if not files or any("/" not in f for f in files):
        raise KnowledgeError(f"{where}.files: list the import package's files, e.g. {name}/__init__.py")
    unknown = sorted(set(extras.values()) - set(info.wheels))
    if not extras or unknown:
        raise KnowledgeError(f"{where}.extras: each extra must name a distribution of `wheels:` ({unknown})")
    return PureWheel(name, str(need(item, "version", where)), str(need(item, "source", where)), files, extras)


def parse_pointops(raw: dict) -> PointopsTable:
    """pointops_builds.yaml -> PointopsTable."""
    info = _parse_info(raw)
    builds = _parse_builds(raw)
    pure = tuple(_parse_pure_wheel(str(n), item, info) for n, item in (raw.get("pure_wheels") or {}).items())
    return PointopsTable(
        info=info, builds=tuple(builds), wheels=tuple(_parse_wheels(info, builds)), pure_wheels=pure
    )
