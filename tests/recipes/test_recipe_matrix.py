"""py-rattler-build renders recipes/pointops/recipe.yaml for every platform and variant, offline;
the rendered requirements, build strings, arch lists and Windows CRT pins are what the project
promises (README "Recipes and the channel")."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from solver.channel import PLATFORMS, REPO_ROOT, RenderedBuild, render_matrix, render_with_solve

EXPECTED_CELLS = {
    ("linux-64", "cpu"), ("linux-64", "cuda129"), ("linux-64", "cuda130"),
    ("linux-aarch64", "cpu"), ("linux-aarch64", "cuda129"), ("linux-aarch64", "cuda130"),
    ("win-64", "cpu"), ("win-64", "cuda128"), ("win-64", "cuda130"),
    ("osx-64", "cpu"), ("osx-arm64", "cpu"),
}
ARCH_TABLE = REPO_ROOT / "ops-src" / "pointops" / "cuda_arch_table.json"
SOLVER_TABLE = REPO_ROOT / "solver" / "knowledge" / "pointops_builds.yaml"


@pytest.fixture(scope="module")
def matrix() -> list[RenderedBuild]:
    return render_matrix()


def cells(matrix):
    return {(b.platform, b.variant) for b in matrix}


def test_matrix_is_platform_by_variant(matrix):
    assert cells(matrix) == EXPECTED_CELLS
    assert len(matrix) == len(EXPECTED_CELLS), "a platform/variant pair was rendered twice"


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
    for b in (b for b in matrix if b.platform == platform):
        if platform.startswith("linux"):
            glibc = "2.28" if b.cuda_version == "13.0" else "2.17"
            assert b.build[:3] == (f"gcc_{platform} 14.*", f"gxx_{platform} 14.*", f"sysroot_{platform} {glibc}.*")
        elif platform.startswith("osx"):
            assert b.build[:3] == (f"clang_{platform} 19.*", f"clangxx_{platform} 19.*",
                                   f"macosx_deployment_target_{platform} 12.0.*")
        else:  # vs2022 is what run-exports vc14_runtime and ucrt (see the solve test below)
            assert b.build[:3] == ("vs2022_win-64", "vs2022_win-64", "vs_win-64")
        cuda_build = [s for s in b.build if s.startswith("cuda-")]
        assert cuda_build == ([f"cuda-nvcc_{platform} {b.cuda_version}.*", "cuda-cudart-static",
                               f"cuda-version =={b.cuda_version}"]
                              if b.cuda_version else [])
        arm_variant = [s for s in b.build if s.startswith("arm-variant")]
        assert arm_variant == (["arm-variant * sbsa"] if platform == "linux-aarch64" and b.cuda_version else [])


def test_host_and_run_requirements(matrix):
    for b in matrix:
        proc = "cuda" if b.cuda_version else "cpu"
        assert f"pytorch >=2.10 {proc}*" in b.host
        assert {"python", "python-abi3", "pip"} <= set(b.host)
        cuda_host = {s for s in b.host if s.startswith("cuda-")}
        assert cuda_host == ({f"cuda-version =={b.cuda_version}", "cuda-cudart-dev"}
                             if b.cuda_version else set())
        # abi3: any Python >= 3.10; stable ABI: any torch >= 2.10 of the same cpu/cuda kind.
        assert b.run == ("python >=3.10", f"pytorch >=2.10 {proc}*")
        assert b.run_constraints == ((f"__cuda_arch >={b.cuda_arch_min}",) if b.cuda_version else ())


def test_script_env_carries_the_arch_list(matrix):
    for b in matrix:
        assert b.script_env["POINTOPS_CUDA"] == ("1" if b.cuda_version else "0")
        assert b.script_env.get("TORCH_CUDA_ARCH_LIST", "") == (b.arch_list or "")


def test_abi3_build_with_python_min(matrix):
    for b in matrix:
        assert b.variant_values["python"] == "3.10.* *_cpython"
        assert b.variant_values["is_abi3"] in (True, "true")


def test_arch_lists_equal_the_ops_arch_table(matrix):
    table = json.loads(ARCH_TABLE.read_text())["toolkits"]
    for b in (b for b in matrix if b.cuda_version):
        entry = table[b.cuda_version]
        assert list(b.sass_archs) == entry["sass"], (b.platform, b.variant)
        assert b.ptx_arch == entry["ptx"]
        # CEP 46 minimum: the oldest GPU with SASS (PTX only serves newer GPUs).
        assert b.cuda_arch_min == min(entry["sass"], key=lambda v: tuple(map(int, v.split("."))))


@pytest.mark.skipif(not SOLVER_TABLE.is_file(), reason="solver/knowledge/pointops_builds.yaml not present")
def test_matrix_agrees_with_the_solver_table(matrix):
    table = yaml.safe_load(SOLVER_TABLE.read_text())
    solver_cells = {(p, v) for p, variants in table["platforms"].items() for v in variants}
    assert solver_cells == cells(matrix)
    for b in matrix:
        entry = table["variants"][b.variant]
        assert entry.get("cuda_version") == b.cuda_version
        if b.cuda_version:
            assert list(entry["sass"]) == list(b.sass_archs), f"{b.variant}: solver table vs recipe arch list"
            assert entry["ptx"] == b.ptx_arch
    assert str(table["torch_min"]) == "2.10" and str(table["python_min"]) == "3.10"


def test_windows_crt_and_cuda_pins_come_from_run_exports(win_dependency_channel: Path):
    """Resolve the win-64 build/host environments against a local channel with conda-forge's
    run_exports: the packages must require vc14_runtime/ucrt (from vs2022), cuda-version (from
    nvcc) and the abi3 support package, and must not carry pytorch's minor-version pin."""
    solved = {r["build_string"].split("_h")[0]: r for r in render_with_solve("win-64", [win_dependency_channel.as_uri()])}
    assert set(solved) == {"cpu", "cuda128", "cuda130"}
    for variant, result in solved.items():
        depends = set(result["depends"])
        assert {"vc14_runtime >=14.44.35208", "ucrt >=10.0.20348.0", "vc >=14.3,<15"} <= depends, variant
        assert {"_python_abi3_support 1.*", "cpython >=3.10", "python >=3.10"} <= depends
        assert not [d for d in depends if d.startswith(("libtorch", "python_abi", "cuda-cudart"))], depends
        assert [d for d in depends if d.startswith("pytorch")] == [
            "pytorch >=2.10 " + ("cpu*" if variant == "cpu" else "cuda*")]
    assert "cuda-version >=12.8,<13" in solved["cuda128"]["depends"]
    assert "cuda-version >=13.0,<14" in solved["cuda130"]["depends"]
    assert not [d for d in solved["cpu"]["depends"] if d.startswith("cuda")]
    assert solved["cuda128"]["constrains"] == ["__cuda_arch >=5.0"]
    assert solved["cpu"]["constrains"] == []


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_linux_cuda_pins_come_from_nvcc(linux_dependency_channel: Path, platform):
    solved = {r["build_string"].split("_h")[0]: r for r in render_with_solve(platform, [linux_dependency_channel.as_uri()])}
    assert set(solved) == {"cpu", "cuda129", "cuda130"}
    assert "cuda-version >=12.9,<13" in solved["cuda129"]["depends"]
    assert "cuda-version >=13.0,<14" in solved["cuda130"]["depends"]
    for variant, result in solved.items():
        depends = result["depends"]
        assert not [d for d in depends if d.startswith(("libtorch", "cuda-cudart", "python_abi"))], depends
        assert ("arm-variant * sbsa" in depends) == (platform == "linux-aarch64" and variant != "cpu")
        assert "_python_abi3_support 1.*" in depends
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

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(win_dependency_channel)))
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
    solved = render_with_solve("win-64", [served_channel])
    assert {r["build_string"].split("_h")[0] for r in solved} == {"cpu", "cuda128", "cuda130"}
    assert all("vc14_runtime >=14.44.35208" in r["depends"] for r in solved)


def test_an_unreachable_channel_is_named():
    import socket

    from solver.channel import ChannelError, check_reachable

    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ChannelError, match=rf"cannot reach http://127.0.0.1:{port}/.*package-local"):
        check_reachable([f"http://127.0.0.1:{port}/"], timeout_s=5)


def test_the_workflow_builds_exactly_the_matrix(matrix):
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "channel.yml").read_text())
    jobs = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert sorted((j["platform"], j["variant"]) for j in jobs) == sorted(cells(matrix))
    runners = {j["platform"]: j["runner"] for j in jobs}
    assert runners["win-64"].startswith("windows") and runners["linux-aarch64"].endswith("-arm")


@pytest.mark.skipif(importlib.util.find_spec("pointops") is None, reason="pointops is not installed here")
def test_torch_min_and_python_min_match_the_binary(matrix):
    """The run requirements promise torch >= torch_min and Python >= python_min: exactly the
    stable-ABI targets the ops build records in _build_info.json."""
    package_dir = Path(importlib.util.find_spec("pointops").origin).parent
    info = json.loads((package_dir / "_build_info.json").read_text())
    values = matrix[0].variant_values
    assert info["torch_target_version"] == values["torch_min"]
    assert info["python_abi"] == f"abi3 (cp{values['python_min'].replace('.', '')})"
