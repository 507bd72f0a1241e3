""".github/workflows: valid against GitHub's workflow schema; the channel workflow builds exactly
the matrix every recipe of recipes/ renders (pointops, pointnet2_ops, mmcv) on runners that exist,
each job declaring its variant's CUDA version as the runner's driver (CONDA_OVERRIDE_CUDA) and
passing its job limit to the recipe; the wheel workflow builds every wheel of the knowledge (the
pure pointnet2_ops one included, imported beside the pointops CPU wheel); and each publish job
needs every job that builds and downloads every artifact they upload.

The matrices are expanded as GitHub does (a product of axes, or an include list), `${{ matrix.* }}`
substituted, and each `solver channel build` / `solver wheels build` command is parsed with the
solver's own argument parser, so a job is checked for what it would run."""

from __future__ import annotations

import argparse
import copy
import fnmatch
import functools
import itertools
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from solver.channel import build_platform_for, find_recipe, render_matrix

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
CHANNEL = REPO / ".github" / "workflows" / "channel.yml"
WHEELS = REPO / ".github" / "workflows" / "wheels.yml"
RECIPES = sorted(p.parent.name for p in (REPO / "recipes").glob("*/recipe.yaml"))
# GitHub-hosted runner labels and the conda platform of their machines (runner-images README);
# retired labels are refused (macos-13 went in December 2025).
RUNNERS = {
    "ubuntu-latest": "linux-64",
    "ubuntu-24.04": "linux-64",
    "ubuntu-24.04-arm": "linux-aarch64",
    "windows-2022": "win-64",
    "windows-2025": "win-64",
    "macos-14": "osx-arm64",
    "macos-15": "osx-arm64",
}
RETIRED = {"macos-12", "macos-13", "ubuntu-20.04", "windows-2019"}


def check_jsonschema() -> str:
    found = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which(
        "check-jsonschema"
    )
    if found is None:
        pytest.fail("check-jsonschema is not installed: pip install -e '.[test]'")
    return found


def validate(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def build_jobs() -> list[dict]:
    workflow = yaml.safe_load(CHANNEL.read_text())
    return workflow["jobs"]["build"]["strategy"]["matrix"]["include"]


def build_step() -> dict:
    steps = yaml.safe_load(CHANNEL.read_text())["jobs"]["build"]["steps"]
    (step,) = [s for s in steps if "solver channel build" in s.get("run", "")]
    return step


def test_workflows_match_github_s_schema():
    assert WORKFLOWS
    proc = validate(*WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_broken_workflow_is_caught(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(
        CHANNEL.read_text().replace("runs-on: ${{ matrix.runner }}", "run-on: ${{ matrix.runner }}")
    )
    proc = validate(broken)
    assert proc.returncode != 0 and "broken.yml" in proc.stdout + proc.stderr


def test_the_workflow_builds_exactly_the_matrix():
    matrix = render_matrix()
    assert sorted((j["platform"], j["variant"]) for j in build_jobs()) == sorted(
        (b.platform, b.variant) for b in matrix
    )


def test_every_job_runs_where_its_platform_is_built():
    """Native builds, except osx-64, cross-compiled on Apple silicon as conda-forge does."""
    for job in build_jobs():
        assert job["runner"] not in RETIRED, job
        assert RUNNERS[job["runner"]] == build_platform_for(job["platform"]), job
    assert "--target-platform ${{ matrix.platform }}" in build_step()["run"]


def test_each_job_declares_its_variant_s_cuda_version():
    """conda-forge's CUDA pytorch depends on __cuda and cuda-version X constrains __cuda >=X:
    without a GPU the host solve needs CONDA_OVERRIDE_CUDA, at the variant's own version."""
    cuda_of = {(b.platform, b.variant): b.cuda_version or "" for b in render_matrix()}
    for job in build_jobs():
        assert str(job["cuda"]) == cuda_of[(job["platform"], job["variant"])], job
    env = build_step()["env"]
    assert env["CONDA_OVERRIDE_CUDA"] == "${{ matrix.cuda }}"
    assert env["MAX_JOBS"] == "2"  # the recipe passes it to build.sh through script.env


def test_osx_64_is_tested_under_emulation_on_its_build_machine():
    from rattler_build import ToolConfiguration

    from solver.channel.build import test_strategy

    assert test_strategy("osx-64", "osx-arm64", True) == "native-and-emulated"  # Rosetta 2
    assert test_strategy("linux-aarch64", "linux-64", True) == "native"  # a cross build skips its tests
    assert test_strategy("linux-64", "linux-64", False) == "skip"
    assert ToolConfiguration(test_strategy="native-and-emulated").test_strategy == "NativeAndEmulated"


def test_the_wheel_workflow_builds_every_wheel_of_the_knowledge_with_its_toolkit():
    from solver.knowledge import load

    kb = load()
    expected = {
        (w.distribution, platform): w.cuda_version or ""
        for platform in ("linux-64", "linux-aarch64", "win-64", "osx-arm64", "osx-64")
        for w in kb.pointops_wheels(platform)
    }
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "wheels.yml").read_text())
    jobs = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {(j["distribution"], j["platform"]): str(j["cuda"]) for j in jobs} == expected
    for job in jobs:
        assert job["runner"] not in RETIRED and RUNNERS[job["runner"]] == job["platform"], job
        if job["platform"].startswith("linux"):  # the oldest glibc the wheels may claim
            assert (
                job["image"]
                == f"quay.io/pypa/manylinux_2_28_{'aarch64' if 'aarch64' in job['platform'] else 'x86_64'}"
            )
    steps = workflow["jobs"]["build"]["steps"]
    assert any("solver wheels build ${{ matrix.distribution }}" in s.get("run", "") for s in steps)
    assert any("solver wheels check" in s.get("run", "") for s in steps)


# --- every job, as GitHub expands it -------------------------------------------------------------

# What `${{ github.workspace }}` stands for when a command is parsed here.
WORKSPACE = "/github/workspace"
_MATRIX_EXPR = re.compile(r"\$\{\{\s*matrix\.([A-Za-z0-9_.-]+)\s*\}\}")
_WORKSPACE_EXPR = re.compile(r"\$\{\{\s*github\.workspace\s*\}\}")


def read_workflow(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def cells(job: dict) -> list[dict]:
    """The jobs a matrix makes: the product of its axes, or its include list (a job without a
    matrix is one cell). Mixing the two (include adding to or extending a product) is refused:
    these workflows do not need its merge rules."""
    matrix = (job.get("strategy") or {}).get("matrix")
    if matrix is None:
        return [{}]
    assert "exclude" not in matrix, "cells() expands no exclude lists; write the matrix out"
    include = matrix.get("include") or []
    axes = {key: values for key, values in matrix.items() if key != "include"}
    assert not (axes and include), "cells() expands a product of axes or an include list, not both"
    if include:
        return [dict(cell) for cell in include]
    keys = list(axes)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(axes[k] for k in keys))]


def expand(text: str, cell: dict) -> str:
    """`text` with `${{ matrix.a.b }}` replaced by the cell's value and `${{ github.workspace }}`
    by WORKSPACE; a matrix key the cell lacks raises KeyError (GitHub would give an empty string)."""

    def value(match: re.Match) -> str:
        found = cell
        for part in match.group(1).split("."):
            found = found[part]
        return str(found)

    return _WORKSPACE_EXPR.sub(WORKSPACE, _MATRIX_EXPR.sub(value, str(text)))


def steps_using(job: dict, action: str) -> list[dict]:
    return [s for s in job.get("steps", []) if str(s.get("uses", "")).split("@")[0] == action]


def solver_args(command: str, tool: str) -> argparse.Namespace:
    """`solver <tool> ...` of a run step (its first line that calls it), parsed by the solver's own
    parser: a flag the solver does not take fails here as it would on the runner."""
    from solver.channel import cli as channel_cli
    from solver.wheels import cli as wheels_cli

    words = shlex.split(command)
    start = next(i for i in range(len(words) - 1) if words[i : i + 2] == ["solver", tool])
    end = next((i for i in range(start, len(words)) if words[i] in ("&&", "||", ";", "|")), len(words))
    parser = argparse.ArgumentParser(prog=f"solver {tool}", exit_on_error=False)
    {"channel": channel_cli, "wheels": wheels_cli}[tool].add_arguments(parser)
    try:
        return parser.parse_args(words[start + 2 : end])
    except (argparse.ArgumentError, SystemExit) as exc:
        raise AssertionError(f"`{command}` does not parse: {exc}") from None


def runs(job: dict, needle: str) -> list[dict]:
    return [s for s in job.get("steps", []) if needle in str(s.get("run", ""))]


def shell_of(workflow: dict, job: dict, step: dict) -> str | None:
    for where in (step, job.get("defaults", {}).get("run", {}), workflow.get("defaults", {}).get("run", {})):
        if "shell" in where:
            return where["shell"]
    return None


@functools.cache
def recipe_files(recipe: str):
    return find_recipe(recipe, start=REPO)


@functools.cache
def rendered(recipe: str) -> tuple:
    return tuple(render_matrix(files=recipe_files(recipe)))


@functools.cache
def passes_max_jobs(recipe: str) -> bool:
    """The recipe hands the caller's MAX_JOBS to its build script (build.script.env; a render
    without the variable set drops it, so the recipe as written is read)."""
    from solver.channel.render import recipe_stage0

    script = recipe_stage0(recipe_files(recipe))["build"].get("script")
    return isinstance(script, dict) and "MAX_JOBS" in (script.get("env") or {})


@dataclass
class ChannelBuild:
    """One `solver channel build` as one cell of a job runs it."""

    job: str
    cell: dict
    command: str
    args: argparse.Namespace
    runner: str
    env: dict[str, str]
    narrowed: dict[str, list[str]] = field(default_factory=dict)  # the --variant-config files' keys
    recipe: str = field(init=False)
    platform: str = field(init=False)  # what it builds for: --platform, else the runner's; or noarch

    def __post_init__(self) -> None:
        self.recipe = str(getattr(self.args, "recipe", None) or "pointops")
        noarch = recipe_files(self.recipe).noarch
        self.platform = "noarch" if noarch else (self.args.platform or RUNNERS.get(self.runner, "?"))

    def covers(self, build) -> bool:
        if build.platform != self.platform:
            return False
        if self.args.variant and build.variant not in self.args.variant:
            return False
        return all(str(build.variant_values.get(k)) in v for k, v in self.narrowed.items())

    def __str__(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.cell.items()) or "no matrix"
        return f"{self.job} ({where})"


@functools.cache
def written(scripts: tuple[str, ...], path: str) -> str:
    """What bash `scripts`, run in turn in an empty folder, leave at `path` (one run per distinct
    command: the cells of a matrix repeat a few)."""
    with tempfile.TemporaryDirectory() as here:
        for script in scripts:
            subprocess.run(["bash", "-ec", script], cwd=here, check=True, timeout=30)
        return (Path(here) / path).read_text()


def variant_files(workflow: dict, job: dict, build_step: dict, args, cell: dict) -> dict:
    """The keys of the build's --variant-config files: written by earlier bash steps of the job,
    which are run here to read what they write."""
    narrowed: dict[str, list[str]] = {}
    steps = job["steps"][: job["steps"].index(build_step)]
    for path in getattr(args, "variant_config", None) or []:
        writers = [s for s in steps if str(path) in str(s.get("run", ""))]
        assert writers, f"no step before the build writes its --variant-config {path}"
        for step in writers:
            assert shell_of(workflow, job, step) == "bash", f"{step.get('name')}: give it shell: bash"
        data = yaml.safe_load(written(tuple(expand(s["run"], cell) for s in writers), str(path)))
        for key, values in data.items():
            narrowed[key] = [str(v) for v in values]
    return narrowed


def channel_builds(workflow: dict) -> list[ChannelBuild]:
    builds = []
    for job_id, job in workflow["jobs"].items():
        steps = runs(job, "solver channel build")
        assert len(steps) <= 1, f"{job_id}: one `solver channel build` step per job"
        for step, cell in itertools.product(steps, cells(job)):
            command = expand(step["run"], cell)
            args = solver_args(command, "channel")
            env = {k: expand(v, cell) for k, v in (step.get("env") or {}).items()}
            narrowed = variant_files(workflow, job, step, args, cell)
            builds.append(
                ChannelBuild(job_id, cell, command, args, expand(job["runs-on"], cell), env, narrowed)
            )
    return builds


def artifacts(workflow: dict) -> dict[str, list[tuple[str, dict]]]:
    """job -> [(artifact name, upload step with its path expanded)] over every cell."""
    found: dict[str, list[tuple[str, dict]]] = {}
    for job_id, job in workflow["jobs"].items():
        for step, cell in itertools.product(steps_using(job, "actions/upload-artifact"), cells(job)):
            expanded = {k: expand(v, cell) for k, v in step.get("with", {}).items()}
            found.setdefault(job_id, []).append((expanded.get("name", "artifact"), expanded))
    return found


def publish_problems(workflow: dict) -> list[str]:
    """The publish job waits for every job that uploads an artifact and downloads them all."""
    publish = workflow["jobs"].get("publish")
    if publish is None:
        return ["no publish job"]
    needs = publish.get("needs", [])
    needs = [needs] if isinstance(needs, str) else needs
    (download,) = steps_using(publish, "actions/download-artifact")
    options = download.get("with", {})
    problems = []
    names = Counter()
    for job_id, uploaded in artifacts(workflow).items():
        if job_id == "publish":
            continue
        if job_id not in needs:
            problems.append(f"publish does not need {job_id}, which uploads {uploaded[0][0]}")
        for name, _ in uploaded:
            names[name] += 1
            if "name" in options and options["name"] != name:
                problems.append(f"publish downloads only {options['name']}, not {name}")
            elif "pattern" in options and not fnmatch.fnmatchcase(name, options["pattern"]):
                problems.append(f"publish's pattern {options['pattern']} leaves out {name}")
    problems += [
        f"{n} artifacts are named {name}: names must be unique" for name, n in names.items() if n > 1
    ]
    if len(names) > 1 and not options.get("merge-multiple"):
        problems.append("publish downloads several artifacts without merge-multiple: true")
    return problems


def channel_problems(workflow: dict) -> list[str]:
    """What channel.yml builds against what every recipe renders, and how each job builds it."""
    problems = []
    builds = channel_builds(workflow)
    uploaded = artifacts(workflow)
    for recipe in RECIPES:
        covered = Counter()  # index in the rendered matrix -> how many cells build it
        mine = [b for b in builds if b.recipe == recipe]
        for build in mine:
            hits = [(i, r) for i, r in enumerate(rendered(recipe)) if build.covers(r)]
            if not hits:
                problems.append(f"{build}: `{build.command}` builds nothing the {recipe} recipe renders")
            for i, r in hits:
                covered[i] += 1
                cuda = build.env.get("CONDA_OVERRIDE_CUDA", "")
                if cuda != (r.cuda_version or ""):
                    problems.append(
                        f"{build}: CONDA_OVERRIDE_CUDA {cuda!r} for {r.variant} (CUDA {r.cuda_version})"
                    )
        for i, r in enumerate(rendered(recipe)):
            if covered[i] != 1:
                what = f"{recipe} {r.platform} {r.variant} ({r.build_string})"
                n = covered[i]
                problems.append(f"channel.yml builds {what} {n} times, expected once")
        for build in mine:
            if passes_max_jobs(recipe) and build.env.get("MAX_JOBS") != "2":
                problems.append(f"{build}: MAX_JOBS must be 2 (hosted runners have 7-16 GB)")
            if build.runner in RETIRED or build.runner not in RUNNERS:
                problems.append(f"{build}: runner {build.runner} is retired or unknown")
            elif build.platform != "noarch" and RUNNERS[build.runner] != build_platform_for(build.platform):
                problems.append(f"{build}: {build.platform} is not built on {build.runner}")
            paths = [step.get("path") for name, step in uploaded.get(build.job, [])]
            if set(paths) != {str(build.args.output)}:
                problems.append(f"{build}: uploads {paths}, not its output {build.args.output}")
            problems += local_channel_problems(workflow, build, builds)
    return problems


def artifact_of(workflow: dict, build: ChannelBuild) -> str:
    """The name of the artifact a build's cell uploads."""
    (upload,) = steps_using(workflow["jobs"][build.job], "actions/upload-artifact")
    return expand(upload["with"]["name"], build.cell)


def local_channel_problems(workflow: dict, build: ChannelBuild, builds: list[ChannelBuild]) -> list[str]:
    """A recipe that run-depends on another recipe's package (pointnet2_ops on pointops, which
    conda-forge lacks) gets it from this run: a file:// channel that is a downloaded artifact of a
    job it needs, a cpu build for the runner's platform (hosted runners have no GPU, and nothing
    declares a driver for this job's tests)."""
    job = workflow["jobs"][build.job]
    requires = {req.split()[0] for r in rendered(build.recipe) if build.covers(r) for req in r.run}
    packages = {recipe_files(name).package: name for name in RECIPES}
    needs = job.get("needs", [])
    needs = [needs] if isinstance(needs, str) else needs
    problems = []
    for package in sorted(requires & set(packages) - {build.recipe}):
        given = []
        for channel in build.args.channel or []:
            if not channel.startswith(f"file://{WORKSPACE}/"):
                continue
            path = channel.removeprefix(f"file://{WORKSPACE}/")
            for step in steps_using(job, "actions/download-artifact"):
                if step.get("with", {}).get("path") == path:
                    given.append(step["with"].get("name"))
        makers = {
            artifact_of(workflow, b)
            for b in builds
            if b.recipe == packages[package]
            and b.job in needs
            and b.platform == RUNNERS.get(build.runner)
            and all(r.cuda_version is None for r in rendered(b.recipe) if b.covers(r))
        }
        if not set(given) & makers:
            problems.append(
                f"{build}: {build.recipe} needs {package}, but no --channel file://... is a cpu artifact "
                f"of {package} for {RUNNERS.get(build.runner)} from a job it needs (given: {given or 'none'})"
            )
    return problems


def pure_wheel_problems(workflow: dict) -> list[str]:
    """Each pure-Python wheel of the knowledge is built once (no matrix), audited, installed beside
    the pointops CPU wheel built in the same job and imported, and uploaded under its file name."""
    from solver.knowledge import load
    from solver.wheels.naming import file_name_of

    problems = []
    for entry in load().pointops_table.pure_wheels:
        jobs = {
            job_id: (job, step, args)
            for job_id, job in workflow["jobs"].items()
            for step, cell in itertools.product(runs(job, "solver wheels build"), cells(job))
            for args in [solver_args(expand(step["run"], cell), "wheels")]
            if file_name_of(args.distribution) == file_name_of(entry.distribution)
        }
        if len(jobs) != 1:
            problems.append(f"{len(jobs)} jobs build {entry.distribution}, expected one")
            continue
        ((job_id, (job, step, args)),) = jobs.items()
        if len(cells(job)) != 1:
            problems.append(
                f"{job_id}: {entry.distribution} is one py3-none-any wheel; build it once, no matrix"
            )
        wheel = f"{args.output}/{file_name_of(entry.distribution)}-{entry.version}-py3-none-any.whl"
        after = job["steps"][job["steps"].index(step) + 1 :]
        checked = [
            w
            for s in after
            if "solver wheels check" in s.get("run", "")
            for w in solver_args(s["run"], "wheels").wheels
        ]
        if not any(fnmatch.fnmatchcase(wheel, str(w)) for w in checked):
            problems.append(f"{job_id}: no `solver wheels check` of {wheel}")
        cpu = entry.extras["cpu"]  # the pointops distribution the pure wheel runs on without CUDA
        cpu_builds = [
            args
            for s, cell in itertools.product(runs(job, "solver wheels build"), cells(job))
            for args in [solver_args(expand(s["run"], cell), "wheels")]
            if args.distribution == cpu
        ]
        package = entry.files[0].split("/")[0]
        assert f"{package}/pointnet2_utils.py" in entry.files
        importing = [
            s["run"]
            for s in after
            if f"from {package} import pointnet2_utils" in s.get("run", "") and "pip install" in s["run"]
        ]
        if not cpu_builds:
            problems.append(
                f"{job_id}: no `solver wheels build {cpu}` to install {entry.distribution} beside"
            )
        elif not any(
            f"{b.output}/" in text and f"{args.output}/{file_name_of(entry.distribution)}-" in text
            for b in cpu_builds
            for text in importing
        ):
            problems.append(
                f"{job_id}: no step installs {entry.distribution} beside the {cpu} wheel built here and "
                f"runs `from {package} import pointnet2_utils`"
            )
        paths = [step_with.get("path", "") for _, step_with in artifacts(workflow).get(job_id, [])]
        if not any(fnmatch.fnmatchcase(wheel, p) for p in paths):
            problems.append(f"{job_id}: no artifact uploads {wheel} (uploads {paths})")
    return problems


def test_the_channel_workflow_builds_every_recipe_s_matrix_once():
    """pointops, pointnet2_ops and mmcv: every package rendered is built by exactly one job cell,
    on a runner of its platform, with its CUDA version as driver and uploaded from its output."""
    assert set(RECIPES) >= {"pointops", "pointnet2_ops", "mmcv"}
    assert channel_problems(read_workflow(CHANNEL)) == []


def test_the_mmcv_jobs_build_the_matrix_solver_renders():
    """The mmcv cells, by (platform, variant, release), are `solver channel --render-only --recipe
    mmcv`'s packages; the CUDA ones narrow mmcv_version to one release each."""
    builds = [b for b in channel_builds(read_workflow(CHANNEL)) if b.recipe == "mmcv"]
    built = Counter(
        (r.platform, r.variant, r.variant_values["mmcv_version"])
        for b in builds
        for r in rendered("mmcv")
        if b.covers(r)
    )
    expected = Counter((r.platform, r.variant, r.variant_values["mmcv_version"]) for r in rendered("mmcv"))
    assert built == expected
    releases = {r.variant_values["mmcv_version"] for r in rendered("mmcv")}
    assert len(releases) > 1  # else the split below proves nothing
    for b in builds:
        assert (b.narrowed == {}) == (b.env.get("CONDA_OVERRIDE_CUDA", "") == ""), b  # CUDA: one release
        assert len([r for r in rendered("mmcv") if b.covers(r)]) == (1 if b.narrowed else len(releases)), b
    jobs = read_workflow(CHANNEL)["jobs"]
    assert all(len(cells(jobs[j])) <= 256 for j in {b.job for b in builds})  # GitHub's matrix limit


def test_pointnet2_ops_is_built_once_against_this_run_s_pointops():
    (build,) = [b for b in channel_builds(read_workflow(CHANNEL)) if b.recipe == "pointnet2_ops"]
    assert build.platform == "noarch" and RUNNERS[build.runner] == "linux-64"
    assert build.args.platform is None  # a noarch recipe refuses --platform of another machine
    assert "https://conda.anaconda.org/conda-forge" in build.args.channel  # --channel replaces the default


@pytest.mark.parametrize("path", [CHANNEL, WHEELS], ids=["channel", "wheels"])
def test_publish_needs_every_build_and_downloads_every_artifact(path):
    assert publish_problems(read_workflow(path)) == []


def test_the_wheel_workflow_builds_audits_imports_and_publishes_pointnet2_ops():
    workflow = read_workflow(WHEELS)
    assert pure_wheel_problems(workflow) == []
    uploaded = {name for _, items in artifacts(workflow).items() for name, _ in items}
    assert any("pointnet2_ops" in name for name in uploaded)


def _without_job(workflow: dict, job: str) -> dict:
    changed = copy.deepcopy(workflow)
    del changed["jobs"][job]
    for other in changed["jobs"].values():  # what needed it no longer does
        if isinstance(other.get("needs"), list) and job in other["needs"]:
            other["needs"].remove(job)
        elif other.get("needs") == job:
            del other["needs"]
    return changed


@pytest.mark.parametrize("job", ["build", "pointnet2_ops", "mmcv-cpu", "mmcv-cuda"])
def test_a_missing_channel_job_is_caught(job):
    workflow = read_workflow(CHANNEL)
    assert job in workflow["jobs"]
    problems = channel_problems(_without_job(workflow, job))
    assert any("times, expected once" in p for p in problems), problems


def test_a_missing_wheel_job_or_a_narrow_download_is_caught():
    workflow = read_workflow(WHEELS)
    assert pure_wheel_problems(_without_job(workflow, "pointnet2_ops")) == [
        "0 jobs build pointnet2_ops, expected one"
    ]
    narrow = copy.deepcopy(workflow)
    narrow["jobs"]["publish"]["needs"].remove("pointnet2_ops")
    steps_using(narrow["jobs"]["publish"], "actions/download-artifact")[0]["with"]["pattern"] = (
        "wheel-pointops*"
    )
    problems = publish_problems(narrow)
    assert any("does not need pointnet2_ops" in p for p in problems), problems
    assert any("leaves out wheel-pointnet2_ops" in p for p in problems), problems


def test_channel_mistakes_are_caught():
    """A dropped cell, a wrong driver, pointops' old download pattern, pointnet2_ops without its
    pointops channel: each is a problem."""
    workflow = read_workflow(CHANNEL)

    dropped = copy.deepcopy(workflow)
    dropped["jobs"]["mmcv-cuda"]["strategy"]["matrix"]["torch"].remove("213")
    assert any("cuda130_torch213_py312" in p for p in channel_problems(dropped))

    driver = copy.deepcopy(workflow)
    driver["jobs"]["mmcv-cuda"]["strategy"]["matrix"]["target"][1]["cuda"] = "12.9"
    assert any("CONDA_OVERRIDE_CUDA '12.9' for cuda130" in p for p in channel_problems(driver))

    old = copy.deepcopy(workflow)
    steps_using(old["jobs"]["publish"], "actions/download-artifact")[0]["with"]["pattern"] = "pointops-*"
    assert any("leaves out conda-mmcv-" in p for p in publish_problems(old))

    alone = copy.deepcopy(workflow)
    (step,) = runs(alone["jobs"]["pointnet2_ops"], "solver channel build")
    step["run"], n = re.subn(r"--channel file://\$\{\{[^}]*\}\}\S*", "", step["run"])
    assert n == 1
    assert any("pointnet2_ops needs pointops" in p for p in channel_problems(alone))
