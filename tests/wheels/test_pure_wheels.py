"""solver wheels for pointnet2_ops, the pure-Python wheel that runs on pointops: built from
ops-src/dropins/pointnet2_ops with `pip wheel --no-deps` on any platform (no compiler, no
manylinux repair, no abi3 audit), checked by its own rules (py3-none-any, its extras, no binary),
installed next to this environment's pointops."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from pip_target import pip_install_target
from solver_cli import one_line

from solver import published
from solver.cli import main
from solver.knowledge import KnowledgeError, load, read_raw
from solver.knowledge.pointops import parse_pointops
from solver.wheels import audit_wheel
from solver.wheels.naming import parse_wheel_name

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "ops-src" / "dropins" / "pointnet2_ops"
VERSION = re.search(r'__version__ = "([^"]+)"', (SOURCE / "pointnet2_ops" / "_version.py").read_text())[1]
WHEEL_NAME = f"pointnet2_ops-{VERSION}-py3-none-any.whl"
DIST_INFO = f"pointnet2_ops-{VERSION}.dist-info"
MODULES = ["__init__", "_version", "pointnet2_utils", "pointnet2_modules"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str, str]:
    """`solver wheels build pointnet2_ops` run from the repository root: (wheel, stdout, stderr)."""
    out = tmp_path_factory.mktemp("pure-wheels")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        proc = subprocess.run(
            [sys.executable, "-m", "solver", "wheels", "build", "pointnet2_ops", "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip()), proc.stdout, proc.stderr


def test_the_cli_builds_one_py3_none_any_wheel_from_the_dropin_source(built):
    wheel, _, err = built
    assert wheel.name == WHEEL_NAME and wheel.is_file()
    assert list(wheel.parent.iterdir()) == [wheel]
    steps = [line.split("] ", 1)[1] for line in err.splitlines()]
    assert steps == [
        "building pointnet2_ops (pure Python, py3-none-any) from ops-src/dropins/pointnet2_ops",
        "auditing: tags, metadata, extras, files",
    ]  # no compile, repair or rename step


def test_the_wheel_holds_the_import_package_and_its_extras(built):
    wheel, _, _ = built
    assert audit_wheel(wheel) == []
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = Parser().parsestr(zf.read(f"{DIST_INFO}/METADATA").decode())
    assert sorted(n for n in names if not n.startswith(DIST_INFO)) == sorted(
        f"pointnet2_ops/{m}.py" for m in MODULES
    )
    assert (meta["Name"], meta["Version"], meta["Requires-Python"]) == ("pointnet2_ops", VERSION, ">=3.10")
    assert sorted(meta.get_all("Provides-Extra")) == ["cpu", "cu12", "cu13"]
    assert sorted(r.replace(" ", "") for r in meta.get_all("Requires-Dist")) == [
        'pointops-cu12>=0.1;extra=="cu12"',
        'pointops-cu13>=0.1;extra=="cu13"',
        'pointops>=0.1;extra=="cpu"',
    ]


def test_pip_installs_it_beside_this_pointops_and_upstream_s_imports_work(built, tmp_path):
    wheel, _, _ = built
    site = tmp_path / "site"
    pip_install_target(wheel, site)
    probe = (
        "import pointnet2_ops\n"
        "from pointnet2_ops import pointnet2_utils\n"
        "from pointnet2_ops.pointnet2_modules import PointnetSAModule\n"
        "print(pointnet2_ops.__file__, pointnet2_ops.__version__, pointnet2_utils.furthest_point_sample.__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True, cwd=tmp_path
    )
    path, version, _ = out.stdout.split()
    assert Path(path).is_relative_to(site) and version == VERSION


def test_the_knowledge_the_source_and_the_recipe_carry_one_version():
    entry = load().pointops_table.pure_wheel("pointnet2_ops")
    recipe = yaml.safe_load((REPO / "recipes" / "pointnet2_ops" / "recipe.yaml").read_text())
    assert entry.version == VERSION == recipe["context"]["version"]
    assert (REPO / entry.source).resolve() == SOURCE
    assert all((SOURCE / f).is_file() for f in entry.files)


def test_it_builds_on_a_platform_without_pointops_wheels_and_leaves_the_source_clean(
    tmp_path, monkeypatch, capsys
):
    """No compiler, no platform: osx-64 has no pointops wheel, and pointnet2_ops still builds."""
    monkeypatch.setattr("solver.wheels.build.conda_platform", lambda: "osx-64")
    source = tmp_path / "src"
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    code = main(["wheels", "build", "pointnet2_ops", "--source", str(source), "-o", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == str(tmp_path / "out" / WHEEL_NAME)
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before


@pytest.mark.parametrize("where", ["empty", "ops-src"])
def test_a_source_that_is_not_the_dropin_is_named_with_the_fix(tmp_path, capsys, where):
    source = tmp_path if where == "empty" else REPO / "ops-src"
    code = main(["wheels", "build", "pointnet2_ops", "--source", str(source), "-o", str(tmp_path / "out")])
    assert code == 1
    line = one_line(capsys.readouterr().err)
    assert f"{source} is not the pointnet2_ops source tree" in line
    assert "pass --source ops-src/dropins/pointnet2_ops" in line and "Traceback" not in line
    assert not (tmp_path / "out").exists()


def test_without_source_it_looks_in_the_current_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["wheels", "build", "pointnet2_ops", "-o", str(tmp_path / "out")]) == 1
    assert "ops-src/dropins/pointnet2_ops is not the pointnet2_ops source tree" in capsys.readouterr().err


def test_list_and_check_know_the_pure_wheel(built, capsys):
    wheel, _, _ = built
    for platform in ("linux-64", "win-64", "osx-arm64"):
        assert main(["wheels", "list", "--platform", platform]) == 0
        rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines()]
        assert rows[-1] == ["pointnet2_ops", "any"]
    assert main(["wheels", "check", str(wheel)]) == 0
    assert capsys.readouterr().out == f"{WHEEL_NAME}: ok\n"


def test_a_misspelt_name_lists_the_pure_wheel_among_the_choices(capsys):
    assert main(["wheels", "build", "pointnet2-opz"]) == 2
    assert "choose one of: pointops, pointops-cu12, pointops-cu13, pointnet2_ops" in capsys.readouterr().err


def rewrite(wheel: Path, target: Path, change) -> Path:
    """A copy of `wheel` at `target`, each entry replaced by change(name, data) -> [(name, data)]."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            for name, data in change(info.filename, src.read(info)):
                dst.writestr(name, data)
    return target


def drop(path):
    return lambda n, d: [] if n == path else [(n, d)]


def edit(suffix, old, new):
    def change(n, d):
        if n.endswith(suffix):
            assert old in d, (n, old)
            d = d.replace(old, new)
        return [(n, d)]

    return change


def add(path, data=b"\x7fELF\x02\x01\x01"):
    return lambda n, d: [(n, d), (path, data)] if n == "pointnet2_ops/__init__.py" else [(n, d)]


@pytest.mark.parametrize(
    "change, expected",
    [
        (drop("pointnet2_ops/pointnet2_modules.py"), "pointnet2_ops/pointnet2_modules.py is missing"),
        (add("pointnet2_ops/_C.abi3.so"), "pointnet2_ops/_C.abi3.so is a binary"),
        (add("pointnet2_ops/helper.py"), "pointnet2_ops/helper.py is a binary"),
        (add("pointnet2_ops/_ext.pyd", b"# not really"), "pointnet2_ops/_ext.pyd is a binary"),
        (add("tests/test_x.py", b""), "tests/test_x.py is outside the import package pointnet2_ops/"),
        (
            edit(
                "METADATA", b'Requires-Dist: pointops>=0.1; extra == "cpu"', b"Requires-Dist: pointops>=0.1"
            ),
            "'pointops>=0.1' is not under an extra",
        ),
        (
            edit("METADATA", b'pointops-cu13>=0.1; extra == "cu13"', b'pointops-cu12>=0.1; extra == "cu13"'),
            "extra 'cu13' requires pointops-cu12, expected pointops-cu13",
        ),
        (
            edit("METADATA", b'pointops-cu13>=0.1; extra == "cu13"', b'pointops-cu13; extra == "cu13"'),
            "expected a floor such as >=0.1.0",
        ),
        (
            edit("METADATA", b'pointops-cu13>=0.1; extra == "cu13"', b'pointops-cu13>=9.0; extra == "cu13"'),
            "requires pointops-cu13>=9.0, newer than pointops 0.1.0",
        ),
        (edit("METADATA", b"Provides-Extra: cu12\n", b""), "Provides-Extra ['cpu', 'cu13']"),
        (edit("METADATA", b"Name: pointnet2_ops", b"Name: pointops"), "METADATA Name 'pointops'"),
        (edit("METADATA", b"Requires-Python: >=3.10", b"Requires-Python: >=3.8"), "expected >=3.10"),
        (edit("METADATA", f"Version: {VERSION}".encode(), b"Version: 3.0.0"), "the file name says"),
        (edit("WHEEL", b"Root-Is-Purelib: true", b"Root-Is-Purelib: false"), "Root-Is-Purelib 'false'"),
        (edit("WHEEL", b"Tag: py3-none-any", b"Tag: cp310-abi3-linux_x86_64"), "WHEEL Tag"),
        (drop(f"{DIST_INFO}/METADATA"), "no METADATA"),
    ],
    ids=[
        "module missing",
        "ELF library",
        "ELF under a .py name",
        "pyd",
        "file outside the package",
        "plain requirement",
        "extra names another wheel",
        "no floor",
        "floor too new",
        "extra missing",
        "name",
        "python floor",
        "version",
        "not purelib",
        "binary tag in WHEEL",
        "no metadata",
    ],
)
def test_the_audit_catches_a_broken_pure_wheel(built, tmp_path, change, expected):
    wheel, _, _ = built
    broken = rewrite(wheel, tmp_path / wheel.name, change)
    problems = audit_wheel(broken)
    assert any(expected in p for p in problems), problems
    binary_rules = ("_build_info", "extension library", "abi3audit", "torch>=", "libtorch")
    assert not [p for p in problems if any(rule in p for rule in binary_rules)], problems


@pytest.mark.parametrize(
    "name, expected",
    [
        (WHEEL_NAME.replace("py3-none-any", "py3-none-manylinux_2_28_x86_64"), "expected py3-none-any"),
        (WHEEL_NAME.replace("py3-none-any", "cp310-abi3-manylinux_2_28_x86_64"), "expected py3-none-any"),
        (WHEEL_NAME.replace(VERSION, "3.0.0.post99"), "the knowledge says pointnet2_ops " + VERSION),
    ],
)
def test_the_audit_checks_the_file_name(built, tmp_path, name, expected):
    wheel, _, _ = built
    copied = tmp_path / name
    copied.write_bytes(wheel.read_bytes())
    assert any(expected in p for p in audit_wheel(copied)), audit_wheel(copied)


def test_the_check_cli_reports_a_broken_pure_wheel(built, tmp_path, capsys):
    wheel, _, _ = built
    broken = rewrite(wheel, tmp_path / wheel.name, add("pointnet2_ops/_C.abi3.so"))
    assert main(["wheels", "check", str(broken)]) == 1
    out = capsys.readouterr().out
    assert f"{WHEEL_NAME}: FAILED" in out and "pointnet2_ops/_C.abi3.so is a binary" in out


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda e: e["extras"].update(cu11="pointops-cu11"),
            "each extra must name a distribution of `wheels:`",
        ),
        (lambda e: e.update(extras={}), "each extra must name a distribution of `wheels:`"),
        (lambda e: e.update(files=["__init__.py"]), "list the import package's files"),
        (lambda e: e.pop("version"), "missing field 'version'"),
    ],
    ids=["unknown wheel", "no extras", "file outside a package", "no version"],
)
def test_a_malformed_pure_wheel_entry_is_a_knowledge_error(mutate, message):
    raw = copy.deepcopy(read_raw()["pointops_builds"])
    mutate(raw["pure_wheels"]["pointnet2_ops"])
    with pytest.raises(KnowledgeError, match=re.escape(message)):
        parse_pointops(raw)


def test_the_pure_wheel_is_not_one_of_the_binary_wheels():
    """make-env's pip plans and the wheel workflow read the binary table; it keeps its three."""
    kb = load()
    assert list(kb.pointops["wheels"]) == ["pointops", "pointops-cu12", "pointops-cu13"]
    for platform in ("linux-64", "linux-aarch64", "win-64", "osx-arm64"):
        assert "pointnet2_ops" not in [w.distribution for w in kb.pointops_wheels(platform)]


def test_the_not_yet_published_note_gives_the_build_and_the_source_route(monkeypatch):
    entry = load().pointops_table.pure_wheel("pointnet2_ops")
    note = published.wheel_note(entry)
    assert "pointnet2_ops is not on PyPI yet" in note
    assert "`solver wheels build pointnet2_ops -o out/wheels`" in note
    assert f"pip install --no-deps {published.source_tree(entry.source)}" in note
    assert parse_wheel_name(WHEEL_NAME).distribution == "pointnet2_ops"
    monkeypatch.setattr(published, "PURE_WHEELS_PUBLISHED", True)
    assert published.wheel_note(entry) is None
