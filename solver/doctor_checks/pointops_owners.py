"""Two libraries named `pointops`: this project's package and Pointcept's CUDA library
(libs/pointops, also imported as `pointops`, extension `pointops._C`). Installed side by side,
one hides the other, and which one `import pointops` gets depends on sys.path order. Gathering
lists every installation that provides the top-level `pointops` package; the check says which one
is imported and how to keep only one.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

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


def _installs_in(site: Path) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for meta_dir in sorted(site.glob("*.dist-info")):
        try:
            record = (meta_dir / "RECORD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(
            line.split(",")[0] in ("pointops/__init__.py", "pointops\\__init__.py")
            for line in record.splitlines()
        ):
            try:
                headers = HeaderParser().parsestr(
                    (meta_dir / "METADATA").read_text(encoding="utf-8", errors="replace")
                )
            except OSError:
                headers = {}
            name, version = headers.get("Name", meta_dir.name), headers.get("Version", "")
            package = site / "pointops"
            if package.is_dir():
                found.append((package, f"the distribution {name} {version}".strip()))
    for egg in sorted(site.glob("*.egg")):  # `python setup.py install` (Pointcept's README way)
        package = _package(egg) if egg.is_dir() else None
        if package is not None:
            found.append((package, f"the egg {egg.name}"))
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
                found.append((package, f"an editable install ({link.name})"))
    return found


def find_installs(site_dirs: list[Path]) -> list[PointopsInstall]:
    """Every installation providing `pointops`, one per package directory."""
    seen: dict[str, PointopsInstall] = {}
    for site in site_dirs:
        for package, source in _installs_in(site):
            key = str(package.resolve())
            dists = (
                (source.removeprefix("the distribution "),) if source.startswith("the distribution ") else ()
            )
            if key not in seen:
                seen[key] = PointopsInstall(key, source, kind_of(package), dists)
            elif dists and dists[0] not in seen[key].distributions:
                old = seen[key]
                seen[key] = PointopsInstall(key, old.source, old.kind, old.distributions + dists)
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
    winner = next((i for i in installs if imported and Path(i.path) == Path(imported).resolve()), None)
    got = (
        f"`import pointops` gets {winner.kind} ({winner.source})"
        if winner
        else (f"`import pointops` gets {imported}" if imported else "`import pointops` fails")
    )
    fix = (
        "keep one: this package serves Pointcept's names too (pointops.knn_query, ...), so uninstall "
        "Pointcept's library (pip uninstall pointops for a pip install; delete the egg or the egg-link "
        "for setup.py installs) and reinstall this one, or uninstall this one to keep Pointcept's"
    )
    if winner is None or winner.kind != "this project":
        got += ", not this project's"
    return [warned(CHECK, f"{len(installs)} installations provide `import pointops`; {got}", described, fix)]
