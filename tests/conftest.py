import sys

import pytest


@pytest.fixture(autouse=True)
def _no_pointops_problem_left_on_the_gpu():
    """A bad value given to a CUDA op is raised by a later pointops call (the checks do not wait
    for the GPU). A test that leaves one recorded fails itself, instead of the next test on that
    GPU. Only where the test imported pointops and a GPU is present."""
    yield
    pointops, torch = sys.modules.get("pointops"), sys.modules.get("torch")
    if (
        pointops is None
        or torch is None
        or not torch.cuda.is_available()
        or not pointops.build_info()["cuda"]
    ):
        return
    try:
        pointops.check_errors()
    except ValueError as error:
        pytest.fail(f"the test left a pointops problem recorded on the GPU: {error}")
