"""Real environments for doctor to diagnose: a virtual environment with the real pointops wheel
installed by pip, then damaged the way users damage theirs (a truncated or deleted _C, torch
uninstalled). torch comes from this test environment through a .pth file that points to a folder of
links to its site-packages (everything but pointops), so no torch is downloaded or copied."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROVIDED_WHEEL = REPO / "out" / "ci-wheel"
OURS = ("pointops", "pointnet2_batch_cuda")


def pointops_wheel(out: Path) -> Path:
    """The CPU wheel of pointops: $POINTOPS_WHEEL, the one CI left in out/ci-wheel, else built here
    (`solver wheels build pointops`, several minutes)."""
    given = os.environ.get("POINTOPS_WHEEL")
    if given:
        return Path(given).resolve()
    found = sorted(PROVIDED_WHEEL.glob("pointops-*-abi3-*.whl"))
    if found:
        return found[-1]
    from solver.wheels import build_wheel

    return build_wheel("pointops", REPO / "ops-src", out, jobs=2)


def built_against_torch(wheel: Path) -> str:
    import json

    with zipfile.ZipFile(wheel) as zf:
        return json.loads(zf.read("pointops/_build_info.json"))["built_against_torch"]


def torch_provider(folder: Path) -> Path:
    """A folder of links to this interpreter's site-packages, without pointops and without .pth files."""
    import torch

    site = Path(torch.__file__).resolve().parents[1]
    folder.mkdir(parents=True, exist_ok=True)
    for entry in site.iterdir():
        skip = entry.name.startswith(OURS) or entry.suffix == ".pth" or entry.name.startswith("__editable__")
        if not skip and not (folder / entry.name).exists():
            (folder / entry.name).symlink_to(entry)
    return folder


class Venv:
    def __init__(self, root: Path):
        self.root = root
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        self.python = root / "bin" / "python"
        [self.site] = root.glob("lib/python3*/site-packages")

    def pip_install(self, *args: str) -> None:
        """pip of this test environment, installing into the venv (it has no pip of its own)."""
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(self.python), "install", "-q", "--no-index", *args],
            check=True,
            capture_output=True,
        )

    def add_torch(self, provider: Path) -> None:
        (self.site / "torch-from-tests.pth").write_text(f"{provider}\n")

    def run(self, code: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return subprocess.run(
            [str(self.python), "-c", code],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=self.root,
        )


def venv_with_pointops(root: Path, wheel: Path, provider: Path | None) -> Venv:
    """A venv with the pointops wheel installed by pip (from the file: direct_url.json names it) and,
    when `provider` is given, torch."""
    venv = Venv(root)
    venv.pip_install("--no-deps", str(wheel))  # before torch is visible: pip must not see another pointops
    # the loader under test is this checkout's, whatever commit the wheel was built at
    loader = REPO / "ops-src" / "pointops" / "_loader.py"
    (venv.site / "pointops" / "_loader.py").write_bytes(loader.read_bytes())
    if provider is not None:
        venv.add_torch(provider)
    return venv


def extension_of(venv: Venv) -> Path:
    [extension] = (venv.site / "pointops").glob("_C*.so")
    return extension
