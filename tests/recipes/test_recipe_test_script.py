"""recipes/pointops/test_pointops.py (the recipe's own test) passes on the pointops built here
for the cpu variant, and fails when the build does not match the variant it claims to be; its
arch expectations come from cuda_arch_list.py, the derivation the build scripts run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

RECIPE_DIR = Path(__file__).resolve().parents[2] / "recipes" / "pointops"
SCRIPT = RECIPE_DIR / "test_pointops.py"
TABLE_DIR = RECIPE_DIR.parents[1] / "ops-src" / "pointops"
needs_local_build = pytest.mark.skipif(
    importlib.util.find_spec("pointops") is None,
    reason="pointops is not installed here (tests/run.sh builds it from ops-src)",
)


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, cwd=SCRIPT.parent
    )


def arch_helper():
    spec = importlib.util.spec_from_file_location("recipe_cuda_arch_list", RECIPE_DIR / "cuda_arch_list.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_local_build
def test_cpu_variant_passes():
    proc = run_script("--cuda", "None", "--target-platform", "linux-64", "--python-min", "3.10")
    assert proc.returncode == 0, proc.stderr
    assert "pointops recipe test passed" in proc.stdout


@needs_local_build
def test_a_cpu_build_fails_as_a_cuda_variant():
    proc = run_script("--cuda", "12.9", "--target-platform", "linux-64", "--python-min", "3.10")
    assert proc.returncode != 0
    assert "built for CUDA 12.9" in proc.stderr


@needs_local_build
def test_the_torch_check_reads_the_environment_s_package():
    """Outside a conda environment there is no pytorch package record: --torch must fail, not pass."""
    proc = run_script(
        "--cuda", "None", "--target-platform", "linux-64", "--python-min", "3.10", "--torch", "2.10"
    )
    assert proc.returncode != 0 and "no pytorch package" in proc.stderr


def test_arch_lists_per_platform():
    helper = arch_helper()
    assert helper.arch_list(TABLE_DIR, "13.0", "linux-64") == "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"
    assert helper.arch_list(TABLE_DIR, "13.0", "win-64") == "7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX"
    assert helper.arch_list(TABLE_DIR, "13.0", "linux-aarch64") == "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX"
    assert helper.arch_list(TABLE_DIR, "12.8", "win-64") == "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    # an unlisted minor takes its major's previous entry, as setup.py's table lookup does
    assert helper.arch_list(TABLE_DIR, "13.2", "linux-64") == helper.arch_list(TABLE_DIR, "13.0", "linux-64")


def test_the_command_line_writes_the_list(tmp_path):
    out = tmp_path / "arch_list.txt"
    proc = subprocess.run(
        [
            sys.executable,
            str(RECIPE_DIR / "cuda_arch_list.py"),
            str(TABLE_DIR),
            "12.9",
            "linux-64",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().strip() == "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    proc = subprocess.run(
        [sys.executable, str(RECIPE_DIR / "cuda_arch_list.py"), str(tmp_path), "12.9", "linux-64"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "cuda_archs.py does not exist" in proc.stderr
