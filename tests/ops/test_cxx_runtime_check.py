"""ops-src refuses a compiler that links libstdc++ statically, and checks the linked library
beside torch before installing it (ops-src/cxx_runtime_check.py). The compilers here are real:
the system g++, and a wrapper script that adds -static-libstdc++ the way some cluster toolchains
do (with it, the library's error messages crashed the interpreter on a GPU host)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OPS_SRC = Path(__file__).resolve().parents[2] / "ops-src"

needs_gxx = pytest.mark.skipif(
    shutil.which("g++") is None or sys.platform == "win32", reason="needs g++ (Linux)"
)


def _checks():
    spec = importlib.util.spec_from_file_location("cxx_runtime_check", OPS_SRC / "cxx_runtime_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _static_wrapper(folder: Path, kind: str = "flag") -> Path:
    """A `g++`, first on a PATH, that links libstdc++ statically: by adding -static-libstdc++
    ("flag"), or by a -B toolchain folder that holds only libstdc++.a ("archive-only", the shape
    of the GPU host's /opt/gcc wrapper)."""
    folder.mkdir(parents=True, exist_ok=True)
    gxx = shutil.which("g++")
    if kind == "flag":
        extra = "-static-libstdc++"
    else:
        archive = subprocess.run([gxx, "-print-file-name=libstdc++.a"], capture_output=True, text=True)
        if "/" not in archive.stdout:
            pytest.skip("this g++ has no libstdc++.a")
        toolchain = folder / "toolchain"
        toolchain.mkdir()
        (toolchain / "libstdc++.a").symlink_to(archive.stdout.strip())
        extra = f"-B{toolchain}/"
    wrapper = folder / "g++"
    wrapper.write_text(f'#!/bin/sh\nexec {gxx} {extra} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@needs_gxx
def test_the_system_compiler_links_the_shared_runtime():
    assert _checks().static_libstdcxx_sign(["g++", "-shared"]) is None


@needs_gxx
@pytest.mark.parametrize("kind", ["flag", "archive-only"])
def test_a_static_libstdcxx_wrapper_is_recognised(tmp_path, kind):
    wrapper = _static_wrapper(tmp_path / "bin", kind)
    checks = _checks()
    sign = checks.static_libstdcxx_sign([str(wrapper), "-shared"])
    assert sign is not None and "stdc++" in sign
    # the sign is right: a library it links carries no libstdc++.so.6 entry
    (tmp_path / "t.cpp").write_text(
        "#include <sstream>\nstd::string f(int x) { std::ostringstream o; o << x; return o.str(); }\n"
    )
    subprocess.run(
        [str(wrapper), "-shared", "-fPIC", str(tmp_path / "t.cpp"), "-o", str(tmp_path / "t.so")], check=True
    )
    assert b"libstdc++.so.6" not in (tmp_path / "t.so").read_bytes()
    message = checks.static_link_message([str(wrapper), "-shared"], sign, "g++ (wrapper)")
    assert "links libstdc++ statically" in message
    # the fix names a compiler that was itself checked, never the wrapper
    assert "CXX=" in message and f"CXX={wrapper}" not in message


@needs_gxx
@pytest.mark.parametrize("kind", ["flag", "archive-only"])
def test_setup_refuses_the_wrapper_before_compiling(tmp_path, kind):
    wrapper = _static_wrapper(tmp_path / "bin", kind)
    source = tmp_path / "ops-src"
    shutil.copytree(OPS_SRC, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "*.so"))
    env = dict(os.environ, PATH=f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}", POINTOPS_CUDA="0")
    env.pop("CXX", None)
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-temp", str(tmp_path / "tmp")],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert "links libstdc++ statically" in done.stderr, done.stderr[-3000:]
    assert not list((tmp_path / "tmp").rglob("*.o")), "it compiled before refusing"


def _installed_library() -> Path:
    spec = importlib.util.find_spec("pointops")
    libraries = sorted(Path(spec.origin).parent.glob("_C*.so")) if spec and spec.origin else []
    if not libraries:
        pytest.skip("no built pointops library installed")
    return libraries[0]


def test_the_load_check_passes_the_installed_library():
    assert _checks().load_problem(str(_installed_library())) is None


def test_the_load_check_refuses_a_broken_library(tmp_path):
    broken = tmp_path / "_C.abi3.so"
    broken.write_bytes(_installed_library().read_bytes()[:4096])
    problem = _checks().load_problem(str(broken))
    # (a truncated mapping dies of SIGBUS when the loader touches it, or fails to load)
    assert problem is not None
    assert "does not load beside torch" in problem or "killed the interpreter (SIGBUS)" in problem


def test_the_load_check_can_be_skipped_and_says_why(monkeypatch):
    checks = _checks()
    monkeypatch.setenv("POINTOPS_LOAD_CHECK", "0")
    assert checks.load_check_skipped() == "POINTOPS_LOAD_CHECK=0"
    monkeypatch.delenv("POINTOPS_LOAD_CHECK")
    monkeypatch.setenv("CONDA_BUILD_CROSS_COMPILATION", "1")
    assert checks.load_check_skipped() == "cross-compiling"
