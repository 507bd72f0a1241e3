"""The PyTorch wheel-index table (solver/knowledge/pytorch_wheels.yaml) and the index chosen for a GPU
and driver: only indexes that exist, for releases pointops supports, that the driver runs and that
carry code for the GPU; none for a GPU make-env refuses."""

from __future__ import annotations

import pytest

from solver.errors import SolverError
from solver.knowledge import KnowledgeError, parse_version
from solver.plan import make_plan
from solver.pytorch_wheels import parse_wheels
from solver.target import build_target

PLATFORMS = ("linux-64", "win-64", "linux-aarch64")


def test_the_table_names_real_indexes(table):
    assert set(table.indexes) == {
        "cu117",
        "cu118",
        "cu121",
        "cu124",
        "cu126",
        "cu128",
        "cu129",
        "cu130",
        "cu132",
    }
    assert [i.tag for i in table.indexes_for("2.13")] == ["cu126", "cu130", "cu132"]
    assert [i.tag for i in table.indexes_for("2.11")] == ["cu126", "cu128", "cu130"]
    assert table.indexes["cu126"].url == "https://download.pytorch.org/whl/cu126"


@pytest.mark.parametrize(
    "raw,words",
    [
        (
            {"index_url": "u/{tag}", "indexes": {"cu126": {"cuda": "12.8"}}, "releases": {}},
            "does not match the tag",
        ),
        (
            {"index_url": "u/{tag}", "indexes": {"cu126": {"cuda": "12.6"}}, "releases": {"2.13": ["cu999"]}},
            "unknown index 'cu999'",
        ),
        (
            {
                "index_url": "u/{tag}",
                "indexes": {"cu126": {"cuda": "12.6", "archs": {"linux-64": {"sass": ["9.0", "8.0"]}}}},
                "releases": {},
            },
            "ascending",
        ),
        ({"indexes": {}}, "expected index_url"),
    ],
)
def test_malformed_tables_are_refused(raw, words):
    with pytest.raises(KnowledgeError, match=words):
        parse_wheels(raw)


def _drivers(kb):
    return [f"{branch.branch}.99" for branch in kb.branches]


def test_every_choice_is_an_index_that_exists_and_fits(kb, table):
    floor = parse_version(kb.pointops["torch_min"])
    one_per_capability = {gpu.compute_capability: gpu for gpu in kb.gpus}.values()
    chosen = 0
    for gpu in one_per_capability:
        cc = gpu.compute_capability
        arch = kb.architecture(cc)
        for driver in _drivers(kb):
            driver_cuda = kb.driver_max_cuda(driver)
            for platform in PLATFORMS:
                os_name = "windows" if platform == "win-64" else "linux"
                choice = table.choose(kb, platform, cc, driver_cuda, driver)
                if choice is None:
                    continue
                chosen += 1
                assert (
                    choice.index in table.indexes_for(choice.torch) and parse_version(choice.torch) >= floor
                )
                assert choice.index.tag == "cu" + choice.index.cuda.replace(".", "")
                mode = kb.driver_runs_cuda(driver_cuda, choice.index.cuda, driver, os_name)
                assert mode == choice.mode and mode is not None
                assert choice.mode == "full" or choice.coverage == "sass"
                if arch and arch.last_branch:
                    assert kb.driver_branch(driver).branch <= arch.last_branch
                if parse_version(cc) < (7, 5):  # CUDA 13 wheels carry no Maxwell/Pascal/Volta code
                    assert parse_version(choice.index.cuda)[0] == 12, (gpu.name, driver, choice)
    assert chosen > 100


@pytest.mark.parametrize("name", ["Tesla K80", "Tesla K40", "Quadro K6000"])
def test_no_index_for_kepler(kb, table, name):
    cc = kb.gpu_compute_capability(name)
    assert all(
        table.choose(kb, p, cc, kb.driver_max_cuda(d), d) is None for d in _drivers(kb) for p in PLATFORMS
    )


def test_no_index_where_make_env_refuses_the_gpu(kb, table):
    """Where make-env refuses a GPU for its driver branch or its age, no wheel index is offered."""
    for gpu in {
        gpu.compute_capability: gpu
        for gpu in kb.gpus
        if kb.jetson_module(gpu.compute_capability) is None and not gpu.only_on  # (x86-64 machines only)
    }.values():
        for driver in _drivers(kb):
            target = build_target(
                kb, gpu=f"{gpu.name}:{gpu.compute_capability}", driver=driver, platform="linux-64"
            )
            try:
                make_plan(kb, target)
            except SolverError as exc:
                if "no longer supports" in str(exc) or "cannot run any pointops GPU build" in str(exc):
                    assert (
                        table.choose(kb, "linux-64", gpu.compute_capability, target.driver_cuda, driver)
                        is None
                    )


def test_a_nonsense_driver_cuda_still_gives_a_real_index(kb, table):
    choice = table.choose(kb, "linux-64", "9.0", "99.9")
    assert choice is not None and choice.index.tag in table.indexes  # never "cu999"


def test_examples(kb, table):
    pascal = table.choose(kb, "linux-64", "6.1", "13.0", "580.95.05")
    assert (pascal.index.tag, pascal.mode, pascal.coverage) == ("cu126", "full", "sass")
    a100_on_12_4 = table.choose(kb, "linux-64", "8.0", "12.4", "550.54.14")
    assert (a100_on_12_4.index.tag, a100_on_12_4.mode) == ("cu126", "mvc")
    h200_on_13_0 = table.choose(kb, "linux-64", "9.0", "13.0", "580.159.04")
    assert h200_on_13_0.index.tag == "cu130" and h200_on_13_0.mode == "full"  # full before cu132 through MVC
    rtx5090_on_12_8 = table.choose(kb, "linux-64", "12.0", "12.8", "570.124.06")
    assert rtx5090_on_12_8.index.tag == "cu128" and rtx5090_on_12_8.torch == "2.11"
    assert table.choose(kb, "linux-64", "5.2", "13.1", "590.44.01") is None  # R590 dropped Maxwell
    assert table.choose(kb, "win-64", "5.2", "13.0", "581.29").index.tag == "cu126"
    gh200 = table.choose(kb, "linux-aarch64", "9.0", "12.8", "570.124.06")
    assert (gh200.torch, gh200.index.tag) == ("2.14", "cu126")  # the newest torch first, then its newest CUDA
    assert pascal.pip_command() == (
        'pip install --force-reinstall "torch==2.14.*" --index-url https://download.pytorch.org/whl/cu126'
    )
