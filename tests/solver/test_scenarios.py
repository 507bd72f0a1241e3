"""Scenario table: GPU x driver x platform -> the planned build, or the refusal and its reason.
Covers Kepler through Blackwell, drivers R470 to R580 (and newer), Linux and Windows."""

from __future__ import annotations

import json

import pytest

from solver import cli
from solver.knowledge import load
from solver.plan import PlanError, make_plan
from solver.target import TargetError, build_target

pytestmark = pytest.mark.usefixtures("no_overrides")


# (gpu, driver, platform, extra flags) -> (variant, cuda-version, driver compatibility, coverage)
PLANS = [
    # Maxwell: SASS 5.0 runs on 5.2; CUDA 12 builds only
    ("GeForce GTX 980", "580.65.06", "linux-64", {}, ("cuda129", "12.9", "full", "sass")),
    ("Quadro M4000", "552.22", "win-64", {}, ("cuda128", "12.8", "mvc", "sass")),
    # Pascal: CUDA 12 builds only (13.0 dropped sm_6x); SASS 6.0 runs on 6.1
    ("GeForce GTX 1080", "535.183.01", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    ("GeForce GTX 1080", "580.65.06", "linux-64", {}, ("cuda129", "12.9", "full", "sass")),
    ("Tesla P100", "550.54.14", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    # Volta
    ("Tesla V100-SXM2-16GB", "580.95.05", "linux-64", {}, ("cuda129", "12.9", "full", "sass")),
    # Turing
    ("Tesla T4", "525.60.13", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    ("GeForce RTX 2080 Ti", "580.65.06", "linux-64", {}, ("cuda130", "13.0", "full", "sass")),
    # Ampere
    ("NVIDIA A100-SXM4-80GB", "550.54.14", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    ("NVIDIA GeForce RTX 3090", "566.03", "win-64", {}, ("cuda128", "12.8", "mvc", "sass")),
    ("NVIDIA GeForce RTX 3090", "528.33", "win-64", {}, ("cuda128", "12.8", "mvc", "sass")),
    ("NVIDIA A10G", "470.256.02", "linux-64", {"expect_error": "525.60.13"}, None),
    # Ada (runs sm_86 SASS)
    ("NVIDIA GeForce RTX 4090", "575.57.08", "linux-64", {}, ("cuda129", "12.9", "full", "sass")),
    ("NVIDIA GeForce RTX 4090", "581.29", "win-64", {}, ("cuda130", "13.0", "full", "sass")),
    ("NVIDIA L4", "560.35.03", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    # Hopper
    ("NVIDIA H100 80GB HBM3", "580.65.06", "linux-64", {}, ("cuda130", "13.0", "full", "sass")),
    ("NVIDIA H200", "535.104.05", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    ("NVIDIA GH200 480GB", "580.95.05", "linux-aarch64", {}, ("cuda130", "13.0", "full", "sass")),
    # Blackwell
    ("NVIDIA GeForce RTX 5090", "570.124.06", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    ("NVIDIA GeForce RTX 5090", "572.61", "win-64", {}, ("cuda128", "12.8", "full", "sass")),
    ("NVIDIA B200", "580.95.05", "linux-64", {}, ("cuda130", "13.0", "full", "sass")),
    # B300's first driver is 580.82.07 (open-gpu-kernel-modules README per release; no R575 lists it)
    ("NVIDIA B300", "580.82.07", "linux-64", {}, ("cuda130", "13.0", "full", "sass")),
    ("NVIDIA B300", "575.57.08", "linux-64", {"expect_error": "580.82.07 or later on Linux"}, None),
    ("NVIDIA GB10", "580.95.05", "linux-aarch64", {}, ("cuda130", "13.0", "full", "sass")),
    # flags: a compute capability instead of a name, unknown names with their capability
    ("sm_120", "580.65.06", "linux-64", {}, ("cuda130", "13.0", "full", "sass")),
    ("8.6", "550.54.14", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    ("Lab Prototype X1:8.9", "550.54.14", "linux-64", {}, ("cuda129", "12.9", "mvc", "sass")),
    # pins
    ("NVIDIA H100 80GB HBM3", "580.65.06", "linux-64", {"cuda": "12.9"}, ("cuda129", "12.9", "full", "sass")),
    (
        "NVIDIA H100 80GB HBM3",
        "580.65.06",
        "linux-64",
        {"torch": "2.11"},
        ("cuda130", "13.0", "full", "sass"),
    ),
]


@pytest.mark.parametrize(
    "gpu,driver,platform,flags,expected", PLANS, ids=[f"{p[0]}-{p[1]}-{p[2]}-{'-'.join(p[3])}" for p in PLANS]
)
def test_plan_scenarios(gpu, driver, platform, flags, expected):
    kb = load()
    target = build_target(kb, gpu=gpu, driver=driver, platform=platform)
    if "expect_error" in flags:
        with pytest.raises(PlanError, match=flags["expect_error"]):
            make_plan(kb, target)
        return
    plan = make_plan(kb, target, torch=flags.get("torch"), cuda=flags.get("cuda"))
    variant, cuda, mode, coverage = expected
    assert (plan.variant, plan.cuda_version, plan.driver_mode) == (variant, cuda, mode)
    assert plan.coverage == {"pytorch": coverage, "pointops": coverage}
    assert f"pytorch={plan.pytorch_minor}.*={variant}*" in plan.specs()
    assert f"pointops=0.1.0={variant}*" in plan.specs()
    assert f"cuda-version={cuda}" in plan.specs()
    if coverage == "ptx":
        assert any("only PTX" in w for w in plan.warnings)
    if "torch" in flags:
        assert plan.pytorch_minor == flags["torch"]
    else:
        assert plan.pytorch_minor == "2.13"  # newest pytorch unless pinned


# (gpu, driver, platform, extra flags) -> words the refusal must contain
REFUSALS = [
    ("Tesla K80", "470.82.01", "linux-64", {}, ["Kepler", "CUDA <= 11.8", "--gpu none"]),
    ("Tesla K40", "535.54.03", "linux-64", {}, ["no longer supports", "R470", "Kepler"]),
    ("Quadro K6000", "474.44", "win-64", {}, ["Kepler", "--gpu none"]),
    ("GeForce GTX 1060", "591.44", "win-64", {}, ["no longer supports", "R580 is the last", "Pascal"]),
    ("NVIDIA GeForce RTX 4070", "472.12", "win-64", {}, ["CUDA <= 11.4", "driver >= 528.33 on Windows"]),
    (
        "GeForce GTX 1080 Ti",
        "470.82.01",
        "linux-64",
        {},
        [
            "driver 470.82.01 runs CUDA <= 11.4",
            "need CUDA 12",
            "driver >= 525.60.13 on Linux",
            "Upgrade the driver",
            "--gpu none",
        ],
    ),
    ("GeForce GTX 1080", "590.44.01", "linux-64", {}, ["no longer supports", "R580 is the last", "Pascal"]),
    ("Tesla V100", "595.45.04", "linux-64", {}, ["no longer supports", "Volta"]),
    ("Tesla T4", "470.82.01", "linux-64", {}, ["CUDA <= 11.4", "driver >= 525.60.13 on Linux"]),
    ("NVIDIA GeForce RTX 3090", "527.41", "win-64", {}, ["driver >= 528.33 on Windows"]),
    ("Jetson T5000", "575.57.08", "linux-aarch64", {}, ["not a Jetson Thor driver", "580 or newer"]),
    ("GeForce GTX 1080", "580.65.06", "linux-64", {"cuda": "13.0"}, ["--cuda 13.0", "Drop --cuda"]),
    ("NVIDIA H100", "580.65.06", "linux-64", {"cuda": "12.4"}, ["no CUDA 12.4 build", "12.9, 13.0"]),
    ("NVIDIA H100", "390.157", "linux-64", {}, ["older than every driver branch"]),
    ("NVIDIA H100", "580.65.06", "linux-64", {"torch": "2.9"}, ["pytorch >= 2.10"]),
    ("NVIDIA H100", "580.65.06", "linux-64", {"torch": "2.20"}, ["no pytorch 2.20"]),
    ("NVIDIA H100", "580.65.06", "linux-64", {"python": "3.9"}, ["--python 3.9", "3.10"]),
]


@pytest.mark.parametrize(
    "gpu,driver,platform,flags,words",
    REFUSALS,
    ids=[f"{p[0]}-{p[1]}-{p[2]}-{'-'.join(p[3])}" for p in REFUSALS],
)
def test_refusal_scenarios(gpu, driver, platform, flags, words):
    kb = load()
    target = build_target(kb, gpu=gpu, driver=driver, platform=platform)
    with pytest.raises(PlanError) as info:
        make_plan(kb, target, **flags)
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert message.count(". ") <= 2  # one or two sentences


def test_issue_example_message():
    kb = load()
    target = build_target(kb, gpu="Tesla T4", driver="470.82.01", platform="linux-64")
    with pytest.raises(PlanError) as info:
        make_plan(kb, target)
    assert str(info.value) == (
        "driver 470.82.01 runs CUDA <= 11.4; pointops' GPU builds for this GPU need CUDA 12, "
        "i.e. driver >= 525.60.13 on Linux. Upgrade the driver, or pass --gpu none for a CPU "
        "environment."
    )


def test_glibc_too_old_for_cuda13(monkeypatch):
    monkeypatch.setenv("CONDA_OVERRIDE_GLIBC", "2.17")
    kb = load()
    plan = make_plan(kb, build_target(kb, gpu="NVIDIA H100", driver="580.65.06", platform="linux-64"))
    assert plan.variant == "cuda129"
    assert any("glibc >= 2.28" in reason for reason in plan.reasons)


def test_no_driver_given_assumes_the_newest_for_the_gpu():
    kb = load()
    pascal = make_plan(kb, build_target(kb, gpu="GeForce GTX 1080", platform="linux-64"))
    assert pascal.target.driver_assumed and pascal.target.driver_cuda == "13.0"  # R580, its last branch
    assert pascal.variant == "cuda129"
    hopper = make_plan(kb, build_target(kb, gpu="H100", platform="linux-64"))
    assert hopper.variant == "cuda130"
    with pytest.raises(PlanError, match="Kepler"):
        make_plan(kb, build_target(kb, gpu="Tesla K80", platform="linux-64"))


def test_cpu_plans():
    kb = load()
    for platform in ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64"):
        plan = make_plan(kb, build_target(kb, gpu="none", platform=platform))
        assert plan.variant == "cpu" and plan.cuda_version is None
        assert plan.specs() == ["python=3.14", "pytorch=2.13.*=cpu*", "pointops=0.1.0=cpu*"]


def test_macos_with_a_gpu_is_refused():
    kb = load()
    with pytest.raises(TargetError) as info:
        build_target(kb, gpu="RTX 4090", platform="osx-arm64")
    assert info.value.exit_code == 1 and "macOS has no CUDA" in str(info.value)


def test_never_a_cpu_build_for_a_gpu_target():
    """Across every known GPU and driver branch, a plan for a GPU is always a CUDA build."""
    kb = load()
    one_per_capability = {gpu.compute_capability: gpu for gpu in kb.gpus}.values()
    for gpu in one_per_capability:
        for branch in kb.branches:
            for platform in ("linux-64", "win-64", "linux-aarch64"):
                try:
                    target = build_target(
                        kb,
                        gpu=f"{gpu.name}:{gpu.compute_capability}",
                        driver=f"{branch.branch}.99",
                        platform=platform,
                    )
                    plan = make_plan(kb, target)
                except TargetError:  # a Jetson, GB10, GH200 ... elsewhere than on Arm
                    arm_only = kb.jetson_module(gpu.compute_capability) or gpu.only_on
                    assert arm_only and platform != "linux-aarch64", (gpu.name, platform)
                    continue
                except PlanError:
                    continue
                assert plan.variant.startswith("cuda"), (gpu.name, branch.branch)
                assert all(not spec.endswith("=cpu*") for spec in plan.specs())
                mode = kb.driver_runs_cuda(
                    target.driver_cuda, plan.cuda_version, target.driver_version, target.driver_os
                )
                assert mode is not None
                if mode == "mvc":
                    assert set(plan.coverage.values()) == {"sass"}


# -- the CLI in-process (offline: no solve, no os._exit) -----------------------------------


def _cli(capsys, *args):
    code = cli.main(["make-env", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args,words",
    [
        (["--driver", "abc"], ["--driver 'abc'", "550.54.14"]),
        (["--driver", "55"], ["--driver '55'"]),
        (["--platform", "win-32"], ["--platform 'win-32'", "linux-64"]),
        (["--python", "3"], ["--python '3'", "X.Y"]),
        (["--torch", "two"], ["--torch 'two'"]),
        (["--cuda", "12"], ["--cuda '12'"]),
        (["--gpu", "Foo 9000"], ["unknown GPU 'Foo 9000'", "'Foo 9000:X.Y'", "compute_cap"]),
        (["--gpu", "Foo:abc"], ["after ':'"]),
        (["--gpu", "none", "--cuda", "12.9"], ["--cuda 12.9 needs a GPU target"]),
        (["--explicit", "x.txt"], ["drop --offline"]),
        (["--name", "a/b"], ["--name 'a/b'"]),
    ],
)
def test_malformed_flags_exit_2(capsys, args, words):
    code, out, err = _cli(capsys, "--offline", *args)
    assert code == 2 and out == ""
    for word in words:
        assert word in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unsatisfiable_exits_1_with_json(capsys):
    code, out, err = _cli(
        capsys, "--offline", "--gpu", "Tesla T4", "--driver", "470.82.01", "--platform", "linux-64", "--json"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["verified"] is False and doc["dependencies"] == []
    assert "525.60.13" in doc["errors"][0]
    assert doc["gpu"] == {"name": "NVIDIA T4", "compute_capability": "7.5"}


def test_offline_env_yml(capsys):
    code, out, err = _cli(
        capsys,
        "--offline",
        "--gpu",
        "RTX 4090",
        "--driver",
        "550.54.14",
        "--platform",
        "linux-64",
        "--name",
        "pc-4090",
        "--channel",
        "pointops",
        "--channel",
        "conda-forge",
    )
    assert code == 0
    assert out.startswith(
        "# Environment for linux-64, GeForce RTX 4090 (compute capability 8.9), driver 550.54.14"
    )
    assert "# NOT verified by a solve: --offline" in out
    import yaml

    env = yaml.safe_load(out)
    assert env == {
        "name": "pc-4090",
        "channels": ["pointops", "conda-forge"],
        "dependencies": [
            "python=3.14",
            "pytorch=2.13.*=cuda129*",
            "cuda-version=12.9",
            "pointops=0.1.0=cuda129*",
        ],
    }
    assert "minor-version compatibility" in err


def test_offline_json_fields(capsys):
    code, out, _ = _cli(
        capsys,
        "--offline",
        "--gpu",
        "H200",
        "--driver",
        "580.159.04",
        "--platform",
        "linux-64",
        "--python",
        "3.12",
        "--json",
    )
    doc = json.loads(out)
    assert code == 0
    assert doc["platform"] == "linux-64"
    assert doc["gpu"] == {"name": "NVIDIA H200", "compute_capability": "9.0"}
    assert doc["driver"]["version"] == "580.159.04" and doc["driver"]["cuda"] == "13.0"
    assert (doc["python"], doc["pytorch"], doc["pytorch_build"], doc["cuda_version"]) == (
        "3.12",
        "2.13",
        "cuda130*",
        "13.0",
    )
    assert doc["pointops"] == {"version": "0.1.0", "build": "cuda130*"}
    assert doc["dependencies"] == [
        "python=3.12",
        "pytorch=2.13.*=cuda130*",
        "cuda-version=13.0",
        "pointops=0.1.0=cuda130*",
    ]
    assert doc["verified"] is False and doc["errors"] == [] and isinstance(doc["warnings"], list)


def test_output_file_written_atomically(capsys, tmp_path):
    target = tmp_path / "env.yml"
    target.write_text("old content\n")
    code, out, err = _cli(capsys, "--offline", "--gpu", "none", "-o", str(target))
    assert code == 0 and out == ""
    assert target.read_text().startswith("# Environment for") and "pytorch=2.13.*=cpu*" in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.yml"]


def test_unwritable_output(capsys, tmp_path):
    code, out, err = _cli(capsys, "--offline", "--gpu", "none", "-o", str(tmp_path / "missing" / "env.yml"))
    assert code == 1 and "cannot write" in err and "Traceback" not in err


def test_env_override_without_gpu_gives_cpu(capsys, monkeypatch):
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    code, out, err = _cli(capsys, "--offline", "--gpu", "auto", "--platform", "linux-64")
    assert code == 0 and "pytorch=2.13.*=cpu*" in out
    code, out, err = _cli(capsys, "--offline", "--gpu", "auto", "--platform", "linux-64", "--json")
    doc = json.loads(out)
    assert doc["gpu"] == {"name": None, "compute_capability": None}
    assert doc["driver"] == {"version": None, "cuda": None, "assumed": False}
    assert doc["cuda_version"] is None and doc["pytorch_build"] == "cpu*"


def test_cuda_override_without_arch(capsys, monkeypatch, tmp_path):
    """CONDA_OVERRIDE_CUDA alone: a GPU of unknown capability. Full compatibility works (with a
    warning); minor-version compatibility is refused because SASS coverage cannot be known."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.9")
    code, out, err = _cli(capsys, "--offline", "--platform", "linux-64", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["pytorch_build"] == "cuda129*"
    assert doc["gpu"] == {"name": "unidentified GPU", "compute_capability": None}
    assert any("arch coverage was not checked" in w for w in doc["warnings"])
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.4")
    code, out, err = _cli(capsys, "--offline", "--platform", "linux-64")
    assert code == 1 and out == ""
    assert "the driver runs CUDA <= 12.4" in err and "CONDA_OVERRIDE_CUDA_ARCH" in err
