"""The knowledge tables load, validate, and answer the questions the planner asks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from solver.knowledge import (
    KNOWLEDGE_DIR,
    ArchList,
    KnowledgeError,
    arch_coverage,
    load,
    parse_version,
    read_raw,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kb():
    return load()


@pytest.mark.parametrize("driver,cuda", [
    ("470.82.01", "11.4"), ("525.60.13", "12.0"), ("535.183.01", "12.2"), ("550.54.14", "12.4"),
    ("565.57.01", "12.7"), ("570.124.06", "12.8"), ("575.57.08", "12.9"), ("580.159.04", "13.0"),
    ("590.48.01", "13.1"),
    # Windows numbers of the same branches
    ("474.44", "11.4"), ("528.33", "12.0"), ("537.13", "12.2"), ("552.22", "12.4"), ("566.03", "12.7"),
    ("572.61", "12.8"), ("576.57", "12.9"), ("581.29", "13.0"),
])
def test_driver_branch_maps_to_cuda(kb, driver, cuda):
    assert kb.driver_max_cuda(driver) == cuda


def test_driver_older_than_every_branch(kb):
    assert kb.driver_max_cuda("390.157") is None


def test_minimum_drivers(kb):
    assert kb.cuda_min_driver("12.9", "linux") == "575.51.03"
    assert kb.cuda_min_driver("12.8", "windows") == "570.65"
    assert kb.mvc_min_driver(12, "linux") == "525.60.13"
    assert kb.mvc_min_driver(12, "windows") == "528.33"
    assert kb.mvc_min_driver(11, "linux") == "450.80.02"


def test_driver_runs_cuda(kb):
    assert kb.driver_runs_cuda("12.4", "12.4", "550.54.14", "linux") == "full"
    assert kb.driver_runs_cuda("13.0", "12.9", "580.65.06", "linux") == "full"
    assert kb.driver_runs_cuda("12.4", "12.9", "550.54.14", "linux") == "mvc"
    assert kb.driver_runs_cuda("12.0", "12.9", "525.53.00", "linux") is None  # below the MVC floor
    assert kb.driver_runs_cuda("12.0", "12.8", "528.33", "windows") == "mvc"
    assert kb.driver_runs_cuda("11.4", "12.9", "470.82.01", "linux") is None
    assert kb.driver_runs_cuda("12.9", "13.0", "575.57.08", "linux") is None


@pytest.mark.parametrize("name,cc", [
    ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
    ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA A100 80GB PCIe", "8.0"), ("Tesla V100-SXM2-16GB", "7.0"),
    ("NVIDIA H200", "9.0"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GH200 480GB", "9.0"),
    ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("Quadro RTX 6000", "7.5"), ("RTX PRO 6000", "12.0"),
    ("NVIDIA A10G", "8.6"), ("NVIDIA A10", "8.6"), ("Tesla T4", "7.5"), ("Tesla K80", "3.7"),
    ("NVIDIA GeForce GTX 1080 Ti", "6.1"), ("NVIDIA TITAN X (Pascal)", "6.1"),
    ("NVIDIA GeForce GTX TITAN X", "5.2"), ("NVIDIA B200", "10.0"), ("NVIDIA GeForce RTX 5090", "12.0"),
    ("rtx 3060", "8.6"),
])
def test_gpu_names(kb, name, cc):
    assert kb.gpu_compute_capability(name) == cc


@pytest.mark.parametrize("name", ["Foo 9000", "", "NVIDIA", "RTX"])
def test_unknown_gpu_names(kb, name):
    assert kb.gpu_compute_capability(name) is None


def test_architectures_and_support_end(kb):
    assert kb.architecture("3.5").family == "Kepler" and kb.architecture("3.5").last_branch == 470
    assert kb.architecture("6.1").last_branch == 580
    assert kb.architecture("7.0").last_branch == 580
    assert kb.architecture("7.5").last_branch is None
    assert kb.architecture("12.0").family == "Blackwell"
    assert kb.architecture("9.9").family == "Hopper"  # unknown minor falls back to its major


def test_arch_coverage_rules():
    archs = ArchList(sass=("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0")
    assert arch_coverage("8.9", archs) == "sass"     # Ada runs sm_86 code
    assert arch_coverage("6.1", archs) == "sass"
    assert arch_coverage("12.1", archs) == "sass"
    assert arch_coverage("11.0", archs) is None      # PTX 12.0 is newer than 11.0
    assert arch_coverage("3.7", archs) is None
    cuda13 = ArchList(sass=("7.5", "8.0", "8.6", "9.0", "10.0", "11.0", "12.0"), ptx="12.0")
    assert arch_coverage("7.0", cuda13) is None
    assert arch_coverage("13.0", cuda13) == "ptx"    # a future major runs through PTX only


def test_pytorch_releases(kb):
    newest = kb.pytorch_releases[0]
    assert newest.version == "2.13.0"
    assert newest.variants("linux-64") == ["cuda130", "cuda129"]
    assert newest.variants("win-64") == ["cuda130", "cuda128"]
    assert newest.variants("osx-arm64") == []
    assert "3.14" in newest.pythons and "osx-arm64" in newest.cpu_platforms
    assert kb.pytorch_release("2.9.1").variants("linux-64") == ["cuda129"]
    assert kb.pytorch_release("2.2.0") is None
    assert kb.min_glibc["cuda130"] == "2.28"


def test_pointops_build_matrix(kb):
    matrix = {(b.platform, b.variant, b.cuda_version) for p in ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")
              for b in kb.pointops_builds(p)}
    expected = {(p, "cpu", None) for p in ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")}
    expected |= {(p, "cuda129", "12.9") for p in ("linux-64", "linux-aarch64")}
    expected |= {(p, "cuda130", "13.0") for p in ("linux-64", "linux-aarch64", "win-64")}
    expected |= {("win-64", "cuda128", "12.8")}
    assert matrix == expected
    assert kb.pointops["torch_min"] == "2.10" and kb.pointops["python_min"] == "3.10"


def test_pointops_runs_wherever_its_pytorch_runs(kb):
    """Every GPU a pytorch CUDA build runs on can also run the pointops build of that variant."""
    for release in kb.pytorch_releases:
        for platform, variants in release.cuda.items():
            for variant, torch_archs in variants.items():
                build = kb.pointops_build(platform, variant)
                if build is None or parse_version(release.version) < (2, 10):
                    continue
                for cc in kb.architectures:
                    if arch_coverage(cc, torch_archs) is not None:
                        assert arch_coverage(cc, build.archs) is not None, (release.version, platform, variant, cc)


def test_pointops_archs_are_buildable_by_their_toolkit(kb):
    for platform in ("linux-64", "win-64", "linux-aarch64"):
        for build in kb.pointops_builds(platform):
            if build.archs is None:
                continue
            toolkit = kb.toolkit(build.cuda_version)
            assert set(build.archs.sass) <= set(toolkit.archs), build
            assert build.archs.ptx in toolkit.archs


def test_pointops_archs_match_the_ops_arch_table(kb):
    """The builds table and ops-src's arch table (per toolkit: SASS archs, PTX arch) agree."""
    table_path = REPO / "ops-src" / "pointops" / "cuda_arch_table.json"
    if not table_path.exists():
        pytest.skip("ops-src/pointops/cuda_arch_table.json is not written yet")
    table = json.loads(table_path.read_text())
    entries = table.get("toolkits", table) if isinstance(table, dict) else table
    for build in (b for p in ("linux-64", "win-64") for b in kb.pointops_builds(p) if b.archs):
        entry = entries.get(build.cuda_version) if isinstance(entries, dict) else None
        assert entry is not None, f"{table_path.name} has no entry for CUDA {build.cuda_version}"
        sass = [normalize(a) for a in entry.get("sass", [])]
        ptx = normalize(entry["ptx"]) if entry.get("ptx") else None
        assert sass == list(build.archs.sass), build.cuda_version
        assert ptx == build.archs.ptx, build.cuda_version


def normalize(arch) -> str:
    text = str(arch).lower().replace("sm_", "").replace("compute_", "")
    return text if "." in text else f"{int(text[:-1])}.{text[-1]}"


def test_knowledge_loads_fast_enough_to_be_cached_once(kb):
    assert load() is kb


# -- validation: a broken file is named with its field --------------------------------------

def _broken_copy(tmp_path: Path, name: str, edit) -> Path:
    target = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    data = yaml.safe_load((target / f"{name}.yaml").read_text())
    edit(data)
    (target / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return target


@pytest.mark.parametrize("name,edit,message", [
    ("drivers", lambda d: d["branches"][3].pop("max_cuda"), "missing field 'max_cuda'"),
    ("drivers", lambda d: d["branches"].reverse(), "ascending"),
    ("gpus", lambda d: d["gpus"][0].update(cc="eight"), "not a version number"),
    ("gpus", lambda d: d["gpus"][0].update(cc="4.4"), "no entry in architectures"),
    ("pytorch", lambda d: d["releases"].reverse(), "newest first"),
    ("pytorch", lambda d: d["releases"][0]["cuda"].update({"linux-32": {}}), "unknown platform"),
    ("pytorch", lambda d: d["arch_lists"]["cuda129"]["sass"].reverse(), "ascending"),
    ("pointops_builds", lambda d: d["platforms"]["linux-64"].append("cuda999"), "unknown variant"),
    ("pointops_builds", lambda d: d["variants"]["cuda129"].update(cuda_version="12.8"), "must match"),
    ("toolkits", lambda d: d["toolkits"]["12.9"].pop("linux_min"), "missing field 'linux_min'"),
])
def test_validation_names_the_problem(tmp_path, name, edit, message):
    directory = _broken_copy(tmp_path, name, edit)
    with pytest.raises(KnowledgeError, match=message) as info:
        load(str(directory))
    assert name in str(info.value)


def test_unreadable_file(tmp_path):
    directory = _broken_copy(tmp_path, "gpus", lambda d: None)
    (directory / "gpus.yaml").write_text("gpus: [unclosed\n")
    with pytest.raises(KnowledgeError, match="not valid YAML"):
        read_raw(directory)
