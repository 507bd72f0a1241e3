"""The stand-ins of conda-forge's packages (tests/conda_forge_standins.py) are as strict as the
real ones: their records, and the packages written from them, carry the depends, constrains and
run_exports that tests/data/conda_forge_metadata.yaml records from the feedstocks."""

from __future__ import annotations

import io
import json
import tarfile

import conda_forge_standins as standins
import pytest

META = standins.metadata()
PYTHONS = {"3.11": "3.11.7"}


def by_name(records, name):
    return [r for r in records if r["name"] == name]


@pytest.fixture(scope="module", params=["linux-64", "linux-aarch64", "win-64"])
def records(request):
    return request.param, standins.conda_forge_records(request.param, PYTHONS, ("2.10.0", "2.13.0"))


def test_every_package_cites_a_source():
    sources = set(META["sources"])
    for name, spec in META["packages"].items():
        if isinstance(spec, dict) and "depends" in spec:
            assert spec.get("source") in sources, name


def test_cuda_pytorch_needs_a_driver_and_cpu_pytorch_does_not(records):
    subdir, recs = records
    for rec in by_name(recs, "pytorch"):
        cuda = not rec["build"].startswith("cpu_")
        assert ("__cuda" in rec["depends"]) == cuda, rec["build"]
        assert any(d.startswith("cuda-version >=") for d in rec["depends"]) == cuda
        assert any(d.startswith("libtorch " + rec["version"]) for d in rec["depends"])
        assert rec["constrains"] == (
            [f"pytorch-gpu {rec['version']}", "pytorch-cpu <0.0a0"]
            if cuda
            else [f"pytorch-cpu {rec['version']}", "pytorch-gpu <0.0a0"]
        )
        minor = rec["version"].rsplit(".", 1)[0]
        nxt = f"{minor.split('.')[0]}.{int(minor.split('.')[1]) + 1}"
        assert rec["run_exports"] == {
            "weak": [f"pytorch >={rec['version']},<{nxt}.0a0", f"libtorch >={rec['version']},<{nxt}.0a0"]
        }
        # build numbers: +200 CUDA, +100 mkl on top of the release's build
        base = META["packages"]["pytorch_releases"][rec["version"]]["build"]
        assert rec["build_number"] == base + (200 if cuda else 0) + (100 if "_mkl_" in rec["build"] else 0)
        if subdir == "win-64":
            assert "_mkl_" in rec["build"]  # conda-forge's Windows pytorch is mkl only


def test_pytorch_2_10_and_2_13_differ_as_their_recipes_do(records):
    _, recs = records
    old = by_name([r for r in recs if r["version"] == "2.10.0"], "pytorch")[0]
    new = by_name([r for r in recs if r["version"] == "2.13.0"], "pytorch")[0]
    assert "mpmath <1.4" in old["depends"] and "setuptools <82" in new["depends"]


def test_cuda_version_constrains_the_driver_major(records):
    _, recs = records
    for rec in by_name(recs, "cuda-version"):
        major = rec["version"].split(".")[0]
        assert f"__cuda >={major}" in rec["constrains"] and rec.get("noarch") == "generic"


def test_nvcc_exports_cuda_version_per_platform(records):
    subdir, recs = records
    (nvcc, *rest) = by_name(recs, f"cuda-nvcc_{subdir}")
    for rec in [nvcc, *rest]:
        cuda = ".".join(rec["version"].split(".")[:2])
        strong = rec["run_exports"]["strong"]
        assert strong[0] == f"cuda-version >={cuda},<{int(cuda.split('.')[0]) + 1}"
        assert ("arm-variant * sbsa" in strong) == (subdir == "linux-aarch64")
        assert any(d.startswith(f"cuda-cudart-dev_{subdir} {cuda}") for d in rec["depends"])


def test_cudart_dev_pulls_the_static_runtime_and_exports_the_shared_one(records):
    subdir, recs = records
    for rec in by_name(recs, "cuda-cudart-dev"):
        assert f"cuda-cudart-static {rec['version']} h0_0" in rec["depends"]
        cuda = ".".join(rec["version"].split(".")[:2])
        exported = rec.get("run_exports", {}).get("weak", [])
        # conda-forge dropped the Windows run_export with CUDA 13.0
        assert bool(exported) == (subdir != "win-64" or cuda != "13.0"), (subdir, cuda)
    for rec in by_name(recs, f"cuda-cudart-static_{subdir}"):
        assert rec.get("noarch") == "generic"


def test_python_abi3_exports_its_support_package(records):
    subdir, recs = records
    (abi3,) = by_name(recs, "python-abi3")
    assert abi3["run_exports"] == {"weak": ["_python_abi3_support 1.*", "cpython >=3.11"]}
    assert abi3["depends"] == [
        "python 3.11.*",
        "_python_abi3_support",
        "__win" if subdir == "win-64" else "__unix",
    ]


def test_the_windows_compiler_exports_the_msvc_runtime(records):
    subdir, recs = records
    if subdir != "win-64":
        pytest.skip("Windows only")
    for name in ("vs2022_win-64", "vs_win-64"):
        (rec,) = by_name(recs, name)
        assert rec["run_exports"] == {
            "strong": ["vc >=14.3,<15", "vc14_runtime >=14.44.35208", "ucrt >=10.0.20348.0"]
        }
    (runtime,) = by_name(recs, "vc14_runtime")
    assert "ucrt >=10.0.20348.0" in runtime["depends"]


def test_the_linux_toolchain_exports_its_runtimes(records):
    subdir, recs = records
    if subdir == "win-64":
        pytest.skip("Linux only")
    for rec in by_name(recs, f"gxx_{subdir}"):
        major = rec["version"].split(".")[0]
        assert rec["run_exports"] == {"strong": [f"libstdcxx >={major}", f"libgcc >={major}"]}
    assert {r["version"]: r["run_exports"]["strong"] for r in by_name(recs, f"sysroot_{subdir}")} == {
        "2.17": ["__glibc >=2.17,<3.0.a0"],
        "2.28": ["__glibc >=2.28,<3.0.a0"],
    }


def canonical(specs) -> list[str]:
    from rattler import MatchSpec

    return [str(MatchSpec(s)) for s in specs]


def test_written_packages_carry_the_records(tmp_path):
    recs = standins.conda_forge_records("linux-64", PYTHONS, ("2.13.0",), ["13.0"])
    channel = standins.write_channel(tmp_path, recs)
    repodata = {}
    for subdir in ("linux-64", "noarch"):
        repodata.update(json.loads((channel / subdir / "repodata.json").read_text())["packages"])
    assert len(repodata) == len(recs)
    for rec in recs:
        filename = f"{rec['name']}-{rec['version']}-{rec['build']}.tar.bz2"
        entry = repodata[filename]
        assert canonical(entry["depends"]) == canonical(rec["depends"]), filename
        assert canonical(entry.get("constrains", [])) == canonical(rec["constrains"]), filename
        with tarfile.open(channel / rec["subdir"] / filename) as tar:
            members = {m.name: m for m in tar.getmembers()}
            if rec.get("run_exports"):
                exported = json.load(io.BytesIO(tar.extractfile(members["info/run_exports.json"]).read()))
                assert exported == rec["run_exports"], filename
            else:
                assert "info/run_exports.json" not in members
