"""envs/*.yml are exactly what `solver make-env --offline` plans today: regenerate and compare."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import yaml

ENVS = Path(__file__).resolve().parents[2] / "envs"


def load_regenerate():
    spec = importlib.util.spec_from_file_location("envs_regenerate", ENVS / "regenerate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_env_file_is_fresh():
    regenerate = load_regenerate()
    assert regenerate.stale_files() == [], "run: python envs/regenerate.py"


def test_env_files_are_the_only_yml_files_and_pin_pointops():
    regenerate = load_regenerate()
    assert sorted(p.name for p in ENVS.glob("*.yml")) == sorted(regenerate.TARGETS)
    for name in regenerate.TARGETS:
        env = yaml.safe_load((ENVS / name).read_text())
        assert env["channels"] == ["pointops", "conda-forge"]
        deps = {d.split("=")[0]: d for d in env["dependencies"]}
        cuda = deps.get("cuda-version", "").partition("=")[2]
        tag = "cuda" + cuda.replace(".", "") if cuda else "cpu"
        assert ("cpu" in name) == (tag == "cpu"), name
        # pointops, pytorch and cuda-version all of the same variant
        assert deps["pointops"] == f"pointops=0.1.0={tag}*", env
        assert deps["pytorch"].endswith(f"={tag}*"), env


def test_check_mode_catches_a_stale_file(tmp_path):
    # Run the checker on a copy of envs/ with one file edited by hand.
    for path in [*ENVS.glob("*.yml"), ENVS / "regenerate.py"]:
        (tmp_path / path.name).write_text(path.read_text())
    target = tmp_path / "linux-64-cuda13.yml"
    target.write_text(target.read_text().replace("cuda-version=13.0", "cuda-version=12.9"))
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "regenerate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ENVS.parent,
        env={"PYTHONPATH": str(ENVS.parent), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 1
    assert "envs/linux-64-cuda13.yml is out of date" in proc.stderr
    assert "linux-64-cpu.yml" not in proc.stderr


def test_aarch64_server_envs_cannot_resolve_to_jetson_builds():
    """conda-forge's sbsa and tegra (Jetson) CUDA builds share build strings: the linux-aarch64 files
    must pin the server flavour."""
    regenerate = load_regenerate()
    aarch64 = [
        name for name, flags in regenerate.TARGETS.items() if "linux-aarch64" in flags and "none" not in flags
    ]
    assert aarch64, "no linux-aarch64 CUDA environment file"
    for name in aarch64:
        deps = yaml.safe_load((ENVS / name).read_text())["dependencies"]
        assert "arm-variant=*=sbsa" in deps, name
