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


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """Runs the test with torch's intra-op pool at 1 and at 2 threads (the CPU kernels split work
    across threads; a result must not depend on how), then puts the pool back."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(previous)


# The quick developer loop is `pytest -m "not slow"` (under a minute on 2 cores); CI runs
# everything. Besides the tests marked slow where they are defined, these are slow by what they
# do: builds with nvcc, mingw-w64 or rattler-build, torch.compile, waiting for a hung nvidia-smi or
# NVML to time out, and child interpreters that import torch.
SLOW_MODULES = (
    "tests/ops/test_ops_build.py",  # nvcc / setup.py builds of ops-src
    "tests/ops/test_dev_tools.py",  # nvcc compile of the kernel oracle
    "tests/recipes/test_rattler_build.py",  # a real rattler-build build
    "tests/recipes/test_recipe_test_script.py",  # the recipe's test script in child interpreters
    "tests/recipes/test_channel_offline.py",  # packages and installs prefixes
    "tests/windows/test_windows_cross_compile.py",  # mingw-w64 compiles
    "tests/doctor/test_doctor_cli.py",  # doctor in child processes
    "tests/doctor/test_doctor_imports.py",
    "tests/doctor/test_doctor_output.py",
    "tests/doctor/test_doctor_inputs.py",  # doctor against fake, hanging and broken drivers
    "tests/solver/test_fuzz_make_env.py",  # make-env run hundreds of times
    "tests/solver/test_make_env_solve.py",  # solves against channels served on loopback
    "tests/ops/test_cpu_neighbors_packed.py",  # builds a ctypes shim of the kernels
)
SLOW_WORDS = ("compile", "hanging", "hung", "environment_variable", "time_limit", "broken_driver")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = item.nodeid.split("::")[0]
        name = item.name.lower()
        if path in SLOW_MODULES or any(word in name for word in SLOW_WORDS):
            item.add_marker(pytest.mark.slow)
