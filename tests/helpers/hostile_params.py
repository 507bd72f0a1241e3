"""The parameters every hostile-input test file shares: the devices (CUDA marked `gpu` and
skipped without a CUDA device or a CUDA build of pointops) and every dtype a tensor argument may
arrive in."""

import pointops
import pytest
import torch

HAS_CUDA = torch.cuda.is_available() and pointops.build_info()["cuda"]
CUDA = pytest.param(
    "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")]
)
DEVICES = ["cpu", CUDA]
ALL_DTYPES = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
]
