import importlib.util

import pytest
import torch

# Without pointops installed (pip install ./ops-src --no-build-isolation) these tests are not collected.
if importlib.util.find_spec("pointops") is None:
    collect_ignore_glob = ["test_*.py"]
    DEVICES = ["cpu"]
else:
    import pointops

    DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and pointops.build_info()["cuda"] else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
