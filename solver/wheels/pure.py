"""Check a pure-Python wheel that runs on pointops (pointnet2_ops) against the knowledge's
`pure_wheels:` entry (solver/knowledge/pointops_builds.yaml).

    pure_entry("pointnet2_ops") -> PureWheel, or None for any other name
    audit_pure_wheel(path, parsed, entry) -> list of problems (empty: fit to publish)

- the file name: tags py3-none-any (one wheel for every platform and Python);
- METADATA: the name and version of the entry, Python >= 3.10, one `Provides-Extra` per extra of
  the entry, each requiring the pointops distribution it names (`pointops-cu13>=0.1; extra ==
  "cu13"`) at a version that exists, and no requirement outside the extras (a plain `pointops`
  would install the CPU wheel over a CUDA one);
- WHEEL: Root-Is-Purelib, the py3-none-any tag;
- contents: the entry's files, nothing outside its import packages and .dist-info, no binary.
"""

from __future__ import annotations

import re
import zipfile
from email.parser import Parser
from pathlib import Path

from solver.knowledge import load, parse_version
from solver.wheels.naming import WheelName, file_name_of

PURE_TAGS = ("py3", "none", "any")
_BINARY_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".exe")
_BINARY_MAGIC = (b"\x7fELF", b"MZ", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
# "name>=1.0; extra == 'cu13'": name, version specifier, extra (Requires-Dist as setuptools writes it)
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<spec>[^;]*?)\s*"
    r"(?:;\s*(?P<marker>.*))?$"
)
_EXTRA_MARKER = re.compile(r"""^extra\s*==\s*["']([^"']+)["']$""")


def pure_entry(distribution: str):
    """The knowledge's PureWheel whose (file-name-normalized) name is `distribution`, else None."""
    table = load().pointops_table
    return next(
        (w for w in table.pure_wheels if file_name_of(w.distribution) == file_name_of(distribution)), None
    )


def pure_distributions() -> list[str]:
    return [w.distribution for w in load().pointops_table.pure_wheels]


def _check_name(parsed: WheelName, entry, problems: list[str]) -> None:
    if (parsed.python, parsed.abi, parsed.platform) != PURE_TAGS:
        problems.append(
            f"tags {parsed.python}-{parsed.abi}-{parsed.platform}, expected py3-none-any "
            "(pure Python: one wheel for every platform)"
        )
    if parsed.version != entry.version:
        problems.append(f"version {parsed.version}, the knowledge says {entry.distribution} {entry.version}")


def _check_requirement(text: str, entry, seen: dict[str, str], problems: list[str]) -> None:
    """One Requires-Dist line: it must belong to an extra and name that extra's distribution."""
    match = _REQUIREMENT.match(text.strip())
    marker = _EXTRA_MARKER.match((match.group("marker") or "").strip()) if match else None
    if not match or not marker:
        problems.append(
            f"Requires-Dist {text!r} is not under an extra; a plain requirement on a pointops "
            "distribution would install it over the one the user has"
        )
        return
    extra, name, spec = marker.group(1), match.group("name"), match.group("spec").replace(" ", "")
    expected = entry.extras.get(extra)
    if expected is None:
        problems.append(f"Requires-Dist {text!r}: the knowledge has no extra {extra!r}")
        return
    seen[extra] = name
    if file_name_of(name) != file_name_of(expected):
        problems.append(f"extra {extra!r} requires {name}, expected {expected}")
    floor = spec.removeprefix(">=")
    pointops_version = load().pointops.version
    if not spec.startswith(">=") or not re.fullmatch(r"\d+(\.\d+)*", floor):
        problems.append(
            f"extra {extra!r} requires {name}{spec}, expected a floor such as >={pointops_version}"
        )
    elif parse_version(floor) > parse_version(pointops_version):
        problems.append(f"extra {extra!r} requires {name}>={floor}, newer than pointops {pointops_version}")


def _check_metadata(zf: zipfile.ZipFile, parsed: WheelName, entry, problems: list[str]) -> None:
    try:
        text = zf.read(f"{parsed.dist_info}/METADATA").decode("utf-8")
    except KeyError:
        problems.append("no METADATA in the .dist-info folder named after the file")
        return
    meta = Parser().parsestr(text)
    if file_name_of(meta["Name"] or "") != file_name_of(entry.distribution):
        problems.append(f"METADATA Name {meta['Name']!r}, expected {entry.distribution!r}")
    if meta["Version"] != parsed.version:
        problems.append(f"METADATA Version {meta['Version']!r}, the file name says {parsed.version!r}")
    python_min = load().pointops.python_min
    if (meta["Requires-Python"] or "").replace(" ", "") != f">={python_min}":
        problems.append(f"Requires-Python {meta['Requires-Python']!r}, expected >={python_min}")
    provided = sorted(meta.get_all("Provides-Extra") or [])
    if provided != sorted(entry.extras):
        problems.append(f"Provides-Extra {provided}, expected {sorted(entry.extras)}")
    seen: dict[str, str] = {}
    for requirement in meta.get_all("Requires-Dist") or []:
        _check_requirement(requirement, entry, seen, problems)
    missing = [extra for extra in entry.extras if extra not in seen]
    if missing:
        problems.append(f"no Requires-Dist for the extras {missing}")


def _check_wheel_file(zf: zipfile.ZipFile, parsed: WheelName, problems: list[str]) -> None:
    try:
        wheel = Parser().parsestr(zf.read(f"{parsed.dist_info}/WHEEL").decode("utf-8"))
    except KeyError:
        problems.append("no WHEEL in the .dist-info folder named after the file")
        return
    if (wheel["Root-Is-Purelib"] or "").strip().lower() != "true":
        problems.append(f"WHEEL Root-Is-Purelib {wheel['Root-Is-Purelib']!r}, expected true")
    tags = wheel.get_all("Tag") or []
    if tags != ["-".join(PURE_TAGS)]:
        problems.append(f"WHEEL Tag {tags}, expected ['py3-none-any']")


def _is_binary(zf: zipfile.ZipFile, name: str) -> bool:
    with zf.open(name) as member:
        head = member.read(4)
    return name.lower().endswith(_BINARY_SUFFIXES) or ".so." in name or head.startswith(_BINARY_MAGIC)


def _check_contents(zf: zipfile.ZipFile, entry, problems: list[str]) -> None:
    names = [n for n in zf.namelist() if not n.endswith("/")]
    for required in entry.files:
        if required not in names:
            problems.append(f"{required} is missing")
    packages = tuple(sorted({f.split("/", 1)[0] + "/" for f in entry.files}))
    for name in names:
        # a .dist-info folder not named after the file is reported as "no METADATA"
        if not name.startswith(packages) and not name.split("/", 1)[0].endswith(".dist-info"):
            problems.append(f"{name} is outside the import package {', '.join(packages)}")
        if _is_binary(zf, name):
            problems.append(
                f"{name} is a binary; a pure-Python wheel carries none (the kernels are pointops')"
            )


def audit_pure_wheel(path: Path, parsed: WheelName, entry) -> list[str]:
    problems: list[str] = []
    _check_name(parsed, entry, problems)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        return [*problems, f"{path.name} cannot be read as a zip archive: {exc}"]
    with zf:
        _check_metadata(zf, parsed, entry, problems)
        _check_wheel_file(zf, parsed, problems)
        _check_contents(zf, entry, problems)
    return problems
