"""solver/elf.py against pyelftools on real shared objects (compiled here with g++, the system
libstdc++) and on written ones of every class and byte order; broken files give an error, never an
exception."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from elf_builder import ElfSpec, build_elf, fatbin, fatbin_entry

from solver.elf import read_cuda_archs, read_elf

elftools = pytest.importorskip("elftools")
from elftools.elf.dynamic import DynamicSection  # noqa: E402
from elftools.elf.elffile import ELFFile  # noqa: E402
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection  # noqa: E402
from elftools.elf.sections import SymbolTableSection  # noqa: E402

USES_OSTRINGSTREAM = """
#include <sstream>
#include <string>
extern "C" const char* describe(int value) {
  static std::string text;
  std::ostringstream out;
  out << "value " << value;
  text = out.str();
  return text.c_str();
}
"""
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build shared objects")


def compile_shared(tmp_path: Path, name: str, *flags: str) -> Path:
    source = tmp_path / "describe.cpp"
    source.write_text(USES_OSTRINGSTREAM)
    target = tmp_path / name
    subprocess.run(["g++", "-shared", "-fPIC", *flags, "-o", str(target), str(source)], check=True)
    return target


def system_libstdcxx() -> Path:
    """The libstdc++ this interpreter maps once torch is imported (the one extensions share)."""
    code = "import torch; print([l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++.so.6' in l][0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("torch does not map a libstdc++ here")
    return Path(done.stdout.strip())


def by_pyelftools(path: Path) -> dict:
    """The same facts, read by pyelftools."""
    facts = {"needed": [], "symbols": set(), "dynamic": set(), "needed_versions": {}, "defined_versions": []}
    with open(path, "rb") as handle:
        for section in ELFFile(handle).iter_sections():
            if isinstance(section, DynamicSection):
                facts["needed"] = [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
            elif isinstance(section, GNUVerNeedSection):
                for need, auxes in section.iter_versions():
                    facts["needed_versions"].setdefault(need.name, []).extend(a.name for a in auxes)
            elif isinstance(section, GNUVerDefSection):
                for definition, auxes in section.iter_versions():
                    if not definition["vd_flags"] & 1:
                        facts["defined_versions"].append(next(iter(auxes)).name)
            elif isinstance(section, SymbolTableSection):
                names = {
                    s.name
                    for s in section.iter_symbols()
                    if s["st_shndx"] != "SHN_UNDEF"
                    and s.name
                    and s["st_info"]["type"] not in ("STT_SECTION", "STT_FILE")
                }
                facts["symbols"] |= names
                if section["sh_type"] == "SHT_DYNSYM":
                    facts["dynamic"] |= names
    return facts


def assert_same_as_pyelftools(path: Path) -> None:
    mine, theirs = read_elf(path), by_pyelftools(path)
    assert mine.error == ""
    assert mine.needed == theirs["needed"]
    assert mine.symbols == theirs["symbols"] and mine.dynamic_symbols == theirs["dynamic"]
    assert mine.needed_versions == theirs["needed_versions"]
    assert mine.defined_versions == theirs["defined_versions"]


@needs_gxx
def test_a_dynamically_linked_object_needs_libstdcxx_and_defines_no_iostream(tmp_path):
    path = compile_shared(tmp_path, "dynamic.so")
    elf = read_elf(path)
    assert "libstdc++.so.6" in elf.needed and "describe" in elf.dynamic_symbols
    assert not [s for s in elf.symbols if s.startswith("_ZNSo")]
    assert any(v.startswith("GLIBCXX_3.4") for v in elf.needed_versions["libstdc++.so.6"])
    assert_same_as_pyelftools(path)


@needs_gxx
@pytest.mark.parametrize("hidden", [False, True])
def test_a_static_libstdcxx_shows_as_iostream_symbols_it_defines(tmp_path, hidden):
    flags = ["-static-libstdc++"] + (["-Wl,--exclude-libs,ALL"] if hidden else [])
    path = compile_shared(tmp_path, "static.so", *flags)
    elf = read_elf(path)
    assert "libstdc++.so.6" not in elf.needed and "libstdc++.so.6" not in elf.needed_versions
    carried = {s for s in elf.symbols if s.startswith(("_ZNSo", "_ZNSt8ios_base4Init"))}
    assert carried
    assert bool(carried & elf.dynamic_symbols) is not hidden  # --exclude-libs keeps them out of .dynsym
    assert_same_as_pyelftools(path)


def test_the_system_libstdcxx_defines_its_glibcxx_versions():
    path = system_libstdcxx()
    elf = read_elf(path, symbols=False)
    assert elf.error == "" and elf.soname == "libstdc++.so.6"
    assert "GLIBCXX_3.4" in elf.defined_versions and "CXXABI_1.3" in elf.defined_versions
    assert not elf.symbols  # skipped when asked
    assert elf.defined_versions == by_pyelftools(path)["defined_versions"]


@pytest.mark.parametrize("is64", [True, False])
@pytest.mark.parametrize("big_endian", [False, True])
def test_every_class_and_byte_order(tmp_path, is64, big_endian):
    spec = ElfSpec(
        is64=is64,
        big_endian=big_endian,
        soname="libdemo.so.1",
        needed=["libstdc++.so.6", "libc.so.6"],
        defined=["_ZNSo5flushEv", "demo_entry"],
        undefined=["_ZSt4cout"],
        needed_versions={"libstdc++.so.6": ["GLIBCXX_3.4.32", "CXXABI_1.3.15"], "libc.so.6": ["GLIBC_2.34"]},
        defined_versions=["DEMO_1.0", "DEMO_1.1"],
    )
    path = tmp_path / "demo.so"
    path.write_bytes(build_elf(spec))
    elf = read_elf(path)
    assert (elf.error, elf.elf_class, elf.big_endian) == ("", 64 if is64 else 32, big_endian)
    assert elf.soname == "libdemo.so.1" and elf.needed == ["libstdc++.so.6", "libc.so.6"]
    assert elf.symbols == elf.dynamic_symbols == {"_ZNSo5flushEv", "demo_entry"}  # _ZSt4cout is undefined
    assert elf.needed_versions == spec.needed_versions
    assert elf.defined_versions == ["DEMO_1.0", "DEMO_1.1"]
    assert_same_as_pyelftools(path)


@needs_gxx
def test_truncated_and_foreign_files_give_an_error_never_an_exception(tmp_path):
    whole = compile_shared(tmp_path, "whole.so").read_bytes()
    step = max(len(whole) // 97, 1)
    for size in [*range(0, 80), *range(80, len(whole), step)]:
        path = tmp_path / "cut.so"
        path.write_bytes(whole[:size])
        assert read_elf(path).error, size
    for name, data in (
        ("empty.so", b""),
        ("text.so", b"not an ELF file at all\n" * 10),
        ("class.so", b"\x7fELF\x07\x01" + b"\0" * 80),
        ("huge.so", b"\x7fELF\x02\x01\x01" + b"\0" * 33 + b"\xff" * 200),  # offsets far past the end
    ):
        (tmp_path / name).write_bytes(data)
        assert read_elf(tmp_path / name).error, name
    assert "No such file" in read_elf(tmp_path / "absent.so").error
    assert read_elf(tmp_path).error  # a folder


def test_corrupt_tables_give_an_error(tmp_path):
    data = bytearray(build_elf(ElfSpec(needed=["libc.so.6"], needed_versions={"libc.so.6": ["GLIBC_2.34"]})))
    path = tmp_path / "corrupt.so"
    at = data.index(b"libc.so.6")
    for offset in range(64, len(data), 3):  # every third byte set to 0xff: readable or an error, no raise
        broken = bytearray(data)
        broken[offset] = 0xFF
        path.write_bytes(bytes(broken))
        read_elf(path)
    data[at - 1 : at + 9] = b"\xff" * 10  # the string table loses its terminators
    path.write_bytes(bytes(data))
    assert isinstance(read_elf(path).error, str)


# ---------------------------------------------------------------- CUDA archs (.nv_fatbin)

KERNEL = """
__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" void launch(float* x) { add_one<<<1, 32>>>(x); }
"""
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build CUDA code")


def compile_cuda(tmp_path: Path, name: str, *gencode: str) -> Path:
    source = tmp_path / "kernel.cu"
    source.write_text(KERNEL)
    target = tmp_path / name
    flags = [f"-gencode=arch={arch},code={code}" for arch, code in (g.split(":") for g in gencode)]
    subprocess.run(
        ["nvcc", "-shared", "-Xcompiler", "-fPIC", *flags, "-o", str(target), str(source)], check=True
    )
    return target


@needs_nvcc
def test_the_archs_nvcc_was_asked_for_are_read_from_the_fat_binaries(tmp_path):
    path = compile_cuda(
        tmp_path,
        "mixed.so",
        "compute_80:sm_80",
        "compute_90a:sm_90a",
        "compute_100f:sm_100f",
        "compute_90:compute_90",
    )
    code = read_cuda_archs(path)
    assert (code.error, code.sass, code.ptx) == ("", ["sm_80", "sm_90a", "sm_100f"], ["compute_90"])
    assert read_elf(path).error == ""  # the ELF reader is unaffected by the section


@needs_gxx
def test_a_file_without_cuda_code_has_no_archs(tmp_path):
    code = read_cuda_archs(compile_shared(tmp_path, "cpu.so"))
    assert (code.error, code.sass, code.ptx) == ("", [], [])


def test_written_fat_binaries_padding_and_unknown_kinds(tmp_path):
    section = (
        fatbin(fatbin_entry(2, 75), fatbin_entry(1, 75, flags=0x8011))
        + b"\0" * 8  # alignment between fat binaries
        + fatbin(fatbin_entry(2, 90, flags=0x100011), fatbin_entry(2, 86), fatbin_entry(4, 120))
    )
    path = tmp_path / "written.so"
    path.write_bytes(build_elf(ElfSpec(sections=[(".nv_fatbin", section)])))
    code = read_cuda_archs(path)
    assert (code.error, code.sass, code.ptx) == ("", ["sm_75", "sm_86", "sm_90a"], ["compute_75"])


def test_broken_fat_binaries_give_an_error_never_an_exception(tmp_path):
    good = fatbin(fatbin_entry(2, 80), fatbin_entry(1, 90))
    zero_header = bytearray(good)
    zero_header[16 + 4 : 16 + 8] = b"\0\0\0\0"  # an entry claiming a 0-byte header: no endless loop
    for name, section in (
        ("magic", b"\x01" * 16 + good),
        ("header", good[:4] + b"\x01\x00\x00\x00" + good[8:]),  # a 0-byte fat binary header
        ("entry", bytes(zero_header)),
    ):
        path = tmp_path / f"{name}.so"
        path.write_bytes(build_elf(ElfSpec(sections=[(".nv_fatbin", section)])))
        assert read_cuda_archs(path).error, name
    data = build_elf(ElfSpec(sections=[(".nv_fatbin", good)]))
    for size in range(0, len(data), 7):
        (tmp_path / "cut.so").write_bytes(data[:size])
        assert isinstance(read_cuda_archs(tmp_path / "cut.so").error, str)
    huge = fatbin(fatbin_entry(2, 80, payload=b"")[:8] + struct.pack("<Q", 2**63) + fatbin_entry(2, 80)[16:])
    (tmp_path / "huge.so").write_bytes(build_elf(ElfSpec(sections=[(".nv_fatbin", huge)])))
    # the payload size is not followed past the end of the section
    assert read_cuda_archs(tmp_path / "huge.so").sass == ["sm_80"]
    (tmp_path / "cuda.txt").write_text("not ELF")
    assert read_cuda_archs(tmp_path / "cuda.txt").error == "not an ELF file"
    assert "No such file" in read_cuda_archs(tmp_path / "absent.so").error
