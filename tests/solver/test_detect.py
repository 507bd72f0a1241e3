"""GPU detection: parsers on real captured output, nvidia-smi on PATH, overrides."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from solver.detect import (
    Detection,
    GpuInfo,
    detect,
    normalize_compute_capability,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_cuda,
    parse_nvidia_smi_driver,
)

DEVICE = Path(__file__).parent / "data" / "device"


def test_parse_query_csv_with_header():
    gpus = parse_nvidia_smi_csv((DEVICE / "nvidia-smi-query-header.csv").read_text())
    assert gpus == [GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0")]


def test_parse_query_csv_without_header():
    fields = ("index", "name", "uuid", "compute_cap", "driver_version", "memory.total", "pci.bus_id")
    gpus = parse_nvidia_smi_csv((DEVICE / "nvidia-smi-query.csv").read_text(), fields)
    assert gpus == [GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0")]


def test_parse_plain_and_q_output():
    plain = (DEVICE / "nvidia-smi.txt").read_text()
    full = (DEVICE / "nvidia-smi-q.txt").read_text()
    assert parse_nvidia_smi_cuda(plain) == "13.0" and parse_nvidia_smi_cuda(full) == "13.0"
    assert parse_nvidia_smi_driver(plain) == "580.159.04" and parse_nvidia_smi_driver(full) == "580.159.04"


def test_parse_two_gpus_and_missing_cc():
    text = "0, NVIDIA GeForce RTX 3090, 8.6, 550.54.14\n1, Tesla T4, [N/A], 550.54.14\n"
    gpus = parse_nvidia_smi_csv(text)
    assert [g.compute_capability for g in gpus] == ["8.6", None]
    info = Detection(platform="linux-64", glibc=None, driver_version="550", driver_cuda="12.4", gpus=gpus)
    assert info.min_compute_capability == "8.6"


@pytest.mark.parametrize(
    "text,cc",
    [
        ("8.6", "8.6"),
        ("sm_86", "8.6"),
        ("86", "8.6"),
        ("sm_120", "12.0"),
        ("12.0", "12.0"),
        ("sm90", "9.0"),
        ("eight", None),
        ("8.6.1", None),
        ("", None),
    ],
)
def test_normalize_compute_capability(text, cc):
    assert normalize_compute_capability(text) == cc


def _fake_nvidia_smi(tmp_path: Path, body: str) -> dict[str, str]:
    """A stand-in nvidia-smi on PATH (no GPU exists in CI) replaying captured output."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}


def _with_path(monkeypatch, env):
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA_ARCH", raising=False)


def test_detect_through_nvidia_smi(tmp_path, monkeypatch):
    query = (DEVICE / "nvidia-smi-query-header.csv").read_text().splitlines()[1]
    body = f'case "$1" in --query-gpu=*) echo "{query}";; *) cat "{DEVICE / "nvidia-smi.txt"}";; esac\n'
    _with_path(monkeypatch, _fake_nvidia_smi(tmp_path, body))
    info = detect(env={}, use_nvml=False)
    assert (info.source, info.driver_version, info.driver_cuda) == ("nvidia-smi", "580.159.04", "13.0")
    assert info.gpus == [GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0")]


def test_detect_with_r470_nvidia_smi_without_compute_cap(tmp_path, monkeypatch):
    body = (
        'case "$1" in\n'
        "  --query-gpu=*compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2;;\n"
        '  --query-gpu=*) echo "0, Tesla K80, 470.82.01";;\n'
        '  *) echo "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4 |";;\n'
        "esac\n"
    )
    _with_path(monkeypatch, _fake_nvidia_smi(tmp_path, body))
    info = detect(env={}, use_nvml=False)
    assert info.driver_version == "470.82.01" and info.driver_cuda == "11.4"
    assert info.gpus[0].compute_capability == "3.7"  # from the name table
    assert any("GPU table" in note for note in info.notes)


def test_detect_hanging_nvidia_smi_times_out(tmp_path, monkeypatch):
    _with_path(monkeypatch, _fake_nvidia_smi(tmp_path, "exec sleep 30\n"))
    info = detect(env={}, use_nvml=False, nvidia_smi_timeout=0.5)
    assert info.gpus == [] and info.driver_version is None
    assert any("did not answer" in note for note in info.notes)


def test_detect_without_any_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    info = detect(env={}, use_nvml=False)
    assert info.source == "none" and info.gpus == [] and info.driver_cuda is None
    assert "nvidia-smi not found" in info.notes


def test_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    info = detect(env={"CONDA_OVERRIDE_CUDA": "12.4", "CONDA_OVERRIDE_CUDA_ARCH": "8.6"}, use_nvml=False)
    assert info.driver_cuda == "12.4" and info.min_compute_capability == "8.6" and info.source == "override"
    assert detect(env={"CONDA_OVERRIDE_CUDA": ""}, use_nvml=False).driver_cuda is None
    assert (
        detect(env={"CONDA_OVERRIDE_CUDA": "12"}, use_nvml=False).driver_cuda == "12.0"
    )  # as conda reads it
    lone_arch = detect(env={"CONDA_OVERRIDE_CUDA_ARCH": "8.6"}, use_nvml=False)
    assert lone_arch.gpus == [] and any("needs a driver" in n for n in lone_arch.notes)


@pytest.mark.parametrize(
    "env,variable",
    [
        ({"CONDA_OVERRIDE_CUDA": "twelve"}, "CONDA_OVERRIDE_CUDA"),
        ({"CONDA_OVERRIDE_CUDA": "12.4", "CONDA_OVERRIDE_CUDA_ARCH": "sm_86"}, "CONDA_OVERRIDE_CUDA_ARCH"),
        ({"CONDA_OVERRIDE_CUDA": "12.4", "CONDA_OVERRIDE_CUDA_ARCH": "8.6.1"}, "CONDA_OVERRIDE_CUDA_ARCH"),
        ({"CONDA_OVERRIDE_GLIBC": "2.x"}, "CONDA_OVERRIDE_GLIBC"),
    ],
)
def test_malformed_override_is_reported_and_nothing_is_overridden(tmp_path, monkeypatch, env, variable):
    """conda and rattler refuse these values; detection says so instead of ignoring them quietly."""
    monkeypatch.setenv("PATH", str(tmp_path))
    info = detect(env=env, use_nvml=False)
    assert info.override_error.startswith(variable) and info.source == "none"
    assert info.driver_cuda is None and info.gpus == []


def test_override_replaces_detected_values(tmp_path, monkeypatch):
    query = (DEVICE / "nvidia-smi-query-header.csv").read_text().splitlines()[1]
    body = f'case "$1" in --query-gpu=*) echo "{query}";; *) cat "{DEVICE / "nvidia-smi.txt"}";; esac\n'
    _with_path(monkeypatch, _fake_nvidia_smi(tmp_path, body))
    info = detect(env={"CONDA_OVERRIDE_CUDA": "12.8", "CONDA_OVERRIDE_CUDA_ARCH": "8.0"}, use_nvml=False)
    assert info.driver_cuda == "12.8" and info.gpus[0].compute_capability == "8.0"
    assert info.gpus[0].name == "NVIDIA H200"


class _FakeNvml:
    """Stands in for nvidia-ml-py (no GPU in CI), replaying the readings captured on the H200."""

    def __init__(self, readings: dict):
        self.readings = readings
        self.shut = False

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return self.readings["driver"]

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.readings["cuda_driver_version"]

    def nvmlDeviceGetCount(self):
        return len(self.readings["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return self.readings["gpus"][handle]["name"].encode()  # older bindings return bytes

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return tuple(self.readings["gpus"][handle]["cc"])


def test_detect_through_nvml(monkeypatch):
    import json
    import sys

    fake = _FakeNvml(json.loads((DEVICE / "nvml.json").read_text()))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    info = detect(env={})
    assert (info.source, info.driver_version, info.driver_cuda) == ("nvml", "580.159.04", "13.0")
    assert info.gpus == [GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0")]
    assert fake.shut


def test_nvml_failure_falls_back_to_nvidia_smi(monkeypatch, tmp_path):
    import sys

    class Broken(_FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("Driver Not Loaded")

    monkeypatch.setitem(sys.modules, "pynvml", Broken({}))
    monkeypatch.setenv("PATH", str(tmp_path))
    info = detect(env={})
    assert info.source == "none"
    assert info.notes[:2] == ["NVML unavailable (Driver Not Loaded)", "nvidia-smi not found"]
