"""The proof of the drop-in: Pointnet2_PyTorch's four models (its pointnet2/models, unmodified,
from the peer checkout) built and trained two steps on the CPU with only pointops and the
installed pointnet2_ops wheel, in a child interpreter (train_peer_models.py).

The checkout is $POINTOPS_PEERS/Pointnet2_PyTorch or .peers/Pointnet2_PyTorch of this repository
(git-ignored; `python tests/helpers/peers.py` fetches it at the pinned commit, as tests/run.sh does).
Without it the test skips.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pointnet2_dropin import child_env

pytestmark = pytest.mark.slow  # child interpreters that import torch and train four models

HERE = Path(__file__).resolve().parent
MODELS = [
    "PointNet2ClassificationSSG",
    "PointNet2ClassificationMSG",
    "PointNet2SemSegSSG",
    "PointNet2SemSegMSG",
]


def train(peer: Path, site: Path, model: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(HERE / "train_peer_models.py"), str(peer), model],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(site),
        cwd=site,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model", MODELS)
def test_the_peer_s_model_trains_unmodified_on_the_installed_package(peer, pointnet2_ops_site, model):
    report = train(peer, pointnet2_ops_site, model)
    # the installed drop-in served the import, not the peer's compiled library
    assert Path(report["pointnet2_ops_file"]).is_relative_to(pointnet2_ops_site)
    assert report["pointnet2_ops_version"].startswith("3.0.0.post")
    assert not report["compiled_extension_loaded"]
    result = report["models"][model]
    assert "pointnet2_ops.pointnet2_modules.PointnetSAModule" in result["pointnet2_layers"] or (
        "pointnet2_ops.pointnet2_modules.PointnetSAModuleMSG" in result["pointnet2_layers"]
    )
    first, second = result["losses"]
    assert math.isfinite(first) and math.isfinite(second)
    assert result["parameters"] > 0
    assert result["without_grad"] == [] and result["nonfinite_grad"] == []
    assert second != first  # the step changed the parameters the loss depends on
