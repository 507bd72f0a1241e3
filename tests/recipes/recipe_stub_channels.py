"""Local conda channels of metadata-only packages for the recipe and channel tests.

No conda channel is reachable from CI, so the packages the recipe resolves against are stand-ins
with conda-forge's metadata (depends, constrains, run_exports), generated from
tests/data/conda_forge_metadata.yaml by tests/conda_forge_standins.py. They hold no files: these
channels serve solves (render with a solve), not builds (standin_toolchain.py does those).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import conda_forge_standins as standins  # noqa: E402

# The recipe builds with python_min (conda_build_config.yaml); 3.10.18 is conda-forge's last 3.10.
PYTHON_MIN = {"3.10": "3.10.18"}


def dependency_channel(root: Path, platforms: tuple[str, ...], torch_versions=("2.10.0", "2.13.0")) -> Path:
    """What the recipe's build and host environments need on `platforms`, from conda-forge."""
    records = []
    for subdir in platforms:
        records += standins.conda_forge_records(subdir, PYTHON_MIN, torch_versions)
    unique = {(r["subdir"], r["name"], r["version"], r["build"]): r for r in records}
    return standins.write_channel(root, list(unique.values()))


def write_stub_package(
    channel: Path,
    subdir: str,
    name: str,
    version: str,
    build: str,
    build_number: int = 0,
    depends: list[str] | tuple = (),
    run_exports: dict | None = None,
) -> None:
    """One metadata-only package (for tests that need a channel of a few hand-made records);
    call index() afterwards."""
    rec = standins.record(name, version, build, subdir, build_number, depends, run_exports=run_exports)
    target = Path(channel) / subdir
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{name}-{version}-{build}.tar.bz2").write_bytes(standins.package_archive(rec, None))


def index(channel: Path) -> None:
    import asyncio

    from rattler.index import index_fs

    (Path(channel) / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(Path(channel), write_zst=False, write_shards=False))
