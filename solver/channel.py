"""`solver channel`: the pointops conda packages, from recipe to channel.

    solver channel render [--platform P]... [--json]    the variant matrix (same as --render-only)
    solver channel render --solve --channel URL ...     ... with run_exports resolved against URL
    solver channel build [--channel URL]... [--output DIR]
                                                        rattler-build every variant of this platform
    solver channel package-local [--wheel W | --from-installed] [--variant cpu] [--output DIR]
                                                        offline: a local pointops build -> .conda
    solver channel index DIR                            write repodata for a channel directory
    solver channel upload DIR [--owner pointops]        upload its packages to anaconda.org

The recipe (recipes/pointops/recipe.yaml) and the matrix (conda_build_config.yaml) are the only
sources of truth: everything here renders them with py-rattler-build rather than repeating
their content.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RECIPE = REPO_ROOT / "recipes" / "pointops" / "recipe.yaml"
VARIANT_CONFIG = REPO_ROOT / "conda_build_config.yaml"
PLATFORMS = ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")
DEFAULT_CHANNELS = ("https://conda.anaconda.org/conda-forge",)
DEFAULT_OUTPUT = Path("out") / "channel"


class ChannelError(Exception):
    """A problem the user can fix; the message names it and the fix."""


@dataclass(frozen=True)
class RenderedBuild:
    """One package of the matrix, as the recipe renders it (before any dependency solve)."""

    platform: str
    variant: str  # "cpu", "cuda129", ...
    cuda_version: str | None
    build_string: str
    build_number: int
    arch_list: str | None  # TORCH_CUDA_ARCH_LIST, e.g. "7.5;8.0;12.0+PTX"
    cuda_arch_min: str | None
    build: tuple[str, ...]
    host: tuple[str, ...]
    run: tuple[str, ...]
    run_constraints: tuple[str, ...]
    script_env: dict[str, str] = field(default_factory=dict)
    variant_values: dict[str, object] = field(default_factory=dict)

    @property
    def sass_archs(self) -> tuple[str, ...]:
        return tuple(a.removesuffix("+PTX") for a in (self.arch_list or "").split(";") if a)

    @property
    def ptx_arch(self) -> str | None:
        ptx = [a.removesuffix("+PTX") for a in (self.arch_list or "").split(";") if a.endswith("+PTX")]
        return ptx[0] if ptx else None

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


def _none_if_unset(value: object) -> str | None:
    return None if value in (None, "None", "") else str(value)


def render_platform(platform: str, recipe: Path = RECIPE, variant_config: Path = VARIANT_CONFIG) -> list[RenderedBuild]:
    """Render every (non-skipped) variant of the recipe for one target platform, offline."""
    from rattler_build import JinjaConfig, PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig

    if platform not in PLATFORMS:
        raise ChannelError(f"unknown platform {platform!r}; choose one of: {', '.join(PLATFORMS)}")
    for path in (recipe, variant_config):
        if not path.is_file():
            raise ChannelError(f"{path} does not exist: `solver channel` works from a pointops source checkout "
                               "(pip install -e .), where recipes/ and conda_build_config.yaml live")
    platform_config = PlatformConfig(target_platform=platform)
    try:
        variants = VariantConfig.from_conda_build_config(str(variant_config), JinjaConfig(platform=platform_config))
        rendered = Stage0Recipe.from_file(str(recipe)).render(variants, RenderConfig(platform=platform_config))
    except Exception as exc:  # rattler-build raises its own error types; all mean "fix the recipe"
        raise ChannelError(f"rendering {recipe} for {platform} failed: {exc}") from exc

    builds = []
    for item in rendered:
        recipe_dict = item.recipe.to_dict()
        build = recipe_dict.get("build", {})
        if build.get("skip") in (True, "true"):
            continue
        reqs = recipe_dict.get("requirements", {})
        values = dict(item.variant)
        cuda = _none_if_unset(values.get("cuda_compiler_version"))
        script = build.get("script") or {}
        env = script.get("env", {}) if isinstance(script, dict) else {}
        builds.append(
            RenderedBuild(
                platform=platform,
                variant=str(build["string"]).split("_h")[0],
                cuda_version=cuda,
                build_string=str(build["string"]),
                build_number=int(build.get("number", 0)),
                arch_list=_none_if_unset(values.get("torch_cuda_arch_list")) if cuda else None,
                cuda_arch_min=_none_if_unset(values.get("cuda_arch_min")) if cuda else None,
                build=tuple(str(s) for s in reqs.get("build", [])),
                host=tuple(str(s) for s in reqs.get("host", [])),
                run=tuple(str(s) for s in reqs.get("run", [])),
                run_constraints=tuple(str(s) for s in reqs.get("run_constraints", [])),
                script_env={str(k): str(v) for k, v in env.items()},
                variant_values=values,
            )
        )
    # cpu first, then CUDA versions in ascending order
    return sorted(builds, key=lambda b: (b.cuda_version is not None, [int(x) for x in (b.cuda_version or "0").split(".")]))


def render_matrix(platforms: tuple[str, ...] | list[str] = PLATFORMS, **paths: Path) -> list[RenderedBuild]:
    return [b for p in platforms for b in render_platform(p, **paths)]


# Runs in a child process: rattler-build prints the solved render as JSON on its stdout.
# It leaves through os._exit: the rattler runtime can crash while the interpreter shuts down
# after a solve, which would turn a good run into a failed one.
_SOLVE_RENDER_SCRIPT = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
from rattler_build import build_recipes
args = json.loads(sys.argv[1])
build_recipes([args["recipe"]], target_platform=args["platform"], build_platform=args["platform"],
              channel=args["channels"], variant_config=[args["variant_config"]],
              render_only=True, with_solve=True)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def render_with_solve(
    platform: str,
    channels: list[str],
    recipe: Path = RECIPE,
    variant_config: Path = VARIANT_CONFIG,
    timeout_s: float = 300,
) -> list[dict[str, object]]:
    """Render and resolve build/host environments against `channels`, so that run_exports
    (vc14_runtime/ucrt from vs2022, cuda-version from nvcc, ...) land in the run requirements.

    Returns one dict per variant: build_string, depends (finalized run requirements) and
    constrains.
    """
    args = {
        "recipe": str(recipe),
        "platform": platform,
        "channels": list(channels),
        "variant_config": str(variant_config),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _SOLVE_RENDER_SCRIPT, json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:
        raise ChannelError(f"resolving the {platform} build environments took over {timeout_s:.0f} s; "
                           "check that the channels are reachable") from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ChannelError(
            f"resolving the {platform} build environments against {', '.join(channels)} failed: {last}\n"
            "The channels must carry the compilers, python, pytorch and CUDA packages the recipe names "
            "(conda-forge does)."
        )
    results = []
    for output in json.loads(proc.stdout):
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


# ---------------------------------------------------------------------------------------------
# Channel directory


def index_channel(channel_dir: Path) -> None:
    """Write repodata.json (and its compressed and sharded forms) for every subdir."""
    import asyncio

    from rattler.index import index_fs

    channel_dir = Path(channel_dir)
    if not channel_dir.is_dir():
        raise ChannelError(f"{channel_dir} is not a directory; build or package into it first")
    (channel_dir / "noarch").mkdir(exist_ok=True)  # every channel needs one, even empty
    asyncio.run(index_fs(channel_dir))


def current_platform() -> str:
    from rattler import Subdir

    return str(Subdir.current())


# ---------------------------------------------------------------------------------------------
# Offline path: package a pointops that was built here with setuptools into a .conda


def _stage_from_wheel(wheel: Path, stage: Path) -> None:
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise ChannelError(f"{wheel} is not a wheel file; build one with `pip wheel --no-build-isolation ./ops-src`")
    try:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(stage / "site-packages")
    except zipfile.BadZipFile as exc:
        raise ChannelError(f"{wheel} is not a valid wheel (zip) file: {exc}") from exc


def _stage_from_installed(stage: Path) -> None:
    """Copy the pointops package (and its dist-info) that this Python has installed."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("pointops")
    if spec is None or not spec.submodule_search_locations:
        raise ChannelError("pointops is not installed in this Python; run `pip install --no-build-isolation ./ops-src` "
                           "or pass --wheel")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    site = stage / "site-packages"
    shutil.copytree(package_dir, site / "pointops", ignore=shutil.ignore_patterns("__pycache__"))
    dist = importlib.metadata.distribution("pointops")
    metadata = next((f for f in dist.files or [] if f.name == "METADATA" and f.parent.name.endswith(".dist-info")), None)
    if metadata is not None:  # keep pip's record of the install, so `pip list` sees it in the env
        dist_info = Path(dist.locate_file(metadata)).parent
        shutil.copytree(dist_info, site / dist_info.name)


def _build_wheel(source: Path, workdir: Path) -> Path:
    if not (source / "setup.py").is_file() and not (source / "pyproject.toml").is_file():
        raise ChannelError(f"{source} has no setup.py or pyproject.toml; pass the ops-src directory")
    print(f"building a pointops wheel from {source} (this compiles the extension) ...", file=sys.stderr, flush=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(workdir), str(source)]
    # pip's own output goes to stderr as it comes: compiling CUDA kernels takes minutes.
    proc = subprocess.run(cmd, stdout=2)  # stdout onto our stderr (fd 2); stdout stays for the result
    if proc.returncode != 0:
        raise ChannelError(f"building the wheel failed (`{' '.join(cmd)}`, exit {proc.returncode}); "
                           "pip's messages are above")
    wheels = sorted(workdir.glob("pointops-*.whl"))
    if not wheels:
        raise ChannelError(f"pip wheel produced no pointops wheel in {workdir}")
    return wheels[-1]


def _check_staged(site: Path, version: str, build: RenderedBuild) -> None:
    """Refuse a build that cannot be what the recipe promises: abi3 binary for this platform,
    right version, CUDA version and arch list."""
    package = site / "pointops"
    if not package.is_dir():
        raise ChannelError(f"no pointops package in the staged files ({sorted(p.name for p in site.iterdir())})")
    extensions = [p for p in package.rglob("*") if p.suffix in (".so", ".pyd")]
    if not extensions:
        raise ChannelError("the pointops build has no compiled extension; build ops-src with a C++ compiler first")
    wrong_os = [p.name for p in extensions if (p.suffix == ".pyd") != build.platform.startswith("win")]
    if wrong_os:
        raise ChannelError(f"{', '.join(wrong_os)} is not a {build.platform} extension; package a build made on "
                           f"{build.platform}")
    not_abi3 = [p.name for p in extensions if ".cpython-" in p.name or ".cp3" in p.name]
    if not_abi3:
        raise ChannelError(f"{', '.join(not_abi3)} is built for one Python version, not the stable ABI (abi3); "
                           "the conda package must serve every Python >= 3.10. Rebuild ops-src with py_limited_api.")
    metas = list(site.glob("pointops-*.dist-info/METADATA"))
    if metas:
        meta_version = next((ln.split(":", 1)[1].strip() for ln in metas[0].read_text().splitlines()
                             if ln.startswith("Version:")), None)
        if meta_version and meta_version != version:
            raise ChannelError(f"the local build is pointops {meta_version} but the recipe is {version}; "
                               "rebuild ops-src or update the recipe version")
    info_file = package / "_build_info.json"
    if info_file.is_file():
        info = json.loads(info_file.read_text())
        built_cuda = _none_if_unset(info.get("cuda_version"))
        if built_cuda != build.cuda_version:
            raise ChannelError(f"the local build is {'CUDA ' + built_cuda if built_cuda else 'CPU-only'} "
                               f"but variant {build.variant} was asked for; pass the matching --variant")
        built_archs = (tuple(info.get("sass_archs") or ()), _none_if_unset(info.get("ptx_arch")))
        if build.cuda_version and built_archs != (build.sass_archs, build.ptx_arch):
            raise ChannelError(f"the local build has SASS {';'.join(built_archs[0])} and PTX {built_archs[1]}, "
                               f"variant {build.variant} promises {build.arch_list}; rebuild with "
                               f"TORCH_CUDA_ARCH_LIST=\"{build.arch_list}\"")


def package_local(
    output: Path,
    variant: str = "cpu",
    wheel: Path | None = None,
    source: Path | None = None,
    from_installed: bool = False,
    platform: str | None = None,
) -> Path:
    """Package a pointops built on this machine into <output>/<subdir>/pointops-*.conda, with the
    name, version, build string, dependencies and constraints the recipe renders for this
    platform and variant, then index <output>. Returns the package path."""
    from rattler_build import assemble_package

    platform = platform or current_platform()
    builds = {b.variant: b for b in render_platform(platform)}
    if variant not in builds:
        raise ChannelError(f"the recipe has no {variant!r} variant for {platform}; it has: {', '.join(builds)}")
    build = builds[variant]
    version = _recipe_version()

    with tempfile.TemporaryDirectory(prefix="pointops-stage-") as tmp:
        stage = Path(tmp) / "files"
        (stage / "site-packages").mkdir(parents=True)
        if wheel is not None:
            _stage_from_wheel(Path(wheel), stage)
        elif from_installed:
            _stage_from_installed(stage)
        else:
            _stage_from_wheel(_build_wheel(Path(source or REPO_ROOT / "ops-src"), Path(tmp)), stage)
        _check_staged(stage / "site-packages", version, build)

        subdir = Path(output) / platform
        subdir.mkdir(parents=True, exist_ok=True)
        about = _recipe_about()
        # CEP 20: an abi3 package is `noarch: python` in its metadata (files under site-packages/,
        # placed into the env's Python by the installer) while its subdir stays the platform's.
        result = assemble_package(
            name="pointops",
            version=version,
            target_platform=platform,
            build_string=build.build_string,
            build_number=build.build_number,
            output_dir=subdir,
            files_dir=stage,
            noarch="python",
            depends=list(build.run),
            constrains=list(build.run_constraints),
            license=about.get("license"),
            summary=about.get("summary"),
            homepage=about.get("homepage"),
            license_files=[RECIPE.parent / "LICENSE"],
            recipe_dir=RECIPE.parent,
        )
    index_channel(Path(output))
    return Path(result.path)


def _recipe_stage0() -> dict:
    from rattler_build import Stage0Recipe

    return Stage0Recipe.from_file(str(RECIPE)).to_dict()


def _recipe_version() -> str:
    return str(_recipe_stage0()["context"]["version"])


def _recipe_about() -> dict[str, str]:
    return {k: str(v) for k, v in (_recipe_stage0().get("about") or {}).items() if isinstance(v, str)}


# ---------------------------------------------------------------------------------------------
# Full builds (need the channels of the recipe's dependencies, i.e. conda-forge)


def check_reachable(channels: list[str], timeout_s: float = 10) -> None:
    import urllib.error
    import urllib.request

    for channel in channels:
        if channel.startswith("file://") or "://" not in channel:
            path = Path(channel.removeprefix("file://"))
            if not (path / "noarch" / "repodata.json").is_file():
                raise ChannelError(f"{channel} is not an indexed channel directory (no noarch/repodata.json)")
            continue
        url = channel.rstrip("/") + "/noarch/repodata.json"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s):
                pass
        except (urllib.error.URLError, OSError) as exc:
            raise ChannelError(
                f"cannot reach {channel} ({exc}); full builds need the compilers, pytorch and CUDA packages "
                "from conda-forge. Offline, package a local build instead: `solver channel package-local`"
            ) from exc


class _Progress:
    """Prints rattler-build's build steps and warnings, one line each, prefixed by the variant."""

    def __init__(self, label: str) -> None:
        self.label = label

    def on_build_step(self, event) -> None:
        print(f"[{self.label}] {event.step_name}: {event.message}", file=sys.stderr, flush=True)

    def on_log(self, event) -> None:
        if event.level in ("warn", "error"):
            print(f"[{self.label}] {event.level}: {event.message}", file=sys.stderr, flush=True)

    def on_download_start(self, event) -> None:
        pass

    def on_download_progress(self, event) -> None:
        pass

    def on_download_complete(self, event) -> None:
        pass


def build_channel(output: Path, channels: list[str], variants: list[str] | None = None, test: bool = True) -> list[Path]:
    """rattler-build every variant of this platform into <output>, then index it."""
    from rattler_build import (
        JinjaConfig,
        PlatformConfig,
        RenderConfig,
        Stage0Recipe,
        ToolConfiguration,
        VariantConfig,
    )

    check_reachable(channels)
    platform = current_platform()
    platform_config = PlatformConfig(target_platform=platform)
    config = VariantConfig.from_conda_build_config(str(VARIANT_CONFIG), JinjaConfig(platform=platform_config))
    rendered = Stage0Recipe.from_file(str(RECIPE)).render(config, RenderConfig(platform=platform_config))
    wanted = [r for r in rendered if not variants or str(r.recipe.build.string).split("_h")[0] in variants]
    if not wanted:
        raise ChannelError(f"no variant of {platform} matches {variants}; see `solver channel render`")
    packages = []
    tool = ToolConfiguration(test_strategy="native" if test else "skip")
    for n, item in enumerate(wanted, 1):
        label = f"{n}/{len(wanted)} {item.recipe.build.string}"
        print(f"[{label}] building pointops for {platform} ...", file=sys.stderr, flush=True)
        try:
            result = item.run_build(tool_config=tool, output_dir=Path(output), channels=list(channels),
                                    progress_callback=_Progress(label))
        except Exception as exc:
            raise ChannelError(f"building {item.recipe.build.string} failed: {exc}") from exc
        packages += [Path(p) for p in result.packages]
        print(f"[{label}] done: {', '.join(Path(p).name for p in result.packages)}", file=sys.stderr, flush=True)
    index_channel(Path(output))
    return packages


def upload_channel(channel_dir: Path, owner: str, api_key: str | None) -> list[Path]:
    """Upload every .conda under <channel_dir>/<subdir>/ to anaconda.org/<owner>."""
    from rattler_build import upload_package_to_anaconda

    packages = sorted(Path(channel_dir).glob("*/*.conda"))
    if not packages:
        raise ChannelError(f"no .conda packages under {channel_dir}/<subdir>/; build or package them first")
    if not api_key:
        raise ChannelError("set ANACONDA_API_KEY to an anaconda.org token that may upload to "
                           f"the {owner} channel")
    try:
        upload_package_to_anaconda([str(p) for p in packages], owner, api_key=api_key)
    except Exception as exc:
        raise ChannelError(f"uploading to anaconda.org/{owner} failed: {exc}") from exc
    return packages


# ---------------------------------------------------------------------------------------------
# CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--render-only", action="store_true", help="print the variant matrix and exit (= `render`)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")

    render = sub.add_parser("render", help="print the variant matrix the recipe renders")
    render.add_argument("--platform", action="append", choices=PLATFORMS, help="only these platforms (repeatable)")
    render.add_argument("--json", action="store_true", help="machine-readable output")
    render.add_argument("--solve", action="store_true", help="resolve build/host envs to show the final run requirements")
    render.add_argument("--channel", action="append", help="channel for --solve (default: conda-forge)")

    build = sub.add_parser("build", help="rattler-build every variant of this platform and index the result")
    build.add_argument("--channel", action="append", help="dependency channel (default: conda-forge)")
    build.add_argument("--variant", action="append", help="only these variants, e.g. cpu or cuda129 (repeatable)")
    build.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="channel directory (default: %(default)s)")
    build.add_argument("--no-test", action="store_true", help="skip the recipe's tests")

    local = sub.add_parser("package-local", help="offline: package a pointops built here into a .conda and index it")
    source = local.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=Path, help="a pointops wheel built here (abi3)")
    source.add_argument("--source", type=Path, help="build a wheel from this ops-src directory (default)")
    source.add_argument("--from-installed", action="store_true", help="use the pointops installed in this Python")
    local.add_argument("--variant", default="cpu", help="recipe variant whose metadata to use (default: %(default)s)")
    local.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="channel directory (default: %(default)s)")

    index = sub.add_parser("index", help="write repodata for a channel directory")
    index.add_argument("directory", type=Path)

    upload = sub.add_parser("upload", help="upload a channel directory's packages to anaconda.org (ANACONDA_API_KEY)")
    upload.add_argument("directory", type=Path)
    upload.add_argument("--owner", default="pointops", help="anaconda.org channel (default: %(default)s)")


def _print_matrix(builds: list[RenderedBuild]) -> None:
    print(f"{'platform':14s} {'variant':8s} {'build string':24s} {'cuda':5s} {'__cuda_arch':12s} archs")
    for b in builds:
        archs = ";".join(b.sass_archs) + (f"+PTX({b.ptx_arch})" if b.ptx_arch else "") if b.cuda_version else "-"
        arch_min = f">={b.cuda_arch_min}" if b.cuda_arch_min else "-"
        print(f"{b.platform:14s} {b.variant:8s} {b.build_string:24s} {b.cuda_version or '-':5s} {arch_min:12s} {archs}")
        line = f"{'':14s} run: {', '.join(b.run)}"
        if b.run_constraints:
            line += f"; constrains: {', '.join(b.run_constraints)}"
        print(line)


def run(args: argparse.Namespace) -> int:
    action = "render" if args.render_only and args.action in (None, "render") else args.action
    try:
        if action == "render":
            platforms = getattr(args, "platform", None) or list(PLATFORMS)
            if getattr(args, "solve", False):
                channels = args.channel or list(DEFAULT_CHANNELS)
                check_reachable(channels)
                solved = {p: render_with_solve(p, channels) for p in platforms}
                print(json.dumps(solved, indent=2))
                return 0
            builds = []
            for n, platform in enumerate(platforms, 1):
                print(f"rendering {platform} ({n}/{len(platforms)}) ...", file=sys.stderr, flush=True)
                builds += render_platform(platform)
            if getattr(args, "json", False):
                print(json.dumps([b.as_dict() for b in builds], indent=2))
            else:
                _print_matrix(builds)
            return 0
        if action == "build":
            packages = build_channel(args.output, args.channel or list(DEFAULT_CHANNELS), args.variant, not args.no_test)
            print("\n".join(str(p) for p in packages))
            print(f"indexed {args.output}", file=sys.stderr)
            return 0
        if action == "package-local":
            path = package_local(args.output, args.variant, wheel=args.wheel, source=args.source,
                                 from_installed=args.from_installed)
            print(path)
            print(f"indexed {args.output}; install with: conda install -c {Path(args.output).resolve().as_uri()} "
                  "-c conda-forge pointops", file=sys.stderr)
            return 0
        if action == "index":
            index_channel(args.directory)
            print(f"indexed {args.directory}", file=sys.stderr)
            return 0
        if action == "upload":
            packages = upload_channel(args.directory, args.owner, os.environ.get("ANACONDA_API_KEY"))
            print(f"uploaded {len(packages)} packages to anaconda.org/{args.owner}", file=sys.stderr)
            return 0
        print("solver channel: choose an action: render, build, package-local, index or upload (see --help)",
              file=sys.stderr)
        return 2
    except ChannelError as exc:
        print(f"solver channel: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # an output path that is a file, a full disk, no permission, ...
        print(f"solver channel: error: {exc.strerror or exc}: {exc.filename or ''}; "
              "check the --output / directory argument", file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
