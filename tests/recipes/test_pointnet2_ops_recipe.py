"""recipes/pointnet2_ops: one noarch package for every platform and pointops build, built with
rattler-build end to end as tests/recipes/test_rattler_build.py builds recipes/pointops: against
local stand-ins of conda-forge's packages (standin_toolchain.py: this machine's Python and torch)
plus a stand-in pointops that links the pointops this interpreter imports. The recipe's own tests
run (imports and pip check, test_pointnet2_ops.py), then the package installs into a fresh prefix
whose Python imports upstream's modules and runs a layer.

The one change to the shipped matrix: python_min is the interpreter running the tests, since
torch exists here only for it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from standin_toolchain import PY, SITE, SUBDIR, write_toolchain_channel
from test_rattler_build import NO_GPU, extracted, rattler_install, read_package

from solver import cli
from solver.channel import ChannelError, build_channel, current_platform
from solver.channel.recipe import recipe_files
from solver.channel.render import PLATFORMS, rendered_variants

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import conda_forge_standins as standins  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RECIPE_DIR = REPO / "recipes" / "pointnet2_ops"
FILES = recipe_files(RECIPE_DIR)  # recipe.yaml, then the pinning and the recipe's own variant files
VERSION_FILE = REPO / "ops-src" / "dropins" / "pointnet2_ops" / "pointnet2_ops" / "_version.py"
OVERRIDES = {"python_min": [PY]}


def package_version() -> str:
    return re.search(r'__version__ = "([^"]+)"', VERSION_FILE.read_text()).group(1)


def test_the_recipe_has_the_package_s_version():
    rendered = rendered_variants("linux-64", FILES)
    assert [str(r.recipe.package.version) for r in rendered] == [package_version()]
    assert package_version().startswith("3.0.0.post")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_one_noarch_package_serves_every_platform(platform):
    """No CUDA or compiler axis: the same package (same hash) whatever the platform, and it takes
    any pointops build."""
    (rendered,) = rendered_variants(platform, FILES)
    recipe = rendered.recipe.to_dict()
    assert recipe["build"]["noarch"] == "python"
    assert recipe["requirements"]["run"] == ["python >=3.10", "pointops >=0.1.0"]
    linux = rendered_variants("linux-64", FILES)[0].recipe.to_dict()
    assert recipe["build"]["string"] == linux["build"]["string"]


def pointops_standin_channel(root: Path) -> Path:
    """A linux-64 `pointops` 0.1.0 (cpu) whose site-packages/pointops links the pointops this
    interpreter imports (the source tree's build or an installed wheel), with the real package's
    run requirements."""
    spec = importlib.util.find_spec("pointops")
    location = Path(next(iter(spec.submodule_search_locations)))
    record = standins.record(
        "pointops",
        "0.1.0",
        "cpu_h0_0",
        SUBDIR,
        depends=[f"python >={PY}", "pytorch >=2.10 cpu*", "libtorch >=2.10"],
    )
    files = {("pointops", "0.1.0", "cpu_h0_0"): {f"{SITE}/pointops": ("symlink", str(location))}}
    return standins.write_channel(root, [record], files)


class Built:
    def __init__(self, channels: list[Path], output: Path, package: Path, log: list[str]):
        self.channels, self.output, self.package, self.log = channels, output, package, log
        self.meta = read_package(package)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    if current_platform() != "linux-64" or importlib.util.find_spec("pointops") is None:
        pytest.skip("the stand-in channels wrap this linux-64 machine's Python, torch and pointops")
    tmp = tmp_path_factory.mktemp("rattler-build-pointnet2_ops")
    channels = [write_toolchain_channel(tmp / "deps"), pointops_standin_channel(tmp / "pointops")]
    output = tmp / "out"
    logs: dict[str, list[str]] = {}
    try:
        packages = build_channel(
            output,
            [c.as_uri() for c in channels],
            test=True,
            files=FILES,
            logs=logs,
            variant_overrides=OVERRIDES,
        )
    except ChannelError:
        print("\n".join(line for lines in logs.values() for line in lines)[-20000:])
        raise
    (package,) = packages
    (log,) = logs.values()
    return Built(channels, output, package, log)


@pytest.mark.slow
def test_the_package_is_noarch_python_and_pure(built):
    meta = built.meta
    assert (meta.name, str(meta.version), meta.subdir) == ("pointnet2_ops", package_version(), "noarch")
    assert str(meta.noarch).lower().endswith("python")
    assert meta.build_string.startswith("pyh") and meta.build_number == 0
    assert list(meta.depends) == [f"python >={PY}", "pointops >=0.1.0"]
    modules = {f for f in meta.files if f.startswith("site-packages/pointnet2_ops/") and f.endswith(".py")}
    assert modules == {
        f"site-packages/pointnet2_ops/{name}.py"
        for name in ("__init__", "_version", "pointnet2_utils", "pointnet2_modules")
    }
    assert not [f for f in meta.files if f.endswith((".so", ".pyd", ".dll"))]
    assert meta.license == "BSD-3-Clause"
    info = extracted(built.package, built.output.parent / "pkg") / "info"
    assert (info / "licenses" / "LICENSE").read_text().startswith("BSD 3-Clause License")


@pytest.mark.slow
def test_the_recipe_s_tests_ran(built):
    log = "\n".join(built.log)
    assert log.count("python imports test passed") == 1
    assert log.count("pip check passed") == 1
    assert log.count("pointnet2_ops recipe test passed") == 1
    assert "all tests passed" in log


@pytest.mark.slow
def test_the_package_installs_beside_pointops_and_serves_upstream_s_imports(built, tmp_path):
    prefix = tmp_path / "env"
    code, records = rattler_install([built.output, *built.channels], ["pointnet2_ops"], prefix, NO_GPU)
    assert code == 0, records
    installed = {r["name"] for r in records}
    assert {"pointnet2_ops", "pointops", "pytorch", "python"} <= installed
    shutil.copy2(RECIPE_DIR / "test_pointnet2_ops.py", tmp_path / "probe.py")
    proc = subprocess.run(
        [str(prefix / "bin" / "python"), "probe.py"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "pointnet2_ops recipe test passed" in proc.stdout
    assert str(prefix) in proc.stdout  # the prefix's package, not the source tree's
    assert json.dumps(package_version()).strip('"') in proc.stdout


@pytest.mark.slow
def test_the_cli_builds_the_recipe_by_name(built, tmp_path, capsys, monkeypatch):
    """`solver channel build --recipe pointnet2_ops`, from a folder of the tree, against the same
    stand-in channels: the noarch package lands in noarch/ of the channel, indexed, and the
    progress names the package. --variant-config carries the one change to the shipped matrix."""
    monkeypatch.delenv("POINTOPS_RECIPE", raising=False)
    monkeypatch.chdir(REPO / "docs")
    variants = tmp_path / "python_min.yaml"
    variants.write_text(f'python_min:\n  - "{PY}"\n')
    output = tmp_path / "channel"
    channels = [arg for c in built.channels for arg in ("--channel", c.as_uri())]
    argv = ["channel", "build", "--recipe", "pointnet2_ops", *channels, "--variant-config", str(variants)]
    assert cli.main([*argv, "-o", str(output)]) == 0
    out, err = capsys.readouterr()
    (package,) = [Path(line) for line in out.splitlines()]
    assert package.parent == output / "noarch" and package.name == built.package.name
    assert (
        f"[1/1 {package.name.removesuffix('.conda').rsplit('-', 1)[1]}] building pointnet2_ops for noarch"
        in err
    )
    assert "building pointops" not in err
    repodata = json.loads((output / "noarch" / "repodata.json").read_text())
    assert list(repodata["packages.conda"]) == [package.name]
    assert repodata["packages.conda"][package.name]["depends"] == [f"python >={PY}", "pointops >=0.1.0"]
