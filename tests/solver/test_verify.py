"""verify() catches solutions that break the planning rules, whatever produced them.

Records here are SolvedPackages, the plain data the solve's child process returns; the real solve
path is covered by the end-to-end solve tests."""

from __future__ import annotations

import pytest

from solver.knowledge import load
from solver.plan import make_plan
from solver.solve import SolvedPackage
from solver.target import build_target
from solver.verify import verify


def record(name, version, build, depends=(), constrains=(), build_number=0):
    return SolvedPackage(
        name=name,
        version=version,
        build=build,
        url=f"file:///c/{name}-{version}-{build}.conda",
        build_number=build_number,
        depends=tuple(depends),
        constrains=tuple(constrains),
    )


@pytest.fixture
def plan(monkeypatch):
    for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
        monkeypatch.delenv(name, raising=False)
    kb = load()
    return make_plan(
        kb, build_target(kb, gpu="RTX 3090", driver="550.54.14", platform="linux-64"), python="3.12"
    )


def good_solution():
    return [
        record("python", "3.12.11", "h9e4cc4f_100_cp312"),
        record("pytorch", "2.13.0", "cuda129_mkl_py312_habc_302", depends=["__cuda"]),
        record("libtorch", "2.13.0", "cuda129_mkl_habc_302"),
        record("cuda-version", "12.9", "h4f385c5_3", constrains=["__cuda >=12"]),
        record("pointops", "0.1.0", "cuda129_habc_0", constrains=["__cuda_arch >=5.0"]),
    ]


def test_good_solution_passes(plan):
    assert verify(load(), plan, good_solution()) == []


@pytest.mark.parametrize(
    "index,replacement,words",
    [
        (1, record("pytorch", "2.13.0", "cpu_mkl_py312_habc_102"), ["CPU build", "GPU was asked for"]),
        (2, record("libtorch", "2.13.0", "cuda130_mkl_habc_302"), ["not the planned cuda129"]),
        (
            3,
            record("cuda-version", "13.0", "h4f385c5_3"),
            ["cuda-version 13.0 was solved", "newer than the driver"],
        ),
        (0, record("python", "3.13.5", "h_cp313"), ["python 3.13.5 was solved"]),
        (1, record("pytorch", "2.12.1", "cuda129_mkl_py312_habc_302"), ["pytorch 2.12.1 was solved"]),
        (
            4,
            record("pointops", "0.1.0", "cuda129_habc_0", constrains=["__cuda_arch >=9.0"]),
            ["needs compute capability >= 9.0", "8.6"],
        ),
    ],
)
def test_broken_solutions_are_caught(plan, index, replacement, words):
    records = good_solution()
    records[index] = replacement
    problems = " | ".join(verify(load(), plan, records))
    for word in words:
        assert word in problems


def test_missing_packages(plan):
    records = [r for r in good_solution() if r.name not in ("pointops", "cuda-version")]
    assert verify(load(), plan, records) == ["the solution has no pointops"]
    records = [r for r in good_solution() if r.name != "cuda-version"]
    assert verify(load(), plan, records) == ["the solution has no cuda-version package"]


def aarch64_record(name, version, build, build_number=0, depends=(), constrains=()):
    return record(name, version, build, depends, constrains, build_number)


@pytest.fixture
def orin_plan(monkeypatch):
    """Jetson Orin on JetPack 7.2: sbsa CUDA 13.0, pytorch 2.13.0 from build number 202 (8.7 SASS)."""
    for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
        monkeypatch.delenv(name, raising=False)
    kb = load()
    return make_plan(
        kb,
        build_target(kb, gpu="Jetson AGX Orin", driver="595.45.04", platform="linux-aarch64"),
        python="3.12",
    )


def orin_solution(pytorch_number=202, arm="sbsa"):
    return [
        aarch64_record("python", "3.12.11", "h9e4cc4f_100_cp312"),
        aarch64_record(
            "pytorch",
            "2.13.0",
            f"cuda130_generic_py312_habc_{pytorch_number}",
            pytorch_number,
            depends=["__cuda", f"arm-variant * {arm}"],
        ),
        aarch64_record("cuda-version", "13.0", "h4f385c5_3", 3, constrains=["__cuda >=13"]),
        aarch64_record("arm-variant", "1.2.0", arm),
        aarch64_record("pointops", "0.1.0", "cuda130_habc_200", 200, constrains=["__cuda_arch >=7.5"]),
    ]


def test_orin_solution_passes(orin_plan):
    assert verify(load(), orin_plan, orin_solution()) == []


def test_orin_solution_with_an_old_pytorch_build_is_caught(orin_plan):
    problems = verify(load(), orin_plan, orin_solution(pytorch_number=201))
    assert problems == [
        "pytorch 2.13.0 cuda130_generic_py312_habc_201 has build number 201; only 202 and newer "
        "carry SASS for 8.7"
    ]


def test_wrong_or_missing_arm_variant_is_caught(orin_plan):
    assert verify(load(), orin_plan, orin_solution(arm="tegra")) == [
        "arm-variant tegra was solved, sbsa was planned"
    ]
    records = [r for r in orin_solution() if r.name != "arm-variant"]
    assert verify(load(), orin_plan, records) == [
        "the solution has no arm-variant package (arm-variant=sbsa was planned)"
    ]


def test_exact_torch_pin_is_checked_to_the_patch(monkeypatch):
    for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
        monkeypatch.delenv(name, raising=False)
    kb = load()
    target = build_target(kb, gpu="RTX 3090", driver="550.54.14", platform="linux-64")
    exact = make_plan(kb, target, python="3.12", torch="2.12.0")
    assert "pytorch=2.12.0=cuda129*" in exact.specs()
    records = good_solution()
    records[1] = record("pytorch", "2.12.1", "cuda129_mkl_py312_habc_302")
    assert any("pytorch 2.12.1 was solved, 2.12.0 was planned" in p for p in verify(kb, exact, records))
    records[1] = record("pytorch", "2.12.0", "cuda129_mkl_py312_habc_302")
    assert not [p for p in verify(kb, exact, records) if "pytorch" in p]
    minor = make_plan(kb, target, python="3.12", torch="2.12")
    assert "pytorch=2.12.*=cuda129*" in minor.specs() and minor.pytorch_version == "2.12.1"
