"""Runs the two cases of benchmarks/bench_make_env.py and writes them as JSON, so that the numbers
docs/solver.md and README.md quote come from a baseline file (benchmarks/doc_numbers.py).

    python benchmarks/record_make_env.py --json out/make_env.json [--repeat 10] [--records 20000]
    python benchmarks/update_baseline.py cpu_2core make_env out/make_env.json

The cases and their timing are bench_make_env.py's (whole command, Python start included);
this script only records them.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import write_json
from bench_make_env import time_command

REPO = Path(__file__).resolve().parents[1]
TARGET = ["make-env", "--gpu", "RTX 4090", "--driver", "550.54.14", "--platform", "linux-64"]


def _row(case: str, times: list[float], target_s: float) -> dict:
    return {
        "case": case,
        "runs": len(times),
        "min_s": round(min(times), 3),
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "target_s": target_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of the offline case (the solve: half)")
    parser.add_argument("--records", type=int, default=20000, help="records in the local channel")
    parser.add_argument("--json", required=True, help="write the results to this file")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows = [_row("offline", time_command([*TARGET, "--offline"], args.repeat, env), 1.0)]

    sys.path.insert(0, str(REPO / "tests" / "solver"))
    import local_channels

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "channel"
        local_channels.write_large_repodata(root, args.records)
        solve = time_command([*TARGET, "--channel", str(root), "--json"], max(3, args.repeat // 2), env)
    rows.append(_row("solve", solve, 3.0))
    import rattler

    write_json(
        args.json,
        {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "py_rattler": getattr(rattler, "__version__", "unknown"),
            "load_average_1min": round(load_before, 2) if load_before is not None else None,
            "nice": os.nice(0) if hasattr(os, "nice") else None,  # < 0: run ahead of other jobs
            "records": args.records,
            "rows": rows,
        },
    )
    for row in rows:
        print(f"{row['case']}: median {row['median_s']} s over {row['runs']} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
