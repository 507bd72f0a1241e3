"""doctor on real broken environments (issue 44): the real pointops wheel installed by pip into a
virtual environment, then its _C truncated or deleted, or torch left out. Each report must name the
root cause as a failure, never contradict itself, and give fixes that fit how pointops was installed
(absolute paths, --no-deps: nothing that would replace the user's torch)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from broken_envs import built_against_torch, extension_of, pointops_wheel, torch_provider, venv_with_pointops
from doctor_helpers import doctor, findings_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux venv and ELF files")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return pointops_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Path:
    return torch_provider(tmp_path_factory.mktemp("torch-provider") / "site")


def report(prefix: Path, *args: str, home: Path) -> tuple[int, dict, list[str]]:
    """(exit status, findings by check, the text report's lines) of doctor on the prefix."""
    done = doctor("--json", "--prefix", str(prefix), *args, env_updates={"HOME": str(home)})
    assert "Traceback" not in done.stderr, done.stderr
    text = doctor("--prefix", str(prefix), *args, env_updates={"HOME": str(home)})
    assert text.returncode == done.returncode
    return done.returncode, findings_of(done.stdout), text.stdout.splitlines()


def pointops_findings(found: dict) -> list[dict]:
    return [f for group in found.values() for f in group if "pointops" in f["summary"]]


def assert_safe_fixes(lines: list[str]) -> None:
    """No fix reinstalls with dependencies, builds with isolation or names a relative path."""
    for line in lines:
        fix = line.strip().removeprefix("fix: ")
        if not line.strip().startswith("fix:"):
            continue
        assert "./ops-src" not in fix and "pip install ./" not in fix, line
        if "pip install" in fix and '"torch==' not in fix:  # only installing torch itself takes its deps
            assert "--no-deps" in fix, line


@pytest.mark.parametrize("extra", [(), ("--import", "pointops", "--import", "json")])
def test_a_truncated_extension_is_a_crash_named_with_its_signal(wheel, provider, tmp_path, extra):
    """Also: the crash costs only pointops; a module after it is still imported."""
    venv = venv_with_pointops(tmp_path / "env", wheel, provider)
    extension = extension_of(venv)
    with open(extension, "r+b") as f:
        f.truncate(4096)
    crashed = venv.run("import pointops")
    assert crashed.returncode < 0 or crashed.returncode > 128  # killed by a signal (SIGBUS here)

    status, found, lines = report(venv.root, *extra, home=tmp_path)
    assert status == 1, lines
    [failure] = [f for f in found["extensions.import"] if f["summary"].startswith("pointops")]
    assert failure["status"] == "fail"
    assert re.search(
        r"importing it crashed the interpreter with SIG[A-Z]+ \(signal \d+\)", failure["summary"]
    )
    assert f"pointops/{extension.name} is 4096 bytes" in failure["evidence"]
    assert failure["fix"] == f"pip install --no-deps --force-reinstall {wheel}"
    # no contradiction: nothing says pointops is missing or that no extension is installed
    assert not [f for f in pointops_findings(found) if "not installed" in f["summary"]]
    assert not [f for f in found["extensions.import"] if "no compiled extension" in f["summary"]]
    [build] = found["pointops.build"]
    assert build["status"] == "info" and "does not import" in build["summary"]
    assert_safe_fixes(lines)
    if "json" in extra:
        assert [f["status"] for f in found["extensions.import"] if f["summary"].startswith("json ")] == [
            "pass"
        ]


def test_a_deleted_extension_gets_one_fix_that_reinstalls_the_wheel(wheel, provider, tmp_path):
    venv = venv_with_pointops(tmp_path / "env", wheel, provider)
    extension = extension_of(venv)
    extension.unlink()
    loaded = venv.run("import pointops")
    assert "installed package is missing its binary" in loaded.stderr
    assert "source tree" not in loaded.stderr and f"--force-reinstall {wheel}" in loaded.stderr

    status, found, lines = report(venv.root, home=tmp_path)
    assert status == 1
    [failure] = [f for f in found["extensions.import"] if f["summary"].startswith("pointops")]
    assert failure["status"] == "fail" and f"pointops/{extension.name} is missing" in failure["evidence"]
    assert failure["fix"] == f"pip install --no-deps --force-reinstall {wheel}"
    assert found["pointops.build"][0]["status"] == "info"
    fixes = [line for line in lines if line.strip().startswith("fix:")]
    assert len(fixes) == 1 and "python -c" not in fixes[0], lines
    assert_safe_fixes(lines)


def test_a_deleted_wheel_file_falls_back_to_the_index_with_the_installed_version(wheel, provider, tmp_path):
    copy = tmp_path / "downloads" / wheel.name
    copy.parent.mkdir()
    shutil.copyfile(wheel, copy)
    venv = venv_with_pointops(tmp_path / "env", copy, provider)
    extension_of(venv).unlink()
    copy.unlink()
    _, found, _ = report(venv.root, home=tmp_path)
    [failure] = [f for f in found["extensions.import"] if f["summary"].startswith("pointops")]
    assert failure["fix"] == 'pip install --no-deps --force-reinstall --no-cache-dir "pointops==0.1.0"'


def test_without_torch_the_failure_is_torch_with_the_torch_pointops_was_built_for(wheel, tmp_path):
    venv = venv_with_pointops(tmp_path / "env", wheel, provider=None)
    status, found, lines = report(venv.root, home=tmp_path)
    assert status == 1
    failures = [f for group in found.values() for f in group if f["status"] == "fail"]
    assert [f["check"] for f in failures] == ["gpu.torch-build"], failures
    [torch] = failures
    assert torch["summary"] == "torch is not installed, but pointops 0.1.0 requires torch>=2.10"
    wanted = built_against_torch(wheel)
    index = wanted.partition("+")[2]
    expected = f'pip install "torch=={wanted}"' + (
        f" --index-url https://download.pytorch.org/whl/{index}" if index else ""
    )
    assert torch["fix"].startswith(expected)
    assert found["pointops.build"][0]["status"] == "info"
    assert_safe_fixes(lines)


def test_an_empty_prefix_says_it_is_empty(tmp_path):
    env = {"HOME": str(tmp_path), "CONDA_PREFIX": ""}
    done = doctor("--prefix", "", env_updates=env)
    assert done.returncode == 2 and done.stdout == ""
    assert "--prefix is empty (CONDA_PREFIX is not set" in done.stderr and "Traceback" not in done.stderr
    done = doctor("--prefix", "", env_updates={**env, "CONDA_PREFIX": str(tmp_path)})
    assert done.returncode == 2 and "--prefix is empty;" in done.stderr and "CONDA_PREFIX" not in done.stderr
    done = doctor("--python", " ", env_updates=env)
    assert done.returncode == 2 and "--python is empty" in done.stderr


def test_the_json_report_of_a_healthy_venv_has_no_failure(wheel, provider, tmp_path):
    venv = venv_with_pointops(tmp_path / "env", wheel, provider)
    done = doctor("--json", "--prefix", str(venv.root), env_updates={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout
    found = findings_of(done.stdout)
    assert found["pointops.build"][0]["status"] == "pass"
    assert [f["status"] for f in found["extensions.libstdcxx"]] == ["pass"]
    assert json.loads(done.stdout)["status"] == "ok"
