"""doctor on mmcv's classic failures (issue 46), each in a real virtual environment: wheels of a
stand-in mmcv (a real compiled _ext) and mmdet installed by pip, torch from this test environment.
Each report names the cause by the message users see, and a fix that never brings another torch:
the channel's mmcv built for the installed torch, pip only with --no-deps."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest
from broken_envs import Venv, torch_provider
from doctor_helpers import doctor, findings_of, h200_driver
from mmcv_envs import (
    EXT_SUFFIX,
    LOADABLE_EXT,
    OLD_TORCH_EXT,
    OLD_TORCH_SYMBOL,
    compile_cuda,
    compile_ext,
    mmcv_files,
    mmdet_files,
    needs_gxx,
    needs_nvcc,
    write_wheel,
)

from solver.doctor_checks.dists import DistOrigin, read_installed
from solver.doctor_checks.facts import CondaFacts, CondaRecord, Facts, ImportFact, TorchFacts
from solver.doctor_checks.mmcv import built_for_torch, check_mmcv, gather_mmcv, import_finding

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux venv and ELF files")
MAKE_ENV = 'solver make-env --gpu auto --with "mmcv={}" > env.yml && conda env create -f env.yml'


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Path:
    return torch_provider(tmp_path_factory.mktemp("torch-provider") / "site")


@pytest.fixture(scope="module")
def torch_version() -> str:
    import torch

    return torch.__version__


def venv_with(root: Path, provider: Path, *wheels: Path) -> Venv:
    venv = Venv(root)
    for wheel in wheels:
        venv.pip_install("--no-deps", str(wheel))
    venv.add_torch(provider)
    return venv


def report(venv: Venv, home: Path, pythonpath: list[str] | None = None) -> tuple[int, dict]:
    done = doctor(
        "--json", "--prefix", str(venv.root), env_updates={"HOME": str(home)}, pythonpath=pythonpath
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, findings_of(done.stdout)


def finding(found: dict, module: str) -> dict:
    [only] = [f for f in found["extensions.import"] if f["summary"].startswith(f"{module} ")]
    return only


def assert_no_pip_install_with_deps(fix: str) -> None:
    for command in fix.split("&&"):
        if "pip install" in command:
            assert "--no-deps" in command, fix


# ---------------------------------------------------------------- No module named 'mmcv._ext'


@linux
def test_mmcv_lite_is_named_as_the_mmcv_without_ops(provider, tmp_path):
    wheel = write_wheel(tmp_path / "wheels", "mmcv-lite", "2.2.0", mmcv_files("2.2.0"))
    venv = venv_with(tmp_path / "env", provider, wheel)
    assert "No module named 'mmcv._ext'" in venv.run("import mmcv.ops").stderr

    status, found = report(venv, tmp_path)
    assert status == 1
    ops = finding(found, "mmcv.ops")
    assert ops["status"] == "fail"
    assert "mmcv-lite is mmcv without its compiled ops" in ops["summary"]
    assert "No module named 'mmcv._ext'" in ops["evidence"]
    assert ops["fix"] == MAKE_ENV.format("2.2.0") + (
        "  (a conda environment with the channel's mmcv 2.2.0 and the torch it was built for)"
    )


@linux
def test_an_mmcv_built_without_ops_says_so(provider, tmp_path):
    wheel = write_wheel(tmp_path / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0"))
    venv = venv_with(tmp_path / "env", provider, wheel)
    _, found = report(venv, tmp_path)
    ops = finding(found, "mmcv.ops")
    assert ops["status"] == "fail"
    assert "built without its compiled ops (MMCV_WITH_OPS=0): its RECORD lists no mmcv/_ext" in ops["summary"]
    assert ops["fix"].startswith(MAKE_ENV.format("2.1.0"))


@linux
@needs_gxx
def test_a_deleted_ext_is_put_back_from_the_wheel_it_came_from(provider, tmp_path):
    ext = compile_ext(tmp_path / "build", LOADABLE_EXT)
    wheel = write_wheel(tmp_path / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0", ext))
    venv = venv_with(tmp_path / "env", provider, wheel)
    assert venv.run("import mmcv.ops").returncode == 0
    (venv.site / "mmcv" / f"_ext{EXT_SUFFIX}").unlink()

    _, found = report(venv, tmp_path)
    ops = finding(found, "mmcv.ops")
    assert ops["status"] == "fail" and "its compiled ops were deleted after install" in ops["summary"]
    assert f"mmcv/_ext{EXT_SUFFIX} is in its RECORD but missing" in ops["evidence"]
    assert ops["fix"] == f"pip install --no-deps --force-reinstall {wheel}"


@linux
@needs_gxx
def test_an_ext_made_for_another_python_is_named_with_both_pythons(provider, tmp_path):
    ext = compile_ext(tmp_path / "build", LOADABLE_EXT)
    other = "_ext.cpython-310-x86_64-linux-gnu.so"
    wheel = write_wheel(tmp_path / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0", ext, other))
    venv = venv_with(tmp_path / "env", provider, wheel)
    _, found = report(venv, tmp_path)
    ops = finding(found, "mmcv.ops")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert ops["status"] == "fail"
    assert f"its _ext is made for Python 3.10, and this environment's Python is {python}" in ops["summary"]
    assert other in ops["evidence"]


@linux
def test_a_source_checkout_on_the_path_hiding_the_installed_mmcv_is_named(provider, tmp_path):
    installed = write_wheel(tmp_path / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0"))
    venv = venv_with(tmp_path / "env", provider, installed)
    checkout = tmp_path / "mmcv-src"
    for path, text in mmcv_files("2.1.0").items():
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_text(text)
    _, found = report(venv, tmp_path, pythonpath=[str(checkout)])
    ops = finding(found, "mmcv.ops")
    assert ops["status"] == "fail"
    assert ops["summary"].startswith(
        f"mmcv.ops (mmcv 2.1.0): `import mmcv` gets {checkout / 'mmcv'}, not the installed {venv.site / 'mmcv'}"
    )
    assert ops["fix"] == f"run from another folder, or take {checkout} out of PYTHONPATH"


# ---------------------------------------------------------------- undefined symbol: another torch


@linux
@needs_gxx
def test_an_ext_built_for_another_torch_names_both_torch_versions(provider, tmp_path, torch_version):
    """Installed from OpenMMLab's wheel index for torch 2.1 (pip records the address it came from);
    the _ext needs c10::Error's constructor of torch 1.x/2.1's old std::string ABI."""
    ext = compile_ext(tmp_path / "build", OLD_TORCH_EXT, "-D_GLIBCXX_USE_CXX11_ABI=0")
    index = tmp_path / "download.openmmlab.com" / "mmcv" / "dist" / "cu121" / "torch2.1.0"
    wheel = write_wheel(index, "mmcv", "2.1.0", mmcv_files("2.1.0", ext))
    venv = venv_with(tmp_path / "env", provider, wheel)
    assert f"undefined symbol: {OLD_TORCH_SYMBOL}" in venv.run("import mmcv.ops").stderr

    status, found = report(venv, tmp_path)
    assert status == 1
    ops = finding(found, "mmcv.ops")
    assert ops["status"] == "fail"
    assert (
        f"its _ext was built for torch 2.1, and this environment has torch {torch_version}" in ops["summary"]
    )
    assert f"undefined symbol {OLD_TORCH_SYMBOL}" in ops["evidence"]
    assert f"it was installed from {wheel}" in ops["evidence"]
    assert ops["fix"].startswith(MAKE_ENV.format("2.1.0"))
    assert "pip install" not in ops["fix"]


def _abi_result(version: str = "2.1.0", location: str = "") -> tuple[ImportFact, Facts]:
    from solver.doctor_checks.facts import MmcvFacts, MmcvInstall

    origin = DistOrigin("mmcv", version, "pip", "url" if location else "index", location)
    install = MmcvInstall(
        "/env/lib/python3.12/site-packages/mmcv", "mmcv", version, origin, ext_files=["_ext.so"]
    )
    error = (
        f"ImportError: /env/lib/python3.12/site-packages/mmcv/_ext.so: undefined symbol: {OLD_TORCH_SYMBOL}"
    )
    result = ImportFact("mmcv.ops", "mmcv", version, error=error, origin=origin)
    torch = TorchFacts(importable=True, version="2.13.0+cu130", cuda="13.0")
    return result, Facts(torch=torch, mmcv=MmcvFacts(installs=[install]), imports=[result])


def test_the_torch_an_ext_was_built_for_is_read_from_every_place_it_is_recorded():
    result, facts = _abi_result()
    assert built_for_torch(facts.mmcv.installs[0], facts) == ("", "")
    summary = import_finding(result, facts).summary
    assert (
        "built for another torch than the installed torch 2.13.0+cu130 (its metadata does not say which)"
        in summary
    )

    result, facts = _abi_result("2.1.0+pt21cu121")
    assert built_for_torch(facts.mmcv.installs[0], facts) == ("2.1", "its version 2.1.0+pt21cu121")

    # the channel's conda package, for torch 2.12, in an environment whose pytorch 2.13 conda installed
    facts.mmcv.installs[0].origin = DistOrigin("mmcv", "2.1.0", "conda", "conda")
    facts.conda = CondaFacts(
        prefix=Path("/env"),
        records=[
            CondaRecord("mmcv", "2.1.0", "cuda130_torch212_py312_h1a2b3c4_200", ["pytorch 2.12.* cuda*"]),
            CondaRecord("pytorch", "2.13.0", "cuda130_generic_py312_h0_300"),
        ],
    )
    assert built_for_torch(facts.mmcv.installs[0], facts) == (
        "2.12",
        "its conda package mmcv-2.1.0-cuda130_torch212_py312_h1a2b3c4_200 needs pytorch 2.12.* cuda*",
    )
    finding = import_finding(result, facts)
    assert "its _ext was built for torch 2.12, and this environment has torch 2.13.0+cu130" in finding.summary
    # conda owns this pytorch: the channel's build for it goes into this environment
    assert finding.fix == (
        'conda install -c pointops -c conda-forge "mmcv=2.1.0=cuda*_torch213_*"  '
        "(the channel's mmcv 2.1.0 built for this torch)"
    )
    facts.conda.records[0] = CondaRecord("mmcv", "2.1.0", "cuda130_torch213_py312_h1a2b3c4_200")
    assert (
        "built for torch 2.13 like the installed torch 2.13.0+cu130" in import_finding(result, facts).summary
    )


def test_in_a_conda_environment_a_pip_mmcv_is_replaced_by_the_channels_build():
    from solver.doctor_checks.facts import MmcvFacts, MmcvInstall

    origin = DistOrigin("mmcv-lite", "2.2.0", "pip")
    lite = MmcvInstall(
        "/env/lib/python3.12/site-packages/mmcv", "mmcv-lite", "2.2.0", origin, others=["mmcv 2.1.0"]
    )
    result = ImportFact(
        "mmcv.ops", "mmcv-lite", "2.2.0", error="ModuleNotFoundError: No module named 'mmcv._ext'"
    )
    facts = Facts(
        torch=TorchFacts(importable=True, version="2.12.1", cuda=None),
        conda=CondaFacts(
            prefix=Path("/env"), records=[CondaRecord("pytorch", "2.12.1", "cpu_generic_py312_h0_0")]
        ),
        mmcv=MmcvFacts(installs=[lite]),
    )
    found = import_finding(result, facts)
    assert "mmcv-lite is mmcv without its compiled ops" in found.summary
    assert "mmcv 2.1.0 also installed into /env/lib/python3.12/site-packages/mmcv" in found.evidence
    assert found.fix == (
        'pip uninstall -y mmcv-lite mmcv && conda install -c pointops -c conda-forge "mmcv=2.2.0=cpu_torch212_*"  '
        "(the channel's mmcv 2.2.0 built for this torch)"
    )
    [overlap] = check_mmcv(facts, None)
    assert overlap.check == "mmcv.installations" and overlap.status == "warn"


def test_a_missing_symbol_of_the_standard_library_or_of_mmcv_itself_is_not_called_a_torch_mismatch():
    result, facts = _abi_result()
    std = result.error.replace(OLD_TORCH_SYMBOL, "_ZNSt15__exception_ptr13exception_ptr9_M_addrefEv")
    own = result.error.replace(
        OLD_TORCH_SYMBOL, "_Z30pyramid_deformable_im2col_cudaN2at6TensorES0_iiiiiiiiiiiiiffiiS0_"
    )
    assert "C++ standard library symbol" in import_finding(ImportFact("mmcv.ops", error=std), facts).summary
    assert "an incomplete build" in import_finding(ImportFact("mmcv.ops", error=own), facts).summary


# ---------------------------------------------------------------- mmdet: "MMCV==X is used but incompatible"


@linux
@needs_gxx
def test_mmdet_refusing_the_installed_mmcv_gets_a_version_in_its_range(provider, tmp_path):
    ext = compile_ext(tmp_path / "build", LOADABLE_EXT)
    mmcv = write_wheel(tmp_path / "wheels", "mmcv", "2.2.0", mmcv_files("2.2.0", ext))
    requirement = 'mmcv<2.2.0,>=2.0.0rc4; extra == "mim"'
    mmdet = write_wheel(
        tmp_path / "wheels", "mmdet", "3.3.0", mmdet_files("2.0.0rc4", "2.2.0"), [requirement]
    )
    venv = venv_with(tmp_path / "env", provider, mmcv, mmdet)
    message = "MMCV==2.2.0 is used but incompatible. Please install mmcv>=2.0.0rc4, <2.2.0."
    assert f"AssertionError: {message}" in venv.run("import mmdet").stderr

    status, found = report(venv, tmp_path)
    assert status == 1
    assert finding(found, "mmcv.ops")["status"] == "pass"
    mmdet_finding = finding(found, "mmdet")
    assert mmdet_finding["status"] == "fail"
    assert mmdet_finding["summary"] == (
        "mmdet (mmdet 3.3.0) refuses the installed mmcv 2.2.0: it needs mmcv>=2.0.0rc4,<2.2.0"
    )
    assert f'"{message}"' in mmdet_finding["evidence"]
    assert (
        f"mmdet's METADATA: Requires-Dist {requirement.replace(chr(34), chr(39))}"
        in mmdet_finding["evidence"]
    )
    assert "installed: mmcv 2.2.0 (pip)" in mmdet_finding["evidence"]
    assert mmdet_finding["fix"].startswith(MAKE_ENV.format("2.1.0"))


def test_an_mmengine_out_of_range_is_a_no_deps_pip_fix():
    from solver.doctor_checks.facts import MmcvDependent, MmcvFacts

    message = "MMEngine==0.6.0 is used but incompatible. Please install mmengine>=0.7.1, <1.0.0."
    result = ImportFact("mmdet", "mmdet", "3.3.0", error=f"AssertionError: {message}")
    facts = Facts(
        mmcv=MmcvFacts(dependents=[MmcvDependent("mmdet", "mmdet", "3.3.0", "mmcv<2.2.0,>=2.0.0rc4")])
    )
    found = import_finding(result, facts)
    assert (
        found.summary
        == "mmdet (mmdet 3.3.0) refuses the installed mmengine 0.6.0: it needs mmengine>=0.7.1,<1.0.0"
    )
    assert found.fix == 'pip install --no-deps "mmengine>=0.7.1,<1.0.0"'


def test_a_range_the_channel_does_not_build_says_so_and_builds_without_deps():
    from solver.doctor_checks.facts import MmcvDependent, MmcvFacts

    message = "MMCV==2.1.0 is used but incompatible. Please install mmcv>=1.3.8, <=1.8.0."
    result = ImportFact("mmpose", "mmpose", "0.29.0", error=f"AssertionError: {message}")
    dependent = MmcvDependent("mmpose", "mmpose", "0.29.0", "mmcv-full<=1.8.0,>=1.3.8")
    found = import_finding(result, Facts(mmcv=MmcvFacts(dependents=[dependent])))
    assert found.fix == (
        "the channel builds mmcv 2.1.0 and 2.2.0, none in >=1.3.8,<=1.8.0: build mmcv-full from source "
        "against this torch: MMCV_WITH_OPS=1 pip install --no-deps --no-build-isolation --no-binary mmcv-full "
        '"mmcv-full>=1.3.8,<=1.8.0"'
    )
    assert_no_pip_install_with_deps(found.fix)


# ---------------------------------------------------------------- "no kernel image is available"


def _cuda_facts(site: Path) -> Facts:
    facts = Facts(
        platform="linux-64",
        driver=h200_driver(),
        torch=TorchFacts(importable=True, version="2.11.0+cu130", cuda="13.0", cuda_available=True),
    )
    facts.mmcv = gather_mmcv(read_installed([site]))
    return facts


def _install_cuda_mmcv(site: Path, build: Path, *gencode: str) -> None:
    ext = compile_cuda(build, *gencode)
    wheel = write_wheel(build / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0", ext))

    with zipfile.ZipFile(wheel) as archive:  # unpacked as pip would, RECORD included
        archive.extractall(site)


@needs_nvcc
@pytest.mark.parametrize(
    ("gencode", "status", "summary"),
    [
        (["compute_80:sm_80"], "fail", "has no code for NVIDIA H200"),
        (["compute_80:sm_80", "compute_80:compute_80"], "warn", "has only PTX for NVIDIA H200"),
        (["compute_80:sm_80", "compute_90:sm_90"], "pass", "has native code (SASS) for NVIDIA H200"),
    ],
)
def test_the_archs_in_ext_are_compared_with_the_gpu(tmp_path, gencode, status, summary):
    site = tmp_path / "site"
    _install_cuda_mmcv(site, tmp_path / "build", *gencode)
    facts = _cuda_facts(site)
    [install] = facts.mmcv.installs
    assert install.cuda_archs == [g.split(":")[1] for g in gencode]
    [arch] = check_mmcv(facts, None)
    assert (arch.check, arch.status) == ("gpu.mmcv-archs", status)
    assert summary in arch.summary and "mmcv 2.1.0's _ext" in arch.summary
    if status == "fail":
        assert '"no kernel image is available for execution on the device"' in arch.summary
        assert arch.fix == MAKE_ENV.format("2.1.0") + (
            "  (a conda environment with the channel's mmcv 2.1.0 and the torch it was built for)"
        )


@needs_gxx
def test_a_cpu_mmcv_on_a_gpu_machine_and_an_unreadable_ext(tmp_path):
    site = tmp_path / "site"
    wheel = write_wheel(
        tmp_path / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0", compile_ext(tmp_path, LOADABLE_EXT))
    )

    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    [cpu] = check_mmcv(_cuda_facts(site), None)
    assert cpu.status == "warn" and "is a CPU build on a machine with an NVIDIA GPU" in cpu.summary
    (site / "mmcv" / f"_ext{EXT_SUFFIX}").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 40)
    [unread] = check_mmcv(_cuda_facts(site), None)
    assert unread.status == "info" and "cuobjdump --list-elf" in unread.evidence


@pytest.mark.gpu
@needs_nvcc
def test_an_ext_without_the_gpus_arch_fails_with_the_message_doctor_predicts(tmp_path):
    """On a GPU machine: code for an arch of another major than the GPU's really fails to launch with
    "no kernel image is available for execution on the device", and gpu.mmcv-archs says so first."""
    import ctypes

    from solver.doctor_checks.gather import gather_driver

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    major, _ = torch.cuda.get_device_capability(0)
    other = 75 if major != 7 else 80
    site = tmp_path / "site"
    _install_cuda_mmcv(site, tmp_path / "build", f"compute_{other}:sm_{other}")
    launched = ctypes.CDLL(str(next((site / "mmcv").glob("_ext*")))).launch_add_one
    launched.restype = ctypes.c_char_p
    assert launched().decode() == "no kernel image is available for execution on the device"
    facts = _cuda_facts(site)
    facts.driver = gather_driver(dict(os.environ))
    findings = [f for f in check_mmcv(facts, None) if f.check == "gpu.mmcv-archs"]
    assert findings and all(f.status == "fail" for f in findings)
    assert all("no kernel image is available for execution on the device" in f.summary for f in findings)


# ---------------------------------------------------------------- the JSON report of a healthy mmcv


@linux
@needs_gxx
def test_a_working_mmcv_and_mmdet_pass(provider, tmp_path):
    ext = compile_ext(tmp_path / "build", LOADABLE_EXT)
    mmcv = write_wheel(tmp_path / "wheels", "mmcv", "2.1.0", mmcv_files("2.1.0", ext))
    mmdet = write_wheel(
        tmp_path / "wheels", "mmdet", "3.3.0", mmdet_files("2.0.0rc4", "2.2.0"), ["mmcv<2.2.0,>=2.0.0rc4"]
    )
    venv = venv_with(tmp_path / "env", provider, mmcv, mmdet)
    done = doctor("--json", "--prefix", str(venv.root), env_updates={"HOME": str(tmp_path)})
    found = findings_of(done.stdout)
    assert [f["status"] for f in found["extensions.import"]] == ["pass", "pass"]
    assert [f["summary"].split(" ")[0] for f in found["extensions.import"]] == ["mmcv.ops", "mmdet"]
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "ok"


@pytest.mark.parametrize(
    ("version", "specifier", "fits"),
    [
        ("2.1.0", "<2.2.0,>=2.0.0rc4", True),
        ("2.2.0", "<2.2.0,>=2.0.0rc4", False),
        ("2.0.0rc4", ">=2.0.0rc4", True),
        ("2.0.0rc3", ">=2.0.0rc4", False),
        ("1.7.2", ">=1.3.8,<=1.8.0", True),
        ("2.1.0", "~=2.1.0", True),
        ("2.2.0", "~=2.1.0", False),
        ("2.1.0+pt21cu121", "==2.1.0", True),
        ("2.1.0", ">=(1, 3, 13, 0, 0, 0)", True),  # mmcv 1.x's tuple spelling is not read: no exclusion
    ],
)
def test_version_ranges_as_openmmlab_writes_them(version, specifier, fits):
    from solver.doctor_checks.mmcv import satisfies

    assert satisfies(version, specifier) is fits
