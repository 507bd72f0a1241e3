"""`solver channel` finds the recipe without assuming an editable checkout: --recipe, then
$POINTOPS_RECIPE, then recipes/pointops from the current directory upwards, then the tree the
solver was imported from; otherwise it says where it looked and what to pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from solver.channel import ChannelError, find_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "pointops" / "recipe.yaml"


def test_found_from_a_subdirectory_of_the_tree():
    files = find_recipe(start=REPO / "docs")
    assert files.recipe == RECIPE
    assert files.variant_configs == (
        REPO / "conda_build_config.yaml",
        RECIPE.parent / "conda_build_config.yaml",
    )
    assert files.source_dir == REPO / "ops-src"


def test_an_explicit_recipe_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("POINTOPS_RECIPE", str(tmp_path / "elsewhere"))
    assert find_recipe(RECIPE.parent).recipe == RECIPE  # a folder or the file itself
    with pytest.raises(ChannelError, match="elsewhere is not a recipe file"):
        find_recipe(start=REPO)  # the environment variable is explicit too


def test_a_recipe_without_its_variant_files_is_named(tmp_path):
    folder = tmp_path / "recipes" / "pointops"
    shutil.copytree(RECIPE.parent, folder)
    with pytest.raises(ChannelError, match=r"conda_build_config.yaml do not exist"):
        find_recipe(folder)


def run_installed_solver(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("POINTOPS_RECIPE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "solver", "channel", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def test_a_non_editable_install_outside_a_tree(tmp_path):
    """A solver copied into site-packages and run from a directory without a tree: a clear error,
    and --recipe makes it work."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "solver", site / "solver", ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "work"
    work.mkdir()
    proc = run_installed_solver(site, work, "render", "--platform", "linux-64")
    assert proc.returncode == 1
    assert "no pointops recipe found" in proc.stderr and "--recipe PATH" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_installed_solver(
        site, work, "--recipe", str(RECIPE.parent), "render", "--platform", "linux-64"
    )
    assert proc.returncode == 0, proc.stderr
    assert "cuda130" in proc.stdout
