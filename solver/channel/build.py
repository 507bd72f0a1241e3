"""Full builds: rattler-build every variant of one target platform against dependency channels
(conda-forge, or a local channel carrying the same packages). A noarch recipe (pointnet2_ops) is
one package for every platform, built on this machine."""

from __future__ import annotations

import sys
from pathlib import Path

from solver.channel.errors import ChannelError, require_rattler_build, usage_error
from solver.channel.index import current_platform, index_channel
from solver.channel.recipe import RecipeFiles, find_recipe
from solver.channel.render import EMULATED, check_variants, rendered_variants, variant_of


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
    """Prints rattler-build's build steps and warnings, one line each, prefixed by the variant;
    keeps every log line in `lines` (the build script's output included)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lines: list[str] = []

    def on_build_step(self, event) -> None:
        print(f"[{self.label}] {event.step_name}: {event.message}", file=sys.stderr, flush=True)

    def on_log(self, event) -> None:
        self.lines.append(str(event.message))
        if event.level in ("warn", "error"):
            print(f"[{self.label}] {event.level}: {event.message}", file=sys.stderr, flush=True)

    def on_download_start(self, event) -> None:
        pass

    def on_download_progress(self, event) -> None:
        pass

    def on_download_complete(self, event) -> None:
        pass


def test_strategy(target_platform: str, build_platform: str, test: bool) -> str:
    """Run the recipe's tests natively, and under emulation where the build machine can run the
    target (osx-64 on Apple silicon); a cross build for anything else skips them."""
    if not test:
        return "skip"
    return "native-and-emulated" if (target_platform, build_platform) in EMULATED else "native"


def build_channel(
    output: Path,
    channels: list[str],
    variants: list[str] | None = None,
    test: bool = True,
    target_platform: str | None = None,
    files: RecipeFiles | None = None,
    logs: dict[str, list[str]] | None = None,
    variant_overrides: dict[str, list] | None = None,
) -> list[Path]:
    """rattler-build every variant of `target_platform` (default: this machine's) on this machine
    into <output>, then index it. `logs`, when given, receives each variant's log lines;
    `variant_overrides` (key -> values) goes on top of the recipe's variant files."""
    require_rattler_build()
    from rattler_build import ToolConfiguration

    files = files or find_recipe()
    build_platform = current_platform()
    if files.noarch and target_platform not in (None, build_platform):
        raise usage_error(
            f"--platform {target_platform}: {files.package} is noarch, one package for every platform; "
            "build it without --platform"
        )
    platform = target_platform or build_platform
    rendered = rendered_variants(platform, files, build_platform=build_platform, overrides=variant_overrides)
    names = [variant_of(str(r.recipe.build.string)) for r in rendered]
    check_variants(platform, variants or [], names, files)
    check_reachable(channels)
    wanted = [r for r, name in zip(rendered, names, strict=True) if not variants or name in variants]
    packages = []
    tool = ToolConfiguration(test_strategy=test_strategy(platform, build_platform, test))
    for n, item in enumerate(wanted, 1):
        label = f"{n}/{len(wanted)} {item.recipe.build.string}"
        where = platform if platform == build_platform else f"{platform} on {build_platform}"
        if files.noarch:
            where = f"noarch (every platform) on {build_platform}"
        print(f"[{label}] building {files.package} for {where} ...", file=sys.stderr, flush=True)
        progress = _Progress(label)
        try:
            result = item.run_build(
                tool_config=tool, output_dir=Path(output), channels=list(channels), progress_callback=progress
            )
        except Exception as exc:
            raise ChannelError(f"building {item.recipe.build.string} failed: {exc}") from exc
        finally:
            if logs is not None:
                logs[str(item.recipe.build.string)] = progress.lines
        packages += [Path(p) for p in result.packages]
        print(
            f"[{label}] done: {', '.join(Path(p).name for p in result.packages)}", file=sys.stderr, flush=True
        )
    index_channel(Path(output))
    return packages
