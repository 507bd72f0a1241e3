"""A small reader of ELF shared objects (standard library only, so it runs wherever doctor runs):
the libraries a file needs (DT_NEEDED), the symbols it defines, the symbol versions it needs from
each library (.gnu.version_r) and the versions it defines (.gnu.version_d).

    elf = read_elf("site-packages/pointops/_C.abi3.so")
    if elf.error: ...                       # not ELF, truncated, unreadable: never an exception
    elf.needed                              # ["libtorch_cpu.so", "libstdc++.so.6", ...]
    elf.needed_versions["libstdc++.so.6"]   # ["GLIBCXX_3.4.21", "CXXABI_1.3", ...]
    elf.defined_versions                    # a library's own: ["GLIBCXX_3.4", ..., "CXXABI_1.3.13"]

    code = read_cuda_archs("site-packages/mmcv/_ext.cpython-312-x86_64-linux-gnu.so")
    code.sass, code.ptx                     # ["sm_80", "sm_90", "sm_90a"], ["compute_90"]

ELF32 and ELF64, little and big endian. Only section headers are read (every linker writes them;
a file stripped of them gets an error).

CUDA code sits in the `.nv_fatbin` section: one or more fat binaries, each a 16-byte header (magic
0xBA55ED50, version, header size, size of its entries) followed by entries. Every entry starts with
its kind (1 PTX, 2 an ELF cubin of SASS), its header size and payload size (offsets 4 and 8), the
arch number (offset 28: 90 for sm_90) and flags (offset 40: 0x100000 for an arch-specific "a"
target such as sm_90a, 0x200000 for a family "f" target). Only those headers are read, never the
payloads (which may be compressed); this is what `cuobjdump --list-elf --list-ptx` lists.
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

SHN_XINDEX = 0xFFFF  # the section-name table's index is in section 0's link field
FATBIN_SECTION = ".nv_fatbin"
FATBIN_MAGIC = 0xBA55ED50
FATBIN_PTX, FATBIN_SASS = 1, 2
FATBIN_ARCH_SPECIFIC, FATBIN_FAMILY = 0x100000, 0x200000

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


@dataclass
class CudaCode:
    """The GPU code a shared object carries, in torch's arch names."""

    path: str
    error: str = ""  # why the file or its fat binaries could not be read
    sass: list[str] = field(default_factory=list)  # "sm_80", "sm_90a", "sm_100f": native code
    ptx: list[str] = field(default_factory=list)  # "compute_90": PTX the driver can JIT-compile

    @property
    def names(self) -> list[str]:
        return self.sass + self.ptx


@dataclass(frozen=True)
class _Section:
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int
    name: int = 0  # offset of its name in the section-name table


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


def _header(reader: _Reader) -> tuple[int, int, int, int]:
    """(section header offset, entry size, count, index of the section-name table) after checking
    the identification bytes."""
    ident = reader.bytes(0, 16) if reader.size >= 16 else b""
    if ident[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfError(f"unknown ELF class {ident[4]} or data encoding {ident[5]}")
    reader.is64, reader.order = ident[4] == 2, "<" if ident[5] == 1 else ">"
    fields = reader.unpack("HHIQQQIHHHHHH" if reader.is64 else "HHIIIIIHHHHHH", 16)
    shoff, shentsize, shnum, shstrndx = fields[5], fields[10], fields[11], fields[12]
    if shoff == 0:
        raise ElfError("no section headers (stripped)")
    if shnum == 0:  # extended numbering: the count is in section 0's size
        shnum = _section(reader, shoff, shentsize, 0).size
    if shstrndx == SHN_XINDEX:
        shstrndx = _section(reader, shoff, shentsize, 0).link
    if shnum > MAX_SECTIONS:
        raise ElfError(f"{shnum} sections: not a plausible ELF file")
    return shoff, shentsize, shnum, shstrndx


def _section(reader: _Reader, shoff: int, shentsize: int, index: int) -> _Section:
    fmt = "IIQQQQIIQQ" if reader.is64 else "IIIIIIIIII"
    if shentsize < struct.calcsize(reader.order + fmt):
        raise ElfError(f"section header entries of {shentsize} bytes are too small")
    name, kind, _, _, offset, size, link, info, _, entsize = reader.unpack(fmt, shoff + index * shentsize)
    return _Section(kind, offset, size, link, info, entsize, name)


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


def _sections(reader: _Reader) -> tuple[list[_Section], int]:
    shoff, shentsize, shnum, shstrndx = _header(reader)
    return [_section(reader, shoff, shentsize, i) for i in range(shnum)], shstrndx


def _read(reader: _Reader, elf: ElfFile, symbols: bool) -> None:
    sections, _ = _sections(reader)
    elf.elf_class, elf.big_endian = (64 if reader.is64 else 32), reader.order == ">"
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


def _arch_name(kind: int, arch: int, flags: int) -> str | None:
    if kind == FATBIN_PTX:
        return f"compute_{arch}"
    if kind == FATBIN_SASS:
        suffix = "a" if flags & FATBIN_ARCH_SPECIFIC else "f" if flags & FATBIN_FAMILY else ""
        return f"sm_{arch}{suffix}"
    return None  # LTO IR and other kinds run nowhere by themselves


def _fatbin_entries(reader: _Reader, start: int, end: int, code: CudaCode) -> None:
    """Add the archs of the fat binaries between start and end (zero padding may separate them)."""
    count = 0
    while start + 16 <= end:
        magic, _, header_size, entries_size = reader.unpack("IHHQ", start)
        if magic != FATBIN_MAGIC:
            if any(reader.bytes(start, 8)):
                raise ElfError(f"no fat binary header at offset {start} of {FATBIN_SECTION}")
            start += 8
            continue
        if header_size < 16:
            raise ElfError(f"a fat binary at offset {start} claims a {header_size}-byte header")
        entry, stop = start + header_size, min(start + header_size + entries_size, end)
        while entry + 48 <= stop:
            kind, _, entry_header, payload = reader.unpack("HHIQ", entry)
            count += 1
            if entry_header < 48 or count > MAX_ENTRIES:
                raise ElfError(f"a fat binary entry at offset {entry} claims a {entry_header}-byte header")
            (arch,) = reader.unpack("I", entry + 28)
            (flags,) = reader.unpack("Q", entry + 40)
            name = _arch_name(kind, arch, flags)
            if name and name not in code.names:
                (code.ptx if kind == FATBIN_PTX else code.sass).append(name)
            entry += entry_header + payload
        start = stop


def read_cuda_archs(path: str | Path) -> CudaCode:
    """The SASS and PTX archs in the file's .nv_fatbin section (none for a CPU-only file); on any
    problem, CudaCode.error says what (this never raises)."""
    code = CudaCode(str(path))
    try:
        with open(path, "rb") as handle:
            reader = _Reader(handle, handle.seek(0, 2))
            sections, names_index = _sections(reader)
            names = _strings(reader, sections, names_index)
            for section in sections:
                if _string(names, section.name) == FATBIN_SECTION:
                    reader.order = "<"  # fat binaries are little-endian whatever the ELF header says
                    _fatbin_entries(reader, section.offset, section.offset + section.size, code)
    except ElfError as exc:
        code.error = str(exc)
    except (OSError, struct.error, ValueError, OverflowError, MemoryError) as exc:
        code.error = f"{type(exc).__name__}: {exc}"
    code.sass.sort(key=_arch_order)
    code.ptx.sort(key=_arch_order)
    return code


def _arch_order(name: str) -> tuple[int, str]:
    digits = "".join(c for c in name.split("_")[1] if c.isdigit())
    return int(digits or 0), name
