"""The offline path: package a pointops built on this machine (with setuptools) into a .conda
carrying the metadata the recipe renders for this platform's variant."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from solver.channel.errors import ChannelError, require_rattler_build
from solver.channel.index import current_platform, index_channel
from solver.channel.recipe import RecipeFiles, find_recipe, only_pointops
from solver.channel.render import (
    RenderedBuild,
    check_variants,
    none_if_unset,
    recipe_stage0,
    recipe_version,
    render_platform,
)


def _stage_from_wheel(wheel: Path, stage: Path) -> None:
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise ChannelError(
            f"{wheel} is not a wheel file; build one with `pip wheel --no-build-isolation ./ops-src`"
        )
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
        raise ChannelError(
            "pointops is not installed in this Python; run `pip install --no-build-isolation ./ops-src` "
            "or pass --wheel"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    site = stage / "site-packages"
    shutil.copytree(package_dir, site / "pointops", ignore=shutil.ignore_patterns("__pycache__"))
    dist = importlib.metadata.distribution("pointops")
    metadata = next(
        (f for f in dist.files or [] if f.name == "METADATA" and f.parent.name.endswith(".dist-info")), None
    )
    if metadata is not None:  # keep pip's record of the install, so `pip list` sees it in the env
        dist_info = Path(dist.locate_file(metadata)).parent
        shutil.copytree(dist_info, site / dist_info.name)


def _say(line: str) -> None:
    print(f"solver channel package-local: {line}", file=sys.stderr, flush=True)


def _build_wheel(source: Path, workdir: Path, progress) -> Path:
    if not source.is_dir():
        raise ChannelError(f"{source} is not a directory; pass --source with the ops-src directory")
    if not (source / "setup.py").is_file() and not (source / "pyproject.toml").is_file():
        raise ChannelError(f"{source} has no setup.py or pyproject.toml; pass the ops-src directory")
    from solver.errors import SolverError
    from solver.wheels.build import run_step

    progress(f"building a pointops wheel from {source} (this compiles the extension)")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-v",  # so that setup.py's counted progress lines reach run_step
        "--no-build-isolation",
        "--no-deps",
        "-w",
        str(workdir),
        str(source),
    ]
    # Compiling CUDA kernels takes minutes: one counted line per source as it starts.
    try:
        run_step(cmd, dict(os.environ), f"building the wheel (`{' '.join(cmd)}`)", progress)
    except SolverError as exc:
        raise ChannelError(str(exc)) from None
    wheels = sorted(workdir.glob("pointops-*.whl"))
    if not wheels:
        raise ChannelError(f"pip wheel produced no pointops wheel in {workdir}")
    return wheels[-1]


def _check_staged(site: Path, version: str, build: RenderedBuild) -> None:
    """Refuse a build that cannot be what the recipe promises: abi3 binary for this platform,
    right version, CUDA version and arch list."""
    package = site / "pointops"
    if not package.is_dir():
        raise ChannelError(
            f"no pointops package in the staged files ({sorted(p.name for p in site.iterdir())})"
        )
    extensions = [p for p in package.rglob("*") if p.suffix in (".so", ".pyd")]
    if not extensions:
        raise ChannelError(
            "the pointops build has no compiled extension; build ops-src with a C++ compiler first"
        )
    wrong_os = [p.name for p in extensions if (p.suffix == ".pyd") != build.platform.startswith("win")]
    if wrong_os:
        raise ChannelError(
            f"{', '.join(wrong_os)} is not a {build.platform} extension; package a build made on "
            f"{build.platform}"
        )
    not_abi3 = [p.name for p in extensions if ".cpython-" in p.name or ".cp3" in p.name]
    if not_abi3:
        raise ChannelError(
            f"{', '.join(not_abi3)} is built for one Python version, not the stable ABI (abi3); "
            "the conda package must serve every Python >= 3.10. Rebuild ops-src with py_limited_api."
        )
    metas = list(site.glob("pointops-*.dist-info/METADATA"))
    if metas:
        meta_version = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in metas[0].read_text().splitlines()
                if ln.startswith("Version:")
            ),
            None,
        )
        if meta_version and meta_version != version:
            raise ChannelError(
                f"the local build is pointops {meta_version} but the recipe is {version}; "
                "rebuild ops-src or update the recipe version"
            )
    info_file = package / "_build_info.json"
    if info_file.is_file():
        info = json.loads(info_file.read_text())
        built_cuda = none_if_unset(info.get("cuda_version"))
        if built_cuda != build.cuda_version:
            raise ChannelError(
                f"the local build is {'CUDA ' + built_cuda if built_cuda else 'CPU-only'} "
                f"but variant {build.variant} was asked for; pass the matching --variant"
            )
        built_archs = (tuple(info.get("sass_archs") or ()), none_if_unset(info.get("ptx_arch")))
        if build.cuda_version and built_archs != (build.sass_archs, build.ptx_arch):
            raise ChannelError(
                f"the local build has SASS {';'.join(built_archs[0])} and PTX {built_archs[1]}, "
                f"variant {build.variant} promises {build.arch_list}; rebuild with "
                f'TORCH_CUDA_ARCH_LIST="{build.arch_list}"'
            )


def package_local(
    output: Path,
    variant: str = "cpu",
    wheel: Path | None = None,
    source: Path | None = None,
    from_installed: bool = False,
    platform: str | None = None,
    files: RecipeFiles | None = None,
    progress=None,
) -> Path:
    """Package a pointops built on this machine into <output>/<subdir>/pointops-*.conda, with the
    name, version, build string, dependencies and constraints the recipe renders for this
    platform and variant, then index <output>. Returns the package path. `progress` receives the
    wheel build's steps, a line each (default: stderr)."""
    require_rattler_build()
    from rattler_build import assemble_package

    files = files or find_recipe()
    only_pointops(files, "package-local packages the pointops built on this machine")
    platform = platform or current_platform()
    builds = {b.variant: b for b in render_platform(platform, files)}
    check_variants(platform, [variant], list(builds), files)
    build = builds[variant]
    version = recipe_version(files)
    # Resolved before pip sees it: pip reads a bare relative name such as "ops-src" as a package
    # to download, not as a directory.
    source = Path(source).expanduser().resolve() if source is not None else files.source_dir

    with tempfile.TemporaryDirectory(prefix="pointops-stage-") as tmp:
        stage = Path(tmp) / "files"
        (stage / "site-packages").mkdir(parents=True)
        if wheel is not None:
            _stage_from_wheel(Path(wheel), stage)
        elif from_installed:
            _stage_from_installed(stage)
        else:
            _stage_from_wheel(_build_wheel(source, Path(tmp), progress or _say), stage)
        _check_staged(stage / "site-packages", version, build)

        subdir = Path(output) / platform
        subdir.mkdir(parents=True, exist_ok=True)
        summary = recipe_stage0(files).get("about", {}).get("summary")
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
            license=build.license or None,
            summary=summary,
            license_files=[files.recipe_dir / "LICENSE"],
            recipe_dir=files.recipe_dir,
        )
    index_channel(Path(output))
    return Path(result.path)
