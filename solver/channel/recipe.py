"""Where the pointops recipe and its variant files are, without assuming an editable checkout.

The recipe is recipes/pointops/recipe.yaml of a pointops source tree. Its variants come from two
conda_build_config.yaml files read in order: the tree's top-level one (conda-forge's global
pinning as this channel uses it) and the one next to the recipe (the recipe's own keys).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from solver.channel.errors import ChannelError

RECIPE_IN_TREE = Path("recipes") / "pointops" / "recipe.yaml"
VARIANT_FILE = "conda_build_config.yaml"
# The environment variable that names the recipe when no --recipe is given.
RECIPE_ENV = "POINTOPS_RECIPE"


@dataclass(frozen=True)
class RecipeFiles:
    recipe: Path
    variant_configs: tuple[Path, ...]

    @property
    def recipe_dir(self) -> Path:
        return self.recipe.parent

    @property
    def source_dir(self) -> Path:
        """ops-src: the recipe's `path` source."""
        return (self.recipe_dir / ".." / ".." / "ops-src").resolve()


def _tree_root_of(recipe: Path) -> Path:
    return recipe.parent.parent.parent


def recipe_files(recipe: Path) -> RecipeFiles:
    """The files of the recipe at `recipe` (a recipe.yaml or the folder holding it)."""
    recipe = Path(recipe).expanduser()
    if recipe.is_dir():
        recipe = recipe / "recipe.yaml"
    if not recipe.is_file():
        raise ChannelError(
            f"{recipe} is not a recipe file; pass --recipe with the path of recipes/pointops "
            "(or its recipe.yaml) in a pointops source tree"
        )
    recipe = recipe.resolve()
    pinning = _tree_root_of(recipe) / VARIANT_FILE
    own = recipe.parent / VARIANT_FILE
    missing = [str(p) for p in (pinning, own) if not p.is_file()]
    if missing:
        raise ChannelError(
            f"the recipe {recipe} needs its variant files, but {' and '.join(missing)} "
            "do not exist; use the recipes/pointops folder of a complete pointops source tree"
        )
    return RecipeFiles(recipe=recipe, variant_configs=(pinning, own))


def find_recipe(recipe: Path | None = None, start: Path | None = None) -> RecipeFiles:
    """The recipe given (--recipe, else $POINTOPS_RECIPE), else recipes/pointops/recipe.yaml of the
    first source tree found from `start` (the current directory) upwards, else of the tree this
    package was imported from (an editable install)."""
    given = recipe or os.environ.get(RECIPE_ENV) or None
    if given:
        return recipe_files(Path(given))
    start = Path(start or Path.cwd()).resolve()
    installed_tree = Path(__file__).resolve().parents[2]
    searched = [start, *start.parents, installed_tree]
    for root in searched:
        candidate = root / RECIPE_IN_TREE
        if candidate.is_file():
            return recipe_files(candidate)
    raise ChannelError(
        f"no pointops recipe found: looked for {RECIPE_IN_TREE} in {start} and its parents, and in "
        f"{installed_tree} (where the solver is installed). Run from a pointops source tree, or pass "
        f"--recipe PATH (or set {RECIPE_ENV})"
    )
