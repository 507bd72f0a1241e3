"""pointops.build_info(): what the installed binary was built with (no GPU needed)."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

_INFO_PATH = Path(__file__).with_name("_build_info.json")


@lru_cache(maxsize=1)
def _load() -> dict:
    try:
        with open(_INFO_PATH, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise RuntimeError(
            f"pointops: {_INFO_PATH} is missing: this pointops was not installed by its setup.py. "
            "Reinstall it the way it came (`solver doctor` prints the command), or from a source "
            "checkout: `pip install --no-deps --no-build-isolation --force-reinstall /ABSOLUTE/PATH/TO/ops-src`"
        ) from None


def build_info() -> dict:
    """The build facts of the installed pointops binary.

    Keys: torch_target_version (oldest torch whose stable ABI it targets, "2.10"),
    built_against_torch, python_abi, platform, cuda (bool), cuda_version ("13.0" or None),
    sass_archs (compute capabilities with machine code, e.g. ["8.0", "9.0"]), ptx_arch (the one
    embedded as PTX, or None), arch_source (where the arch list came from), compiler, nvcc,
    and cuda_runtime_version (CUDART_VERSION reported by the loaded binary, 0 without CUDA).
    """
    import torch

    info = copy.deepcopy(_load())
    info["cuda_runtime_version"] = int(torch.ops.pointops.cuda_runtime_version())
    return info
