"""Run by the environment's own Python (as a script, so it needs nothing but the standard library):
report torch, pointops and the import of each named extension module, one JSON object per line.

    python runtime_probe.py [module ...]

A child process keeps a crashing extension or a hanging CUDA initialisation away from doctor itself;
each line is flushed as soon as it is known, so a crash loses only the module that caused it.
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


def probe_torch():
    try:
        import torch
    except BaseException as exc:  # ImportError, OSError (DLL load), even SystemExit from a broken install
        emit("torch", importable=False, import_error=error_text(exc))
        return
    facts = {
        "importable": True,
        "version": str(torch.__version__),
        "cuda": torch.version.cuda,
        "location": os.path.dirname(torch.__file__),
        "arch_list": [],
        "device_capabilities": [],
        "cuda_available": None,
    }
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        facts["arch_list"] = list(torch.cuda.get_arch_list()) if facts["cuda_available"] else []
        for index in range(torch.cuda.device_count() if facts["cuda_available"] else 0):
            major, minor = torch.cuda.get_device_capability(index)
            facts["device_capabilities"].append(f"{major}.{minor}")
    except BaseException as exc:
        facts["cuda_error"] = error_text(exc)
    emit("torch", **facts)


def probe_pointops():
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec("pointops")
        path = os.path.dirname(spec.origin) if spec is not None and spec.origin else ""
    except BaseException:
        path = ""
    try:
        import pointops
    except ModuleNotFoundError as exc:
        if exc.name == "pointops":
            emit("pointops", installed=False)
        else:
            emit("pointops", installed=True, error=error_text(exc), path=path)
        return
    except BaseException as exc:
        emit("pointops", installed=True, error=error_text(exc), path=path)
        return
    build_info = getattr(pointops, "build_info", None)
    if build_info is None:
        emit(
            "pointops",
            installed=True,
            path=path,
            error="this pointops has no build_info(): it is not this project's package (Pointcept's library "
            "is also named pointops)",
        )
        return
    try:
        info = build_info()
        emit("pointops", installed=True, build_info=json.loads(json.dumps(info, default=str)), path=path)
    except BaseException as exc:
        emit("pointops", installed=True, error=error_text(exc))


def probe_imports(modules):
    import importlib

    for name in modules:
        emit("import-start", module=name)
        try:
            importlib.import_module(name)
            emit("import", module=name, error="")
        except BaseException as exc:
            emit("import", module=name, error=error_text(exc))


if __name__ == "__main__":
    probe_torch()
    probe_pointops()
    probe_imports(sys.argv[1:])
