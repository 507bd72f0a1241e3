"""Give a built wheel its distribution name ("pointops" -> "pointops-cu13") and platform tag.

setuptools builds every variant as `pointops` (the name in ops-src/pyproject.toml, which PEP 621
does not let setup.py change); the CUDA wheels are published as their own distributions. The
rewrite keeps every file's bytes and mode, renames the .dist-info folder, edits METADATA's Name
and WHEEL's Tag lines, and writes a fresh RECORD (hashes of what is in the new wheel).
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

from solver.errors import SolverError
from solver.wheels.naming import WheelName, file_name_of, parse_wheel_name


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _rewrite_metadata(text: str, distribution: str) -> str:
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("Name:"):
            lines[i] = f"Name: {distribution}\n"
            return "".join(lines)
    raise SolverError("the wheel's METADATA has no Name field")


def _rewrite_wheel_file(text: str, new: WheelName) -> str:
    kept = [line for line in text.splitlines() if not line.startswith("Tag:")]
    return "\n".join([*kept, f"Tag: {new.python}-{new.abi}-{new.platform}"]) + "\n"


def rename_wheel(wheel: Path, distribution: str, output_dir: Path, platform: str | None = None) -> Path:
    """Write `wheel` as `distribution` (and `platform`, if given) into output_dir; returns the path."""
    old = parse_wheel_name(wheel.name)
    new = WheelName(file_name_of(distribution), old.version, old.python, old.abi, platform or old.platform)
    target = output_dir / new.filename
    tmp = target.with_name(target.name + ".part")
    records = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.is_dir():
                continue
            name = info.filename
            if name.startswith(old.dist_info + "/"):
                name = new.dist_info + name[len(old.dist_info) :]
            if name == f"{new.dist_info}/RECORD":
                continue
            data = src.read(info)
            if name == f"{new.dist_info}/METADATA":
                data = _rewrite_metadata(data.decode("utf-8"), distribution).encode("utf-8")
            elif name == f"{new.dist_info}/WHEEL":
                data = _rewrite_wheel_file(data.decode("utf-8"), new).encode("utf-8")
            out = zipfile.ZipInfo(name, date_time=info.date_time)
            out.external_attr = info.external_attr  # keeps the executable/permission bits
            out.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(out, data)
            records.append(_record_line(name, data))
        record_name = f"{new.dist_info}/RECORD"
        dst.writestr(record_name, "\n".join([*records, f"{record_name},,"]) + "\n")
    os.replace(tmp, target)
    return target
