"""Kernel-path knobs for tests and benchmarks (the list is in csrc/tuning.h).

Each knob is read from its POINTOPS_* environment variable once, when a kernel first needs it;
`override` changes knobs for a block of code in this process:

    with pointops._tuning.override(CPU_FPS_PATH="brute", GRID_MIN_POINTS=1):
        ...

Not for users: the defaults are what the benchmarks measure.
"""

from __future__ import annotations

import contextlib

import torch

# Words some knobs take instead of numbers.
_WORDS = {name: {"brute": 0, "kdtree": 1, "auto": -1} for name in ("CPU_FPS_PATH", "CPU_NEIGHBORS_PATH")}


def _value(name: str, value) -> int:
    if value is None:
        return -1
    words = _WORDS.get(name)
    if words is not None and isinstance(value, str):
        if value not in words:
            raise ValueError(f"pointops: knob {name} takes one of {sorted(words)}, got {value!r}")
        return words[value]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"pointops: knob {name} takes an int >= 0 (or None to unset), got {value!r}")
    return value


def set_knob(name: str, value) -> int:
    """Sets knob `name` (without the POINTOPS_ prefix); None unsets it. Returns the previous
    value (-1: unset)."""
    return int(torch.ops.pointops.set_tuning(name, _value(name, value)))


@contextlib.contextmanager
def override(**knobs):
    previous = {}
    try:
        for name, value in knobs.items():
            previous[name] = set_knob(name, value)
        yield
    finally:
        for name, old in previous.items():
            torch.ops.pointops.set_tuning(name, old)
