"""The CUDA arch table and arch-list parsing (pointops/cuda_archs.py)."""

import shutil
import subprocess

import pytest
from pointops import cuda_archs

# TORCH_CUDA_ARCH_LIST of conda-forge's pytorch per CUDA version (pytorch-cpu-feedstock
# recipe/build.sh and bld.bat; 13.0 on linux-aarch64 adds 8.7 from 2.13.0 build 2).
CONDA_FORGE_PYTORCH = {
    "12.6": "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0+PTX",
    "12.8": "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    "12.9": "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    "13.0": "7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX",
}


def _cap(text):
    major, minor = text.rstrip("af").split(".")
    return int(major), int(minor)


def runs_on(plan, gpu):
    """Whether a build with `plan` has code for a GPU of compute capability `gpu`: SASS of X.Y
    runs on X.Z for Z >= Y; PTX of X.Y is JIT-compiled for any GPU >= X.Y."""
    if any(_cap(s)[0] == gpu[0] and _cap(s)[1] <= gpu[1] for s in plan.sass):
        return True
    return any(_cap(p) <= gpu for p in plan.ptx)


ALL_GPUS = [(major, minor) for major in (3, 5, 6, 7, 8, 9, 10, 11, 12, 13) for minor in range(10)]


@pytest.mark.parametrize("cuda", sorted(CONDA_FORGE_PYTORCH))
def test_table_covers_every_gpu_conda_forge_pytorch_runs_on(cuda):
    ours = cuda_archs.default_plan(cuda)
    theirs = cuda_archs.parse_arch_list(CONDA_FORGE_PYTORCH[cuda])
    for gpu in ALL_GPUS:
        if runs_on(theirs, gpu):
            assert runs_on(ours, gpu), f"CUDA {cuda}: torch runs on sm_{gpu[0]}{gpu[1]}, pointops would not"


def test_table_respects_toolkit_limits():
    table = cuda_archs.load_table()
    for version, entry in table.items():
        if version.startswith("13."):
            assert all(_cap(s) >= (7, 5) for s in entry["sass"]), "nvcc 13 cannot build below sm_75"
        assert entry["ptx"] in entry["sass"]
        assert entry["sass"] == sorted(entry["sass"], key=_cap)


def test_unlisted_minor_uses_the_previous_entry_and_unknown_major_fails():
    assert cuda_archs.table_entry("13.2")[0] == "13.0"
    assert cuda_archs.table_entry("12.9")[0] == "12.9"
    with pytest.raises(cuda_archs.ArchListError, match="TORCH_CUDA_ARCH_LIST"):
        cuda_archs.table_entry("11.8")


def test_parse_arch_list_forms():
    plan = cuda_archs.parse_arch_list("8.0; 8.6 9.0a,sm_100 12.0+PTX")
    assert plan.sass == ("8.0", "8.6", "9.0a", "10.0", "12.0")
    assert plan.ptx == ("12.0",)
    assert plan.gencode_flags()[2] == "-gencode=arch=compute_90a,code=sm_90a"
    assert plan.gencode_flags()[-1] == "-gencode=arch=compute_120,code=compute_120"
    for bad in ["", "Ampere", "8", "9.0a+PTX"]:
        with pytest.raises(cuda_archs.ArchListError):
            cuda_archs.parse_arch_list(bad)


def test_choose_plan_order_of_precedence():
    plan, source = cuda_archs.choose_plan(
        {"TORCH_CUDA_ARCH_LIST": "9.0", "CF_TORCH_CUDA_ARCH_LIST": "8.0"}, "13.0"
    )
    assert (plan.sass, source) == (("9.0",), "TORCH_CUDA_ARCH_LIST")
    plan, source = cuda_archs.choose_plan({"CF_TORCH_CUDA_ARCH_LIST": "8.0+PTX"}, "13.0")
    assert (plan.sass, plan.ptx, source) == (("8.0",), ("8.0",), "CF_TORCH_CUDA_ARCH_LIST")
    plan, source = cuda_archs.choose_plan({}, "13.0")
    assert source == "cuda_arch_table.json[13.0]" and plan.ptx == ("12.0",)
    with pytest.raises(cuda_archs.ArchListError, match="TORCH_CUDA_ARCH_LIST: cannot read"):
        cuda_archs.choose_plan({"TORCH_CUDA_ARCH_LIST": "x"}, "13.0")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_local_nvcc_supports_every_arch_of_its_table_entry():
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    version = out.split("release ")[1].split(",")[0]
    codes = subprocess.run(
        ["nvcc", "--list-gpu-code"], capture_output=True, text=True, check=True
    ).stdout.split()
    for cap in cuda_archs.default_plan(version).sass:
        assert f"sm_{cap.replace('.', '')}" in codes
