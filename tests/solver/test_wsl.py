"""WSL2: the driver is the Windows host's, and nvidia-smi inside WSL prints its Windows number
("Driver Version: 537.13" beside "NVIDIA-SMI 535.103", NVIDIA developer forum topic 265973, Sep
2023; NVIDIA's CUDA on WSL user guide: install no Linux driver in WSL). Detection recognises WSL
from the machine (/proc/version, /usr/lib/wsl/lib) and the planner compares that number with
NVIDIA's Windows minimums (528.33 for CUDA 12 minor-version compatibility, not Linux's 525.60.13)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from solver import cli, detect
from solver.detect import Detection, GpuInfo, is_wsl_kernel, parse_nvidia_smi_cuda, parse_nvidia_smi_driver
from solver.knowledge import load
from solver.plan import PlanError, make_plan
from solver.target import build_target

sys.path.insert(0, str(Path(__file__).parent))
import fake_nvidia_smi as fake  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_overrides")

# /proc/version as WSL2, WSL1 and a native Ubuntu kernel print it.
WSL2_KERNEL = (
    "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1) (gcc (GCC) 12.2.0, "
    "GNU ld (GNU Binutils) 2.40) #1 SMP Fri Mar 29 23:14:13 UTC 2024\n"
)
WSL1_KERNEL = "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) #1237-Microsoft\n"
NATIVE_KERNEL = (
    "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) (x86_64-linux-gnu-gcc-13 (Ubuntu "
    "13.2.0-23ubuntu4) 13.2.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #49-Ubuntu SMP PREEMPT_DYNAMIC\n"
)
# The header line nvidia-smi prints inside WSL2 (forum topic 265973).
WSL_HEADER = "| NVIDIA-SMI 535.103                Driver Version: 537.13       CUDA Version: 12.2     |\n"


def test_a_wsl_kernel_is_recognised():
    assert is_wsl_kernel(WSL2_KERNEL) and is_wsl_kernel(WSL1_KERNEL)
    assert not is_wsl_kernel(NATIVE_KERNEL) and not is_wsl_kernel("")


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Point detection at a /proc/version and a /usr/lib/wsl/lib of the test's making."""

    def make(kernel: str, wsl_lib: bool = False) -> None:
        proc = tmp_path / "version"
        proc.write_text(kernel)
        lib = tmp_path / ("wsl-lib" if wsl_lib else "absent")
        if wsl_lib:
            lib.mkdir(exist_ok=True)
        monkeypatch.setattr(detect, "PROC_VERSION", str(proc))
        monkeypatch.setattr(detect, "WSL_LIB_DIR", str(lib))

    return make


def test_wsl_is_read_from_proc_version_or_the_wsl_library_folder(machine, monkeypatch):
    machine(WSL2_KERNEL)
    assert detect.host_is_wsl()
    machine(NATIVE_KERNEL, wsl_lib=True)  # a kernel of its own, but WSL's driver libraries mounted
    assert detect.host_is_wsl()
    machine(NATIVE_KERNEL)
    assert not detect.host_is_wsl()
    monkeypatch.setattr(detect, "PROC_VERSION", "/nonexistent/version")
    assert not detect.host_is_wsl()


def test_the_wsl_header_names_the_windows_driver_not_the_tool():
    assert parse_nvidia_smi_driver(WSL_HEADER) == "537.13"
    assert parse_nvidia_smi_cuda(WSL_HEADER) == "12.2"


def test_detect_under_wsl_marks_the_driver_as_windows(tmp_path, machine, monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("detection reads /proc/version on Linux only")
    machine(WSL2_KERNEL)
    monkeypatch.setenv(
        "PATH",
        fake.answering(
            tmp_path, [{"name": "NVIDIA GeForce RTX 3090", "compute_cap": "8.6"}], "537.13", "12.2"
        ),
    )
    info = detect.detect(env={}, use_nvml=False)
    assert (info.wsl, info.driver_version, info.driver_cuda) == (True, "537.13", "12.2")
    machine(NATIVE_KERNEL)
    assert detect.detect(env={}, use_nvml=False).wsl is False


def _detected(driver: str, cuda: str, wsl: bool):
    return lambda: Detection(
        platform="linux-64",
        glibc="2.35",
        driver_version=driver,
        driver_cuda=cuda,
        gpus=[GpuInfo(0, "NVIDIA GeForce RTX 3090", "8.6")],
        source="nvidia-smi",
        wsl=wsl,
    )


def test_a_wsl_driver_is_held_to_the_windows_minimums():
    """527.41 (R525, CUDA 12.0) runs CUDA 12.9 through minor-version compatibility on Linux
    (>= 525.60.13) but not on Windows (>= 528.33): under WSL it is a Windows driver."""
    kb = load()
    native = make_plan(kb, build_target(kb, gpu="auto", detector=_detected("527.41", "12.0", wsl=False)))
    assert (native.variant, native.driver_mode) == ("cuda129", "mvc")
    with pytest.raises(PlanError) as info:
        make_plan(kb, build_target(kb, gpu="auto", detector=_detected("527.41", "12.0", wsl=True)))
    assert "528.33 on Windows" in str(info.value)


def test_the_plan_says_the_driver_is_the_windows_hosts():
    kb = load()
    target = build_target(kb, gpu="auto", detector=_detected("537.13", "12.2", wsl=True))
    assert (target.os, target.driver_os, target.platform) == ("linux", "windows", "linux-64")
    plan = make_plan(kb, target)
    assert (plan.variant, plan.driver_mode) == ("cuda129", "mvc")
    assert any("WSL2" in reason and "537.13" in reason and "Windows" in reason for reason in plan.reasons)


def test_make_env_under_wsl(tmp_path, machine, monkeypatch, capsys):
    if not sys.platform.startswith("linux"):
        pytest.skip("detection reads /proc/version on Linux only")
    machine(WSL2_KERNEL)
    monkeypatch.setenv(
        "PATH",
        fake.answering(
            tmp_path, [{"name": "NVIDIA GeForce RTX 3090", "compute_cap": "8.6"}], "527.41", "12.0"
        ),
    )
    code = cli.main(["make-env", "--offline", "--platform", "linux-64"])
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and "528.33 on Windows" in err and len(err.strip().splitlines()) == 1
