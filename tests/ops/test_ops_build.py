"""Build checks: the CUDA sources compile with this machine's nvcc, the binding's CUDA branch
compiles, and the installed binary needs nothing from torch beyond the stable C shim."""

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pointops
import pytest

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "ops-src" / "csrc"
NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_cuda_sources_compile_and_link_for_sm90(tmp_path):
    sources = sorted((CSRC / "cuda").glob("*.cu"))
    assert sources, "ops-src/csrc/cuda has no .cu files"

    def compile_one(src):
        cmd = [
            NVCC,
            "-c",
            "-arch=sm_90",
            "-std=c++17",
            "-O1",
            "--expt-relaxed-constexpr",
            "-Xcompiler",
            "-fPIC",
            "-DPOINTOPS_WITH_CUDA=1",
            f"-I{CSRC}",
            str(src),
            "-o",
            str(tmp_path / (src.stem + ".o")),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        return src.name, result.returncode, result.stdout + result.stderr

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(compile_one, sources))
    failures = [f"{name}:\n{log}" for name, rc, log in results if rc != 0]
    assert not failures, "nvcc failed:\n" + "\n".join(failures)
    # one library of all objects: catches symbols defined in two files (e.g. a non-inline
    # __global__ in a shared header) and functions of kernels.h that no file defines
    objects = sorted(str(p) for p in tmp_path.glob("*.o"))
    link = subprocess.run(
        [NVCC, "-shared", "-arch=sm_90", "-o", str(tmp_path / "libkernels.so"), *objects],
        capture_output=True,
        text=True,
    )
    assert link.returncode == 0, "linking the CUDA objects failed:\n" + link.stdout + link.stderr
    missing = _kernels_h_functions() - _defined_symbols(tmp_path / "libkernels.so")
    assert not missing, f"kernels.h functions without a CUDA definition: {sorted(missing)}"


def _kernels_h_functions():
    """Names of the CUDA entry points declared in kernels.h (plus cuda_build_info)."""
    import re

    text = (CSRC / "kernels.h").read_text()
    names = set(re.findall(r"\b(\w+_cuda(?:_workspace_bytes)?)\(", text))
    return names | {"cuda_build_info"}


def _defined_symbols(library):
    out = subprocess.run(
        ["nm", "-D", "--defined-only", "-C", str(library)], capture_output=True, text=True
    ).stdout
    found = set()
    for line in out.splitlines():
        name = line.split(" ", 2)[-1]
        if name.startswith("pointops::"):
            found.add(name.split("::", 1)[1].split("(", 1)[0])
    return found


def test_binding_cuda_branch_compiles():
    from torch.utils import cpp_extension

    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None or sys.platform == "win32":
        pytest.skip("needs a Unix C++ compiler")
    includes = [f"-I{p}" for p in [str(CSRC), *cpp_extension.include_paths()]]
    sources = sorted((CSRC / "binding").glob("*.cpp"))
    assert sources
    for source in sources:
        cmd = [
            cxx,
            "-fsyntax-only",
            "-std=c++17",
            "-DPOINTOPS_WITH_CUDA=1",
            "-DTORCH_TARGET_VERSION=0x020a000000000000",
            *includes,
            str(source),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 0, f"{source.name}: {result.stderr}"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("nm") is None,
    reason="ELF symbol check (Linux, binutils)",
)
def test_binary_needs_only_stable_torch_symbols():
    so = pointops._EXTENSION_PATH
    out = subprocess.run(
        ["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True, check=True
    ).stdout
    symbols = [line.split()[-1] for line in out.splitlines() if line.strip()]
    torch_like = [s for s in symbols if not s.startswith(("_Z", "__", "_ITM", "_Unwind")) and "@" not in s]
    assert torch_like, "expected the torch C shim symbols"
    unstable = [s for s in torch_like if not s.startswith(("aoti_torch_", "torch_"))]
    assert not unstable, f"symbols outside the stable C shim: {unstable}"
    assert not [s for s in symbols if s.startswith(("_ZN3c10", "_ZN2at", "_ZN5torch"))]
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
    assert "libtorch_cuda" not in needed and "libc10_cuda" not in needed and "libcudart.so" not in needed


def test_build_info_describes_the_binary():
    info = pointops.build_info()
    assert info["torch_target_version"] == "2.10"
    assert info["python_abi"].startswith("abi3")
    assert isinstance(info["cuda"], bool) and info["compiler"]
    if info["cuda"]:
        assert info["cuda_version"] and info["sass_archs"]
        assert info["cuda_runtime_version"] // 1000 == int(info["cuda_version"].split(".")[0])
    else:
        assert info["cuda_runtime_version"] == 0 and info["sass_archs"] == [] and info["ptx_arch"] is None


def _setup_build_ext(tmp_path, env_changes):
    env = {**os.environ, **env_changes}
    cmd = [
        sys.executable,
        "setup.py",
        "-q",
        "build_ext",
        "--build-temp",
        str(tmp_path / "t"),
        "--build-lib",
        str(tmp_path / "l"),
    ]
    return subprocess.run(cmd, cwd=REPO / "ops-src", env=env, capture_output=True, text=True, timeout=300)


def test_setup_rejects_a_bad_pointops_cuda_value(tmp_path):
    result = _setup_build_ext(tmp_path, {"POINTOPS_CUDA": "yes"})
    assert result.returncode != 0
    assert "POINTOPS_CUDA='yes'" in result.stderr and "use 1" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_setup_rejects_a_bad_arch_list_before_compiling(tmp_path):
    result = _setup_build_ext(tmp_path, {"POINTOPS_CUDA": "1", "TORCH_CUDA_ARCH_LIST": "Hopper"})
    assert result.returncode != 0
    assert "TORCH_CUDA_ARCH_LIST: cannot read CUDA arch 'Hopper'" in result.stderr
    assert not list((tmp_path / "t").rglob("*.o"))


def test_wheel_is_tagged_abi3_for_python_310(tmp_path):
    env = {**os.environ, "POINTOPS_CUDA": "0"}
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        str(tmp_path),
        str(REPO / "ops-src"),
    ]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    wheels = [p.name for p in tmp_path.glob("*.whl")]
    assert len(wheels) == 1 and "-cp310-abi3-" in wheels[0], wheels


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("nm") is None,
    reason="ELF symbol check (Linux, binutils)",
)
def test_binary_loads_against_the_oldest_supported_torch():
    """Every torch symbol the binary needs is exported by torch 2.10's libtorch_cpu (list in
    data/), so building against newer headers cannot silently raise the minimum torch."""
    listed = (Path(__file__).with_name("data") / "torch_2_10_shim_symbols.txt").read_text().splitlines()
    available = {line.strip() for line in listed if line.strip() and not line.startswith("#")}
    out = subprocess.run(
        ["nm", "-D", "--undefined-only", str(pointops._EXTENSION_PATH)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    needed = {
        line.split()[-1]
        for line in out.splitlines()
        if line.split() and line.split()[-1].startswith(("aoti_torch_", "torch_"))
    }
    assert needed, "expected the torch C shim symbols"
    assert not needed - available, f"not in torch 2.10: {sorted(needed - available)}"
