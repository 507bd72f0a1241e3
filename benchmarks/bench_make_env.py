"""Benchmarks for `solver make-env` (wall time of the whole command, Python start included).

1. A flag-given target with --offline (target: under 1 s).
2. A real py-rattler solve against a local file:// channel of 20,000 records (target: under 3 s).

Run: .venv/bin/python benchmarks/bench_make_env.py [--repeat N] [--records N]
Prints min / median / max per case; the numbers are recorded in docs/solver.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "solver"))


def _solver_command() -> list[str]:
    script = Path(sys.executable).with_name("solver")
    return [str(script)] if script.exists() else [sys.executable, "-m", "solver"]


def time_command(args: list[str], repeat: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(_solver_command() + args, capture_output=True, text=True, env=env, cwd=REPO)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"benchmark command failed ({done.returncode}): {done.stderr.strip()}")
    return times


def report(name: str, times: list[float], limit: float) -> bool:
    median = statistics.median(times)
    ok = median < limit
    print(
        f"{name}: min {min(times):.3f} s, median {median:.3f} s, max {max(times):.3f} s "
        f"over {len(times)} runs (target < {limit:g} s: {'met' if ok else 'MISSED'})"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA_OVERRIDE_")}
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {sys.platform}")

    offline = time_command(
        ["make-env", "--gpu", "RTX 4090", "--driver", "550.54.14", "--platform", "linux-64", "--offline"],
        args.repeat,
        env,
    )
    ok = report("make-env --offline, flag-given target", offline, 1.0)

    import local_channels as channel_factory

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "channel"
        start = time.perf_counter()
        channel_factory.write_large_repodata(root, args.records)
        count = sum(1 for _ in root.glob("*/repodata.json"))
        print(
            f"wrote a {args.records}-record channel ({count} subdirs) in {time.perf_counter() - start:.2f} s"
        )
        solve = time_command(
            [
                "make-env",
                "--gpu",
                "RTX 4090",
                "--driver",
                "550.54.14",
                "--platform",
                "linux-64",
                "--channel",
                str(root),
                "--json",
            ],
            max(3, args.repeat // 2),
            env,
        )
        ok &= report(f"make-env with a solve against {args.records} records (file://)", solve, 3.0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
