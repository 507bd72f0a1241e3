"""recipes/mmcv: upstream's mmcv 2.1.0 and 2.2.0 sdists, patched, with ops, built per PyTorch minor.

Fast (offline): the recipe renders every cell of the matrix (mmcv version x cpu/CUDA variant x
PyTorch minor x Python, on every platform) with pytorch pinned to one minor and kind in host and
run, build strings naming the variant, the minor and the Python, the channel's arch table and
conda-forge's compilers; the patches carry their headers. With PyPI reachable (cached under
out/mmcv-recipe-test): the recipe's sha256 are the sdists', the patches apply to both, and the
patched setup.py gets past a setuptools without pkg_resources and leaves OpenCV to conda.

Slow (MMCV_SLOW_BUILD=1; about 8-10 minutes on 2 cores, most of it the 77 CPU objects of
mmcv/_ext): rattler-build builds the linux-64 cpu package of mmcv 2.1.0 for torch 2.13 end to
end, as tests/recipes/test_rattler_build.py builds pointops: against the stand-in toolchain
channel (standin_toolchain.py: this machine's compiler, Python and torch) plus stand-ins of mmcv's
run requirements made from pinned PyPI wheels; the recipe's own tests run (imports, pip check,
test_mmcv_ops.py), then the package installs into a fresh prefix and runs nms.

The one change to the shipped matrix in the build: python is the interpreter running the tests,
pytorch 2.13 and mmcv 2.1.0 only (torch exists here only for that Python).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from standin_toolchain import PY, SITE, SUBDIR, _distribution_files, write_toolchain_channel

from solver.channel import ChannelError, build_channel, current_platform
from solver.channel.recipe import RecipeFiles, recipe_files
from solver.channel.render import PLATFORMS, rendered_variants

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import conda_forge_standins as standins  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RECIPE_DIR = REPO / "recipes" / "mmcv"
FILES = recipe_files(RECIPE_DIR)  # recipe.yaml, then the pinning and the recipe's own variant files
PATCHES = sorted((RECIPE_DIR / "patches").glob("*.patch"))
CACHE = REPO / "out" / "mmcv-recipe-test"
PYPI = "https://files.pythonhosted.org/packages"
SDISTS = {  # version -> (PyPI's address of the release sdist, its sha256 as PyPI lists it)
    "2.1.0": (
        f"{PYPI}/a7/19/f97f0fd4d432113a232e75f965335be6b7bb6557ae9faf8051e9a012cadd/mmcv-2.1.0.tar.gz",
        "d387bcab66b467479b6660310e23746cfc79c6e57acf04094680adb499a5cd3f",
    ),
    "2.2.0": (
        f"{PYPI}/e9/a2/57a733e7e84985a8a0e3101dfb8170fc9db92435c16afad253069ae3f9df/mmcv-2.2.0.tar.gz",
        "ac479247e808d8802f89eadf04d4118de86bdfe81361ec5aed0cc1bf731c67c9",
    ),
}
TORCH_MINORS = ("2.10", "2.11", "2.12", "2.13")
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
CUDA_VARIANTS = {  # platform -> cpu and the CUDA versions of conda-forge's pytorch there
    "linux-64": (None, "12.9", "13.0"),
    "linux-aarch64": (None, "12.9", "13.0"),
    "win-64": (None, "12.8", "13.0"),
    "osx-64": (None,),
    "osx-arm64": (None,),
}


def variant_tag(cuda: str | None) -> str:
    return "cpu" if cuda is None else "cuda" + cuda.replace(".", "")


def arch_helper():
    """recipes/pointops/cuda_arch_list.py, the derivation build.sh runs on the arch table."""
    path = REPO / "recipes" / "pointops" / "cuda_arch_list.py"
    spec = importlib.util.spec_from_file_location("_mmcv_test_cuda_arch_list", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Cell:
    """One rendered package of the matrix."""

    def __init__(self, platform: str, item) -> None:
        recipe = item.recipe.to_dict()
        values = dict(item.variant)
        self.platform = platform
        cuda = values.get("cuda_compiler_version")
        self.cuda = None if cuda in (None, "None") else str(cuda)
        self.version = str(values["mmcv_version"])
        self.torch = str(values["pytorch"])
        self.python = str(values["python"]).split(".*")[0]
        self.build_string = str(recipe["build"]["string"])
        self.number = int(recipe["build"]["number"])
        self.reqs = {k: [str(s) for s in recipe["requirements"].get(k, [])] for k in ("build", "host", "run")}
        self.constraints = [str(s) for s in recipe["requirements"].get("run_constraints", [])]
        self.sources = recipe["source"]
        self.env = recipe["build"]["script"]["env"]
        self.about = recipe["about"]

    @property
    def key(self) -> tuple:
        return (self.platform, self.version, variant_tag(self.cuda), self.torch, self.python)


@pytest.fixture(scope="module")
def matrix() -> list[Cell]:
    return [Cell(platform, item) for platform in PLATFORMS for item in rendered_variants(platform, FILES)]


def test_every_cell_of_the_matrix_is_rendered_once(matrix):
    want = {
        (platform, version, variant_tag(cuda), torch, py)
        for platform, cudas in CUDA_VARIANTS.items()
        for version, cuda, torch, py in itertools.product(SDISTS, cudas, TORCH_MINORS, PYTHONS)
    }
    keys = [cell.key for cell in matrix]
    assert len(keys) == len(set(keys)), "a cell was rendered twice"
    assert set(keys) == want
    assert len(matrix) == 352  # linux-64, linux-aarch64, win-64: 96 each; osx-64, osx-arm64: 32 each


def test_build_strings_name_the_variant_the_torch_minor_and_the_python(matrix):
    for cell in matrix:
        tag = variant_tag(cell.cuda)
        torch_tag = "torch" + cell.torch.replace(".", "")
        py_tag = "py" + cell.python.replace(".", "")
        assert re.fullmatch(rf"{tag}_{torch_tag}_{py_tag}_h[0-9a-f]{{7}}_{cell.number}", cell.build_string), (
            cell.build_string
        )
        # CUDA builds rank above the cpu build where __cuda exists, as conda-forge's pytorch
        assert cell.number == (200 if cell.cuda else 0)
    for platform, version in itertools.product(PLATFORMS, SDISTS):
        strings = [c.build_string for c in matrix if (c.platform, c.version) == (platform, version)]
        assert len(set(strings)) == len(strings)


def test_pytorch_is_pinned_to_one_minor_and_kind_in_host_and_run(matrix):
    """mmcv/_ext uses PyTorch's full C++ ABI: a package works with the minor it was built with."""
    for cell in matrix:
        pin = f"pytorch {cell.torch}.* {'cuda' if cell.cuda else 'cpu'}*"
        assert pin in cell.reqs["host"] and pin in cell.reqs["run"], (cell.key, cell.reqs)
        assert [s for s in cell.reqs["host"] if s.startswith("pytorch")] == [pin]
        assert "python" in cell.reqs["host"]  # per Python: _ext uses the full C API
        cross = cell.platform == "osx-64"  # built on osx-arm64: setup.py imports torch there
        assert (pin in cell.reqs["build"]) == cross and ("cross-python_osx-64" in cell.reqs["build"]) == cross


def test_ops_are_always_on_and_built_with_ninja(matrix):
    for cell in matrix:
        assert cell.env["MMCV_WITH_OPS"] == "1" and cell.env["MMCV_OPENCV_FROM_CONDA"] == "1"
        assert cell.env["FORCE_CUDA"] == ("1" if cell.cuda else "0")
        assert "ninja" in cell.reqs["build"]


def test_run_requirements_are_upstream_s_runtime_txt_and_opencv(matrix):
    upstream = [
        "addict",
        "mmengine >=0.3.0",
        "numpy",
        "packaging",
        "pillow",
        "pyyaml",
        "yapf",
        "py-opencv >=3",
    ]
    for cell in matrix:
        extra = ["regex"] if cell.platform == "win-64" else []
        assert cell.reqs["run"][2:] == upstream + extra, cell.reqs["run"]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_toolchain_is_conda_forge_s(matrix, platform):
    """The same toolchain as recipes/pointops: gcc 15 (cpu, CUDA 13.0) or 14 (CUDA 12.9), glibc
    2.28 for CUDA 13, clang 21 on macOS 12.0, vs2022 on Windows."""
    for cell in (c for c in matrix if c.platform == platform):
        build = cell.reqs["build"]
        if platform.startswith("linux"):
            gcc = "14" if cell.cuda == "12.9" else "15"
            glibc = "2.28" if cell.cuda == "13.0" else "2.17"
            assert build[:3] == [
                f"gcc_{platform} {gcc}.*",
                f"gxx_{platform} {gcc}.*",
                f"sysroot_{platform} {glibc}.*",
            ]
        elif platform.startswith("osx"):
            assert build[:3] == [
                f"clang_{platform} 21.*",
                f"clangxx_{platform} 21.*",
                f"macosx_deployment_target_{platform} 12.0.*",
            ]
        else:
            assert build[:3] == ["vs2022_win-64", "vs2022_win-64", "vs_win-64"]
        nvcc = [s for s in build if s.startswith("cuda-nvcc")]
        assert nvcc == ([f"cuda-nvcc_{platform} {cell.cuda}.*"] if cell.cuda else [])


def test_cuda_variants_carry_the_channel_s_archs(matrix):
    """cuda-version pins the toolkit, the CUDA headers come from host, and the __cuda_arch floor
    is the lowest SASS arch the channel's table gives the variant's CUDA version."""
    helper = arch_helper()
    table = REPO / "ops-src" / "pointops"
    for cell in matrix:
        if cell.cuda is None:
            assert (
                not [s for s in cell.reqs["host"] if s.startswith(("cuda", "libcu"))] and not cell.constraints
            )
            continue
        assert {f"cuda-version =={cell.cuda}", "cuda-cudart-dev", "libcublas-dev"} <= set(cell.reqs["host"])
        sass, ptx = helper.archs_for(table, cell.cuda, cell.platform)
        assert cell.constraints == [f"__cuda_arch >={sass[0]}"], (cell.key, cell.constraints)
        assert ptx == "12.0"


def test_sources_are_the_pypi_sdists_with_the_patches_and_the_arch_table(matrix):
    for cell in matrix:
        sdist, *tables = cell.sources
        assert (sdist["url"], sdist["sha256"]) == SDISTS[cell.version]
        assert sdist["patches"] == [f"patches/{p.name}" for p in PATCHES]
        for source in tables:
            assert (RECIPE_DIR / source["path"]).resolve().is_file(), source
            assert source["target_directory"] == "arch-table"
        assert cell.about["license"] == "Apache-2.0 AND LicenseRef-NVIDIA-Source-Code-License"


def test_every_patch_says_why_and_names_its_upstream_issue():
    assert [p.name for p in PATCHES] == [
        "0001-setup-py-without-pkg_resources.patch",
        "0002-setup-py-opencv-from-conda.patch",
    ]
    for patch in PATCHES:
        header, _, body = patch.read_text().partition("\n--- a/")
        assert "Why:" in header and "Upstream:" in header, patch.name
        assert re.search(r"https://github\.com/\S+/(issues|pull)/\d+", header), patch.name
        assert body.startswith("setup.py\n+++ b/setup.py\n"), patch.name


def test_the_build_scripts_take_the_arch_list_from_the_table():
    build_sh = (RECIPE_DIR / "build.sh").read_text()
    build_bat = (RECIPE_DIR / "build.bat").read_text()
    assert '"${PYTHON}" arch-table/cuda_arch_list.py arch-table "${cuda_compiler_version}"' in build_sh
    assert "arch-table\\cuda_arch_list.py arch-table %cuda_compiler_version% %target_platform%" in build_bat
    # the pointops recipe's CRT choice: setuptools uses the MSVC vs2022_win-64 activated
    pointops_bat = (REPO / "recipes" / "pointops" / "build.bat").read_text()
    for line in ("set DISTUTILS_USE_SDK=1", 'set "CUDA_HOME=%BUILD_PREFIX%\\Library"'):
        assert line in build_bat and line in pointops_bat
    assert os.access(RECIPE_DIR / "build.sh", os.X_OK)


# --- the sdists (PyPI, cached) -------------------------------------------------------------


def _offline(reason: str):
    """Skip where PyPI cannot be reached, except in CI, where a missing download is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must reach PyPI)")
    pytest.skip(f"{reason}: PyPI is not reachable from here; the test needs the mmcv sdists")


def fetch_sdist(version: str) -> Path:
    """mmcv-<version>.tar.gz from the recipe's URL, kept under out/mmcv-recipe-test/sdists."""
    target = CACHE / "sdists" / f"mmcv-{version}.tar.gz"
    if not target.is_file():
        url = SDISTS[version][0]
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except (urllib.error.URLError, OSError) as exc:
            _offline(f"downloading {url} failed ({exc})")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    want = SDISTS[version][1]
    assert digest == want, f"{target}: sha256 {digest}, the recipe says {want}"
    return target


def unpacked(version: str, dest: Path, patches: list[Path]) -> Path:
    """The sdist unpacked under dest (outside any git repository) with `patches` applied."""
    shutil.unpack_archive(fetch_sdist(version), dest)
    source = dest / f"mmcv-{version}"
    for patch in patches:
        proc = subprocess.run(["git", "apply", "-v", str(patch)], cwd=source, capture_output=True, text=True)
        assert proc.returncode == 0, f"{patch.name} does not apply to mmcv {version}: {proc.stderr}"
    return source


def egg_info(source: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess:
    """setup.py egg_info (what pip runs first) in a setuptools without pkg_resources: a blocker
    module raises what Python raises where setuptools >= 82 is installed."""
    blocker = tmp / "no-pkg-resources"
    blocker.mkdir(exist_ok=True)
    (blocker / "pkg_resources.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pkg_resources'\", name='pkg_resources')\n"
    )
    run_env = {k: v for k, v in os.environ.items() if k != "MMCV_OPENCV_FROM_CONDA"}
    run_env.update(PYTHONPATH=str(blocker), MMCV_WITH_OPS="1", **env)
    return subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
        env=run_env,
    )


@pytest.mark.parametrize("version", SDISTS)
def test_unpatched_setup_py_needs_pkg_resources(version, tmp_path):
    proc = egg_info(unpacked(version, tmp_path, []), tmp_path)
    assert proc.returncode != 0 and "No module named 'pkg_resources'" in proc.stderr


@pytest.mark.parametrize("version", SDISTS)
@pytest.mark.skipif(
    importlib.util.find_spec("cv2") is not None, reason="setup.py skips OpenCV where cv2 imports"
)
def test_patched_setup_py_runs_without_pkg_resources_and_leaves_opencv_to_conda(version, tmp_path):
    source = unpacked(version, tmp_path, PATCHES)
    conda = egg_info(source, tmp_path, MMCV_OPENCV_FROM_CONDA="1")
    assert conda.returncode == 0, conda.stderr
    requires = (tmp_path / "mmcv.egg-info" / "requires.txt").read_text()
    runtime = (source / "requirements" / "runtime.txt").read_text().split()
    assert [r for r in runtime if not r.startswith("regex")] == requires.split("\n\n")[0].split()
    assert "opencv" not in requires
    # without the variable, setup.py behaves as upstream: a pip requirement on opencv-python
    pip = egg_info(source, tmp_path)
    assert pip.returncode == 0, pip.stderr
    assert "opencv-python>=3" in (tmp_path / "mmcv.egg-info" / "requires.txt").read_text()


# --- the end-to-end build (slow) -----------------------------------------------------------

# Stand-ins of mmcv's run requirements (conda package -> the PyPI wheel whose files it links),
# pinned so that the stand-ins do not drift; their conda depends as conda-forge's packages have
# them, reduced to what the import of mmcv.ops needs.
WHEELS = {
    "addict": ("addict", "2.4.0", []),
    "mmengine": (
        "mmengine",
        "0.10.7",
        ["addict", "numpy", "pyyaml", "rich", "termcolor", "yapf", "py-opencv"],
    ),
    "yapf": ("yapf", "0.43.0", ["platformdirs"]),
    "platformdirs": ("platformdirs", "4.14.9", []),
    "termcolor": ("termcolor", "3.3.0", []),
    "pillow": ("pillow", "11.3.0", []),
    "py-opencv": ("opencv-python-headless", "4.12.0.88", ["numpy"]),
}
# Stand-ins linking this environment's own distributions (tests/run.sh installs them: numpy,
# pytest's packaging, the tests' PyYAML, abi3audit's rich): conda package -> (distribution, depends)
INSTALLED = {
    "numpy": ("numpy", []),
    "packaging": ("packaging", []),
    "pyyaml": ("PyYAML", []),
    "rich": ("rich", ["markdown-it-py", "pygments"]),
    "markdown-it-py": ("markdown-it-py", ["mdurl"]),
    "mdurl": ("mdurl", []),
    "pygments": ("Pygments", []),
}
# libtorch_python.so is the pytorch package's (conda-forge's libtorch holds the rest)
EXTRA_LIBRARIES = {"libtorch_python.so": "pytorch"}


def wheels_of(folder: Path, dist: str, version: str) -> list[Path]:
    return sorted(folder.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))


def fetch_wheels() -> Path:
    """The pinned wheels for this interpreter, under out/mmcv-recipe-test/wheels-<python>."""
    folder = CACHE / f"wheels-{PY}"
    folder.mkdir(parents=True, exist_ok=True)
    missing = [
        f"{dist}=={version}" for dist, version, _ in WHEELS.values() if not wheels_of(folder, dist, version)
    ]
    if missing:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", PY,
             "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
             "--platform", "manylinux2014_x86_64", "-d", str(folder), *missing],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if proc.returncode != 0:
            _offline(f"pip download {' '.join(missing)} failed: {proc.stderr.strip()[-300:]}")
    return folder


def _wheel_files(wheel: Path, unpack_root: Path, keep_metadata: bool) -> dict[str, object]:
    """site-packages links to an unpacked wheel's top-level entries. With keep_metadata, its
    dist-info too, without Requires-Dist: pip check then judges mmcv's own requirements, not the
    stand-ins' (conda-forge's packages of them carry their own)."""
    target = unpack_root / wheel.stem
    if not target.is_dir():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
    files: dict[str, object] = {}
    for entry in sorted(target.iterdir()):
        if entry.name.endswith(".dist-info"):
            if keep_metadata:
                for item in sorted(p for p in entry.rglob("*") if p.is_file() and p.name != "RECORD"):
                    data = item.read_bytes()
                    if item.name == "METADATA":
                        data = b"".join(
                            line for line in data.splitlines(True) if not line.startswith(b"Requires-Dist")
                        )
                    files[f"{SITE}/{entry.name}/{item.relative_to(entry).as_posix()}"] = data
            continue
        files[f"{SITE}/{entry.name}"] = ("symlink", str(entry))
    return files


def _ninja_files() -> dict[str, object]:
    ninja = shutil.which("ninja")
    if ninja is None:
        pytest.skip("no ninja on PATH: torch's BuildExtension would compile the 77 objects one by one")
    return {"bin/ninja": ("script", f'#!/bin/sh\nexec "{ninja}" "$@"\n')}


def mmcv_deps_channel(root: Path) -> Path:
    """ninja and mmcv's run requirements as linux-64 packages for this Python."""
    wheels = fetch_wheels()
    records, content = [], {}

    def add(name: str, version: str, depends: list[str], files: dict[str, object]) -> None:
        records.append(standins.record(name, version, "h0_0", SUBDIR, depends=[f"python {PY}.*", *depends]))
        content[(name, version, "h0_0")] = files

    records.append(standins.record("ninja", "1.13.0", "h0_0", SUBDIR))
    content[("ninja", "1.13.0", "h0_0")] = _ninja_files()
    for name, (dist, version, depends) in WHEELS.items():
        (wheel,) = wheels_of(wheels, dist, version)
        # conda's OpenCV carries no pip metadata (patches/0002): neither does its stand-in
        add(
            name,
            version,
            depends,
            _wheel_files(wheel, CACHE / f"unpacked-{PY}", keep_metadata=name != "py-opencv"),
        )
    for name, (dist, depends) in INSTALLED.items():
        add(name, importlib.metadata.version(dist), depends, _distribution_files(dist))
    return standins.write_channel(root, records, content)


def recipe_with_local_sdist(tmp: Path) -> RecipeFiles:
    """A copy of the recipe tree whose sdist URL is the cached download (file://); everything
    else is the shipped text (the sha256 included)."""
    tree = tmp / "tree"
    shutil.copytree(RECIPE_DIR, tree / "recipes" / "mmcv")
    (tree / "recipes" / "pointops").mkdir(parents=True)
    shutil.copy2(REPO / "recipes" / "pointops" / "cuda_arch_list.py", tree / "recipes" / "pointops")
    shutil.copy2(FILES.variant_configs[0], tree / "conda_build_config.yaml")
    (tree / "ops-src").symlink_to(REPO / "ops-src")
    recipe = tree / "recipes" / "mmcv" / "recipe.yaml"
    text = recipe.read_text()
    url = "url: ${{ sdist_url }}"
    assert text.count(url) == 1
    local = f"file://{fetch_sdist('2.1.0').parent}/mmcv-${{{{ version }}}}.tar.gz"
    recipe.write_text(text.replace(url, f"url: {local}"))
    return recipe_files(recipe)


class Built:
    def __init__(self, channels: list[Path], output: Path, package: Path, log: list[str]):
        from test_rattler_build import read_package

        self.channels, self.output, self.package, self.log = channels, output, package, log
        self.meta = read_package(package)


VARIANT = f"cpu_torch213_py{PY.replace('.', '')}"
OVERRIDES = {
    "python": [f"{PY}.* *_cpython"],
    "is_python_min": [True],
    "pytorch": ["2.13"],
    "mmcv_version": ["2.1.0"],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    if os.environ.get("MMCV_SLOW_BUILD") != "1":
        pytest.skip("builds mmcv/_ext with rattler-build (8-10 minutes on 2 cores): set MMCV_SLOW_BUILD=1")
    if current_platform() != "linux-64" or shutil.which("gcc") is None:
        pytest.skip("the stand-in toolchain wraps a linux-64 gcc")
    tmp = tmp_path_factory.mktemp("rattler-build-mmcv")
    files = recipe_with_local_sdist(tmp)
    channels = [
        write_toolchain_channel(tmp / "deps", torch_versions=("2.13.0",)),
        mmcv_deps_channel(tmp / "mmcv-deps"),
    ]
    output = tmp / "out"
    logs: dict[str, list[str]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAX_JOBS", "2")
        mp.delenv("CONDA_OVERRIDE_CUDA", raising=False)
        try:
            (package,) = build_channel(
                output, [c.as_uri() for c in channels], [VARIANT], test=True, files=files, logs=logs,
                variant_overrides=OVERRIDES,
            )  # fmt: skip
        except ChannelError:
            print("\n".join(line for lines in logs.values() for line in lines)[-20000:])
            raise
    (log,) = logs.values()
    return Built(channels, output, package, log)


@pytest.mark.slow
def test_the_package_is_the_cpu_build_for_torch_2_13(built):
    meta = built.meta
    assert (meta.name, str(meta.version), meta.subdir) == ("mmcv", "2.1.0", "linux-64")
    assert meta.build_string.startswith(VARIANT + "_h") and meta.build_number == 0
    tag = f"cpython-{PY.replace('.', '')}-x86_64-linux-gnu"
    assert f"lib/python{PY}/site-packages/mmcv/_ext.{tag}.so" in meta.files
    assert meta.license == "Apache-2.0 AND LicenseRef-NVIDIA-Source-Code-License"


@pytest.mark.slow
def test_run_requirements_pin_the_torch_minor_kind_and_python(built):
    depends = set(built.meta.depends)
    assert {
        "pytorch 2.13.* cpu*",
        "pytorch >=2.13.0,<2.14.0a0",  # pytorch's run_exports
        "libtorch >=2.13.0,<2.14.0a0",
        "python",
        f"python_abi {PY}.* *_cp{PY.replace('.', '')}",  # python's run_exports: this Python only
        "mmengine >=0.3.0",
        "py-opencv >=3",
        "libstdcxx >=15",
    } <= depends, sorted(depends)


@pytest.mark.slow
def test_every_linked_library_is_a_run_requirement(built, tmp_path):
    from test_rattler_build import SHARED_LIBRARIES, needed_libraries, rattler_install

    prefix = tmp_path / "env"
    code, records = rattler_install([built.output, *built.channels], ["mmcv"], prefix)
    assert code == 0, records
    (extension,) = (prefix / SITE / "mmcv").glob("_ext.*.so")
    providers = {lib: pkg for pkg, libs in SHARED_LIBRARIES.items() for lib in libs} | EXTRA_LIBRARIES
    names = {d.split()[0] for d in built.meta.depends}
    needed = needed_libraries(extension)
    assert {"libc10.so", "libtorch_cpu.so", "libtorch_python.so"} <= set(needed)
    for lib in needed:
        assert lib in providers, f"{lib}: no conda-forge package known to ship it"
        assert providers[lib] in names, (
            f"{extension.name} links {lib} from {providers[lib]}, not a run requirement"
        )


@pytest.mark.slow
def test_the_recipe_s_tests_ran(built):
    log = "\n".join(built.log)
    assert "mmcv build: MAX_JOBS=2" in log
    assert log.count("python imports test passed") == 1
    assert log.count("pip check passed") == 1
    for op in ("nms", "box_ious", "roi_align", "deform_conv"):
        assert f"{op} on cpu: ok" in log
    assert "mmcv recipe test passed" in log and "all tests passed" in log


@pytest.mark.slow
def test_the_package_installs_into_a_fresh_prefix_and_runs_nms(built, tmp_path):
    from test_rattler_build import rattler_install

    prefix = tmp_path / "env"
    code, records = rattler_install([built.output, *built.channels], ["mmcv", "pytorch 2.13.*"], prefix)
    assert code == 0, records
    assert {r["name"]: r["build"] for r in records}["mmcv"] == built.meta.build_string
    probe = (
        "import json, torch, mmcv\n"
        "from mmcv.ops import nms\n"
        "boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])\n"
        "_, keep = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)\n"
        "print(json.dumps([mmcv.__file__, keep.tolist()]))\n"
    )
    proc = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", probe],
        capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    location, keep = json.loads(proc.stdout.strip().splitlines()[-1])
    assert location.startswith(str(prefix)) and keep == [0, 2]
