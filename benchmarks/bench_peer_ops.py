"""The op table of issue 19 in one run: each op and shape through pointops' public API at its
default settings (value checks on), against the peers built on the same machine: pointnet2_ops
(Pointnet2_PyTorch's library), Pointcept's pointops and plain PyTorch.

    # on the GPU host, after benchmarks/peers/build_peers.sh
    python benchmarks/bench_peer_ops.py --pointnet2-ops .peers/build/pointnet2_ops \
        --pointcept-lib .peers/build/pointcept_pointops --json out/bench_peer_ops.json
    python benchmarks/update_baseline.py h200 peer_ops out/bench_peer_ops.json

Both peers import under names that collide with pointops or with each other's helpers, so each
runs in a child process (this script with --side) on the same seeded inputs; plain PyTorch runs
in the parent. The sides take turns for two passes (pointops, peers, pointops, peers), so a
drift of the GPU clock falls on all of them; a side's time is the lower of its two pass medians.

Times: the median of single calls with CUDA events around each, the GPU idle before (the host's
work to enqueue the call included), and the mean per call of calls queued back to back, as in
a training step. Backward rows time the backward alone (torch.autograd.grad on a graph built
once). Pointcept's library works on packed (N, C) rows: it gets the same problem packed (the
clouds concatenated, indices made global), the same bytes to move. Its interpolation and
grouping rows call the kernels its autograd Functions call, allocations included; its
interpolation backward runs them from an autograd.Function as Pointcept's Interpolation does
(without the kNN in its forward), so that every side's backward row includes the autograd
engine's host time (before 2026-12-06 that row called the kernel directly). Forward
outputs are compared with pointops' where the semantics agree (the check column).
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import import_pointcept_library, median_call_ms, pipelined_call_ms, write_json  # noqa: E402

# row: shape, in the notation of the issue
SHAPES = {
    "fps": "B16 N4096 K1024",
    "ball_query": "B8 N16384 M4096 r0.05 k32",
    "three_nn": "B8 known 4096 unknown 16384",
    "three_interpolate": "B8 C128 m4096 n16384",
    "three_interpolate_backward": "B8 C128 m4096 n16384",
    "group_points": "B8 C64 N16384 M4096 K32",
    "group_points_backward": "B8 C64 N16384 M4096 K32",
    "gather_points": "B8 C128 N16384 M4096",
    "gather_points_backward": "B8 C128 N16384 M4096",
}
SIDES = ("pointops", "pointnet2_ops", "pointcept", "torch")
EXACT_ROWS = ("fps", "ball_query", "gather_points", "group_points")
# forward rows whose outputs must agree with pointops' exactly (same semantics, same inputs)
EXACT = {
    "pointnet2_ops": ("fps", "ball_query", "gather_points", "group_points"),
    "pointcept": ("group_points",),
    "torch": ("gather_points", "group_points"),
}


def inputs(device: str) -> dict:
    """Seeded inputs, the same in every process: points uniform in [1, 2]^3 (as bench_gpu.py)."""
    g = torch.Generator().manual_seed(0)

    def pts(*shape):
        return (torch.rand(*shape, 3, generator=g) + 1).to(device)

    def idx(high, *shape):
        return torch.randint(0, high, shape, generator=g).to(device)

    bq_xyz = pts(8, 16384)
    w = torch.rand(8, 16384, 3, generator=g) + 0.1
    d = {
        "fps_xyz": pts(16, 4096),
        "bq_xyz": bq_xyz,
        "bq_query": bq_xyz[:, :4096].contiguous(),
        "nn_known": pts(8, 4096),
        "nn_unknown": pts(8, 16384),
        "interp_feat": torch.rand(8, 128, 4096, generator=g).to(device),
        "interp_idx": idx(4096, 8, 16384, 3),
        "interp_weight": (w / w.sum(-1, keepdim=True)).to(device),
        "group_feat": torch.rand(8, 64, 16384, generator=g).to(device),
        "group_idx": idx(16384, 8, 4096, 32),
        "gather_feat": torch.rand(8, 128, 16384, generator=g).to(device),
        "gather_idx": idx(16384, 8, 4096),
    }
    gg = torch.Generator().manual_seed(1)
    d["interp_grad"] = torch.rand(8, 128, 16384, generator=gg).to(device)
    d["group_grad"] = torch.rand(8, 64, 4096, 32, generator=gg).to(device)
    d["gather_grad"] = torch.rand(8, 128, 4096, generator=gg).to(device)
    return d


def _backward(forward, leaf, grad):
    """A callable running only the backward of forward(leaf) against grad."""
    leaf = leaf.detach().clone().requires_grad_()
    out = forward(leaf)
    return lambda: torch.autograd.grad(out, leaf, grad, retain_graph=True)


def gather_family_calls(d: dict, idx: dict, interpolate, group, gather) -> dict:
    """The forward and backward rows of three_interpolate, group_points and gather_points from
    one side's three functions (feat [B, C, N] first); idx holds that side's index tensors."""
    return {
        "three_interpolate": lambda: interpolate(d["interp_feat"], idx["interp_idx"], d["interp_weight"]),
        "three_interpolate_backward": _backward(
            lambda f: interpolate(f, idx["interp_idx"], d["interp_weight"]),
            d["interp_feat"],
            d["interp_grad"],
        ),
        "group_points": lambda: group(d["group_feat"], idx["group_idx"]),
        "group_points_backward": _backward(
            lambda f: group(f, idx["group_idx"]), d["group_feat"], d["group_grad"]
        ),
        "gather_points": lambda: gather(d["gather_feat"], idx["gather_idx"]),
        "gather_points_backward": _backward(
            lambda f: gather(f, idx["gather_idx"]), d["gather_feat"], d["gather_grad"]
        ),
    }


def pointops_calls(d: dict) -> dict:
    import pointops

    return {
        "fps": lambda: pointops.furthest_point_sample(d["fps_xyz"], 1024),
        "ball_query": lambda: pointops.ball_query(d["bq_xyz"], d["bq_query"], 0.05, 32)[0],
        "three_nn": lambda: pointops.three_nn(d["nn_unknown"], d["nn_known"])[1],
        **gather_family_calls(
            d, d, pointops.three_interpolate, pointops.group_points, pointops.gather_points
        ),
    }


def pointnet2_ops_calls(d: dict) -> dict:
    from pointnet2_ops import pointnet2_utils as pn2

    i32 = {k: d[k].int().contiguous() for k in ("interp_idx", "group_idx", "gather_idx")}
    return {
        "fps": lambda: pn2.furthest_point_sample(d["fps_xyz"], 1024),
        "ball_query": lambda: pn2.ball_query(0.05, 32, d["bq_xyz"], d["bq_query"]),
        "three_nn": lambda: pn2.three_nn(d["nn_unknown"], d["nn_known"])[1],
        **gather_family_calls(d, i32, pn2.three_interpolate, pn2.grouping_operation, pn2.gather_operation),
    }


def _packed_index(idx, points_per_cloud: int):
    """[B, M, K] per-cloud indices -> [B*M, K] global int32 rows (Pointcept's layout)."""
    starts = torch.arange(idx.shape[0], device=idx.device).view(-1, 1, 1) * points_per_cloud
    return (idx + starts).reshape(-1, idx.shape[-1]).int().contiguous()


def _offsets(B: int, n: int, device) -> torch.Tensor:
    return (torch.arange(1, B + 1, device=device) * n).int()


def pointcept_calls(d: dict) -> dict:
    import pointops  # Pointcept's library: side_calls imported it (import_pointcept_library)
    from pointops._C import interpolation_backward_cuda, interpolation_forward_cuda

    dev = d["fps_xyz"].device
    fps_xyz = d["fps_xyz"].reshape(-1, 3).contiguous()
    bq_xyz, bq_query = d["bq_xyz"].reshape(-1, 3).contiguous(), d["bq_query"].reshape(-1, 3).contiguous()
    known, unknown = d["nn_known"].reshape(-1, 3).contiguous(), d["nn_unknown"].reshape(-1, 3).contiguous()
    o4096, o1024, o16384 = _offsets(16, 4096, dev), _offsets(16, 1024, dev), _offsets(8, 16384, dev)
    k4096 = _offsets(8, 4096, dev)
    # features as packed rows [B*N, C]
    interp_rows = d["interp_feat"].transpose(1, 2).reshape(-1, 128).contiguous()
    interp_idx = _packed_index(d["interp_idx"], 4096)
    interp_w = d["interp_weight"].reshape(-1, 3).contiguous()
    interp_grad = d["interp_grad"].transpose(1, 2).reshape(-1, 128).contiguous()
    group_rows = d["group_feat"].transpose(1, 2).reshape(-1, 64).contiguous()
    group_idx = _packed_index(d["group_idx"], 16384)
    group_grad = d["group_grad"].permute(0, 2, 3, 1).reshape(-1, 32, 64).contiguous()
    n, m = interp_idx.shape[0], interp_rows.shape[0]

    def interpolate():  # Interpolation.forward after its kNN
        out = torch.zeros((n, 128), dtype=torch.float, device=dev)
        interpolation_forward_cuda(n, 128, 3, interp_rows, interp_idx, interp_w, out)
        return out

    class Interpolation(torch.autograd.Function):  # Pointcept's, after its kNN
        @staticmethod
        def forward(ctx, rows):
            out = torch.zeros((n, 128), dtype=torch.float, device=dev)
            interpolation_forward_cuda(n, 128, 3, rows, interp_idx, interp_w, out)
            return out

        @staticmethod
        def backward(ctx, grad):
            grad_in = torch.zeros((m, 128), dtype=torch.float, device=dev)
            interpolation_backward_cuda(n, 128, 3, grad.contiguous(), interp_idx, interp_w, grad_in)
            return grad_in

    def grouped():  # [B*M, K, C]
        return pointops.grouping2(group_rows, group_idx)

    calls = {
        "fps": lambda: pointops.farthest_point_sampling(fps_xyz, o4096, o1024),
        "ball_query": lambda: pointops.ball_query(32, 0.05, 0.0, bq_xyz, o16384, bq_query, k4096)[0],
        "three_nn": lambda: pointops.knn_query(3, known, k4096, unknown, o16384)[0],
        "three_interpolate": interpolate,
        "three_interpolate_backward": _backward(Interpolation.apply, interp_rows, interp_grad),
        "group_points": grouped,
        "group_points_backward": _backward(
            lambda f: pointops.grouping2(f, group_idx), group_rows, group_grad
        ),
    }
    # the output to compare, in pointops' [B, C, M, K] (not timed: the name starts with "_")
    calls["_group_points_output"] = lambda: grouped().view(8, 4096, 32, 64).permute(0, 3, 1, 2)
    return calls


def torch_calls(d: dict) -> dict:
    def gather(f, idx):
        return f.gather(2, idx.unsqueeze(1).expand(-1, f.shape[1], -1))

    def group(f, idx):
        B, M, K = idx.shape
        return gather(f, idx.reshape(B, M * K)).view(B, f.shape[1], M, K)

    def interpolate(f, idx, w):
        B, n, _ = idx.shape
        picked = gather(f, idx.reshape(B, n * 3)).view(B, f.shape[1], n, 3)
        return (picked * w.unsqueeze(1)).sum(-1)

    return gather_family_calls(d, d, interpolate, group, gather)


def measure(calls: dict, reps: int) -> dict:
    times = {}
    for row, fn in calls.items():
        if row.startswith("_"):
            continue
        times[row] = {
            "one_call_ms": median_call_ms(fn, "cuda", reps, warmup=3),
            "b2b_ms": pipelined_call_ms(fn, calls=30 if row == "fps" else 100),
        }
    return times


def outputs(calls: dict, rows=EXACT_ROWS) -> dict:
    """The forward outputs of `rows` on the CPU, from "_<row>_output" where a side's own layout
    differs from pointops', else from the timed call."""
    out = {}
    for row in rows:
        fn = calls.get(f"_{row}_output", calls.get(row))
        if fn is not None:
            out[row] = fn().detach().long().cpu() if row in ("fps", "ball_query") else fn().detach().cpu()
    return out


def side_calls(side: str, d: dict, lib: str | None) -> dict:
    if side == "pointcept":
        import_pointcept_library(lib)
        return pointcept_calls(d)
    if lib:
        sys.path.insert(0, os.path.abspath(lib))
    return {"pointops": pointops_calls, "pointnet2_ops": pointnet2_ops_calls, "torch": torch_calls}[side](d)


def child(args) -> None:
    calls = side_calls(args.side, inputs("cuda"), args.lib)
    result = {"times": measure(calls, args.reps), "outputs": outputs(calls, EXACT.get(args.side, ()))}
    torch.save(result, args.out)


def run_child(side: str, lib: str, reps: int, tmp: str) -> dict | None:
    path = os.path.join(tmp, f"{side}.pt")
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--side",
        side,
        "--lib",
        lib,
        "--reps",
        str(reps),
        "--out",
        path,
    ]
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        print(f"bench_peer_ops: the {side} side failed (exit {proc.returncode}); its column is left out")
        return None
    return torch.load(path)


def check(side: str, theirs: dict, ours: dict) -> dict:
    notes = {}
    for row in EXACT.get(side, ()):
        if row in theirs and row in ours:
            a, b = ours[row], theirs[row].to(ours[row].dtype)
            same = a.shape == b.shape and torch.equal(a, b)
            notes[row] = f"{side} identical" if same else f"{side} DIFFERS"
    return notes


def table(passes: dict, checks: dict) -> list[dict]:
    """One row per op: each side's lower pass median, the fastest peer and pointops' ratio to it."""

    def best(side, row, key):
        vals = [t[row][key] for t in passes[side] if row in t]
        return min(vals) if vals else None

    rows = []
    for row, shape in SHAPES.items():
        entry = {"row": row, "shape": shape}
        for key, label in (("one_call_ms", ""), ("b2b_ms", "_b2b")):
            ours = best("pointops", row, key)
            entry[f"pointops{label}_ms"] = ours
            peer_times = {
                s: best(s, row, key) for s in passes if s != "pointops" and best(s, row, key) is not None
            }
            entry[f"peers{label}_ms"] = peer_times
            if peer_times:
                fastest = min(peer_times, key=peer_times.get)
                entry[f"ratio{label}"] = ours / peer_times[fastest]
                entry[f"fastest_peer{label}"] = fastest
        entry["passes_ms"] = {s: [t[row]["one_call_ms"] for t in passes[s] if row in t] for s in passes}
        ratios = [entry[k] for k in ("ratio", "ratio_b2b") if k in entry]
        entry["status"] = ("PASS" if max(ratios) <= 1.0 else "MISS") if ratios else "-"
        entry["note"] = ", ".join(dict.fromkeys(checks.get(row, [])))
        rows.append(entry)
    return rows


def print_table(rows: list[dict]) -> None:
    print(
        f"{'row':28} {'shape':30} {'pointops':>9} {'fastest peer':>22} {'ratio':>6} {'b2b ratio':>9}  check"
    )
    for r in rows:
        peer = r.get("fastest_peer")
        peer_text = f"{peer} {r['peers_ms'][peer]:.4f}" if peer else "-"
        print(
            f"{r['row']:28} {r['shape']:30} {r['pointops_ms']:9.4f} {peer_text:>22} "
            f"{r.get('ratio', float('nan')):6.2f} {r.get('ratio_b2b', float('nan')):9.2f}  {r['note']}"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--pointnet2-ops", default=".peers/build/pointnet2_ops", help="pip --target dir of pointnet2_ops"
    )
    p.add_argument("--pointcept-lib", default=".peers/build/pointcept_pointops")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--lib", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_peer_ops: needs CUDA (the peers are CUDA-only); nothing measured")
        return 0
    if args.side:
        child(args)
        return 0
    peers = {"pointnet2_ops": args.pointnet2_ops, "pointcept": args.pointcept_lib}
    for side, lib in list(peers.items()):
        if not os.path.isdir(lib):
            print(f"bench_peer_ops: no {lib}; the {side} column is left out (build_peers.sh builds it)")
            del peers[side]
    d = inputs("cuda")
    ours_calls, torch_fns = side_calls("pointops", d, None), torch_calls(d)
    ours_out = outputs(ours_calls)
    passes = {side: [] for side in ("pointops", "torch", *peers)}
    checks: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(2):
            passes["pointops"].append(measure(ours_calls, args.reps))
            passes["torch"].append(measure(torch_fns, args.reps))
            for side, lib in peers.items():
                res = run_child(side, lib, args.reps, tmp)
                if res is not None:
                    passes[side].append(res["times"])
                    for row, note in check(side, res["outputs"], ours_out).items():
                        checks.setdefault(row, []).append(note)
    for row, note in check("torch", outputs(torch_fns, EXACT["torch"]), ours_out).items():
        checks.setdefault(row, []).append(note)

    rows = table(passes, checks)
    print_table(rows)
    if args.json:
        import pointops

        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "pointops_value_checks": pointops.value_checks_enabled(),
            "peers": sorted(peers),
            "reps": args.reps,
        }
        write_json(args.json, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
