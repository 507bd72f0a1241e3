"""GPU and driver against the torch build, cuda-version and the archs of torch and pointops."""

from __future__ import annotations

import pytest
from doctor_helpers import (
    by_check,
    conda_pytorch_env,
    driver,
    facts_for_prefix,
    h200_driver,
    h200_torch,
    statuses,
)

from solver.doctor_checks.dists import DistOrigin
from solver.doctor_checks.facts import Facts, PointopsFacts, TorchFacts
from solver.doctor_checks.gpu import arch_list_from_names, check_gpu, coverage, pointops_archs
from solver.doctor_checks.pointops_owners import PointopsInstall
from solver.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def test_h200_machine_with_its_own_torch_is_healthy(kb):
    facts = Facts(platform="linux-64", driver=h200_driver(), torch=h200_torch())
    assert facts.driver.version == "580.159.04" and facts.driver.cuda == "13.0"
    findings = check_gpu(facts, kb)
    assert statuses(findings, "gpu.driver") == ["pass"]
    assert statuses(findings, "gpu.torch-build") == ["pass"]
    archs = by_check(findings, "gpu.torch-archs")
    assert (
        [f.status for f in archs] == ["pass"] and "SASS" in archs[0].summary and "sm_90" in archs[0].evidence
    )
    assert statuses(findings, "pointops.build") == ["info"]  # not installed there
    assert not [f for f in findings if f.status == "fail"]


def test_cpu_torch_on_a_gpu_machine_fails_with_a_pip_fix(kb):
    torch = TorchFacts(importable=True, version="2.11.0+cpu", cuda=None, cuda_available=False)
    findings = check_gpu(Facts(platform="linux-64", driver=h200_driver(), torch=torch), kb)
    [finding] = by_check(findings, "gpu.torch-build")
    assert finding.status == "fail" and "CPU build" in finding.summary
    assert "NVIDIA H200" in finding.evidence and "580.159.04" in finding.evidence
    assert "download.pytorch.org/whl/cu130" in finding.fix


def test_cpu_pytorch_from_conda_gets_a_conda_fix(tmp_path, kb):
    prefix = conda_pytorch_env(tmp_path, pytorch_build="cpu_mkl_py311_h0_100")
    facts = facts_for_prefix(
        prefix,
        driver=h200_driver(),
        torch=TorchFacts(importable=True, version="2.5.1", cuda=None, cuda_available=False),
    )
    [finding] = by_check(check_gpu(facts, kb), "gpu.torch-build")
    assert finding.status == "fail"
    # what make-env plans for an H200 on driver 580.159.04
    assert finding.fix.startswith('conda install "pytorch=2.13.*=cuda130*" "cuda-version=13.0"')


def test_torch_for_cuda_13_on_a_cuda_12_4_driver_is_insufficient(kb):
    facts = Facts(
        platform="linux-64",
        driver=driver("550.54.14", "12.4", ("NVIDIA A100-SXM4-80GB", "8.0")),
        torch=h200_torch(),
    )
    [finding] = by_check(check_gpu(facts, kb), "gpu.torch-build")
    assert finding.status == "fail" and "driver version is insufficient" in finding.summary
    assert ">= 580.65.06" in finding.fix  # the 13.0 GA driver, from the knowledge tables
    # cu126 wheels (torch >= 2.10, as pointops needs) carry SASS for 8.0: the 12.4 driver runs them
    # through minor-version compatibility; cu124 wheels exist only for torch <= 2.6
    assert "--index-url https://download.pytorch.org/whl/cu126" in finding.fix
    assert "minor-version compatibility" in finding.fix and "cu124" not in finding.fix


def test_newer_minor_runs_only_through_minor_version_compatibility(kb):
    torch = TorchFacts(
        importable=True, version="2.8.0+cu129", cuda="12.9", arch_list=["sm_80", "sm_90"], cuda_available=True
    )
    facts = Facts(
        platform="linux-64", driver=driver("550.54.14", "12.4", ("NVIDIA H100 80GB HBM3", "9.0")), torch=torch
    )
    [finding] = by_check(check_gpu(facts, kb), "gpu.torch-build")
    assert finding.status == "warn" and "minor-version compatibility" in finding.summary


def test_cuda_version_package_against_the_driver(tmp_path, kb):
    r550 = driver("550.54.14", "12.4", ("NVIDIA A100-SXM4-80GB", "8.0"))
    for cuda_version, expected in (("12.4", "pass"), ("12.8", "warn"), ("13.0", "fail")):
        prefix = conda_pytorch_env(tmp_path / cuda_version, cuda_version=cuda_version)
        [finding] = by_check(check_gpu(facts_for_prefix(prefix, driver=r550), kb), "gpu.cuda-version")
        assert finding.status == expected, (cuda_version, finding)
    assert "cuda-version<=12.4" in finding.fix and ">= 580.65.06" in finding.fix


def test_no_kernel_image_for_a_gpu_older_than_the_build(kb):
    torch = TorchFacts(
        importable=True,
        version="2.13.0",
        cuda="13.0",
        cuda_available=True,
        arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
    )
    facts = Facts(
        platform="linux-64",
        driver=driver("580.82.07", "13.0", ("NVIDIA GeForce GTX 1080", "6.1")),
        torch=torch,
    )
    [finding] = by_check(check_gpu(facts, kb), "gpu.torch-archs")
    assert finding.status == "fail" and "no kernel image is available" in finding.summary
    assert "sm_61" in finding.evidence
    # a pip torch (no conda-meta): the newest wheel index with SASS for 6.1 that a CUDA 13.0 driver runs;
    # the CUDA 13 wheels have no Pascal code
    assert finding.fix.startswith(
        'pip install --force-reinstall "torch==2.14.*" --index-url https://download.pytorch.org/whl/cu126'
    )


def test_ptx_only_gpu_warns_and_fails_when_the_driver_is_older_than_the_ptx(kb):
    cu126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]
    rtx5090 = ("NVIDIA GeForce RTX 5090", "12.0")
    torch = TorchFacts(
        importable=True, version="2.6.0+cu126", cuda="12.6", cuda_available=True, arch_list=cu126
    )
    ok_driver = Facts(platform="linux-64", driver=driver("575.51.03", "12.9", rtx5090), torch=torch)
    [finding] = by_check(check_gpu(ok_driver, kb), "gpu.torch-archs")
    assert finding.status == "warn" and "only PTX" in finding.summary
    old_driver = Facts(platform="linux-64", driver=driver("560.35.03", "12.5", rtx5090), torch=torch)
    [finding] = by_check(check_gpu(old_driver, kb), "gpu.torch-archs")
    assert finding.status == "fail" and "cannot JIT" in finding.summary


def test_cuda_visible_devices_hiding_the_gpu(kb):
    torch = h200_torch()
    torch.cuda_available, torch.arch_list, torch.cuda_visible_devices = False, [], ""
    findings = check_gpu(Facts(platform="linux-64", driver=h200_driver(), torch=torch), kb)
    [finding] = by_check(findings, "gpu.torch-build")
    assert finding.status == "fail" and "is_available() is False" in finding.summary
    assert finding.fix.startswith("unset CUDA_VISIBLE_DEVICES")


def test_driver_branch_that_dropped_the_gpu(kb):
    facts = Facts(platform="linux-64", driver=driver("590.44.01", "13.1", ("NVIDIA GeForce GTX 1080", "6.1")))
    [finding] = by_check(check_gpu(facts, kb), "gpu.driver")
    assert finding.status == "fail" and "R590" in finding.summary and "R580" in finding.fix


def test_torch_that_does_not_import(tmp_path, kb):
    prefix = conda_pytorch_env(tmp_path)
    torch = TorchFacts(
        importable=False, import_error="OSError: libcudnn.so.9: cannot open shared object file"
    )
    [finding] = by_check(
        check_gpu(facts_for_prefix(prefix, driver=h200_driver(), torch=torch), kb), "gpu.torch-build"
    )
    assert finding.status == "fail" and "libcudnn.so.9" in finding.evidence
    assert finding.fix == 'conda install --force-reinstall "pytorch=2.5.1"'  # the same pytorch, not another


def test_pointops_build_info_archs(kb):
    h200 = h200_driver()
    cpu_build = PointopsFacts(
        installed=True,
        build_info={
            "cuda": False,
            "cuda_version": None,
            "sass_archs": [],
            "ptx_arch": None,
            "torch_target_version": "2.10",
        },
    )
    findings = check_gpu(Facts(platform="linux-64", driver=h200, torch=h200_torch(), pointops=cpu_build), kb)
    assert statuses(findings, "pointops.build") == ["pass"]
    assert statuses(findings, "gpu.pointops-archs") == ["warn"]
    cuda_build = PointopsFacts(
        installed=True,
        build_info={
            "cuda": True,
            "cuda_version": "13.0",
            "ptx_arch": "12.0",
            "sass_archs": ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"],
        },
    )
    findings = check_gpu(Facts(platform="linux-64", driver=h200, torch=h200_torch(), pointops=cuda_build), kb)
    assert statuses(findings, "gpu.pointops-archs") == ["pass"]
    pascal = driver("580.82.07", "13.0", ("Tesla P100-PCIE-16GB", "6.0"))
    findings = check_gpu(
        Facts(platform="linux-64", driver=pascal, torch=h200_torch(), pointops=cuda_build), kb
    )
    [finding] = by_check(findings, "gpu.pointops-archs")
    assert finding.status == "fail" and "pointops" in finding.summary
    broken = PointopsFacts(installed=True, error="AttributeError: build_info", stage="build_info")
    facts = Facts(platform="linux-64", torch=h200_torch(), pointops=broken)
    assert statuses(check_gpu(facts, kb), "pointops.build") == ["fail"]


@pytest.mark.parametrize(
    ("cc", "names", "expected"),
    [
        ("9.0", ["sm_80", "sm_90"], "sass"),
        ("8.9", ["sm_80", "sm_86"], "sass"),  # same major, lower minor runs natively
        ("9.0", ["sm_80", "compute_80"], "ptx"),
        ("12.0", ["sm_90", "compute_90"], "ptx"),
        ("7.5", ["sm_80", "sm_90", "compute_90"], None),
        ("9.0", ["sm_90a"], "sass"),
        ("9.1", ["sm_90a"], None),  # arch-specific code runs only on exactly 9.0
        ("6.1", ["5.0", "6.0", "9.0+PTX"], "sass"),
    ],
)
def test_coverage_of_arch_lists(cc, names, expected):
    archs, exact = arch_list_from_names(names)
    assert coverage(cc, archs, exact) == expected


def test_pointops_arch_spellings():
    cuda, archs, exact = pointops_archs(
        {"cuda_version": "12.9", "sass_archs": "sm_75;sm_80;sm_90a", "ptx_arch": "sm_90"}
    )
    assert cuda == "12.9" and archs.sass == ("7.5", "8.0") and archs.ptx == "9.0" and exact == {"9.0"}


def test_the_installed_pointops_build_info_is_understood(kb):
    pointops = pytest.importorskip("pointops")
    info = pointops.build_info()
    facts = Facts(
        platform="linux-64",
        driver=h200_driver(),
        torch=h200_torch(),
        pointops=PointopsFacts(installed=True, build_info=info),
    )
    findings = check_gpu(facts, kb)
    [build] = by_check(findings, "pointops.build")
    assert build.status == "pass" and f"torch target {info['torch_target_version']}" in build.evidence
    archs = by_check(findings, "gpu.pointops-archs")
    if info["cuda"]:
        assert [f.status for f in archs] == ["pass" if "9.0" in info["sass_archs"] else "warn"]
    else:
        assert [f.status for f in archs] == ["warn"] and "CPU build" in archs[0].summary


def _ours(path: str, built_against: str = "2.13.0+cu130") -> PointopsInstall:
    origin = DistOrigin("pointops", "0.1.0", "pip", "index")
    return PointopsInstall(
        path, "the distribution pointops 0.1.0", "this project", ("pointops 0.1.0",), origin, built_against
    )


def test_missing_torch_is_the_failure_when_something_needs_it(kb):
    """Not pointops: its import fails only because torch is missing. The fix installs the torch that
    pointops was built against, from the index of its build."""
    missing = TorchFacts(importable=False, import_error="ModuleNotFoundError: No module named 'torch'")
    pointops = PointopsFacts(installed=True, stage="import", error=missing.import_error, path="/env/pointops")
    facts = Facts(
        platform="linux-64",
        torch=missing,
        pointops=pointops,
        pointops_installs=[_ours("/env/pointops")],
        torch_dependents=["pointops 0.1.0 requires torch>=2.10"],
    )
    findings = check_gpu(facts, kb)
    [torch] = by_check(findings, "gpu.torch-build")
    assert (
        torch.status == "fail"
        and torch.summary == "torch is not installed, but pointops 0.1.0 requires torch>=2.10"
    )
    assert torch.fix.startswith(
        'pip install "torch==2.13.0+cu130" --index-url https://download.pytorch.org/whl/cu130'
    )
    assert statuses(findings, "pointops.build") == ["info"]
    assert [f.status for f in findings if f.status == "fail"] == ["fail"]
    facts.pointops_installs = [_ours("/env/pointops", built_against="2.13.0")]  # a PyPI torch: no index
    assert by_check(check_gpu(facts, kb), "gpu.torch-build")[0].fix.startswith(
        'pip install "torch==2.13.0"  ('
    )
    nothing = Facts(platform="linux-64", torch=missing)
    assert statuses(check_gpu(nothing, kb), "gpu.torch-build") == ["info"]  # nothing here needs it


def test_missing_torch_in_a_conda_environment_is_installed_by_conda(tmp_path, kb):
    from solver.doctor_checks.facts import CondaFacts

    missing = TorchFacts(importable=False, import_error="ModuleNotFoundError: No module named 'torch'")
    facts = Facts(
        platform="linux-64",
        torch=missing,
        conda=CondaFacts(prefix=tmp_path),
        pointops_installs=[_ours(str(tmp_path / "pointops"), "2.13.0")],
        torch_dependents=["pointops at /env/pointops"],
    )
    [torch] = by_check(check_gpu(facts, kb), "gpu.torch-build")
    assert torch.fix.startswith('conda install "pytorch=2.13.0"')


def test_a_broken_pip_torch_is_reinstalled_at_its_version_without_deps(tmp_path, kb):
    from doctor_helpers import write_dist

    write_dist(tmp_path, "torch", "2.13.0+cu130", "pip")
    facts = facts_for_prefix(tmp_path, torch=TorchFacts(importable=False, import_error="OSError: libc10.so"))
    facts.conda.prefix = None
    [torch] = by_check(check_gpu(facts, kb), "gpu.torch-build")
    assert torch.fix == (
        'pip install --no-deps --force-reinstall --no-cache-dir "torch==2.13.0+cu130" '
        "--index-url https://download.pytorch.org/whl/cu130"
    )


def test_pointcept_library_gets_its_own_fix(kb):
    foreign = PointopsFacts(
        installed=True,
        stage="build_info",
        error="this pointops has no build_info(): it is not this project's package",
    )
    [build] = by_check(
        check_gpu(Facts(platform="linux-64", torch=h200_torch(), pointops=foreign), kb), "pointops.build"
    )
    assert build.status == "fail" and "Pointcept's library" in build.fix


def test_under_wsl2_the_driver_advice_is_in_windows_numbers(kb):
    """nvidia-smi inside WSL2 prints the Windows host's driver (e.g. 552.xx beside a Linux 550
    NVIDIA-SMI): the upgrade advice must name the Windows driver for CUDA 13, not the Linux one."""
    linux = Facts(
        platform="linux-64",
        driver=driver("552.22", "12.4", ("NVIDIA A100-SXM4-80GB", "8.0")),
        torch=h200_torch(),
    )
    wsl = Facts(
        platform="linux-64",
        driver=driver("552.22", "12.4", ("NVIDIA A100-SXM4-80GB", "8.0")),
        torch=h200_torch(),
    )
    wsl.driver.wsl = True
    [on_linux] = by_check(check_gpu(linux, kb), "gpu.torch-build")
    [on_wsl] = by_check(check_gpu(wsl, kb), "gpu.torch-build")
    windows_floor = kb.cuda_min_driver("13.0", "windows")
    assert ">= 580.65.06" in on_linux.fix
    assert f">= {windows_floor}" in on_wsl.fix and "580.65.06" not in on_wsl.fix
