"""Run by the environment's own Python (as a script, so it needs nothing but the standard library):
report torch, pointops and the import of each named extension module, one JSON object per line.

    python runtime_probe.py [--no-cuda] [--no-pointops] [module ...]

A child process keeps a crashing extension or a hanging CUDA initialisation away from doctor itself;
each line is flushed as soon as it is known, and a "start" line precedes every import, so when the
child dies (a signal, os._exit) the last start line names what it was importing. The last line is
{"kind": "done"}: without it, the child did not finish. --no-cuda and --no-pointops skip those steps
(gather runs the probe again without what crashed it).
"""

import json
import os
import sys


def emit(kind, **fields):
    fields["kind"] = kind
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def error_text(exc):
    return f"{type(exc).__name__}: {exc}"


def loaded_libstdcxx():
    """The libstdc++ this process has mapped (after importing torch: the one extensions will share)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith("libstdc++.so.6"):
                    return path
    except OSError:
        pass
    return ""


def probe_torch():
    emit("start", phase="torch")
    try:
        import torch
    except BaseException as exc:  # ImportError, OSError (DLL load), even SystemExit from a broken install
        emit("torch", importable=False, import_error=error_text(exc))
        return None
    emit(
        "torch",
        importable=True,
        version=str(torch.__version__),
        cuda=torch.version.cuda,
        location=os.path.dirname(torch.__file__),
        libstdcxx=loaded_libstdcxx(),
    )
    return torch


def probe_cuda(torch):
    emit("start", phase="cuda")
    facts = {"arch_list": [], "device_capabilities": [], "cuda_available": None}
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        facts["arch_list"] = list(torch.cuda.get_arch_list()) if facts["cuda_available"] else []
        for index in range(torch.cuda.device_count() if facts["cuda_available"] else 0):
            major, minor = torch.cuda.get_device_capability(index)
            facts["device_capabilities"].append(f"{major}.{minor}")
    except BaseException as exc:
        facts["cuda_error"] = error_text(exc)
    emit("cuda", **facts)


def pointops_path():
    import importlib.util

    try:
        spec = importlib.util.find_spec("pointops")
        return os.path.dirname(spec.origin) if spec is not None and spec.origin else ""
    except BaseException:
        return ""


def probe_pointops():
    path = pointops_path()
    emit("start", phase="pointops", path=path)
    try:
        import pointops
    except ModuleNotFoundError as exc:
        if exc.name == "pointops":
            emit("pointops", installed=False)
        else:
            emit("pointops", installed=True, stage="import", error=error_text(exc), path=path)
        return
    except BaseException as exc:
        emit("pointops", installed=True, stage="import", error=error_text(exc), path=path)
        return
    build_info = getattr(pointops, "build_info", None)
    if build_info is None:
        emit(
            "pointops",
            installed=True,
            path=path,
            stage="build_info",
            error="this pointops has no build_info(): it is not this project's package (Pointcept's library "
            "is also named pointops)",
        )
        return
    try:
        info = build_info()
        emit("pointops", installed=True, build_info=json.loads(json.dumps(info, default=str)), path=path)
    except BaseException as exc:
        emit("pointops", installed=True, stage="build_info", error=error_text(exc), path=path)


def package_folder(name):
    """The folder the top-level package of `name` is found in, without importing it ("" unknown): a
    source checkout on sys.path can hide the installed package."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except BaseException:
        return ""
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return ""
    return os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin


def probe_imports(modules):
    import importlib

    for name in modules:
        path = package_folder(name)
        emit("start", phase="import", module=name)
        try:
            importlib.import_module(name)
            emit("import", module=name, error="", path=path)
        except BaseException as exc:
            emit("import", module=name, error=error_text(exc), path=path)


def without_own_folder(path):
    """sys.path without this script's folder, which Python puts first: its neighbours (mmcv.py,
    network.py, ...) must not stand in for the environment's modules of the same name."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [p for p in path if os.path.abspath(p or os.curdir) != here]


if __name__ == "__main__":
    sys.path[:] = without_own_folder(sys.path)
    options = {"--no-cuda", "--no-pointops"}
    arguments = sys.argv[1:]
    torch = probe_torch()
    if torch is not None and "--no-cuda" not in arguments:
        probe_cuda(torch)
    if "--no-pointops" not in arguments:
        probe_pointops()
    probe_imports([a for a in arguments if a not in options])
    emit("done")
