"""Local conda channels shaped like conda-forge + our pointops channel, for solve tests.

The conda-forge packages (pytorch/libtorch cpu_/cuda1xx_ variants with their build-number
offsets, `__cuda`, `cuda-version` and `__glibc` dependencies, python and python_abi, noarch
cuda-version constraining `__cuda >=<major>`, the MSVC runtime, and their closure) come from
tests/data/conda_forge_metadata.yaml through tests/conda_forge_standins.py; this module adds the
pointops builds per variant constraining `__cuda_arch`. Packages are real (tiny) .tar.bz2 archives
indexed with py-rattler's index_fs, so records carry sha256/md5/size exactly as on a real channel.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import conda_forge_standins as standins  # noqa: E402

PYTHONS = {"3.12": "3.12.11", "3.13": "3.13.5", "3.14": "3.14.0"}
TORCH_VERSIONS = ("2.12.1", "2.13.0")
CUDA_VARIANTS = {"linux-64": ("cuda129", "cuda130"), "win-64": ("cuda128", "cuda130")}
POINTOPS_MIN_ARCH = {"cuda128": "5.0", "cuda129": "5.0", "cuda130": "7.5"}


def _hash(*parts: str) -> str:
    return "h" + hashlib.sha1("/".join(parts).encode()).hexdigest()[:8]


def _cuda(variant: str) -> tuple[int, int]:
    digits = variant[4:]
    return int(digits[:-1]), int(digits[-1])


def _record(name, version, build, build_number, subdir, depends=(), constrains=(), noarch=None) -> dict:
    return standins.record(name, version, build, subdir, build_number, depends, constrains, noarch=noarch)


def conda_forge_records(platforms=("linux-64", "win-64")) -> list[dict]:
    records = []
    for subdir in platforms:
        records += standins.conda_forge_records(subdir, PYTHONS, TORCH_VERSIONS, toolchain=False)
    unique = {(r["subdir"], r["name"], r["version"], r["build"]): r for r in records}
    return list(unique.values())


def pointops_records(platforms=("linux-64", "win-64"), variants=None) -> list[dict]:
    records = []
    for subdir in platforms:
        for variant in variants or ("cpu",) + CUDA_VARIANTS[subdir]:
            depends = ["python >=3.10", "pytorch >=2.10"]
            constrains = []
            if variant == "cpu":
                depends.append("pytorch * cpu*")
            else:
                major, minor = _cuda(variant)
                depends += [f"pytorch * {variant}*", f"cuda-version >={major}.{minor},<{major + 1}", "__cuda"]
                constrains.append(f"__cuda_arch >={POINTOPS_MIN_ARCH[variant]}")
            build = f"{variant}_{_hash('pointops', variant, subdir)}_0"
            records.append(
                _record("pointops", "0.1.0", build, 0, subdir, depends=depends, constrains=constrains)
            )
    return records


# linux-aarch64, as conda-forge's pytorch-cpu-feedstock builds it (recipe/meta.yaml, build.sh and
# .ci_support at 74dd3d46): generic BLAS only; CUDA 12.9 in two arm variants, sbsa (servers) and
# tegra (Jetson on JetPack 6, c_stdlib_version 2.34), CUDA 13.0 in sbsa only; the arm variant is
# not in the build string, only in the `arm-variant * <type>` run dependency (run-exported by the
# build requirements); __glibc floors from the sysroot run_export (2.17, 2.28 for CUDA 13, 2.34 for
# tegra). Build numbers: the recipe's build + 200 for CUDA (no mkl +100 here); 2.13.0 build 2
# added 8.7 to CUDA 13.0, so `cuda130_build` lets a channel hold only the builds before it. The
# noarch `arm-variant` package has builds "sbsa" and "tegra" (anaconda.org conda-forge/arm-variant,
# 1.2.0); its own dependencies were not read and are left empty.
AARCH64_BUILDS = (("cuda129", "sbsa", "2.17"), ("cuda129", "tegra", "2.34"), ("cuda130", "sbsa", "2.28"))
POINTOPS_AARCH64_MIN_ARCH = {"sbsa": {"cuda129": "5.0", "cuda130": "7.5"}, "tegra": {"cuda129": "8.7"}}


def linux_aarch64_records(cuda130_build: int = 2) -> list[dict]:
    """conda-forge-shaped linux-aarch64 records (pytorch 2.13.0), with the noarch packages they need."""
    subdir, torch = "linux-aarch64", "2.13.0"
    records = [
        _record("arm-variant", "1.2.0", variant, 0, "noarch", noarch="generic")
        for variant in ("sbsa", "tegra")
    ]
    for major, minor in ((12, 9), (13, 0)):
        records.append(
            _record(
                "cuda-version",
                f"{major}.{minor}",
                "h4f385c5_3",
                3,
                "noarch",
                constrains=[f"__cuda >={major}", f"cudatoolkit {major}.{minor}|{major}.{minor}.*"],
                noarch="generic",
            )
        )
    for name, version in (("filelock", "3.18.0"), ("sympy", "1.14.0")):
        records.append(
            _record(name, version, "pyhd8ed1ab_0", 0, "noarch", depends=["python >=3.9"], noarch="python")
        )
    for py, full in PYTHONS.items():
        tag = "cp" + py.replace(".", "")
        records.append(
            _record("python_abi", py, f"8_{tag}", 8, subdir, constrains=[f"python {py}.* *_{tag}"])
        )
        records.append(
            _record("python", full, f"h9e4cc4f_100_{tag}", 100, subdir, depends=["__glibc >=2.17,<3.0.a0"])
        )
    builds = [("cpu", None, "2.17", 2)] + [
        (variant, arm, glibc, (cuda130_build if variant == "cuda130" else 2) + 200)
        for variant, arm, glibc in AARCH64_BUILDS
    ]
    for variant, arm, glibc, number in builds:
        extra = [f"__glibc >={glibc},<3.0.a0"]
        if arm:
            major, cminor = _cuda(variant)
            extra += [f"cuda-version >={major}.{cminor},<{major + 1}", f"arm-variant * {arm}"]
        lib_build = f"{variant}_generic_{_hash('libtorch', torch, variant, str(arm), subdir)}_{number}"
        records.append(
            _record(
                "libtorch",
                torch,
                lib_build,
                number,
                subdir,
                depends=extra,
                constrains=[f"pytorch {torch} {variant}_generic_*_{number}"],
            )
        )
        for py in PYTHONS:
            tag = "py" + py.replace(".", "")
            next_minor = f"3.{int(py.split('.')[1]) + 1}"
            depends = [
                f"libtorch {torch} {lib_build}",
                f"python >={py},<{next_minor}.0a0",
                f"python_abi {py}.* *_cp{py.replace('.', '')}",
                "filelock",
                "sympy >=1.13.3",
            ] + extra
            if arm:
                depends.append("__cuda")
            build = (
                f"{variant}_generic_{tag}_{_hash('pytorch', torch, variant, str(arm), py, subdir)}_{number}"
            )
            records.append(
                _record(
                    "pytorch",
                    torch,
                    build,
                    number,
                    subdir,
                    depends=depends,
                    constrains=["pytorch-gpu <0.0a0" if variant == "cpu" else "pytorch-cpu <0.0a0"],
                )
            )
    return records


def pointops_aarch64_records() -> list[dict]:
    """pointops for linux-aarch64 as recipes/pointops renders it, plus the tegra build (CUDA 12.9, 8.7+PTX)."""
    subdir = "linux-aarch64"
    records = [
        _record(
            "pointops",
            "0.1.0",
            f"cpu_{_hash('pointops', 'cpu', subdir)}_0",
            0,
            subdir,
            depends=["python >=3.10", "pytorch >=2.10", "pytorch * cpu*", "__glibc >=2.17,<3.0.a0"],
        )
    ]
    for variant, arm, glibc in AARCH64_BUILDS:
        major, minor = _cuda(variant)
        depends = [
            "python >=3.10",
            "pytorch >=2.10",
            f"pytorch * {variant}*",
            f"cuda-version >={major}.{minor},<{major + 1}",
            "__cuda",
            f"arm-variant * {arm}",
            f"__glibc >={glibc},<3.0.a0",
        ]
        build = f"{variant}_{_hash('pointops', variant, arm, subdir)}_200"
        records.append(
            _record(
                "pointops",
                "0.1.0",
                build,
                200,
                subdir,
                depends=depends,
                constrains=[f"__cuda_arch >={POINTOPS_AARCH64_MIN_ARCH[arm][variant]}"],
            )
        )
    return records


def write_channel(root: Path, records: list[dict]) -> Path:
    """Write the records as packages under root/<subdir>/ and index them with py-rattler."""
    return standins.write_channel(root, records)


def write_large_repodata(root: Path, count: int, seed: int = 7) -> Path:
    """A channel of `count` records (realistic variants plus filler packages), written as
    repodata.json directly: the benchmark measures solving, not archive building."""
    rng = random.Random(seed)
    records = conda_forge_records(("linux-64",)) + pointops_records(("linux-64",))
    fillers = max(0, count - len(records))
    names = [f"pkg-{i:04d}" for i in range(max(1, fillers // 20))]
    for i in range(fillers):
        name = names[i % len(names)]
        version = f"{1 + i // len(names) // 5}.{(i // len(names)) % 5}.0"
        dep = names[rng.randrange(len(names))]
        depends = ["python >=3.10"] + ([f"{dep} >=1.0"] if dep != name and rng.random() < 0.3 else [])
        records.append(_record(name, version, f"py_{i}", 0, "linux-64", depends=depends))
    by_subdir: dict[str, dict] = {}
    for record in records:
        subdir = record["subdir"]
        entry = {k: v for k, v in record.items() if k != "run_exports"}
        digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
        entry.update(sha256=digest, md5=digest[:32], size=1000)
        file_name = f"{record['name']}-{record['version']}-{record['build']}.tar.bz2"
        by_subdir.setdefault(subdir, {})[file_name] = entry
    for subdir in ("noarch", "linux-64"):
        (root / subdir).mkdir(parents=True, exist_ok=True)
        repodata = {
            "info": {"subdir": subdir},
            "packages": by_subdir.get(subdir, {}),
            "packages.conda": {},
            "repodata_version": 1,
        }
        (root / subdir / "repodata.json").write_text(json.dumps(repodata))
    return root
