"""Fixtures for the recipe and channel tests (helpers live in recipe_stub_channels.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recipe_stub_channels import WIN_BUILD_DEPENDENCIES, index, write_stub_package


@pytest.fixture(scope="session")
def win_dependency_channel(tmp_path_factory) -> Path:
    """What the win-64 recipe needs from conda-forge to resolve its build and host environments."""
    channel = tmp_path_factory.mktemp("win-deps")
    for subdir, name, version, build, number, depends, run_exports in WIN_BUILD_DEPENDENCIES:
        write_stub_package(channel, subdir, name, version, build, number, depends, run_exports)
    index(channel)
    return channel
