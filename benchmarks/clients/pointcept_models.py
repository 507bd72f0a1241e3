"""Proof harness: Pointcept's PTv1 and PTv2 (semantic segmentation) forward + backward and the
test-time knn_query(1, ...) path, run with pointops in place of Pointcept's `pointops` library,
and compared with Pointcept's own library built from the same checkout.

Both libraries are imported as `pointops`, so each backend runs in its own process:

    # everything (pointops run, Pointcept-library run, comparison); Pointcept's library is the
    # one benchmarks/peers/build_peers.sh installs into .peers/build/pointcept_pointops
    python benchmarks/clients/pointcept_models.py all --pointcept .peers/Pointcept \
        --pointcept-lib .peers/build/pointcept_pointops --device cuda --out-dir out/pointcept

    # one side only (e.g. on a CPU host, where Pointcept's library cannot be built)
    python benchmarks/clients/pointcept_models.py run --backend pointops --pointcept .peers/Pointcept \
        --device cpu --cpu --out out/pointcept/pointops.pt

The models come from the checkout, unmodified: the harness imports the backbone modules
(pointcept.models.point_transformer, pointcept.models.point_transformer_v2) without running
pointcept/models/__init__.py, which imports every backbone and its optional dependencies
(spconv, ocnn, flash_attn, ...). Missing third-party pieces get the plain-torch stand-ins of
_shims.py. The pointops run installs pointops' torch.ops.pyg ops (PyTorch Geometric >= 2.8
calls pyg-lib for voxel_grid); the Pointcept-library run uses the plain-torch grid stand-in.
The two runs share weights (the pointops run saves them, the other loads them), inputs (seeded)
and drop_path 0, so their outputs and gradients differ only by the libraries.

Training steps (issue 48): `--compile none|default|reduce-overhead` (repeatable) times PTv2's
training step (forward, the harness's loss, backward, SGD with momentum) eagerly and, per mode
other than none, under torch.compile (`--compile-backend`, inductor by default), in each run:

    python benchmarks/clients/pointcept_models.py all --pointcept .peers/Pointcept \
        --pointcept-lib .peers/build/pointcept_pointops --device cuda --models ptv2 \
        --compile default --compile reduce-overhead --out-dir out/pointcept-compiled \
        --json out/pointcept-compiled/report.json

PTv2 pools with data-dependent sizes (voxel_grid, torch.unique, bincount). Mode default
captures them (capture_dynamic_output_shape_ops, capture_scalar_outputs); mode reduce-overhead
breaks the graph there, since CUDA graph trees' pool check refuses torch.unique's outputs when
they are captured (see captures_dynamic_outputs). --dynamic-outputs / --no-dynamic-outputs
force one choice for every mode. Reported per mode: the first call apart from the steady median,
torch._dynamo.explain's graphs and graph breaks by source (pointops when the stack passes
through pointops; else the owner of the innermost frame: peer, torch, pointcept-lib, ...),
recompiles during the timed steps, the compiled step's loss and gradients against the eager
step's, and on CUDA every host sync inside one steady step (torch.cuda.set_sync_debug_mode) with
its source. The helpers are pointnet2_training.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _shims  # noqa: E402
import pointnet2_training as steps  # noqa: E402  (the compiled-step helpers)

PTV2_ARGS = dict(  # Pointcept configs/scannet/semseg-pt-v2m2-0-base.py, drop_path 0 for determinism
    in_channels=9,
    num_classes=20,
    patch_embed_depth=1,
    patch_embed_channels=48,
    patch_embed_groups=6,
    patch_embed_neighbours=8,
    enc_depths=(2, 2, 6, 2),
    enc_channels=(96, 192, 384, 512),
    enc_groups=(12, 24, 48, 64),
    enc_neighbours=(16, 16, 16, 16),
    dec_depths=(1, 1, 1, 1),
    dec_channels=(48, 96, 192, 384),
    dec_groups=(6, 12, 24, 48),
    dec_neighbours=(16, 16, 16, 16),
    grid_sizes=(0.06, 0.15, 0.375, 0.9375),
    attn_qkv_bias=True,
    pe_multiplier=False,
    pe_bias=True,
    attn_drop_rate=0.0,
    drop_path_rate=0.0,
    enable_checkpoint=False,
    unpool_backend="map",
)


def import_backend(backend: str, lib_dir: str | None):
    """Imports `pointops` from the chosen side and checks which one it is."""
    if backend == "pointcept":
        if not lib_dir:
            raise SystemExit(
                "--pointcept-lib (the directory Pointcept's library was installed into) is needed"
            )
        sys.path.insert(0, os.path.abspath(lib_dir))
    import pointops

    is_ours = hasattr(pointops, "packed")
    if (backend == "pointops") != is_ours:
        raise SystemExit(f"imported {pointops.__file__}, which is not the {backend} library")
    if is_ours:
        from pointops.compat import pyg_lib

        pyg_lib.install_pyg_ops()
    else:
        _shims.install_plain_grid_cluster()
    return pointops


def import_models(pointcept_root: str):
    """The two backbone packages from the checkout, without pointcept/models/__init__.py."""
    root = os.path.abspath(pointcept_root)
    sys.path.insert(0, root)
    models = types.ModuleType("pointcept.models")
    models.__path__ = [os.path.join(root, "pointcept", "models")]
    import pointcept  # its __init__ is empty

    sys.modules["pointcept.models"] = models
    pointcept.models = models
    from pointcept.models.point_transformer import point_transformer_seg
    from pointcept.models.point_transformer_v2 import point_transformer_v2m2_base

    return point_transformer_seg, point_transformer_v2m2_base


def synthetic_batch(scenes: int, points: int, device: str, seed: int):
    """A packed batch of uneven scenes: room-like boxes of random size, 9 input channels."""
    g = torch.Generator().manual_seed(seed)
    sizes = [int(points * (0.6 + 0.8 * i / max(scenes - 1, 1))) for i in range(scenes)]
    coords, feats = [], []
    for n in sizes:
        extent = 2.0 + 4.0 * torch.rand(3, generator=g)
        c = torch.rand(n, 3, generator=g) * extent
        coords.append(c)
        feats.append(torch.cat([c, torch.rand(n, 6, generator=g)], 1))
    offset = torch.tensor(sizes).cumsum(0).int()
    origin = [
        torch.rand(n // 2, 3, generator=g) * c.max(0).values for n, c in zip(sizes, coords, strict=True)
    ]
    origin_offset = torch.tensor([o.shape[0] for o in origin]).cumsum(0).int()
    batch = dict(
        coord=torch.cat(coords),
        feat=torch.cat(feats),
        offset=offset,
        origin_coord=torch.cat(origin),
        origin_offset=origin_offset,
    )
    return {k: v.to(device) for k, v in batch.items()}


def make_ptv2_step(model, opt, inputs):
    """One PTv2 training step returning its loss (a copy: backward consumes the loss's graph)."""

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(inputs).float().square().mean()
        value = loss.detach().clone()
        loss.backward()
        opt.step()
        return value

    return step


def give_grid_cluster_a_fake() -> None:
    """_shims' plain pyg::grid_cluster (the Pointcept-library run's) has no fake kernel, without
    which torch.compile cannot trace voxel_grid: one id per point."""
    try:
        torch.library.register_fake("pyg::grid_cluster")(
            lambda pos, size, start=None, end=None: pos.new_empty((pos.shape[0],), dtype=torch.int64)
        )
    except RuntimeError:  # it has one (pointops' install_pyg_ops registers it)
        pass


def captures_dynamic_outputs(choice: bool | None, mode: str) -> bool:
    """Whether dynamo captures PTv2's data-dependent sizes in `mode`; `choice` is the command
    line's (None: not given). Under CUDA graphs (reduce-overhead) the graph breaks there instead:
    captured, torch.unique in PTv2's grid pooling returned storages from outside the graph trees'
    pool, and the trees' pool check stopped the step (H100, torch 2.11); with the break the same
    step ran at 0.49 of eager."""
    if choice is not None:
        return choice
    return mode != "reduce-overhead"


def ptv2_step_in_mode(args, model, initial, inputs, mode: str, owners: list) -> tuple[dict, dict]:
    """PTv2's step from the initial weights, eager (mode none) or compiled: times, capture, the
    loss and gradients of a step from the initial weights, host syncs. (entry, gradients)."""
    device = torch.device(args.device)
    clock = steps.Clock(device)
    model.load_state_dict(initial)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    plain = make_ptv2_step(model, opt, inputs)
    entry = {"mode": mode}
    if mode == "none":
        step = plain
        entry["first_step_ms"] = clock(step)[1]
    else:
        torch._dynamo.reset()
        entry["capture"] = steps.capture_step(
            plain, owners, dynamic_outputs=captures_dynamic_outputs(args.dynamic_outputs, mode)
        )
        step = steps.compile_step(plain, mode, args.compile_backend, optimizer=opt)
        entry.update(steps.first_compiled_calls(step, clock))
        entry["capture"]["counters_after_first_calls"] = steps.dynamo_counters()
    for _ in range(args.warmup):
        step()
    entry["step_ms"] = steps.time_steps(step, args.steps, clock, device)
    entry["median_step_ms"] = statistics.median(entry["step_ms"]) if entry["step_ms"] else None
    if mode != "none":
        entry["capture"]["counters_after_timed_steps"] = steps.dynamo_counters()
    model.load_state_dict(initial)
    entry["loss"] = float(step())
    grads = {k: p.grad.detach().cpu().clone() for k, p in model.named_parameters() if p.grad is not None}
    entry["host_syncs"] = steps.host_syncs_in_step(step, device, owners)
    return entry, grads


def telling_frames(frames: list[dict], keep: int) -> list[str]:
    """The frames of an allocation that say who asked for it: Python frames and any frame of
    pointops' own library, innermost first (the caching allocator's own C++ frames say nothing)."""
    kept = [
        f"{f['filename']}:{f['line']} {f['name']}"
        for f in frames
        if f["filename"].endswith(".py") or "pointops" in f"{f['filename']} {f['name']}"
    ]
    return kept[:keep]


def allocation_stacks(error: str, frames: int = 12) -> list[dict]:
    """Where the CUDA memory that CUDA graphs' pool check names in `error` was allocated (the
    caching allocator's history, recorded by compiled_step_or_error): one entry per address, with
    its telling frames, or with none and `"in_allocator": False` when no block of the caching
    allocator starts there (memory torch's allocator did not hand out)."""
    named = {int(a) for a in re.findall(r"\b(\d{6,})\b", error.split("but should be")[-1])}
    found = []
    for segment in torch.cuda.memory._snapshot()["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            if address in named:
                named.discard(address)
                found.append(
                    {
                        "address": address,
                        "size": block["size"],
                        "state": block.get("state"),
                        "pool": segment.get("segment_pool_id"),
                        "stream": segment.get("stream"),
                        "stack": telling_frames(block.get("frames", []), frames),
                    }
                )
            address += block["size"]
    found += [{"address": a, "in_allocator": False, "stack": []} for a in sorted(named)]
    return found


def compiled_step_or_error(args, model, initial, inputs, mode: str, owners: list) -> tuple[dict, dict | None]:
    """ptv2_step_in_mode for a compiled mode, or, when it fails, ({"mode", "error"}, None): the
    other modes and the other library's run still report. Under CUDA graphs the allocator's
    history is recorded, so that a failed pool check says where its storages came from."""
    recording = mode == "reduce-overhead" and torch.device(args.device).type == "cuda"
    if recording:
        torch.cuda.memory._record_memory_history(max_entries=100000)
    try:
        return ptv2_step_in_mode(args, model, initial, inputs, mode, owners)
    except Exception as error:  # noqa: BLE001  (reported in the run's results, not raised)
        entry = {"mode": mode, "error": f"{type(error).__name__}: {error}"[:2000], "median_step_ms": None}
        if recording:
            entry["allocated_at"] = allocation_stacks(str(error))
        return entry, None
    finally:
        if recording:
            torch.cuda.memory._record_memory_history(enabled=None)


def failure_lines(backend: str, entry: dict) -> list[str]:
    """A failed mode's report: its error, then where each storage the pool check named was
    allocated (compiled_step_or_error's allocated_at)."""
    lines = [f"[{backend}] ptv2 step ({entry['mode']}) failed: {entry['error'][:400]}"]
    for found in entry.get("allocated_at", []):
        if not found.get("in_allocator", True):
            lines.append(f"  {found['address']}: no block of torch's caching allocator starts there")
            continue
        lines.append(
            f"  {found['address']} ({found['size']} bytes, {found['state']}, pool {found['pool']},"
            f" stream {found['stream']}) allocated at:"
        )
        lines += [f"    {frame}" for frame in found["stack"]]
    return lines


def ptv2_training_steps(args, seg2, pointops, init) -> dict:
    """PTv2's training step in every --compile mode (eager first), each compiled one compared with
    the eager step (loss, gradients)."""
    device = args.device
    data = synthetic_batch(args.scenes, args.points, device, args.seed)
    inputs = {k: data[k] for k in ("coord", "feat", "offset")}
    torch.manual_seed(args.seed)
    model = seg2.PointTransformerV2(**PTV2_ARGS).to(device)
    if init is not None and "ptv2" in init:
        model.load_state_dict(init["ptv2"])
    model.train()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    library = "pointops" if args.backend == "pointops" else "pointcept-lib"
    owners = steps.code_owners(args.pointcept, {os.path.dirname(os.path.abspath(pointops.__file__)): library})
    if args.backend != "pointops":
        give_grid_cluster_a_fake()
    out, eager_grads = {}, None
    for mode in ["none", *[m for m in dict.fromkeys(args.compile) if m != "none"]]:
        if mode == "none":  # eager must run: every compiled mode is compared with it
            entry, grads = ptv2_step_in_mode(args, model, initial, inputs, mode, owners)
        else:
            entry, grads = compiled_step_or_error(args, model, initial, inputs, mode, owners)
        if "error" in entry:
            out[mode] = entry
            print(*failure_lines(args.backend, entry), sep="\n", flush=True)
            continue
        if eager_grads is None:
            eager_grads, eager_loss = grads, entry["loss"]
        else:
            entry["loss_rel_to_eager"] = abs(entry["loss"] - eager_loss) / max(abs(eager_loss), 1e-30)
            entry["grads_missing"] = sorted(set(eager_grads) - set(grads))  # must stay empty
            entry["grads_vs_eager"] = _compare_grads(grads, eager_grads) if grads else None
        out[mode] = entry
        syncs = entry["host_syncs"]
        breaks = entry.get("capture", {}).get("explain", {}).get("breaks_by_source")
        print(
            f"[{args.backend}] ptv2 step ({mode}): median {steps._fmt(entry['median_step_ms'], '.2f')} ms, "
            + (
                f"first call {entry['compile_step_ms'] / 1e3:.1f} s, graph breaks {breaks or 'none'}, "
                if breaks is not None
                else ""
            )
            + (
                f"host syncs {syncs['by_source'] or 'none'}"
                if syncs is not None
                else "no CUDA: host syncs not checked"
            ),
            flush=True,
        )
    return out


def run(args) -> dict:
    if args.cpu:
        _shims.install_cpu_legacy_constructors()
    shimmed = [
        name
        for name, install in (
            ("torch_scatter", _shims.install_torch_scatter_shim),
            ("timm", _shims.install_timm_droppath_shim),
        )
        if install()
    ]
    if shimmed:
        print(f"[{args.backend}] plain-torch stand-ins for absent modules: {', '.join(shimmed)}", flush=True)
    pointops = import_backend(args.backend, args.pointcept_lib)
    seg1, seg2 = import_models(args.pointcept)
    device = args.device
    data = synthetic_batch(args.scenes, args.points, device, args.seed)
    init = torch.load(args.init_from, map_location="cpu") if args.init_from else None
    result = {
        "backend": args.backend,
        "pointops_file": pointops.__file__,
        "device": device,
        "points": int(data["coord"].shape[0]),
        "models": {},
    }
    saved_init = {}
    builders = {
        "ptv1": lambda: seg1.PointTransformerSeg50(in_channels=9, num_classes=20),
        "ptv2": lambda: seg2.PointTransformerV2(**PTV2_ARGS),
    }
    for name in args.models:
        torch.manual_seed(args.seed)
        model = builders[name]().to(device)
        if init is not None:
            model.load_state_dict(init[name])
        saved_init[name] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        model.train()
        inputs = {k: data[k] for k in ("coord", "feat", "offset")}
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = model(inputs)
        loss = logits.float().square().mean()
        loss.backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        grads = {k: p.grad.detach().cpu() for k, p in model.named_parameters() if p.grad is not None}
        result["models"][name] = {
            "logits": logits.detach().cpu(),
            "grads": grads,
            "seconds": seconds,
            "loss": float(loss),
        }
        print(
            f"[{args.backend}] {name}: {data['coord'].shape[0]} points, logits {list(logits.shape)}, "
            f"loss {float(loss):.6g}, {len(grads)} parameter gradients, {seconds:.2f} s fwd+bwd",
            flush=True,
        )
    # test-time mapping of predictions back to the original points (Pointcept's evaluator/tester)
    idx, dist = pointops.knn_query(
        1,
        data["coord"].float(),
        data["offset"].int(),
        data["origin_coord"].float(),
        data["origin_offset"].int(),
    )
    result["knn_query_1"] = {"idx": idx.cpu(), "dist": dist.cpu()}
    print(f"[{args.backend}] knn_query(1, ...): {idx.shape[0]} origin points mapped", flush=True)
    if args.compile:
        result["ptv2_steps"] = ptv2_training_steps(args, seg2, pointops, init)
    if args.save_init:
        torch.save(saved_init, args.save_init)
    torch.save(result, args.out)
    return result


def _compare_grads(ga: dict, gb: dict) -> dict:
    """Relative L2 of the gradients: over all parameters together, and the worst parameter among
    those whose gradient is not zero in exact arithmetic. A Linear bias followed by a BatchNorm
    (PTv1's linear_p.0, PTv2's weight_encoding.0) has a zero gradient, computed as rounding
    noise of about 1e-7 of the others: its relative difference says nothing, so parameters whose
    reference gradient norm is below 1e-4 of the median are listed apart."""
    names = [k for k in ga if k in gb]
    a = {k: ga[k].double() for k in names}
    b = {k: gb[k].double() for k in names}
    norms = torch.tensor([float(b[k].norm()) for k in names])
    floor = 1e-4 * float(norms.median()) if names else 0.0
    total = float(torch.cat([(a[k] - b[k]).flatten() for k in names]).norm()) if names else 0.0
    report = {
        "all_grads_rel_l2": total / max(float(torch.cat([b[k].flatten() for k in names]).norm()), 1e-30),
        "worst_grad_rel_l2": 0.0,
        "worst_grad_param": "",
        "zero_grad_params": {
            k: [float(a[k].norm()), float(b[k].norm())]
            for k, n in zip(names, norms, strict=True)
            if n < floor
        },
    }
    for k, n in zip(names, norms, strict=True):
        rel = float((a[k] - b[k]).norm()) / max(float(n), 1e-30)
        if n >= floor and rel > report["worst_grad_rel_l2"]:
            report["worst_grad_rel_l2"], report["worst_grad_param"] = rel, k
    return report


def step_rows(a: dict, b: dict) -> list[dict]:
    """PTv2's training steps, one row per library and mode, for benchmarks/update_baseline.py:
    the median against Pointcept's library's eager step, with the capture in words."""
    theirs = b.get("ptv2_steps", {}).get("none")
    rows = []
    for backend, run in ((a["backend"], a), ("pointcept-lib", b)):
        for mode, entry in run.get("ptv2_steps", {}).items():
            if "error" in entry:
                continue  # a failed mode: its error is in the run's JSON
            explained = entry.get("capture", {}).get("explain")
            first_call_ms = entry["compile_step_ms"] if explained else None
            note = steps.capture_words(explained, first_call_ms, entry.get("host_syncs"))
            rows.append(
                {
                    "case": "ptv2 step",
                    "variant": backend if mode == "none" else f"{backend}-{steps.COMPILE_MODES[mode]}",
                    "ms": entry["median_step_ms"],
                    "pointcept_ms": theirs["median_step_ms"] if theirs else None,
                    "ratio": entry["median_step_ms"] / theirs["median_step_ms"] if theirs else None,
                    "grad_rel_l2": (entry.get("grads_vs_eager") or {}).get("all_grads_rel_l2"),
                    "note": "; ".join(note) or None,
                }
            )
    return rows


def compare(a_path: str, b_path: str) -> dict:
    a, b = torch.load(a_path), torch.load(b_path)
    report = {"a": a["backend"], "b": b["backend"], "models": {}}
    for name in a["models"]:
        if name not in b["models"]:
            continue
        ma, mb = a["models"][name], b["models"][name]
        la, lb = ma["logits"].double(), mb["logits"].double()
        logit_rel = float((la - lb).norm() / lb.norm().clamp_min(1e-30))
        report["models"][name] = {
            "logits_max_abs_diff": float((la - lb).abs().max()),
            "logits_rel_l2": logit_rel,
            **_compare_grads(ma["grads"], mb["grads"]),
            "seconds": [ma["seconds"], mb["seconds"]],
        }
    report["ptv2_steps"] = {
        mode: {
            "pointops_ms": entry["median_step_ms"],
            "pointcept_lib_ms": b["ptv2_steps"][mode]["median_step_ms"],
            "ratio": entry["median_step_ms"] / b["ptv2_steps"][mode]["median_step_ms"],
            # issue 48's measure: against Pointcept's library in an eager step
            "ratio_to_pointcept_lib_eager": entry["median_step_ms"]
            / b["ptv2_steps"]["none"]["median_step_ms"],
        }
        for mode, entry in a.get("ptv2_steps", {}).items()
        if entry.get("median_step_ms") and (b.get("ptv2_steps", {}).get(mode) or {}).get("median_step_ms")
    }
    report["failed_modes"] = {
        run["backend"]: {
            mode: entry["error"] for mode, entry in run.get("ptv2_steps", {}).items() if "error" in entry
        }
        for run in (a, b)
    }
    report["rows"] = step_rows(a, b)
    ia, ib = a["knn_query_1"]["idx"], b["knn_query_1"]["idx"]
    report["knn_query_1"] = {
        "same_idx": int((ia == ib).sum()),
        "total": int(ia.numel()),
        "max_dist_diff": float((a["knn_query_1"]["dist"] - b["knn_query_1"]["dist"]).abs().max()),
    }
    return report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd in ("run", "all"):
        s = sub.add_parser(cmd)
        s.add_argument("--pointcept", required=True, help="Pointcept checkout (holds pointcept/)")
        s.add_argument("--pointcept-lib", help="directory Pointcept's own pointops was installed into")
        s.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
        s.add_argument(
            "--cpu",
            action="store_true",
            help="map torch.cuda.IntTensor & co. to CPU tensors (PTv1 calls them; CPU hosts only)",
        )
        s.add_argument("--scenes", type=int, default=4)
        s.add_argument("--points", type=int, default=20000, help="mean points per scene")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--models", nargs="+", default=["ptv1", "ptv2"], choices=["ptv1", "ptv2"])
        s.add_argument(
            "--compile",
            action="append",
            choices=["none", "default", "reduce-overhead"],
            help="time PTv2's training step eagerly and with torch.compile in this mode (none: eager "
            "only); repeatable",
        )
        s.add_argument(
            "--compile-backend", default="inductor", help="torch.compile's backend (aot_eager: no codegen)"
        )
        s.add_argument(
            "--dynamic-outputs",
            dest="dynamic_outputs",
            action="store_true",
            default=None,
            help="capture data-dependent sizes in every compiled mode (default: in mode default only)",
        )
        s.add_argument(
            "--no-dynamic-outputs",
            dest="dynamic_outputs",
            action="store_false",
            help="break the graph at data-dependent sizes in every compiled mode",
        )
        s.add_argument(
            "--steps", type=int, default=20, help="timed training steps per mode (median reported)"
        )
        s.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
        if cmd == "run":
            s.add_argument("--backend", choices=["pointops", "pointcept"], required=True)
            s.add_argument("--out", required=True)
            s.add_argument("--init-from", help="load the models' weights from this file")
            s.add_argument("--save-init", help="save the models' initial weights to this file")
        else:
            s.add_argument("--out-dir", required=True)
            s.add_argument("--json", help="write the comparison here")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args()
    if args.cmd == "run":
        run(args)
        return 0
    if args.cmd == "compare":
        print(json.dumps(compare(args.a, args.b), indent=1))
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    common = [
        "--pointcept",
        args.pointcept,
        "--device",
        args.device,
        "--scenes",
        str(args.scenes),
        "--points",
        str(args.points),
        "--seed",
        str(args.seed),
        "--models",
        *args.models,
    ]
    if args.cpu:
        common.append("--cpu")
    for mode in args.compile or []:
        common += ["--compile", mode]
    common += [
        "--compile-backend",
        args.compile_backend,
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
    ]
    if args.dynamic_outputs is not None:
        common.append("--dynamic-outputs" if args.dynamic_outputs else "--no-dynamic-outputs")
    init = os.path.join(args.out_dir, "init.pt")
    ours, theirs = os.path.join(args.out_dir, "pointops.pt"), os.path.join(args.out_dir, "pointcept.pt")
    me = [sys.executable, os.path.abspath(__file__), "run"]
    subprocess.run([*me, "--backend", "pointops", "--out", ours, "--save-init", init, *common], check=True)
    if not args.pointcept_lib or not os.path.isdir(args.pointcept_lib):
        print(f"Pointcept's library not found at {args.pointcept_lib!r}: skipping the comparison run")
        return 0
    subprocess.run(
        [
            *me,
            "--backend",
            "pointcept",
            "--pointcept-lib",
            args.pointcept_lib,
            "--out",
            theirs,
            "--init-from",
            init,
            *common,
        ],
        check=True,
    )
    report = compare(ours, theirs)
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
