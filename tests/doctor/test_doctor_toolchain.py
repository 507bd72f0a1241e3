"""nvcc against torch's CUDA, and the host gcc against the newest gcc nvcc accepts."""

from __future__ import annotations

import os

import pytest
from doctor_helpers import DEVICE_DATA, by_check, h200_torch

from solver.doctor_checks.facts import Facts, ToolchainFacts, TorchFacts
from solver.doctor_checks.toolchain import (
    check_toolchain,
    gather_toolchain,
    parse_gcc_version,
    parse_nvcc_version,
)
from solver.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def _facts(
    nvcc: str | None, gcc: str | None, torch: TorchFacts | None = None, cuda_home=None, platform="linux-64"
):
    tools = ToolchainFacts(
        nvcc_path="/opt/cuda/bin/nvcc" if nvcc else None,
        nvcc_version=nvcc,
        gcc_path="/usr/bin/gcc" if gcc else None,
        gcc_version=gcc,
        cuda_home=cuda_home,
    )
    return Facts(platform=platform, toolchain=tools, torch=torch or h200_torch())


def test_parse_the_h200_machine_tools():
    text = (DEVICE_DATA / "tools.txt").read_text()
    assert parse_nvcc_version(text) == "13.0"
    gcc_line = next(line for line in text.splitlines() if line.startswith("gcc "))
    assert parse_gcc_version(gcc_line) == "13.3.0"
    assert parse_gcc_version("gcc (Debian 12.2.0-14+deb12u1) 12.2.0") == "12.2.0"
    assert parse_gcc_version("Apple clang version 15.0.0 (clang-1500.3.9.4)") is None


def test_the_h200_toolchain_matches(kb):
    findings = check_toolchain(_facts("13.0", "13.3.0"), kb)
    assert [(f.check, f.status) for f in findings] == [
        ("toolchain.nvcc", "pass"),
        ("toolchain.host-compiler", "pass"),
    ]


def test_nvcc_major_mismatch_fails_and_minor_mismatch_warns(kb):
    [major] = by_check(check_toolchain(_facts("12.4", "12.2.0"), kb), "toolchain.nvcc")
    assert major.status == "fail" and "differ in major version" in major.summary
    assert major.fix.startswith('conda install -c conda-forge "cuda-nvcc=13.0" "cuda-version=13.0"')
    [minor] = by_check(check_toolchain(_facts("13.2", "13.3.0"), kb), "toolchain.nvcc")
    assert minor.status == "warn"


def test_gcc_newer_than_nvcc_supports(kb):
    [finding] = by_check(check_toolchain(_facts("12.4", "14.2.0"), kb), "toolchain.host-compiler")
    assert finding.status == "fail" and "gcc 14 is newer than nvcc 12.4 supports" in finding.summary
    assert "accepts gcc <= 13" in finding.evidence and '"gxx=13"' in finding.fix


def test_cuda_home_pointing_elsewhere(kb):
    findings = by_check(
        check_toolchain(_facts("13.0", "13.3.0", cuda_home="/usr/local/cuda-12.4"), kb), "toolchain.nvcc"
    )
    assert [f.status for f in findings] == ["warn", "pass"]
    assert findings[0].fix.startswith("export CUDA_HOME=/opt/cuda")


def test_no_nvcc_or_cpu_torch_are_notes(kb):
    assert [f.status for f in check_toolchain(_facts(None, "12.2.0"), kb)] == ["info"]
    cpu = TorchFacts(importable=True, version="2.13.0+cpu", cuda=None)
    assert [
        f.status for f in by_check(check_toolchain(_facts("13.0", "12.2.0", torch=cpu), kb), "toolchain.nvcc")
    ] == ["info"]
    assert (
        by_check(check_toolchain(_facts("13.0", None, platform="win-64"), kb), "toolchain.host-compiler")
        == []
    )


def test_gather_runs_the_tools_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.6, V12.6.85'\n")
    (bin_dir / "gcc").write_text("#!/bin/sh\necho 'gcc (GCC) 14.1.0'\n")
    for tool in ("nvcc", "gcc"):
        os.chmod(bin_dir / tool, 0o755)
    tools = gather_toolchain({"PATH": str(bin_dir)})
    assert (tools.nvcc_version, tools.gcc_version) == ("12.6", "14.1.0")
    assert tools.nvcc_path == str(bin_dir / "nvcc")
    ccbin = gather_toolchain({"PATH": str(bin_dir), "NVCC_CCBIN": "/nonexistent/g++-12"})
    assert ccbin.gcc_path == "/nonexistent/g++-12" and ccbin.gcc_version is None
