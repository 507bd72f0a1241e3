"""Windows DLL search path, C runtime copies and mixed conda installs, on simulated Windows paths and
DLL files whose version resources the tests write."""

from __future__ import annotations

import struct
from pathlib import Path

from doctor_helpers import by_check, statuses

from solver.doctor_checks.conda_env import gather_conda
from solver.doctor_checks.facts import CondaFacts, DllCopy, Facts, WindowsFacts
from solver.doctor_checks.windows import (
    check_crt_copies,
    check_dll_search_path,
    check_mixed_installs,
    check_windows,
    conda_install_root,
    gather_windows,
    read_file_version,
)

ENV = r"C:\Users\ada\miniconda3\envs\pc"
SYSTEM32 = r"C:\Windows\System32"


def fake_dll(path: Path, version: tuple[int, int, int, int]) -> Path:
    """A file with a PE-style VS_FIXEDFILEINFO block carrying this file version, amid other bytes."""
    major, minor, build, private = version
    fixed = struct.pack(
        "<13I",
        0xFEEF04BD,
        0x00010000,
        (major << 16) | minor,
        (build << 16) | private,
        (major << 16) | minor,
        (build << 16) | private,
        0x3F,
        0,
        0x40004,
        2,
        0,
        0,
        0,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"MZ" + b"\x00" * 300 + b"\xbd\x04\xef\xfe\x07\x00\x09" + b"VS_VERSION_INFO" + fixed + b"\x00" * 64
    )
    return path


def test_read_file_version_from_the_version_resource(tmp_path):
    dll = fake_dll(tmp_path / "vcruntime140.dll", (14, 44, 35208, 0))
    assert read_file_version(dll) == (14, 44, 35208, 0)
    (tmp_path / "plain.dll").write_bytes(b"MZ" + b"\x00" * 100)
    assert read_file_version(tmp_path / "plain.dll") is None
    assert read_file_version(tmp_path / "absent.dll") is None


def test_install_roots_from_path_entries():
    assert conda_install_root(r"C:\Users\ada\miniconda3\envs\pc\Library\bin") == r"C:\Users\ada\miniconda3"
    assert conda_install_root(r"C:\ProgramData\Anaconda3\Scripts") == r"C:\ProgramData\Anaconda3"
    assert conda_install_root(r"C:\tools\miniforge3\condabin") == r"C:\tools\miniforge3"
    assert conda_install_root(r"C:\Windows\System32") is None


def test_mixed_anaconda_and_miniconda_on_path():
    win = WindowsFacts(
        prefix=ENV,
        path_entries=[
            rf"{ENV}",
            rf"{ENV}\Library\bin",
            r"C:\ProgramData\Anaconda3",
            r"C:\ProgramData\Anaconda3\Library\bin",
            SYSTEM32,
        ],
    )
    [finding] = check_mixed_installs(win)
    assert finding.status == "warn" and "2 conda installations" in finding.summary
    assert r"C:\ProgramData\Anaconda3" in finding.fix and "miniconda3" not in finding.fix
    single = WindowsFacts(
        prefix=ENV, path_entries=[ENV, rf"{ENV}\Library\bin", r"C:\Users\ada\miniconda3\condabin"]
    )
    assert [f.status for f in check_mixed_installs(single)] == ["pass"]


def test_environment_not_activated():
    win = WindowsFacts(prefix=ENV, active_prefix="", path_entries=[SYSTEM32, r"C:\Program Files\Git\cmd"])
    [finding] = check_dll_search_path(win, is_conda_env=True)
    assert finding.status == "warn" and "Library\\bin is not on PATH" in finding.summary
    assert finding.fix == f'conda activate "{ENV}"'
    win.conda_dll_search_modification = "1"
    [finding] = check_dll_search_path(win, is_conda_env=True)
    assert finding.status == "info" and "CONDA_DLL_SEARCH_MODIFICATION_ENABLE" in finding.summary


def test_another_environment_activated():
    win = WindowsFacts(
        prefix=ENV,
        active_prefix=r"C:\Users\ada\miniconda3\envs\other",
        path_entries=[r"C:\Users\ada\miniconda3\envs\other\Library\bin", rf"{ENV}\Library\bin"],
    )
    findings = check_dll_search_path(win, is_conda_env=True)
    assert [f.status for f in findings] == ["warn", "warn"]
    assert "another conda environment is activated" in findings[0].summary
    assert "comes before" in findings[1].summary and "envs\\other" in findings[1].evidence


def test_activated_environment_passes_and_non_conda_is_info():
    win = WindowsFacts(prefix=ENV, active_prefix=ENV, path_entries=[ENV, rf"{ENV}\Library\bin", SYSTEM32])
    assert [f.status for f in check_dll_search_path(win, is_conda_env=True)] == ["pass"]
    assert [f.status for f in check_dll_search_path(win, is_conda_env=False)] == ["info"]


def test_older_crt_copies_on_path():
    win = WindowsFacts(
        prefix=ENV,
        env_dlls=[
            DllCopy(rf"{ENV}\vcruntime140.dll", (14, 44, 35208, 0)),
            DllCopy(rf"{ENV}\msvcp140.dll", (14, 44, 35208, 0)),
        ],
        path_dlls=[
            DllCopy(rf"{ENV}\vcruntime140.dll", (14, 44, 35208, 0)),
            DllCopy(r"C:\Program Files\OldApp\vcruntime140.dll", (14, 16, 27012, 6)),
            DllCopy(rf"{SYSTEM32}\msvcp140.dll", (14, 29, 30133, 0)),
            DllCopy(rf"{SYSTEM32}\vcruntime140.dll", (14, 44, 35211, 0)),
        ],
    )
    findings = check_crt_copies(win)
    assert [f.status for f in findings] == ["warn", "warn"]
    old_app, system = findings
    assert "vcruntime140.dll" in old_app.summary and "14.16.27012.6 < " in old_app.evidence
    assert old_app.fix.startswith(r"remove C:\Program Files\OldApp from PATH")
    assert "msvcp140.dll" in system.summary and "vc_redist.x64.exe" in system.fix


def test_no_vcruntime_anywhere_fails():
    win = WindowsFacts(prefix=ENV, path_entries=[SYSTEM32])
    [finding] = check_crt_copies(win)
    assert finding.status == "fail" and "vc14_runtime" in finding.fix


def test_gather_windows_reads_dlls_from_the_environment_and_path(tmp_path):
    prefix, app = tmp_path / "env", tmp_path / "oldapp"
    (prefix / "conda-meta").mkdir(parents=True)
    fake_dll(prefix / "vcruntime140.dll", (14, 44, 35208, 0))
    fake_dll(prefix / "Library" / "bin" / "ucrtbase.dll", (10, 0, 22621, 0))
    fake_dll(app / "vcruntime140.dll", (14, 20, 27508, 1))
    env = {"PATH": f"{app};{prefix / 'Library' / 'bin'}", "CONDA_PREFIX": str(prefix)}
    win = gather_windows(env, str(prefix))
    assert {(Path(c.path).name, c.version) for c in win.env_dlls} == {
        ("vcruntime140.dll", (14, 44, 35208, 0)),
        ("ucrtbase.dll", (10, 0, 22621, 0)),
    }
    facts = Facts(platform="win-64", windows=win, conda=gather_conda(prefix))
    findings = check_windows(facts, None)
    [crt] = by_check(findings, "windows.crt-copies")
    assert crt.status == "warn" and str(app) in crt.fix
    assert statuses(findings, "windows.conda-installs") == ["pass"]


def test_windows_checks_do_nothing_off_windows():
    assert check_windows(Facts(platform="linux-64", conda=CondaFacts()), None) == []
