"""The client harnesses of benchmarks/clients loaded as modules under test."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

CLIENTS = Path(__file__).resolve().parents[2] / "benchmarks" / "clients"


@contextlib.contextmanager
def client_harness(script: str) -> Iterator[ModuleType]:
    """benchmarks/clients/<script> as a fresh module, with its sibling modules (steps, _shims)
    importable while the context lasts."""
    sys.path.insert(0, str(CLIENTS))
    try:
        spec = importlib.util.spec_from_file_location(f"{Path(script).stem}_under_test", CLIENTS / script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(CLIENTS))
