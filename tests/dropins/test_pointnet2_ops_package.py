"""The pointnet2_ops distribution (ops-src/dropins/pointnet2_ops): the wheel `pip wheel --no-deps`
builds from the folder, what it holds and requires, and what its import does where pointops is
missing."""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile

import pytest
from pointnet2_dropin import child_env

pytestmark = pytest.mark.slow  # pip builds and child interpreters that import torch

MODULES = ("__init__", "_version", "pointnet2_utils", "pointnet2_modules")


def wheel_metadata(wheel) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(zf.read(name))


def test_one_pure_python_wheel_for_every_platform(pointnet2_ops_wheel):
    import pointnet2_ops

    assert pointnet2_ops_wheel.name == f"pointnet2_ops-{pointnet2_ops.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(pointnet2_ops_wheel) as zf:
        names = zf.namelist()
    assert sorted(n for n in names if not n.split("/")[0].endswith(".dist-info")) == sorted(
        f"pointnet2_ops/{m}.py" for m in MODULES
    )
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_wheel_requires_no_particular_pointops_build(pointnet2_ops_wheel):
    """pointops' CUDA wheels are other distributions (pointops-cu12, pointops-cu13) with the same
    import package: a plain requirement on `pointops` would make pip install the CPU wheel over
    them. The builds are extras; the import names them when none is installed."""
    meta = wheel_metadata(pointnet2_ops_wheel)
    assert meta["Name"] == "pointnet2_ops" and meta["Version"].startswith("3.0.0.post")
    assert meta["Requires-Python"] == ">=3.10" and meta["License-Expression"] == "BSD-3-Clause"
    requires = sorted(meta.get_all("Requires-Dist"))
    assert requires == [
        'pointops-cu12>=0.1; extra == "cu12"',
        'pointops-cu13>=0.1; extra == "cu13"',
        'pointops>=0.1; extra == "cpu"',
    ]


def run_child(site, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(site),
        cwd=site,
    )


def test_the_installed_wheel_serves_upstream_s_import_lines(pointnet2_ops_site):
    proc = run_child(
        pointnet2_ops_site,
        "import pointnet2_ops.pointnet2_modules as pointnet2_modules\n"
        "from pointnet2_ops import pointnet2_utils\n"
        "import pointops.compat.pointnet2_utils as compat, torch\n"
        "assert pointnet2_utils.ball_query is compat.ball_query\n"
        "layer = pointnet2_modules.PointnetSAModule([0, 8], npoint=4, radius=0.5, nsample=4)\n"
        "print(pointnet2_modules.__file__)\n"
        "print(tuple(layer(torch.rand(2, 16, 3), None)[1].shape))\n",
    )
    assert proc.returncode == 0, proc.stderr
    where, shape = proc.stdout.strip().splitlines()[-2:]
    assert where.startswith(str(pointnet2_ops_site)) and shape == "(2, 8, 4)"


BLOCK_POINTOPS = (
    "import importlib.abc, sys\n"
    "class Absent(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'pointops' or name.startswith('pointops.'):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, Absent())\n"
)


def test_without_pointops_the_import_says_what_to_install(pointnet2_ops_site):
    proc = run_child(
        pointnet2_ops_site,
        BLOCK_POINTOPS + "try:\n    import pointnet2_ops\nexcept ImportError as e:\n    print(e)\n",
    )
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert message.startswith("pointnet2_ops is served by pointops, which is not installed")
    assert "pip install pointops" in message and "pointops-cu13" in message and "conda install" in message
