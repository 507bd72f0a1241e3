"""Where an installed distribution came from (dist-info as pip, uv and conda write it) and the
commands that put it back: never a dependency install, always an absolute path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.doctor_checks.dists import (
    DistOrigin,
    RecordedFile,
    damaged_files,
    read_origin,
    rebuild_command,
    reinstall_command,
    source_command,
)
from solver.doctor_checks.facts import Facts, PointopsFacts
from solver.doctor_checks.pointops_owners import find_installs, rebuild_pointops, reinstall_pointops


def dist_info(site: Path, installer: str = "pip", direct_url: dict | None = None, record: str = "") -> Path:
    meta = site / "pointops-0.1.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.4\nName: pointops\nVersion: 0.1.0\n")
    (meta / "INSTALLER").write_text(installer + "\n")
    (meta / "RECORD").write_text(record or "pointops/__init__.py,,\n")
    if direct_url is not None:
        (meta / "direct_url.json").write_text(json.dumps(direct_url))
    return meta


def test_a_wheel_file_is_reinstalled_from_that_file_while_it_exists(tmp_path):
    wheel = tmp_path / "my wheels" / "pointops-0.1.0-cp310-abi3-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    origin = read_origin(dist_info(tmp_path / "site", direct_url={"url": wheel.as_uri(), "archive_info": {}}))
    assert (origin.kind, origin.location, origin.location_exists) == ("wheel", str(wheel), True)
    assert reinstall_command(origin) == f"pip install --no-deps --force-reinstall '{wheel}'"
    wheel.unlink()
    origin = read_origin(tmp_path / "site" / "pointops-0.1.0.dist-info")
    assert (
        reinstall_command(origin)
        == 'pip install --no-deps --force-reinstall --no-cache-dir "pointops==0.1.0"'
    )


@pytest.mark.parametrize("editable", [False, True])
def test_a_source_folder_is_rebuilt_from_that_folder(tmp_path, editable):
    source = tmp_path / "ops-src"
    source.mkdir()
    direct_url = {"url": source.as_uri(), "dir_info": {"editable": True} if editable else {}}
    origin = read_origin(dist_info(tmp_path / "site", direct_url=direct_url))
    assert origin.kind == ("editable" if editable else "source")
    flag = "-e " if editable else ""
    assert (
        reinstall_command(origin)
        == f"pip install --no-deps --no-build-isolation --force-reinstall {flag}{source}"
    )
    assert rebuild_command(origin, "/usr/bin/g++") == (
        f"CXX=/usr/bin/g++ pip install --no-deps --no-build-isolation --force-reinstall {flag}{source}"
    )


def test_an_index_install_a_conda_install_and_a_vcs_install(tmp_path):
    index = read_origin(dist_info(tmp_path / "a"))
    assert index.kind == "index" and index.installer == "pip"
    assert rebuild_command(index, "/usr/bin/g++") == (
        "CXX=/usr/bin/g++ pip install --no-deps --no-build-isolation --force-reinstall --no-cache-dir "
        '--no-binary pointops "pointops==0.1.0"'
    )
    conda = read_origin(dist_info(tmp_path / "b", installer="conda"))
    assert (
        reinstall_command(conda)
        == rebuild_command(conda, "/usr/bin/g++")
        == ('conda install --force-reinstall "pointops=0.1.0"')
    )
    vcs = {"url": "https://github.com/x/pointops", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}
    origin = read_origin(dist_info(tmp_path / "c", direct_url=vcs))
    assert reinstall_command(origin) == (
        'pip install --no-deps --no-build-isolation --force-reinstall "pointops @ git+https://github.com/x/pointops@abc123"'
    )
    broken = dist_info(tmp_path / "d")
    (broken / "direct_url.json").write_text("{not json")
    assert read_origin(broken).kind == "index"
    assert read_origin(tmp_path / "nowhere.dist-info") is None


def test_damaged_compiled_files_are_named(tmp_path):
    site = tmp_path / "site"
    (site / "pointops").mkdir(parents=True)
    (site / "pointops" / "_C.abi3.so").write_bytes(b"x" * 10)
    (site / "pointops" / "ok.so").write_bytes(b"x" * 4)
    record = [
        RecordedFile("pointops/__init__.py", 99),
        RecordedFile("pointops/_C.abi3.so", 4096),
        RecordedFile("pointops/ok.so", 4),
        RecordedFile("pointops/gone.cpython-311-x86_64-linux-gnu.so", 5),
        RecordedFile("../../bin/tool.so", 1),
    ]
    assert damaged_files(site, record) == (
        "pointops/_C.abi3.so is 10 bytes, 4096 when installed",
        "pointops/gone.cpython-311-x86_64-linux-gnu.so is missing",
    )


def test_commands_quote_paths():
    assert source_command("/home/me/my src", "/opt/gcc 13/g++", editable=True) == (
        "CXX='/opt/gcc 13/g++' pip install --no-deps --no-build-isolation --force-reinstall -e '/home/me/my src'"
    )


def test_pointops_fixes_follow_the_imported_installation(tmp_path):
    site = tmp_path / "site"
    (site / "pointops").mkdir(parents=True)
    for name in ("__init__.py", "packed.py", "_build_info.py"):
        (site / "pointops" / name).write_text("")
    (site / "pointops" / "_build_info.json").write_text('{"built_against_torch": "2.13.0+cpu"}')
    dist_info(site, installer="conda")
    installs = find_installs([site])
    assert installs[0].built_against_torch == "2.13.0+cpu" and installs[0].origin.kind == "conda"
    facts = Facts(pointops=PointopsFacts(installed=True, path=installs[0].path), pointops_installs=installs)
    assert reinstall_pointops(facts) == 'conda install --force-reinstall "pointops=0.1.0"'
    checkout = tmp_path / "ops-src"
    source_tree = Facts(
        pointops=PointopsFacts(installed=True, path=str(checkout / "pointops"), source_tree=str(checkout))
    )
    assert reinstall_pointops(source_tree) == (
        f"pip install --no-deps --no-build-isolation --force-reinstall -e {checkout}  (builds the extension in place)"
    )
    assert rebuild_pointops(source_tree, "/usr/bin/g++").startswith("CXX=/usr/bin/g++ pip install --no-deps")
    unknown = Facts(pointops=PointopsFacts(installed=True, path="/elsewhere/pointops"))
    assert "--no-deps" in reinstall_pointops(unknown) and "./" not in reinstall_pointops(unknown)


def test_an_editable_install_found_through_its_pth_file_is_rebuilt_in_place(tmp_path):
    site, checkout = tmp_path / "site", tmp_path / "checkout" / "ops-src"
    (checkout / "pointops").mkdir(parents=True)
    for name in ("__init__.py", "packed.py", "_build_info.py"):
        (checkout / "pointops" / name).write_text("")
    site.mkdir()
    (site / "__editable__.pointops-0.1.0.pth").write_text(f"{checkout}\n")
    [install] = find_installs([site])
    assert install.origin == DistOrigin(
        "pointops", "", kind="editable", location=str(checkout), location_exists=True
    )
    facts = Facts(pointops=PointopsFacts(installed=True, path=install.path), pointops_installs=[install])
    assert (
        reinstall_pointops(facts)
        == f"pip install --no-deps --no-build-isolation --force-reinstall -e {checkout}"
    )


def test_a_finder_based_editable_install_is_found_through_its_direct_url(tmp_path):
    """setuptools' editable installs put an import hook, not a path, in their .pth: the dist-info's
    direct_url.json names the checkout."""
    site, checkout = tmp_path / "site", tmp_path / "checkout" / "ops-src"
    (checkout / "pointops").mkdir(parents=True)
    for name in ("__init__.py", "packed.py", "_build_info.py"):
        (checkout / "pointops" / name).write_text("")
    dist_info(site, direct_url={"url": checkout.as_uri(), "dir_info": {"editable": True}}, record="x.pth,,\n")
    (site / "__editable__.pointops-0.1.0.pth").write_text("import __editable___pointops_0_1_0_finder; x()\n")
    [install] = find_installs([site])
    assert install.path == str((checkout / "pointops").resolve()) and install.kind == "this project"
    assert install.source == "an editable install of pointops 0.1.0"


def test_every_check_reads_the_distributions_read_once(tmp_path, monkeypatch):
    """read_installed() reads each metadata folder once; conda, pointops, extension and ELF gathering
    take its result and open no METADATA or RECORD of their own."""
    from doctor_helpers import conda_pytorch_env, write_dist

    from solver.doctor_checks import dists
    from solver.doctor_checks.conda_env import gather_conda, site_packages_dirs
    from solver.doctor_checks.imports import discover_extensions
    from solver.doctor_checks.libstdcxx import gather_binaries

    prefix = conda_pytorch_env(tmp_path / "env")
    site = write_dist(
        prefix, "oldext", "0.3.1", "pip", ["torch>=2.4"], ["oldext/__init__.py", "oldext/_C.so"]
    )
    (site / "oldext").mkdir()
    (site / "oldext" / "_C.so").write_bytes(b"")
    dist_info(site, installer="pip", record="pointops/__init__.py,,\npointops/_C.abi3.so,,\n")
    (site / "pointops").mkdir()
    (site / "pointops" / "__init__.py").write_text("")
    site_dirs = site_packages_dirs(prefix)
    installed = dists.read_installed(site_dirs)
    assert [d.name for d in installed] == ["oldext", "pointops", "torch"]

    def no_second_read(path):
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(dists.Distribution, "at", staticmethod(no_second_read))
    conda = gather_conda(prefix, installed)
    assert [(d.name, d.installer) for d in conda.dists] == [
        ("oldext", "pip"),
        ("pointops", "pip"),
        ("torch", "conda"),
    ]
    [install] = find_installs(site_dirs, installed)
    assert install.source == "the distribution pointops 0.1.0" and install.origin.installer == "pip"
    assert [(m.module, m.distribution) for m in discover_extensions(installed)] == [
        ("oldext", "oldext"),
        ("pointops", "pointops"),
    ]
    assert gather_binaries(site_dirs, installed) == []  # no point-cloud package folder holds a binary


def test_an_egg_info_torch_over_conda_pytorch_is_seen(tmp_path):
    """`python setup.py install` of torch writes an egg-info, not a dist-info: it shadows conda's
    pytorch all the same."""
    from doctor_helpers import SITE, conda_pytorch_env

    from solver.doctor_checks.conda_env import gather_conda, pip_shadowing_findings

    prefix = conda_pytorch_env(tmp_path)
    for meta in (prefix / SITE).glob("torch-*.dist-info"):
        for f in meta.iterdir():
            f.unlink()
        meta.rmdir()
    egg = prefix / SITE / "torch-2.6.0a0+git1234-py3.11.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0a0+git1234\n")
    conda = gather_conda(prefix)
    assert [(d.name, d.version) for d in conda.dists] == [("torch", "2.6.0a0+git1234")]
    [finding] = [f for f in pip_shadowing_findings(conda) if f.check == "conda.pip-shadowing"]
    assert finding.status == "fail" and "torch 2.6.0a0+git1234 from an unknown installer" in finding.summary
