"""`solver doctor` end to end: on the real test environment, on a broken conda prefix, without
py-rattler, and with bad arguments."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from doctor_helpers import conda_pytorch_env, write_dist

REPO = Path(__file__).resolve().parents[2]


def doctor(*args: str, env_updates: dict[str, str] | None = None, pythonpath: list[str] | None = None):
    env = dict(os.environ)
    env.update(env_updates or {})
    env["PYTHONPATH"] = os.pathsep.join([*(pythonpath or []), str(REPO)])
    return subprocess.run([sys.executable, "-m", "solver", "doctor", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def findings_of(stdout: str) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for finding in json.loads(stdout)["findings"]:
        grouped.setdefault(finding["check"], []).append(finding)
    return grouped


def test_doctor_on_the_real_test_environment():
    import torch

    done = doctor("--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and report["torch"] == torch.__version__
    assert report["prefix"] == sys.prefix
    found = findings_of(done.stdout)
    for check in ("gpu.driver", "gpu.torch-build", "toolchain.nvcc", "conda.resolve", "network.probe"):
        assert check in found, check
    assert all(f["status"] != "fail" for group in found.values() for f in group)
    if importlib.util.find_spec("pointops") is not None:
        assert [f["status"] for f in found["pointops.build"]] == ["pass"]
        assert any(f["summary"].startswith("pointops ") and f["status"] == "pass" for f in found["extensions.import"])
    text = doctor()
    assert text.returncode == 0
    assert text.stdout.startswith(f"solver doctor: {report['platform']}, environment {sys.prefix}")
    assert text.stdout.rstrip().splitlines()[-1].startswith("0 failed")


def _broken_prefix(tmp_path: Path) -> Path:
    prefix = conda_pytorch_env(tmp_path / "env")
    for meta in (prefix / "lib/python3.11/site-packages").glob("torch-*.dist-info"):
        (meta / "INSTALLER").write_text("pip\n")  # pip reinstalled torch over conda's
    write_dist(prefix, "nvidia-cudnn-cu12", "9.1.0.70", "pip")
    return prefix


def test_doctor_on_a_broken_conda_environment(tmp_path):
    prefix = _broken_prefix(tmp_path)
    done = doctor("--json", "--prefix", str(prefix), "--python", sys.executable,
                  env_updates={"CONDA_OVERRIDE_CUDA": "11.4", "HOME": str(tmp_path)})
    assert done.returncode == 1, done.stdout + done.stderr
    found = findings_of(done.stdout)
    [shadow] = found["conda.pip-shadowing"]
    assert shadow["status"] == "fail"
    assert shadow["fix"] == "pip uninstall -y torch nvidia-cudnn-cu12 && conda install --force-reinstall pytorch"
    [resolve] = found["conda.resolve"]
    assert resolve["status"] == "fail" and "this machine has __cuda 11.4" in resolve["summary"]
    text = doctor("--prefix", str(prefix), "--python", sys.executable,
                  env_updates={"CONDA_OVERRIDE_CUDA": "11.4", "HOME": str(tmp_path)})
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    fail_line = next(i for i, line in enumerate(lines) if line.startswith("FAIL  conda.pip-shadowing"))
    assert lines[fail_line + 1].strip().startswith("evidence:") and lines[fail_line + 2].strip().startswith("fix: pip")


def test_doctor_without_py_rattler_says_so(tmp_path):
    blocker = tmp_path / "no-rattler" / "rattler"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('py-rattler left out of this environment')\n")
    prefix = _broken_prefix(tmp_path)
    done = doctor("--json", "--prefix", str(prefix), "--python", sys.executable, pythonpath=[str(blocker.parent)],
                  env_updates={"HOME": str(tmp_path)})
    assert done.returncode == 1, done.stderr  # the pip shadowing still fails; nothing crashed
    [resolve] = findings_of(done.stdout)["conda.resolve"]
    assert resolve["status"] == "info" and "py-rattler is not installed" in resolve["summary"]
    assert json.loads(done.stdout)["virtual_packages"] is None


def test_usage_errors_exit_2_with_a_message(tmp_path):
    for args, message in (
        (["--prefix", str(tmp_path / "absent")], "no such directory"),
        (["--prefix", str(tmp_path)], "has no python"),
        (["--python", str(tmp_path / "python9")], "no such file"),
        (["--runtime-timeout", "0"], "--runtime-timeout must be a positive number"),
        (["--no-such-flag"], "unrecognized arguments"),
    ):
        done = doctor(*args)
        assert done.returncode == 2, args
        assert message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
