"""verify() catches solutions that break the planning rules, whatever produced them.

Records here are minimal stand-ins with the attributes verify reads (name, version, build,
depends, constrains); the real RepoDataRecord path is covered by the end-to-end solve tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from solver.knowledge import load
from solver.plan import make_plan
from solver.target import build_target
from solver.verify import verify


def record(name, version, build, depends=(), constrains=()):
    return SimpleNamespace(name=SimpleNamespace(normalized=name), version=version, build=build,
                           depends=list(depends), constrains=list(constrains))


@pytest.fixture
def plan(monkeypatch):
    for name in ("CONDA_OVERRIDE_CUDA", "CONDA_OVERRIDE_CUDA_ARCH", "CONDA_OVERRIDE_GLIBC"):
        monkeypatch.delenv(name, raising=False)
    kb = load()
    return make_plan(kb, build_target(kb, gpu="RTX 3090", driver="550.54.14", platform="linux-64"), python="3.12")


def good_solution():
    return [record("python", "3.12.11", "h9e4cc4f_100_cp312"),
            record("pytorch", "2.13.0", "cuda129_mkl_py312_habc_302", depends=["__cuda"]),
            record("libtorch", "2.13.0", "cuda129_mkl_habc_302"),
            record("cuda-version", "12.9", "h4f385c5_3", constrains=["__cuda >=12"]),
            record("pointops", "0.1.0", "cuda129_habc_0", constrains=["__cuda_arch >=5.0"])]


def test_good_solution_passes(plan):
    assert verify(load(), plan, good_solution()) == []


@pytest.mark.parametrize("index,replacement,words", [
    (1, record("pytorch", "2.13.0", "cpu_mkl_py312_habc_102"), ["CPU build", "GPU was asked for"]),
    (2, record("libtorch", "2.13.0", "cuda130_mkl_habc_302"), ["not the planned cuda129"]),
    (3, record("cuda-version", "13.0", "h4f385c5_3"), ["cuda-version 13.0 was solved", "newer than the driver"]),
    (0, record("python", "3.13.5", "h_cp313"), ["python 3.13.5 was solved"]),
    (1, record("pytorch", "2.12.1", "cuda129_mkl_py312_habc_302"), ["pytorch 2.12.1 was solved"]),
    (4, record("pointops", "0.1.0", "cuda129_habc_0", constrains=["__cuda_arch >=9.0"]),
     ["needs compute capability >= 9.0", "8.6"]),
])
def test_broken_solutions_are_caught(plan, index, replacement, words):
    records = good_solution()
    records[index] = replacement
    problems = " | ".join(verify(load(), plan, records))
    for word in words:
        assert word in problems


def test_missing_packages(plan):
    records = [r for r in good_solution() if r.name.normalized not in ("pointops", "cuda-version")]
    assert verify(load(), plan, records) == ["the solution has no pointops"]
    records = [r for r in good_solution() if r.name.normalized != "cuda-version"]
    assert verify(load(), plan, records) == ["the solution has no cuda-version package"]
