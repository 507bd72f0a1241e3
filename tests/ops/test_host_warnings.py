"""The host code of every C++ and CUDA source compiles without a g++ -Wall -Wextra warning of its
own (headers of torch and the toolkit aside). At -O1, where g++'s dataflow warnings run: a host
bug in a .cu file otherwise shows only on a GPU host, where it takes the process down with it.
Each check also runs on a planted file with such a bug, so that a compiler which stopped
reporting it would fail here rather than pass quietly."""

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "ops-src" / "csrc"
CXX = os.environ.get("CXX", "g++").split()[0]
NVCC = shutil.which("nvcc")
WARNING = re.compile(r"^(?P<file>[^\s:][^:]*):\d+:\d+: warning: .*$", re.MULTILINE)
# The build's own flags that change what the compiler sees (ops-src/setup.py).
COMMON = ["-c", "-O1", "-std=c++17", f"-I{CSRC}", "-DPOINTOPS_WITH_CUDA=1"]
WARN = ["-Wall", "-Wextra", "-fvisibility=hidden"]
# A ternary between two initializer_lists: the loop reads a backing array that is already gone.
PLANTED = """#include <initializer_list>
int total(bool first) {
  int sum = 0;
  for (const int s : first ? std::initializer_list<int>{2, 4} : std::initializer_list<int>{8}) sum += 64 / s;
  return sum;
}
"""

pytestmark = [
    pytest.mark.slow,  # every source once, about a minute on 2 cores
    pytest.mark.skipif(shutil.which(CXX) is None, reason=f"needs the C++ compiler {CXX}"),
]


def warnings_in(root: Path, output: str) -> list[str]:
    """The warning lines of `output` about files under `root`."""
    own = []
    for m in WARNING.finditer(output):
        path = Path(m["file"])
        if not path.is_absolute():
            path = REPO / path
        if path.resolve().is_relative_to(root.resolve()):
            own.append(m.group(0))
    return own


def compile_cxx(source: Path, out_dir: Path, extra: list[str]) -> str:
    cmd = [CXX, *COMMON, *WARN, *extra, str(source), "-o", str(out_dir / (source.name + ".o"))]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr[-3000:]}"
    return result.stderr


def compile_cuda(source: Path, out_dir: Path) -> str:
    # PTX for one arch: the host pass is the same for every arch, and ptxas is not needed.
    cmd = [
        NVCC,
        *COMMON,
        "-gencode",
        "arch=compute_90,code=compute_90",
        "--expt-relaxed-constexpr",
        "-Xcompiler",
        ",".join(WARN),
        "-ccbin",
        CXX,
        str(source),
        "-o",
        str(out_dir / (source.name + ".o")),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def torch_includes() -> list[str]:
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension")
    return [f for path in cpp_extension.include_paths() for f in ("-isystem", path)]


def knows_dangling_pointer() -> bool:
    probe = subprocess.run([CXX, "-Q", "--help=warnings"], capture_output=True, text=True)
    return "-Wdangling-pointer" in probe.stdout


def all_warnings(jobs: list) -> list[str]:
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        outputs = list(pool.map(lambda job: job(), jobs))
    return [w for output in outputs for w in warnings_in(CSRC, output)]


def test_cpu_and_binding_sources_compile_without_warnings(tmp_path):
    torch_flags = torch_includes()
    plain = sorted(CSRC.glob("cpu/*.cpp")) + [CSRC / "tuning.cpp"]
    binding = sorted(CSRC.glob("binding/*.cpp"))
    assert plain and binding
    jobs = [lambda s=s: compile_cxx(s, tmp_path, []) for s in plain]
    jobs += [lambda s=s: compile_cxx(s, tmp_path, torch_flags) for s in binding]
    assert all_warnings(jobs) == []


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_cuda_sources_host_code_compiles_without_warnings(tmp_path):
    sources = sorted(CSRC.glob("cuda/*.cu"))
    assert sources
    assert all_warnings([lambda s=s: compile_cuda(s, tmp_path) for s in sources]) == []


@pytest.mark.parametrize("suffix", [".cpp", ".cu"])
def test_a_planted_dangling_list_is_reported(tmp_path, suffix):
    if not knows_dangling_pointer():
        pytest.skip(f"{CXX} has no -Wdangling-pointer (g++ 12 and newer)")
    if suffix == ".cu" and NVCC is None:
        pytest.skip("needs nvcc")
    planted = tmp_path / f"planted{suffix}"
    planted.write_text(PLANTED)
    output = compile_cuda(planted, tmp_path) if suffix == ".cu" else compile_cxx(planted, tmp_path, [])
    found = warnings_in(tmp_path, output)
    assert found and all("dangling pointer" in w for w in found), output
