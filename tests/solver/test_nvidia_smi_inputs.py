"""nvidia-smi that hangs, fails, prints garbage or names a GPU with a comma, fed to detection and to
`solver make-env --gpu auto` (stand-in programs on PATH: no GPU exists in CI)."""

from __future__ import annotations

import time

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
        ("NVIDIA RTX PRO 6000 Blackwell, Max-Q Workstation Edition", "12.0"), ("Tesla T4", "7.5")]


def test_detect_reads_a_comma_name_through_nvidia_smi(tmp_path, on_path):
    on_path(fake.answering(tmp_path, [{"name": "Lab GPU, rev 2", "compute_cap": "8.6"}], driver="550.54.14",
                           cuda="12.4"))
    info = detect(env={}, use_nvml=False)
    assert info.problem == "" and info.driver_version == "550.54.14" and info.driver_cuda == "12.4"
    assert [(g.name, g.compute_capability) for g in info.gpus] == [("Lab GPU, rev 2", "8.6")]


def test_a_name_that_is_not_utf8_is_read_with_replacement_characters(tmp_path, on_path):
    on_path(fake.answering(tmp_path, [{"name": b"NVIDIA \xff\xfe GPU", "compute_cap": "8.9"}], driver="550.54.14"))
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

@pytest.mark.parametrize("make,words", [
    (fake.driver_not_loaded, ["the NVIDIA driver is not loaded", "--gpu NAME --driver VERSION", "--gpu none"]),
    (fake.garbage, ["nvidia-smi answers, but not with a GPU list", "--gpu none"]),
])
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
    result = solver_cli("make-env", "--offline", "--json", env={
        "PATH": fake.driver_not_loaded(tmp_path), "CONDA_OVERRIDE_CUDA": "12.8", "CONDA_OVERRIDE_CUDA_ARCH": "8.0"})
    assert result.returncode == 0, result.stderr
    assert result.json["gpu"]["compute_capability"] == "8.0" and result.json["driver"]["cuda"] == "12.8"
