"""Runs torch_cluster's own tests (test_fps, test_knn, test_radius, test_nearest, test_grid)
against pointops.compat.torch_cluster, from a torch_cluster checkout given by path:

    python benchmarks/clients/torch_cluster_tests/run_peer_tests.py --src .peers/pytorch_cluster \
        [--json results.json] [-- extra pytest args]

On a machine with CUDA the peer tests add the 'cuda:0' device to their parameters themselves.
Exit status is pytest's.
"""

import argparse
import os
import sys

import pytest

TESTS = ["test_fps.py", "test_knn.py", "test_radius.py", "test_nearest.py", "test_grid.py"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--src", required=True, help="torch_cluster checkout (holds test/ and torch_cluster/)"
    )
    parser.add_argument("--json", help="write every test's outcome here")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    src = os.path.abspath(args.src)
    files = [os.path.join(src, "test", name) for name in TESTS]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        print(f"torch_cluster tests not found: {missing}", file=sys.stderr)
        return 2
    os.environ["POINTOPS_TORCH_CLUSTER_SRC"] = src
    if args.json:
        os.environ["POINTOPS_TORCH_CLUSTER_JSON"] = os.path.abspath(args.json)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    # our own empty ini: the peer's setup.cfg options do not apply, and its rootdir is not ours
    ini = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytest.ini")
    return pytest.main(
        [
            "-c",
            ini,
            "--rootdir",
            src,
            "-p",
            "torch_cluster_alias",
            "-rA",
            "-q",
            "-p",
            "no:cacheprovider",
            *files,
            *args.pytest_args,
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
