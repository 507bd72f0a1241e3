"""A small reader of ELF shared objects (standard library only, so it runs wherever doctor runs):
the libraries a file needs (DT_NEEDED), the symbols it defines, the symbol versions it needs from
each library (.gnu.version_r) and the versions it defines (.gnu.version_d).

    elf = read_elf("site-packages/pointops/_C.abi3.so")
    if elf.error: ...                       # not ELF, truncated, unreadable: never an exception
    elf.needed                              # ["libtorch_cpu.so", "libstdc++.so.6", ...]
    elf.needed_versions["libstdc++.so.6"]   # ["GLIBCXX_3.4.21", "CXXABI_1.3", ...]
    elf.defined_versions                    # a library's own: ["GLIBCXX_3.4", ..., "CXXABI_1.3.13"]

ELF32 and ELF64, little and big endian. Only section headers are read (every linker writes them;
a file stripped of them gets an error).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

SHT_SYMTAB = 2
SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NULL, DT_NEEDED, DT_SONAME = 0, 1, 14
VER_FLG_BASE = 1  # the verdef entry that names the file itself, not a version
STT_SECTION, STT_FILE = 3, 4

MAX_SECTIONS = 65536
MAX_ENTRIES = 1_000_000  # dynamic entries, symbols or version records in one section


class ElfError(Exception):
    """The file is not a readable ELF object (internal: read_elf returns it as ElfFile.error)."""


@dataclass
class ElfFile:
    path: str
    error: str = ""  # why the file could not be read; the lists below are then incomplete
    elf_class: int = 0  # 32 or 64
    big_endian: bool = False
    soname: str = ""
    needed: list[str] = field(default_factory=list)  # DT_NEEDED, in order
    dynamic_symbols: set[str] = field(default_factory=set)  # defined in .dynsym (exported)
    symbols: set[str] = field(default_factory=set)  # defined in .dynsym or .symtab
    needed_versions: dict[str, list[str]] = field(default_factory=dict)  # library -> version names
    defined_versions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Section:
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


class _Reader:
    """Bounded reads of one open file: a read past its end is an ElfError, never a short result."""

    def __init__(self, handle, size: int):
        self.handle = handle
        self.size = size
        self.order = "<"
        self.is64 = True

    def bytes(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ElfError(f"truncated: needs bytes {offset}..{offset + length}, the file has {self.size}")
        self.handle.seek(offset)
        data = self.handle.read(length)
        if len(data) != length:
            raise ElfError("truncated while reading")
        return data

    def unpack(self, fmt: str, offset: int) -> tuple:
        layout = struct.Struct(self.order + fmt)
        return layout.unpack(self.bytes(offset, layout.size))


def _string(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        raise ElfError(f"string offset {offset} is outside its table")
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def _header(reader: _Reader) -> tuple[int, int, int]:
    """(section header offset, entry size, count) after checking the identification bytes."""
    ident = reader.bytes(0, 16) if reader.size >= 16 else b""
    if ident[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfError(f"unknown ELF class {ident[4]} or data encoding {ident[5]}")
    reader.is64, reader.order = ident[4] == 2, "<" if ident[5] == 1 else ">"
    fields = reader.unpack("HHIQQQIHHHHHH" if reader.is64 else "HHIIIIIHHHHHH", 16)
    shoff, shentsize, shnum = fields[5], fields[10], fields[11]
    if shoff == 0:
        raise ElfError("no section headers (stripped)")
    if shnum == 0:  # extended numbering: the count is in section 0's size
        shnum = _section(reader, shoff, shentsize, 0).size
    if shnum > MAX_SECTIONS:
        raise ElfError(f"{shnum} sections: not a plausible ELF file")
    return shoff, shentsize, shnum


def _section(reader: _Reader, shoff: int, shentsize: int, index: int) -> _Section:
    fmt = "IIQQQQIIQQ" if reader.is64 else "IIIIIIIIII"
    if shentsize < struct.calcsize(reader.order + fmt):
        raise ElfError(f"section header entries of {shentsize} bytes are too small")
    _, kind, _, _, offset, size, link, info, _, entsize = reader.unpack(fmt, shoff + index * shentsize)
    return _Section(kind, offset, size, link, info, entsize)


def _strings(reader: _Reader, sections: list[_Section], index: int) -> bytes:
    if not 0 <= index < len(sections):
        raise ElfError(f"string table {index} does not exist")
    table = sections[index]
    return reader.bytes(table.offset, table.size)


def _entries(section: _Section, entsize: int) -> range:
    count = section.size // entsize
    if count > MAX_ENTRIES:
        raise ElfError(f"a section claims {count} entries")
    return range(count)


def _read_dynamic(reader: _Reader, sections: list[_Section], dynamic: _Section, elf: ElfFile) -> None:
    fmt = "qQ" if reader.is64 else "iI"
    entsize = struct.calcsize(reader.order + fmt)
    strings = _strings(reader, sections, dynamic.link)
    for index in _entries(dynamic, entsize):
        tag, value = reader.unpack(fmt, dynamic.offset + index * entsize)
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            elf.needed.append(_string(strings, value))
        elif tag == DT_SONAME:
            elf.soname = _string(strings, value)


def _defined_symbols(reader: _Reader, sections: list[_Section], table: _Section) -> set[str]:
    fmt = "IBBHQQ" if reader.is64 else "IIIBBH"
    entsize = struct.calcsize(reader.order + fmt)
    strings = _strings(reader, sections, table.link)
    data = reader.bytes(table.offset, len(_entries(table, entsize)) * entsize)
    names = set()
    for fields in struct.iter_unpack(reader.order + fmt, data):
        name, info, shndx = (
            (fields[0], fields[1], fields[3]) if reader.is64 else (fields[0], fields[3], fields[5])
        )
        if shndx != 0 and name and (info & 0xF) not in (STT_SECTION, STT_FILE):
            names.add(_string(strings, name))
    return names


def _chain(reader: _Reader, start: int, count: int, fmt: str, next_field: int):
    """The records of a version section: each one's fields and offset, following the `next` links."""
    offset, seen = start, 0
    while seen < min(count, MAX_ENTRIES):
        fields = reader.unpack(fmt, offset)
        yield fields, offset
        seen += 1
        if fields[next_field] == 0:
            return
        offset += fields[next_field]


def _read_verneed(reader: _Reader, sections: list[_Section], section: _Section, elf: ElfFile) -> None:
    strings = _strings(reader, sections, section.link)
    for (_, aux_count, file_name, aux, _), offset in _chain(reader, section.offset, section.info, "HHIII", 4):
        library = elf.needed_versions.setdefault(_string(strings, file_name), [])
        for (_, _, _, name, _), _ in _chain(reader, offset + aux, aux_count, "IHHII", 4):
            library.append(_string(strings, name))


def _read_verdef(reader: _Reader, sections: list[_Section], section: _Section, elf: ElfFile) -> None:
    strings = _strings(reader, sections, section.link)
    for (_, flags, _, aux_count, _, aux, _), offset in _chain(
        reader, section.offset, section.info, "HHHHIII", 6
    ):
        if flags & VER_FLG_BASE or aux_count == 0:
            continue
        (name, _) = reader.unpack("II", offset + aux)  # the first aux names the version; the rest, parents
        elf.defined_versions.append(_string(strings, name))


def _read(reader: _Reader, elf: ElfFile, symbols: bool) -> None:
    shoff, shentsize, shnum = _header(reader)
    elf.elf_class, elf.big_endian = (64 if reader.is64 else 32), reader.order == ">"
    sections = [_section(reader, shoff, shentsize, i) for i in range(shnum)]
    for section in sections:
        if section.type == SHT_DYNAMIC:
            _read_dynamic(reader, sections, section, elf)
        elif section.type == SHT_GNU_VERNEED:
            _read_verneed(reader, sections, section, elf)
        elif section.type == SHT_GNU_VERDEF:
            _read_verdef(reader, sections, section, elf)
        elif symbols and section.type in (SHT_DYNSYM, SHT_SYMTAB):
            names = _defined_symbols(reader, sections, section)
            elf.symbols |= names
            if section.type == SHT_DYNSYM:
                elf.dynamic_symbols |= names


def read_elf(path: str | Path, symbols: bool = True) -> ElfFile:
    """What the ELF file at `path` needs and defines; on any problem, ElfFile.error says what (this
    never raises). `symbols=False` skips the symbol tables (for a library read only for its versions)."""
    elf = ElfFile(str(path))
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            _read(_Reader(handle, size), elf, symbols)
    except ElfError as exc:
        elf.error = str(exc)
    except (OSError, struct.error, ValueError, OverflowError, MemoryError) as exc:
        elf.error = f"{type(exc).__name__}: {exc}"
    return elf
