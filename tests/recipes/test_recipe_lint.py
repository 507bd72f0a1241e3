"""What conda-forge's linter and review ask of recipes/pointops, and of the feedstock recipe that
`solver channel feedstock` writes from it for a release."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest
import yaml
from rattler_build import JinjaConfig, PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig

from solver import cli
from solver.channel import (
    PLATFORMS,
    ChannelError,
    build_platform_for,
    build_sdist,
    find_recipe,
    recipe_files,
    render_matrix,
    write_feedstock_recipe,
)

FILES = find_recipe()
RECIPE_DIR = FILES.recipe_dir
DATA = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "conda_forge_metadata.yaml").read_text()
)
# rattler-build 0.73 looks for `file: build` as build.sh on unix and build.bat / build.ps1 on
# Windows (rattler_build_script platform_script_extensions)
SCRIPT_EXTENSIONS = {"win": ("bat", "ps1"), "unix": ("sh",)}
EULA_URL = "https://developer.download.nvidia.com/compute/cuda/redist/cuda_nvcc/LICENSE.txt"


@pytest.fixture(scope="module")
def matrix():
    return render_matrix()


def test_one_recipe_format_per_folder():
    """R-051: meta.yaml and recipe.yaml in one folder are refused."""
    assert (RECIPE_DIR / "recipe.yaml").is_file()
    assert not (RECIPE_DIR / "meta.yaml").exists()


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_build_script_resolves_on_every_os(platform):
    config = PlatformConfig(target_platform=platform, build_platform=build_platform_for(platform))
    variants = VariantConfig.from_files_with_context(
        [str(p) for p in FILES.variant_configs], JinjaConfig(platform=config)
    )
    for item in Stage0Recipe.from_file(str(FILES.recipe)).render(variants, RenderConfig(platform=config)):
        script = item.recipe.to_dict()["build"]["script"]
        name = script["file"]
        extensions = SCRIPT_EXTENSIONS["win" if platform.startswith("win") else "unix"]
        found = [
            RECIPE_DIR / f"{name}.{ext}" for ext in extensions if (RECIPE_DIR / f"{name}.{ext}").is_file()
        ]
        assert found, f"{platform}: rattler-build looks for {name}.{'/'.join(extensions)} in {RECIPE_DIR}"


def test_build_scripts_set_only_what_the_build_reads():
    """Each variable the scripts export is read by setup.py, the arch table code or pip;
    TORCH_DONT_CHECK_COMPILER_ABI, for one, only acts through torch's BuildExtension, which
    setup.py does not use."""
    readers = "".join((FILES.source_dir / f).read_text() for f in ("setup.py", "pointops/cuda_archs.py"))
    exported = set(re.findall(r"^\s*export (\w+)", (RECIPE_DIR / "build.sh").read_text(), re.M))
    exported |= set(re.findall(r'^\s*set (?:/p )?"?(\w+)=', (RECIPE_DIR / "build.bat").read_text(), re.M))
    assert exported >= {"MAX_JOBS", "CUDA_HOME", "POINTOPS_CUDA_TARGET_ROOT", "TORCH_CUDA_ARCH_LIST"}
    for name in exported - {"DISTUTILS_USE_SDK"}:  # read by setuptools' MSVC support
        assert name in readers, f"the build scripts set {name}, which nothing in the build reads"


def test_about_names_the_project_and_every_licence(matrix):
    about = FILES.recipe.read_text().split("\nabout:\n", 1)[1]
    assert "anaconda.org" not in about, "homepage must be the project, not the channel"
    for b in matrix:
        urls = [s.get("url") for s in b.sources if "url" in s]
        if b.cuda_version:  # the static CUDA runtime is NVIDIA's: its EULA ships with the package
            assert b.license == "BSD-3-Clause AND LicenseRef-NVIDIA-End-User-License-Agreement"
            assert b.license_files == ("LICENSE", "NVIDIA-CUDA-EULA.txt")
            (source,) = [s for s in b.sources if "url" in s]
            assert source["url"] == EULA_URL and re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
        else:
            assert (b.license, b.license_files, urls) == ("BSD-3-Clause", ("LICENSE",), [])


def variant_keys(path: Path) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^([A-Za-z_]\w*):", path.read_text(), re.M)}


def test_the_recipe_s_variant_file_does_not_override_the_global_pinning():
    """A feedstock's recipe/conda_build_config.yaml holds its own keys; the one override is
    c_stdlib_version on macOS, conda-forge's way to raise a recipe's deployment target."""
    pinning, own = FILES.variant_configs
    assert variant_keys(own) & variant_keys(pinning) == {"c_stdlib_version"}
    assert re.search(r"^c_stdlib_version:\s+# \[osx\]$", own.read_text(), re.M)
    assert "MACOSX_DEPLOYMENT_TARGET" not in own.read_text() + pinning.read_text()


def test_the_pinning_file_has_conda_forge_s_values(matrix):
    expected = DATA["pinning"]
    by_cell = {(b.platform, b.variant): b.variant_values for b in matrix}
    linux = expected["linux"]
    for cuda, gcc, glibc in zip(
        linux["cuda_compiler_version"], linux["c_compiler_version"], linux["c_stdlib_version"], strict=True
    ):
        variant = "cpu" if cuda is None or cuda == "None" else "cuda" + cuda.replace(".", "")
        values = by_cell[("linux-64", variant)]
        assert (values["c_compiler_version"], values["c_stdlib_version"]) == (gcc, glibc), variant
    win_cuda = {b.cuda_version for b in matrix if b.platform == "win-64"}
    assert win_cuda == {None if c in (None, "None") else c for c in expected["win"]["cuda_compiler_version"]}
    assert by_cell[("osx-arm64", "cpu")]["c_compiler_version"] == expected["osx"]["c_compiler_version"]
    pinning = FILES.variant_configs[0].read_text()
    for value in expected["python"]:
        assert f"  - {value}\n" in pinning
    assert f'python_min:\n  - "{expected["python_min"]}"' in pinning


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    return build_sdist(FILES.source_dir, tmp_path_factory.mktemp("sdist"))


URL = "https://github.com/example-org/pointops/releases/download/v0.1.0/pointops-0.1.0.tar.gz"
HOMEPAGE = "https://github.com/example-org/pointops"


def test_the_feedstock_recipe_builds_the_release_sdist(sdist, tmp_path):
    recipe = write_feedstock_recipe(
        tmp_path / "feedstock", URL, HOMEPAGE, ["octocat", "example-org/core"], sdist
    )
    folder = recipe.parent
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [
            "recipe.yaml",
            "build.sh",
            "build.bat",
            "cuda_arch_list.py",
            "test_pointops.py",
            "LICENSE",
            "conda_build_config.yaml",
        ]
    )
    text = recipe.read_text()
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    assert f"  - url: {URL}\n    sha256: {digest}\n" in text
    assert "path:" not in text
    stage0 = Stage0Recipe.from_file(str(recipe)).to_dict()
    assert stage0["about"]["homepage"] == HOMEPAGE and stage0["about"]["repository"] == HOMEPAGE
    assert stage0["extra"]["recipe-maintainers"] == ["octocat", "example-org/core"]


def test_the_feedstock_recipe_renders_the_same_matrix(sdist, tmp_path, matrix):
    """With conda-forge's pinning (here the top-level file, two folders up as in this
    repository) the feedstock recipe renders the same packages."""
    tree = tmp_path / "tree"
    write_feedstock_recipe(tree / "recipes", URL, HOMEPAGE, ["octocat"], sdist)
    shutil.copy2(FILES.variant_configs[0], tree / "conda_build_config.yaml")
    (tree / "ops-src").symlink_to(FILES.source_dir)  # the arch table, which the sdist also carries
    feedstock = render_matrix(files=recipe_files(tree / "recipes" / "recipe"))
    assert [(b.platform, b.variant, b.run, b.license) for b in feedstock] == [
        (b.platform, b.variant, b.run, b.license) for b in matrix
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://example.org/pointops-0.1.0.tar.gz"], "must be the https address"),
        (["--homepage", "https://anaconda.org/pointops/pointops"], "not a channel"),
        (["--maintainer", "not a handle"], "is not one"),
        (["--url", "https://example.org/other-0.1.0.tar.gz"], "must end with the sdist's file name"),
    ],
)
def test_feedstock_arguments_are_checked(sdist, tmp_path, capsys, args, message):
    argv = {"--url": URL, "--homepage": HOMEPAGE, "--maintainer": "octocat"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        argv[flag] = value
    flat = [x for pair in argv.items() for x in pair]
    code = cli.main(["channel", "feedstock", *flat, "--sdist", str(sdist), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err
    assert not (tmp_path / "out" / "recipe").exists()


def test_a_wrong_sdist_is_refused(tmp_path):
    other = tmp_path / "pointops-9.9.9.tar.gz"
    other.write_bytes(b"")
    with pytest.raises(ChannelError, match="not the sdist of pointops 0.1.0"):
        write_feedstock_recipe(
            tmp_path / "out", URL.replace("0.1.0.tar", "9.9.9.tar"), HOMEPAGE, ["octocat"], other
        )
