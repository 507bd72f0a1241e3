"""recipes/pointops/test_pointops.py (the recipe's own test) passes on the pointops built here
for the cpu variant, and fails when the build does not match the variant it claims to be."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "recipes" / "pointops" / "test_pointops.py"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("pointops") is None,
                                reason="pointops is not installed here (tests/run.sh builds it from ops-src)")


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=SCRIPT.parent)


def test_cpu_variant_passes():
    proc = run_script("--cuda", "None", "--archs", "None", "--python-min", "3.10")
    assert proc.returncode == 0, proc.stderr
    assert "pointops recipe test passed" in proc.stdout


def test_a_cpu_build_fails_as_a_cuda_variant():
    proc = run_script("--cuda", "12.9", "--archs", "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX", "--python-min", "3.10")
    assert proc.returncode != 0
    assert "built for CUDA 12.9" in proc.stderr


def test_arch_list_parsing():
    spec = importlib.util.spec_from_file_location("recipe_test_pointops", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.expected_archs("7.5;8.0;12.0+PTX") == (["7.5", "8.0", "12.0"], "12.0")
    assert module.expected_archs("None") == ([], None)
