"""solver wheels: a real wheel built from ops-src, renamed, audited and installed next to this
environment's torch; the audit catches every kind of broken wheel it claims to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from pip_target import pip_install_target
from solver_cli import one_line

from solver.cli import main
from solver.errors import SolverError
from solver.knowledge import load
from solver.wheels import audit_wheel, build_wheel
from solver.wheels.build import arch_list, build_environment, wheel_entry
from solver.wheels.naming import parse_wheel_name
from solver.wheels.rename import rename_wheel

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds a Linux wheel")


BUILD_PROGRESS: list[str] = []  # the progress lines of the cpu_wheel build, in order


@pytest.fixture(scope="module")
def cpu_wheel(tmp_path_factory) -> Path:
    """The CPU wheel of pointops, built here by `solver wheels build pointops`."""
    out = tmp_path_factory.mktemp("wheels")
    BUILD_PROGRESS.clear()
    return build_wheel("pointops", REPO / "ops-src", out, jobs=2, progress=BUILD_PROGRESS.append)


def test_the_build_reports_each_step_and_each_compiled_source_counted(cpu_wheel):
    """A build takes minutes (a CUDA one many): `solver wheels build` shows what is compiled and
    how far along it is, from setup.py's counted lines."""
    csrc = REPO / "ops-src" / "csrc"
    sources = sorted(
        p.relative_to(REPO / "ops-src").as_posix()
        for p in [*csrc.glob("*.cpp"), *(csrc / "binding").glob("*.cpp"), *(csrc / "cpu").glob("*.cpp")]
    )
    lines = BUILD_PROGRESS
    assert lines[0].startswith("building pointops for linux-64 (CPU) from "), lines
    compiled = [line for line in lines if " compiling " in line]
    total = len(sources)
    assert [line.split("]")[0] for line in compiled] == [f"[{n}/{total}" for n in range(1, total + 1)], lines
    assert sorted(line.split(" compiling ")[1] for line in compiled) == sources
    after = lines[lines.index(compiled[-1]) + 1 :]
    assert [line.split()[0] for line in after[:2]] == ["linked", "loading"], lines
    assert any(line.startswith("auditwheel repair") for line in after), lines
    assert lines[-1] == "renaming to pointops and auditing"


def rewrite(wheel: Path, target: Path, change) -> Path:
    """A copy of `wheel` at `target` in which each entry is replaced by change(name, data): a list
    of (name, data) entries (empty: the entry is dropped)."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            for name, data in change(info.filename, src.read(info)):
                dst.writestr(name, data)
    return target


def test_the_cpu_wheel_is_abi3_manylinux_and_passes_its_audit(cpu_wheel):
    name = parse_wheel_name(cpu_wheel.name)
    assert (name.distribution, name.python, name.abi) == ("pointops", "cp310", "abi3")
    assert name.platform.startswith("manylinux_2_") and name.platform.endswith("_x86_64")
    assert audit_wheel(cpu_wheel) == []
    with zipfile.ZipFile(cpu_wheel) as zf:
        info = json.loads(zf.read("pointops/_build_info.json"))
        names = zf.namelist()
    assert info["cuda"] is False and info["python_abi"].startswith("abi3")
    assert not [n for n in names if "libtorch" in n or ".libs/" in n]  # torch comes from the user's


def test_pip_installs_the_wheel_next_to_this_torch_and_it_runs(cpu_wheel, tmp_path):
    site = tmp_path / "site"
    pip_install_target(cpu_wheel, site)
    probe = (
        "import json, torch, pointops, pointnet2_batch_cuda;"
        "x = torch.rand(2, 256, 3);"
        "idx = pointops.furthest_point_sample(x, 16);"
        "print(json.dumps([pointops.__file__, idx.shape[1], int(idx[0, 0]), pointops.__version__]))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    path, k, first, version = json.loads(out.stdout)
    assert Path(path).is_relative_to(site) and k == 16 and first == 0
    assert version == load().pointops["version"]


def test_renaming_makes_a_wheel_pip_accepts_under_the_new_name(cpu_wheel, tmp_path):
    renamed = rename_wheel(cpu_wheel, "pointops-cu13", tmp_path)
    assert renamed.name.startswith("pointops_cu13-0.1.0-cp310-abi3-manylinux_2_")
    with zipfile.ZipFile(renamed) as zf:
        meta = Parser().parsestr(zf.read("pointops_cu13-0.1.0.dist-info/METADATA").decode())
        assert meta["Name"] == "pointops-cu13"
        assert not [n for n in zf.namelist() if n.startswith("pointops-0.1.0.dist-info/")]
        assert zf.read("pointops/_C.abi3.so") == zipfile.ZipFile(cpu_wheel).read("pointops/_C.abi3.so")
    # a distribution not installed here: pip resolves it against this environment, and must take
    # its torch as torch>=2.10 (--no-index: nothing may be downloaded)
    plan = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", str(renamed)],
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.strip().splitlines()[-1] == "Would install pointops-cu13-0.1.0"
    site = tmp_path / "site"
    pip_install_target(renamed, site)  # pip checks the METADATA name against the file name
    assert (site / "pointops_cu13-0.1.0.dist-info").is_dir() and (site / "pointops" / "_C.abi3.so").exists()
    # the audit sees a CPU binary published as the CUDA 13 distribution
    assert any("CUDA 13.0 build" in p for p in audit_wheel(renamed, run_abi3audit=False))


def drop(path):
    return lambda n, d: [] if n == path else [(n, d)]


def edit(suffix, old, new):
    return lambda n, d: [(n, d.replace(old, new) if n.endswith(suffix) else d)]


def add_beside_init(path):
    return lambda n, d: [(n, d), (path, b"\x7fELF")] if n == "pointops/__init__.py" else [(n, d)]


@pytest.mark.parametrize(
    "change, expected",
    [
        (drop("pointnet2_batch_cuda.py"), "pointnet2_batch_cuda.py is missing"),
        (drop("pointops/_C.abi3.so"), "expected one extension library"),
        (add_beside_init("pointops/libtorch_cpu.so"), "pointops/libtorch_cpu.so is bundled"),
        (add_beside_init("pointops.libs/libcudart.so.13"), "libcudart.so.13 is bundled"),
        (
            edit("METADATA", b"Requires-Dist: torch>=2.10", b"Requires-Dist: torch"),
            "Requires-Dist lacks torch>=2.10",
        ),
        (edit("METADATA", b"Name: pointops", b"Name: pointops-cu12"), "METADATA Name 'pointops-cu12'"),
        (edit("_build_info.json", b'"cuda": false', b'"cuda": true'), "must be a CPU build"),
    ],
    ids=[
        "module missing",
        "no library",
        "libtorch bundled",
        "cudart bundled",
        "torch requirement",
        "name",
        "cuda",
    ],
)
def test_the_audit_catches_a_broken_wheel(cpu_wheel, tmp_path, change, expected):
    broken = rewrite(cpu_wheel, tmp_path / cpu_wheel.name, change)
    problems = audit_wheel(broken, run_abi3audit=False)
    assert any(expected in p for p in problems), problems


def test_the_audit_refuses_tags_other_than_cp310_abi3(cpu_wheel, tmp_path):
    wrong = tmp_path / cpu_wheel.name.replace("cp310-abi3", "cp311-cp311")
    wrong.write_bytes(cpu_wheel.read_bytes())
    assert any("expected cp310-abi3" in p for p in audit_wheel(wrong, run_abi3audit=False))


def test_each_cuda_wheel_gets_the_arch_list_of_its_conda_build():
    """The arch list passed to ops-src's build equals the arch table's default for that nvcc,
    which tests/recipes checks against the conda variants."""
    from pointops.cuda_archs import default_plan, parse_arch_list  # the installed package's

    kb = load()
    cuda_wheels = [
        w for p in ("linux-64", "linux-aarch64", "win-64") for w in kb.pointops_wheels(p) if w.cuda_version
    ]
    assert {w.distribution for w in cuda_wheels} == {"pointops-cu12", "pointops-cu13"}
    for wheel in cuda_wheels:
        plan = parse_arch_list(arch_list(wheel.archs))
        assert tuple(plan.sass) == wheel.archs.sass and plan.ptx[-1] == wheel.archs.ptx
        if wheel.platform != "linux-aarch64":  # aarch64 adds Jetson's 8.7 (extra_sass)
            default = default_plan(wheel.cuda_version)
            assert (tuple(default.sass), default.ptx) == (tuple(plan.sass), plan.ptx)


def fake_nvcc(tmp_path: Path, release: str) -> Path:
    """An nvcc of another CUDA release: only its version banner (no such toolkit exists here)."""
    home = tmp_path / f"cuda-{release}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return home


def test_a_cuda_wheel_refuses_an_nvcc_of_another_release(tmp_path):
    wheel = wheel_entry("pointops-cu12", "linux-64")
    with pytest.raises(SolverError, match=r"built with nvcc 12\.9.*is 13\.0") as info:
        build_environment(wheel, {"CUDA_HOME": str(fake_nvcc(tmp_path, "13.0")), "PATH": ""}, None)
    assert "CUDA 12.9 toolkit" in info.value.fix
    env = build_environment(
        wheel, {"CUDA_HOME": str(fake_nvcc(tmp_path, "12.9")), "TORCH_CUDA_ARCH_LIST": "8.0"}, 3
    )
    assert env["POINTOPS_CUDA"] == "1" and env["MAX_JOBS"] == "3"
    assert (
        env["TORCH_CUDA_ARCH_LIST"] == "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    )  # the user's 8.0 is not used
    cpu = build_environment(wheel_entry("pointops", "linux-64"), {"TORCH_CUDA_ARCH_LIST": "8.0"}, None)
    assert cpu["POINTOPS_CUDA"] == "0" and "TORCH_CUDA_ARCH_LIST" not in cpu


@pytest.mark.parametrize(
    ("argv", "bad", "accepted"),
    [
        (["build", "frobnicate"], "'frobnicate'", "pointops, pointops-cu12, pointops-cu13"),
        (["build", "pointops-cu11"], "'pointops-cu11'", "pointops, pointops-cu12, pointops-cu13"),
        (["build", ""], "''", "pointops, pointops-cu12, pointops-cu13"),
        (["list", "--platform", "bogus"], "'bogus'", "'linux-64', 'linux-aarch64', 'win-64', 'osx-64'"),
        (["list", "--platform", ""], "''", "'linux-64', 'linux-aarch64', 'win-64', 'osx-64'"),
    ],
)
def test_a_bad_distribution_or_platform_is_a_usage_error(capsys, argv, bad, accepted):
    """Exit 2 and one line naming the value and the accepted ones, before anything is built."""
    assert main(["wheels", *argv]) == 2
    line = one_line(capsys.readouterr().err)
    assert bad in line and accepted in line


def test_the_cli_names_the_distributions_a_platform_has(capsys, monkeypatch):
    # a real distribution that is not built for this machine's platform: exit 1, not a usage error
    monkeypatch.setattr("solver.wheels.build.conda_platform", lambda: "osx-arm64")
    assert main(["wheels", "build", "pointops-cu13"]) == 1
    line = one_line(capsys.readouterr().err)
    assert "no pointops-cu13 wheel is built for osx-arm64; choose one of: pointops" in line
    monkeypatch.undo()
    assert main(["wheels", "list", "--platform", "osx-arm64"]) == 0
    binary, pure = capsys.readouterr().out.splitlines()  # pointnet2_ops: one wheel for every platform
    assert binary.split() == ["pointops", "osx-arm64", "CPU"] and pure.split()[:2] == ["pointnet2_ops", "any"]
    assert main(["wheels", "check", "no-such.whl"]) == 1
    assert "no-such.whl is not a file" in capsys.readouterr().err


def test_bad_paths_are_one_line_errors_naming_the_fix(capsys, tmp_path):
    assert main(["wheels", "build", "pointops", "--source", str(tmp_path)]) == 1
    assert "is not the pointops source tree (no setup.py); pass --source ops-src" in capsys.readouterr().err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = [
        "wheels",
        "build",
        "pointops",
        "--source",
        str(REPO / "ops-src"),
        "--output",
        str(blocker / "wheels"),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "cannot create the output directory" in err and "give --output a writable directory" in err
    assert "internal error" not in err
    fake = tmp_path / "other-0.1-cp310-abi3-manylinux_2_28_x86_64.whl"
    fake.write_text("not a zip")
    assert main(["wheels", "check", str(fake)]) == 1
    out = capsys.readouterr().out
    assert "other is not a pointops distribution" in out and "cannot be read as a zip archive" in out


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "step.py"
    path.write_text(body)
    return [sys.executable, str(path)]


def test_a_step_relays_setup_py_progress_as_it_comes_and_keeps_the_rest(tmp_path):
    from solver.wheels.build import run_step

    seen = []
    command = _script(
        tmp_path,
        "import sys\n"
        "print('gcc -c csrc/a.cpp', flush=True)\n"
        "print('  pointops: [1/2] compiling csrc/a.cpp', flush=True)\n"
        "print('pointops: [2/2] compiling csrc/b.cpp', file=sys.stderr, flush=True)\n",
    )
    run_step(command, dict(os.environ), "a step", seen.append)
    assert seen == ["[1/2] compiling csrc/a.cpp", "[2/2] compiling csrc/b.cpp"]


def test_a_failed_step_shows_its_last_lines_and_names_itself(tmp_path, capfd):
    from solver.wheels.build import run_step

    command = _script(tmp_path, "import sys\nfor n in range(100): print(f'line {n}')\nsys.exit(3)\n")
    with pytest.raises(SolverError, match=r"a step failed \(exit 3"):
        run_step(command, dict(os.environ), "a step")
    err = capfd.readouterr().err
    assert "line 99" in err and "line 60" in err and "line 59" not in err


@pytest.mark.parametrize("quiet", [False, True])
def test_the_cli_prints_progress_on_stderr_unless_quiet(capsys, quiet):
    from solver.wheels.cli import _progress

    _progress(quiet)("[1/2] compiling csrc/a.cpp")
    out, err = capsys.readouterr()
    assert out == ""
    if quiet:
        assert err == ""
    else:
        assert err.startswith("solver wheels build: [") and err.endswith(" s] [1/2] compiling csrc/a.cpp\n")
