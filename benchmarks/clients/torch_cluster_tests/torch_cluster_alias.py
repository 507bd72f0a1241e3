"""pytest plugin: runs torch_cluster's own test suite against pointops.compat.torch_cluster.

Loaded by run_peer_tests.py (`-p torch_cluster_alias`). Before collection it makes
`import torch_cluster` resolve to pointops' layer and loads the peer checkout's
torch_cluster/testing.py (test helpers: dtype and device lists) from the path in
POINTOPS_TORCH_CLUSTER_SRC as `torch_cluster.testing`. Nothing of the peer is copied.
"""

import importlib.util
import json
import os
import sys

import pointops.compat.torch_cluster as compat

_results = []


def pytest_configure(config):
    src = os.environ["POINTOPS_TORCH_CLUSTER_SRC"]
    compat.install_torch_cluster()
    path = os.path.join(src, "torch_cluster", "testing.py")
    spec = importlib.util.spec_from_file_location("torch_cluster.testing", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch_cluster.testing"] = module
    spec.loader.exec_module(module)


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _results.append(
            {
                "test": report.nodeid,
                "outcome": report.outcome,
                "message": str(report.longrepr)[-2000:] if report.failed else "",
            }
        )


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("POINTOPS_TORCH_CLUSTER_JSON")
    if out:
        with open(out, "w") as f:
            json.dump({"exitstatus": int(exitstatus), "results": _results}, f, indent=1)
