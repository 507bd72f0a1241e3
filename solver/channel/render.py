"""The variant matrix, as py-rattler-build renders a recipe of recipes/ (offline, or with a solve).

A noarch recipe (pointnet2_ops) is one package for every platform: it is rendered once, for this
machine, and its builds carry the platform "noarch".
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field

from solver import worker
from solver.channel.errors import ChannelError, require_rattler_build, usage_error
from solver.channel.index import current_platform
from solver.channel.recipe import RecipeFiles, find_recipe
from solver.errors import WorkerError

PLATFORMS = ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")
# Where each platform's packages are built: osx-64 is cross-compiled on an osx-arm64 machine, as
# conda-forge does (hosted Intel macOS runners are retired); the others build natively.
BUILD_PLATFORMS = {"osx-64": "osx-arm64"}
# Targets whose tests run on their build platform under emulation (Rosetta 2 on Apple silicon).
EMULATED = {("osx-64", "osx-arm64")}


def build_platform_for(platform: str) -> str:
    return BUILD_PLATFORMS.get(platform, platform)


def variant_of(build_string: str) -> str:
    """The variant a build string names, its part before the hash: "cuda129" of
    "cuda129_h1a2b3c4_200", "cpu_torch213_py312" of mmcv's, "py" of a noarch python "pyh1a2b3c4_0"."""
    match = re.match(r"^(.+?)_?h[0-9a-f]+_\d+$", build_string)
    return match.group(1) if match else build_string


def platforms_to_render(files: RecipeFiles, platforms: list[str] | tuple[str, ...] = PLATFORMS) -> list[str]:
    """The target platforms whose render makes the matrix: a noarch recipe's one package is the
    same for all of them, so it is rendered once (for this machine, when it is one of them)."""
    if not files.noarch:
        return list(platforms)
    here = current_platform()
    return [here if here in platforms else platforms[0]]


@dataclass(frozen=True)
class RenderedBuild:
    """One package of the matrix, as the recipe renders it (before any dependency solve)."""

    platform: str
    variant: str  # "cpu", "cuda129", ...
    cuda_version: str | None
    build_string: str
    build_number: int
    sass_archs: tuple[str, ...]  # from the arch table, as the build script derives them
    ptx_arch: str | None
    cuda_arch_min: str | None
    build: tuple[str, ...]
    host: tuple[str, ...]
    run: tuple[str, ...]
    run_constraints: tuple[str, ...]
    script_env: dict[str, str] = field(default_factory=dict)
    variant_values: dict[str, object] = field(default_factory=dict)
    sources: tuple[dict, ...] = ()
    license: str = ""
    license_files: tuple[str, ...] = ()

    @property
    def arch_list(self) -> str | None:
        """TORCH_CUDA_ARCH_LIST spelling, e.g. "7.5;8.0;12.0+PTX"."""
        if not self.sass_archs:
            return None
        return ";".join(f"{a}+PTX" if a == self.ptx_arch else a for a in self.sass_archs)

    def as_dict(self) -> dict[str, object]:
        return {
            "platform": self.platform,
            "variant": self.variant,
            "cuda_version": self.cuda_version,
            "build_string": self.build_string,
            "build_number": self.build_number,
            "sass_archs": list(self.sass_archs),
            "ptx_arch": self.ptx_arch,
            "cuda_arch_min": self.cuda_arch_min,
            "requirements": {
                "build": list(self.build),
                "host": list(self.host),
                "run": list(self.run),
                "run_constraints": list(self.run_constraints),
            },
        }


def none_if_unset(value: object) -> str | None:
    return None if value in (None, "None", "") else str(value)


def _arch_derivation(files: RecipeFiles):
    """(cuda_arch_list.py, the pointops package folder holding the arch table) that a CUDA build of
    the recipe derives its archs from, as its build script does: the recipe's own copy of the
    script, else recipes/pointops's (mmcv); the table of the recipe's source, else of its tree."""
    scripts = [
        files.recipe_dir / "cuda_arch_list.py",
        files.tree_root / "recipes" / "pointops" / "cuda_arch_list.py",
    ]
    tables = [files.tree_root / "ops-src" / "pointops"]
    if files.source_dir is not None:
        tables.insert(0, files.source_dir / "pointops")
    script = next((p for p in scripts if p.is_file()), None)
    table = next((p for p in tables if (p / "cuda_arch_table.json").is_file()), None)
    if script is None or table is None:
        raise ChannelError(
            f"{files.recipe} has CUDA variants, whose archs come from cuda_arch_list.py and the arch table "
            f"(looked in {', '.join(map(str, scripts))} and {', '.join(map(str, tables))}); use a recipe "
            "folder of a complete pointops source tree"
        )
    spec = importlib.util.spec_from_file_location("_pointops_recipe_cuda_arch_list", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, table


def variant_config(platform: str, files: RecipeFiles, overrides: dict[str, list] | None = None):
    """The recipe's variant files for `platform`, then `overrides` (key -> values) on top."""
    require_rattler_build()
    from rattler_build import JinjaConfig, PlatformConfig, VariantConfig

    platform_config = PlatformConfig(target_platform=platform, build_platform=build_platform_for(platform))
    config = VariantConfig.from_files_with_context(
        [str(p) for p in files.variant_configs], JinjaConfig(platform=platform_config)
    )
    return config.merge(VariantConfig(overrides)) if overrides else config


def rendered_variants(
    platform: str,
    files: RecipeFiles,
    build_platform: str | None = None,
    overrides: dict[str, list] | None = None,
):
    """py-rattler-build's rendered variants that are built (the recipe skips every Python but
    python_min; py-rattler-build returns skipped variants too, so its abi3_build context decides)."""
    require_rattler_build()
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe

    if platform not in PLATFORMS:
        raise ChannelError(f"unknown platform {platform!r}; choose one of: {', '.join(PLATFORMS)}")
    build_platform = build_platform or build_platform_for(platform)
    platform_config = PlatformConfig(
        target_platform=platform, build_platform=build_platform, host_platform=platform
    )
    try:
        variants = variant_config(platform, files, overrides)
        rendered = Stage0Recipe.from_file(str(files.recipe)).render(
            variants, RenderConfig(platform=platform_config)
        )
    except Exception as exc:  # rattler-build raises its own error types; all mean "fix the recipe"
        raise ChannelError(f"rendering {files.recipe} for {platform} failed: {exc}") from exc
    return [item for item in rendered if item.recipe.context.get("abi3_build", True) is not False]


def render_platform(platform: str, files: RecipeFiles | None = None) -> list[RenderedBuild]:
    """Render every built variant of the recipe for one target platform, offline (a noarch recipe's
    one package, for any platform, has the platform "noarch")."""
    files = files or find_recipe()
    arch_derivation = None  # loaded for the first CUDA build: a CPU-only or noarch recipe needs none
    builds = []
    for item in rendered_variants(platform, files):
        recipe_dict = item.recipe.to_dict()
        build = recipe_dict.get("build", {})
        reqs = recipe_dict.get("requirements", {})
        values = dict(item.variant)
        cuda = none_if_unset(values.get("cuda_compiler_version"))
        sass, ptx = [], None
        if cuda:
            arch_derivation = arch_derivation or _arch_derivation(files)
            helper, table = arch_derivation
            sass, ptx = helper.archs_for(table, cuda, platform)
        constraints = tuple(str(s) for s in reqs.get("run_constraints", []))
        arch_min = next((c.split(">=", 1)[1] for c in constraints if c.startswith("__cuda_arch >=")), None)
        script = build.get("script") or {}
        env = script.get("env", {}) if isinstance(script, dict) else {}
        about = recipe_dict.get("about", {})
        builds.append(
            RenderedBuild(
                platform="noarch" if files.noarch else platform,
                variant=variant_of(str(build["string"])),
                cuda_version=cuda,
                build_string=str(build["string"]),
                build_number=int(build.get("number", 0)),
                sass_archs=tuple(sass),
                ptx_arch=ptx,
                cuda_arch_min=arch_min,
                build=tuple(str(s) for s in reqs.get("build", [])),
                host=tuple(str(s) for s in reqs.get("host", [])),
                run=tuple(str(s) for s in reqs.get("run", [])),
                run_constraints=constraints,
                script_env={str(k): str(v) for k, v in env.items()},
                variant_values=values,
                sources=tuple(recipe_dict.get("source", [])),
                license=str(about.get("license", "")),
                license_files=tuple(str(f) for f in about.get("license_file", [])),
            )
        )
    # cpu first, then CUDA versions in ascending order
    return sorted(
        builds,
        key=lambda b: (b.cuda_version is not None, [int(x) for x in (b.cuda_version or "0").split(".")]),
    )


def render_matrix(
    platforms: tuple[str, ...] | list[str] = PLATFORMS, files: RecipeFiles | None = None
) -> list[RenderedBuild]:
    files = files or find_recipe()
    return [b for p in platforms_to_render(files, platforms) for b in render_platform(p, files)]


def check_variants(platform: str, asked: list[str], available: list[str], files: RecipeFiles) -> None:
    """Every variant asked for (--variant) must be one of `platform`'s (`available`). A name that no
    platform of the recipe has is a malformed flag (exit 2); one that only another platform has is
    not (exit 1): the machine, not the command line, is what does not fit."""
    missing = [v for v in asked if v not in available]
    if not missing:
        return
    anywhere = {b.variant for b in render_matrix(files=files)}
    unknown = [v for v in missing if v not in anywhere]
    it_has = f"{platform} has: {', '.join(sorted(available))}"
    if unknown:
        raise usage_error(
            f"--variant {', '.join(map(repr, unknown))}: the recipe has no such variant; {it_has}"
        )
    raise ChannelError(
        f"the recipe has no {', '.join(map(repr, missing))} variant for {platform}; it has: "
        f"{', '.join(sorted(available))}"
    )


def recipe_stage0(files: RecipeFiles | None = None) -> dict:
    require_rattler_build()
    from rattler_build import Stage0Recipe

    return Stage0Recipe.from_file(str((files or find_recipe()).recipe)).to_dict()


def recipe_version(files: RecipeFiles | None = None) -> str:
    return str(recipe_stage0(files)["context"]["version"])


def solved_render(
    recipe: str, platform: str, build_platform: str, channels: list[str], variant_configs: list[str]
) -> list:
    """rattler-build's render with solved build/host environments, as JSON data. Run through
    solver.worker: the rattler runtime can crash while the interpreter exits after a solve. It
    prints the render on file descriptor 1, which is caught in a temporary file here."""
    import tempfile
    import warnings

    warnings.simplefilter("ignore")
    require_rattler_build()
    from rattler_build import build_recipes

    with tempfile.TemporaryFile() as caught:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(caught.fileno(), 1)
        try:
            build_recipes(
                [recipe],
                target_platform=platform,
                build_platform=build_platform,
                channel=channels,
                variant_config=variant_configs,
                render_only=True,
                with_solve=True,
            )
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        caught.seek(0)
        return json.loads(caught.read().decode())


def render_with_solve(
    platform: str,
    channels: list[str],
    files: RecipeFiles | None = None,
    timeout_s: float = 300,
    env: dict[str, str] | None = None,
) -> list[dict[str, object]]:
    """Render and resolve build/host environments against `channels`, so that run_exports
    (vc14_runtime/ucrt from vs2022, cuda-version from nvcc, ...) land in the run requirements.
    `env` is the child's environment (e.g. with CONDA_OVERRIDE_CUDA); default: this process's.

    Returns one dict per built variant: build_string, depends (finalized run requirements) and
    constrains.
    """
    files = files or find_recipe()
    request = {
        "recipe": str(files.recipe),
        "platform": platform,
        "build_platform": build_platform_for(platform),
        "channels": list(channels),
        "variant_configs": [str(p) for p in files.variant_configs],
    }
    try:
        rendered = worker.call(
            "solver.channel.render:solved_render",
            request,
            timeout_s,
            what=f"resolving the {platform} build environments",
            env=env,
        )
    except WorkerError as exc:
        if "did not finish" in str(exc):
            raise ChannelError(f"{exc}; check that the channels are reachable") from None
        raise ChannelError(
            f"resolving the {platform} build environments against {', '.join(channels)} failed: {exc}. "
            "The channels must carry the compilers, python, pytorch and CUDA packages the recipe names "
            "(conda-forge does); a CUDA variant on a machine without a GPU needs CONDA_OVERRIDE_CUDA "
            "set to its CUDA version."
        ) from None
    results = []
    for output in rendered:
        if not output["recipe"]["context"].get("abi3_build", True):
            continue
        finalized = output.get("finalized_dependencies") or {}
        run = finalized.get("run") or {}
        results.append(
            {
                "build_string": output["recipe"]["build"]["string"],
                "depends": _unique(_spec_text(d) for d in run.get("depends", [])),
                "constrains": _unique(_spec_text(d) for d in run.get("constraints", [])),
            }
        )
    return results


def _spec_text(entry: object) -> str:
    if isinstance(entry, dict):
        return str(entry.get("spec") or entry.get("source"))
    return str(entry)


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))
