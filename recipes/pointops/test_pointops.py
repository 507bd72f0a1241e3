"""The recipe's own test: runs in the test environment of every built package.

    python test_pointops.py --cuda 12.9 --target-platform linux-64 --python-min 3.10 [--torch 2.10]
    python test_pointops.py --cuda None --target-platform osx-arm64 --python-min 3.10

Checks that pointops imports, that build_info() reports the CUDA version of the variant it was
built for and the archs the arch table gives that version and platform (cuda_arch_list.py, the
build script's own derivation), that the extension is a real abi3 binary, that an op gives the
right answer on CPU, and on CUDA where a GPU is present. --torch X.Y also checks that the
environment's pytorch package is X.Y (the test of the oldest pytorch the package promises).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from cuda_arch_list import archs_for


def check_build_info(pointops, want_cuda: str, target_platform: str) -> None:
    info = pointops.build_info()
    got_cuda = info.get("cuda_version")
    if want_cuda == "None":
        assert not got_cuda, f"cpu variant, but build_info() says CUDA {got_cuda}"
        return
    assert str(got_cuda).startswith(want_cuda), f"built for CUDA {want_cuda}, build_info() says {got_cuda}"
    want_sass, want_ptx = archs_for(Path(pointops.__file__).parent, want_cuda, target_platform)
    got_sass = [str(a) for a in info.get("sass_archs", [])]
    assert got_sass == want_sass, f"SASS archs {got_sass}, variant wants {want_sass}"
    assert str(info.get("ptx_arch")) == str(want_ptx), (
        f"PTX arch {info.get('ptx_arch')}, variant wants {want_ptx}"
    )


def check_abi3(pointops, python_min: str) -> None:
    """The extension must use only the limited API of python_min (one build serves all Pythons)."""
    package_dir = Path(pointops.__file__).parent
    extensions = sorted(package_dir.glob("*.abi3.so")) + sorted(package_dir.glob("*.pyd"))
    assert extensions, f"no abi3 extension in {package_dir}: {sorted(p.name for p in package_dir.iterdir())}"
    abi3audit = shutil.which("abi3audit")
    if abi3audit is None:
        print("abi3audit not installed; skipping the symbol audit")
        return
    for ext in extensions:
        subprocess.run([abi3audit, str(ext), "-s", "-v", "--assume-minimum-abi3", python_min], check=True)


def check_pytorch_package(want: str) -> None:
    """The environment's conda pytorch package is version `want` (X.Y)."""
    records = sorted(Path(sys.prefix, "conda-meta").glob("pytorch-[0-9]*.json"))
    assert records, f"no pytorch package in {sys.prefix}/conda-meta"
    version = json.loads(records[0].read_text())["version"]
    assert version == want or version.startswith(want + "."), (
        f"pytorch {version} installed, the test wants {want}"
    )
    print("pytorch package", version)


def check_op(torch, device: str) -> None:
    # Four points on a line. Farthest point sampling from index 0 picks the far end (x=3), then
    # the point farthest from {0, 3}: x=1 is 1 away, x=2.5 only 0.5 -> index 1.
    xyz = torch.tensor([[[0.0, 0, 0], [1.0, 0, 0], [2.5, 0, 0], [3.0, 0, 0]]], device=device)
    idx = torch.ops.pointops.furthest_point_sample(xyz, 3, None, 0)
    assert idx.cpu().tolist() == [[0, 3, 1]], idx


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda", required=True, help="CUDA version of the variant, or None")
    parser.add_argument("--target-platform", required=True, help="conda platform of the build, e.g. linux-64")
    parser.add_argument("--python-min", required=True, help="oldest Python of the abi3 build")
    parser.add_argument("--torch", help="the pytorch version (X.Y) the environment must hold")
    args = parser.parse_args()
    import pointops
    import torch

    print(
        "pointops",
        getattr(pointops, "__version__", "?"),
        "on Python",
        sys.version.split()[0],
        "torch",
        torch.__version__,
    )
    if args.torch:
        check_pytorch_package(args.torch)
    check_build_info(pointops, args.cuda, args.target_platform)
    check_abi3(pointops, args.python_min)
    check_op(torch, "cpu")
    if torch.cuda.is_available() and args.cuda != "None":
        check_op(torch, "cuda")
        print("CUDA op checked on", torch.cuda.get_device_name(0))
    else:
        print("no GPU (or cpu variant): CUDA op not checked")
    print("pointops recipe test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
