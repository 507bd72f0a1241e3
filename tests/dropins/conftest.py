"""Fixtures for the pointnet2_ops drop-in (ops-src/dropins/pointnet2_ops): its source on sys.path
for the in-process tests, the wheel built from it, and that wheel installed into a --target
directory for the child interpreters that import it as users do."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import peers
import pytest
from pointnet2_dropin import DROPIN, pip

if importlib.util.find_spec("pointops") is None:
    # without pointops (pip install ./ops-src --no-build-isolation) there is nothing to serve
    collect_ignore_glob = ["test_*.py"]
else:
    # the source tree's package, never another pointnet2_ops installed here (e.g. the compiled one)
    sys.path.insert(0, str(DROPIN))


@pytest.fixture(scope="session")
def pointnet2_ops_wheel(tmp_path_factory) -> Path:
    """`pip wheel --no-deps` of a copy of the distribution's folder (the build writes build/ and
    an egg-info beside the sources). No build isolation: the setuptools here builds it offline."""
    tmp = tmp_path_factory.mktemp("pointnet2_ops-wheel")
    source = tmp / "src"
    shutil.copytree(DROPIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"), str(source), cwd=tmp)
    (wheel,) = (tmp / "dist").glob("pointnet2_ops-*.whl")
    return wheel


@pytest.fixture(scope="session")
def pointnet2_ops_site(pointnet2_ops_wheel, tmp_path_factory) -> Path:
    """The wheel installed with `pip install --no-deps --target`: a site directory holding
    pointnet2_ops and nothing else (pointops comes from this interpreter's environment)."""
    site = tmp_path_factory.mktemp("pointnet2_ops-site")
    pip("install", "--no-deps", "-q", "--target", str(site), str(pointnet2_ops_wheel), cwd=site)
    return site


@pytest.fixture(scope="module")
def peer() -> Path:
    """Pointnet2_PyTorch's checkout (tests/helpers/peers.py), or a skip that says how to fetch it."""
    found = peers.peer_checkout("Pointnet2_PyTorch")
    if found is None:
        pytest.skip(peers.missing_reason("Pointnet2_PyTorch"))
    return found
