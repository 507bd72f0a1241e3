"""`solver make-env --with SPEC`: the pointops channel's other packages (mmcv, pointnet2_ops) added to
a plan from solver/knowledge/channel_packages.yaml alone: a pytorch minor, CUDA and Python they are
built for, binaries that carry code for the GPU, build strings pinned to pytorch's, one-line
refusals, --json, --format pip|uv, the solve and its verification, and a third package added as
data only."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
from pathlib import Path

import local_channels as channel_factory
import pytest
import tomllib
import yaml
from solver_cli import one_line, run_cli

from solver import make_env
from solver.errors import SolverError
from solver.knowledge import KNOWLEDGE_DIR, Knowledge, KnowledgeError, load, read_raw
from solver.plan import make_plan, parse_with_spec, with_requests
from solver.solve import SolvedPackage
from solver.target import build_target
from solver.verify import verify

REPO = Path(__file__).resolve().parents[2]
LINUX = ["--platform", "linux-64"]
RTX4090_580 = ["--gpu", "RTX 4090", "--driver", "580.95.05", *LINUX]
RTX4090_550 = ["--gpu", "RTX 4090", "--driver", "550.54.14", *LINUX]
CPU = ["--gpu", "none", *LINUX]

pytestmark = pytest.mark.usefixtures("no_overrides")


def run(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "make-env", *args)


def offline_env(capsys, *args: str) -> dict:
    code, out, err = run(capsys, "--offline", *args)
    assert code == 0, err
    return yaml.safe_load(out)


def offline_json(capsys, *args: str) -> dict:
    code, out, err = run(capsys, "--offline", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def refusal(capsys, *args: str, code: int = 1) -> str:
    got, out, err = run(capsys, "--offline", *args)
    assert got == code, (got, out, err)
    return one_line(err)


def plan_for(kb, specs: list[str], gpu="none", driver=None, platform="linux-64", **pins):
    target = build_target(kb, gpu=gpu, driver=driver, platform=platform)
    return make_plan(kb, target, requests=with_requests(kb, [parse_with_spec(s) for s in specs]), **pins)


# -- the knowledge table -------------------------------------------------------------------------------


def test_mmcv_record_says_versions_minors_pythons_platforms_and_pins(kb):
    mmcv = kb.channel_package("mmcv")
    assert mmcv.versions == ("2.2.0", "2.1.0")
    assert mmcv.torch == ("2.10", "2.11", "2.12", "2.13")
    assert mmcv.pythons == ("3.10", "3.11", "3.12", "3.13")
    assert {p: mmcv.variants(p) for p in mmcv.platforms} == {
        "linux-64": ("cpu", "cuda129", "cuda130"),
        "linux-aarch64": ("cpu", "cuda129", "cuda130"),
        "win-64": ("cpu", "cuda128", "cuda130"),
        "osx-64": ("cpu",),
        "osx-arm64": ("cpu",),
    }
    assert mmcv.pin("cuda130", "2.13", "3.12") == "cuda130_torch213_py312*"
    assert mmcv.pin("cpu", "2.10", "3.10") == "cpu_torch210_py310*"
    assert mmcv.pip.wheel is None and "openmmlab" in mmcv.pip.index
    # no index carries mmcv for any torch pointops supports
    floor = tuple(int(x) for x in kb.pointops.torch_min.split("."))
    assert all(tuple(int(x) for x in t.split(".")) < floor for t in mmcv.pip.newest_torch.values())


def test_mmcv_binaries_carry_the_channels_arch_table(kb):
    """The arch coverage of mmcv's CUDA builds is the channel's table: pointops' lists per variant
    and platform (8.7 on linux-aarch64 CUDA 13.0, the sbsa arm variant there)."""
    mmcv = kb.channel_package("mmcv")
    for build in mmcv.builds:
        if build.variant == "cpu":
            assert build.archs is None and build.cuda_version is None
            continue
        pointops = kb.pointops_build(build.platform, build.variant)
        assert (build.archs, build.arm_variant) == (pointops.archs, pointops.arm_variant)
    assert "8.7" in mmcv.build("linux-aarch64", "cuda130").archs.sass
    assert mmcv.build("win-64", "cuda129") is None


def test_pointnet2_ops_record_is_noarch_beside_pointops_wheels(kb):
    p2 = kb.channel_package("pointnet2_ops")
    assert p2.noarch and p2.versions == ("3.0.0.post1",) and p2.torch is None
    assert p2.pin("cuda130", "2.13", "3.12") == "pyh*"
    assert p2.build("win-64", "cuda128").archs is None  # pure Python: rides on any pointops build
    assert p2.built_for_python("3.14") and not p2.built_for_python("3.9")
    wheel = p2.pip.wheel
    assert wheel is kb.pointops_table.pure_wheel("pointnet2_ops")
    assert wheel.version in p2.versions
    assert {p2.pip.extra_for(w) for w in ("pointops", "pointops-cu12", "pointops-cu13")} == {
        "cpu",
        "cu12",
        "cu13",
    }


def test_every_entry_names_its_source_and_lists_versions_newest_first(kb):
    from rattler import Version

    for package in kb.channel_packages.packages:
        assert len(package.source) > 40, package.name
        versions = [Version(v) for v in package.versions]
        assert versions == sorted(versions, reverse=True), package.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        kb.channel_package("mmcv").versions = ()


def _recipe_matrix(recipe: str) -> list[tuple[str, dict, str]]:
    """(platform, variant keys, build string) of each package recipes/<recipe> renders."""
    from solver.channel.recipe import RecipeFiles
    from solver.channel.render import PLATFORMS, rendered_variants

    folder = REPO / "recipes" / recipe
    files = RecipeFiles(
        recipe=folder / "recipe.yaml",
        variant_configs=(REPO / "conda_build_config.yaml", folder / "conda_build_config.yaml"),
    )
    return [
        (platform, dict(item.variant), str(item.recipe.to_dict()["build"]["string"]))
        for platform in PLATFORMS
        for item in rendered_variants(platform, files)
    ]


def test_mmcv_table_agrees_with_the_recipe(kb):
    """Every cell recipes/mmcv renders is a build the table names, its build string matching the pin
    the plan would write; and the table names no build the recipe lacks."""
    if not (REPO / "recipes" / "mmcv" / "recipe.yaml").is_file():
        pytest.skip("recipes/mmcv is not in this checkout")
    mmcv = kb.channel_package("mmcv")
    rendered = set()
    for platform, keys, build_string in _recipe_matrix("mmcv"):
        cuda = keys.get("cuda_compiler_version")
        variant = "cpu" if cuda in (None, "None") else "cuda" + str(cuda).replace(".", "")
        torch, python = str(keys["pytorch"]), str(keys["python"]).split(".*")[0]
        pin = mmcv.pin(variant, torch, python)
        assert re.fullmatch(pin.replace("*", ".*"), build_string), (pin, build_string)
        rendered.add((platform, str(keys["mmcv_version"]), variant, torch, python))
    table = {
        (platform, version, variant, torch, python)
        for platform in mmcv.platforms
        for version in mmcv.versions
        for variant in mmcv.variants(platform)
        for torch in mmcv.torch
        for python in mmcv.pythons
    }
    assert rendered == table


def test_pointnet2_ops_table_agrees_with_the_recipe(kb):
    recipe = yaml.safe_load((REPO / "recipes" / "pointnet2_ops" / "recipe.yaml").read_text())
    p2 = kb.channel_package("pointnet2_ops")
    assert recipe["build"]["noarch"] == "python" and p2.noarch
    assert p2.versions[0] == recipe["context"]["version"]
    assert any(str(dep).startswith("pointops") for dep in recipe["requirements"]["run"])


def _broken(tmp_path: Path, edit) -> Path:
    target = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    data = yaml.safe_load((target / "channel_packages.yaml").read_text())
    edit(data["packages"])
    (target / "channel_packages.yaml").write_text(yaml.safe_dump(data))
    return target


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["mmcv"]["platforms"].update({"linux-32": ["cpu"]}), "unknown platform"),
        (lambda d: d["mmcv"]["platforms"].update({"osx-arm64": ["cuda129"]}), "arch table has no cuda129"),
        (lambda d: d["mmcv"].pop("source"), "missing field 'source'"),
        (lambda d: d["mmcv"].update(build="{variant}_{blas}*"), "unknown placeholder"),
        (lambda d: d["mmcv"].update(archs="mine"), "must be 'channel'"),
        (lambda d: d["mmcv"].update(python_min="3.10"), "one of them"),
        (lambda d: d["pointnet2_ops"]["pip"].update(wheel="nope"), "no pure_wheels.nope"),
        (lambda d: d.update({"MMCV2": d["mmcv"]}), "not a conda package name"),
    ],
)
def test_broken_table_is_named_with_its_field(tmp_path, edit, message):
    with pytest.raises(KnowledgeError, match=message) as info:
        load(str(_broken(tmp_path, edit)))
    assert "channel_packages.yaml" in str(info.value)


# -- --with in the conda plan ----------------------------------------------------------------------------


def test_with_mmcv_pins_its_build_to_pytorchs_and_a_python_it_is_built_for(capsys):
    env = offline_env(capsys, *RTX4090_580, "--with", "mmcv")
    # pytorch 2.13 is built for Python 3.14, mmcv up to 3.13: the plan takes 3.13
    assert env["dependencies"] == [
        "python=3.13",
        "pytorch=2.13.*=cuda130*",
        "cuda-version=13.0",
        "pointops=0.1.0=cuda130*",
        "mmcv=2.2.0=cuda130_torch213_py313*",
    ]


def test_a_version_spec_picks_the_newest_version_it_allows(capsys):
    env = offline_env(capsys, *RTX4090_550, "--with", "mmcv<2.2", "--python", "3.12")
    assert env["dependencies"][-1] == "mmcv=2.1.0=cuda129_torch213_py312*"
    assert offline_env(capsys, *RTX4090_550, "--with", "mmcv=2.1")["dependencies"][-1].startswith(
        "mmcv=2.1.0="
    )
    both = offline_env(capsys, *RTX4090_550, "--with", "mmcv>=2", "--with", "mmcv<2.2")
    assert both["dependencies"][-1].startswith("mmcv=2.1.0=")


def test_torch_pin_and_cpu_plans_follow_pytorchs_build(capsys):
    env = offline_env(capsys, *RTX4090_580, "--with", "mmcv", "--torch", "2.11")
    assert "pytorch=2.11.*=cuda130*" in env["dependencies"]
    assert env["dependencies"][-1] == "mmcv=2.2.0=cuda130_torch211_py313*"
    cpu = offline_env(capsys, *CPU, "--with", "mmcv")
    assert cpu["dependencies"][-1] == "mmcv=2.2.0=cpu_torch213_py313*"
    mac = offline_env(capsys, "--gpu", "none", "--platform", "osx-arm64", "--with", "mmcv")
    assert mac["dependencies"][-1] == "mmcv=2.2.0=cpu_torch213_py313*"


def test_the_cuda_build_chosen_carries_code_for_the_gpu(kb):
    """A Pascal GPU on Windows: CUDA 13 builds have no sm_6x, so pytorch, pointops and mmcv all come
    from the CUDA 12.8 builds (win-64's CUDA 12), and mmcv's coverage is recorded."""
    plan = plan_for(kb, ["mmcv"], gpu="GTX 1080 Ti", driver="581.57", platform="win-64")
    assert plan.variant == "cuda128"
    assert plan.with_pins[0].spec() == "mmcv=2.2.0=cuda128_torch213_py313*"
    assert plan.coverage == {"pytorch": "sass", "pointops": "sass", "mmcv": "sass"}
    arm = plan_for(kb, ["mmcv"], gpu="NVIDIA GH200 480GB", driver="580.95.05", platform="linux-aarch64")
    assert "arm-variant=*=sbsa" in arm.specs() and arm.with_pins[0].build == "cuda130_torch213_py313*"


def test_with_pointnet2_ops_is_noarch_and_keeps_the_newest_python(capsys):
    env = offline_env(capsys, *RTX4090_580, "--with", "pointnet2_ops")
    assert env["dependencies"][0] == "python=3.14"
    assert env["dependencies"][-1] == "pointnet2_ops=3.0.0.post1=pyh*"
    both = offline_env(capsys, *CPU, "--with", "pointnet2_ops", "--with", "mmcv")
    assert both["dependencies"][-2:] == ["pointnet2_ops=3.0.0.post1=pyh*", "mmcv=2.2.0=cpu_torch213_py313*"]


def test_reasons_say_why_the_build_and_python(capsys):
    code, out, err = run(capsys, "--offline", *RTX4090_580, "--with", "mmcv<2.2")
    assert code == 0
    assert "python 3.13: newest Python that pytorch 2.13 and mmcv are built for" in err
    assert (
        "mmcv 2.1.0 cuda130_torch213_py313*: newest version the channel builds that 'mmcv<2.2' allows" in err
    )
    assert "mmcv comes from that channel too: build recipes/mmcv" in out  # the header's unpublished note


@pytest.mark.parametrize(
    "args,words",
    [
        (["--with", "mmcv<2.0"], ["builds mmcv 2.2.0 and 2.1.0", "none matches --with 'mmcv<2.0'"]),
        (
            ["--with", "mmcv", "--python", "3.14"],
            ["mmcv is built for Python 3.10, 3.11, 3.12, 3.13", "--python 3.13"],
        ),
        (
            ["--with", "mmcv>=2.2", "--with", "mmcv<2.2"],
            ["none matches", "--with 'mmcv>=2.2' and --with 'mmcv<2.2'"],
        ),
    ],
)
def test_no_build_fits_is_one_line_with_cause_and_fix(capsys, args, words):
    line = refusal(capsys, *RTX4090_580, *args)
    assert all(w in line for w in words), line


def test_refusals_without_with_come_first(capsys):
    """A driver too old for any build is the cause named, not the --with package."""
    line = refusal(capsys, "--gpu", "RTX 4090", "--driver", "470.82.01", *LINUX, "--with", "mmcv")
    assert "Upgrade the driver" in line and "mmcv" not in line


@pytest.mark.parametrize(
    "spec,words",
    [
        ("<2", ["not a conda match spec", "missing package name"]),
        ("", ["not a conda match spec"]),
        ("mmcv<<2", ["not a conda match spec"]),
        ("mmcv=2.1=cuda*", ["more than a name and a version", "the plan picks the build"]),
        ("conda-forge::mmcv", ["more than a name and a version"]),
        ("mmcv[build_number='>=200']", ["more than a name and a version"]),
        ("numpy", ["only the pointops channel's packages (mmcv, pointnet2_ops)"]),
        ("pointnet2-ops", ["conda spells the package pointnet2_ops"]),
        ("pointops", ["pointops is in every plan"]),
        ("mm\x01cv", ["not a conda match spec"]),
    ],
)
def test_malformed_or_unknown_spec_is_a_usage_error(capsys, spec, words):
    line = refusal(capsys, *RTX4090_580, "--with", spec, code=2)
    assert all(w in line for w in words), line


def test_a_wildcard_build_and_any_version_are_plain_specs(capsys):
    assert offline_env(capsys, *CPU, "--with", "mmcv * *")["dependencies"][-1].startswith("mmcv=2.2.0=cpu_")
    assert offline_env(capsys, *CPU, "--with", "MMCV")["dependencies"][-1].startswith("mmcv=2.2.0=cpu_")


# -- --json ----------------------------------------------------------------------------------------------


def test_json_lists_every_pinned_package_with_version_and_build(capsys):
    doc = offline_json(capsys, *RTX4090_580, "--with", "mmcv<2.2", "--with", "pointnet2_ops")
    assert doc["pinned"] == [
        {"name": "python", "version": "3.13", "build": None},
        {"name": "pytorch", "version": "2.13.*", "build": "cuda130*"},
        {"name": "cuda-version", "version": "13.0", "build": None},
        {"name": "pointops", "version": "0.1.0", "build": "cuda130*"},
        {"name": "mmcv", "version": "2.1.0", "build": "cuda130_torch213_py313*"},
        {"name": "pointnet2_ops", "version": "3.0.0.post1", "build": "pyh*"},
    ]
    assert [
        f"{p['name']}={p['version']}" + (f"={p['build']}" if p["build"] else "") for p in doc["pinned"]
    ] == doc["dependencies"]
    assert doc["arch_coverage"] == {"pytorch": "sass", "pointops": "sass", "mmcv": "sass"}


def test_json_of_a_refusal_carries_the_error(capsys):
    code, out, err = run(capsys, "--offline", "--json", *RTX4090_580, "--with", "mmcv<2.0")
    doc = json.loads(out)
    assert code == 1 and doc["pinned"] == [] and doc["errors"] == [one_line(err).split("error: ", 1)[1]]


# -- --format pip|uv -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["pip", "uv"])
def test_no_index_carries_mmcv_so_the_conda_plan_is_named(capsys, fmt):
    line = refusal(capsys, "--format", fmt, *RTX4090_580, "--with", "mmcv<2.2")
    assert "no pip or uv index carries mmcv for torch 2.10 or newer" in line
    assert "2.2.0 up to torch 2.4 and 2.1.0 up to torch 2.1" in line
    assert "solver make-env --with 'mmcv<2.2'` with the same flags and no --format" in line


def test_pointnet2_ops_wheel_goes_beside_the_pointops_wheel_with_its_extra(capsys):
    code, out, err = run(capsys, "--format", "pip", *RTX4090_580, "--with", "pointnet2_ops")
    assert code == 0, err
    reqs = [line for line in out.splitlines() if line and not line.startswith(("#", "-"))]
    assert reqs == ["torch==2.14.*", "pointops-cu13==0.1.0", "pointnet2_ops[cu13]==3.0.0.post1"]
    assert "pointnet2_ops is not on PyPI yet" in out and "pointnet2_ops is not on PyPI yet" in err
    code, out, err = run(capsys, "--format", "uv", *CPU, "--with", "pointnet2_ops")
    assert code == 0, err
    assert tomllib.loads(out)["project"]["dependencies"][-2:] == [
        "pointops==0.1.0",
        "pointnet2_ops[cpu]==3.0.0.post1",
    ]
    code, out, err = run(capsys, "--format", "pip", "--json", *RTX4090_550, "--with", "pointnet2_ops")
    (entry,) = json.loads(out)["with"]
    assert (entry["distribution"], entry["extra"], entry["requirement"]) == (
        "pointnet2_ops",
        "cu12",
        "pointnet2_ops[cu12]==3.0.0.post1",
    )
    assert "not on PyPI yet" in entry["not_published"]


def test_pip_refuses_a_pointnet2_ops_spec_its_wheel_does_not_meet(capsys):
    line = refusal(capsys, "--format", "pip", *CPU, "--with", "pointnet2_ops<3")
    assert "builds pointnet2_ops 3.0.0.post1, and none matches" in line


# -- the solve and its verification ------------------------------------------------------------------------


def _mmcv_records(subdir: str) -> list[dict]:
    """mmcv as recipes/mmcv builds it, for the local channel's pythons 3.12/3.13 and torch 2.12/2.13."""
    records = []
    for version in ("2.1.0", "2.2.0"):
        for variant in ("cpu", "cuda129", "cuda130"):
            for torch in ("2.12", "2.13"):
                for py in ("3.12", "3.13"):
                    tag = f"{variant}_torch{torch.replace('.', '')}_py{py.replace('.', '')}"
                    number = 0 if variant == "cpu" else 200
                    minor = int(py.split(".")[1])
                    kind = "cpu" if variant == "cpu" else "cuda"
                    depends = [f"python >={py},<3.{minor + 1}.0a0", f"pytorch {torch}.* {kind}*"]
                    records.append(
                        channel_factory._record(
                            "mmcv", version, f"{tag}_h1a2b3c4_{number}", number, subdir, depends=depends
                        )
                    )
    records.append(
        channel_factory._record(
            "pointnet2_ops",
            "3.0.0.post1",
            "pyh4616a5c_0",
            0,
            subdir,
            ["python >=3.10", "pointops >=0.1.0"],
            noarch="python",
        )
    )
    return records


@pytest.fixture(scope="module")
def with_channel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("channel_with")
    records = (
        channel_factory.conda_forge_records(("linux-64",))
        + channel_factory.pointops_records(("linux-64",))
        + _mmcv_records("linux-64")
    )
    return channel_factory.write_channel(root, records)


def test_the_solve_includes_the_with_packages_and_verifies_them(solver_cli, with_channel):
    result = solver_cli(
        "make-env",
        *RTX4090_550,
        "--channel",
        str(with_channel),
        "--with",
        "mmcv<2.2",
        "--with",
        "pointnet2_ops",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    doc = result.json
    assert doc["verified"] is True
    solution = {p["name"]: p for p in doc["solution"]}
    assert solution["mmcv"]["version"] == "2.1.0"
    assert solution["mmcv"]["build"].startswith("cuda129_torch213_py313_")
    assert solution["pointnet2_ops"]["build"] == "pyh4616a5c_0"
    assert solution["pytorch"]["build"].startswith("cuda129_")


def test_a_channel_without_the_package_fails_the_solve_naming_it(solver_cli, local_channel):
    result = solver_cli("make-env", *RTX4090_550, "--channel", str(local_channel), "--with", "mmcv")
    assert result.returncode == 1
    assert "the channels hold no mmcv matching mmcv=2.2.0=cuda129_torch213_py313*" in one_line(result.stderr)


def _solved(name, version, build):
    return SolvedPackage(name=name, version=version, build=build, url=f"file:///c/{name}.conda")


def test_verify_flags_a_with_package_of_another_build_or_version(kb):
    plan = plan_for(kb, ["mmcv"], gpu="RTX 4090", driver="550.54.14", python="3.12")
    base = [
        _solved("python", "3.12.11", "h9e4cc4f_100_cp312"),
        _solved("pytorch", "2.13.0", "cuda129_mkl_py312_habc_302"),
        _solved("cuda-version", "12.9", "h4f385c5_3"),
        _solved("pointops", "0.1.0", "cuda129_habc_0"),
    ]
    good = _solved("mmcv", "2.2.0", "cuda129_torch213_py312_h1a2b3c4_200")
    assert verify(kb, plan, [*base, good]) == []
    assert verify(kb, plan, base) == ["the solution has no mmcv (--with)"]
    other_torch = _solved("mmcv", "2.2.0", "cuda129_torch212_py312_h1a2b3c4_200")
    assert verify(kb, plan, [*base, other_torch]) == [
        "mmcv build cuda129_torch212_py312_h1a2b3c4_200 is not the planned cuda129_torch213_py312*"
    ]
    assert verify(kb, plan, [*base, _solved("mmcv", "2.1.0", good.build)]) == [
        "mmcv 2.1.0 was solved, 2.2.0 was planned"
    ]


# -- make-env --create reads the flag ----------------------------------------------------------------------


def test_create_reads_the_with_flag_by_its_dest():
    import argparse

    from solver.create import with_packages

    parser = argparse.ArgumentParser()
    make_env.add_arguments(parser)
    args = parser.parse_args(["--with", "mmcv<2.2", "--with", "pointnet2_ops"])
    assert args.with_ == ["mmcv<2.2", "pointnet2_ops"]
    assert with_packages(args) == ["mmcv", "pointnet2_ops"]


# -- a third package is a data change --------------------------------------------------------------------


def _kb_with_fake(**entry) -> Knowledge:
    raw = copy.deepcopy(read_raw())
    raw["channel_packages"]["packages"]["fakeops"] = {
        "source": "a test's own entry: no recipe, no upstream; the fields of channel_packages.yaml only",
        "versions": ["1.1", "1.0"],
        "torch": ["2.12"],
        "python": ["3.12"],
        "platforms": {"linux-64": ["cpu", "cuda130"]},
        "archs": "channel",
        "build": "{variant}_pt{torch}_cp{python}*",
        "pip": {"index": "https://example.invalid/fakeops", "newest_torch": {"1.1": "2.4"}},
        **entry,
    }
    return Knowledge(raw)


def test_a_third_package_added_as_data_is_planned():
    kb = _kb_with_fake()
    plan = plan_for(kb, ["fakeops<1.1"], gpu="RTX 4090", driver="580.95.05")
    assert (plan.pytorch_minor, plan.variant, plan.python) == ("2.12", "cuda130", "3.12")
    assert plan.specs()[-1] == "fakeops=1.0=cuda130_pt212_cp312*"
    assert plan.coverage["fakeops"] == "sass"
    assert any("pytorch 2.13: fakeops is built for pytorch 2.12" in r for r in plan.reasons)


def test_a_third_package_gets_the_same_refusals():
    kb = _kb_with_fake()
    # GTX 1080 Ti: only CUDA 12 builds carry sm_61, and fakeops is built for CUDA 13.0 only
    with pytest.raises(SolverError) as caught:
        plan_for(kb, ["fakeops"], gpu="GTX 1080 Ti", driver="580.95.05")
    line = caught.value.one_line()
    assert "no build of fakeops in the pointops channel fits" in line
    assert "fakeops has no cuda129 build for linux-64" in line and "Drop --with 'fakeops'" in line
    with pytest.raises(SolverError, match="builds fakeops for linux-64, not osx-arm64"):
        plan_for(kb, ["fakeops"], platform="osx-arm64")
    with pytest.raises(SolverError, match="fakeops is built for pytorch 2.12 only"):
        plan_for(kb, ["fakeops"], torch="2.13")
    gpu_only = _kb_with_fake(platforms={"linux-64": ["cuda130"]})
    with pytest.raises(SolverError, match="no CPU build of fakeops for linux-64"):
        plan_for(gpu_only, ["fakeops"])


def test_a_third_package_through_the_command(capsys, monkeypatch):
    kb = _kb_with_fake()
    monkeypatch.setattr("solver.knowledge.load", lambda directory=None: kb)
    env = offline_env(capsys, *CPU, "--with", "fakeops")
    assert env["dependencies"][-1] == "fakeops=1.1=cpu_pt212_cp312*"
    line = refusal(capsys, "--format", "pip", *CPU, "--with", "fakeops")
    assert "no pip or uv index carries fakeops" in line and "https://example.invalid/fakeops" in line
