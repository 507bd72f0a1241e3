"""Two libraries named `pointops`: this project's package and Pointcept's CUDA library
(libs/pointops, also imported as `pointops`, extension `pointops._C`). Installed side by side,
one hides the other, and which one `import pointops` gets depends on sys.path order. Gathering
lists every installation that provides the top-level `pointops` package; the check says which one
is imported and how to keep only one.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from .dists import (
    DistOrigin,
    InstalledDist,
    read_installed,
    rebuild_command,
    reinstall_command,
    source_command,
)
from .facts import Facts
from .findings import Finding, passed, warned

CHECK = "pointops.installations"


@dataclass(frozen=True)
class PointopsInstall:
    path: str  # the package directory (…/pointops)
    source: str  # how it was installed: "pointops 0.1.0 (pip/conda)", "an egg", "an editable install", ...
    kind: str  # "this project", "Pointcept's library" or "an unknown pointops"
    # the pip distributions whose RECORD lists this same directory (pointops and pointops-cu13
    # installed one over the other: the files are the last one's)
    distributions: tuple[str, ...] = ()
    origin: DistOrigin | None = None  # where it came from (the first distribution), for a reinstall
    built_against_torch: str = ""  # from its _build_info.json, readable without importing it


def kind_of(package: Path) -> str:
    """Ours ships packed.py and _build_info.py; Pointcept's has functions/ (its op wrappers)."""
    if (package / "packed.py").is_file() and (package / "_build_info.py").is_file():
        return "this project"
    if (package / "functions").is_dir():
        return "Pointcept's library"
    return "an unknown pointops"


def _package(directory: Path) -> Path | None:
    package = directory / "pointops"
    return package if (package / "__init__.py").is_file() else None


def built_against_torch(package: Path) -> str:
    try:
        info = json.loads((package / "_build_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return str(info.get("built_against_torch") or "") if isinstance(info, dict) else ""


def _from_dists(site: Path, installed: list[InstalledDist]) -> list[tuple[Path, str, DistOrigin | None]]:
    """Packages pip (or uv, conda) installed into `site`: listed in a RECORD, or an editable install
    whose direct_url.json names the folder that holds the package (setuptools' finder-based editables)."""
    found: list[tuple[Path, str, DistOrigin | None]] = []
    for dist in installed:
        if dist.site != site:
            continue
        origin = dist.origin
        name = f"{dist.name} {dist.version}".strip()
        editable = _package(Path(origin.location)) if origin and origin.kind == "editable" else None
        if dist.lists("pointops/__init__.py") and (site / "pointops").is_dir():
            found.append((site / "pointops", f"the distribution {name}", origin))
        elif editable is not None:
            found.append((editable, f"an editable install of {name}", origin))
    return found


def _installs_in(site: Path, installed: list[InstalledDist]) -> list[tuple[Path, str, DistOrigin | None]]:
    found = _from_dists(site, installed)
    for egg in sorted(site.glob("*.egg")):  # `python setup.py install` (Pointcept's README way)
        package = _package(egg) if egg.is_dir() else None
        if package is not None:
            found.append((package, f"the egg {egg.name}", None))
    for link in [
        *sorted(site.glob("*.egg-link")),
        *sorted(site.glob("*.pth")),
    ]:  # develop / editable installs
        try:
            lines = link.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            text = line.strip()
            if not text or text.startswith(("#", "import ")):
                continue
            package = _package(Path(text))
            if package is not None:
                origin = DistOrigin("pointops", "", kind="editable", location=text, location_exists=True)
                found.append((package, f"an editable install ({link.name})", origin))
    return found


def find_installs(
    site_dirs: list[Path], installed: list[InstalledDist] | None = None
) -> list[PointopsInstall]:
    """Every installation providing `pointops`, one per package directory (`installed`: read_installed()
    of the same folders, read here when not given)."""
    if installed is None:
        installed = read_installed(site_dirs)
    seen: dict[str, PointopsInstall] = {}
    for site in site_dirs:
        for package, source, origin in _installs_in(site, installed):
            key = str(package.resolve())
            dists = (
                (source.removeprefix("the distribution "),) if source.startswith("the distribution ") else ()
            )
            if key not in seen:
                built = built_against_torch(package)
                seen[key] = PointopsInstall(key, source, kind_of(package), dists, origin, built)
            elif dists and dists[0] not in seen[key].distributions:
                old = seen[key]
                seen[key] = dataclasses.replace(old, distributions=old.distributions + dists)
    return list(seen.values())


def _overlapping_distributions(install: PointopsInstall) -> Finding:
    names = " and ".join(install.distributions)
    uninstall = " ".join(d.split()[0] for d in install.distributions)
    return warned(
        CHECK,
        f"{names} are both installed into {install.path}: its files are those of whichever was "
        "installed last",
        f"{len(install.distributions)} .dist-info records list {install.path}/__init__.py",
        f"pip uninstall -y {uninstall}, then install the one that fits (solver make-env --format pip)",
    )


def check_pointops_installations(facts: Facts, kb) -> list[Finding]:
    installs = facts.pointops_installs
    imported = facts.pointops.path
    if not installs:
        return []
    overlapping = [_overlapping_distributions(i) for i in installs if len(i.distributions) > 1]
    if overlapping:
        return overlapping
    if len(installs) == 1:
        only = installs[0]
        return [passed(CHECK, f"one pointops is installed: {only.kind}", f"{only.source} at {only.path}")]
    described = "; ".join(f"{i.kind} from {i.source} at {i.path}" for i in installs)
    winner = next((i for i in installs if imported and i.path == imported), None)  # gather resolved it
    if winner is not None:
        got = f"`import pointops` gets {winner.kind} ({winner.source})"
        got += "" if winner.kind == "this project" else ", not this project's"
    elif imported:
        got = f"`import pointops` gets {imported}, none of them"
    else:
        got = "`import pointops` finds none of them (this interpreter does not look there)"
    fix = (
        "keep one: this package serves Pointcept's names too (pointops.knn_query, ...), so uninstall "
        "Pointcept's library (pip uninstall pointops for a pip install; delete the egg or the egg-link "
        "for setup.py installs) and reinstall this one, or uninstall this one to keep Pointcept's"
    )
    return [warned(CHECK, f"{len(installs)} installations provide `import pointops`; {got}", described, fix)]


# ---------------------------------------------------------------- fixes for a broken pointops


def imported_install(facts: Facts) -> PointopsInstall | None:
    """The installation `import pointops` gets (the only one, when the import did not say)."""
    installs, path = facts.pointops_installs, facts.pointops.path
    if path:
        return next((i for i in installs if i.path == path), None)
    return installs[0] if len(installs) == 1 else None


def _conda_name(facts: Facts, origin: DistOrigin) -> str:
    name = origin.name.lower().replace("_", "-")
    return next((r.name for r in facts.conda.records if r.name == name), name)


def reinstall_pointops(facts: Facts) -> str:
    """Put pointops back from where it came: its conda package, wheel file, index or source folder."""
    install = imported_install(facts)
    if install is not None and install.origin is not None:
        return reinstall_command(install.origin, _conda_name(facts, install.origin))
    if facts.pointops.source_tree:
        return f"{source_command(facts.pointops.source_tree, editable=True)}  (builds the extension in place)"
    return (
        "pip install --no-deps --force-reinstall --no-cache-dir pointops, or in a conda environment: "
        "conda install --force-reinstall pointops"
    )


def rebuild_pointops(facts: Facts, cxx: str) -> str:
    """Compile pointops again with the compiler `cxx`, from its source when it came from one."""
    install = imported_install(facts)
    if install is not None and install.origin is not None:
        return rebuild_command(install.origin, cxx, _conda_name(facts, install.origin))
    if facts.pointops.source_tree:
        return source_command(facts.pointops.source_tree, cxx, editable=True)
    return rebuild_command(DistOrigin("pointops", ""), cxx)
