"""The source distribution of ops-src (what `python -m build --sdist` makes, and what `pip install`
builds from on a machine no wheel fits) holds every file of the build and builds a working
pointops (CPU here; a CUDA torch with nvcc builds the kernels from the same files)."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

OPS_SRC = Path(__file__).resolve().parents[2] / "ops-src"


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    # a clean copy: setuptools would reuse the file list of an egg-info left in the tree
    source = out / "src"
    shutil.copytree(
        OPS_SRC, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "*.so", "__pycache__")
    )
    # what `python -m build --sdist --no-isolation` calls (PEP 517), without needing `build`
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))",
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def _tracked_build_files() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "csrc", "pointops", "setup.py", "pyproject.toml", "cxx_runtime_check.py"],
        cwd=OPS_SRC,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {name for name in listed if not name.endswith(".md")}


def test_the_sdist_holds_every_source_of_the_build(sdist):
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        names = {name.removeprefix(root + "/") for name in archive.getnames()}
    missing = sorted(_tracked_build_files() - names)
    assert not missing, f"the sdist lacks {missing}: add them to ops-src/MANIFEST.in"


@pytest.mark.slow
def test_a_wheel_built_from_the_sdist_works(sdist, tmp_path):
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    (source,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    site = tmp_path / "site"
    env = dict(os.environ, POINTOPS_CUDA="0", MAX_JOBS=str(os.cpu_count() or 1))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--target", str(site), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-3000:]
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, pointops; x = torch.rand(2, 50, 3); "
            "print(pointops.furthest_point_sample(x, 8).shape, pointops.build_info()['cuda'])",
        ],
        env=dict(os.environ, PYTHONPATH=str(site)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["torch.Size([2,", "8])", "False"]
