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


@pytest.mark.parametrize(
    "driver,cuda",
    [
        ("470.82.01", "11.4"),
        ("525.60.13", "12.0"),
        ("535.183.01", "12.2"),
        ("550.54.14", "12.4"),
        ("565.57.01", "12.7"),
        ("570.124.06", "12.8"),
        ("575.57.08", "12.9"),
        ("580.159.04", "13.0"),
        ("590.48.01", "13.1"),
        # Windows numbers of the same branches
        ("474.44", "11.4"),
        ("528.33", "12.0"),
        ("537.13", "12.2"),
        ("552.22", "12.4"),
        ("566.03", "12.7"),
        ("572.61", "12.8"),
        ("576.57", "12.9"),
        ("581.29", "13.0"),
    ],
)
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


@pytest.mark.parametrize(
    "name,cc",
    [
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA A100 80GB PCIe", "8.0"),
        ("Tesla V100-SXM2-16GB", "7.0"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA GH200 480GB", "9.0"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("Quadro RTX 6000", "7.5"),
        ("RTX PRO 6000", "12.0"),
        ("NVIDIA A10G", "8.6"),
        ("NVIDIA A10", "8.6"),
        ("Tesla T4", "7.5"),
        ("Tesla K80", "3.7"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA TITAN X (Pascal)", "6.1"),
        ("NVIDIA GeForce GTX TITAN X", "5.2"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("rtx 3060", "8.6"),
    ],
)
def test_gpu_names(kb, name, cc):
    assert kb.gpu_compute_capability(name) == cc


@pytest.mark.parametrize("name", ["Foo 9000", "", "NVIDIA", "RTX", "Quadro K6000M"])
def test_unknown_gpu_names(kb, name):
    assert kb.gpu_compute_capability(name) is None


# NVIDIA's CUDA GPU pages (developer.nvidia.com/cuda-gpus and /cuda-legacy-gpus), typed from the
# pages: every name there must resolve to the compute capability the page gives. The rows below
# are those read (current page 12.1-8.6, legacy page 7.2-5.0); the 8.0/7.5 and Kepler rows come
# from older copies of the page (OLDER_NVIDIA_COPIES).
NVIDIA_CURRENT_PAGE = {
    "12.1": ["NVIDIA GB10"],
    "12.0": [
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 4500 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        "NVIDIA RTX PRO 5000 Blackwell",
        "NVIDIA RTX PRO 4500 Blackwell",
        "NVIDIA RTX PRO 4000 Blackwell",
        "NVIDIA RTX PRO 4000 Blackwell SFF Edition",
        "NVIDIA RTX PRO 2000 Blackwell",
        "GeForce RTX 5090",
        "GeForce RTX 5080",
        "GeForce RTX 5070 Ti",
        "GeForce RTX 5070",
        "GeForce RTX 5060 Ti",
        "GeForce RTX 5060",
        "GeForce RTX 5050",
    ],
    "11.0": ["Jetson T5000", "Jetson T4000"],
    "10.3": ["NVIDIA GB300", "NVIDIA B300"],
    "10.0": ["NVIDIA GB200", "NVIDIA B200"],
    "9.0": ["NVIDIA GH200", "NVIDIA H200", "NVIDIA H100"],
    "8.9": [
        "NVIDIA L4",
        "NVIDIA L40",
        "NVIDIA L40S",
        "NVIDIA RTX 6000 Ada",
        "NVIDIA RTX 5000 Ada",
        "NVIDIA RTX 4500 Ada",
        "NVIDIA RTX 4000 Ada",
        "NVIDIA RTX 4000 SFF Ada",
        "NVIDIA RTX 2000 Ada",
        "GeForce RTX 4090",
        "GeForce RTX 4080",
        "GeForce RTX 4070 Ti",
        "GeForce RTX 4070",
        "GeForce RTX 4060 Ti",
        "GeForce RTX 4060",
        "GeForce RTX 4050",
    ],
    "8.7": ["Jetson AGX Orin", "Jetson Orin NX", "Jetson Orin Nano"],
    "8.6": [
        "NVIDIA A40",
        "NVIDIA A10",
        "NVIDIA A16",
        "NVIDIA A2",
        "NVIDIA RTX A6000",
        "NVIDIA RTX A5000",
        "NVIDIA RTX A4000",
        "NVIDIA RTX A3000",
        "NVIDIA RTX A2000",
        "GeForce RTX 3090 Ti",
        "GeForce RTX 3090",
        "GeForce RTX 3080 Ti",
        "GeForce RTX 3080",
        "GeForce RTX 3070 Ti",
        "GeForce RTX 3070",
        "GeForce RTX 3060 Ti",
        "GeForce RTX 3060",
        "GeForce RTX 3050 Ti",
        "GeForce RTX 3050",
    ],
}
NVIDIA_LEGACY_PAGE = {
    "7.2": ["Jetson AGX Xavier", "Jetson Xavier NX"],
    "7.0": ["NVIDIA V100", "Quadro GV100", "NVIDIA TITAN V"],
    "6.2": ["Jetson TX2"],
    "6.1": [
        "Tesla P40",
        "Tesla P4",
        "Quadro P6000",
        "Quadro P5200",
        "Quadro P5000",
        "Quadro P4200",
        "Quadro P4000",
        "Quadro P3200",
        "Quadro P3000",
        "Quadro P2200",
        "Quadro P2000",
        "Quadro P1000",
        "Quadro P620",
        "Quadro P600",
        "Quadro P500",
        "Quadro P400",
        "P620",
        "P520",
        "NVIDIA TITAN Xp",
        "NVIDIA TITAN X",
        "GeForce GTX 1080 Ti",
        "GeForce GTX 1080",
        "GeForce GTX 1070 Ti",
        "GeForce GTX 1070",
        "GeForce GTX 1060",
        "GeForce GTX 1050",
    ],
    "6.0": ["Tesla P100", "Quadro GP100"],
    "5.3": ["Jetson Nano"],
    "5.2": [
        "Tesla M60",
        "Tesla M40",
        "Quadro M6000 24GB",
        "Quadro M6000",
        "Quadro M5000",
        "Quadro M4000",
        "Quadro M2000",
        "Quadro M5500M",
        "Quadro M2200",
        "Quadro M620",
        "GeForce GTX TITAN X",
        "GeForce GTX 980 Ti",
        "GeForce GTX 980",
        "GeForce GTX 970",
        "GeForce GTX 960",
        "GeForce GTX 950",
        "GeForce GTX 980M",
        "GeForce GTX 970M",
        "GeForce GTX 965M",
        "GeForce 910M",
    ],
    "5.0": [
        "Quadro K2200",
        "Quadro K1200",
        "Quadro K620",
        "Quadro M1200",
        "Quadro M520",
        "Quadro M5000M",
        "Quadro M4000M",
        "Quadro M3000M",
        "Quadro M2000M",
        "Quadro M1000M",
        "Quadro K620M",
        "Quadro M600M",
        "Quadro M500M",
        "NVIDIA NVS 810",
        "GeForce GTX 750 Ti",
        "GeForce GTX 750",
        "GeForce GTX 960M",
        "GeForce GTX 950M",
        "GeForce 940M",
    ],
}


OLDER_NVIDIA_COPIES = {
    "8.0": ["NVIDIA A100", "NVIDIA A30"],
    "7.5": [
        "NVIDIA T4",
        "Quadro RTX 8000",
        "Quadro RTX 6000",
        "Quadro RTX 5000",
        "Quadro RTX 4000",
        "T1000",
        "T600",
        "T400",
        "GeForce GTX 1650 Ti",
        "NVIDIA TITAN RTX",
        "GeForce RTX 2080 Ti",
        "GeForce RTX 2080",
        "GeForce RTX 2070",
        "GeForce RTX 2060",
    ],
    "5.0": ["GeForce 930M", "GeForce GTX 850M", "GeForce 840M", "GeForce 830M", "Quadro K2200M"],
    "3.7": ["Tesla K80"],
    "3.5": [
        "Tesla K40",
        "Tesla K20",
        "Quadro K6000",
        "Quadro K5200",
        "Quadro K610M",
        "Quadro K510M",
        "GeForce GTX TITAN Z",
        "GeForce GTX TITAN Black",
        "GeForce GTX TITAN",
        "GeForce GTX 780 Ti",
        "GeForce GTX 780",
    ],
    "3.0": [
        "Tesla K10",
        "Quadro K5000",
        "Quadro K4200",
        "Quadro K4000",
        "Quadro K2000",
        "Quadro K2000D",
        "Quadro K600",
        "Quadro K420",
        "Quadro 410",
        "GeForce GTX 770",
        "GeForce GTX 760",
        "GeForce GTX 690",
        "GeForce GTX 680",
        "GeForce GTX 670",
        "GeForce GTX 660 Ti",
        "GeForce GTX 660",
    ],
}


@pytest.mark.parametrize(
    "page",
    [NVIDIA_CURRENT_PAGE, NVIDIA_LEGACY_PAGE, OLDER_NVIDIA_COPIES],
    ids=["cuda-gpus", "cuda-legacy-gpus", "older-copies"],
)
def test_every_name_of_nvidias_pages_resolves(kb, page):
    wrong = {
        name: kb.gpu_compute_capability(name)
        for cc, names in page.items()
        for name in names
        if kb.gpu_compute_capability(name) != cc
    }
    assert wrong == {}


# Names as nvidia-smi / NVML print them: suffixes, memory sizes, form factors, laptop and Max-Q
# parts, Jetson iGPU names.
@pytest.mark.parametrize(
    "name,cc",
    [
        ("Tesla K40m", "3.5"),
        ("Tesla K40c", "3.5"),
        ("Tesla K20Xm", "3.5"),
        ("Tesla K20c", "3.5"),
        ("Tesla K80", "3.7"),
        ("Tesla M10", "5.0"),
        ("Tesla P100-PCIE-16GB", "6.0"),
        ("Tesla V100S-PCIE-32GB", "7.0"),
        ("Tesla V100-SXM2-32GB-LS", "7.0"),
        ("NVIDIA A100-PCIE-40GB", "8.0"),
        ("NVIDIA A800-SXM4-80GB", "8.0"),
        ("NVIDIA H100 NVL", "9.0"),
        ("NVIDIA H100 PCIe", "9.0"),
        ("NVIDIA H20", "9.0"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA GeForce RTX 4090 D", "8.9"),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 5090 Laptop GPU", "12.0"),
        ("NVIDIA GeForce RTX 3050 A Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 3050 6GB Laptop GPU", "8.6"),
        ("NVIDIA GeForce RTX 2050", "8.6"),
        ("NVIDIA GeForce RTX 2080 Super with Max-Q Design", "7.5"),
        ("NVIDIA GeForce GTX 1650 with Max-Q Design", "7.5"),
        ("NVIDIA GeForce GTX 1050 Ti with Max-Q Design", "6.1"),
        ("NVIDIA GeForce MX550", "7.5"),
        ("NVIDIA GeForce MX350", "6.1"),
        ("NVIDIA GeForce MX570", "8.6"),
        ("NVIDIA GeForce 940MX", "5.0"),
        ("Quadro RTX 5000 with Max-Q Design", "7.5"),
        ("Quadro T2000", "7.5"),
        ("Quadro T1000", "7.5"),
        ("NVIDIA T1200 Laptop GPU", "7.5"),
        ("NVIDIA T600 Laptop GPU", "7.5"),
        ("NVIDIA RTX A5500 Laptop GPU", "8.6"),
        ("NVIDIA RTX A1000 6GB Laptop GPU", "8.6"),
        ("NVIDIA RTX A500 Laptop GPU", "8.6"),
        ("NVIDIA RTX 3000 Ada Generation Laptop GPU", "8.9"),
        ("NVIDIA RTX 5000 Ada Generation Laptop GPU", "8.9"),
        ("NVIDIA RTX 4000 SFF Ada Generation", "8.9"),
        ("NVIDIA RTX PRO 3000 Blackwell Generation Laptop GPU", "12.0"),
        ("Orin (nvgpu)", "8.7"),
        ("Orin", "8.7"),
        ("NVIDIA Thor", "11.0"),
        ("Xavier", "7.2"),
        ("NVIDIA Tegra X1", "5.3"),
        ("NVIDIA Tegra X2", "6.2"),
        ("NVIDIA DGX Spark", "12.1"),
    ],
)
def test_names_as_the_driver_prints_them(kb, name, cc):
    assert kb.gpu_compute_capability(name) == cc


@pytest.mark.parametrize(
    "cc,first_cuda,branch",
    [
        ("10.0", "12.8", 570),
        ("12.0", "12.8", 570),
        ("10.3", "12.9", 575),
        ("12.1", "12.9", 575),
        ("11.0", "13.0", 580),
        ("10.7", "13.4", 615),
    ],
)
def test_first_driver_branch_of_each_new_generation(kb, cc, first_cuda, branch):
    assert kb.architecture(cc).first_cuda == first_cuda
    assert kb.first_branch_for_cuda(first_cuda).branch == branch


def test_windows_numbers_stay_in_their_branch(kb):
    """drivers.yaml's rule: Windows builds are numbered apart from Linux ones (not always higher:
    CUDA 11.8 is 520.06 on Windows, 520.61.05 on Linux) but stay in the same branch."""
    pairs = [(t.linux_min, t.windows_min) for t in kb.toolkits.values()]
    pairs += [(kb.mvc_min_driver(major, "linux"), kb.mvc_min_driver(major, "windows")) for major in (11, 12)]
    pairs = [
        (linux, windows) for linux, windows in pairs if "." in windows
    ]  # "580": no Windows build published
    assert len(pairs) >= 10
    for linux, windows in pairs:
        assert kb.driver_branch(windows) == kb.driver_branch(linux), (linux, windows)
    assert parse_version(kb.toolkit("11.8").windows_min) < parse_version(kb.toolkit("11.8").linux_min)


def test_gpu_own_minimum_driver(kb):
    """HGX B200: 570.133.20 or later (NVIDIA/cloud-native-docs#184), a Linux build; none for Windows,
    whose R570 drivers are numbered apart (570.65, 572.61)."""
    floor = kb.gpu_driver_floor("NVIDIA B200")
    assert (floor.gpu, floor.minimum("linux"), floor.minimum("windows")) == (
        "NVIDIA B200",
        "570.133.20",
        None,
    )
    assert "cloud-native-docs#184" in floor.source
    assert kb.gpu_driver_floor("NVIDIA HGX B200") == floor
    assert kb.driver_branch(floor.linux).branch == kb.first_branch_for_cuda("12.8").branch == 570
    for other in ("NVIDIA B100", "NVIDIA H100", "NVIDIA GeForce RTX 4090", "no such GPU"):
        assert kb.gpu_driver_floor(other) is None, other


def test_driver_facts_from_the_reference(kb):
    assert kb.driver_max_cuda("620.70.06") == "13.5"  # R620: CUDA 13.5
    assert kb.toolkit("11.8").windows_min == "520.06"  # release notes Table 3 (meson: 522.06)
    assert kb.mvc_min_driver(12, "windows") == "528.33"  # the highest of NVIDIA's three readings
    raw = read_raw()
    notes = {b["branch"]: b.get("note", "") for b in raw["drivers"]["branches"]}
    assert "June 2028" in notes[580] and "September 2029" in notes[620]


def test_compute_capabilities_that_exist(kb):
    assert kb.is_compute_capability("8.7") and kb.is_compute_capability("10.7")
    assert not kb.is_compute_capability("13.5") and not kb.is_compute_capability("99.9")
    assert not kb.is_compute_capability("9.9")
    assert kb.architecture("10.1").renamed_to == "11.0"


def test_tegra_needs_exact_sass():
    sbsa129 = ArchList(sass=("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0")
    assert arch_coverage("8.7", sbsa129) == "sass"  # a desktop 8.7 would run sm_86
    assert arch_coverage("8.7", sbsa129, tegra=True) is None  # Orin does not
    assert arch_coverage("7.2", sbsa129, tegra=True) is None  # nor Xavier sm_70
    assert arch_coverage("8.7", ArchList(sass=("8.7",), ptx="8.7"), tegra=True) == "sass"
    assert arch_coverage("8.7", ArchList(sass=("8.0",), ptx="8.0"), tegra=True) == "ptx"


def test_jetson_stacks(kb):
    orin, thor = kb.jetson_module("8.7"), kb.jetson_module("11.0")
    assert kb.jetson_stack_of_driver(orin, "540.4.0", None).arm_variant == "tegra"
    assert kb.jetson_stack_of_driver(orin, None, "12.2").key == "jetpack6"
    assert kb.jetson_stack_of_driver(orin, "595.45.04", None).arm_variant == "sbsa"
    assert kb.jetson_stack_of_driver(orin, None, "13.2").key == "unified"
    assert kb.jetson_stack_of_driver(orin, "535.54.03", None) is None
    assert kb.jetson_stack_of_driver(orin, None, "11.4") is None
    assert kb.jetson_stack_of_driver(thor, "540.4.0", None) is None
    assert kb.jetson_stack_of_driver(thor, "580.00", None).key == "unified"
    assert kb.jetson_module("7.2").stacks == {} and "CUDA 11.4" in kb.jetson_module("7.2").last_stack
    # Orin's JetPack 7.2 driver number is not in any source read: the rule used is stated as assumed
    assert set(orin.assumed) == {"unified"} and "580 or newer" in orin.assumed["unified"]
    assert thor.assumed == {}
    assert kb.jetson_module("8.6") is None


def test_pytorch_build_number_floor_for_orin_on_cuda13(kb):
    cuda130 = kb.pytorch_release("2.13.0").cuda_builds("linux-aarch64")[0]
    assert (cuda130.key, cuda130.since_build_number) == ("cuda130", 202)
    assert "8.7" in cuda130.archs.sass and "8.7" not in cuda130.older_archs.sass
    assert "8.7" not in kb.pytorch_release("2.12.1").cuda["linux-aarch64"]["cuda130"].sass


def test_architectures_and_support_end(kb):
    assert kb.architecture("3.5").family == "Kepler" and kb.architecture("3.5").last_branch == 470
    assert kb.architecture("6.1").last_branch == 580
    assert kb.architecture("7.0").last_branch == 580
    assert kb.architecture("7.5").last_branch is None
    assert kb.architecture("12.0").family == "Blackwell"
    assert kb.architecture("9.9").family == "Hopper"  # unknown minor falls back to its major


def test_arch_coverage_rules():
    archs = ArchList(sass=("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0")
    assert arch_coverage("8.9", archs) == "sass"  # Ada runs sm_86 code
    assert arch_coverage("6.1", archs) == "sass"
    assert arch_coverage("12.1", archs) == "sass"
    assert arch_coverage("11.0", archs) is None  # PTX 12.0 is newer than 11.0
    assert arch_coverage("3.7", archs) is None
    cuda13 = ArchList(sass=("7.5", "8.0", "8.6", "9.0", "10.0", "11.0", "12.0"), ptx="12.0")
    assert arch_coverage("7.0", cuda13) is None
    assert arch_coverage("13.0", cuda13) == "ptx"  # a future major runs through PTX only


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
    matrix = {
        (b.platform, b.variant, b.cuda_version, b.arm_variant)
        for p in ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")
        for b in kb.pointops_builds(p)
    }
    expected = {
        (p, "cpu", None, None) for p in ("linux-64", "linux-aarch64", "win-64", "osx-64", "osx-arm64")
    }
    expected |= {("linux-64", "cuda129", "12.9", None), ("linux-aarch64", "cuda129", "12.9", "sbsa")}
    expected |= {
        ("linux-64", "cuda130", "13.0", None),
        ("linux-aarch64", "cuda130", "13.0", "sbsa"),
        ("win-64", "cuda130", "13.0", None),
    }
    expected |= {("win-64", "cuda128", "12.8", None)}
    assert matrix == expected
    assert kb.pointops.torch_min == "2.10" and kb.pointops["python_min"] == "3.10"


def test_pointops_runs_wherever_its_pytorch_runs(kb):
    """Every GPU a pytorch CUDA build runs on can also run the pointops build of that variant and
    arm variant (Jetson GPUs counted by the Tegra rule: exact SASS or PTX). pointops publishes no
    build for the tegra arm variant (JetPack 6), which the planner refuses."""
    checked = set()
    for release in kb.pytorch_releases:
        if parse_version(release.version) < (2, 10):
            continue
        for platform, torch_builds in release.builds.items():
            for torch_build in torch_builds:
                build = kb.pointops_build(platform, torch_build.variant, torch_build.arm_variant)
                if torch_build.arm_variant == "tegra":
                    assert build is None, torch_build
                    continue
                assert build is not None and build.arm_variant == torch_build.arm_variant, torch_build
                for cc, arch in kb.architectures.items():
                    if arch_coverage(cc, torch_build.archs, arch.tegra) is not None:
                        assert arch_coverage(cc, build.archs, arch.tegra) is not None, (
                            release.version,
                            platform,
                            torch_build.key,
                            cc,
                        )
                checked.add((platform, torch_build.key))
    assert ("linux-aarch64", "cuda130") in checked


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


def _entry(gpus: dict, name: str) -> dict:
    return next(item for item in gpus["gpus"] if item["name"] == name)


def _broken_copy(tmp_path: Path, name: str, edit) -> Path:
    target = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    data = yaml.safe_load((target / f"{name}.yaml").read_text())
    edit(data)
    (target / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return target


@pytest.mark.parametrize(
    "name,edit,message",
    [
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
        ("gpus", lambda d: d["architectures"]["12.0"].update(first_cuda="12.7"), "no entry in toolkits"),
        ("gpus", lambda d: d["gpus"].append({"name": "GeForce RTX 4090", "cc": "8.6"}), "same words"),
        ("jetson", lambda d: d["modules"].update({"8.6": {"name": "x", "last_stack": "y"}}), "not a Jetson"),
        ("jetson", lambda d: d["stacks"]["jetpack6"].update(arm_variant="armv7"), "arm_variant"),
        ("jetson", lambda d: d["modules"]["8.7"]["stacks"].update(jetpack5="x"), "unknown stack"),
        ("pytorch", lambda d: d["min_glibc"].pop("cuda129-tegra"), "no entry for cuda129-tegra"),
        (
            "pytorch",
            lambda d: d["releases"][0]["cuda"]["linux-64"].update({"cuda129-tegra": "tegra129"}),
            "no arm variants",
        ),
        ("pointops_builds", lambda d: d.update(tegra={"cuda127": {"sass": ["8.7"]}}), "not a CUDA variant"),
        (
            "gpus",
            lambda d: _entry(d, "NVIDIA B200")["min_driver"].update(linux="565.57.01"),
            "older than R570",
        ),
        (
            "gpus",
            lambda d: _entry(d, "NVIDIA B200")["min_driver"].update(linux="570"),
            "a branch, not a driver build",
        ),
        ("gpus", lambda d: _entry(d, "NVIDIA B200")["min_driver"].pop("src"), "missing field 'src'"),
        ("gpus", lambda d: _entry(d, "NVIDIA B200")["min_driver"].pop("linux"), "give linux or windows"),
        (
            "jetson",
            lambda d: d["modules"]["11.0"].update(assumed={"jetpack6": "x"}),
            "not one of this module's stacks",
        ),
    ],
)
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


def test_pointops_package_is_a_frozen_record(kb):
    """pointops_builds.yaml's package fields are attributes of a frozen record; the older
    `kb.pointops["torch_min"]` spelling still reads them, and nothing can change them."""
    import dataclasses

    info = kb.pointops
    assert (info.package, info.version, info.torch_min, info.python_min) == (
        "pointops",
        "0.1.0",
        "2.10",
        "3.10",
    )
    assert info["version"] == info.version and list(info["wheels"]) == [
        "pointops",
        "pointops-cu12",
        "pointops-cu13",
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.torch_min = "2.9"
    with pytest.raises(KeyError):
        info["platforms"]


def test_each_table_has_its_own_module():
    """Loader and queries of one table sit side by side: which driver a GPU needs is in gpus.py."""
    from solver.knowledge import drivers, gpus, jetson, pointops, pytorch, toolkits

    assert callable(drivers.parse_drivers) and hasattr(drivers.DriverTable, "runs_cuda")
    assert callable(gpus.parse_gpus) and hasattr(gpus.GpuTable, "driver_floor")
    assert callable(jetson.parse_jetson) and callable(pytorch.parse_pytorch)
    assert callable(pointops.parse_pointops) and callable(toolkits.parse_toolkits)
    init = (KNOWLEDGE_DIR / "__init__.py").read_text()
    assert len(init.splitlines()) < 300 and "def _parse" not in init
