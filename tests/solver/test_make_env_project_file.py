"""`solver make-env -o FILE` for every format, and the one file it will not replace: a pyproject.toml
that it did not write (the README's uv command, run in a checkout, once replaced the project's own).
Refused with exit 1 and the fix, before anything is written; its own earlier output is replaced."""

from __future__ import annotations

import os
import re

import pytest
from solver_cli import one_line, run_cli

pytestmark = pytest.mark.usefixtures("no_overrides")

RTX4090_580 = ["--gpu", "RTX 4090", "--driver", "580.95.05", "--platform", "linux-64", "--offline"]
PROJECT = '[project]\nname = "my-project"\nversion = "1.0"\n'
README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def make_env(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "make-env", *RTX4090_580, *args)


@pytest.mark.parametrize("fmt", ["conda", "pip", "uv"])
def test_o_writes_every_format_and_nothing_to_stdout(capsys, tmp_path, fmt):
    path = tmp_path / f"out.{fmt}"
    code, out, err = make_env(capsys, "--format", fmt, "-o", str(path))
    assert code == 0 and out == "", err
    assert "Made by `solver make-env" in path.read_text()
    assert f"wrote {path}" in err


@pytest.mark.parametrize("fmt", ["uv", "pip", "conda"])
def test_a_foreign_pyproject_is_refused_with_exit_1_and_left_alone(capsys, tmp_path, fmt):
    project = tmp_path / "pyproject.toml"
    project.write_text(PROJECT)
    code, out, err = make_env(capsys, "--format", fmt, "-o", str(project))
    assert code == 1 and out == ""
    line = one_line(err)
    assert f"{project} is a pyproject.toml that `solver make-env` did not write" in line
    assert "nothing was written" in line and "new folder" in line and "uv sync" in line
    assert project.read_text() == PROJECT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]  # no temporary file left


def test_a_foreign_pyproject_behind_a_symlink_is_refused(capsys, tmp_path):
    project = tmp_path / "pyproject.toml"
    project.write_text(PROJECT)
    link = tmp_path / "env.toml"
    link.symlink_to(project)
    code, _, err = make_env(capsys, "--format", "uv", "-o", str(link))
    assert code == 1 and "did not write" in one_line(err)
    assert project.read_text() == PROJECT


def test_its_own_pyproject_is_replaced_and_a_new_one_written(capsys, tmp_path):
    project = tmp_path / "new-folder" / "pyproject.toml"
    project.parent.mkdir()
    code, _, err = make_env(capsys, "--format", "uv", "-o", str(project))
    assert code == 0, err
    first = project.read_text()
    code, _, err = make_env(capsys, "--format", "uv", "--torch", "2.13", "-o", str(project))
    assert code == 0, err
    assert project.read_text() != first and '"torch==2.13.*"' in project.read_text()


def test_json_with_a_foreign_pyproject_is_refused_too(capsys, tmp_path):
    project = tmp_path / "pyproject.toml"
    project.write_text(PROJECT)
    code, out, err = make_env(capsys, "--format", "uv", "--json", "-o", str(project))
    assert code == 1 and out == "" and "did not write" in one_line(err)
    assert project.read_text() == PROJECT


def test_readme_runs_the_uv_command_in_a_new_folder_with_o():
    text = open(README, encoding="utf-8").read()
    uv_lines = [line for line in text.splitlines() if "make-env --format uv" in line]
    assert uv_lines, "README shows no uv command"
    for line in uv_lines:
        assert "> pyproject.toml" not in line, line
        assert re.search(r"-o \S*pyproject\.toml", line), line
    assert re.search(r"mkdir \S+ && cd \S+", text), "README does not make a new folder for the uv project"
