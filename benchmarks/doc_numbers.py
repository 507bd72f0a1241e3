"""The measured numbers in README.md and docs/*.md come from the baseline files, not from typing:
each is a marked block that this script renders from benchmarks/baseline_<kind>.json.

    python benchmarks/doc_numbers.py            # rewrite every block from the baselines
    python benchmarks/doc_numbers.py --check    # exit 1 naming each block that differs (a test runs it)

A block is `<!-- numbers: NAME -->...<!-- /numbers -->` (inline, or around a table on lines of its
own); NAME is one of RENDERERS. update_baseline.py runs this after recording a section, so a new
baseline updates the docs in the same commit. Counts of tests are not kept in the docs at all.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BLOCK = re.compile(r"<!-- numbers: (?P<name>[a-z0-9_]+) -->(?P<body>.*?)<!-- /numbers -->", re.S)


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def load_baselines(directory: Path = HERE) -> dict[str, dict]:
    """kind -> sections of benchmarks/baseline_<kind>.json."""
    baselines = {}
    for path in sorted(directory.glob("baseline_*.json")):
        kind = path.stem.removeprefix("baseline_")
        baselines[kind] = json.loads(path.read_text(encoding="utf-8")).get("sections", {})
    return baselines


def _section(baselines: dict, kind: str, name: str) -> dict:
    try:
        return baselines[kind][name]
    except KeyError:
        raise KeyError(f"benchmarks/baseline_{kind}.json has no section {name!r}") from None


def _rows(section: dict) -> dict[str, dict]:
    return {row.get("case") or row.get("row"): row for row in section["rows"]}


def _f(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def _ms(value: float) -> str:
    """A time in ms to 3 significant digits (359.48 -> 359, 36.24 -> 36.2, 8.712 -> 8.71)."""
    return f"{value:.3g}"


def _nice(section: dict) -> str:
    nice = section.get("nice")
    return f", run at nice {nice} to go ahead of them" if nice else ""


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# -- make-env (docs/solver.md, README.md) ----------------------------------------------------


def make_env_machine(baselines: dict) -> str:
    s = _section(baselines, "cpu_2core", "make_env")
    return (
        f"{s['cpu_count']} CPUs, Python {s['python']}, Linux, py-rattler {s['py_rattler']}, load average "
        f"{s['load_average_1min']} at the start{_nice(s)}; recorded at {s['recorded_at_commit']} on {s['date'][:10]} "
        "(section `make_env` of `benchmarks/baseline_cpu_2core.json`)"
    )


def make_env_table(baselines: dict) -> str:
    s = _section(baselines, "cpu_2core", "make_env")
    rows = _rows(s)
    offline, solve = rows["offline"], rows["solve"]
    cases = [
        (
            '`make-env --gpu "RTX 4090" --driver 550.54.14 --offline` (whole command, Python start '
            f"included, {offline['runs']} runs)",
            offline,
        ),
        (
            f"same with a real solve against a local file:// channel of {s['records']:,} records "
            f"({solve['runs']} runs)",
            solve,
        ),
    ]
    return _table(
        ["case", "min", "median", "max", "target"],
        [
            [
                text,
                f"{r['min_s']:.3f} s",
                f"{r['median_s']:.3f} s",
                f"{r['max_s']:.3f} s",
                f"< {r['target_s']:g} s",
            ]
            for text, r in cases
        ],
    )


def make_env_medians(baselines: dict) -> str:
    s = _section(baselines, "cpu_2core", "make_env")
    rows = _rows(s)
    return (
        f"{rows['offline']['median_s']:.2f} s offline, {rows['solve']['median_s']:.2f} s for a solve against "
        f"{s['records']:,} records in a child interpreter, medians on {s['cpu_count']} shared cores"
    )


# -- CPU op timings (docs/ops.md) --------------------------------------------------------------


def cpu_ops_machine(baselines: dict) -> str:
    s = _section(baselines, "cpu_2core", "cpu_ops")
    return (
        f"Best of {s['reps']} runs after a warm-up, float32, uniform random points, torch's thread pool "
        f"with {s['torch_threads']} threads on the {s['cpu_count']}-core CI-class machine "
        f"({s['processor']}, shared with other jobs: load average {s['load_average_1min']} at the start{_nice(s)}), "
        f"torch {s['torch']}, recorded at {s['recorded_at_commit']} on {s['date'][:10]}: "
        "`benchmarks/bench_cpu_ops.py`, section `cpu_ops` of `benchmarks/baseline_cpu_2core.json`"
    )


def cpu_ops_table(baselines: dict) -> str:
    s = _section(baselines, "cpu_2core", "cpu_ops")
    return _table(["op", "shape", "ms"], [[r["op"], r["shape"], _ms(r["ms"])] for r in s["rows"]])


# -- CPU neighbour search (docs/performance-cpu.md) -------------------------------------------

_NEIGHBOR_RATIOS = (
    ("kNN", ("kNN N=1e5 M=1e4 k=16", "kNN B8 N16384 M4096 k=16", "kNN N=1e6 M=1e5 k=16")),
    (
        "ball query",
        (
            "ball query B8 N16384 M4096 r=0.05 k=32",
            "ball query N=1e5 M=1e4 r=0.02 k=16",
            "ball query N=1e6 M=1e5 r=0.02 k=16",
        ),
    ),
    ("three_nn", ("three_nn known 25000 unknown 1e5", "three_nn B8 known 4096 unknown 16384")),
)
_DEGENERATE = (
    "all points equal",
    "points on a line",
    "points on a plane",
    "one far outlier",
    "4 tight clusters",
)


def neighbors_meta(baselines: dict) -> str:
    s = _section(baselines, "cpu_2core", "neighbors")
    peers = ", ".join(f"{name} {version}" for name, version in s["peer_versions"].items())
    return f"recorded at {s['recorded_at_commit']}, load average {s['load_average_1min']} before the run; {peers}"


def neighbors_ratios(baselines: dict) -> str:
    rows = _rows(_section(baselines, "cpu_2core", "neighbors"))
    parts = [
        f"{label} {', '.join(_f(rows[case]['ratio_to_best_peer']) for case in cases)}"
        for label, cases in _NEIGHBOR_RATIOS
    ]
    fps = rows["FPS N=1e5 K=1e4"]["ratio_to_best_peer"]
    scaling = [rows[case]["thread_scaling"] for _, cases in _NEIGHBOR_RATIOS for case in cases]
    return (
        f"{'; '.join(parts)}; FPS {_f(fps)} of fpsample's fastest sampler. Thread scaling on 2 cores: "
        f"{_f(min(scaling), 1)}-{_f(max(scaling), 1)}x for the neighbour searches."
    )


def neighbors_degenerate(baselines: dict) -> str:
    rows = _rows(_section(baselines, "cpu_2core", "neighbors"))
    table = []
    for cloud in _DEGENERATE:
        knn, ball = rows[f"kNN k=16, {cloud}"], rows[f"ball r=0.02 k=16, {cloud}"]
        table.append(
            [
                cloud,
                f"{_f(knn['pointops_ms'], 1)} / {_f(knn['pointops_1thread_ms'], 1)}",
                f"{knn['peers_ms']['pykdtree']:.1f}",
                f"{_f(ball['pointops_ms'], 1)} / {_f(ball['pointops_1thread_ms'], 1)}",
            ]
        )
    return _table(["cloud", "kNN", "pykdtree", "ball query"], table)


# -- H200 against the peer libraries (README.md) -----------------------------------------------


def peer_ops_summary(baselines: dict) -> str:
    rows = _rows(_section(baselines, "h200", "peer_ops"))
    fps, ball = rows["fps"], rows["ball_query"]
    interp, interp_back = rows["three_interpolate"], rows["three_interpolate_backward"]
    group_back = rows["group_points_backward"]
    return (
        f"FPS B16 N4096 K1024 {fps['pointops_ms']:.2f} ms (pointnet2_ops {fps['peers_ms']['pointnet2_ops']:.2f}), "
        f"ball query {ball['pointops_ms']:.2f} ms (Pointcept {ball['peers_ms']['pointcept']:.2f}), "
        f"three_interpolate {interp['pointops_ms']:.3f} ms (Pointcept {interp['peers_ms']['pointcept']:.3f}), "
        f"group_points backward {group_back['pointops_ms']:.2f} ms (Pointcept "
        f"{group_back['peers_ms']['pointcept']:.2f}); not yet ahead: three_interpolate's deterministic "
        f"backward ({interp_back['pointops_ms']:.2f} ms against Pointcept's float atomics, "
        f"{interp_back['peers_ms']['pointcept']:.2f}) and gather_points (ratio "
        f"{rows['gather_points']['ratio']:.2f} to the fastest peer)"
    )


RENDERERS = {
    f.__name__: f
    for f in (
        make_env_machine,
        make_env_table,
        make_env_medians,
        cpu_ops_machine,
        cpu_ops_table,
        neighbors_meta,
        neighbors_ratios,
        neighbors_degenerate,
        peer_ops_summary,
    )
}


def render_text(text: str, baselines: dict, where: str = "") -> str:
    """`text` with every block rendered from `baselines`; an unknown block name is an error."""

    def block(match: re.Match) -> str:
        name = match.group("name")
        if name not in RENDERERS:
            raise KeyError(f"{where}: unknown numbers block {name!r} (known: {', '.join(RENDERERS)})")
        body = RENDERERS[name](baselines)
        sep = "\n\n" if "\n" in body else ""
        return f"<!-- numbers: {name} -->{sep}{body}{sep}<!-- /numbers -->"

    return BLOCK.sub(block, text)


def drifted(root: Path = ROOT, baselines: dict | None = None) -> list[str]:
    """'file: block' for every block whose text differs from its rendering."""
    baselines = load_baselines(root / "benchmarks") if baselines is None else baselines
    stale = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            if render_text(match.group(0), baselines, path.name) != match.group(0):
                stale.append(f"{path.relative_to(root)}: {match.group('name')}")
    return stale


def rewrite(root: Path = ROOT) -> list[str]:
    """Renders every block in place; returns the files changed."""
    baselines = load_baselines(root / "benchmarks")
    changed = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        new = render_text(text, baselines, path.name)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(root)))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report blocks that differ (exit 1)")
    args = parser.parse_args(argv)
    if args.check:
        stale = drifted()
        for entry in stale:
            print(f"out of date: {entry} (run python benchmarks/doc_numbers.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in rewrite():
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
