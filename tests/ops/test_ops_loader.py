"""Loading the extension: Windows DLL search path and load-failure messages, simulated on any
host by passing the platform facts in (and, for load_extension as a whole, by replacing sys.platform,
os.add_dll_directory and the environment); the extension file itself on this host. What a
Windows program needs from DLLs is checked on real Windows binaries in tests/windows."""

import json
from pathlib import PureWindowsPath
from types import SimpleNamespace

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
    dirs = _loader.prepare_dll_search_path(
        "win32", TORCH, PREFIX, lambda d: None, lambda p: p == TORCH / "lib"
    )
    assert dirs == [TORCH / "lib"]


def test_non_windows_adds_nothing():
    added = []
    assert _loader.prepare_dll_search_path("linux", TORCH, PREFIX, added.append, lambda p: True) == []
    assert added == []


def test_missing_dlls_looks_in_search_dirs_path_and_system_dir():
    present = {
        TORCH / "lib" / "torch_cpu.dll",
        TORCH / "lib" / "c10.dll",
        PureWindowsPath(r"C:\Windows\System32") / "vcruntime140.dll",
        PureWindowsPath(r"C:\tools") / "msvcp140.dll",
    }
    missing = _loader.missing_dlls(
        _loader.WINDOWS_DEPENDENCIES,
        [TORCH / "lib"],
        r"C:\tools;",
        PureWindowsPath(r"C:\Windows\System32"),
        lambda p: p in present,
        PureWindowsPath,
    )
    assert missing == ["vcruntime140_1.dll"]


def test_windows_failure_message_names_missing_runtime_and_fix():
    error = OSError("[WinError 126] The specified module could not be found")
    text = _loader.explain_load_failure(
        error, PureWindowsPath(r"C:\env\pointops\_C.pyd"), "win32", [TORCH / "lib"], ["vcruntime140_1.dll"]
    )
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
    with pytest.raises(_loader.ExtensionLoadError, match="is not in") as info:
        _loader.find_extension(tmp_path)
    assert "--no-deps" in str(info.value) and "./ops-src" not in str(info.value)


def installed_without_binary(site, direct_url=None, installer="pip"):
    """site/pointops as pip leaves it, with its _C deleted: a dist-info whose RECORD lists both."""
    package = site / "pointops"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    meta = site / "pointops-0.1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.4\nName: pointops\nVersion: 0.1.0\n")
    (meta / "INSTALLER").write_text(installer + "\n")
    (meta / "RECORD").write_text("pointops/__init__.py,,0\npointops/_C.abi3.so,sha256=x,7101576\n")
    if direct_url is not None:
        (meta / "direct_url.json").write_text(json.dumps(direct_url))
    return package


def test_an_installed_package_without_its_binary_is_not_called_a_source_tree(tmp_path):
    wheel = tmp_path / "wheels" / "pointops-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    package = installed_without_binary(
        tmp_path / "site", {"url": wheel.as_uri(), "archive_info": {"hashes": {}}}
    )
    text = _loader.explain_missing_extension(package)
    assert "source tree" not in text and "installed package is missing its binary" in text
    assert f"`pip install --no-deps --force-reinstall {wheel}`" in text
    wheel.unlink()  # the wheel it came from is gone: the index, at the installed version
    text = _loader.explain_missing_extension(package)
    assert '`pip install --no-deps --force-reinstall --no-cache-dir "pointops==0.1.0"`' in text


def test_a_conda_package_without_its_binary_is_reinstalled_by_conda(tmp_path):
    package = installed_without_binary(tmp_path / "site", installer="conda")
    assert '`conda install --force-reinstall "pointops=0.1.0"`' in _loader.explain_missing_extension(package)


def test_a_source_tree_without_a_build_says_how_to_build_it_in_place(tmp_path):
    checkout = tmp_path / "my src" / "ops-src"
    (checkout / "pointops").mkdir(parents=True)
    (checkout / "setup.py").write_text("")
    text = _loader.explain_missing_extension(checkout / "pointops")
    assert f"source tree ({checkout})" in text
    assert f"`pip install --no-deps --no-build-isolation -e '{checkout}'`" in text  # absolute, quoted


def test_installed_extension_is_abi3_and_found():
    path = _loader.find_extension()
    assert path == pointops._EXTENSION_PATH
    assert ".abi3." in path.name or path.suffix == ".pyd"


def test_find_extension_finds_a_windows_pyd(tmp_path):
    (tmp_path / "_C.pyd").write_bytes(b"")
    assert _loader.find_extension(tmp_path) == tmp_path / "_C.pyd"


def test_windows_python_without_add_dll_directory_adds_nothing():
    assert _loader.prepare_dll_search_path("win32", TORCH, PREFIX, None, lambda p: True) == []


def test_missing_dlls_without_path_or_system_dir_looks_in_search_dirs_only():
    present = {TORCH / "lib" / "c10.dll"}
    missing = _loader.missing_dlls(
        ["c10.dll", "torch_cpu.dll"], [TORCH / "lib"], ";;", None, lambda p: p in present, PureWindowsPath
    )
    assert missing == ["torch_cpu.dll"]


def test_windows_failure_with_nothing_missing_points_at_indirect_dependencies():
    text = _loader.explain_load_failure(
        OSError("[WinError 193] %1 is not a valid Win32 application"),
        PureWindowsPath("_C.pyd"),
        "win32",
        [],
        [],
    )
    assert "All direct dependencies were found" in text and "another architecture" in text
    assert "Searched: (none), PATH and the system directory." in text
    assert "Missing DLL(s)" not in text


def test_windows_failure_for_another_missing_dll_names_it_without_runtime_or_torch_advice():
    text = _loader.explain_load_failure(
        OSError("x"), PureWindowsPath("_C.pyd"), "win32", [TORCH / "lib"], ["cudart64_12.dll"]
    )
    assert "Missing DLL(s): cudart64_12.dll." in text
    assert "vc14_runtime" not in text and "PyTorch >= 2.10" not in text


def test_macos_missing_symbol_message_points_to_torch_version():
    error = OSError("dlopen(_C.abi3.so): Symbol not found: _torch_parallel_for")
    text = _loader.explain_load_failure(error, PureWindowsPath("_C.abi3.so"), "darwin", [], [])
    assert "PyTorch >= 2.10" in text


def test_other_load_failure_says_to_reinstall_from_where_it_came(tmp_path):
    package = installed_without_binary(tmp_path / "site")
    text = _loader.explain_load_failure(
        OSError("_C.abi3.so: invalid ELF header"), package / "_C.abi3.so", "linux", [], []
    )
    assert "invalid ELF header" in text
    assert 'pip install --no-deps --force-reinstall --no-cache-dir "pointops==0.1.0"' in text


# load_extension as a whole on a simulated Windows: sys.platform, os.add_dll_directory, the
# environment and torch's location are replaced; DLLs "exist" as empty files in a temporary tree.


class SimulatedWindows:
    def __init__(self, tmp_path, monkeypatch, dlls_in_torch_lib=(), dlls_in_system32=(), system_root=True):
        import torch

        self.torch_lib = tmp_path / "site-packages" / "torch" / "lib"
        self.library_bin = tmp_path / "env" / "Library" / "bin"
        system32 = tmp_path / "Windows" / "System32"
        for directory in (self.torch_lib, self.library_bin, system32):
            directory.mkdir(parents=True)
        for name in dlls_in_torch_lib:
            (self.torch_lib / name).write_bytes(b"")
        for name in dlls_in_system32:
            (system32 / name).write_bytes(b"")
        self.added: list[str] = []
        monkeypatch.setattr(torch, "__file__", str(self.torch_lib.parent / "__init__.py"))
        monkeypatch.setattr(_loader, "sys", SimpleNamespace(platform="win32", prefix=str(tmp_path / "env")))
        environ = {"PATH": str(tmp_path / "nowhere")}
        if system_root:
            environ["SystemRoot"] = str(tmp_path / "Windows")
        monkeypatch.setattr(
            _loader, "os", SimpleNamespace(add_dll_directory=self.added.append, environ=environ)
        )


def failing_load(path):
    raise OSError(f"[WinError 126] The specified module could not be found: '{path}'")


def test_windows_load_adds_torch_lib_and_library_bin_before_loading(tmp_path, monkeypatch):
    win = SimulatedWindows(tmp_path, monkeypatch)
    seen_when_loading = []
    path = _loader.load_extension(lambda p: seen_when_loading.extend(win.added))
    assert path == pointops._EXTENSION_PATH
    assert win.added == seen_when_loading == [str(win.torch_lib), str(win.library_bin)]


def test_windows_load_failure_names_missing_torch_dlls(tmp_path, monkeypatch):
    SimulatedWindows(
        tmp_path, monkeypatch, dlls_in_system32=["vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll"]
    )
    with pytest.raises(_loader.ExtensionLoadError) as info:
        _loader.load_extension(failing_load)
    text = str(info.value)
    assert "Missing DLL(s): torch_cpu.dll, c10.dll." in text and "PyTorch >= 2.10" in text
    assert "vc14_runtime" not in text and "WinError 126" in text
    assert isinstance(info.value.__cause__, OSError)


def test_windows_load_failure_names_the_missing_vc_runtime(tmp_path, monkeypatch):
    win = SimulatedWindows(
        tmp_path,
        monkeypatch,
        dlls_in_torch_lib=["torch_cpu.dll", "c10.dll"],
        dlls_in_system32=["vcruntime140.dll", "msvcp140.dll"],
    )
    with pytest.raises(_loader.ExtensionLoadError) as info:
        _loader.load_extension(failing_load)
    text = str(info.value)
    assert "Missing DLL(s): vcruntime140_1.dll." in text and "vc14_runtime" in text
    assert f"Searched: {win.torch_lib}, {win.library_bin}, PATH" in text


def test_windows_load_failure_without_system_root_still_checks_the_search_dirs(tmp_path, monkeypatch):
    SimulatedWindows(
        tmp_path,
        monkeypatch,
        dlls_in_torch_lib=["torch_cpu.dll", "c10.dll"],
        dlls_in_system32=list(_loader.WINDOWS_DEPENDENCIES),
        system_root=False,
    )
    with pytest.raises(_loader.ExtensionLoadError) as info:
        _loader.load_extension(failing_load)
    assert "Missing DLL(s): vcruntime140.dll, vcruntime140_1.dll, msvcp140.dll." in str(info.value)


def test_linux_load_failure_adds_no_dll_directory(monkeypatch):
    added = []
    monkeypatch.setattr(_loader, "os", SimpleNamespace(add_dll_directory=added.append, environ={}))
    monkeypatch.setattr(_loader, "sys", SimpleNamespace(platform="linux", prefix="/env"))

    def load(path):
        raise OSError(f"{path}: undefined symbol: torch_parallel_for")

    with pytest.raises(_loader.ExtensionLoadError, match=r"PyTorch >= 2\.10"):
        _loader.load_extension(load)
    assert added == []
