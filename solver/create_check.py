"""Run by a new environment's own Python (as a script: it needs nothing but the standard library
and what the environment holds) before `solver make-env --create` calls the environment done.

    python -I -B create_check.py '{"gpu": false, "extras": [{"package": "mmcv", "module": "mmcv.ops",
                                   "op": "mmcv.ops.nms(...)"}]}'

Prints one line per check, MARKER and a JSON object: {"check": "python" | "torch" | "gpu" |
"pointops" | <package>, "ok": bool, "detail": str}, then {"check": "done"} (the marker keeps what
the imported packages print apart). A check whose prerequisite failed is not run.
Each line is flushed as soon as it is known, so when the child dies (a crashing extension) the
parent still has the lines before it.
"""

import json
import platform
import sys

MARKER = "solver-create-check: "


def report(check, ok, detail):
    sys.stdout.write(MARKER + json.dumps({"check": check, "ok": bool(ok), "detail": str(detail)}) + "\n")
    sys.stdout.flush()


def error_text(exc):
    return f"{type(exc).__name__}: {exc}"


def check_torch(gpu):
    try:
        import torch
    except BaseException as exc:  # ImportError, OSError (a library that does not load), SystemExit
        report("torch", False, f"import torch: {error_text(exc)}")
        return None
    report("torch", True, f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none'}) imports")
    if not gpu:
        return torch
    try:
        if torch.version.cuda is None:
            report("gpu", False, f"torch {torch.__version__} is a CPU build, but a GPU was planned")
            return None
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            report("gpu", False, "torch.cuda.is_available() is False: torch cannot use this machine's GPU")
            return None
        name = torch.cuda.get_device_name(0)
        total = float((torch.ones(4, device="cuda") * 2).sum().item())
        if total != 8.0:
            report("gpu", False, f"a tensor op on {name} gave {total}, expected 8.0")
            return None
        report("gpu", True, f"torch runs on {name}")
    except BaseException as exc:
        report("gpu", False, f"torch on the GPU: {error_text(exc)}")
        return None
    return torch


def check_pointops(torch, device):
    """Import pointops and run farthest point sampling on four points on a line: from the first,
    the farthest is the last."""
    try:
        import pointops

        xyz = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]], device=device)
        picked = pointops.furthest_point_sample(xyz, 2).cpu().tolist()
        if device == "cuda":
            pointops.check_errors()
    except BaseException as exc:
        report("pointops", False, f"pointops on {device}: {error_text(exc)}")
        return
    if picked != [[0, 3]]:
        report("pointops", False, f"furthest_point_sample on {device} gave {picked}, expected [[0, 3]]")
        return
    report(
        "pointops",
        True,
        f"pointops {getattr(pointops, '__version__', '?')} ran furthest_point_sample on {device}",
    )


def check_extra(torch, device, extra):
    """A --with package: import its module, and run its op when one is known."""
    import importlib

    try:
        module = importlib.import_module(extra["module"])
        if extra.get("op"):
            top = importlib.import_module(extra["module"].split(".")[0])
            namespace = {"torch": torch, "device": device, top.__name__: top}
            eval(extra["op"], namespace)  # noqa: S307 (the op text comes from solver.create)
    except BaseException as exc:
        report(extra["package"], False, f"{extra['module']}: {error_text(exc)}")
        return
    did = (
        f"ran {extra['op'].split('(')[0]} on {device}" if extra.get("op") else "imports (no op known for it)"
    )
    report(extra["package"], True, f"{module.__name__} {did}")


def main(request):
    report("python", True, f"python {platform.python_version()} runs ({sys.executable})")
    gpu = bool(request.get("gpu"))
    torch = check_torch(gpu)
    if torch is not None:
        device = "cuda" if gpu else "cpu"
        check_pointops(torch, device)
        for extra in request.get("extras", []):
            check_extra(torch, device, extra)
    sys.stdout.write(MARKER + json.dumps({"check": "done"}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
