"""Fixtures for the recipe and channel tests (helpers live in recipe_stub_channels.py and
standin_toolchain.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recipe_stub_channels import dependency_channel


@pytest.fixture(scope="session")
def win_dependency_channel(tmp_path_factory) -> Path:
    """What the win-64 recipe needs from conda-forge to resolve its build and host environments."""
    return dependency_channel(tmp_path_factory.mktemp("win-deps"), ("win-64",))


@pytest.fixture(scope="session")
def linux_dependency_channel(tmp_path_factory) -> Path:
    """What the linux-64 and linux-aarch64 recipes need from conda-forge."""
    return dependency_channel(tmp_path_factory.mktemp("linux-deps"), ("linux-64", "linux-aarch64"))
