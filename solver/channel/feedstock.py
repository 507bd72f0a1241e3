"""The conda-forge submission of recipes/pointops: the same recipe folder, building the release's
sdist (url + sha256) instead of the checkout, with the project's homepage and its maintainers.

The recipe in the repository builds the tree it sits in (`path: ../../ops-src`); only a release
has a tarball with a fixed hash, so the feedstock recipe is written when a release is made:

    solver channel feedstock --url https://.../pointops-0.1.0.tar.gz --homepage https://... \\
        --maintainer NAME [--maintainer NAME]... [--sdist pointops-0.1.0.tar.gz] --output DIR
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from solver.channel.errors import ChannelError
from solver.channel.recipe import RecipeFiles, find_recipe, only_pointops
from solver.channel.render import recipe_version

# The recipe's checkout source, which the feedstock replaces with the release sdist.
CHECKOUT_SOURCE = "  - path: ../../ops-src\n"
# Files of the recipe folder a feedstock carries (the recipe's own variant file included; the
# global pinning is conda-forge's).
RECIPE_FOLDER_FILES = (
    "build.sh",
    "build.bat",
    "cuda_arch_list.py",
    "test_pointops.py",
    "LICENSE",
    "conda_build_config.yaml",
)
_GITHUB_HANDLE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9._-]+)?$")


def build_sdist(source: Path, output_dir: Path) -> Path:
    """The sdist of ops-src (setuptools' PEP 517 backend, no build isolation)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(output_dir.resolve())], cwd=source, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ChannelError(
            f"building the sdist of {source} failed: "
            f"{(proc.stderr.strip().splitlines() or ['(no message)'])[-1]}"
        )
    return output_dir / proc.stdout.strip().splitlines()[-1]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def feedstock_recipe_text(
    recipe_text: str, url: str, sha256: str, homepage: str, maintainers: list[str]
) -> str:
    """recipe.yaml with the release source, homepage and maintainers (text edits, so that the
    recipe's comments and ${{ }} expressions stay as written)."""
    if recipe_text.count(CHECKOUT_SOURCE) != 1:
        raise ChannelError(f"the recipe has no single `{CHECKOUT_SOURCE.strip()}` source to replace")
    if recipe_text.count("\nabout:\n") != 1 or "\nextra:" in recipe_text:
        raise ChannelError("the recipe must have one `about:` section and no `extra:` section")
    body = recipe_text[recipe_text.index("schema_version:") :]  # the repository's header comments go
    body = body.replace(CHECKOUT_SOURCE, f"  - url: {url}\n    sha256: {sha256}\n")
    body = body.replace("\nabout:\n", f"\nabout:\n  homepage: {homepage}\n  repository: {homepage}\n")
    lines = "".join(f"    - {name}\n" for name in maintainers)
    header = (
        "# pointops for conda-forge, written by `solver channel feedstock` from the pointops repository.\n"
    )
    return header + body.rstrip("\n") + f"\n\nextra:\n  recipe-maintainers:\n{lines}"


def _check_release_flags(url: str, homepage: str, maintainers: list[str]) -> None:
    """--url, --homepage and --maintainer, before the recipe is read or an sdist built."""
    if not url.startswith("https://"):
        raise ChannelError(f"--url {url!r} must be the https address the release sdist is published at")
    if not homepage.startswith("https://") or "anaconda.org" in homepage:
        raise ChannelError(
            f"--homepage {homepage!r} must be the project's https home (its repository), not a channel"
        )
    bad = [m for m in maintainers if not _GITHUB_HANDLE.match(m)]
    if not maintainers or bad:
        raise ChannelError(
            "give at least one --maintainer, as GitHub handles"
            + (f" ({', '.join(map(repr, bad))} is not one)" if bad else "")
        )


def write_feedstock_recipe(
    output: Path,
    url: str,
    homepage: str,
    maintainers: list[str],
    sdist: Path | None = None,
    files: RecipeFiles | None = None,
) -> Path:
    """Write the conda-forge recipe folder to <output>/recipe; returns its recipe.yaml. Without
    `sdist`, one is built from ops-src into <output> (upload that file to `url`)."""
    _check_release_flags(url, homepage, maintainers)
    files = files or find_recipe()
    only_pointops(files, "feedstock writes pointops' conda-forge recipe from its release sdist")
    version = recipe_version(files)
    output = Path(output)
    if sdist is None:
        with tempfile.TemporaryDirectory() as tmp:
            built = build_sdist(files.source_dir, Path(tmp))
            output.mkdir(parents=True, exist_ok=True)
            sdist = Path(shutil.copy2(built, output / built.name))
    sdist = Path(sdist)
    if not sdist.is_file():
        raise ChannelError(f"{sdist} is not a file; pass the release sdist with --sdist")
    if not sdist.name.startswith(f"pointops-{version}."):
        raise ChannelError(f"{sdist.name} is not the sdist of pointops {version} (the recipe's version)")
    if not url.endswith("/" + sdist.name):
        raise ChannelError(f"--url must end with the sdist's file name {sdist.name}")

    recipe_dir = output / "recipe"
    recipe_dir.mkdir(parents=True, exist_ok=True)
    text = feedstock_recipe_text(
        files.recipe.read_text(encoding="utf-8"), url, sha256_of(sdist), homepage, maintainers
    )
    (recipe_dir / "recipe.yaml").write_text(text, encoding="utf-8")
    for name in RECIPE_FOLDER_FILES:
        shutil.copy2(files.recipe_dir / name, recipe_dir / name)
    return recipe_dir / "recipe.yaml"
