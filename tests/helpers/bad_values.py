"""How a bad input value is reported: at once on CPU; on CUDA by a later pointops call or by
pointops.check_errors(), since the checks do not wait for the GPU."""

from __future__ import annotations

import contextlib
import re

import pointops
import pytest
import torch


@contextlib.contextmanager
def raises_bad_value(device, cpu_match: str, cuda_match: str):
    """The block's pointops calls were given a bad value: on CPU a ValueError matching cpu_match
    comes from the block; on CUDA one matching cuda_match comes from the block (a later call in
    it) or from pointops.check_errors() after it."""
    if torch.device(device).type != "cuda":
        with pytest.raises(ValueError, match=cpu_match):
            yield
        return
    try:
        yield
    except ValueError as error:
        assert re.search(cuda_match, str(error)), str(error)
        return
    with pytest.raises(ValueError, match=cuda_match):
        pointops.check_errors()
