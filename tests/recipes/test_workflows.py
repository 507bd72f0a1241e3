""".github/workflows: valid against GitHub's workflow schema, and the channel workflow builds
exactly the recipe's matrix on runners that exist, each job declaring its variant's CUDA version
as the runner's driver (CONDA_OVERRIDE_CUDA) and passing its job limit to the recipe."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from solver.channel import build_platform_for, render_matrix

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
CHANNEL = REPO / ".github" / "workflows" / "channel.yml"
# GitHub-hosted runner labels and the conda platform of their machines (runner-images README);
# retired labels are refused (macos-13 went in December 2025).
RUNNERS = {
    "ubuntu-latest": "linux-64",
    "ubuntu-24.04": "linux-64",
    "ubuntu-24.04-arm": "linux-aarch64",
    "windows-2022": "win-64",
    "windows-2025": "win-64",
    "macos-14": "osx-arm64",
    "macos-15": "osx-arm64",
}
RETIRED = {"macos-12", "macos-13", "ubuntu-20.04", "windows-2019"}


def check_jsonschema() -> str:
    found = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which(
        "check-jsonschema"
    )
    if found is None:
        pytest.fail("check-jsonschema is not installed: pip install -e '.[test]'")
    return found


def validate(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def build_jobs() -> list[dict]:
    workflow = yaml.safe_load(CHANNEL.read_text())
    return workflow["jobs"]["build"]["strategy"]["matrix"]["include"]


def build_step() -> dict:
    steps = yaml.safe_load(CHANNEL.read_text())["jobs"]["build"]["steps"]
    (step,) = [s for s in steps if "solver channel build" in s.get("run", "")]
    return step


def test_workflows_match_github_s_schema():
    assert WORKFLOWS
    proc = validate(*WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_broken_workflow_is_caught(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(
        CHANNEL.read_text().replace("runs-on: ${{ matrix.runner }}", "run-on: ${{ matrix.runner }}")
    )
    proc = validate(broken)
    assert proc.returncode != 0 and "broken.yml" in proc.stdout + proc.stderr


def test_the_workflow_builds_exactly_the_matrix():
    matrix = render_matrix()
    assert sorted((j["platform"], j["variant"]) for j in build_jobs()) == sorted(
        (b.platform, b.variant) for b in matrix
    )


def test_every_job_runs_where_its_platform_is_built():
    """Native builds, except osx-64, cross-compiled on Apple silicon as conda-forge does."""
    for job in build_jobs():
        assert job["runner"] not in RETIRED, job
        assert RUNNERS[job["runner"]] == build_platform_for(job["platform"]), job
    assert "--target-platform ${{ matrix.platform }}" in build_step()["run"]


def test_each_job_declares_its_variant_s_cuda_version():
    """conda-forge's CUDA pytorch depends on __cuda and cuda-version X constrains __cuda >=X:
    without a GPU the host solve needs CONDA_OVERRIDE_CUDA, at the variant's own version."""
    cuda_of = {(b.platform, b.variant): b.cuda_version or "" for b in render_matrix()}
    for job in build_jobs():
        assert str(job["cuda"]) == cuda_of[(job["platform"], job["variant"])], job
    env = build_step()["env"]
    assert env["CONDA_OVERRIDE_CUDA"] == "${{ matrix.cuda }}"
    assert env["MAX_JOBS"] == "2"  # the recipe passes it to build.sh through script.env


def test_osx_64_is_tested_under_emulation_on_its_build_machine():
    from rattler_build import ToolConfiguration

    from solver.channel.build import test_strategy

    assert test_strategy("osx-64", "osx-arm64", True) == "native-and-emulated"  # Rosetta 2
    assert test_strategy("linux-aarch64", "linux-64", True) == "native"  # a cross build skips its tests
    assert test_strategy("linux-64", "linux-64", False) == "skip"
    assert ToolConfiguration(test_strategy="native-and-emulated").test_strategy == "NativeAndEmulated"


def test_the_wheel_workflow_builds_every_wheel_of_the_knowledge_with_its_toolkit():
    from solver.knowledge import load

    kb = load()
    expected = {
        (w.distribution, platform): w.cuda_version or ""
        for platform in ("linux-64", "linux-aarch64", "win-64", "osx-arm64", "osx-64")
        for w in kb.pointops_wheels(platform)
    }
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "wheels.yml").read_text())
    jobs = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {(j["distribution"], j["platform"]): str(j["cuda"]) for j in jobs} == expected
    for job in jobs:
        assert job["runner"] not in RETIRED and RUNNERS[job["runner"]] == job["platform"], job
        if job["platform"].startswith("linux"):  # the oldest glibc the wheels may claim
            assert (
                job["image"]
                == f"quay.io/pypa/manylinux_2_28_{'aarch64' if 'aarch64' in job['platform'] else 'x86_64'}"
            )
    steps = workflow["jobs"]["build"]["steps"]
    assert any("solver wheels build ${{ matrix.distribution }}" in s.get("run", "") for s in steps)
    assert any("solver wheels check" in s.get("run", "") for s in steps)
