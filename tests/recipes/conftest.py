"""Fixtures for the recipe and channel tests (helpers live in recipe_stub_channels.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recipe_stub_channels import WIN_BUILD_DEPENDENCIES, index, linux_build_dependencies, write_stub_package


@pytest.fixture(scope="session")
def win_dependency_channel(tmp_path_factory) -> Path:
    """What the win-64 recipe needs from conda-forge to resolve its build and host environments."""
    channel = tmp_path_factory.mktemp("win-deps")
    for subdir, name, version, build, number, depends, run_exports in WIN_BUILD_DEPENDENCIES:
        write_stub_package(channel, subdir, name, version, build, number, depends, run_exports)
    index(channel)
    return channel


@pytest.fixture(scope="session")
def linux_dependency_channel(tmp_path_factory) -> Path:
    """What the linux-64 and linux-aarch64 recipes need from conda-forge."""
    channel = tmp_path_factory.mktemp("linux-deps")
    packages = linux_build_dependencies("linux-64") + linux_build_dependencies("linux-aarch64")
    written = set()
    for subdir, name, version, build, number, depends, run_exports in packages:
        if (subdir, name, version, build) not in written:  # the noarch ones appear twice
            written.add((subdir, name, version, build))
            write_stub_package(channel, subdir, name, version, build, number, depends, run_exports)
    index(channel)
    return channel
