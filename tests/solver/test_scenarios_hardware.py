"""Scenario table, second part: what users type for new and unusual hardware, with the answer the
sources give (not what the solver happened to print).

- Driver floors per GPU generation: a GPU needs a driver of at least the branch of the first CUDA
  toolkit that knows it (Blackwell 10.0/12.0: CUDA 12.8 -> R570; 10.3/12.1: 12.9 -> R575; Thor
  11.0: 13.0 -> R580; Rubin 10.7: 13.4 -> R615). NVIDIA architecture matrix, meson cuda.py,
  pytorch#190654 (Rubin).
- Driver floors per GPU: NVIDIA names 570.133.20 or later for HGX B200 (NVIDIA/cloud-native-docs#184,
  a Linux driver-container version), a later build than R570's first (570.26) and than CUDA
  12.8.1's own driver (570.124.06). It names no Windows build, and R570's Windows drivers are
  numbered apart (570.65, 572.61: CUDA 12.8's Windows minimums), so on Windows only the branch
  is checked, with a warning. GB200 has no such number of its own.
- Jetson: JetPack 6 prints 540.4.0 / CUDA 12.6 / "Orin (nvgpu)" and runs only conda-forge's tegra
  builds (CUDA 12.9, 8.7+PTX, glibc 2.34), for which pointops publishes no build (refused, naming
  JetPack 7.2, also when --cuda asks for 12.9 or 13.0); JetPack 7.2 puts Orin on the SBSA stack, where only
  pytorch 2.13.0 builds >= 2 (package build number 202) carry 8.7; Thor (JetPack 7) prints
  580.00 / 13.0 / "NVIDIA Thor"; Xavier, TX2 and Nano have no CUDA 12 stack. Tegra GPUs need
  SASS of their exact compute capability (CUDA C++ Programming Guide, binary compatibility).
- Names as nvidia-smi / NVML print them, laptop and workstation parts (NVIDIA's CUDA GPU pages).
- Compute capabilities that no GPU has, and a name given with the wrong one (issue 15).
"""

from __future__ import annotations

import pytest

from solver import cli
from solver.knowledge import load
from solver.plan import PlanError, make_plan
from solver.target import TargetError, build_target

pytestmark = pytest.mark.usefixtures("no_overrides")


def plan_for(monkeypatch, gpu, driver, platform, flags=None, env=None):
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    kb = load()
    target = build_target(kb, gpu=gpu, driver=driver, platform=platform)
    return make_plan(kb, target, **(flags or {}))


# (gpu, driver, platform, flags, env) -> (variant, cuda-version, arm-variant, driver compatibility, min build number)
PLANS = [
    # -- first driver of a generation: at the edge it works -----------------------------------
    # R570 is Blackwell 12.0's first branch; SASS 12.0 in the 12.9 builds -> minor-version compatibility
    ("NVIDIA GeForce RTX 5090", "570.86.16", "linux-64", {}, {}, ("cuda129", "12.9", None, "mvc", None)),
    # 570.65 is CUDA 12.8's Windows driver, the Windows pytorch is 12.8: full compatibility
    ("NVIDIA GeForce RTX 5080", "570.65", "win-64", {}, {}, ("cuda128", "12.8", None, "full", None)),
    # HGX B200 with the driver NVIDIA names for it (570.133.20 or later), and newer ones
    ("NVIDIA B200", "570.133.20", "linux-64", {}, {}, ("cuda129", "12.9", None, "mvc", None)),
    ("NVIDIA B200", "575.51.03", "linux-64", {}, {}, ("cuda129", "12.9", None, "full", None)),
    ("NVIDIA B200", "580.65.06", "linux-64", {}, {}, ("cuda130", "13.0", None, "full", None)),
    # as DGX/HGX systems name it: still the B200
    ("NVIDIA DGX B200", "570.133.20", "linux-64", {}, {}, ("cuda129", "12.9", None, "mvc", None)),
    # Windows: no B200 build number is named, CUDA 12.8's Windows driver is R570's floor there
    ("NVIDIA B200", "572.61", "win-64", {}, {}, ("cuda128", "12.8", None, "full", None)),
    # GB200 (also 10.0) has no minimum of its own: R570 from its first build
    ("NVIDIA GB200", "570.124.06", "linux-aarch64", {}, {}, ("cuda129", "12.9", "sbsa", "mvc", None)),
    # B300 and GB10 first appear in R580 drivers (580.82.07, 580.94.13), not in R575 as CUDA 12.9's
    # arch list suggests (open-gpu-kernel-modules README per release tag)
    ("NVIDIA B300 SXM6 AC", "580.82.07", "linux-64", {}, {}, ("cuda130", "13.0", None, "full", None)),
    # DGX Spark (GB10, 12.1) is linux-aarch64: sbsa builds, arm-variant pinned
    ("NVIDIA GB10", "580.94.13", "linux-aarch64", {}, {}, ("cuda130", "13.0", "sbsa", "full", None)),
    (
        "NVIDIA GB10",
        "580.94.13",
        "linux-aarch64",
        {"cuda": "12.9"},
        {},
        ("cuda129", "12.9", "sbsa", "full", None),
    ),
    # Workstation Edition from 570.123.07 (R570); the Server Edition from 575.57.08 (R575, see refusals)
    (
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "570.123.07",
        "linux-64",
        {},
        {},
        ("cuda129", "12.9", None, "mvc", None),
    ),
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "575.57.08",
        "linux-64",
        {},
        {},
        ("cuda129", "12.9", None, "full", None),
    ),
    # RTX PRO 5000 Blackwell: 570.153.02 in R570; R575 from 575.57.08
    (
        "NVIDIA RTX PRO 5000 Blackwell",
        "570.153.02",
        "linux-64",
        {},
        {},
        ("cuda129", "12.9", None, "mvc", None),
    ),
    (
        "NVIDIA RTX PRO 5000 Blackwell",
        "575.57.08",
        "linux-64",
        {},
        {},
        ("cuda129", "12.9", None, "full", None),
    ),
    # Rubin 10.7 on R615: SASS 10.0 in the CUDA 13.0 builds runs on 10.7 (same major, desktop GPU)
    ("NVIDIA VR200", "615.71.09", "linux-64", {}, {}, ("cuda130", "13.0", None, "full", None)),
    # R620 reports CUDA 13.5
    ("NVIDIA H200", "620.70.06", "linux-64", {}, {}, ("cuda130", "13.0", None, "full", None)),
    # -- Jetson --------------------------------------------------------------------------------
    # JetPack 7.2 (CUDA 13.2, driver of the 595 series): sbsa CUDA 13 with 8.7 from build number 202
    ("Jetson AGX Orin", "595.45.04", "linux-aarch64", {}, {}, ("cuda130", "13.0", "sbsa", "full", 202)),
    (
        "Jetson Orin NX",
        None,
        "linux-aarch64",
        {},
        {"CONDA_OVERRIDE_CUDA": "13.2"},
        ("cuda130", "13.0", "sbsa", "full", 202),
    ),
    # Thor on JetPack 7: 580.00 reports 13.0; every CUDA 13.0 build carries 11.0
    ("NVIDIA Thor", "580.00", "linux-aarch64", {}, {}, ("cuda130", "13.0", "sbsa", "full", None)),
    # sm_101 is Thor's CUDA 12.8/12.9 name; CUDA 13 calls it 11.0
    ("sm_101", "580.00", "linux-aarch64", {}, {}, ("cuda130", "13.0", "sbsa", "full", None)),
    # -- names as nvidia-smi prints them -------------------------------------------------------
    (
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "560.94",
        "win-64",
        {},
        {},
        ("cuda128", "12.8", None, "mvc", None),
    ),
    (
        "NVIDIA GeForce RTX 3050 Ti Laptop GPU",
        "537.13",
        "win-64",
        {},
        {},
        ("cuda128", "12.8", None, "mvc", None),
    ),
    (
        "NVIDIA RTX A2000 8GB Laptop GPU",
        "550.54.14",
        "linux-64",
        {},
        {},
        ("cuda129", "12.9", None, "mvc", None),
    ),
    (
        "NVIDIA RTX 2000 Ada Generation Laptop GPU",
        "580.65.06",
        "linux-64",
        {},
        {},
        ("cuda130", "13.0", None, "full", None),
    ),
    (
        "NVIDIA RTX PRO 500 Blackwell Generation Laptop GPU",
        "572.83",
        "win-64",
        {},
        {},
        ("cuda128", "12.8", None, "full", None),
    ),
    (
        "NVIDIA GeForce GTX 1650 Ti with Max-Q Design",
        "551.61",
        "win-64",
        {},
        {},
        ("cuda128", "12.8", None, "mvc", None),
    ),
    ("NVIDIA GeForce MX450", "535.104.05", "linux-64", {}, {}, ("cuda129", "12.9", None, "mvc", None)),
    ("NVIDIA T550 Laptop GPU", "528.33", "win-64", {}, {}, ("cuda128", "12.8", None, "mvc", None)),
    ("Quadro P1000", "580.95.05", "linux-64", {}, {}, ("cuda129", "12.9", None, "full", None)),
    ("Quadro M2000M", "535.183.01", "linux-64", {}, {}, ("cuda129", "12.9", None, "mvc", None)),
    ("Tesla V100S-PCIE-32GB", "535.183.06", "linux-64", {}, {}, ("cuda129", "12.9", None, "mvc", None)),
    ("NVIDIA GH200 480GB", "575.57.08", "linux-aarch64", {}, {}, ("cuda129", "12.9", "sbsa", "full", None)),
]


@pytest.mark.parametrize(
    "gpu,driver,platform,flags,env,expected",
    PLANS,
    ids=[f"{p[0]}-{p[1]}-{p[2]}-{'-'.join(p[3]) or '-'.join(p[4])}" for p in PLANS],
)
def test_hardware_plans(monkeypatch, gpu, driver, platform, flags, env, expected):
    plan = plan_for(monkeypatch, gpu, driver, platform, flags, env)
    variant, cuda, arm_variant, mode, min_build = expected
    assert (plan.variant, plan.cuda_version, plan.arm_variant, plan.driver_mode) == (
        variant,
        cuda,
        arm_variant,
        mode,
    )
    assert plan.pytorch_min_build_number == min_build
    assert set(plan.coverage.values()) == {"sass"}
    specs = plan.specs()
    assert f"pointops=0.1.0={variant}*" in specs and f"cuda-version={cuda}" in specs
    arm_specs = [s for s in specs if s.startswith("arm-variant")]
    assert arm_specs == ([f"arm-variant=*={arm_variant}"] if arm_variant else [])
    if min_build:
        assert f"pytorch={plan.pytorch_version}={variant}*[build_number='>={min_build}']" in specs
    else:
        assert f"pytorch={plan.pytorch_minor}.*={variant}*" in specs
    if "python" in flags:
        assert plan.python == flags["python"]
    if "torch" in flags:
        assert plan.pytorch_minor == flags["torch"]


# (gpu, driver, platform, flags, env) -> exit code, words the refusal must contain
REFUSALS = [
    # -- driver older than the generation's first branch: Linux and Windows numbering -----------
    (
        "NVIDIA GeForce RTX 5090",
        "560.35.03",
        "linux-64",
        {},
        {},
        1,
        ["R560", "too old", "570.86.16 or later on Linux"],
    ),
    (
        "NVIDIA GeForce RTX 5090",
        "566.03",
        "win-64",
        {},
        {},
        1,
        ["R565", "R570", "none by number for Windows", "570.86.16 or later on Linux"],
    ),
    ("NVIDIA GeForce RTX 5070 Ti", "565.57.01", "linux-64", {}, {}, 1, ["R565", "R570"]),
    ("NVIDIA GeForce RTX 5060", "561.09", "win-64", {}, {}, 1, ["R560", "an R570 or newer Windows driver"]),
    # B200: the generation's refusal names the GPU's own minimum, not R570's first build (570.26)
    ("NVIDIA B200", "550.54.15", "linux-64", {}, {}, 1, ["R550", "570.133.20 or later on Linux"]),
    ("NVIDIA B200", "565.57.01", "linux-64", {}, {}, 1, ["R565", "570.133.20 or later on Linux"]),
    # R570 builds before 570.133.20: the first one, and CUDA 12.8.1's own driver
    (
        "NVIDIA B200",
        "570.26",
        "linux-64",
        {},
        {},
        1,
        ["too old", "570.133.20 or later", "cloud-native-docs#184"],
    ),
    (
        "NVIDIA B200",
        "570.124.06",
        "linux-64",
        {},
        {},
        1,
        ["driver 570.124.06 (R570) is too old", "Install driver 570.133.20 or later", "--gpu none"],
    ),
    ("NVIDIA HGX B200", "570.124.06", "linux-64", {}, {}, 1, ["570.133.20"]),
    ("NVIDIA B200", "570.124.06", "linux-64", {"cuda": "12.8"}, {}, 1, ["570.133.20"]),
    # Windows: no B200 number is named, so R565 is told the branch (570.65, CUDA 12.8's Windows
    # driver, is not known to drive a B200: it is not named)
    ("NVIDIA B200", "566.03", "win-64", {}, {}, 1, ["R565", "an R570 or newer Windows driver"]),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "552.22", "win-64", {}, {}, 1, ["R550", "R570"]),
    (
        "NVIDIA B300",
        "570.124.06",
        "linux-64",
        {},
        {},
        1,
        ["R570", "too old", "580.82.07 or later on Linux"],
    ),
    ("NVIDIA GB300", "570.148.08", "linux-aarch64", {}, {}, 1, ["580.82.07"]),
    ("NVIDIA GB10", "570.133.20", "linux-aarch64", {}, {}, 1, ["compute capability 12.1", "580.94.13"]),
    # -- first drivers per product (issue 47; open-gpu-kernel-modules README per release tag) ----------
    # B300 and GB10 were planned on R575 (CUDA 12.9's branch); no R575 driver lists them
    ("NVIDIA B300", "575.51.03", "linux-64", {}, {}, 1, ["R575", "too old", "580.82.07 or later on Linux"]),
    ("NVIDIA B300", "575.57.08", "linux-64", {"cuda": "12.9"}, {}, 1, ["580.82.07"]),
    (
        "NVIDIA GB10",
        "575.57.08",
        "linux-aarch64",
        {},
        {},
        1,
        ["580.94.13 or later on Linux", "R590 from 590.48.01"],
    ),
    ("NVIDIA GB10", "580.82.07", "linux-aarch64", {}, {}, 1, ["580.94.13"]),
    ("NVIDIA GB10", "590.44.01", "linux-aarch64", {}, {}, 1, ["R590", "590.48.01"]),
    # the Server Edition is in no R570 release, while the Workstation Edition (same GB202) is
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "570.195.03",
        "linux-64",
        {},
        {},
        1,
        ["R570", "575.57.08 or later on Linux"],
    ),
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "572.61",
        "win-64",
        {},
        {},
        1,
        ["R575 or newer Windows"],
    ),
    # upgrade advice never names a driver that does not drive the product (570.26 / 570.65: CUDA 12.8's)
    (
        "NVIDIA GeForce RTX 5090 Laptop GPU",
        "560.35.03",
        "linux-64",
        {},
        {},
        1,
        ["570.123.07 or later on Linux"],
    ),
    ("NVIDIA GeForce RTX 5090 Laptop GPU", "570.86.16", "linux-64", {}, {}, 1, ["too old", "570.123.07"]),
    (
        "NVIDIA RTX PRO 5000 Blackwell",
        "570.124.06",
        "linux-64",
        {},
        {},
        1,
        ["570.153.02", "R575 from 575.57.08"],
    ),
    ("NVIDIA RTX PRO 5000 Blackwell", "575.51.03", "linux-64", {}, {}, 1, ["R575", "575.57.08"]),
    (
        "NVIDIA GeForce RTX 5060 Laptop GPU",
        "570.153.02",
        "linux-64",
        {},
        {},
        1,
        ["570.158.01 or later on Linux"],
    ),
    (
        "NVIDIA RTX PRO 4000 Blackwell SFF Edition",
        "575.64.05",
        "linux-64",
        {},
        {},
        1,
        ["cannot drive", "no R575"],
    ),
    # a driver known only by the CUDA version it reports: 12.8 is an R570 driver
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        None,
        "linux-64",
        {},
        {"CONDA_OVERRIDE_CUDA": "12.8"},
        1,
        ["reports CUDA 12.8: an R570 driver", "575.57.08 or later on Linux"],
    ),
    # a compute capability alone: every 10.3 product starts at 580.82.07
    ("10.3", "575.57.08", "linux-64", {}, {}, 1, ["580.82.07"]),
    # -- Arm-only GPUs on another platform: one line naming the platform (exit 1, as for a Jetson) ------
    (
        "NVIDIA GB10",
        "580.95.05",
        "linux-64",
        {},
        {},
        1,
        ["only in linux-aarch64", "--platform linux-aarch64"],
    ),
    ("NVIDIA DGX Spark", None, "win-64", {}, {}, 1, ["--platform linux-aarch64"]),
    ("NVIDIA GH200 480GB", "580.95.05", "linux-64", {}, {}, 1, ["--platform linux-aarch64"]),
    ("NVIDIA GB200", "580.95.05", "linux-64", {}, {}, 1, ["--platform linux-aarch64"]),
    ("NVIDIA GB300", None, "linux-64", {}, {}, 1, ["--platform linux-aarch64"]),
    ("NVIDIA VR200", "610.43.02", "linux-64", {}, {}, 1, ["R610", "CUDA 13.4", "R615"]),
    # the driver known only by the CUDA version it reports
    (
        "NVIDIA GeForce RTX 5090",
        None,
        "linux-64",
        {},
        {"CONDA_OVERRIDE_CUDA": "12.6"},
        1,
        ["CUDA 12.6", "R570"],
    ),
    # -- Jetson ----------------------------------------------------------------------------------
    (
        "Jetson AGX Xavier",
        "540.4.0",
        "linux-aarch64",
        {},
        {},
        1,
        ["no CUDA 12 or 13 stack", "JetPack 5", "--gpu none"],
    ),
    ("Jetson Xavier NX", None, "linux-aarch64", {}, {}, 1, ["no CUDA 12 or 13 stack"]),
    ("Jetson TX2", None, "linux-aarch64", {}, {}, 1, ["no CUDA 12 or 13 stack", "JetPack 4.6"]),
    ("Jetson Nano", None, "linux-aarch64", {}, {}, 1, ["no CUDA 12 or 13 stack"]),
    (
        "Jetson AGX Orin",
        "550.54.14",
        "linux-aarch64",
        {},
        {},
        1,
        ["not a Jetson Orin driver", "540.x", "580 or newer"],
    ),
    # older than JetPack 6: the JetPack to upgrade to is one pointops runs on (7.2), not JetPack 6
    (
        "Jetson AGX Orin",
        None,
        "linux-aarch64",
        {},
        {"CONDA_OVERRIDE_CUDA": "11.4"},
        1,
        ["CUDA <= 11.4", "only on JetPack 7.2", "Upgrade JetPack"],
    ),
    ("Jetson T5000", "575.57.08", "linux-aarch64", {}, {}, 1, ["not a Jetson Thor driver", "580 or newer"]),
    # --cuda on JetPack 6: no CUDA version plans there, so the fix is JetPack 7.2 (or a CPU env
    # without --cuda), never another --cuda
    (
        "Jetson AGX Orin",
        "540.4.0",
        "linux-aarch64",
        {"cuda": "13.0"},
        {},
        1,
        ["JetPack 7.2", "Upgrade JetPack", "--gpu none without --cuda"],
    ),
    (
        "Jetson AGX Orin",
        "540.4.0",
        "linux-aarch64",
        {"cuda": "12.9"},
        {},
        1,
        ["JetPack 7.2", "without --cuda"],
    ),
    # JetPack 7.2 and a CUDA conda-forge lacks: only 13.0 carries 8.7 (sbsa 12.9 has sm_86, which Orin cannot run)
    (
        "Jetson AGX Orin",
        "595.45.04",
        "linux-aarch64",
        {"cuda": "12.6"},
        {},
        1,
        ["13.0 fits", "Pass --cuda 13.0"],
    ),
    # JetPack 7.2, pytorch 2.12: its CUDA 13 builds lack 8.7, and sm_86 SASS does not count on Tegra
    (
        "Jetson AGX Orin",
        "595.45.04",
        "linux-aarch64",
        {"torch": "2.12"},
        {},
        1,
        ["exactly 8.7", "--gpu none"],
    ),
    # JetPack 6 (tegra CUDA stack): conda-forge has tegra pytorch builds, pointops publishes none, so
    # the plan refuses and names the JetPack that works: as nvidia-smi prints it, by the CUDA
    # version its driver reports, with flags
    (
        "Orin (nvgpu)",
        "540.4.0",
        "linux-aarch64",
        {},
        {},
        1,
        ["no build for the tegra CUDA stack of Jetson Orin on JetPack 6", "JetPack 7.2"],
    ),
    (
        "Jetson Orin Nano",
        "540.4.0",
        "linux-aarch64",
        {"python": "3.10"},
        {},
        1,
        ["JetPack 7.2", "--gpu none"],
    ),
    ("Jetson Orin NX", None, "linux-aarch64", {}, {"CONDA_OVERRIDE_CUDA": "12.6"}, 1, ["JetPack 7.2"]),
    ("Jetson AGX Orin", "540.4.0", "linux-aarch64", {"torch": "2.10"}, {}, 1, ["no build for the tegra"]),
    ("Orin (nvgpu)", "540.4.0", "linux-64", {}, {}, 1, ["is a Jetson", "--platform linux-aarch64"]),
    ("Jetson AGX Thor", "580.00", "win-64", {}, {}, 1, ["is a Jetson", "--platform linux-aarch64"]),
    # -- names: "Tesla K40m" is a K40 (Kepler), not an unknown GPU ------------------------------
    ("Tesla K40m", "470.82.01", "linux-64", {}, {}, 1, ["Kepler", "--gpu none"]),
    ("Tesla K20Xm", "535.54.03", "linux-64", {}, {}, 1, ["no longer supports", "R470"]),
    # -- compute capabilities no GPU has, and a name with the wrong one (exit 2: bad flag) --------
    ("13.5", "580.65.06", "linux-64", {}, {}, 2, ["no NVIDIA GPU has compute capability 13.5", "12.1"]),
    ("99.9", "580.65.06", "linux-64", {}, {}, 2, ["no NVIDIA GPU has compute capability 99.9"]),
    ("sm_135", "580.65.06", "linux-64", {}, {}, 2, ["compute capability 13.5"]),
    ("Lab Prototype:9.9", "580.65.06", "linux-64", {}, {}, 2, ["compute capability 9.9"]),
    (
        "RTX 4090:8.6",
        "550.54.14",
        "linux-64",
        {},
        {},
        2,
        ["GeForce RTX 4090 has compute capability 8.9, not 8.6", "--gpu 'RTX 4090' alone"],
    ),
    ("Jetson AGX Orin:8.6", "540.4.0", "linux-aarch64", {}, {}, 2, ["8.7, not 8.6"]),
]


@pytest.mark.parametrize(
    "gpu,driver,platform,flags,env,exit_code,words",
    REFUSALS,
    ids=[f"{p[0]}-{p[1]}-{p[2]}-{'-'.join(p[3]) or '-'.join(p[4])}" for p in REFUSALS],
)
def test_hardware_refusals(monkeypatch, gpu, driver, platform, flags, env, exit_code, words):
    with pytest.raises((PlanError, TargetError)) as info:
        plan_for(monkeypatch, gpu, driver, platform, flags, env)
    message = str(info.value)
    assert info.value.exit_code == exit_code, message
    for word in words:
        assert word in message, message
    assert message.count(". ") <= 2  # one cause, one fix


def test_refusals_exit_through_the_cli_with_one_line(capsys):
    code = cli.main(
        ["make-env", "--offline", "--gpu", "NVIDIA B200", "--driver", "565.57.01", "--platform", "linux-64"]
    )
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "R570" in err
    code = cli.main(["make-env", "--offline", "--gpu", "99.9", "--platform", "linux-64"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "99.9" in err and len(err.strip().splitlines()) == 1


def test_a_name_with_its_own_compute_capability_is_fine(monkeypatch):
    plan = plan_for(monkeypatch, "NVIDIA A100-SXM4-80GB:8.0", "550.54.14", "linux-64")
    assert plan.target.compute_capability == "8.0" and plan.variant == "cuda129"


def test_jetson_without_driver_assumes_the_newest_stack_and_says_so(monkeypatch):
    plan = plan_for(monkeypatch, "Jetson AGX Orin", None, "linux-aarch64")
    assert plan.arm_variant == "sbsa" and plan.pytorch_min_build_number == 202
    assert any("JetPack 7.2" in reason and "--driver" in reason for reason in plan.reasons)


def test_cuda13_env_header_says_glibc_228(capsys):
    code = cli.main(
        ["make-env", "--offline", "--gpu", "H100", "--driver", "580.65.06", "--platform", "linux-64"]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and "cuda-version=13.0" in out
    assert any(line.startswith("#") and "glibc >= 2.28" in line for line in out.splitlines())


def test_detected_jetpack6_orin(monkeypatch):
    """--gpu auto on a JetPack 6 Orin: what nvidia-smi reports is used as is (540 is no desktop branch)."""
    from solver.detect import Detection, GpuInfo

    def detector():
        return Detection(
            platform="linux-aarch64",
            glibc="2.35",
            driver_version="540.4.0",
            driver_cuda="12.6",
            gpus=[GpuInfo(0, "Orin (nvgpu)", "8.7")],
            source="nvidia-smi",
        )

    kb = load()
    target = build_target(kb, gpu="auto", detector=detector)
    assert (target.jetson_stack, target.driver_cuda, target.glibc) == ("jetpack6", "12.6", "2.35")
    with pytest.raises(PlanError, match="JetPack 7.2"):  # no pointops build for the tegra stack
        make_plan(kb, target)


def test_future_gpu_the_driver_reports_runs_through_ptx(monkeypatch):
    """A compute capability newer than the tables is refused when typed, but one the driver reports
    exists: it is planned through PTX, with full driver compatibility only."""
    from solver.detect import Detection, GpuInfo

    def detector(cuda):
        return lambda: Detection(
            platform="linux-64",
            glibc="2.35",
            driver_version=None,
            driver_cuda=cuda,
            gpus=[GpuInfo(0, "NVIDIA Future GPU", "13.0")],
            source="nvml",
        )

    kb = load()
    plan = make_plan(kb, build_target(kb, gpu="auto", detector=detector("12.9")))
    assert plan.variant == "cuda129" and plan.coverage == {"pytorch": "ptx", "pointops": "ptx"}
    assert any("only PTX" in warning for warning in plan.warnings)
    with pytest.raises(PlanError, match="cannot JIT"):
        make_plan(kb, build_target(kb, gpu="auto", detector=detector("12.6")))


# -- a GPU's own minimum driver (HGX B200: 570.133.20, NVIDIA/cloud-native-docs#184) ---------------


def test_b200_refusal_names_its_own_minimum_not_the_branch_floor(monkeypatch):
    with pytest.raises(PlanError) as info:
        plan_for(monkeypatch, "NVIDIA B200", "550.54.15", "linux-64")
    assert "570.133.20" in str(info.value) and "570.26" not in str(info.value)


def test_b200_minimum_is_checked_on_a_detected_machine(monkeypatch):
    from solver.detect import Detection, GpuInfo

    def detector(driver):
        return lambda: Detection(
            platform="linux-64",
            glibc="2.35",
            driver_version=driver,
            driver_cuda="12.8",
            gpus=[GpuInfo(i, "NVIDIA B200", "10.0") for i in range(8)],
            source="nvml",
        )

    kb = load()
    with pytest.raises(PlanError, match="570.133.20"):
        make_plan(kb, build_target(kb, gpu="auto", detector=detector("570.124.06")))
    assert make_plan(kb, build_target(kb, gpu="auto", detector=detector("570.133.20"))).variant == "cuda129"


def test_b200_on_windows_warns_that_only_the_branch_was_checked(monkeypatch):
    plan = plan_for(monkeypatch, "NVIDIA B200", "572.61", "win-64")
    assert any("570.133.20 or later on Linux" in w and "R570 branch" in w for w in plan.warnings), (
        plan.warnings
    )
    linux = plan_for(monkeypatch, "NVIDIA B200", "570.133.20", "linux-64")
    assert not any("570.133.20" in w for w in linux.warnings)


@pytest.mark.parametrize("reported,warned", [("12.8", True), ("12.9", False), ("13.0", False)])
def test_b200_driver_known_only_by_its_cuda(monkeypatch, reported, warned):
    """CONDA_OVERRIDE_CUDA=12.8 is an R570 driver of unknown build: it may be older than 570.133.20.
    12.9 and newer are R575 and newer, all above it."""
    plan = plan_for(monkeypatch, "NVIDIA B200", None, "linux-64", env={"CONDA_OVERRIDE_CUDA": reported})
    assert any("570.133.20" in w and "unknown" in w for w in plan.warnings) is warned, plan.warnings


# -- refusals whose fix is another flag: following the fix plans ----------------------------------


def test_jetpack6_with_cuda_the_fixes_named_work(monkeypatch):
    """JetPack 6 with --cuda 13.0 used to say "pass --cuda 12.9", which was refused too."""
    with pytest.raises(PlanError) as info:
        plan_for(monkeypatch, "Jetson AGX Orin", "540.4.0", "linux-aarch64", {"cuda": "13.0"})
    message = str(info.value)
    assert "--cuda 12.9" not in message and "one of those to --cuda" not in message
    # Upgrade JetPack: on JetPack 7.2 (CUDA 13.2) the same --cuda plans
    plan = plan_for(
        monkeypatch,
        "Jetson AGX Orin",
        None,
        "linux-aarch64",
        {"cuda": "13.0"},
        {"CONDA_OVERRIDE_CUDA": "13.2"},
    )
    assert (plan.variant, plan.arm_variant, plan.pytorch_min_build_number) == ("cuda130", "sbsa", 202)
    # or --gpu none without --cuda
    assert plan_for(monkeypatch, "none", None, "linux-aarch64").variant == "cpu"


@pytest.mark.parametrize(
    "gpu,driver,platform,cuda",
    [
        ("NVIDIA GeForce RTX 4090", "550.54.14", "linux-64", "12.6"),
        ("NVIDIA GeForce RTX 4090", "550.54.14", "win-64", "12.6"),
        ("NVIDIA GeForce GTX 1080", "580.65.06", "linux-64", "12.6"),  # Pascal: CUDA 13 builds lack 6.1
        ("Jetson AGX Orin", "595.45.04", "linux-aarch64", "12.6"),  # Orin: sbsa 12.9 lacks 8.7
        ("NVIDIA H100", "580.65.06", "linux-64", "12.4"),
    ],
)
def test_a_cuda_the_channel_lacks_names_versions_that_plan(monkeypatch, gpu, driver, platform, cuda):
    import re

    with pytest.raises(PlanError) as info:
        plan_for(monkeypatch, gpu, driver, platform, {"cuda": cuda})
    message = str(info.value)
    named = re.search(r"Pass --cuda ([\d.]+)", message)
    versions = [named.group(1)] if named else re.search(r"it has ([\d., ]+)\)", message).group(1).split(", ")
    for version in versions:
        assert plan_for(monkeypatch, gpu, driver, platform, {"cuda": version}).cuda_version == version, (
            message
        )


# -- what is assumed when a Jetson's driver picks its stack --------------------------------------


def test_orin_driver_580_or_newer_is_taken_as_jetpack72_and_the_plan_says_so(monkeypatch):
    """No source gives JetPack 7.2's driver number on Orin; Thor's JetPack 7 prints 580.00 / 13.0."""
    plan = plan_for(monkeypatch, "Jetson AGX Orin", "595.45.04", "linux-aarch64")
    assert any("JetPack 7.2 (L4T r39.2) or newer" in r for r in plan.reasons)
    assumed = [r for r in plan.reasons if r.startswith("assumed:")]
    assert len(assumed) == 1 and "580 or newer" in assumed[0] and "580.00" in assumed[0]
    thor = plan_for(monkeypatch, "NVIDIA Thor", "580.00", "linux-aarch64")
    assert not any(r.startswith("assumed:") for r in thor.reasons)


@pytest.mark.parametrize(
    "gpu,reported,warned",
    [
        ("NVIDIA RTX PRO 5000 Blackwell", "12.8", True),  # R570: from 570.153.02
        ("NVIDIA RTX PRO 5000 Blackwell", "12.9", True),  # R575: from 575.57.08, not 575.51.03
        ("NVIDIA RTX PRO 5000 Blackwell", "13.0", False),  # R580: its first build lists it
        ("NVIDIA GB10", "13.1", True),  # R590: from 590.48.01, not 590.44.01
    ],
)
def test_a_product_driver_known_only_by_its_cuda(monkeypatch, gpu, reported, warned):
    platform = "linux-aarch64" if "GB10" in gpu else "linux-64"
    plan = plan_for(monkeypatch, gpu, None, platform, env={"CONDA_OVERRIDE_CUDA": reported})
    assert any("version is unknown" in w and "nvidia-smi" in w for w in plan.warnings) is warned, (
        plan.warnings
    )
