"""Keeps one current baseline per machine kind: benchmarks/baseline_<kind>.json holds one section
per benchmark script (its whole --json output, machine and commit included), and
benchmarks/baseline_<kind>.md is a short table of every section, rendered from the json.
The numbers README.md and docs/*.md quote are rendered from the json too (doc_numbers.py), here,
each time a section is recorded: commit the docs with the baseline.

    python benchmarks/update_baseline.py h200 ops out/bench_gpu.json        # replace one section
    python benchmarks/update_baseline.py h200 --render                      # only re-render the table
    python benchmarks/update_baseline.py h200 packed out.json --ran-at 3425ce6  # a run of another commit

Older numbers live in git history (git log -p benchmarks/baseline_h200.json), not in more files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import doc_numbers
from bench_common import write_json

HERE = os.path.dirname(os.path.abspath(__file__))
# columns worth a glance, in order, when a row has them (every script names its own)
COLUMNS = (
    "row",
    "op",
    "case",
    "variant",
    "layer",
    "shape",
    "ms",
    "us",
    "pointops_ms",
    "pointnet2_ops_ms",
    "peer_ms",
    "peers_ms",
    "pointcept_ms",
    "torch_cluster_ms",
    "cdist_ms",
    "pytorch3d_ms",
    "speedup",
    "speedup_vs_cdist",
    "speedup_vs_pytorch3d",
    "pointops_b2b_ms",
    "peers_b2b_ms",
    "ratio",
    "ratio_b2b",
    "contiguous_ms",
    "ratio_contiguous",
    "grad_rel_l2",
    "first_fwd_bwd_ms",
    "pointops_pipelined_ms",
    "torch_cluster_pipelined_ms",
    "pipelined_speedup",
    "floor_ms",
    "floor_pipelined_ms",
    "ratio_to_best_peer",
    "target_ms",
    "status",
    "note",
)


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_cell(v)}" for k, v in value.items())
    return "" if value is None else str(value).replace("|", "/")


def _latest_run_rows(section: dict) -> list:
    """Scripts that keep several runs (e.g. host_overhead's before/after lists of runs, each with
    results): the rows of the last run of the last list."""
    for key in ("after", "runs"):
        runs = section.get(key)
        if isinstance(runs, list) and runs and isinstance(runs[-1], dict):
            return runs[-1].get("results") or runs[-1].get("rows") or []
    return []


def render(baseline: dict, kind: str) -> str:
    lines = [
        f"# Baseline: {kind}",
        "",
        f"Rendered from `baseline_{kind}.json` by `benchmarks/update_baseline.py`; each section is "
        "one script's latest run (its machine and commit below).",
        "",
    ]
    for name, section in sorted(baseline.get("sections", {}).items()):
        meta = section.get("meta") or {
            k: v for k, v in section.items() if k not in ("rows",) and not isinstance(v, (list, dict))
        }
        lines += [
            f"## {name}",
            "",
            "; ".join(f"{k}: {_cell(v)}" for k, v in meta.items() if not isinstance(v, dict)),
            "",
        ]
        rows = section.get("rows") or section.get("results") or _latest_run_rows(section)
        if not rows:
            lines += ["(no rows)", ""]
            continue
        columns = [c for c in COLUMNS if any(r.get(c) is not None for r in rows)]
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", help="machine kind, e.g. h200 or cpu_2core")
    parser.add_argument("section", nargs="?", help="section name, e.g. ops, packed, torch_cluster")
    parser.add_argument("results", nargs="?", help="a benchmark script's --json output")
    parser.add_argument("--render", action="store_true", help="only re-render the table")
    parser.add_argument(
        "--ran-at", metavar="COMMIT", help="the commit the benchmark ran on (default: the current HEAD)"
    )
    args = parser.parse_args(argv)
    path = os.path.join(HERE, f"baseline_{args.kind}.json")
    baseline = {"kind": args.kind, "sections": {}}
    if os.path.exists(path):
        with open(path) as f:
            baseline = json.load(f)
    if not args.render:
        if not (args.section and args.results):
            parser.error("give a section and a results file, or --render")
        with open(args.results) as f:
            section = json.load(f)
        section.setdefault("recorded_at_commit", args.ran_at or _commit())
        baseline["sections"][args.section] = section
        write_json(path, baseline)
    with open(os.path.join(HERE, f"baseline_{args.kind}.md"), "w") as f:
        f.write(render(baseline, args.kind))
    for changed in doc_numbers.rewrite():
        print(f"updated {changed} from the baselines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
