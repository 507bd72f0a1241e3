import pytest
import torch

pointops = pytest.importorskip("pointops", reason="pointops is not installed (pip install ./ops-src)")


def _cuda_ready() -> bool:
    return torch.cuda.is_available() and pointops.build_info()["cuda"]


DEVICES = ["cpu"] + (["cuda"] if _cuda_ready() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
