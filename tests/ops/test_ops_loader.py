"""Loading the extension: Windows DLL search path and load-failure messages, simulated on any
host by passing the platform facts in; the extension file itself on this host."""

from pathlib import PureWindowsPath

import pointops
import pytest
from pointops import _loader

TORCH = PureWindowsPath(r"C:\env\Lib\site-packages\torch")
PREFIX = PureWindowsPath(r"C:\env")


def test_windows_search_dirs_are_torch_lib_then_library_bin():
    existing = {TORCH / "lib", PREFIX / "Library" / "bin"}
    added = []
    dirs = _loader.prepare_dll_search_path("win32", TORCH, PREFIX, added.append, lambda p: p in existing)
    assert dirs == [TORCH / "lib", PREFIX / "Library" / "bin"]
    assert added == [str(TORCH / "lib"), str(PREFIX / "Library" / "bin")]


def test_windows_search_dirs_skip_missing_dirs():
    dirs = _loader.prepare_dll_search_path("win32", TORCH, PREFIX, lambda d: None, lambda p: p == TORCH / "lib")
    assert dirs == [TORCH / "lib"]


def test_non_windows_adds_nothing():
    added = []
    assert _loader.prepare_dll_search_path("linux", TORCH, PREFIX, added.append, lambda p: True) == []
    assert added == []


def test_missing_dlls_looks_in_search_dirs_path_and_system_dir():
    present = {TORCH / "lib" / "torch_cpu.dll", TORCH / "lib" / "c10.dll",
               PureWindowsPath(r"C:\Windows\System32") / "vcruntime140.dll",
               PureWindowsPath(r"C:\tools") / "msvcp140.dll"}
    missing = _loader.missing_dlls(_loader.WINDOWS_DEPENDENCIES, [TORCH / "lib"], r"C:\tools;",
                                   PureWindowsPath(r"C:\Windows\System32"), lambda p: p in present,
                                   PureWindowsPath)
    assert missing == ["vcruntime140_1.dll"]


def test_windows_failure_message_names_missing_runtime_and_fix():
    error = OSError("[WinError 126] The specified module could not be found")
    text = _loader.explain_load_failure(error, PureWindowsPath(r"C:\env\pointops\_C.pyd"), "win32",
                                        [TORCH / "lib"], ["vcruntime140_1.dll"])
    assert "Missing DLL(s): vcruntime140_1.dll" in text
    assert "vc14_runtime" in text and str(TORCH / "lib") in text and "WinError 126" in text


def test_windows_failure_message_for_missing_torch_dlls():
    text = _loader.explain_load_failure(OSError("x"), PureWindowsPath("_C.pyd"), "win32", [], ["c10.dll"])
    assert "c10.dll" in text and "PyTorch >= 2.10" in text


def test_linux_undefined_symbol_message_points_to_torch_version():
    error = OSError("_C.abi3.so: undefined symbol: torch_parallel_for")
    text = _loader.explain_load_failure(error, PureWindowsPath("_C.abi3.so"), "linux", [], [])
    assert "PyTorch >= 2.10" in text


def test_missing_extension_file_is_a_clear_import_error(tmp_path):
    with pytest.raises(_loader.ExtensionLoadError, match="pip install ./ops-src"):
        _loader.find_extension(tmp_path)


def test_installed_extension_is_abi3_and_found():
    path = _loader.find_extension()
    assert path == pointops._EXTENSION_PATH
    assert ".abi3." in path.name or path.suffix == ".pyd"
