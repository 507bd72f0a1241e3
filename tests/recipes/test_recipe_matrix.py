"""py-rattler-build renders recipes/pointops/recipe.yaml for every platform and variant, offline
and with its environments solved against stand-ins of conda-forge's packages; the rendered
requirements, build strings, arch lists and run_exports are what the project promises (README
"Recipes and the channel")."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from solver.channel import (
    PLATFORMS,
    ChannelError,
    RenderedBuild,
    find_recipe,
    render_matrix,
    render_with_solve,
)

EXPECTED_CELLS = {
    ("linux-64", "cpu"),
    ("linux-64", "cuda129"),
    ("linux-64", "cuda130"),
    ("linux-aarch64", "cpu"),
    ("linux-aarch64", "cuda129"),
    ("linux-aarch64", "cuda130"),
    ("win-64", "cpu"),
    ("win-64", "cuda128"),
    ("win-64", "cuda130"),
    ("osx-64", "cpu"),
    ("osx-arm64", "cpu"),
}
FILES = find_recipe()
REPO = FILES.recipe.parents[2]
ARCH_TABLE = FILES.source_dir / "pointops" / "cuda_arch_table.json"
SOLVER_TABLE = REPO / "solver" / "knowledge" / "pointops_builds.yaml"


@pytest.fixture(scope="module")
def matrix() -> list[RenderedBuild]:
    return render_matrix()


def cells(matrix):
    return {(b.platform, b.variant) for b in matrix}


def env_with(**values: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    env.update({k: v for k, v in values.items() if v is not None})
    return env


def test_matrix_is_platform_by_variant(matrix):
    assert cells(matrix) == EXPECTED_CELLS
    assert len(matrix) == len(EXPECTED_CELLS), "a platform/variant pair was rendered twice"


def test_only_the_python_min_build_is_kept(matrix):
    # the pinning lists 3.10-3.13; the abi3 recipe builds once, with python_min
    assert {b.variant_values["python"] for b in matrix} == {"3.10.* *_cpython"}
    assert all(
        b.variant_values["is_python_min"] is True and b.variant_values["is_abi3"] is True for b in matrix
    )


def test_build_strings_name_the_variant(matrix):
    for b in matrix:
        tag = "cpu" if b.cuda_version is None else "cuda" + b.cuda_version.replace(".", "")
        assert b.variant == tag
        assert re.fullmatch(rf"{tag}_h[0-9a-f]{{7}}_{b.build_number}", b.build_string), b.build_string
        # CUDA builds rank above the cpu build so that a solver picks them where __cuda exists.
        assert b.build_number == (200 if b.cuda_version else 0)
    for platform in PLATFORMS:
        strings = [b.build_string for b in matrix if b.platform == platform]
        assert len(set(strings)) == len(strings)


def test_cuda_versions_follow_conda_forge_pytorch(matrix):
    by_cell = {(b.platform, b.variant): b.cuda_version for b in matrix}
    assert by_cell[("win-64", "cuda128")] == "12.8"  # conda-forge's Windows pytorch is 12.8
    assert by_cell[("linux-64", "cuda129")] == "12.9"
    assert by_cell[("linux-aarch64", "cuda130")] == "13.0"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_compilers_and_stdlib(matrix, platform):
    """conda-forge's pinning: gcc 15 (cpu, CUDA 13.0) and 14 (CUDA 12.9), glibc 2.28 for CUDA 13,
    clang 21 with macOS 12.0 (the recipe's one override, as pytorch), vs2022 on Windows."""
    for b in (b for b in matrix if b.platform == platform):
        if platform.startswith("linux"):
            gcc = "14" if b.cuda_version == "12.9" else "15"
            glibc = "2.28" if b.cuda_version == "13.0" else "2.17"
            assert b.build[:3] == (
                f"gcc_{platform} {gcc}.*",
                f"gxx_{platform} {gcc}.*",
                f"sysroot_{platform} {glibc}.*",
            )
        elif platform.startswith("osx"):
            assert b.build[:3] == (
                f"clang_{platform} 21.*",
                f"clangxx_{platform} 21.*",
                f"macosx_deployment_target_{platform} 12.0.*",
            )
        else:  # vs2022 is what run-exports vc14_runtime and ucrt (see the solve test below)
            assert b.build[:3] == ("vs2022_win-64", "vs2022_win-64", "vs_win-64")
        cuda_build = [s for s in b.build if s.startswith("cuda")]
        assert cuda_build == ([f"cuda-nvcc_{platform} {b.cuda_version}.*"] if b.cuda_version else [])
        arm_variant = [s for s in b.build if s.startswith("arm-variant")]
        assert arm_variant == (
            ["arm-variant * sbsa"] if platform == "linux-aarch64" and b.cuda_version else []
        )


def test_linked_libraries_come_from_host_not_build(matrix):
    """In a cross build the build environment is the build machine's: the static CUDA runtime
    the extension links must be the host environment's (cuda-cudart-dev pulls cuda-cudart-static)."""
    for b in matrix:
        assert not [s for s in b.build if "cudart" in s], (b.platform, b.variant, b.build)
        assert ("cuda-cudart-dev" in b.host) == (b.cuda_version is not None)
    build_sh = (FILES.recipe_dir / "build.sh").read_text()
    build_bat = (FILES.recipe_dir / "build.bat").read_text()
    assert 'export POINTOPS_CUDA_TARGET_ROOT="${PREFIX}"' in build_sh
    assert 'set "POINTOPS_CUDA_TARGET_ROOT=%LIBRARY_PREFIX%"' in build_bat
    assert "POINTOPS_CUDA_TARGET_ROOT" in (FILES.source_dir / "setup.py").read_text()


def test_a_cross_build_gets_the_cross_compilation_block(matrix):
    """osx-64 is built on osx-arm64: setup.py runs there and imports torch."""
    by_cell = {(b.platform, b.variant): b for b in matrix}
    cross = by_cell[("osx-64", "cpu")]
    assert {"python", "cross-python_osx-64", "pytorch >=2.10 cpu*"} <= set(cross.build)
    for b in matrix:
        if b.platform != "osx-64":  # built natively
            assert not [s for s in b.build if s.startswith(("python", "cross-python", "pytorch"))], b.build


def test_host_and_run_requirements(matrix):
    for b in matrix:
        proc = "cuda" if b.cuda_version else "cpu"
        assert f"pytorch >=2.10 {proc}*" in b.host
        assert {"python", "python-abi3", "pip", "setuptools"} <= set(b.host)
        assert not {"wheel", "ninja"} & {s.split()[0] for s in b.build + b.host}, (
            "nothing in the build uses them"
        )
        cuda_host = {s for s in b.host if s.startswith("cuda-")}
        assert cuda_host == (
            {f"cuda-version =={b.cuda_version}", "cuda-cudart-dev"} if b.cuda_version else set()
        )
        # abi3: any Python >= 3.10; stable ABI: any torch >= 2.10 of the same cpu/cuda kind; the
        # extension links libtorch_cpu, so libtorch is a run requirement of its own.
        assert b.run == ("python >=3.10", f"pytorch >=2.10 {proc}*", "libtorch >=2.10")
        assert b.run_constraints == ((f"__cuda_arch >={b.cuda_arch_min}",) if b.cuda_version else ())


def test_script_env_passes_max_jobs_through(monkeypatch):
    """rattler-build runs the build script in a clean environment: only script.env reaches it."""
    monkeypatch.setenv("MAX_JOBS", "3")
    builds = render_matrix(("linux-64", "win-64"))
    assert {b.script_env.get("MAX_JOBS") for b in builds} == {"3"}
    for b in builds:
        assert b.script_env["POINTOPS_CUDA"] == ("1" if b.cuda_version else "0")
    monkeypatch.delenv("MAX_JOBS")
    assert not [b for b in render_matrix(("linux-64",)) if b.script_env.get("MAX_JOBS")]


def test_arch_lists_come_from_the_ops_arch_table(matrix):
    """No arch list in the variant files: the build script derives it from the table per CUDA
    version and platform; Jetson's 8.7 only goes into linux-aarch64 binaries."""
    table = json.loads(ARCH_TABLE.read_text())["toolkits"]
    for b in (b for b in matrix if b.cuda_version):
        entry = table[b.cuda_version]
        extra = entry.get("extra_sass", {}).get(b.platform, [])
        assert sorted(b.sass_archs) == sorted(entry["sass"] + extra), (b.platform, b.variant)
        assert b.ptx_arch == entry["ptx"]
        assert ("8.7" in b.sass_archs) == (b.platform == "linux-aarch64" and b.cuda_version == "13.0")
        # CEP 46 minimum: the oldest GPU with SASS (PTX only serves newer GPUs).
        assert b.cuda_arch_min == min(b.sass_archs, key=lambda v: tuple(map(int, v.split("."))))


def test_variant_files_carry_no_arch_keys():
    """An arch list zipped with cuda_compiler_version breaks conda-forge's CUDA migrations."""
    for path in FILES.variant_configs:
        text = path.read_text()
        for key in ("torch_cuda_arch_list", "cuda_arch_min", "MACOSX_DEPLOYMENT_TARGET"):
            assert not re.search(rf"^{key}:", text, re.M), f"{path}: {key}"


@pytest.mark.skipif(not SOLVER_TABLE.is_file(), reason="solver/knowledge/pointops_builds.yaml not present")
def test_matrix_agrees_with_the_solver_table(matrix):
    table = yaml.safe_load(SOLVER_TABLE.read_text())
    solver_cells = {(p, v) for p, variants in table["platforms"].items() for v in variants}
    assert solver_cells == cells(matrix)
    arch_table = json.loads(ARCH_TABLE.read_text())["toolkits"]
    for b in matrix:
        entry = table["variants"][b.variant]
        assert entry.get("cuda_version") == b.cuda_version
        if b.cuda_version:
            extra = arch_table[b.cuda_version].get("extra_sass", {}).get(b.platform, [])
            assert sorted(list(entry["sass"]) + extra) == sorted(b.sass_archs), (
                f"{b.variant}: solver table vs build"
            )
            assert entry["ptx"] == b.ptx_arch
    assert str(table["torch_min"]) == "2.10" and str(table["python_min"]) == "3.10"


def test_cuda_variants_need_conda_override_cuda(linux_dependency_channel: Path):
    """conda-forge's CUDA pytorch depends on __cuda and cuda-version X.Y constrains __cuda >=X: on
    a runner without a GPU the host environment of a CUDA variant solves only when
    CONDA_OVERRIDE_CUDA declares the variant's own CUDA version (12.9 is not enough for 13.0)."""
    channels = [linux_dependency_channel.as_uri()]
    with pytest.raises(ChannelError, match="CONDA_OVERRIDE_CUDA"):
        render_with_solve("linux-64", channels, env=env_with())
    with pytest.raises(ChannelError):
        render_with_solve("linux-64", channels, env=env_with(CONDA_OVERRIDE_CUDA="12.9"))
    solved = render_with_solve("linux-64", channels, env=env_with(CONDA_OVERRIDE_CUDA="13.0"))
    assert {r["build_string"].split("_h")[0] for r in solved} == {"cpu", "cuda129", "cuda130"}


def test_windows_crt_and_cuda_pins_come_from_run_exports(win_dependency_channel: Path):
    """Resolve the win-64 build/host environments against conda-forge's metadata: the packages must
    require vc14_runtime/ucrt (from vs2022), cuda-version (from nvcc) and the abi3 support
    package, and must not carry pytorch's minor-version pin."""
    solved = {
        r["build_string"].split("_h")[0]: r
        for r in render_with_solve(
            "win-64", [win_dependency_channel.as_uri()], env=env_with(CONDA_OVERRIDE_CUDA="13.0")
        )
    }
    assert set(solved) == {"cpu", "cuda128", "cuda130"}
    for variant, result in solved.items():
        depends = set(result["depends"])
        assert {"vc14_runtime >=14.44.35208", "ucrt >=10.0.20348.0", "vc >=14.3,<15"} <= depends, variant
        assert {"_python_abi3_support 1.*", "cpython >=3.10", "python >=3.10", "libtorch >=2.10"} <= depends
        assert not [d for d in depends if d.startswith(("python_abi", "cuda-cudart"))], depends
        assert [d for d in result["depends"] if d.startswith(("pytorch", "libtorch"))] == [
            "pytorch >=2.10 " + ("cpu*" if variant == "cpu" else "cuda*"),
            "libtorch >=2.10",
        ]
    assert "cuda-version >=12.8,<13" in solved["cuda128"]["depends"]
    assert "cuda-version >=13.0,<14" in solved["cuda130"]["depends"]
    assert not [d for d in solved["cpu"]["depends"] if d.startswith("cuda")]
    assert solved["cuda128"]["constrains"] == ["__cuda_arch >=5.0"]
    assert solved["cpu"]["constrains"] == []


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_linux_pins_come_from_the_toolchain(linux_dependency_channel: Path, platform):
    solved = {
        r["build_string"].split("_h")[0]: r
        for r in render_with_solve(
            platform, [linux_dependency_channel.as_uri()], env=env_with(CONDA_OVERRIDE_CUDA="13.0")
        )
    }
    assert set(solved) == {"cpu", "cuda129", "cuda130"}
    assert "cuda-version >=12.9,<13" in solved["cuda129"]["depends"]
    assert "cuda-version >=13.0,<14" in solved["cuda130"]["depends"]
    assert "__glibc >=2.28,<3.0.a0" in solved["cuda130"]["depends"]  # sysroot 2.28 for CUDA 13
    assert {"libstdcxx >=14", "libgcc >=14"} <= set(solved["cuda129"]["depends"])
    for variant, result in solved.items():
        depends = result["depends"]
        assert not [d for d in depends if d.startswith(("cuda-cudart", "python_abi"))], depends
        assert ("arm-variant * sbsa" in depends) == (platform == "linux-aarch64" and variant != "cpu")
        assert "_python_abi3_support 1.*" in depends and "libtorch >=2.10" in depends
    assert solved["cuda130"]["constrains"] == ["__cuda_arch >=7.5"]


@pytest.fixture
def served_channel(win_dependency_channel: Path):
    """The win-64 dependency channel served over loopback HTTP, as a remote channel would be."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class QuietHandler(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(win_dependency_channel))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_render_with_solve_over_http(served_channel):
    from solver.channel import check_reachable

    check_reachable([served_channel])
    solved = render_with_solve("win-64", [served_channel], env=env_with(CONDA_OVERRIDE_CUDA="13.0"))
    assert {r["build_string"].split("_h")[0] for r in solved} == {"cpu", "cuda128", "cuda130"}
    assert all("vc14_runtime >=14.44.35208" in r["depends"] for r in solved)


def test_an_unreachable_channel_is_named():
    import socket

    from solver.channel import check_reachable

    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ChannelError, match=rf"cannot reach http://127.0.0.1:{port}/.*package-local"):
        check_reachable([f"http://127.0.0.1:{port}/"], timeout_s=5)


@pytest.mark.skipif(importlib.util.find_spec("pointops") is None, reason="pointops is not installed here")
def test_torch_min_and_python_min_match_the_binary(matrix):
    """The run requirements promise torch >= torch_min and Python >= python_min: exactly the
    stable-ABI targets the ops build records in _build_info.json."""
    package_dir = Path(importlib.util.find_spec("pointops").origin).parent
    info = json.loads((package_dir / "_build_info.json").read_text())
    values = matrix[0].variant_values
    assert info["torch_target_version"] == values["torch_min"]
    assert info["python_abi"] == f"abi3 (cp{values['python_min'].replace('.', '')})"
