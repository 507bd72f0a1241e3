"""The measured numbers of README.md and docs/*.md are generated from benchmarks/baseline_*.json by
benchmarks/doc_numbers.py: a doc that drifts from its baseline fails here (fix: run the script),
and every generated number really follows the baseline. Claims a 2026-12 audit found false stay
fixed, and the docs keep no counts of tests (they drift with every test added)."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import doc_numbers  # noqa: E402

# the documents the 2026-12 audit read (docs/doctor.md is checked by doctor's own tests)
AUDITED = (
    "ops.md",
    "kernels.md",
    "performance.md",
    "performance-cpu.md",
    "recipes.md",
    "solver.md",
    "wheels.md",
)
DOCS = [ROOT / "README.md", *(ROOT / "docs" / name for name in AUDITED)]


def blocks() -> list[tuple[str, str]]:
    found = []
    for path in doc_numbers.documents(ROOT):
        found += [(path.name, m.group("name")) for m in doc_numbers.BLOCK.finditer(path.read_text())]
    return found


def test_the_docs_numbers_are_those_of_the_baselines():
    stale = doc_numbers.drifted(ROOT)
    assert not stale, f"out of date (run python benchmarks/doc_numbers.py): {stale}"


def test_every_renderer_is_used_and_every_block_is_known():
    used = {name for _, name in blocks()}
    assert used == set(doc_numbers.RENDERERS), used ^ set(doc_numbers.RENDERERS)


def _scaled(value):
    """Every measured number doubled (versions and counts are strings or ints and stay)."""
    if isinstance(value, float):
        return value * 2 + 0.5
    if isinstance(value, dict):
        return {k: _scaled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scaled(v) for v in value]
    return value


def test_every_block_follows_its_baseline():
    """Change the measurements and every block must change: nothing in them is typed by hand."""
    changed = _scaled(copy.deepcopy(doc_numbers.load_baselines(ROOT / "benchmarks")))
    stale = {entry.split(": ")[1] for entry in doc_numbers.drifted(ROOT, changed)}
    assert stale == set(doc_numbers.RENDERERS)


def test_a_missing_section_is_named():
    with pytest.raises(KeyError, match="baseline_cpu_2core.json has no section 'make_env'"):
        doc_numbers.render_text("<!-- numbers: make_env_medians --><!-- /numbers -->", {"cpu_2core": {}})


@pytest.mark.parametrize(
    "document,name",
    [
        ("README.md", "make_env_medians"),
        ("solver.md", "make_env_table"),
        ("ops.md", "cpu_ops_table"),
        ("performance-cpu.md", "neighbors_ratios"),
        ("performance-cpu.md", "neighbors_degenerate"),
    ],
)
def test_the_audited_numbers_are_generated(document, name):
    assert (document, name) in blocks()


def test_no_counts_of_tests_in_the_docs():
    for path in DOCS:
        for line in path.read_text().splitlines():
            assert not re.search(r"(?<![\w.])\d+ tests\b", line), f"{path.name}: {line}"


def test_the_toolkit_range_is_the_knowledge_files():
    toolkits = yaml.safe_load((ROOT / "solver" / "knowledge" / "toolkits.yaml").read_text())["toolkits"]
    versions = sorted(toolkits, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert f"{versions[0]}-{versions[-1]}" in (ROOT / "docs" / "solver.md").read_text()


def test_readme_states_the_cuda_build_rule_of_ops_md():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "CUDA too if nvcc is found" not in text
    assert "a CPU torch gives a CPU build whatever nvcc is present" in text


def test_the_sanitizer_variable_is_not_presented_as_current():
    ops = " ".join((ROOT / "docs" / "ops.md").read_text().split())
    script = (ROOT / "tests" / "gpu" / "run_device_suite.sh").read_text()
    if "SANITIZER_TIMEOUT" not in script:
        assert "no longer reads it" in ops[ops.index("SANITIZER_TIMEOUT") :][:400]
