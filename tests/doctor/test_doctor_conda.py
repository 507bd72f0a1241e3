"""conda environments: pip wheels shadowing conda packages, and the offline re-solve of conda-meta
against this machine's virtual packages (real py-rattler solves)."""

from __future__ import annotations

from doctor_helpers import by_check, conda_pytorch_env, facts_for_prefix, statuses, write_dist, write_record

from solver.doctor_checks.conda_env import (
    check_resolve,
    gather_conda,
    pip_shadowing_findings,
    virtual_package_conflicts,
)
from solver.doctor_checks.facts import CondaFacts

LINUX = ["__unix=0=0", "__linux=6.8=0", "__glibc=2.36=0"]


def test_clean_conda_environment_passes(tmp_path):
    conda = gather_conda(conda_pytorch_env(tmp_path))
    assert {r.name for r in conda.records} == {"python", "cuda-version", "pytorch"}
    assert [(d.name, d.installer) for d in conda.dists] == [("torch", "conda")]
    assert statuses(pip_shadowing_findings(conda), "conda.pip-shadowing") == ["pass"]


def test_pip_torch_over_conda_pytorch_fails_with_the_undo(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    # pip install torch over it: pip removes conda's dist-info and writes its own, plus CUDA wheels
    for meta in (prefix / "lib/python3.11/site-packages").glob("torch-*.dist-info"):
        for f in meta.iterdir():
            f.unlink()
        meta.rmdir()
    write_dist(prefix, "torch", "2.6.0", "pip")
    write_dist(prefix, "nvidia-cudnn-cu12", "9.1.0.70", "pip")
    write_dist(prefix, "nvidia-cublas-cu12", "12.4.5.8", "pip")
    findings = pip_shadowing_findings(gather_conda(prefix))
    [finding] = by_check(findings, "conda.pip-shadowing")
    assert finding.status == "fail"
    assert "torch 2.6.0 from pip has replaced conda's pytorch 2.5.1" in finding.summary
    assert finding.fix == (
        "pip uninstall -y torch nvidia-cublas-cu12 nvidia-cudnn-cu12 && "
        "conda install --force-reinstall pytorch"
    )


def test_nvidia_wheels_next_to_conda_cuda_libraries(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    write_record(prefix, "libcublas", "12.8.4.1", "h0_1")
    write_dist(prefix, "nvidia-cublas-cu12", "12.4.5.8", "pip")
    [finding] = by_check(pip_shadowing_findings(gather_conda(prefix)), "conda.pip-shadowing")
    assert finding.status == "fail" and "libcublas" in finding.evidence
    assert finding.fix == "pip uninstall -y nvidia-cublas-cu12"


def test_pip_upgrade_of_an_ordinary_conda_package_only_warns(tmp_path):
    write_record(tmp_path, "setuptools", "75.1.0", "pyhd8ed1ab_0")
    write_dist(tmp_path, "setuptools", "80.9.0", "pip")
    [finding] = by_check(pip_shadowing_findings(gather_conda(tmp_path)), "conda.pip-shadowing")
    assert finding.status == "warn" and "setuptools 80.9.0 from pip" in finding.summary


def test_pip_torch_in_a_conda_env_without_conda_pytorch_warns(tmp_path):
    write_record(tmp_path, "python", "3.11.9", "h0_0_cpython")
    write_dist(tmp_path, "torch", "2.6.0", "pip")
    write_dist(tmp_path, "numpy", "2.1.0", "conda")
    findings = pip_shadowing_findings(gather_conda(tmp_path))
    assert statuses(findings, "conda.pip-torch") == ["warn"]
    assert by_check(findings, "conda.pip-torch")[0].fix.startswith("pip uninstall -y torch && conda install")
    assert statuses(findings, "conda.pip-shadowing") == []


def test_not_a_conda_environment(tmp_path):
    assert statuses(pip_shadowing_findings(CondaFacts()), "conda.pip-shadowing") == ["info"]
    assert statuses(check_resolve(facts_for_prefix(tmp_path, LINUX), None), "conda.resolve") == ["info"]
    without_rattler = facts_for_prefix(tmp_path, None)
    without_rattler.rattler_missing = "ModuleNotFoundError: No module named 'rattler'"
    [finding] = check_resolve(without_rattler, None)
    assert finding.status == "info" and "py-rattler is not installed" in finding.summary


def test_environment_that_fits_the_machine_resolves(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    findings = check_resolve(facts_for_prefix(prefix, LINUX + ["__cuda=12.8=0", "__cuda_arch=9.0=0"]), None)
    [finding] = by_check(findings, "conda.resolve")
    assert finding.status == "pass", finding
    assert "3 records" in finding.summary


def test_driver_too_old_for_the_environment(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    [finding] = by_check(
        check_resolve(facts_for_prefix(prefix, LINUX + ["__cuda=11.4=0"]), None), "conda.resolve"
    )
    assert finding.status == "fail"
    assert "cuda-version 12.8 (h0_3) needs __cuda >=12; this machine has __cuda 11.4" in finding.summary
    assert finding.fix.startswith("upgrade the NVIDIA driver >= 525.60.13 (CUDA 12.0)")


def test_cuda_environment_on_a_machine_without_a_driver(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    [finding] = by_check(check_resolve(facts_for_prefix(prefix, LINUX), None), "conda.resolve")
    assert finding.status == "fail" and "needs __cuda, which this machine does not have" in finding.summary
    assert "nvidia-smi" in finding.fix


def test_glibc_too_old(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    old = ["__unix=0=0", "__linux=3.10=0", "__glibc=2.12=0", "__cuda=12.8=0"]
    [finding] = by_check(check_resolve(facts_for_prefix(prefix, old), None), "conda.resolve")
    assert finding.status == "fail" and "__glibc" in finding.summary and "2.12" in finding.summary


def test_missing_dependency_is_named_with_the_install_command(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    next(
        (prefix / "conda-meta").glob("cuda-version-*.json")
    ).unlink()  # removed by hand, pytorch still needs it
    [finding] = by_check(
        check_resolve(facts_for_prefix(prefix, LINUX + ["__cuda=12.8=0"]), None), "conda.resolve"
    )
    assert finding.status == "fail" and "inconsistent" in finding.summary
    assert finding.fix == 'conda install "cuda-version >=12.6,<13"'


def test_unreadable_record_is_reported(tmp_path):
    prefix = conda_pytorch_env(tmp_path)
    (prefix / "conda-meta" / "broken-1.0-0.json").write_text("{not json")
    findings = check_resolve(facts_for_prefix(prefix, LINUX + ["__cuda=12.8=0"]), None)
    assert statuses(findings, "conda.resolve") == ["fail", "pass"]  # the bad record; the rest still solve
    assert "broken-1.0-0.json" in findings[0].evidence


def test_without_rattler_the_resolve_is_skipped_and_says_so(tmp_path):
    facts = facts_for_prefix(conda_pytorch_env(tmp_path), None)
    facts.rattler_missing = "ModuleNotFoundError: No module named 'rattler'"
    [finding] = by_check(check_resolve(facts, None), "conda.resolve")
    assert finding.status == "info" and "py-rattler is not installed" in finding.summary
    assert finding.fix.startswith("pip install 'py-rattler")


def test_virtual_conflicts_ignore_constraints_on_absent_packages(tmp_path):
    conda = gather_conda(conda_pytorch_env(tmp_path, pytorch_build="cpu_mkl_py311_h0_100"))
    # cuda-version constrains __cuda, which a CPU-only machine does not have: that is allowed
    assert virtual_package_conflicts(conda.records, LINUX) == []
