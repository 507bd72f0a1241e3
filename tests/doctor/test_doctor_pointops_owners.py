"""Doctor notices two installations of `pointops` (this project's and Pointcept's library, which
has the same name) and says which one `import pointops` gets."""

from pathlib import Path

from solver.doctor_checks.facts import Facts, PointopsFacts
from solver.doctor_checks.pointops_owners import check_pointops_installations, find_installs


def ours(site: Path, distribution: str = "pointops") -> Path:
    package = site / "pointops"
    package.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "packed.py", "_build_info.py"):
        (package / name).write_text("")
    meta = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n")
    (meta / "RECORD").write_text("pointops/__init__.py,,\npointops/packed.py,,\npointops/_C.abi3.so,,\n")
    return package


def pointcept_egg(site: Path) -> Path:
    package = site / "pointops-1.0-py3.12-linux-x86_64.egg" / "pointops"
    (package / "functions").mkdir(parents=True)
    (package / "__init__.py").write_text("from .functions import *\n")
    return package


def pointcept_develop(site: Path, checkout: Path) -> Path:
    package = checkout / "pointops"
    (package / "functions").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (site / "pointops.egg-link").write_text(f"{checkout}\n.\n")
    return package


def findings(installs, imported: Path | None):
    facts = Facts(
        pointops=PointopsFacts(installed=imported is not None, path=str(imported or "")),
        pointops_installs=installs,
    )
    return check_pointops_installations(facts, None)


def test_one_installation_passes(tmp_path):
    ours(tmp_path)
    (finding,) = findings(find_installs([tmp_path]), tmp_path / "pointops")
    assert finding.status == "pass" and "this project" in finding.summary


def test_pointcept_egg_beside_ours_is_reported_with_the_imported_one(tmp_path):
    mine = ours(tmp_path)
    theirs = pointcept_egg(tmp_path)
    installs = find_installs([tmp_path])
    assert sorted(i.kind for i in installs) == ["Pointcept's library", "this project"]
    (finding,) = findings(installs, theirs)
    assert finding.status == "warn"
    assert "2 installations provide `import pointops`" in finding.summary
    assert (
        "gets Pointcept's library (the egg pointops-1.0-py3.12-linux-x86_64.egg), not this project's"
        in finding.summary
    )
    assert str(mine.resolve()) in finding.evidence and "uninstall" in finding.fix
    (finding,) = findings(installs, mine)
    assert (
        "gets this project (the distribution pointops 0.1.0)" in finding.summary
        and "not this" not in finding.summary
    )


def test_develop_install_of_pointcept_is_found(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    ours(site)
    pointcept_develop(site, tmp_path / "Pointcept" / "libs" / "pointops_src")
    installs = find_installs([site])
    assert {i.source for i in installs} >= {"an editable install (pointops.egg-link)"}
    assert len(installs) == 2


def test_no_installation_no_finding(tmp_path):
    assert findings(find_installs([tmp_path]), None) == []


def test_two_pip_wheels_installed_over_each_other_are_reported(tmp_path):
    """pointops (CPU) and pointops-cu13 install the same files; pip does not stop the second."""
    ours(tmp_path, "pointops")
    ours(tmp_path, "pointops-cu13")
    installs = find_installs([tmp_path])
    assert [i.distributions for i in installs] == [("pointops 0.1.0", "pointops-cu13 0.1.0")]
    (finding,) = findings(installs, tmp_path / "pointops")
    assert finding.status == "warn"
    assert "pointops 0.1.0 and pointops-cu13 0.1.0 are both installed" in finding.summary
    assert finding.fix.startswith("pip uninstall -y pointops pointops-cu13")
