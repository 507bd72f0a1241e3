"""doctor on a machine that misbehaves and with bad input: a hanging, unloaded or garbage-printing
driver is a failure (never "no GPU"), a malformed --probe-url is a usage error, a malformed
CONDA_OVERRIDE_* a finding; a full or closed stdout is one line; no traceback anywhere. Also: the
checks form a registry that does not touch the machine."""

from __future__ import annotations

import inspect
import json
import os
import stat
import time

import fake_nvidia_smi as fake
import pytest
from doctor_helpers import (
    conda_pytorch_env,
    doctor,
    driver,
    facts_for_prefix,
    findings_of,
    h200_driver,
    h200_torch,
    without_nvml,
)

from solver.doctor_checks import CHECKS, run_checks
from solver.doctor_checks.facts import ConfigSetting, Facts, NetworkFacts, WindowsFacts
from solver.doctor_checks.network import inspect_ca_files
from solver.knowledge import load

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def broken_machine(tmp_path, make) -> dict:
    return {
        "env_updates": {"PATH": make(tmp_path / "bin", path=os.environ["PATH"]), "HOME": str(tmp_path)},
        "pythonpath": [str(without_nvml(tmp_path))],
    }


def test_a_hanging_nvidia_smi_is_a_failure_within_the_time_limit(tmp_path):
    started = time.monotonic()
    done = doctor("--json", "--driver-timeout", "2", **broken_machine(tmp_path, fake.hanging))
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert done.stderr == "" and elapsed < 120
    [finding] = findings_of(done.stdout)["gpu.driver"]
    assert finding["status"] == "fail" and finding["summary"].startswith("nvidia-smi does not answer")
    assert "dmesg" in finding["fix"]
    report = json.loads(done.stdout)
    assert report["driver_problem"].startswith("nvidia-smi does not answer") and report["gpus"] == []


@pytest.mark.parametrize(
    "make,summary,fix",
    [
        (fake.driver_not_loaded, "the NVIDIA driver is not loaded", "modprobe nvidia"),
        (fake.garbage, "nvidia-smi answers, but not with a GPU list", "nvidia-smi"),
    ],
)
def test_a_broken_driver_is_a_failure_not_a_machine_without_a_gpu(tmp_path, make, summary, fix):
    done = doctor("--json", **broken_machine(tmp_path, make))
    assert done.returncode == 1 and done.stderr == "", done.stderr
    [finding] = findings_of(done.stdout)["gpu.driver"]
    assert finding["status"] == "fail" and finding["summary"].startswith(summary) and fix in finding["fix"]


@pytest.mark.parametrize(
    "url,words",
    [
        ("not a url", "not an http:// or https:// URL"),
        ("ftp://example.org/x", "not an http:// or https:// URL"),
        ("http://", "no host name"),
        ("http://example.org:99999/", "not a URL"),
        ("https://[::1", "not a URL"),
    ],
)
def test_a_malformed_probe_url_is_a_usage_error(url, words):
    done = doctor("--probe-url", url)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("solver doctor: error: --probe-url") and words in line


def test_a_malformed_override_is_a_finding(tmp_path):
    done = doctor(
        "--json", env_updates={"CONDA_OVERRIDE_CUDA": "twelve", "HOME": str(tmp_path), "PATH": str(tmp_path)}
    )
    assert done.returncode == 1 and done.stderr == ""
    [finding] = findings_of(done.stdout)["gpu.overrides"]
    assert finding["status"] == "fail" and "CONDA_OVERRIDE_CUDA='twelve'" in finding["evidence"]


def test_standard_output_full_or_closed(tmp_path):
    if os.geteuid() == 0:
        full_path = tmp_path / "full"
        os.mknod(full_path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    else:
        full_path = "/dev/full"
    with open(full_path, "w") as full:
        done = doctor(stdout=full, env_updates={"HOME": str(tmp_path)})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "solver doctor: error: cannot write to standard output: No space left on device"
    ]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = doctor("--json", stdout=write_end, env_updates={"HOME": str(tmp_path)})
    finally:
        os.close(write_end)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert (
        line == "solver doctor: error: standard output was closed before everything was written (broken pipe)"
    )


# -- the registry ------------------------------------------------------------------------------


def test_every_check_has_one_signature():
    assert list(CHECKS) == [
        "gpu",
        "toolchain",
        "conda.pip-shadowing",
        "conda.resolve",
        "extensions",
        "libstdcxx",
        "mmcv",
        "pointops.installations",
        "windows",
        "network",
    ]
    for name, check in CHECKS.items():
        assert list(inspect.signature(check).parameters) == ["facts", "kb"], name


def _varied_facts(tmp_path) -> list[Facts]:
    """Facts of several machines, gathered beforehand (the prefix is re-solved while gathering)."""
    prefix = conda_pytorch_env(tmp_path / "env")
    conda = facts_for_prefix(
        prefix,
        ["__unix=0=0", "__linux=6.8=0", "__glibc=2.36=0", "__cuda=11.4=0"],
        driver=h200_driver(),
        torch=h200_torch(),
    )
    (tmp_path / "ca.pem").write_text(PEM)
    network = NetworkFacts(
        env={"SSL_CERT_FILE": str(tmp_path / "missing.pem"), "HTTPS_PROXY": "proxy:1"},
        settings=[ConfigSetting("conda.ssl_verify", str(tmp_path / "ca.pem"), "/x/.condarc")],
    )
    network.files = inspect_ca_files(network)
    windows = Facts(
        platform="win-64",
        windows=WindowsFacts(
            path_entries=["C:\\Miniconda3", "C:\\Anaconda3\\bin"], prefix="C:\\Miniconda3\\envs\\x"
        ),
    )
    pascal = Facts(
        platform="linux-64",
        driver=driver("590.44.01", "13.1", ("NVIDIA GeForce GTX 1080", "6.1")),
        torch=h200_torch(),
        network=network,
        mmcv=_mmcv_facts(),
        imports=_mmcv_imports(),
    )
    return [conda, windows, pascal, Facts(platform="linux-64")]


def _mmcv_facts():
    from solver.doctor_checks.dists import DistOrigin
    from solver.doctor_checks.facts import MmcvDependent, MmcvFacts, MmcvInstall

    origin = DistOrigin("mmcv", "2.1.0", "pip", "editable", "/src/mmcv", location_exists=True)
    install = MmcvInstall(
        "/env/site/mmcv",
        "mmcv",
        "2.1.0",
        origin,
        ["mmcv-lite 2.2.0"],
        ["mmcv/_ext.so"],
        ["/env/site/mmcv/_ext.so"],
    )
    install.cuda_archs = ["sm_80", "compute_80"]
    return MmcvFacts([install], [MmcvDependent("mmdet", "mmdet", "3.3.0", "mmcv<2.2.0,>=2.0.0rc4")])


def _mmcv_imports():
    from solver.doctor_checks.facts import ImportFact

    symbol = "ImportError: /env/site/mmcv/_ext.so: undefined symbol: _ZN3c105ErrorC1ENS_14SourceLocationESs"
    incompatible = (
        "AssertionError: MMCV==2.2.0 is used but incompatible. Please install mmcv>=2.0.0rc4, <2.2.0."
    )
    return [
        ImportFact("mmcv.ops", "mmcv", "2.1.0", error=symbol, path="/env/site/mmcv"),
        ImportFact("mmdet", "mmdet", "3.3.0", error=incompatible),
        ImportFact("mmcv.ops", "mmcv", "2.1.0", error="ModuleNotFoundError: No module named 'mmcv._ext'"),
    ]


def test_checks_do_not_touch_the_machine(tmp_path, monkeypatch):
    """Only gathering looks at the machine: with processes, sockets, file opening and stat blocked,
    every check still runs and gives the same findings."""
    import builtins
    import io
    import socket
    import subprocess

    kb = load()
    facts_list = _varied_facts(tmp_path)
    expected = [run_checks(facts, kb) for facts in facts_list]  # also imports whatever the checks import

    def blocked(*args, **kwargs):
        raise AssertionError(f"a check touched the machine: {args[:2]}")

    for target, name in (
        (subprocess, "Popen"),
        (socket, "socket"),
        (builtins, "open"),
        (io, "open"),
        (os, "stat"),
        (os, "lstat"),
        (os, "listdir"),
        (os, "scandir"),
        (os, "access"),
    ):
        monkeypatch.setattr(target, name, blocked)
    again = [run_checks(facts, kb) for facts in facts_list]
    monkeypatch.undo()
    assert again == expected
    assert not [f for findings in again for f in findings if f.check.endswith(".internal")]


# -- PyTorch wheel fixes follow the project's rules ------------------------------------------------


def test_no_wheel_for_a_gpu_make_env_refuses():
    from solver.doctor_checks.facts import TorchFacts
    from solver.doctor_checks.gpu import check_gpu

    kb = load()
    cpu_torch = TorchFacts(importable=True, version="2.13.0+cpu", cuda=None, cuda_available=False)
    kepler = Facts(
        platform="linux-64", driver=driver("470.256.02", "11.4", ("Tesla K80", "3.7")), torch=cpu_torch
    )
    [finding] = [f for f in check_gpu(kepler, kb) if f.check == "gpu.torch-build"]
    assert "download.pytorch.org/whl/cu" not in finding.fix and "whl/cpu" in finding.fix
