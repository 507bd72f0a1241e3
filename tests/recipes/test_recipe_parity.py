"""recipes/pointops/meta.yaml (conda-build) and recipe.yaml (rattler-build / boa) describe the same
packages: for every platform and variant, both render to the same requirements, build number,
build string, script environment and tests.

conda-build itself cannot be installed from PyPI, so meta.yaml is rendered here the way
conda-build does it: `# [selector]` lines are kept or dropped by evaluating the selector with the
platform flags and the variant, then the text goes through Jinja with conda-build's compiler()
and stdlib() functions, then YAML. recipe.yaml is rendered by py-rattler-build.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
import yaml

from solver.channel import PLATFORMS, RECIPE, VARIANT_CONFIG

META_YAML = RECIPE.parent / "meta.yaml"
SELECTOR = re.compile(r"^(?P<line>.*?)\s*#\s*\[(?P<expr>[^\]]+)\]\s*$")


def platform_flags(platform: str) -> dict[str, bool]:
    os_name, arch = platform.split("-")
    return {
        "linux": os_name == "linux", "osx": os_name == "osx", "win": os_name == "win",
        "unix": os_name in ("linux", "osx"), "x86_64": arch == "64", "aarch64": arch == "aarch64",
        "arm64": arch == "arm64", "linux64": platform == "linux-64", "win64": platform == "win-64",
    }


def variant_namespace(variant: dict, platform: str) -> dict:
    namespace = dict(platform_flags(platform))
    for key, value in variant.items():
        namespace[key] = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
    namespace["target_platform"] = platform
    return namespace


def render_meta_yaml(text: str, variant: dict, platform: str) -> dict:
    namespace = variant_namespace(variant, platform)
    kept = []
    for line in text.splitlines():
        match = SELECTOR.match(line)
        if match is None:
            kept.append(line)
        elif eval(match["expr"], {}, dict(namespace)):  # selectors are Python expressions in conda-build
            kept.append(match["line"])

    def compiler(language: str) -> str:
        name = f"{namespace[language + '_compiler']}_{platform}"
        version = namespace.get(language + "_compiler_version")
        return f"{name} {version}" if version else name

    def stdlib(language: str) -> str:
        name = f"{namespace[language + '_stdlib']}_{platform}"
        version = namespace.get(language + "_stdlib_version")
        return f"{name} {version}" if version else name

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    template = env.from_string("\n".join(kept))
    rendered = template.render(**namespace, compiler=compiler, stdlib=stdlib, PKG_HASH="HASH")
    return yaml.safe_load(rendered)


def render_recipe_yaml(platform: str) -> list[tuple[dict, dict]]:
    """(variant, stage-1 recipe dict) for every variant py-rattler-build renders."""
    from rattler_build import JinjaConfig, PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig

    config = PlatformConfig(target_platform=platform)
    variants = VariantConfig.from_conda_build_config(str(VARIANT_CONFIG), JinjaConfig(platform=config))
    rendered = Stage0Recipe.from_file(str(RECIPE)).render(variants, RenderConfig(platform=config))
    return [(dict(r.variant), r.recipe.to_dict()) for r in rendered]


def normalise_spec(spec: str) -> str:
    # compiler('c') renders as "gcc_linux-64 14" in conda-build and "gcc_linux-64 14.*" in
    # rattler-build: the same match spec.
    return re.sub(r"(\s[\d.]+)\.\*$", r"\1", " ".join(str(spec).split()))


def comparable_meta(meta: dict) -> dict:
    build, reqs, test = meta["build"], meta.get("requirements", {}), meta.get("test", {})
    script_env = dict(item.split("=", 1) for item in build.get("script_env", []))
    return {
        "name": meta["package"]["name"],
        "version": str(meta["package"]["version"]),
        "number": int(build["number"]),
        "string": str(build["string"]).replace("hHASH", "h<hash>"),
        "skip": bool(build.get("skip", False)),
        "version_independent": bool(build.get("python_version_independent", False)),
        "script_env": {k: v for k, v in script_env.items() if v},
        "ignore_run_exports": sorted(build.get("ignore_run_exports", [])),
        "build": [normalise_spec(s) for s in reqs.get("build") or []],
        "host": [normalise_spec(s) for s in reqs.get("host") or []],
        "run": [normalise_spec(s) for s in reqs.get("run") or []],
        "run_constraints": [normalise_spec(s) for s in reqs.get("run_constrained") or []],
        "imports": test.get("imports", []),
        "pip_check": "pip check" in test.get("commands", []) and "pip" in test.get("requires", []),
        "test_requires": [r for r in test.get("requires", []) if r != "pip"],
        "test_files": test.get("files", []),
        "test_commands": [c for c in test.get("commands", []) if c != "pip check"],
        "license": meta["about"]["license"],
        "license_file": meta["about"]["license_file"],
        "summary": meta["about"]["summary"],
        "home": meta["about"]["home"],
    }


def comparable_recipe(stage1: dict, variant: dict) -> dict:
    build, reqs = stage1["build"], stage1.get("requirements", {})
    python_tests = [t["python"] for t in stage1.get("tests", []) if "python" in t]
    script_tests = [t for t in stage1.get("tests", []) if "script" in t]

    def fill(text: str) -> str:  # test scripts are templated at test time; fill them in here
        return re.sub(r"\$\{\{\s*(\w+)\s*\}\}", lambda m: str(variant[m[1]]), text)

    return {
        "name": stage1["package"]["name"],
        "version": str(stage1["package"]["version"]),
        "number": int(build["number"]),
        "string": re.sub(r"_h[0-9a-f]{7}_", "_h<hash>_", str(build["string"])),
        "skip": bool(build.get("skip", False)),
        "version_independent": bool(build.get("python", {}).get("version_independent", False)),
        "script_env": {k: v for k, v in build["script"].get("env", {}).items() if v},
        "ignore_run_exports": sorted(reqs.get("ignore_run_exports", {}).get("by_name", [])),
        "build": [normalise_spec(s) for s in reqs.get("build", [])],
        "host": [normalise_spec(s) for s in reqs.get("host", [])],
        "run": [normalise_spec(s) for s in reqs.get("run", [])],
        "run_constraints": [normalise_spec(s) for s in reqs.get("run_constraints", [])],
        "imports": [m for t in python_tests for m in t["imports"]],
        "pip_check": all(t.get("pip_check", True) for t in python_tests),  # rattler-build's default
        "test_requires": [r for t in script_tests for r in t.get("requirements", {}).get("run", [])],
        "test_files": [f for t in script_tests for f in t.get("files", {}).get("recipe", [])],
        "test_commands": [fill(s) for t in script_tests
                          for s in ([t["script"]] if isinstance(t["script"], str) else t["script"])],
        "license": stage1["about"]["license"],
        "license_file": stage1["about"]["license_file"][0],
        "summary": stage1["about"]["summary"],
        "home": stage1["about"]["homepage"],
    }


def differences(meta_text: str, platform: str) -> list[str]:
    problems = []
    for variant, stage1 in render_recipe_yaml(platform):
        want = comparable_recipe(stage1, variant)
        got = comparable_meta(render_meta_yaml(meta_text, variant, platform))
        for key in want:
            if want[key] != got[key]:
                problems.append(f"{platform} {want['string']} {key}: recipe.yaml {want[key]!r} != meta.yaml {got[key]!r}")
    return problems


@pytest.mark.parametrize("platform", PLATFORMS)
def test_meta_yaml_matches_recipe_yaml(platform):
    assert differences(META_YAML.read_text(), platform) == []


def test_a_drifted_meta_yaml_is_caught():
    drifted = META_YAML.read_text().replace("    - ninja\n", "").replace("__cuda_arch >=", "__cuda_arch >")
    problems = differences(drifted, "linux-64")
    assert any(" build: " in p for p in problems)
    assert any(" run_constraints: " in p for p in problems)


def test_selectors_drop_and_keep_lines():
    text = "a:\n  - x  # [linux]\n  - y  # [win and cuda_compiler_version != \"None\"]\n  - z\n"
    assert render_meta_yaml(text, {"cuda_compiler_version": "12.8"}, "win-64") == {"a": ["y", "z"]}
    assert render_meta_yaml(text, {"cuda_compiler_version": "None"}, "linux-64") == {"a": ["x", "z"]}


def test_meta_yaml_exists_next_to_recipe_yaml():
    assert Path(META_YAML).is_file() and Path(RECIPE).is_file()
