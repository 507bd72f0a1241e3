"""GPU benchmark of pointops against the targets of issue 5 (and a few CPU cases).

    python benchmarks/bench_gpu.py --json out/bench_gpu.json [--cpu] [--quick]
    python benchmarks/update_baseline.py h200 ops out/bench_gpu.json

The second command records a full run (not --quick) on an idle GPU as section ops of
benchmarks/baseline_h200.json; method and targets: docs/performance.md.

Every shape of the issue's table runs through the registered ops (torch.ops.pointops.*, the
same kernels the Python API calls; the binding's asynchronous value checks are on, the default)
on float32 points uniform in [1, 2]^3 with queries = the first M points of each cloud. Times are
the median of CUDA-event timings after warm-up, one call at a time with the GPU idle before it
(so the host's enqueueing counts), and each row keeps the faster of two passes over the rows
(--passes) against the stricter target; rows ending in _b2b time calls queued back to back, as in a
training step, against the baseline timed the same way, and gather_points_api times the public
pointops.gather_points. Each row prints the time, the share of a floor
(bytes that must move over the measured device-to-device copy rate; or FLOP over the fp32 rate
for brute-force searches), the peer's best time, the target and PASS/MISS. Rows ending in _dtype
compare float16/bfloat16 with float32 back to back. The JSON file holds
the rows and the machine: date, GPU, driver, torch, CUDA and the pointops build.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import subprocess
import sys
import time

from bench_common import write_json

# A single-call row times at least `reps` calls, and short calls until about MIN_TIMED_MS of
# them (at most MAX_REPS): medians of 3 one-call times of a 0.04 ms op read 0.043-0.047 ms
# where its medians of 200 read 0.041-0.043 (H100, 2026-12-07), near a row's 14% margin.
MIN_TIMED_MS = 20.0
MAX_REPS = 200


def _single_calls(first_ms: float, reps: int) -> int:
    """How many single calls a row times, given the first one's time."""
    return max(reps, min(MAX_REPS, int(MIN_TIMED_MS / max(first_ms, 1e-3)) + 1))


def _median_ms(fn, warmup: int, reps: int) -> float:
    import torch

    def one_call() -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = [one_call()]
    times += [one_call() for _ in range(_single_calls(times[0], reps) - 1)]
    return statistics.median(times)


def _back_to_back_ms(fn, calls: int = 50) -> float:
    """Mean time per call over `calls` calls queued back to back (host overhead overlaps the
    GPU work of earlier calls, as in a training loop), median of 3 such runs."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def _cpu_median_ms(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _copy_bandwidth() -> float:
    """Bytes read plus written per second by a 2 GiB device-to-device copy."""
    import torch

    src = torch.empty(1 << 31, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), 2, 10)
    return 2 * (1 << 31) / (ms * 1e-3)


def _status(ms: float, target: float | None) -> str | None:
    return None if target is None else ("PASS" if ms <= target else "MISS")


class Table:
    def __init__(self, echo: bool = True) -> None:
        self.rows: list[dict] = []
        self.echo = echo

    def add(
        self,
        op: str,
        shape: str,
        ms: float,
        *,
        target: float | None = None,
        peer: float | None = None,
        floor_ms: float | None = None,
        note: str = "",
        device: str = "cuda",
    ) -> None:
        row = {
            "op": op,
            "shape": shape,
            "device": device,
            "ms": round(ms, 5),
            "target_ms": target,
            "peer_ms": peer,
            "floor_ms": None if floor_ms is None else round(floor_ms, 5),
            "fraction_of_bound": None if not floor_ms else round(floor_ms / ms, 4),
            "status": _status(ms, target),
            "note": note,
        }
        self.rows.append(row)
        if self.echo:
            print_row(row)


def print_row(row: dict) -> None:
    frac = f"{100 * row['fraction_of_bound']:5.1f}%" if row["fraction_of_bound"] else "     -"
    tgt = f"{row['target_ms']:8.3f}" if row["target_ms"] is not None else "       -"
    pr = f"{row['peer_ms']:8.3f}" if row["peer_ms"] is not None else "       -"
    print(
        f"{row['op']:24s} {row['shape']:42s} {row['ms']:10.4f} ms  bound {frac}  peer {pr}  target {tgt}  "
        f"{row['status'] or '':4s} {row['note']}",
        flush=True,
    )


def fastest_passes(passes: list[Table]) -> Table:
    """Each row's fastest pass (its note too) against the strictest of the passes' targets: a
    target timed from a baseline gets that baseline's fastest pass, as the row gets its own. A
    one-call row holds the host's time to enqueue the call, and on a busy host that rises for
    stretches of tens of ms (docs/performance.md, thin margins): passes seconds apart rarely
    both fall in one."""
    table = Table()
    for runs in zip(*(p.rows for p in passes), strict=True):
        if len({(r["op"], r["shape"]) for r in runs}) != 1:
            raise ValueError(f"the passes ran different rows: {[(r['op'], r['shape']) for r in runs]}")
        best = dict(min(runs, key=lambda r: r["ms"]))
        targets = [r["target_ms"] for r in runs if r["target_ms"] is not None]
        best["target_ms"] = min(targets) if targets else None
        best["status"] = _status(best["ms"], best["target_ms"])
        best["passes_ms"] = [r["ms"] for r in runs]
        table.rows.append(best)
        print_row(best)
    return table


def _points(B: int, N: int, dtype, device="cuda", seed: int = 0):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    return (1.0 + torch.rand(B, N, 3, generator=g)).to(device=device, dtype=dtype)


FP32_FLOPS = 60e12  # plain fp32 rate of an H200 SXM, about 67 TFLOP/s by the datasheet


def _fps_case(table, B, N, K, dtype, peer, target, reps):
    import torch

    xyz = _points(B, N, dtype)
    ms = _median_ms(lambda: torch.ops.pointops.furthest_point_sample(xyz, K, None, 0), 2, reps)
    # Sequential by nature: no byte or FLOP floor worth quoting; the note gives the time per step.
    table.add(
        "fps",
        f"B{B} N{N} K{K} {str(dtype)[6:]}",
        ms,
        target=target,
        peer=peer,
        note=f"{ms * 1e3 / K:.2f} us/step",
    )


def _neighbour_case(table, bw, op, B, N, M, r, K, dtype, peer, target, reps):
    ops = _ops()
    xyz = _points(B, N, dtype)
    # three_nn: unknown n points against known m; the others query the first M points.
    query = _points(B, M, dtype, seed=1) if op == "three_nn" else xyz[:, :M].contiguous()
    es = xyz.element_size()
    nbytes = (B * N * 3 + B * M * 3) * es + B * M * K * 8
    if op == "ball_query":

        def fn():
            return ops.ball_query(xyz, query, r, K, None, None, True, False)

        nbytes += B * M * 8
        shape = f"B{B} N{N} M{M} r{r} k{K} {str(dtype)[6:]}"
    else:

        def fn():
            return ops.knn(xyz, query, K, None, None)

        nbytes += B * M * K * es
        shape = f"B{B} N{N} M{M} k{K} {str(dtype)[6:]}"
    ms = _median_ms(fn, 3, reps)
    # The brute-force FLOP floor (8 FLOP per pair) shows how much the spatial grid prunes.
    brute = B * M * N * 8 / FP32_FLOPS * 1e3
    table.add(
        op,
        shape,
        ms,
        target=target,
        peer=peer,
        floor_ms=nbytes / bw * 1e3,
        note=f"brute-force FLOP floor {brute:.3f} ms",
    )


def _gather_case(table, bw, op, B, C, N, P, T, weighted, dtype, peer, target, reps):
    import torch

    ops = _ops()
    g = torch.Generator(device="cpu").manual_seed(2)
    feat = (1.0 + torch.rand(B, C, N, generator=g)).to("cuda", dtype)
    idx = torch.randint(0, N, (B, P, T), generator=g).cuda()
    w = torch.rand(B, P, T, generator=g).to("cuda", dtype) if weighted else None
    es = feat.element_size()
    gathered = min(B * C * N, B * C * P * T) * es
    fwd_bytes = B * C * P * es + B * P * T * (8 + (es if weighted else 0)) + gathered
    shape = f"B{B} C{C} N{N} P{P} T{T} {str(dtype)[6:]}"
    ms = _median_ms(lambda: ops.gather(feat, idx, w), 3, reps)
    note = ""
    torch_ms = None
    if op.startswith("gather_points") and T == 1:
        expanded = idx.view(B, 1, P).expand(B, C, P)
        torch_ms = _median_ms(lambda: torch.gather(feat, 2, expanded), 3, reps)
        note = f"torch.gather {torch_ms:.4f} ms (x{torch_ms / ms:.2f})"
    table.add(op, shape, ms, target=target, peer=peer, floor_ms=fwd_bytes / bw * 1e3, note=note)
    if op == "gather_points":
        # The target compares the public function as users call it (default settings: the gather
        # kernel checks its own indices, no sync) with torch.gather.
        import pointops

        idx2 = idx[..., 0].contiguous()
        api_ms = _median_ms(lambda: pointops.gather_points(feat, idx2), 3, reps)
        api_b2b = _back_to_back_ms(lambda: pointops.gather_points(feat, idx2))
        torch_b2b = _back_to_back_ms(lambda: torch.gather(feat, 2, expanded))
        table.add(
            "gather_points_api",
            shape,
            api_ms,
            peer=peer,
            floor_ms=fwd_bytes / bw * 1e3,
            note=f"one call, GPU idle before: torch.gather {torch_ms:.4f} ms (x{torch_ms / api_ms:.2f})",
        )
        table.add(
            "gather_points_api_b2b",
            shape,
            api_b2b,
            target=1.2 * torch_b2b,
            peer=peer,
            floor_ms=fwd_bytes / bw * 1e3,
            note=f"calls back to back: torch.gather {torch_b2b:.4f} ms (x{torch_b2b / api_b2b:.2f})",
        )

    grad = torch.rand(B, C, P, generator=g).to("cuda", dtype)
    bwd_ms = _median_ms(lambda: ops.gather_backward_feat(grad, idx, w, N), 3, reps)
    # The atomicAdd scatter to beat by 2x: torch's scatter_add_ (float atomics).
    src = grad if T == 1 else (grad.unsqueeze(-1) * w.unsqueeze(1)).reshape(B, C, P * T)
    flat_idx = idx.reshape(B, 1, P * T).expand(B, C, P * T)
    acc = torch.zeros(B, C, N, device="cuda", dtype=dtype)

    def scatter():
        acc.zero_()
        acc.scatter_add_(2, flat_idx, src)

    scatter_ms = _median_ms(scatter, 3, reps)
    bwd_bytes = B * C * P * es + B * P * T * 8 + B * C * N * es
    table.add(
        op + "_backward_feat",
        shape,
        bwd_ms,
        target=scatter_ms / 2,
        floor_ms=bwd_bytes / bw * 1e3,
        note=f"scatter_add_ {scatter_ms:.4f} ms (x{scatter_ms / bwd_ms:.2f}); deterministic",
    )
    # Back to back, as in a training step, the host's enqueueing of the pipeline's small
    # kernels overlaps the GPU work; this row compares GPU time per call with that of scatter_add_.
    bwd_b2b = _back_to_back_ms(lambda: ops.gather_backward_feat(grad, idx, w, N), calls=20)
    scatter_b2b = _back_to_back_ms(scatter, calls=20)
    table.add(
        op + "_backward_feat_b2b",
        shape,
        bwd_b2b,
        target=scatter_b2b / 2,
        floor_ms=bwd_bytes / bw * 1e3,
        note=f"calls back to back: scatter_add_ {scatter_b2b:.4f} ms (x{scatter_b2b / bwd_b2b:.2f})",
    )
    if weighted:
        bw_ms = _median_ms(lambda: ops.gather_backward_weight(grad, feat, idx), 3, reps)
        table.add(op + "_backward_weight", shape, bw_ms, floor_ms=fwd_bytes / bw * 1e3)


def _ops():
    import torch

    return torch.ops.pointops


def bench_gpu(table: Table, bw: float, quick: bool, only: list[str] | None = None) -> None:
    """Every GPU row, or with `only` the rows of those ops (fps, ball_query, gather_points, ...)."""
    import torch

    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    reps = 3 if quick else 10
    wanted = lambda op: only is None or op in only  # noqa: E731
    for B, N, K, peer, target in [
        (1, 1_000_000, 4096, 756.3, 25),
        (1, 100_000, 1024, 20.40, 3),
        (8, 16384, 4096, 17.03, 6),
        (32, 100_000, 1024, 41.45, 10),
        (16, 4096, 1024, 1.309, 0.65),
    ]:
        if not wanted("fps"):
            break
        for dtype in (f32, f16, bf16) if N == 100_000 else (f32,):
            _fps_case(table, B, N, K, dtype, peer, target, 3 if N >= 1_000_000 else reps)
    for op, B, N, M, r, K, peer, target in [
        ("ball_query", 1, 1_000_000, 65536, 0.01, 16, 78.44, 5),
        ("ball_query", 8, 16384, 4096, 0.05, 32, 1.406, 0.5),
        ("ball_query", 16, 4096, 1024, 0.2, 32, 0.911, 0.45),
        ("knn", 8, 16384, 4096, 0, 16, 2.166, 1.0),
        ("knn", 1, 1_000_000, 65536, 0, 16, 127.8, 15),
        ("three_nn", 8, 4096, 16384, 0, 3, 11.09, 1.5),
    ]:
        if not wanted(op):
            continue
        for dtype in (f32, f16) if B == 8 else (f32,):
            _neighbour_case(table, bw, op, B, N, M, r, K, dtype, peer, target, reps)
    for op, B, C, N, P, T, weighted, peer, target in [
        ("gather_points", 8, 128, 16384, 4096, 1, False, 0.057, None),
        ("group_points", 8, 64, 16384, 4096 * 32, 1, False, 0.425, 0.2),
        ("three_interpolate", 8, 128, 4096, 16384, 3, True, 1.519, 0.1),
        ("gather_points_large_out", 16, 256, 16384, 65536, 1, False, None, None),
        ("gather_points_huge_rows", 8, 256, 262144, 131072, 1, False, None, None),
    ]:
        if not wanted(op):
            continue
        for dtype in (f32, f16, bf16):
            _gather_case(table, bw, op, B, C, N, P, T, weighted, dtype, peer, target, reps)
            torch.cuda.empty_cache()


DTYPE_TOLERANCE = 0.02  # a 16-bit run may be this much slower and still count as no slower


def bench_dtypes(table: Table, rounds: int = 5) -> None:
    """float16/bfloat16 against float32 on one shape per op, timed back to back (GPU time per
    call, so the host's enqueueing does not blur a few-percent difference). The three dtypes
    take turns for `rounds` rounds and each gets its median, so a drift of the GPU's clocks
    during the run falls on all of them; the rows print how far the float32 rounds spread, and
    the target allows DTYPE_TOLERANCE."""
    import torch

    ops = _ops()
    g = torch.Generator(device="cpu").manual_seed(3)

    def cases(dtype):
        xyz = _points(8, 16384, dtype)
        query = xyz[:, :4096].contiguous()
        fps_xyz = _points(1, 100_000, dtype)
        unknown, known = _points(8, 16384, dtype, seed=1), _points(8, 4096, dtype)
        feat = (1.0 + torch.rand(8, 128, 4096, generator=g)).to("cuda", dtype)
        idx3 = torch.randint(0, 4096, (8, 16384, 3), generator=g).cuda()
        w3 = torch.rand(8, 16384, 3, generator=g).to("cuda", dtype)
        grad3 = torch.rand(8, 128, 16384, generator=g).to("cuda", dtype)
        feat_g = (1.0 + torch.rand(8, 64, 16384, generator=g)).to("cuda", dtype)
        idx_g = torch.randint(0, 16384, (8, 4096 * 32, 1), generator=g).cuda()
        grad_g = torch.rand(8, 64, 4096 * 32, generator=g).to("cuda", dtype)
        grad_p = torch.rand(8, 128, 4096, generator=g).to("cuda", dtype)
        idx_p = torch.randint(0, 16384, (8, 4096, 1), generator=g).cuda()
        return [
            ("fps", "B1 N100000 K1024", lambda: ops.furthest_point_sample(fps_xyz, 1024, None, 0)),
            (
                "ball_query",
                "B8 N16384 M4096 r0.05 k32",
                lambda: ops.ball_query(xyz, query, 0.05, 32, None, None, True, False),
            ),
            ("knn", "B8 N16384 M4096 k16", lambda: ops.knn(xyz, query, 16, None, None)),
            ("three_nn", "B8 N4096 M16384", lambda: ops.knn(known, unknown, 3, None, None)),
            ("three_interpolate", "B8 C128 N4096 P16384 T3", lambda: ops.gather(feat, idx3, w3)),
            (
                "three_interpolate_backward_feat",
                "B8 C128 N4096 P16384 T3",
                lambda: ops.gather_backward_feat(grad3, idx3, w3, 4096),
            ),
            ("group_points", "B8 C64 N16384 P131072 T1", lambda: ops.gather(feat_g, idx_g, None)),
            (
                "group_points_backward_feat",
                "B8 C64 N16384 P131072 T1",
                lambda: ops.gather_backward_feat(grad_g, idx_g, None, 16384),
            ),
            (
                "gather_points_backward_feat",
                "B8 C128 N16384 P4096 T1",
                lambda: ops.gather_backward_feat(grad_p, idx_p, None, 16384),
            ),
        ]

    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    by_dtype = {dt: cases(dt) for dt in dtypes}
    for i, (op, shape, _) in enumerate(by_dtype[torch.float32]):
        times = {dt: [] for dt in dtypes}
        for _ in range(rounds):
            for dt in dtypes:
                times[dt].append(_back_to_back_ms(by_dtype[dt][i][2], calls=20))
        f32 = times[torch.float32]
        ref = statistics.median(f32)
        spread = (max(f32) - min(f32)) / min(f32)
        for dt in dtypes[1:]:
            ms = statistics.median(times[dt])
            table.add(
                op + "_dtype",
                f"{shape} {str(dt)[6:]} vs float32",
                ms,
                target=ref * (1 + DTYPE_TOLERANCE),
                note=f"float32 {ref:.4f} ms (x{ms / ref:.3f}); medians of {rounds} alternating "
                f"rounds, float32 rounds spread {100 * spread:.1f}%; back to back",
            )


def bench_cpu(table: Table) -> None:
    """A few CPU cases (every core through torch's thread pool)."""
    import torch

    ops = torch.ops.pointops
    xyz = _points(8, 16384, torch.float32, device="cpu")
    query = xyz[:, :4096].contiguous()
    table.add(
        "knn",
        "B8 N16384 M4096 k16 f32",
        _cpu_median_ms(lambda: ops.knn(xyz, query, 16, None, None), 3),
        device="cpu",
        note=f"{torch.get_num_threads()} threads",
    )
    table.add(
        "ball_query",
        "B8 N16384 M4096 r0.05 k32 f32",
        _cpu_median_ms(lambda: ops.ball_query(xyz, query, 0.05, 32, None, None, True, False), 3),
        device="cpu",
        note=f"{torch.get_num_threads()} threads",
    )
    table.add(
        "fps",
        "B8 N16384 K1024 f32",
        _cpu_median_ms(lambda: ops.furthest_point_sample(xyz, 1024, None, 0), 3),
        device="cpu",
        note=f"{torch.get_num_threads()} threads",
    )
    feat = torch.rand(8, 64, 16384)
    idx = torch.randint(0, 16384, (8, 4096 * 32, 1))
    table.add(
        "group_points",
        "B8 C64 N16384 P131072 T1 f32",
        _cpu_median_ms(lambda: ops.gather(feat, idx, None), 3),
        device="cpu",
        note=f"{torch.get_num_threads()} threads",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--cpu", action="store_true", help="also time a few CPU cases")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--passes", type=int, default=2, help="passes over the rows; each row keeps its fastest (default 2)"
    )
    parser.add_argument(
        "--ops", nargs="+", help="only these ops' rows (e.g. gather_points fps); no dtype comparison"
    )
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error(f"--passes must be at least 1, got {args.passes}")

    try:
        import pointops
        import torch
    except ImportError as e:
        print(f"bench_gpu: cannot import torch/pointops ({e}); install pointops first", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device is visible; this benchmark needs a GPU", file=sys.stderr)
        return 2
    info = pointops.build_info()
    if not info.get("cuda"):
        print(
            "bench_gpu: this pointops build has no CUDA kernels; rebuild with nvcc available", file=sys.stderr
        )
        return 2

    bw = _copy_bandwidth()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(),
        "driver": _driver_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "pointops_build": info,
        "copy_GBps": round(bw / 1e9, 1),
    }
    print(
        f"{meta['gpu']}, driver {meta['driver']}, torch {meta['torch']}, "
        f"copy {meta['copy_GBps']} GB/s (read + write)"
    )
    passes = [Table(echo=False) for _ in range(args.passes)]
    for n, table in enumerate(passes, 1):
        print(f"pass {n} of {len(passes)}", flush=True)
        bench_gpu(table, bw, args.quick, args.ops)
    table = fastest_passes(passes)
    if args.ops is None:
        bench_dtypes(table)
    if args.cpu:
        bench_cpu(table)
    if args.json:
        write_json(args.json, {"meta": meta, "rows": table.rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
