"""rattler-build builds recipes/pointops end to end, as the channel workflow does: the build and
host environments solve against a local channel with conda-forge's metadata whose compiler,
python and pytorch wrap this machine's (standin_toolchain.py), the shipped build.sh runs, the
recipe's own tests run (imports, pip check, test_pointops.py, the pytorch 2.10 test), and the
.conda then installs into a fresh prefix with py-rattler and runs an op.

The linux-64 cpu variant is built once per run (module fixture, about 1.5 min on 2 cores). The
CUDA 13.0 variant compiles every arch of the table (several minutes): it runs with
POINTOPS_SLOW_CUDA_BUILD=1 where nvcc 13 exists.

The one change to the shipped matrix: python and python_min are the interpreter running the
tests, since torch exists here only for it (the binary's abi3 floor stays 3.10: setup.py sets
Py_LIMITED_API itself).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from standin_toolchain import PY, cuda_home, write_toolchain_channel

from solver.channel import ChannelError, build_channel, current_platform, find_recipe

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(
    current_platform() != "linux-64" or shutil.which("gcc") is None,
    reason="the stand-in toolchain wraps a linux-64 gcc",
)
OVERRIDES = {"python": [f"{PY}.* *_cpython"], "python_min": [PY], "is_python_min": [True]}
SHARED_LIBRARIES = yaml.safe_load((HERE.parent / "data" / "conda_forge_metadata.yaml").read_text())[
    "shared_libraries"
]


def read_package(path: Path):
    from rattler_build import Package

    return Package.from_file(str(path))


NO_GPU = ["__unix=0", "__linux=6.1", "__glibc=2.36"]


def rattler_install(
    channels: list[Path], specs: list[str], prefix: Path, virtual: list[str] = NO_GPU
) -> tuple[int, object]:
    args = {
        "channels": [c.as_uri() for c in channels],
        "specs": specs,
        "prefix": str(prefix),
        "virtual_packages": virtual,
        "cache": str(prefix.parent / "cache"),
    }
    proc = subprocess.run(
        [sys.executable, str(HERE / "rattler_install.py"), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def needed_libraries(path: Path) -> list[str]:
    """DT_NEEDED entries of an ELF file."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        return [
            tag.needed
            for section in elf.iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags()
            if tag.entry.d_tag == "DT_NEEDED"
        ]


class Built:
    def __init__(self, channel: Path, output: Path, packages: list[Path], log: list[str]):
        self.channel, self.output, self.packages, self.log = channel, output, packages, log
        (self.package,) = packages
        self.meta = read_package(self.package)


def build(tmp: Path, variant: str, cuda_versions=(), recipe: Path | None = None) -> Built:
    channel = write_toolchain_channel(tmp / "deps", cuda_versions=cuda_versions)
    output = tmp / "out"
    logs: dict[str, list[str]] = {}
    files = find_recipe(recipe)
    try:
        packages = build_channel(
            output,
            [channel.as_uri()],
            [variant],
            test=True,
            files=files,
            logs=logs,
            variant_overrides=OVERRIDES,
        )
    except ChannelError:
        print("\n".join(line for lines in logs.values() for line in lines)[-20000:])
        raise
    (log,) = logs.values()
    return Built(channel, output, packages, log)


@pytest.fixture(scope="module")
def cpu(tmp_path_factory) -> Built:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAX_JOBS", "1")
        mp.delenv("CONDA_OVERRIDE_CUDA", raising=False)
        return build(tmp_path_factory.mktemp("rattler-build-cpu"), "cpu")


def test_the_package_is_the_abi3_cpu_build(cpu):
    meta = cpu.meta
    assert (meta.name, str(meta.version), meta.subdir) == ("pointops", "0.1.0", "linux-64")
    assert meta.build_string.startswith("cpu_h") and meta.build_number == 0
    assert str(meta.noarch).lower().endswith("python")  # CEP 20: files under site-packages/, subdir linux-64
    assert "site-packages/pointops/_C.abi3.so" in meta.files
    assert not [f for f in meta.files if f.startswith("lib/python")]


def test_run_requirements_are_the_recipe_s_plus_run_exports(cpu):
    depends = list(cpu.meta.depends)
    assert depends[:3] == [f"python >={PY}", "pytorch >=2.10 cpu*", "libtorch >=2.10"]
    # run_exports of the toolchain stand-ins carry conda-forge's values
    assert {
        "libstdcxx >=15",
        "libgcc >=15",
        "__glibc >=2.17,<3.0.a0",
        "_python_abi3_support 1.*",
        f"cpython >={PY}",
    } <= set(depends)
    assert not [d for d in depends if d.startswith(("pytorch >=2.13", "libtorch >=2.13", "python_abi"))], (
        depends
    )


def test_every_linked_library_is_a_run_requirement(cpu, tmp_path):
    """No overlinking: each shared library the extension needs comes from a package the
    package depends on (libtorch_cpu.so from libtorch, the C/C++ runtimes from libgcc, libstdcxx
    and the glibc the sysroot pins)."""
    prefix = tmp_path / "env"
    code, records = rattler_install([cpu.output, cpu.channel], ["pointops"], prefix)
    assert code == 0, records
    extension = prefix / "lib" / f"python{PY}" / "site-packages" / "pointops" / "_C.abi3.so"
    providers = {lib: package for package, libs in SHARED_LIBRARIES.items() for lib in libs}
    names = {d.split()[0] for d in cpu.meta.depends}
    needed = needed_libraries(extension)
    assert "libtorch_cpu.so" in needed
    for lib in needed:
        assert lib in providers, f"{lib}: no conda-forge package known to ship it (tests/data)"
        assert providers[lib] in names, (
            f"{extension.name} links {lib} from {providers[lib]}, not a run requirement"
        )


def test_max_jobs_reaches_the_build_script(cpu):
    assert "pointops build: MAX_JOBS=1" in cpu.log


def test_the_recipe_s_tests_ran(cpu):
    log = "\n".join(cpu.log)
    assert log.count("python imports test passed") == 2  # python_min and the newest Python
    assert log.count("pip check passed") == 2
    assert log.count("pointops recipe test passed") == 2
    assert "0 ABI version mismatches and 0" in log  # abi3audit ran on the extension
    assert "pytorch package 2.10.0" in log  # the oldest promised pytorch, not only the newest
    assert "all tests passed" in log


def test_the_package_installs_into_a_fresh_prefix_and_runs_an_op(cpu, tmp_path):
    prefix = tmp_path / "env"
    code, records = rattler_install([cpu.output, cpu.channel], ["pointops", "pytorch 2.13.*"], prefix)
    assert code == 0, records
    builds = {r["name"]: (r["version"], r["build"]) for r in records}
    assert builds["pointops"][1] == cpu.meta.build_string and builds["pytorch"][0] == "2.13.0"
    location, picks, _ = run_fps_probe(prefix, tmp_path)
    assert location.startswith(str(prefix)) and picks == "[[0, 3, 1]]"


def run_fps_probe(prefix: Path, tmp_path: Path) -> tuple[str, str, dict]:
    """The prefix's own Python imports pointops and runs FPS on four points (the CPU kernel, so no
    GPU is needed): (pointops' location, the picks as printed, build_info())."""
    probe = (
        "import json, torch, pointops\n"
        "xyz = torch.tensor([[[0.0, 0, 0], [1.0, 0, 0], [2.5, 0, 0], [3.0, 0, 0]]])\n"
        "print(pointops.__file__)\n"
        "print(torch.ops.pointops.furthest_point_sample(xyz, 3, None, 0).tolist())\n"
        "print(json.dumps(pointops.build_info()))\n"
    )
    proc = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    location, picks, info = proc.stdout.strip().splitlines()[-3:]
    return location, picks, json.loads(info)


def extracted(package: Path, dest: Path) -> Path:
    from rattler.package_streaming import extract

    extract(package, dest)
    return dest


def test_licence_files_are_packaged(cpu, tmp_path):
    assert cpu.meta.license == "BSD-3-Clause"
    info = extracted(cpu.package, tmp_path / "pkg") / "info"
    assert (info / "licenses" / "LICENSE").read_text().startswith("BSD 3-Clause License")
    assert not (info / "licenses" / "NVIDIA-CUDA-EULA.txt").exists()  # cpu builds link no NVIDIA code


def _local_eula() -> Path | None:
    home = cuda_home()
    found = (
        sorted(home.glob("dist-info/nvidia_cuda_runtime-*.dist-info/licenses/License.txt")) if home else []
    )
    return found[0] if found else None


def recipe_with_local_eula(tmp: Path, eula: Path) -> Path:
    """A copy of the recipe folder whose NVIDIA licence source is this machine's copy of the CUDA
    EULA instead of its download (no network here); everything else is the shipped text."""
    tree = tmp / "tree"
    recipe_dir = tree / "recipes" / "pointops"
    files = find_recipe()
    shutil.copytree(files.recipe_dir, recipe_dir)
    shutil.copy2(files.variant_configs[0], tree / "conda_build_config.yaml")
    (tree / "ops-src").symlink_to(files.source_dir)
    shutil.copy2(eula, recipe_dir / "NVIDIA-CUDA-EULA.txt")
    text = (recipe_dir / "recipe.yaml").read_text()
    download = (
        "      url: https://developer.download.nvidia.com/compute/cuda/redist/cuda_nvcc/LICENSE.txt\n"
        "      sha256: e2c71babfd18a8e69542dd7e9ca018f9caa438094001a58e6bc4d8c999bf0d07\n"
        "      file_name: NVIDIA-CUDA-EULA.txt\n"
    )
    assert text.count(download) == 1
    (recipe_dir / "recipe.yaml").write_text(text.replace(download, "      path: NVIDIA-CUDA-EULA.txt\n"))
    return recipe_dir


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("POINTOPS_SLOW_CUDA_BUILD") != "1",
    reason="compiles every CUDA arch (minutes): set POINTOPS_SLOW_CUDA_BUILD=1",
)
def test_the_cuda_13_package_builds_tests_and_installs(tmp_path, monkeypatch):
    eula = _local_eula()
    if cuda_home() is None or eula is None:
        pytest.skip("needs nvcc 13 and its toolkit's licence file")
    monkeypatch.setenv("MAX_JOBS", "2")
    # the runner has no GPU: the variant's CUDA version stands in for the driver, as in CI
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    built = build(tmp_path, "cuda130", cuda_versions=["13.0"], recipe=recipe_with_local_eula(tmp_path, eula))
    meta = built.meta
    assert meta.build_string.startswith("cuda130_h") and meta.build_number == 200
    assert "cuda-version >=13.0,<14" in meta.depends and "__glibc >=2.28,<3.0.a0" in meta.depends
    assert list(meta.constrains) == ["__cuda_arch >=7.5"]
    assert not [d for d in meta.depends if d.startswith("cuda-cudart")]  # linked statically
    assert meta.license == "BSD-3-Clause AND LicenseRef-NVIDIA-End-User-License-Agreement"
    log = "\n".join(built.log)
    assert log.count("pointops recipe test passed") == 2 and "all tests passed" in log
    info = extracted(built.package, tmp_path / "pkg") / "info"
    assert (info / "licenses" / "NVIDIA-CUDA-EULA.txt").read_text() == eula.read_text()
    # no driver here: the CUDA build is refused, and installs where a CUDA 13 driver and a Turing
    # or newer GPU are declared
    code, result = rattler_install([built.output, built.channel], ["pointops"], tmp_path / "refused")
    assert code == 3 and "__cuda" in result["error"], result
    prefix = tmp_path / "env"
    code, records = rattler_install(
        [built.output, built.channel], ["pointops"], prefix, NO_GPU + ["__cuda=13.0", "__cuda_arch=9.0"]
    )
    assert code == 0, records
    _, picks, info = run_fps_probe(prefix, tmp_path)  # the CUDA build's CPU kernels need no GPU or driver
    assert picks == "[[0, 3, 1]]"
    assert info["cuda_version"] == "13.0" and info["ptx_arch"] == "12.0"
    assert info["sass_archs"] == [
        "7.5",
        "8.0",
        "8.6",
        "9.0",
        "10.0",
        "11.0",
        "12.0",
    ]  # no Jetson 8.7 on x86-64
