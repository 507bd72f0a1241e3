"""Where a recipe of recipes/ and its variant files are, without assuming an editable checkout,
and what the channel commands read from it.

A recipe is recipes/<name>/recipe.yaml of a pointops source tree: pointops (the default),
pointnet2_ops (noarch: python), mmcv, ... `--recipe` takes such a name or the path of a recipe
folder (or its recipe.yaml). The variants come from two conda_build_config.yaml files read in
order: the tree's top-level one (conda-forge's global pinning as this channel uses it) and the one
next to the recipe (the recipe's own keys). What the recipe builds from (its `path:` source), its
package name and whether it is noarch are read from recipe.yaml itself.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from solver.channel.errors import ChannelError, usage_error

RECIPES_IN_TREE = Path("recipes")
DEFAULT_RECIPE = "pointops"
RECIPE_IN_TREE = RECIPES_IN_TREE / DEFAULT_RECIPE / "recipe.yaml"
VARIANT_FILE = "conda_build_config.yaml"
# The environment variable that names the recipe when no --recipe is given.
RECIPE_ENV = "POINTOPS_RECIPE"
# A recipe given by name ("pointnet2_ops"), not by path
_RECIPE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class RecipeFiles:
    recipe: Path
    variant_configs: tuple[Path, ...]

    @property
    def recipe_dir(self) -> Path:
        return self.recipe.parent

    @property
    def tree_root(self) -> Path:
        """The source tree the recipe sits in (recipes/<name>/recipe.yaml)."""
        return self.recipe_dir.parent.parent

    @functools.cached_property
    def _data(self) -> dict:
        import yaml

        try:
            data = yaml.safe_load(self.recipe.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ChannelError(f"{self.recipe} cannot be read as a recipe: {exc}") from None
        return data if isinstance(data, dict) else {}

    @property
    def package(self) -> str:
        """The package the recipe builds (`package.name`), else its folder's name."""
        name = (self._data.get("package") or {}).get("name")
        return str(name) if isinstance(name, str) and "${{" not in name else self.recipe_dir.name

    @property
    def noarch(self) -> bool:
        """`build.noarch` (python or generic): one package for every platform, rendered once."""
        return bool((self._data.get("build") or {}).get("noarch"))

    @property
    def source_dir(self) -> Path | None:
        """The folder the recipe builds from: its first `path:` source that is a folder (pointops:
        ops-src; pointnet2_ops: ops-src/dropins/pointnet2_ops); None for a recipe of release
        archives (mmcv, a feedstock's recipe)."""
        sources = self._data.get("source") or []
        for source in sources if isinstance(sources, list) else [sources]:
            path = source.get("path") if isinstance(source, dict) else None
            if isinstance(path, str) and "${{" not in path and (self.recipe_dir / path).is_dir():
                return (self.recipe_dir / path).resolve()
        return None


def only_pointops(files: RecipeFiles, what: str) -> None:
    """For the actions made for pointops alone (package-local, feedstock): another recipe is a
    usage error that names the action that builds it."""
    if files.package != DEFAULT_RECIPE:
        raise usage_error(
            f"--recipe {files.recipe_dir.name}: {what}, not {files.package}; build {files.package} with "
            f"`solver channel build --recipe {files.recipe_dir.name}`"
        )


def recipe_files(recipe: Path) -> RecipeFiles:
    """The files of the recipe at `recipe` (a recipe.yaml or the folder holding it)."""
    recipe = Path(recipe).expanduser()
    if recipe.is_dir():
        recipe = recipe / "recipe.yaml"
    if not recipe.is_file():
        raise ChannelError(
            f"{recipe} is not a recipe file; pass --recipe with a recipe's name (pointops, "
            "pointnet2_ops, ...) or the path of its recipes/<name> folder (or recipe.yaml) in a pointops "
            "source tree"
        )
    recipe = recipe.resolve()
    pinning = recipe.parent.parent.parent / VARIANT_FILE
    own = recipe.parent / VARIANT_FILE
    missing = [str(p) for p in (pinning, own) if not p.is_file()]
    if missing:
        raise ChannelError(
            f"the recipe {recipe} needs its variant files, but {' and '.join(missing)} "
            "do not exist; use a recipes/<name> folder of a complete pointops source tree"
        )
    return RecipeFiles(recipe=recipe, variant_configs=(pinning, own))


def _holds_recipe(path: Path) -> bool:
    return path.is_file() or (path / "recipe.yaml").is_file()


def _trees(start: Path | None) -> list[Path]:
    """Where recipes/ is looked for: `start` (the current directory) and its parents, then the
    tree this package was imported from (an editable install)."""
    start = Path(start or Path.cwd()).resolve()
    return [start, *start.parents, Path(__file__).resolve().parents[2]]


def _named_recipe(name: str, start: Path | None) -> RecipeFiles:
    """recipes/<name> of the first source tree found; a name no tree has is a usage error."""
    trees = _trees(start)
    for root in trees:
        if (root / RECIPES_IN_TREE / name / "recipe.yaml").is_file():
            return recipe_files(root / RECIPES_IN_TREE / name)
    first = next((root for root in trees if (root / RECIPE_IN_TREE).is_file()), None)
    if first is None:
        raise ChannelError(
            f"no {name} recipe found: looked for {RECIPES_IN_TREE / name / 'recipe.yaml'} in {trees[0]} and "
            f"its parents, and in {trees[-1]} (where the solver is installed). Run from a pointops source "
            f"tree, or pass --recipe PATH (or set {RECIPE_ENV})"
        )
    names = sorted(p.parent.name for p in (first / RECIPES_IN_TREE).glob("*/recipe.yaml"))
    raise usage_error(
        f"--recipe {name!r}: {first / RECIPES_IN_TREE} has no such recipe; choose one of: {', '.join(names)} "
        "(or give a recipe folder's path)"
    )


def find_recipe(recipe: Path | str | None = None, start: Path | None = None) -> RecipeFiles:
    """The recipe given (--recipe, else $POINTOPS_RECIPE): a path to a recipe folder or file, else a
    name under recipes/ of the first source tree found from `start` (the current directory)
    upwards, else of the tree this package was imported from (an editable install). Nothing given:
    the pointops recipe, found the same way."""
    given = recipe or os.environ.get(RECIPE_ENV) or None
    if given:
        path = Path(given).expanduser()
        if not _holds_recipe(path) and _RECIPE_NAME.match(str(given)):
            return _named_recipe(str(given), start)
        return recipe_files(path)
    trees = _trees(start)
    for root in trees:
        candidate = root / RECIPE_IN_TREE
        if candidate.is_file():
            return recipe_files(candidate)
    raise ChannelError(
        f"no pointops recipe found: looked for {RECIPE_IN_TREE} in {trees[0]} and its parents, and in "
        f"{trees[-1]} (where the solver is installed). Run from a pointops source tree, or pass "
        f"--recipe PATH (or set {RECIPE_ENV})"
    )
