"""pointops' version number has one source, ops-src/pyproject.toml. The recipe (which conda-forge's
bots read as a literal) and the solver's record of the published builds must carry the same
number; the installed package reports it from its metadata."""

import importlib.util
import pathlib

import pytest
import tomllib
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]


def declared_version() -> str:
    return tomllib.loads((REPO / "ops-src" / "pyproject.toml").read_text())["project"]["version"]


def test_recipe_and_solver_knowledge_carry_the_declared_version():
    recipe = yaml.safe_load((REPO / "recipes" / "pointops" / "recipe.yaml").read_text())
    builds = yaml.safe_load((REPO / "solver" / "knowledge" / "pointops_builds.yaml").read_text())
    assert recipe["context"]["version"] == declared_version()
    assert builds["version"] == declared_version()


@pytest.mark.skipif(importlib.util.find_spec("pointops") is None, reason="pointops is not installed")
def test_installed_pointops_reports_the_declared_version():
    import pointops

    assert pointops.__version__ == declared_version()


def test_solver_version_is_read_from_one_place():
    import solver

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert solver.__version__.count(".") == 2
