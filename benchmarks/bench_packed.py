"""Packed-batch speed rows of issue 18: pointops' Pointcept API against Pointcept's own library,
in one run. Both are imported as `pointops`, so Pointcept's side runs in a child process (this
script with --side pointcept) on the same seeded data; the parent compares results and times.

    python benchmarks/bench_packed.py --pointcept-lib .peers/build/pointcept_pointops \
        --json out/bench_packed.json
    python benchmarks/update_baseline.py h200 packed out/bench_packed.json

The second command records the run as section packed of benchmarks/baseline_h200.json (out/ is
not tracked; older runs live in git history).

Rows (8 scenes of 40k-120k points, CUDA): kNN k=16 with every point a query; FPS to a quarter
of each scene; ball query r=0.1 k=32 (Pointcept's semantics); grouping C=64 k=16 forward and
backward (grouping: Pointcept's torch path; grouping2: its kernel), both libraries gathering
pointops' kNN neighbours (the two kNNs may break near-equal distances differently, which would
change the sums compared); interpolation k=3 forward and backward (interpolation and
interpolation2). Times are medians of CUDA-event timings after
warm-up. Without the Pointcept library the Pointcept column is skipped with a message.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import import_pointcept_library, median_call_ms, write_json  # noqa: E402

SIZES = [40000, 120000, 65000, 90000, 52000, 110000, 78000, 100000]


def scenes(device):
    g = torch.Generator().manual_seed(0)
    coords = []
    for n in SIZES:
        extent = torch.tensor([6.0, 6.0, 3.0]) * (n / 80000) ** (1 / 3)  # ~ constant density
        coords.append(torch.rand(n, 3, generator=g) * extent)
    xyz = torch.cat(coords).to(device)
    offset = torch.tensor(SIZES).cumsum(0).int().to(device)
    new_offset = (torch.tensor(SIZES) // 4).cumsum(0).int().to(device)
    feat = torch.rand(xyz.shape[0], 64, generator=g).to(device)
    return xyz, offset, new_offset, feat


def timed(fn, reps=20):
    return median_call_ms(fn, "cuda", reps, warmup=3)


def grouping_steps(pointops, idx, feat, xyz, grad):
    """The grouping rows' calls, forward and backward: (grouping, grouping2), each clearing
    feat.grad first (also profiled by profile_kernels.py --packed)."""

    def grouping():
        feat.grad = None
        pointops.grouping(idx, feat, xyz).backward(grad)

    def grouping2():
        feat.grad = None
        pointops.grouping2(feat, idx).backward(grad)

    return grouping, grouping2


def measure(pointops, device, group_idx=None) -> tuple[dict, dict]:
    """Times of every row with the `pointops` module given, and the outputs to compare.
    group_idx: the neighbours the grouping rows gather (default: this library's kNN); the
    Pointcept side is given pointops' own, so that the gradients compare the same sums."""
    xyz, offset, new_offset, feat = scenes(device)
    times, outputs = {}, {}
    idx16, _ = pointops.knn_query(16, xyz, offset)
    outputs["knn_k16"] = idx16.cpu()
    if group_idx is not None:
        idx16 = group_idx.to(device)
    times["knn_k16"] = timed(lambda: pointops.knn_query(16, xyz, offset))
    outputs["fps_quarter"] = pointops.farthest_point_sampling(xyz, offset, new_offset).cpu()
    times["fps_quarter"] = timed(lambda: pointops.farthest_point_sampling(xyz, offset, new_offset), reps=5)
    outputs["ball_r0.1_k32"] = pointops.ball_query(32, 0.1, 0.0, xyz, offset)[0].cpu()
    times["ball_r0.1_k32"] = timed(lambda: pointops.ball_query(32, 0.1, 0.0, xyz, offset))
    f = feat.clone().requires_grad_()
    # seeded on the device: both processes (pointops, Pointcept) get the same upstream gradients
    g = torch.Generator(device=device).manual_seed(1)
    grad = torch.rand(idx16.shape[0], 16, 64, device=device, generator=g)

    grouping, grouping2 = grouping_steps(pointops, idx16, f, xyz, grad)
    times["grouping_c64_k16_fwd_bwd"] = timed(grouping)
    times["grouping2_c64_k16_fwd_bwd"] = timed(grouping2)
    grouping2()
    outputs["grouping2_grad"] = f.grad.cpu()
    # the coarse level: the first quarter of each scene's points (uniform random already), the
    # same in both processes; FPS picks can differ (99.9% identical), which would compare
    # interpolations of different clouds
    starts = torch.tensor([0, *SIZES[:-1]]).cumsum(0)
    coarse_rows = torch.cat(
        [torch.arange(s, s + n // 4) for s, n in zip(starts.tolist(), SIZES, strict=True)]
    )
    coarse = xyz[coarse_rows.to(device)].contiguous()
    g2 = torch.rand(xyz.shape[0], 64, device=device, generator=g)
    fc = feat[: coarse.shape[0]].clone().requires_grad_()

    def interpolation():
        fc.grad = None
        pointops.interpolation(coarse, xyz, fc, new_offset, offset).backward(g2)

    def interpolation2():
        fc.grad = None
        pointops.interpolation2(coarse, xyz, fc, new_offset, offset).backward(g2)

    times["interpolation_k3_fwd_bwd"] = timed(interpolation)
    times["interpolation2_k3_fwd_bwd"] = timed(interpolation2)
    outputs["interpolation"] = pointops.interpolation(coarse, xyz, fc, new_offset, offset).detach().cpu()
    return times, outputs


def child(lib: str, out: str, group_idx: str) -> None:
    pointops = import_pointcept_library(lib)
    times, outputs = measure(pointops, "cuda", torch.load(group_idx))
    torch.save({"times": times, "outputs": outputs, "file": pointops.__file__}, out)


def knn_differences(xyz, a, b) -> str:
    """Why kNN indices differ: for each differing slot, the distances of both neighbours to the
    query in float64 (near-equal distances make a tie that rounding breaks either way)."""
    rows, slots = (a != b).nonzero(as_tuple=True)
    if rows.numel() == 0:
        return ""
    pts = xyz.double().cpu()
    da = (pts[a[rows, slots].long()] - pts[rows]).norm(dim=1)
    db = (pts[b[rows, slots].long()] - pts[rows]).norm(dim=1)
    same_sets = all(torch.equal(a[r].sort().values, b[r].sort().values) for r in rows.unique().tolist())
    gap = float((da - db).abs().max())
    return f"; differing slots: max float64 distance gap {gap:.1e}, same neighbour sets: {same_sets}"


def fps_differences(xyz, new_offset, a, b) -> str:
    """Why FPS picks differ: per scene the first differing pick and, in float64, the two
    candidates' distances to the picks before it (a near tie there changes every later pick)."""
    pts = xyz.double().cpu()
    new_ends = new_offset.long().cpu().tolist()
    notes = []
    for scene, (lo, hi) in enumerate(zip([0, *new_ends[:-1]], new_ends, strict=True)):
        diff = (a[lo:hi] != b[lo:hi]).nonzero()
        if diff.numel() == 0:
            continue
        j = int(diff[0])
        before = pts[a[lo : lo + j].long()]
        da = float((pts[int(a[lo + j])] - before).norm(dim=1).min())
        db = float((pts[int(b[lo + j])] - before).norm(dim=1).min())
        notes.append(
            f"scene {scene}: pick {j} of {hi - lo} first ({hi - lo - j} picks after it), "
            f"candidates' distances {da:.9g} / {db:.9g} (gap {abs(da - db):.1e})"
        )
    return "; " + "; ".join(notes) if notes else ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pointcept-lib", default=".peers/build/pointcept_pointops")
    p.add_argument("--json")
    p.add_argument("--side", choices=["pointcept"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--group-idx", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_packed: needs CUDA (the Pointcept library is CUDA-only); nothing measured")
        return 0
    if args.side == "pointcept":
        child(args.pointcept_lib, args.out, args.group_idx)
        return 0
    import pointops

    ours, our_out = measure(pointops, "cuda")
    theirs, their_out = None, None
    if os.path.isdir(args.pointcept_lib):
        with tempfile.TemporaryDirectory() as tmp:
            path, group_idx = os.path.join(tmp, "pointcept.pt"), os.path.join(tmp, "group_idx.pt")
            torch.save(our_out["knn_k16"], group_idx)
            subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--side",
                    "pointcept",
                    "--pointcept-lib",
                    args.pointcept_lib,
                    "--out",
                    path,
                    "--group-idx",
                    group_idx,
                ],
                check=True,
            )
            got = torch.load(path)
        theirs, their_out = got["times"], got["outputs"]
    else:
        print(f"Pointcept's library not found at {args.pointcept_lib}: Pointcept column skipped")
    rows = []
    if their_out is not None:  # the scenes again, on the host, to explain differing indices
        host_xyz, _, host_new_offset, _ = scenes("cpu")
    print(f"{'row':32s} {'pointops ms':>12s} {'Pointcept ms':>13s} {'speedup':>8s}  check")
    for name, t in ours.items():
        other = theirs.get(name) if theirs else None
        check = ""
        key = {
            "knn_k16": "knn_k16",
            "fps_quarter": "fps_quarter",
            "ball_r0.1_k32": "ball_r0.1_k32",
            "grouping2_c64_k16_fwd_bwd": "grouping2_grad",
            "interpolation_k3_fwd_bwd": "interpolation",
        }.get(name)
        if their_out is not None and key:
            a, b = our_out[key], their_out[key]
            if a.is_floating_point():
                check = f"max|diff| {float((a.double() - b.double()).abs().max()):.2e}"
            else:
                differ = int((a != b).sum())
                check = (
                    f"identical {float((a == b).double().mean()) * 100:.3f}% ({differ} of {a.numel()} differ)"
                )
                if name == "knn_k16":
                    check += knn_differences(host_xyz, a, b)
                elif name == "fps_quarter":
                    check += fps_differences(host_xyz, host_new_offset, a, b)
        speed = other / t if other else None
        rows.append({"row": name, "pointops_ms": t, "pointcept_ms": other, "speedup": speed, "check": check})
        print(
            f"{name:32s} {t:12.3f} {other if other else float('nan'):13.3f} "
            f"{speed if speed else float('nan'):8.2f}  {check}"
        )
    if args.json:
        write_json(args.json, {"device": torch.cuda.get_device_name(), "scenes": SIZES, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
