"""Local conda channels of metadata-only packages, for the recipe and channel tests.

No conda channel is reachable from CI, so the packages the recipe resolves against are stand-ins
that carry only metadata (info/index.json, info/run_exports.json). Their versions and
run_exports are conda-forge's, as recorded in shared/reference/conda-forge.md (vc-feedstock for
vs2022, cuda-nvcc, pytorch, cuda-cudart-dev) and conda-forge's python-abi3 feedstock.
"""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from pathlib import Path

# (subdir, name, version, build, build_number, depends, run_exports)
VS2022_RUN_EXPORTS = {"strong": ["vc >=14.3,<15", "vc14_runtime >=14.44.35208", "ucrt >=10.0.20348.0"]}
TORCH_RUN_EXPORTS = {"weak": ["pytorch >=2.10,<2.11.0a0", "libtorch >=2.10,<2.11.0a0"]}

WIN_BUILD_DEPENDENCIES = [
    ("win-64", "vs2022_win-64", "19.44.35207", "h0", 0, [], VS2022_RUN_EXPORTS),
    ("win-64", "vs_win-64", "2022.14", "h0", 0, [], VS2022_RUN_EXPORTS),
    ("win-64", "vc", "14.3", "h0", 0, [], None),
    ("win-64", "vc14_runtime", "14.44.35208", "h0", 0, [], None),
    ("win-64", "ucrt", "10.0.22621.0", "h0", 0, [], None),
    ("win-64", "cuda-nvcc_win-64", "12.8.93", "h0", 0, [], {"strong": ["cuda-version >=12.8,<13"]}),
    ("win-64", "cuda-nvcc_win-64", "13.0.88", "h0", 0, [], {"strong": ["cuda-version >=13.0,<14"]}),
    ("win-64", "ninja", "1.13.1", "h0", 0, [], None),
    ("win-64", "python", "3.10.18", "h0_cpython", 0, [], {"weak": ["python_abi 3.10.* *_cp310"]}),
    ("noarch", "python-abi3", "3.10", "h0", 0, ["python 3.10.*"],
     {"weak": ["_python_abi3_support 1.*", "cpython >=3.10"]}),
    ("noarch", "pip", "25.2", "h0", 0, [], None),
    ("noarch", "setuptools", "80.9.0", "h0", 0, [], None),
    ("noarch", "wheel", "0.45.1", "h0", 0, [], None),
    ("win-64", "pytorch", "2.10.0", "cpu_mkl_py310_h0_100", 100, ["python >=3.10,<3.11.0a0"], TORCH_RUN_EXPORTS),
    ("win-64", "pytorch", "2.10.0", "cuda128_mkl_py310_h0_300", 300,
     ["python >=3.10,<3.11.0a0", "cuda-version >=12.8,<13"], TORCH_RUN_EXPORTS),
    ("win-64", "pytorch", "2.10.0", "cuda130_mkl_py310_h0_300", 300,
     ["python >=3.10,<3.11.0a0", "cuda-version >=13.0,<14"], TORCH_RUN_EXPORTS),
    ("noarch", "cuda-version", "12.8", "h0", 0, [], None),
    ("noarch", "cuda-version", "13.0", "h0", 0, [], None),
    ("win-64", "cuda-cudart-dev", "12.8.90", "h0", 0, ["cuda-version >=12.8,<12.9"],
     {"weak": ["cuda-cudart >=12.8.90,<13.0a0"]}),
    ("win-64", "cuda-cudart-dev", "13.0.96", "h0", 0, ["cuda-version >=13.0,<13.1"],
     {"weak": ["cuda-cudart >=13.0.96,<14.0a0"]}),
    ("win-64", "cuda-cudart-static", "12.8.90", "h0", 0, ["cuda-version >=12.8,<12.9"], None),
    ("win-64", "cuda-cudart-static", "13.0.96", "h0", 0, ["cuda-version >=13.0,<13.1"], None),
]


def write_stub_package(channel: Path, subdir: str, name: str, version: str, build: str, build_number: int = 0,
                       depends: list[str] | tuple = (), run_exports: dict | None = None) -> Path:
    """A .tar.bz2 conda package holding only metadata (no files)."""
    target = channel / subdir
    target.mkdir(parents=True, exist_ok=True)
    index = {"name": name, "version": version, "build": build, "build_number": build_number,
             "depends": list(depends), "subdir": subdir, "license": "BSD-3-Clause"}
    if subdir != "noarch":
        index["platform"], index["arch"] = {"win-64": ("win", "x86_64"), "linux-64": ("linux", "x86_64"),
                                            "linux-aarch64": ("linux", "aarch64"), "osx-64": ("osx", "x86_64"),
                                            "osx-arm64": ("osx", "arm64")}[subdir]
    path = target / f"{name}-{version}-{build}.tar.bz2"
    with tarfile.open(path, "w:bz2") as tar:
        members = {"info/index.json": index, "info/paths.json": {"paths": [], "paths_version": 1}}
        if run_exports:
            members["info/run_exports.json"] = run_exports
        for member, content in members.items():
            data = json.dumps(content).encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def index(channel: Path) -> None:
    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False))


def linux_build_dependencies(subdir: str) -> list[tuple]:
    """What the linux recipe needs to resolve its environments. cuda-nvcc's strong run_export is
    cuda-version >=X.Y,<X+1, plus `arm-variant * sbsa` on aarch64 (conda-forge.md, section 4.2)."""
    arm = ["arm-variant * sbsa"] if subdir == "linux-aarch64" else []
    packages = [
        (subdir, f"gcc_{subdir}", "14.3.0", "h0", 0, [], None),
        (subdir, f"gxx_{subdir}", "14.3.0", "h0", 0, [], None),
        (subdir, f"sysroot_{subdir}", "2.17", "h0", 0, [], None),
        (subdir, f"sysroot_{subdir}", "2.28", "h0", 0, [], None),
        (subdir, f"cuda-nvcc_{subdir}", "12.9.86", "h0", 0, [], {"strong": ["cuda-version >=12.9,<13", *arm]}),
        (subdir, f"cuda-nvcc_{subdir}", "13.0.88", "h0", 0, [], {"strong": ["cuda-version >=13.0,<14", *arm]}),
        (subdir, "ninja", "1.13.1", "h0", 0, [], None),
        (subdir, "python", "3.10.18", "h0_cpython", 0, [], {"weak": ["python_abi 3.10.* *_cp310"]}),
        ("noarch", "python-abi3", "3.10", "h0", 0, ["python 3.10.*"],
         {"weak": ["_python_abi3_support 1.*", "cpython >=3.10"]}),
        ("noarch", "pip", "25.2", "h0", 0, [], None),
        ("noarch", "setuptools", "80.9.0", "h0", 0, [], None),
        ("noarch", "wheel", "0.45.1", "h0", 0, [], None),
        ("noarch", "cuda-version", "12.9", "h0", 0, [], None),
        ("noarch", "cuda-version", "13.0", "h0", 0, [], None),
        (subdir, "pytorch", "2.10.0", "cpu_generic_py310_h0_0", 0, ["python >=3.10,<3.11.0a0"], TORCH_RUN_EXPORTS),
    ]
    if arm:
        packages.append((subdir, "arm-variant", "1.0.0", "sbsa", 0, [], None))
    for cuda, upper in (("12.9", "13"), ("13.0", "14")):
        tag = "cuda" + cuda.replace(".", "")
        packages += [
            (subdir, "pytorch", "2.10.0", f"{tag}_generic_py310_h0_200", 200,
             ["python >=3.10,<3.11.0a0", f"cuda-version >={cuda},<{upper}"], TORCH_RUN_EXPORTS),
            (subdir, "cuda-cudart-dev", f"{cuda}.79", "h0", 0, [f"cuda-version >={cuda},<{cuda}.1"],
             {"weak": [f"cuda-cudart >={cuda}.79,<{upper}.0a0"]}),
            (subdir, "cuda-cudart-static", f"{cuda}.79", "h0", 0, [f"cuda-version >={cuda},<{cuda}.1"], None),
        ]
    return packages
