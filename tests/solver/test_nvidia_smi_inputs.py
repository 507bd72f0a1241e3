"""nvidia-smi that hangs, fails, prints garbage or names a GPU with a comma, fed to detection and to
`solver make-env --gpu auto` (stand-in programs on PATH: no GPU exists in CI)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import fake_nvidia_smi as fake
import pytest

from solver.detect import detect, parse_nvidia_smi_csv


@pytest.fixture
def on_path(monkeypatch):
    def use(path: str) -> None:
        monkeypatch.setenv("PATH", path)
        for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
            monkeypatch.delenv(name, raising=False)

    return use


def test_a_comma_in_a_gpu_name_does_not_shift_the_columns():
    text = "0, NVIDIA RTX PRO 6000 Blackwell, Max-Q Workstation Edition, 12.0, 580.95.05\n1, Tesla T4, 7.5, 580.95.05\n"
    gpus = parse_nvidia_smi_csv(text)
    assert [(g.name, g.compute_capability) for g in gpus] == [
        ("NVIDIA RTX PRO 6000 Blackwell, Max-Q Workstation Edition", "12.0"),
        ("Tesla T4", "7.5"),
    ]


def test_detect_reads_a_comma_name_through_nvidia_smi(tmp_path, on_path):
    on_path(
        fake.answering(
            tmp_path, [{"name": "Lab GPU, rev 2", "compute_cap": "8.6"}], driver="550.54.14", cuda="12.4"
        )
    )
    info = detect(env={}, use_nvml=False)
    assert info.problem == "" and info.driver_version == "550.54.14" and info.driver_cuda == "12.4"
    assert [(g.name, g.compute_capability) for g in info.gpus] == [("Lab GPU, rev 2", "8.6")]


def test_a_name_that_is_not_utf8_is_read_with_replacement_characters(tmp_path, on_path):
    on_path(
        fake.answering(tmp_path, [{"name": b"NVIDIA \xff\xfe GPU", "compute_cap": "8.9"}], driver="550.54.14")
    )
    info = detect(env={}, use_nvml=False)
    assert info.problem == "" and info.gpus[0].compute_capability == "8.9"
    assert info.gpus[0].name == "NVIDIA \ufffd\ufffd GPU"


def test_garbage_is_a_problem_not_a_machine_without_a_gpu(tmp_path, on_path):
    on_path(fake.garbage(tmp_path))
    info = detect(env={}, use_nvml=False)
    assert info.gpus == [] and info.driver_version is None
    assert info.problem.startswith("nvidia-smi answers, but not with a GPU list")


def test_a_hanging_nvidia_smi_is_given_up_and_reported(tmp_path, on_path):
    on_path(fake.hanging(tmp_path))
    started = time.monotonic()
    info = detect(env={}, use_nvml=False, nvidia_smi_timeout=1.0)
    assert time.monotonic() - started < 30  # bounded by the limit, not by the program
    assert info.gpus == [] and info.problem.startswith("nvidia-smi does not answer")


def test_driver_not_loaded_is_a_problem(tmp_path, on_path):
    on_path(fake.driver_not_loaded(tmp_path))
    info = detect(env={}, use_nvml=False)
    assert info.problem.startswith("the NVIDIA driver is not loaded") and info.gpus == []


def test_no_devices_and_no_nvidia_smi_are_machines_without_a_gpu(tmp_path, on_path):
    on_path(fake.no_devices(tmp_path / "a"))
    info = detect(env={}, use_nvml=False)
    assert info.problem == "" and info.gpus == [] and "No devices were found" in info.notes[-1]
    on_path(str(tmp_path / "empty"))
    info = detect(env={}, use_nvml=False)
    assert info.problem == "" and info.notes[-1] == "nvidia-smi not found"


# -- make-env --gpu auto on such machines (the CLI in a child process) -------------------------


@pytest.mark.parametrize(
    "make,words",
    [
        (
            fake.driver_not_loaded,
            ["the NVIDIA driver is not loaded", "--gpu NAME --driver VERSION", "--gpu none"],
        ),
        (fake.garbage, ["nvidia-smi answers, but not with a GPU list", "--gpu none"]),
    ],
)
def test_make_env_refuses_to_plan_around_a_broken_driver(solver_cli, tmp_path, make, words):
    result = solver_cli("make-env", "--offline", env={"PATH": make(tmp_path)})
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("solver make-env: error: ")
    for word in words:
        assert word in line


def test_make_env_with_a_non_utf8_gpu_name_plans_for_it(solver_cli, tmp_path):
    path = fake.answering(tmp_path, [{"name": b"NVIDIA \xff GPU, 2nd", "compute_cap": "9.0"}])
    result = solver_cli("make-env", "--offline", "--json", env={"PATH": path})
    assert result.returncode == 0, result.stderr
    assert result.json["gpu"] == {"name": "NVIDIA \ufffd GPU, 2nd", "compute_capability": "9.0"}
    assert result.json["pytorch_build"] == "cuda130*" and "internal error" not in result.stderr


def test_make_env_with_overrides_does_not_need_the_driver(solver_cli, tmp_path):
    """CONDA_OVERRIDE_CUDA states the driver: a broken local one does not matter then."""
    result = solver_cli(
        "make-env",
        "--offline",
        "--json",
        env={
            "PATH": fake.driver_not_loaded(tmp_path),
            "CONDA_OVERRIDE_CUDA": "12.8",
            "CONDA_OVERRIDE_CUDA_ARCH": "8.0",
        },
    )
    assert result.returncode == 0, result.stderr
    assert result.json["gpu"]["compute_capability"] == "8.0" and result.json["driver"]["cuda"] == "12.8"


# -- make-env --gpu auto on a machine whose driver hangs -----------------------------------------

REPO = Path(__file__).resolve().parents[2]
# The command line as users run it, with detection's time limit (10 s) shortened for the test.
SHORT_LIMIT = (
    "import sys, solver.detect; solver.detect.NVIDIA_SMI_TIMEOUT_S = 2.0; "
    "from solver.cli import main; sys.exit(main(sys.argv[1:]))"
)


def make_env_with_short_limit(tmp_path, path: str, pynvml: str, *args: str):
    """make-env in a child process: PATH as given, and a stand-in pynvml module with this source."""
    modules = tmp_path / "modules"
    modules.mkdir(exist_ok=True)
    (modules / "pynvml.py").write_text(pynvml)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    env.update(PATH=path, PYTHONPATH=os.pathsep.join([str(modules), str(REPO)]))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", SHORT_LIMIT, "make-env", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    return done, time.monotonic() - started


NO_NVML = "raise ImportError('no NVML here')\n"
# nvmlInit never returns, as on a wedged driver (the C call blocks; here a sleep that holds no lock).
HANGING_NVML = (
    "import time\nclass NVMLError(Exception):\n    pass\ndef nvmlInit():\n    time.sleep(300)\n"
    "def nvmlShutdown():\n    pass\n"
)


@pytest.mark.parametrize("args", [["--offline"], ["--offline", "--json"], ["--channel", "./no-such-channel"]])
def test_make_env_with_a_hanging_nvidia_smi_gives_up_in_one_line(tmp_path, args):
    """The stand-in also starts a child that would hold the pipes open: it is killed with it."""
    done, elapsed = make_env_with_short_limit(tmp_path, fake.hanging(tmp_path / "bin"), NO_NVML, *args)
    assert elapsed < 60 and done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("solver make-env: error: nvidia-smi does not answer (no reply within 2 s)")
    assert "--gpu NAME --driver VERSION" in line and "Traceback" not in done.stderr
    assert done.stdout == "" or '"errors"' in done.stdout  # --json: the document says why


def test_make_env_with_a_hanging_nvml_gives_up_in_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done, elapsed = make_env_with_short_limit(tmp_path, str(empty), HANGING_NVML, "--offline")
    assert elapsed < 60 and done.returncode == 1 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("solver make-env: error: NVML does not answer (no reply within 2 s)")
    assert "Traceback" not in done.stderr


def test_a_hanging_nvml_falls_back_to_a_working_nvidia_smi(tmp_path):
    path = fake.answering(tmp_path / "bin", [{"name": "NVIDIA H200", "compute_cap": "9.0"}])
    done, elapsed = make_env_with_short_limit(tmp_path, path, HANGING_NVML, "--offline", "--json")
    assert elapsed < 60 and done.returncode == 0, done.stderr
    assert '"name": "NVIDIA H200"' in done.stdout and "NVML did not answer within 2 s" in done.stderr
