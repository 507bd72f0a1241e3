"""A CUDA 12 pointops wheel for the device proof of the pip wheels (issue 22): does a CUDA 12
build, its runtime linked statically, work beside a CUDA 13 torch, through the driver?

    python tests/gpu/cuda12_proof_wheel.py WORK_DIR OUT_DIR [--archs 9.0] [--toolkit WORK_DIR/cuda-12]

The published pointops-cu12 is built with nvcc 12.9 (`solver wheels build pointops-cu12`, in the
wheel workflow): its arch list reaches sm_100 and sm_120. No CUDA 12 nvcc of that age exists on
this machine kind: the `nvidia-cuda-nvcc-cu12` wheels of the package index hold ptxas and libnvvm
but no nvcc. Debian trixie's nvidia-cuda-toolkit (12.4.1) has one; this script downloads its
packages with a private apt state (nothing is installed), lays them out as a CUDA_HOME, and builds
ops-src with it for --archs only (12.4 compiles up to sm_90). The wheel is then repaired and named
as `solver wheels build` does (pointops-cu12), but it is not the published artifact: its build
info records CUDA 12.4 and the archs, and `solver wheels check` would refuse it for that.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from solver.wheels.build import repair_linux, run_step  # noqa: E402
from solver.wheels.naming import parse_wheel_name  # noqa: E402
from solver.wheels.rename import rename_wheel  # noqa: E402

SUITE = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main contrib non-free\n"
PACKAGES = (
    "nvidia-cuda-toolkit",  # nvcc, cicc, libdevice
    "nvidia-cuda-dev",  # headers, libcudart_static.a, libcudadevrt.a, ptxas, fatbinary, nvlink
    "libcu++-dev",
    "libcub-dev",
    "libthrust-dev",
)
# nvcc.profile of the laid-out toolkit: the layout of NVIDIA's own installs
PROFILE = """TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
"""


def download(work: Path) -> Path:
    """The packages' .deb files, fetched with apt-get's own state under work/apt."""
    apt = work / "apt"
    debs = work / "debs"
    for d in (apt / "lists" / "partial", apt / "cache" / "archives" / "partial", debs):
        d.mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(SUITE)
    options = [
        f"-oDir::Etc::sourcelist={apt / 'sources.list'}",
        "-oDir::Etc::sourceparts=/dev/null",
        f"-oDir::State={apt}",
        f"-oDir::Cache={apt / 'cache'}",
        "-oDir::State::status=/var/lib/dpkg/status",
    ]
    subprocess.run(["apt-get", *options, "update", "-qq"], check=True)
    subprocess.run(["apt-get", *options, "download", *PACKAGES], check=True, cwd=debs)
    return debs


def lay_out(debs: Path, work: Path) -> Path:
    """Unpack the packages and arrange bin/, nvvm/, include/, lib64/ as a CUDA_HOME."""
    root = work / "root"
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    home = work / "cuda-12"
    shutil.rmtree(home, ignore_errors=True)
    toolkit, usr_bin, libs = (
        root / "usr/lib/nvidia-cuda-toolkit",
        root / "usr/bin",
        root / "usr/lib/x86_64-linux-gnu",
    )
    (home / "bin").mkdir(parents=True)
    (home / "nvvm" / "bin").mkdir(parents=True)
    (home / "lib64" / "stubs").mkdir(parents=True)
    shutil.copy2(toolkit / "bin" / "nvcc", home / "bin")
    shutil.copytree(toolkit / "bin" / "crt", home / "bin" / "crt")
    for tool in ("ptxas", "fatbinary", "nvlink", "cuobjdump"):
        shutil.copy2(usr_bin / tool, home / "bin")
    shutil.copy2(toolkit / "bin" / "cicc", home / "nvvm" / "bin")
    shutil.copytree(toolkit / "libdevice", home / "nvvm" / "libdevice")
    (home / "include").symlink_to(root / "usr" / "include")
    for name in ("libcudart_static.a", "libcudadevrt.a", "libculibos.a"):
        shutil.copy2(libs / name, home / "lib64")
    shutil.copy2(libs / "stubs" / "libcuda.so", home / "lib64" / "stubs")
    (home / "bin" / "nvcc.profile").write_text(PROFILE)
    return home


def build(home: Path, archs: str, out: Path, jobs: int | None) -> Path:
    env = {
        **os.environ,
        "CUDA_HOME": str(home),
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "POINTOPS_CUDA": "1",
        "TORCH_CUDA_ARCH_LIST": archs,
    }
    env.pop("CF_TORCH_CUDA_ARCH_LIST", None)
    if jobs:
        env["MAX_JOBS"] = str(jobs)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pointops-cu12-proof-") as tmp:
        tree = Path(tmp) / "src"
        shutil.copytree(
            REPO / "ops-src", tree, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so")
        )
        dist = Path(tmp) / "dist"
        pip = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(dist)]
        run_step([*pip, str(tree)], env, "pip wheel ops-src (CUDA 12)")
        (built,) = dist.glob("*.whl")
        repaired = repair_linux(built, Path(tmp) / "repaired", env)
        return rename_wheel(repaired, "pointops-cu12", out, parse_wheel_name(repaired.name).platform)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="where the packages are downloaded and unpacked")
    parser.add_argument("out", type=Path, help="where the wheel is written")
    parser.add_argument("--archs", default="9.0", help="TORCH_CUDA_ARCH_LIST (default: %(default)s)")
    parser.add_argument("--jobs", type=int)
    parser.add_argument(
        "--toolkit", type=Path, help="a CUDA_HOME laid out by an earlier run (WORK/cuda-12): no download"
    )
    args = parser.parse_args()
    work = args.work.resolve()
    home = args.toolkit.resolve() if args.toolkit else lay_out(download(work), work)
    wheel = build(home, args.archs, args.out.resolve(), args.jobs)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
