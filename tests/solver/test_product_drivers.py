"""First drivers per GPU product and Arm-only GPUs (issue 47), from NVIDIA's own lists.

FIRST_LISTED: for each product, the first Linux driver whose NVIDIA/open-gpu-kernel-modules
README ("Compatible GPUs") names it, per release tag (read 2026-12-05), and the later branches
whose first tag does not yet name it. The generation's floor (the branch of the first CUDA toolkit
that builds for its compute capability) is only a lower bound: B300 / GB300 (10.3) and GB10 (12.1)
got sm_103 / sm_121 in CUDA 12.9 (R575), but no R575 driver lists them.
"""

from __future__ import annotations

import pytest

from solver.knowledge import KnowledgeError, load

# name -> (first Linux driver, {branch: first build of that branch, or "none through X"})
FIRST_LISTED = {
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": ("575.57.08", {}),
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": ("570.123.07", {}),
    "NVIDIA GeForce RTX 5090 Laptop GPU": ("570.123.07", {}),
    "NVIDIA RTX PRO 5000 Blackwell": ("570.153.02", {575: "575.57.08"}),
    "NVIDIA GeForce RTX 5060 Laptop GPU": ("570.158.01", {575: "575.57.08"}),
    "NVIDIA B300 SXM6 AC": ("580.82.07", {}),
    "NVIDIA GB300": ("580.82.07", {}),
    "NVIDIA GB10": ("580.94.13", {590: "590.48.01"}),
    "NVIDIA GeForce RTX 5090": ("570.86.16", {}),
    "NVIDIA GeForce RTX 5050": ("575.64.03", {}),  # the desktop part is in no R570 release
    "NVIDIA GeForce RTX 5050 Laptop GPU": ("570.172.08", {575: "575.64.03"}),
    "NVIDIA GB200": ("570.123.10", {}),
    "NVIDIA RTX PRO 2000 Blackwell": ("570.190", {575: "none through 575.64.05", 580: "580.76.05"}),
    "NVIDIA RTX PRO 4500 Blackwell Server Edition": (
        "580.142",
        {590: "none through 590.48.01", 595: "none through 595.45.04"},
    ),
    "NVIDIA B200": ("570.133.20", {}),  # NVIDIA/cloud-native-docs#184 (README: 570.86.15)
}


def _later(floor) -> dict:
    return {
        s.branch: s.first if s.first else f"none through {s.none_through}" for s in floor.linux_starts[1:]
    }


@pytest.mark.parametrize("name", FIRST_LISTED)
def test_first_drivers_per_product(kb, name):
    first, later = FIRST_LISTED[name]
    floor = kb.gpu_driver_floor(name)
    assert floor is not None, name
    assert (floor.linux, _later(floor)) == (first, later)
    assert floor.windows is None  # NVIDIA names no Windows build for any of them
    assert floor.source and floor.source != "K"  # the short key is printed as its citation


@pytest.mark.parametrize(
    "name,driver,runs",
    [
        ("NVIDIA RTX PRO 5000 Blackwell", "570.148.08", False),
        ("NVIDIA RTX PRO 5000 Blackwell", "570.153.02", True),
        ("NVIDIA RTX PRO 5000 Blackwell", "575.51.03", False),  # newer than 570.153.02, R575 lists it later
        ("NVIDIA RTX PRO 5000 Blackwell", "575.57.08", True),
        ("NVIDIA RTX PRO 5000 Blackwell", "580.65.06", True),
        ("NVIDIA RTX PRO 5000 Blackwell", "565.57.01", False),
        ("NVIDIA GB10", "590.44.01", False),
        ("NVIDIA GB10", "590.48.01", True),
        ("NVIDIA GB10", "595.45.04", True),
        ("NVIDIA RTX PRO 2000 Blackwell", "575.64.05", False),
        ("NVIDIA RTX PRO 2000 Blackwell", "580.65.06", False),
        ("NVIDIA RTX PRO 2000 Blackwell", "580.76.05", True),
        ("NVIDIA RTX PRO 4500 Blackwell Server Edition", "590.48.01", False),
        ("NVIDIA RTX PRO 4500 Blackwell Server Edition", "595.58.03", True),  # newer than every tag read
        ("NVIDIA RTX PRO 4500 Blackwell Server Edition", "620.70.06", True),  # a branch after the tables
    ],
)
def test_which_drivers_drive_a_product(kb, name, driver, runs):
    floor = kb.gpu_driver_floor(name)
    assert floor.runs(driver, kb.driver_branch(driver).branch, "linux") is runs


def test_reference_r575_floor_for_b300_and_gb10_is_only_a_toolkit_bound(kb):
    """The reference's R575 floor for 10.3 and 12.1 comes from CUDA 12.9 adding sm_103/sm_121;
    the first drivers that list B300, GB300 and GB10 are R580 ones."""
    for name, cc in (("NVIDIA B300", "10.3"), ("NVIDIA GB300", "10.3"), ("NVIDIA GB10", "12.1")):
        assert kb.first_branch_for_cuda(kb.architecture(cc).first_cuda).branch == 575
        assert kb.gpu_driver_floor(name).first_branch("linux") == 580
    # a compute capability alone takes the floor all its products share
    assert kb.driver_floor("sm_103 GPU", "10.3").linux == "580.82.07"
    assert kb.driver_floor("sm_121 GPU", "12.1").linux == "580.94.13"
    assert kb.driver_floor("sm_120 GPU", "12.0") is None  # 12.0 products start at different drivers
    assert kb.driver_floor("NVIDIA B300", "9.0") is None  # a name given with another capability


@pytest.mark.parametrize(
    "name,platform",
    [
        ("NVIDIA GB10", "linux-aarch64"),
        ("NVIDIA DGX Spark", "linux-aarch64"),
        ("NVIDIA GH200 480GB", "linux-aarch64"),
        ("NVIDIA GH200 144G HBM3e", "linux-aarch64"),
        ("NVIDIA GB200", "linux-aarch64"),
        ("NVIDIA GB300", "linux-aarch64"),
        ("NVIDIA B200", None),  # HGX B200 boards sit in x86 servers too
        ("NVIDIA B300 SXM6 AC", None),
        ("NVIDIA H100 80GB HBM3", None),
    ],
)
def test_arm_only_gpus(kb, name, platform):
    entry = kb.gpu_lookup(name)
    assert entry.only_on == platform
    if platform:
        assert "Arm" in entry.only_on_source
    assert (kb.only_platform(name, entry.compute_capability) is not None) is (platform is not None)


def test_a_compute_capability_alone_is_not_held_to_a_platform(kb):
    """Only named products are: every 12.1 GPU known is a GB10, but `--gpu 12.1` names none."""
    assert kb.only_platform("sm_121 GPU", "12.1") is None
    assert kb.only_platform("NVIDIA GB10", "9.0") is None  # a name given with another capability


def _broken(tmp_path, edit):
    import shutil

    import yaml

    from solver.knowledge import KNOWLEDGE_DIR

    target = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    data = yaml.safe_load((target / "gpus.yaml").read_text())
    edit(next(item for item in data["gpus"] if item["name"] == "NVIDIA GB10"))
    (target / "gpus.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return str(target)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda e: e["min_driver"].update(linux={580: "575.57.08"}), "not an R580 driver"),
        (lambda e: e["min_driver"].update(linux={585: "585.10.01"}), "not a branch in drivers.yaml"),
        (lambda e: e["min_driver"].update(linux={590: "590.48.01", 580: "580.94.13"}), "ascending"),
        (
            lambda e: e["min_driver"].update(linux={580: {"none_through": "580.94.11"}}),
            "first branch must name",
        ),
        (lambda e: e["only_on"].update(platform="linux-arm"), "unknown platform"),
        (lambda e: e["only_on"].pop("src"), "missing field 'src'"),
    ],
)
def test_bad_product_facts_are_named(tmp_path, edit, message):
    with pytest.raises(KnowledgeError, match=message) as info:
        load(_broken(tmp_path, edit))
    assert "gpus.yaml" in str(info.value)
