"""Writes small ELF shared objects of any class and byte order (the toolchain here makes only
little-endian x86 files): a dynamic section with DT_SONAME/DT_NEEDED, a dynamic symbol table, and
.gnu.version_r / .gnu.version_d records, laid out as the ELF and LSB specifications say; and CUDA
fat binaries for a .nv_fatbin section, laid out as solver/elf.py describes them."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


class Strings:
    def __init__(self):
        self.data = bytearray(b"\0")
        self.offsets: dict[str, int] = {"": 0}

    def add(self, text: str) -> int:
        if text not in self.offsets:
            self.offsets[text] = len(self.data)
            self.data += text.encode() + b"\0"
        return self.offsets[text]


@dataclass
class ElfSpec:
    is64: bool = True
    big_endian: bool = False
    soname: str = "libdemo.so"
    needed: list[str] = field(default_factory=list)
    defined: list[str] = field(default_factory=list)  # dynamic symbols it defines
    undefined: list[str] = field(default_factory=list)  # dynamic symbols it references
    needed_versions: dict[str, list[str]] = field(default_factory=dict)
    defined_versions: list[str] = field(default_factory=list)
    sections: list[tuple[str, bytes]] = field(default_factory=list)  # more sections: (name, contents)


def fatbin_entry(kind: int, arch: int, flags: int = 0x11, payload: bytes = b"\0" * 16) -> bytes:
    """One entry: kind (1 PTX, 2 SASS), header size, payload size, arch at 28, flags at 40."""
    header = bytearray(64)
    struct.pack_into("<HHIQ", header, 0, kind, 0x101, 64, len(payload))
    struct.pack_into("<I", header, 28, arch)
    struct.pack_into("<Q", header, 40, flags)
    return bytes(header) + payload


def fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def _verneed(spec: ElfSpec, order: str, strings: Strings) -> bytes:
    out = b""
    libraries = list(spec.needed_versions.items())
    for i, (library, versions) in enumerate(libraries):
        size = 16 + 16 * len(versions)
        following = size if i + 1 < len(libraries) else 0
        out += struct.pack(order + "HHIII", 1, len(versions), strings.add(library), 16, following)
        for j, version in enumerate(versions):
            out += struct.pack(
                order + "IHHII", 0, 0, 2 + j, strings.add(version), 16 if j + 1 < len(versions) else 0
            )
    return out


def _verdef(spec: ElfSpec, order: str, strings: Strings) -> bytes:
    names = [spec.soname, *spec.defined_versions]  # the first, flagged VER_FLG_BASE, is the file itself
    out = b""
    for i, name in enumerate(names):
        following = 28 if i + 1 < len(names) else 0
        out += struct.pack(order + "HHHHIII", 1, 1 if i == 0 else 0, i + 1, 1, 0, 20, following)
        out += struct.pack(order + "II", strings.add(name), 0)
    return out


def _dynamic(spec: ElfSpec, order: str, strings: Strings) -> bytes:
    fmt = order + ("qQ" if spec.is64 else "iI")
    entries = [(14, strings.add(spec.soname))] + [(1, strings.add(n)) for n in spec.needed] + [(0, 0)]
    return b"".join(struct.pack(fmt, tag, value) for tag, value in entries)


def _dynsym(spec: ElfSpec, order: str, strings: Strings) -> bytes:
    rows = [(0, 0, 0)] + [(strings.add(n), 0x12, 1) for n in spec.defined]
    rows += [(strings.add(n), 0x12, 0) for n in spec.undefined]
    if spec.is64:
        return b"".join(
            struct.pack(order + "IBBHQQ", name, info, 0, shndx, 0, 0) for name, info, shndx in rows
        )
    return b"".join(struct.pack(order + "IIIBBH", name, 0, 0, info, 0, shndx) for name, info, shndx in rows)


def _section_header(order, is64, name, kind, offset, size, link, info, entsize) -> bytes:
    if is64:
        return struct.pack(order + "IIQQQQIIQQ", name, kind, 0, 0, offset, size, link, info, 8, entsize)
    return struct.pack(order + "IIIIIIIIII", name, kind, 0, 0, offset, size, link, info, 4, entsize)


def build_elf(spec: ElfSpec) -> bytes:
    order = ">" if spec.big_endian else "<"
    strings, names = Strings(), Strings()
    # contents first (they fill the string table), then the string table itself
    bodies = [
        (".dynamic", 6, _dynamic(spec, order, strings), 16 if spec.is64 else 8, 0),
        (".dynsym", 11, _dynsym(spec, order, strings), 24 if spec.is64 else 16, 1),
        (".gnu.version_r", 0x6FFFFFFE, _verneed(spec, order, strings), 0, len(spec.needed_versions)),
        (".gnu.version_d", 0x6FFFFFFD, _verdef(spec, order, strings), 0, 1 + len(spec.defined_versions)),
        *[(name, 1, data, 0, 0) for name, data in spec.sections],  # SHT_PROGBITS
    ]
    sections = [(".dynstr", 3, bytes(strings.data), 0, 0), *bodies]
    for name, *_ in sections:
        names.add(name)
    names.add(".shstrtab")
    sections.append((".shstrtab", 3, bytes(names.data), 0, 0))
    header_size = 64 if spec.is64 else 52
    offset, blob, headers = header_size, b"", [(0, 0, 0, 0, 0, 0, 0)]
    for name, kind, data, entsize, info in sections:
        link = 0 if kind == 3 else 1  # every table's strings are in .dynstr (section 1)
        headers.append((names.add(name), kind, offset + len(blob), len(data), link, info, entsize))
        blob += data + b"\0" * (-len(data) % 8)
    shoff = offset + len(blob)
    table = b"".join(_section_header(order, spec.is64, *row) for row in headers)
    if spec.is64:
        fields = (3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), len(headers) - 1)
        header = struct.pack(order + "HHIQQQIHHHHHH", *fields)
    else:
        fields = (3, 3, 1, 0, 0, shoff, 0, 52, 0, 0, 40, len(headers), len(headers) - 1)
        header = struct.pack(order + "HHIIIIIHHHHHH", *fields)
    ident_class = 2 if spec.is64 else 1
    ident = b"\x7fELF" + bytes([ident_class, 2 if spec.big_endian else 1, 1]) + b"\0" * 9
    return ident + header + blob + table
