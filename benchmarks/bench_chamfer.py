"""pointops.chamfer_distance (forward + backward) against the plain-PyTorch cdist formulation
and pytorch3d's chamfer_distance (when importable, e.g. built by benchmarks/peers/build_peers.sh
into .peers/build/pytorch3d), at B32 N2048 and B8 N16384 (issue 20).

    python benchmarks/bench_chamfer.py --pytorch3d-lib .peers/build/pytorch3d \
        --json out/bench_chamfer.json
    python benchmarks/update_baseline.py h200 chamfer out/bench_chamfer.json

The second command records the run as section chamfer of benchmarks/baseline_h200.json (out/ is
not tracked; older runs live in git history).

The cdist formulation: d = cdist(x, y)^2, loss = d.min(2).mean + d.min(1).mean (squared L2,
pytorch3d's default). Values are checked against it. Without pytorch3d its column is skipped.
Times: medians of CUDA-event timings of single calls (bench_common.median_call_ms; the
baseline's chamfer section, 7e604ff, was timed with wall clock around a sync per call).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import median_call_ms, write_json  # noqa: E402


def cdist_chamfer(x, y):
    d = torch.cdist(x, y) ** 2
    return (d.min(2).values.mean(1) + d.min(1).values.mean(1)).mean()


def run(x, y, fn):
    def step():
        x.grad = y.grad = None
        fn(x, y).backward()

    return step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pytorch3d-lib", default=".peers/build/pytorch3d")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--shapes", nargs="+", default=["32x2048", "8x16384"])
    p.add_argument("--json")
    args = p.parse_args()
    import pointops

    p3d = None
    if os.path.isdir(args.pytorch3d_lib):
        sys.path.insert(0, os.path.abspath(args.pytorch3d_lib))
    try:
        from pytorch3d.loss import chamfer_distance as p3d
    except ImportError as e:
        print(f"pytorch3d not importable ({e}): its column is skipped")
    device, rows = args.device, []
    print(
        f"{'shape':9s} {'pointops ms':>12s} {'cdist ms':>9s} {'x cdist':>8s} {'pytorch3d ms':>13s} "
        f"{'x p3d':>6s}  |loss diff|"
    )
    for shape in args.shapes:
        B, N = (int(v) for v in shape.split("x"))
        g = torch.Generator().manual_seed(0)
        x = torch.rand(B, N, 3, generator=g).to(device).requires_grad_()
        y = torch.rand(B, N, 3, generator=g).to(device).requires_grad_()

        ours = run(x, y, lambda a, b: pointops.chamfer_distance(a, b)[0])
        t_ours = median_call_ms(ours, device)
        t_cdist = median_call_ms(run(x, y, cdist_chamfer), device, reps=3)
        diff = float((pointops.chamfer_distance(x, y)[0] - cdist_chamfer(x, y)).abs())
        t_p3d = median_call_ms(run(x, y, lambda a, b: p3d(a, b)[0]), device) if p3d else None
        rows.append(
            {
                "shape": shape,
                "pointops_ms": t_ours,
                "cdist_ms": t_cdist,
                "speedup_vs_cdist": t_cdist / t_ours,
                "pytorch3d_ms": t_p3d,
                "speedup_vs_pytorch3d": t_p3d / t_ours if t_p3d else None,
                "abs_loss_diff_vs_cdist": diff,
            }
        )
        print(
            f"{shape:9s} {t_ours:12.3f} {t_cdist:9.3f} {t_cdist / t_ours:8.2f} "
            f"{t_p3d if t_p3d else float('nan'):13.3f} {t_p3d / t_ours if t_p3d else float('nan'):6.2f}  {diff:.2e}"
        )
    if args.json:
        write_json(
            args.json, {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "rows": rows}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
