"""Child interpreter of test_pointnet2_models_unmodified.py: Pointnet2_PyTorch's models, imported
unmodified from the peer's checkout, take two training steps on the CPU with pointnet2_ops being
whatever `import pointnet2_ops` finds (the test puts the installed drop-in first on the path).

    python train_peer_models.py PEER MODEL [MODEL ...]    # prints one JSON object

The models' imports get the training harness's stand-ins (benchmarks/clients/pointnet2_training.py):
pytorch_lightning's LightningModule is nn.Module (the models assign self.hparams, which Lightning
>= 1.3 forbids; a step uses no Lightning machinery), and the data-loading modules they import
(torchvision, h5py, lmdb, msgpack_numpy, tqdm) are inert where absent.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
# model: (points per cloud, feature channels beyond xyz, classes, task); the fewest points the
# model's first layer samples (npoint 512 for classification, 1024 for segmentation)
SHAPES = {
    "PointNet2ClassificationSSG": (512, 3, 40, "cls"),
    "PointNet2ClassificationMSG": (512, 3, 40, "cls"),
    "PointNet2SemSegSSG": (1024, 6, 13, "sem"),
    "PointNet2SemSegMSG": (1024, 6, 13, "sem"),
}
BATCH = 2


def batch_for(model_name: str, seed: int = 0):
    """(points [B, N, 3 + C] in the unit cube, labels): per cloud or per point."""
    n, channels, classes, task = SHAPES[model_name]
    g = torch.Generator().manual_seed(seed)
    points = torch.rand(BATCH, n, 3 + channels, generator=g)
    shape = (BATCH,) if task == "cls" else (BATCH, n)
    return points, torch.randint(classes, shape, generator=g)


def two_steps(models, model_name: str) -> dict:
    torch.manual_seed(0)
    model = getattr(models, model_name)({"model.use_xyz": True})
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    points, labels = batch_for(model_name)
    losses, without_grad, nonfinite = [], set(), set()
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(points), labels)
        loss.backward()
        losses.append(float(loss.detach()))
        for name, p in model.named_parameters():
            if p.grad is None:
                without_grad.add(name)
            elif not bool(torch.isfinite(p.grad).all()):
                nonfinite.add(name)
        opt.step()
    layer_types = {type(m).__module__ + "." + type(m).__name__ for m in model.modules()}
    return {
        "losses": losses,
        "parameters": sum(1 for _ in model.parameters()),
        "without_grad": sorted(without_grad),
        "nonfinite_grad": sorted(nonfinite),
        "pointnet2_layers": sorted(t for t in layer_types if "pointnet2_ops" in t or "pointops" in t),
    }


def main() -> int:
    peer, names = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, str(REPO / "benchmarks" / "clients"))
    from pointnet2_training import install_standins

    standins = install_standins()
    import pointnet2_ops

    sys.path.insert(0, peer)
    models = importlib.import_module("pointnet2.models")
    report = {
        "pointnet2_ops_file": pointnet2_ops.__file__,
        "pointnet2_ops_version": pointnet2_ops.__version__,
        "standins": standins,
        "models": {name: two_steps(models, name) for name in names},
        "compiled_extension_loaded": any(m.startswith("pointnet2_ops._ext") for m in sys.modules),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
