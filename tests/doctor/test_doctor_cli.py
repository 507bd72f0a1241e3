"""`solver doctor` end to end: on the real test environment, on a broken conda prefix, without
py-rattler, and with bad arguments."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from doctor_helpers import DEVICE_DATA, conda_pytorch_env, doctor, findings_of, without_nvml, write_dist


def test_doctor_on_the_real_test_environment():
    import torch

    done = doctor("--json", "--import", "sqlite3")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and report["torch"] == torch.__version__
    assert report["torch_cuda"] == torch.version.cuda
    assert report["prefix"] == sys.prefix
    found = findings_of(done.stdout)
    for check in ("gpu.driver", "gpu.torch-build", "toolchain.nvcc", "conda.resolve", "network.probe"):
        assert check in found, check
    assert all(f["status"] != "fail" for group in found.values() for f in group)
    assert any(f["summary"] == "sqlite3 imports" for f in found["extensions.import"])
    if importlib.util.find_spec("pointops") is not None:
        assert [f["status"] for f in found["pointops.build"]] == ["pass"]
        assert any(
            f["summary"].startswith("pointops ") and f["status"] == "pass" for f in found["extensions.import"]
        )


def test_cpu_torch_on_a_gpu_box_seen_through_a_fake_nvidia_smi(tmp_path):
    """nvidia-smi answers with the H200 machine's real output; this environment's torch is a CPU build."""
    import torch

    if torch.version.cuda:
        pytest.skip("this test environment has a CUDA torch")
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) sed -n 2p '{DEVICE_DATA / 'nvidia-smi-query-header.csv'}' ;;\n"
        f"  *) cat '{DEVICE_DATA / 'nvidia-smi.txt'}' ;;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    path = f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = doctor(env_updates={"PATH": path, "HOME": str(tmp_path)}, pythonpath=[str(without_nvml(tmp_path))])
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"solver doctor: linux-64, environment {sys.prefix}")
    assert any(
        line.startswith("ok    gpu.driver: 1 NVIDIA GPU(s)") and "580.159.04 (CUDA 13.0)" in line
        for line in lines
    )
    at = lines.index("FAIL  gpu.torch-build: CPU build of PyTorch on a machine with an NVIDIA GPU")
    assert "NVIDIA H200 (sm_90)" in lines[at + 1]
    assert (
        lines[at + 2]
        .strip()
        .startswith(
            'fix: pip install --force-reinstall "torch==2.14.*" --index-url '
            "https://download.pytorch.org/whl/cu130"
        )
    )
    assert lines[-1].startswith("1 failed")


def _broken_prefix(tmp_path: Path) -> Path:
    prefix = conda_pytorch_env(tmp_path / "env")
    for meta in (prefix / "lib/python3.11/site-packages").glob("torch-*.dist-info"):
        (meta / "INSTALLER").write_text("pip\n")  # pip reinstalled torch over conda's
    write_dist(prefix, "nvidia-cudnn-cu12", "9.1.0.70", "pip")
    return prefix


def test_doctor_on_a_broken_conda_environment(tmp_path):
    prefix = _broken_prefix(tmp_path)
    done = doctor(
        "--json",
        "--prefix",
        str(prefix),
        "--python",
        sys.executable,
        env_updates={"CONDA_OVERRIDE_CUDA": "11.4", "HOME": str(tmp_path)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    found = findings_of(done.stdout)
    [shadow] = found["conda.pip-shadowing"]
    assert shadow["status"] == "fail"
    assert (
        shadow["fix"] == "pip uninstall -y torch nvidia-cudnn-cu12 && conda install --force-reinstall pytorch"
    )
    [resolve] = found["conda.resolve"]
    assert resolve["status"] == "fail" and "this machine has __cuda 11.4" in resolve["summary"]
    text = doctor(
        "--prefix",
        str(prefix),
        "--python",
        sys.executable,
        env_updates={"CONDA_OVERRIDE_CUDA": "11.4", "HOME": str(tmp_path)},
    )
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    fail_line = next(i for i, line in enumerate(lines) if line.startswith("FAIL  conda.pip-shadowing"))
    assert lines[fail_line + 1].strip().startswith("evidence:") and lines[fail_line + 2].strip().startswith(
        "fix: pip"
    )


def test_doctor_without_py_rattler_says_so(tmp_path):
    blocker = tmp_path / "no-rattler" / "rattler"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('py-rattler left out of this environment')\n")
    prefix = _broken_prefix(tmp_path)
    done = doctor(
        "--json",
        "--prefix",
        str(prefix),
        "--python",
        sys.executable,
        pythonpath=[str(blocker.parent)],
        env_updates={"HOME": str(tmp_path)},
    )
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


def test_python_alone_names_its_environment():
    from solver.doctor_checks.gather import default_options

    base_python = Path(sys.base_prefix) / "bin" / "python3"
    if sys.base_prefix == sys.prefix or not base_python.is_file():
        pytest.skip("needs to run inside a virtual environment with its base interpreter at hand")
    options = default_options(None, str(base_python))
    assert options.prefix == Path(sys.base_prefix) and options.python == str(base_python)
