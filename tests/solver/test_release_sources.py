"""The conda plan and the pip/uv plan of one machine may name different torch releases (conda-forge
builds pytorch later than PyTorch publishes wheels): each output says which source limits it.
The expected releases are read from the knowledge tables, so the test follows them."""

from __future__ import annotations

import json

import pytest
from solver_cli import run_cli

from solver.pytorch_wheels import WheelTable
from solver.sources import conda_forge_newest, conda_release_note, wheel_index_newest, wheel_release_note
from solver.vocabulary import parse_version

pytestmark = pytest.mark.usefixtures("no_overrides")

RTX4090_580 = ["--gpu", "RTX 4090", "--driver", "580.95.05", "--platform", "linux-64", "--offline"]
CPU = ["--gpu", "none", "--platform", "linux-64", "--offline"]


def reasons(capsys, fmt: str, *flags: str) -> list[str]:
    code, out, err = run_cli(capsys, "make-env", "--format", fmt, "--json", *flags)
    assert code == 0, err
    return json.loads(out)["reasons"]


@pytest.fixture(scope="module")
def newest(kb, table) -> tuple[str, str]:
    conda, wheels = conda_forge_newest(kb, "linux-64"), wheel_index_newest(kb, table)
    if conda == wheels:
        pytest.skip(f"conda-forge and PyTorch's indexes both end at {conda}: nothing to explain")
    return conda, wheels


@pytest.mark.parametrize("target", [RTX4090_580, CPU], ids=["rtx4090", "cpu"])
def test_the_conda_plan_names_conda_forge_as_its_limit(capsys, newest, target):
    conda, wheels = newest
    found = [r for r in reasons(capsys, "conda", *target) if "conda-forge has built" in r]
    assert len(found) == 1, found
    assert f"pytorch {conda} is the newest release conda-forge has built" in found[0]
    assert f"torch {wheels}" in found[0] and "--format pip|uv" in found[0]


@pytest.mark.parametrize("fmt", ["pip", "uv"])
@pytest.mark.parametrize("target", [RTX4090_580, CPU], ids=["rtx4090", "cpu"])
def test_the_wheel_plan_says_why_conda_gives_an_older_pytorch(capsys, newest, fmt, target):
    conda, wheels = newest
    found = [r for r in reasons(capsys, fmt, *target) if "conda-forge has built" in r]
    assert len(found) == 1, found
    assert f"torch {wheels} is a release PyTorch publishes wheels of" in found[0]
    assert f"up to {conda} only" in found[0] and "--format conda" in found[0]


def test_the_notes_reach_stderr_and_the_file_header(capsys, newest):
    code, out, err = run_cli(capsys, "make-env", *RTX4090_580)
    assert code == 0 and "conda-forge has built" in err
    assert any(line.startswith("#") and "conda-forge has built" in line for line in out.splitlines())
    code, out, err = run_cli(capsys, "make-env", "--format", "pip", *RTX4090_580)
    assert code == 0 and "conda-forge has built" in err
    assert any(line.startswith("#") and "conda-forge has built" in line for line in out.splitlines())


@pytest.mark.parametrize("fmt", ["conda", "pip"])
def test_no_note_when_torch_is_pinned(capsys, newest, fmt):
    pinned = ["--torch", newest[0]] if fmt == "conda" else ["--torch", newest[1]]
    assert not [r for r in reasons(capsys, fmt, *RTX4090_580, *pinned) if "conda-forge has built" in r]


def test_no_note_when_the_sources_agree(kb, table):
    """A wheel table that ends where conda-forge does: neither plan has anything to explain."""
    conda = conda_forge_newest(kb, "linux-64")
    releases = {t: tags for t, tags in table.releases.items() if parse_version(t) <= parse_version(conda)}
    level = WheelTable(table.indexes, releases, table.index_url)
    assert wheel_index_newest(kb, level) == conda
    assert conda_release_note(kb, level, "linux-64", conda) is None
    assert wheel_release_note(kb, "linux-64", conda) is None


def test_no_conda_note_for_a_plan_held_below_conda_forges_newest(kb, table, newest):
    older = f"{newest[0].split('.')[0]}.{int(newest[0].split('.')[1]) - 1}"
    assert conda_release_note(kb, table, "linux-64", older) is None
