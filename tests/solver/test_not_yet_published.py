"""Nothing of pointops is published yet (no package on the `pointops` channel, no wheel on PyPI):
what make-env writes says so wherever it names one, with routes that work now, and the README and
docs/wheels.md do not present the install lines as working."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from solver_cli import run_cli

from solver import cli, published
from solver.wheels.naming import file_name_of

pytestmark = pytest.mark.usefixtures("no_overrides")

REPO = Path(__file__).resolve().parents[2]
RTX4090_580 = ["--gpu", "RTX 4090", "--driver", "580.95.05", "--platform", "linux-64", "--offline"]


def make_env(capsys, *args: str) -> tuple[str, str, dict]:
    code, out, err = run_cli(capsys, "make-env", *RTX4090_580, *args)
    assert code == 0, err
    code, doc, _ = run_cli(capsys, "make-env", *RTX4090_580, *args, "--json")
    assert code == 0
    return out, err, json.loads(doc)


def header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith("#"))


def test_the_default_channels_name_the_empty_pointops_channel(capsys):
    out, err, doc = make_env(capsys)
    head = header(out)
    assert "# Not yet published:" in head and "pointops channel on anaconda.org has no packages yet" in head
    assert "solver channel package-local -o out/channel" in head
    assert "--channel ./out/channel --channel conda-forge" in head
    assert f"pip install --no-build-isolation --no-deps {published.source_tree()}" in head
    assert "solver make-env: not yet published: the pointops channel" in err
    assert doc["not_published"] and "no packages yet" in doc["not_published"]


@pytest.mark.parametrize("channel", ["pointops", "https://conda.anaconda.org/pointops/"])
def test_the_pointops_channel_named_by_hand_gets_the_note(capsys, channel):
    out, _, doc = make_env(capsys, "--channel", channel, "--channel", "conda-forge")
    assert "# Not yet published:" in header(out) and doc["not_published"]


def test_a_local_channel_gets_no_note(capsys, tmp_path):
    out, err, doc = make_env(capsys, "--channel", str(tmp_path), "--channel", "conda-forge")
    assert "Not yet published" not in out and "not yet published" not in err
    assert doc["not_published"] is None


@pytest.mark.parametrize("fmt", ["pip", "uv"])
@pytest.mark.parametrize(
    "target,distribution",
    [(RTX4090_580, "pointops-cu13"), (["--gpu", "none", "--platform", "linux-64"], "pointops")],
    ids=["cu13", "cpu"],
)
def test_the_wheel_files_say_the_wheel_is_not_on_pypi(capsys, fmt, target, distribution):
    code, out, err = run_cli(capsys, "make-env", "--format", fmt, *target)
    assert code == 0, err
    head = header(out)
    assert f"{distribution} is not on PyPI yet" in head
    assert f"solver wheels build {distribution} -o out/wheels" in head
    assert f"pip install out/wheels/{file_name_of(distribution)}-*.whl" in head
    assert f"--no-deps {published.source_tree()}" in head
    assert f"not yet published: {distribution} is not on PyPI yet" in err
    code, doc, _ = run_cli(capsys, "make-env", "--format", fmt, *target, "--json")
    assert f"{distribution} is not on PyPI yet" in json.loads(doc)["not_published"]


def test_the_commands_the_notes_give_parse():
    for argv in (
        ["channel", "package-local", "-o", "out/channel"],
        ["channel", "build", "-o", "out/channel"],
        ["wheels", "build", "pointops-cu13", "-o", "out/wheels"],
    ):
        _, parser = cli.subcommand_parser(argv[0])
        assert str(parser.parse_args(argv[1:]).output) == argv[-1]


def test_the_source_route_is_an_absolute_path_and_names_no_machine_of_ours():
    """The route goes into files planned for other machines (and envs/, compared across
    checkouts): an absolute path whose root the user fills in, never this checkout's."""
    path = published.source_tree()
    assert os.path.isabs(path) and path.endswith("/ops-src")
    assert str(Path(__file__).resolve().parents[2]) not in path


def test_no_note_once_published(monkeypatch, kb):
    monkeypatch.setattr(published, "CHANNEL_PUBLISHED", True)
    monkeypatch.setattr(published, "WHEELS_PUBLISHED", True)
    assert published.conda_note(["pointops", "conda-forge"]) is None
    assert published.wheel_note(kb.pointops_wheels("linux-64")[0]) is None


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1].split("\n## ", 1)[0]


def test_readme_gives_a_route_that_works_now_beside_each_install_line():
    section = _section((REPO / "README.md").read_text(encoding="utf-8"), "## Installing pointops")
    assert "Not published yet" in section
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    future = [n for n, line in enumerate(lines) if "once published" in line]
    assert len(future) == 4, lines
    for n in future:
        assert re.search(r"solver (wheels build|channel package-local)", lines[n + 1]), lines[n + 1]
    assert any("--no-build-isolation" in line and "$PWD/ops-src" in line for line in lines)


def test_docs_do_not_say_pointops_is_published():
    wheels = (REPO / "docs" / "wheels.md").read_text(encoding="utf-8")
    assert "is published on PyPI" not in wheels and "None of them is published yet" in wheels
    docs = [p for p in (REPO / "docs").glob("*.md") if p.name != "doctor.md"]  # doctor's own owner
    for path in [REPO / "README.md", *docs]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "pip install" in line and re.search(r"\./ops-src([\s\"']|$)", line):
                raise AssertionError(f"{path.name}: a relative source path fails elsewhere: {line}")
