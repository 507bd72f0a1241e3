"""extensions.libstdcxx (issue 43): a point-cloud extension that carries its own libstdc++ (built
with -static-libstdc++) or needs a newer GLIBCXX than the libstdc++ torch loads. Real shared
objects compiled here with g++, installed as packages with dist-info records; the loaded
libstdc++ read from a real probe child."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from broken_envs import Venv, torch_provider
from doctor_helpers import doctor, findings_of

from solver.doctor_checks.dists import DistOrigin
from solver.doctor_checks.facts import (
    BinaryFact,
    CondaFacts,
    Facts,
    LibstdcxxFacts,
    PointopsFacts,
)
from solver.doctor_checks.gather import run_runtime_probe
from solver.doctor_checks.libstdcxx import check_libstdcxx, gather_binaries, gather_libstdcxx
from solver.doctor_checks.pointops_owners import PointopsInstall
from solver.elf import read_elf

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF shared objects")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build shared objects")

SOURCE = """
#include <sstream>
#include <stdexcept>
#include <string>
extern "C" const char* describe(int value) {
  static std::string text;
  std::ostringstream out;
  out << "bad value " << value;
  text = out.str();
  return text.c_str();
}
"""
SYSTEM_LIBSTDCXX_VERSIONS = ["GLIBCXX_3.4", "GLIBCXX_3.4.29", "GLIBCXX_3.4.30", "CXXABI_1.3", "CXXABI_1.3.13"]


def compile_into(target: Path, *flags: str) -> Path:
    source = target.parent / "describe.cpp"
    target.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(SOURCE)
    subprocess.run(["g++", "-shared", "-fPIC", *flags, "-o", str(target), str(source)], check=True)
    source.unlink()
    return target


def needing_a_newer_glibcxx(path: Path) -> str:
    """Rewrite the newest GLIBCXX_3.4.NN it needs into GLIBCXX_3.4.99, which no libstdc++ defines
    (what a newer compiler leaves in a binary); returns that version."""
    needed = [
        v for v in read_elf(path).needed_versions["libstdc++.so.6"] if re.fullmatch(r"GLIBCXX_3\.4\.\d\d", v)
    ]
    if not needed:
        pytest.skip("this g++ needs no two-digit GLIBCXX_3.4.NN version to rewrite")
    path.write_bytes(path.read_bytes().replace(needed[0].encode(), b"GLIBCXX_3.4.99"))
    return "GLIBCXX_3.4.99"


def install_extension(site: Path, dist: str, module_file: str, *flags: str) -> Path:
    """A distribution `dist` 2.1.0 in `site` that requires torch and ships `module_file`, compiled
    with `flags` and loaded by its package's __init__.py (through ctypes: it is a plain library)."""
    binary = compile_into(site / module_file, *flags)
    (site / dist / "__init__.py").write_text(
        f"import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), {Path(module_file).name!r}))\n"
    )
    meta = site / f"{dist}-2.1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 2.1.0\nRequires-Dist: torch>=2.0\n"
    )
    (meta / "INSTALLER").write_text("pip\n")
    (meta / "RECORD").write_text(f"{dist}/__init__.py,,\n{module_file},,{binary.stat().st_size}\n")
    return binary


@needs_gxx
def test_a_static_libstdcxx_fails_and_a_dynamic_one_passes(tmp_path):
    site = tmp_path / "site"
    static = install_extension(site, "mmcv", "mmcv/_ext.cpython-311-x86_64-linux-gnu.so", "-static-libstdc++")
    install_extension(site, "torch_cluster", "torch_cluster/_grid_cpu.so")
    binaries = gather_binaries([site])
    assert sorted(b.package for b in binaries) == ["mmcv", "torch_cluster"]
    facts = Facts(platform="linux-64", binaries=binaries)
    [finding] = check_libstdcxx(facts, None)
    assert finding.status == "fail" and finding.check == "extensions.libstdcxx"
    assert finding.summary.startswith(f"{static} (mmcv 2.1.0) carries its own libstdc++")
    assert "libstdc++.so.6 is not in its DT_NEEDED" in finding.evidence and "_ZNSo" in finding.evidence
    assert "exported in its dynamic symbol table" in finding.evidence
    # mmcv's fix is the channel's build of the same version, never a pip build of mmcv's sdist
    assert finding.fix == (
        'solver make-env --gpu auto --with "mmcv=2.1.0" > env.yml && conda env create -f env.yml  '
        "(a conda environment with the channel's mmcv 2.1.0 and the torch it was built for)"
    )
    static.unlink()
    [finding] = check_libstdcxx(Facts(platform="linux-64", binaries=gather_binaries([site])), None)
    assert finding.status == "pass" and finding.summary.startswith("1 point-cloud extension file(s)")


@needs_gxx
def test_symbols_hidden_by_exclude_libs_are_found_in_the_symbol_table(tmp_path):
    path = compile_into(
        tmp_path / "pointnet2_batch_cuda.cpython-311-x86_64-linux-gnu.so",
        "-static-libstdc++",
        "-Wl,--exclude-libs,ALL",
    )
    [binary] = gather_binaries([tmp_path])
    assert binary.path == str(path) and binary.carried and not binary.exports_carried
    [finding] = check_libstdcxx(Facts(platform="linux-64", binaries=[binary]), None)
    assert finding.status == "fail" and "(in its symbol table)" in finding.evidence


def test_a_needed_version_newer_than_the_loaded_libstdcxx_fails():
    binary = BinaryFact(
        "/env/site-packages/pointnet2_ops/_ext.so",
        "pointnet2_ops",
        DistOrigin(
            "pointnet2_ops", "3.0.0", "pip", "source", "/src/Pointnet2_PyTorch/pointnet2_ops_lib", True
        ),
        needs_libstdcxx=True,
        needed_versions=["GLIBCXX_3.4", "GLIBCXX_3.4.32", "CXXABI_1.3.15"],
    )
    loaded = LibstdcxxFacts("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", SYSTEM_LIBSTDCXX_VERSIONS)
    [finding] = check_libstdcxx(Facts(platform="linux-64", binaries=[binary], libstdcxx=loaded), None)
    assert finding.status == "fail"
    assert "needs GLIBCXX_3.4.32, CXXABI_1.3.15, newer than the libstdc++" in finding.summary
    assert finding.evidence == (
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30 provides up to GLIBCXX_3.4.30 and CXXABI_1.3.13"
    )
    assert "CXX=/usr/bin/g++ pip install --no-deps --no-build-isolation --force-reinstall " in finding.fix
    assert finding.fix.endswith(
        "/src/Pointnet2_PyTorch/pointnet2_ops_lib; or install a pointnet2_ops built by conda-forge or its own channel"
    )
    binary.needed_versions = ["GLIBCXX_3.4.29"]  # within what is provided
    assert [f.status for f in check_libstdcxx(Facts(binaries=[binary], libstdcxx=loaded), None)] == ["pass"]


def test_in_a_conda_environment_the_compiler_is_the_environments(tmp_path):
    prefix = tmp_path / "env"
    binary = BinaryFact(
        str(prefix / "lib/python3.11/site-packages/pointops/_C.abi3.so"),
        "pointops",
        carried=["_ZNSo5flushEv"],
    )
    install = PointopsInstall(
        str(prefix / "lib/python3.11/site-packages/pointops"),
        "the distribution pointops 0.1.0",
        "this project",
        ("pointops 0.1.0",),
        DistOrigin("pointops", "0.1.0", "pip", "source", "/home/me/pointops/ops-src", True),
    )
    facts = Facts(
        platform="linux-64",
        binaries=[binary],
        conda=CondaFacts(prefix=prefix),
        libstdcxx=LibstdcxxFacts(str(prefix / "lib/libstdc++.so.6.0.34"), ["GLIBCXX_3.4.34"]),
        pointops=PointopsFacts(installed=True, path=install.path),
        pointops_installs=[install],
    )
    [finding] = check_libstdcxx(facts, None)
    assert finding.fix == (
        "rebuild it with the compiler that matches this libstdc++ (conda install gxx first): "
        f"CXX={prefix}/bin/g++ pip install --no-deps --no-build-isolation --force-reinstall "
        "/home/me/pointops/ops-src; or conda install pointops from the project's channel"
    )


def test_the_probe_reports_the_libstdcxx_torch_loads_and_its_versions_are_read(tmp_path):
    torch, _, _ = run_runtime_probe(sys.executable, [], {"PATH": "/usr/bin:/bin"}, timeout_s=120)
    assert torch.importable, torch.import_error
    assert Path(torch.libstdcxx).name.startswith("libstdc++.so.6") and Path(torch.libstdcxx).is_file()
    loaded = gather_libstdcxx(torch.libstdcxx)
    assert loaded.error == "" and "GLIBCXX_3.4" in loaded.versions and "CXXABI_1.3" in loaded.versions
    assert all(re.fullmatch(r"(GLIBCXX|CXXABI)_[\d.]+", v) for v in loaded.versions)
    assert gather_libstdcxx("").path == "" and gather_libstdcxx(str(tmp_path / "none")).error


@needs_gxx
def test_doctor_finds_both_in_a_real_environment(tmp_path):
    """A venv whose torch loads the system libstdc++, with mmcv built with -static-libstdc++ and
    pointnet2_ops needing a GLIBCXX no libstdc++ has: two failures, and the import failure of
    pointnet2_ops points to the one that explains it."""
    venv = Venv(tmp_path / "env")
    venv.add_torch(torch_provider(tmp_path / "torch-provider"))
    install_extension(venv.site, "mmcv", "mmcv/_ext.cpython-311-x86_64-linux-gnu.so", "-static-libstdc++")
    needing = install_extension(
        venv.site, "pointnet2_ops", "pointnet2_ops/_ext.cpython-311-x86_64-linux-gnu.so"
    )
    version = needing_a_newer_glibcxx(needing)
    done = doctor("--json", "--prefix", str(venv.root), env_updates={"HOME": str(tmp_path)})
    assert done.returncode == 1, done.stderr
    found = findings_of(done.stdout)
    failures = {f["summary"].split(" ")[0]: f for f in found["extensions.libstdcxx"] if f["status"] == "fail"}
    assert set(failures) == {str(venv.site / "mmcv/_ext.cpython-311-x86_64-linux-gnu.so"), str(needing)}
    assert f"needs {version}" in failures[str(needing)]["summary"]
    assert "provides up to GLIBCXX_3.4." in failures[str(needing)]["evidence"]
    [imported] = [f for f in found["extensions.import"] if f["summary"].startswith("pointnet2_ops")]
    assert imported["status"] == "info" and "extensions.libstdcxx" in imported["summary"]
    assert f"version `{version}' not found" in imported["evidence"]


@needs_gxx
def test_an_editable_mmcv_built_with_a_static_libstdcxx_is_scanned_in_its_checkout(tmp_path):
    """`MMCV_WITH_OPS=1 pip install -e .` builds _ext inside the checkout, outside site-packages: it is
    scanned there, and the fix rebuilds that checkout with the compiler of the loaded libstdc++ (or
    takes the channel's build)."""
    import json

    venv = Venv(tmp_path / "env")
    venv.add_torch(torch_provider(tmp_path / "torch-provider"))
    checkout = tmp_path / "mmcv-src"
    ext = compile_into(checkout / "mmcv" / "_ext.cpython-311-x86_64-linux-gnu.so", "-static-libstdc++")
    (checkout / "mmcv" / "__init__.py").write_text("__version__ = '2.1.0'\n")
    meta = venv.site / "mmcv-2.1.0.dist-info"  # what pip writes for an editable install
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: mmcv\nVersion: 2.1.0\n")
    (meta / "INSTALLER").write_text("pip\n")
    (meta / "direct_url.json").write_text(
        json.dumps({"url": checkout.as_uri(), "dir_info": {"editable": True}})
    )
    (meta / "RECORD").write_text("__editable__.mmcv-2.1.0.pth,,\nmmcv-2.1.0.dist-info/METADATA,,\n")
    (venv.site / "__editable__.mmcv-2.1.0.pth").write_text(f"{checkout}\n")
    done = doctor("--json", "--prefix", str(venv.root), env_updates={"HOME": str(tmp_path)})
    [failure] = [f for f in findings_of(done.stdout)["extensions.libstdcxx"] if f["status"] == "fail"]
    assert failure["summary"].startswith(f"{ext} carries its own libstdc++")
    assert failure["fix"].startswith('solver make-env --gpu auto --with "mmcv=2.1.0"')
    assert failure["fix"].endswith(
        f"; or rebuild it from {checkout} with this libstdc++'s compiler: CXX=/usr/bin/g++ MMCV_WITH_OPS=1 "
        f"pip install --no-deps --no-build-isolation --force-reinstall -e {checkout}"
    )
