"""`solver make-env --format pip|uv`: the PyTorch wheel index and pointops wheel chosen for a GPU and
driver (checked against the GPU's compute capability, not the driver alone), the refusals it shares
with the conda plan, and files that pip, `uv pip` and tomllib read as intended."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import zipfile

import pytest
import tomllib
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.version import Version
from solver_cli import one_line, run_cli

from solver.errors import SolverError
from solver.knowledge import Knowledge, arch_coverage, read_raw
from solver.pip_plan import MARKERS, make_pip_plan
from solver.target import build_target

LINUX = ["--platform", "linux-64"]
RTX4090_580 = ["--gpu", "RTX 4090", "--driver", "580.95.05", *LINUX]
GTX1080TI_580 = ["--gpu", "GTX 1080 Ti", "--driver", "580.95.05", *LINUX]


pytestmark = pytest.mark.usefixtures("no_overrides")


def run(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "make-env", *args)


def plan_json(capsys, fmt: str, *args: str) -> dict:
    code, out, err = run(capsys, "--format", fmt, "--json", *args)
    assert code == 0, err
    return json.loads(out)


def requirements(text: str) -> tuple[list[str], list[Requirement]]:
    """(option lines, requirements) of a requirements file; comments skipped."""
    options, reqs = [], []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
        else:
            reqs.append(Requirement(line))
    return options, reqs


def chosen_archs(table, doc: dict):
    return table.indexes[doc["index"]["tag"]].archs[doc["platform"]]


def wheel_of(kb, doc: dict):
    return next(
        w for w in kb.pointops_wheels(doc["platform"]) if w.distribution == doc["pointops"]["distribution"]
    )


# -- the choices -----------------------------------------------------------------------------------


def test_rtx_4090_on_580_gets_cu130_and_pointops_cu13(capsys, kb, table):
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580)
    assert code == 0, err
    options, reqs = requirements(out)
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cu130"]
    assert [str(r) for r in reqs] == ["torch==2.14.*", f"pointops-cu13=={kb.pointops['version']}"]
    doc = plan_json(capsys, "pip", *RTX4090_580)
    assert arch_coverage("8.9", chosen_archs(table, doc)) == "sass"
    assert arch_coverage("8.9", wheel_of(kb, doc).archs) == "sass"
    assert doc["driver_compatibility"] == {"torch": "full", "pointops": "full"}
    # cu132 runs only through minor-version compatibility on a CUDA 13.0 driver: cu130 comes first
    assert "cu132 (minor-version compatibility only" in " ".join(doc["reasons"])
    assert "solver make-env: GPU: GeForce RTX 4090" in err


def test_gtx_1080_ti_never_gets_an_index_without_sm61(capsys, kb, table):
    """uv's --torch-backend=auto reads only the driver (astral-sh/uv#14742): on a CUDA 13 driver it
    picks an index whose wheels start at sm_75. Our choice is held to the GPU's 6.1."""
    doc = plan_json(capsys, "pip", *GTX1080TI_580)
    assert doc["index"]["tag"] == "cu126"
    assert doc["pointops"]["distribution"] == "pointops-cu12"
    assert arch_coverage("6.1", chosen_archs(table, doc)) == "sass"
    assert arch_coverage("6.1", wheel_of(kb, doc).archs) == "sass"
    for tag in ("cu128", "cu130", "cu132"):  # what a driver-only choice would take
        assert arch_coverage("6.1", table.indexes[tag].archs["linux-64"]) is None
    why = " ".join(doc["reasons"])
    assert "cu130 (its wheels carry 7.5;" in why and "no code for 6.1" in why
    assert any("stays on CUDA 12 wheels" in w for w in doc["warnings"])
    code, out, _ = run(capsys, "--format", "pip", *GTX1080TI_580)
    assert code == 0 and "whl/cu126" in out and "cu128" not in out.split("# Warnings")[0].split("Why:")[0]
    assert not any(line.startswith("--extra-index-url") and "cu126" not in line for line in out.splitlines())


def test_every_gpu_gets_wheels_that_carry_its_arch(kb, table):
    """For every desktop/server compute capability the tables know, on linux-64 and win-64 with the
    newest driver that still runs it: the chosen torch index and pointops wheel both cover it."""
    checked = 0
    for cc in kb.known_compute_capabilities():
        arch = kb.architecture(cc)
        if arch.tegra or parse(cc) < (5, 0) or arch.renamed_to:
            continue
        for platform in ("linux-64", "win-64"):
            target = build_target(kb, gpu=cc, platform=platform)
            plan = make_pip_plan(kb, table, target)
            archs = table.indexes[plan.source.tag].archs[platform]
            assert arch_coverage(cc, archs) is not None, (cc, platform, plan.source.tag)
            assert arch_coverage(cc, plan.wheel.archs) is not None, (cc, platform, plan.wheel)
            assert plan.wheel.cuda_version.split(".")[0] == plan.source.cuda.split(".")[0]
            checked += 1
    assert checked > 20


def parse(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def test_r535_driver_gets_cu126_through_minor_version_compatibility(capsys, kb, table):
    """R535 runs CUDA <= 12.2: cu126 and pointops-cu12 (CUDA 12.9) run through minor-version
    compatibility, which the rules allow because both carry SASS for 8.9."""
    doc = plan_json(capsys, "pip", "--gpu", "RTX 4090", "--driver", "535.274.02", *LINUX)
    assert doc["driver"]["cuda"] == "12.2"
    assert doc["index"]["tag"] == "cu126" and doc["pointops"]["distribution"] == "pointops-cu12"
    assert doc["driver_compatibility"] == {"torch": "mvc", "pointops": "mvc"}
    assert doc["arch_coverage"] == {"torch": "sass", "pointops": "sass"}
    assert parse("535.274.02") >= parse(kb.mvc_min_driver(12, "linux"))


def test_h100_on_570(capsys, kb, table):
    doc = plan_json(capsys, "pip", "--gpu", "H100", "--driver", "570.195.03", *LINUX)
    assert doc["driver"]["cuda"] == "12.8"
    assert doc["torch"] == "2.14" and doc["index"]["tag"] == "cu126"
    assert doc["pointops"]["distribution"] == "pointops-cu12" and doc["pointops"]["cuda"] == "12.9"
    # torch's CUDA 12.6 runs fully, pointops' 12.9 through minor-version compatibility (SASS 9.0)
    assert doc["driver_compatibility"] == {"torch": "full", "pointops": "mvc"}
    assert "needs driver >= 580" in " ".join(doc["reasons"])  # why not cu130


def test_rtx_5090_on_570_falls_back_to_the_newest_release_with_sm120(capsys, table):
    doc = plan_json(capsys, "pip", "--gpu", "RTX 5090", "--driver", "570.195.03", *LINUX)
    assert (doc["torch"], doc["index"]["tag"]) == ("2.11", "cu128")
    newer = [t for t in table.releases if parse(t) > parse("2.11")]
    assert all("cu128" not in [i.tag for i in table.indexes_for(t)] for t in newer)
    assert "torch 2.12, 2.13, 2.14 skipped" in " ".join(doc["reasons"])


def test_windows_gpu(capsys, kb):
    doc = plan_json(capsys, "pip", "--gpu", "RTX 4070", "--driver", "566.03", "--platform", "win-64")
    assert doc["index"]["tag"] == "cu126"
    assert doc["pointops"] == {
        "distribution": "pointops-cu12",
        "version": kb.pointops["version"],
        "requirement": f"pointops-cu12=={kb.pointops['version']}",
        "cuda": "12.8",
        "variant": "cuda128",
    }
    assert doc["driver_compatibility"]["pointops"] == "mvc"  # 566.03 runs CUDA 12.7


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64", "win-64"])
def test_cpu_gets_the_cpu_index_and_pointops(capsys, kb, platform):
    code, out, err = run(capsys, "--format", "pip", "--gpu", "none", "--platform", platform)
    assert code == 0, err
    options, reqs = requirements(out)
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert [r.name for r in reqs] == ["torch", "pointops"]
    assert "--gpu none: CPU environment" in err


def test_osx_arm64_takes_torch_from_pypi(capsys):
    code, out, err = run(capsys, "--format", "pip", "--gpu", "none", "--platform", "osx-arm64")
    assert code == 0, err
    options, reqs = requirements(out)
    assert options == [] and [r.name for r in reqs] == ["torch", "pointops"]
    code, out, err = run(capsys, "--format", "uv", "--gpu", "none", "--platform", "osx-arm64")
    project = tomllib.loads(out)
    assert "index" not in project["tool"]["uv"] and "sources" not in project["tool"]["uv"]
    assert project["tool"]["uv"]["environments"] == [MARKERS["osx-arm64"]]


def test_osx_64_is_refused(capsys):
    code, out, err = run(capsys, "--format", "uv", "--gpu", "none", "--platform", "osx-64")
    assert code == 1 and out == ""
    line = one_line(err)
    assert "osx-64" in line and "torch 2.2" in line and "--format conda" in line
    # and the fix works
    assert run(capsys, "--gpu", "none", "--platform", "osx-64", "--offline")[0] == 0


def test_a_gpu_on_macos_is_refused_as_for_conda(capsys):
    args = ["--gpu", "RTX 4090", "--platform", "osx-arm64"]
    conda = run(capsys, "--offline", *args)
    pip = run(capsys, "--format", "pip", *args)
    assert conda[0] == pip[0] == 1 and one_line(conda[2]) == one_line(pip[2])


# -- refusals ----------------------------------------------------------------------------------


def test_driver_too_old_for_cuda_12(capsys):
    code, out, err = run(capsys, "--format", "pip", "--gpu", "GTX 1080 Ti", "--driver", "470.82.01", *LINUX)
    assert code == 1 and out == ""
    line = one_line(err)
    assert "runs CUDA <= 11.4" in line and "driver >= 525.60.13 on Linux" in line
    assert "Upgrade the driver" in line and "--gpu none" in line


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu", "GTX 980", "--driver", "590.44.01", *LINUX],  # R590 dropped Maxwell
        ["--gpu", "RTX 5090", "--driver", "566.03", "--platform", "win-64"],  # R565 predates Blackwell
        ["--gpu", "NVIDIA B200", "--driver", "570.124.06", *LINUX],  # below the B200's own minimum
        ["--gpu", "Tesla K80", "--driver", "470.82.01", *LINUX],  # Kepler
        ["--gpu", "Jetson AGX Orin", "--driver", "540.4.0", "--platform", "linux-aarch64"],  # JetPack 6
        ["--gpu", "no such gpu", *LINUX],
        ["--gpu", "13.5", *LINUX],
        ["--gpu", "RTX 4090:8.6", *LINUX],
        ["--gpu", "RTX 4090", "--driver", "garbage", *LINUX],
        ["--gpu", "RTX 4090", "--platform", "sunos"],
        ["--python", "3"],
    ],
)
def test_refused_exactly_as_for_conda(capsys, args):
    code, out, err = run(capsys, "--offline", *args)
    pip = run(capsys, "--format", "pip", *args)
    assert code != 0 and pip[0] == code and pip[1] == out == ""
    assert one_line(pip[2]) == one_line(err)


def test_unknown_compute_capability_is_refused(capsys, monkeypatch):
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.8")  # a driver, no CONDA_OVERRIDE_CUDA_ARCH
    code, out, err = run(capsys, "--format", "pip", "--platform", "linux-64")
    assert code == 1 and "compute capability" in one_line(err) and "CONDA_OVERRIDE_CUDA_ARCH" in err
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", "8.6")
    code, out, err = run(capsys, "--format", "pip", "--platform", "linux-64", "--quiet")
    assert code == 0, err
    assert "whl/cu126" in out  # CUDA 12.8 driver: no CUDA 13 index


def test_jetson_orin_is_refused_with_a_working_fix(capsys):
    """PyTorch's aarch64 wheels carry 8.0 SASS, which a Jetson (Orin, 8.7) cannot run; conda-forge's
    builds do carry 8.7, so the fix named is --format conda, and it plans."""
    args = ["--gpu", "Jetson AGX Orin", "--driver", "595.45.04", "--platform", "linux-aarch64"]
    code, out, err = run(capsys, "--format", "pip", *args)
    line = one_line(err)
    assert code == 1 and "exactly 8.7" in line and "--format conda" in line
    assert run(capsys, "--offline", *args)[0] == 0


@pytest.mark.parametrize(
    "flag", [["--lock", "x.lock"], ["--explicit", "x.txt"], ["--channel", "conda-forge"], ["--name", "x"]]
)
@pytest.mark.parametrize("fmt", ["pip", "uv"])
def test_conda_only_flags_are_usage_errors(capsys, tmp_path, monkeypatch, flag, fmt):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--format", fmt, "--gpu", "none", *flag)
    assert code == 2 and out == ""
    assert one_line(err).startswith(f"solver make-env: error: {flag[0]} ") and "--format conda" in err
    assert not list(tmp_path.iterdir())


def test_conda_keeps_its_name_flag(capsys):
    code, out, err = run(capsys, "--gpu", "none", *LINUX, "--offline", "--name", "myenv")
    assert code == 0 and "name: myenv" in out
    code, out, err = run(capsys, "--gpu", "none", *LINUX, "--offline")
    assert code == 0 and "name: pointops" in out


def test_bad_format_is_a_usage_error(capsys):
    code, out, err = run(capsys, "--format", "poetry", "--gpu", "none")
    assert code == 2 and "invalid choice" in one_line(err)


# -- pins ----------------------------------------------------------------------------------------


def test_torch_pin(capsys):
    doc = plan_json(capsys, "pip", *RTX4090_580, "--torch", "2.11")
    assert doc["torch_requirement"] == "torch==2.11.*" and doc["index"]["tag"] == "cu130"
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--torch", "2.11.0")
    assert code == 0 and "torch==2.11.0" in requirements(out)[1][0].__str__()
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--torch", "2.99")
    assert code == 1 and "2.10, 2.11, 2.12, 2.13, 2.14" in one_line(err)
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--torch", "2.9")
    assert code == 1 and "pointops needs torch >= 2.10" in one_line(err)


@pytest.mark.parametrize("fmt", ["pip", "uv"])
@pytest.mark.parametrize("torch", ["2.13.99", "2.12.2", "2.14.5"])
def test_a_torch_release_that_does_not_exist_is_refused_as_conda_refuses_it(capsys, fmt, torch):
    """A pin of a release the knowledge does not name makes a file pip cannot install: refused with
    the conda format's exit status and message shape, naming the releases known of that minor."""
    conda_code, _, conda_err = run(capsys, "--offline", *RTX4090_580, "--torch", torch)
    code, out, err = run(capsys, "--format", fmt, *RTX4090_580, "--torch", torch)
    line = one_line(err)
    assert code == conda_code == 1 and out == ""
    assert f"torch {torch} " in line and "Pass one of those to --torch" in one_line(conda_err)
    minor = torch.rsplit(".", 1)[0]
    assert "Pass one of those to --torch" in line and f"--torch {minor} for the newest" in line


@pytest.mark.parametrize("torch", ["2.10.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0"])
def test_a_known_torch_release_is_pinned(capsys, torch):
    """X.Y.0 of every minor of the wheel table, and the patches conda-forge built (pytorch.yaml)."""
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--torch", torch)
    assert code == 0, err
    assert f"torch=={torch}" in [str(r) for r in requirements(out)[1]]


def test_cuda_pin(capsys, table):
    doc = plan_json(capsys, "pip", *RTX4090_580, "--cuda", "13.2")
    assert doc["index"]["tag"] == "cu132" and doc["driver_compatibility"]["torch"] == "mvc"
    doc = plan_json(capsys, "pip", *RTX4090_580, "--cuda", "12.8")  # only torch 2.10 and 2.11 have cu128
    assert (doc["torch"], doc["index"]["tag"]) == ("2.11", "cu128")
    assert doc["pointops"]["distribution"] == "pointops-cu12"
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--cuda", "12.9")
    line = one_line(err)
    assert code == 1 and "no CUDA 12.9 wheel index" in line and "12.6, 12.8, 13.0, 13.2" in line
    code, out, err = run(capsys, "--format", "pip", *GTX1080TI_580, "--cuda", "13.0")
    line = one_line(err)
    assert code == 1 and "7.5;8.0" in line and "Drop --cuda (torch 2.14 cu126 fits)" in line
    code, out, err = run(capsys, "--format", "pip", "--gpu", "none", "--cuda", "12.6")
    assert code == 2


def test_python(capsys):
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--python", "3.12")
    assert code == 0 and "# Requires Python 3.12:" in out
    code, out, err = run(capsys, "--format", "uv", *RTX4090_580, "--python", "3.12")
    assert tomllib.loads(out)["project"]["requires-python"] == "==3.12.*"
    code, out, err = run(capsys, "--format", "uv", *RTX4090_580)
    assert tomllib.loads(out)["project"]["requires-python"] == ">=3.10"
    code, out, err = run(capsys, "--format", "uv", *RTX4090_580, "--python", "3.9")
    assert code == 1 and "Python >= 3.10" in one_line(err)


# -- the files -------------------------------------------------------------------------------------


def test_uv_project_is_valid_toml_with_torch_on_its_index(capsys, kb):
    code, out, err = run(capsys, "--format", "uv", *GTX1080TI_580)
    assert code == 0, err
    project = tomllib.loads(out)
    assert project["project"]["dependencies"] == ["torch==2.14.*", f"pointops-cu12=={kb.pointops['version']}"]
    for spec in project["project"]["dependencies"]:
        Requirement(spec)
    uv = project["tool"]["uv"]
    assert uv["index"] == [
        {"name": "pytorch-cu126", "url": "https://download.pytorch.org/whl/cu126", "explicit": True}
    ]
    assert uv["sources"] == {"torch": {"index": "pytorch-cu126"}}
    (marker,) = uv["environments"]
    assert Marker(marker).evaluate({"sys_platform": "linux", "platform_machine": "x86_64"})
    assert not Marker(marker).evaluate({"sys_platform": "linux", "platform_machine": "aarch64"})


def test_pip_file_parses_and_its_comment_about_local_versions_is_true(capsys):
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580)
    options, reqs = requirements(out)
    torch = reqs[0]
    local, plain = Version("2.14.0+cu130"), Version("2.14.0")
    assert "PEP 440 sorts 2.14.0+cu130 after PyPI's 2.14.0" in out
    assert local > plain and torch.specifier.contains(local) and torch.specifier.contains(plain)
    assert all(line.startswith("#") for line in out.splitlines()[: out.splitlines().index(options[0])])


def _wheel(directory, name: str, version: str) -> None:
    """A pure wheel with nothing but its metadata, in a PEP 503 directory index."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    project = directory / name
    project.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(project / f"{dist}-{version}-py3-none-any.whl", "w") as whl:
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        whl.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    links = "".join(f'<a href="{p.name}">{p.name}</a>\n' for p in sorted(project.glob("*.whl")))
    (project / "index.html").write_text(links)


def test_pip_installs_torch_from_the_index_and_pointops_from_pypi(capsys, tmp_path, kb):
    """pip reads the file as written: with PyPI and PyTorch's index both holding torch 2.14.0, the
    index's 2.14.0+cu130 is taken; pointops-cu13 comes from PyPI (local stand-ins for both)."""
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580)
    pypi, pytorch = tmp_path / "pypi", tmp_path / "pytorch"
    for version in ("2.13.0", "2.14.0"):
        _wheel(pypi, "torch", version)
        _wheel(pytorch, "torch", f"{version}+cu130")
    _wheel(pypi, "pointops-cu13", kb.pointops["version"])
    requirements_file = tmp_path / "requirements.txt"
    requirements_file.write_text(out.replace("https://download.pytorch.org/whl/cu130", pytorch.as_uri()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no site index, find-links or constraints
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir",
         "--disable-pip-version-check", "--index-url", pypi.as_uri(), "-r", str(requirements_file)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"Would install pointops-cu13-{kb.pointops['version']} torch-2.14.0+cu130" in result.stdout


def test_output_file(capsys, tmp_path):
    path = tmp_path / "requirements.txt"
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "-o", str(path))
    assert code == 0 and out == ""
    assert f"solver make-env: wrote {path}" in err
    assert requirements(path.read_text())[1][1].name == "pointops-cu13"
    link = tmp_path / "link.toml"
    target = tmp_path / "real.toml"
    target.write_text("old")
    link.symlink_to(target)
    code, out, err = run(capsys, "--format", "uv", *RTX4090_580, "-o", str(link), "--quiet")
    assert code == 0 and err == "" and link.is_symlink()
    assert tomllib.loads(target.read_text())["tool"]["uv"]["sources"]["torch"]["index"] == "pytorch-cu130"


def test_json_documents(capsys, kb):
    doc = plan_json(capsys, "uv", *RTX4090_580)
    assert doc["format"] == "uv"
    assert doc["index"] == {"tag": "cu130", "url": "https://download.pytorch.org/whl/cu130", "cuda": "13.0"}
    assert doc["gpu"] == {"name": "GeForce RTX 4090", "compute_capability": "8.9"}
    assert doc["requirements"] == ["torch==2.14.*", f"pointops-cu13=={kb.pointops['version']}"]
    assert doc["errors"] == [] and doc["reasons"]
    code, out, err = run(capsys, "--format", "pip", "--json", "--gpu", "GTX 1080 Ti", "--driver", "470.82.01")
    failed = json.loads(out)
    assert (
        code == 1 and failed["index"] is None and failed["errors"] == [one_line(err).split("error: ", 1)[1]]
    )
    code, out, err = run(capsys, "--json", "--offline", *RTX4090_580)  # conda's document is unchanged
    assert code == 0 and "format" not in json.loads(out) and "dependencies" in json.loads(out)


# -- the pair logic (solver/pip_plan.py) on tables without some wheels ----------------------------------


def _kb_without(distributions: set[str]) -> Knowledge:
    raw = copy.deepcopy(read_raw())
    for name in distributions:
        raw["pointops_builds"]["wheels"][name].pop("linux-64")
    return Knowledge(raw)


def test_falls_back_to_the_newest_pair_where_pointops_fits_too(table):
    kb = _kb_without({"pointops-cu13"})
    target = build_target(kb, gpu="RTX 4090", driver="580.95.05", platform="linux-64")
    plan = make_pip_plan(kb, table, target)
    assert (plan.torch, plan.source.tag, plan.wheel.distribution) == ("2.14", "cu126", "pointops-cu12")
    why = " ".join(plan.reasons)
    assert "cu130 (pointops publishes no CUDA 13 wheel for linux-64)" in why


def test_refuses_when_torch_fits_but_no_pointops_wheel_does(table):
    kb = _kb_without({"pointops-cu12", "pointops-cu13"})
    target = build_target(kb, gpu="RTX 4090", driver="580.95.05", platform="linux-64")
    with pytest.raises(SolverError) as caught:
        make_pip_plan(kb, table, target)
    message = caught.value.one_line()
    assert "no pointops wheel beside them does" in message and "torch 2.14 cu130" in message
    assert "--format conda" in message and caught.value.exit_code == 1
