"""Proof harness: openpoints 0.1.2 as published (the PyPI wheel, which ships no compiled ops)
builds PointNeXt-S for classification and runs forward + backward, with pointops providing the
`pointnet2_batch_cuda` module it imports.

    pip download openpoints==0.1.2 --no-deps -d .peers/openpoints_dist
    unzip -q .peers/openpoints_dist/openpoints-0.1.2-py3-none-any.whl -d .peers/openpoints-0.1.2
    python benchmarks/clients/openpoints_pointnext.py --openpoints .peers/openpoints-0.1.2 --device cuda

openpoints is imported from the given path, unmodified. Its ops wrappers allocate outputs with
torch.cuda.FloatTensor / IntTensor, so on a host without a GPU the run needs --cpu, which maps
those legacy constructors to CPU tensors (_shims.py); on CUDA nothing is changed. The model is
PointNeXt-S as configured for ScanObjectNN in PointNeXt (cfgs/scanobjectnn/pointnext-s.yaml):
width 32, blocks 1x6, strides 1,2,2,2,2,1, ball query r 0.15 (x1.5 per stage), 32 neighbours,
4 input channels (xyz + height), 15 classes. Checks: finite losses and a finite gradient on
every parameter after a few SGD steps. Prints one JSON line with the losses and timings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _shims  # noqa: E402

POINTNEXT_S = {
    "NAME": "BaseCls",
    "encoder_args": {
        "NAME": "PointNextEncoder",
        "blocks": [1, 1, 1, 1, 1, 1],
        "strides": [1, 2, 2, 2, 2, 1],
        "width": 32,
        "in_channels": 4,
        "sa_layers": 2,
        "sa_use_res": True,
        "radius": 0.15,
        "radius_scaling": 1.5,
        "nsample": 32,
        "expansion": 4,
        "aggr_args": {"feature_type": "dp_fj"},
        "reduction": "max",
        "group_args": {"NAME": "ballquery", "normalize_dp": True},
        "conv_args": {"order": "conv-norm-act"},
        "act_args": {"act": "relu"},
        "norm_args": {"norm": "bn"},
    },
    "cls_args": {"NAME": "ClsHead", "num_classes": 15, "mlps": [512, 256], "norm_args": {"norm": "bn1d"}},
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--openpoints", required=True, help="directory holding the openpoints package (unpacked wheel)"
    )
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--cpu", action="store_true", help="map torch.cuda.FloatTensor & co. to CPU (CPU hosts only)"
    )
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--points", type=int, default=1024)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--json", help="write the result here")
    args = p.parse_args()
    if args.cpu:
        _shims.install_cpu_legacy_constructors()
    sys.path.insert(0, os.path.abspath(args.openpoints))
    import pointnet2_batch_cuda
    from easydict import EasyDict
    from openpoints.models import build_model_from_cfg

    if not hasattr(pointnet2_batch_cuda, "furthest_point_sampling_wrapper"):
        raise SystemExit(f"{pointnet2_batch_cuda.__file__} lacks the openpoints functions")
    provider = pointnet2_batch_cuda.__file__
    print(f"pointnet2_batch_cuda from {provider}", flush=True)

    def to_easydict(d):
        return EasyDict({k: to_easydict(v) if isinstance(v, dict) else v for k, v in d.items()})

    torch.manual_seed(0)
    model = build_model_from_cfg(to_easydict(POINTNEXT_S)).to(args.device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    pos = (torch.rand(args.batch, args.points, 3, generator=g) * 2 - 1).to(args.device)
    height = pos[..., 2:3] - pos[..., 2:3].min(1, keepdim=True).values
    data = {"pos": pos.contiguous(), "x": torch.cat([pos, height], -1).transpose(1, 2).contiguous()}
    labels = torch.randint(0, 15, (args.batch,), generator=g).to(args.device)
    times, losses = [], []
    for _ in range(args.steps):
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(data)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    params = [(n, q) for n, q in model.named_parameters() if q.requires_grad]
    missing = [n for n, q in params if q.grad is None or not torch.isfinite(q.grad).all()]
    result = {
        "provider": provider,
        "device": args.device,
        "batch": args.batch,
        "points": args.points,
        "logits": list(logits.shape),
        "losses": losses,
        "step_seconds": times,
        "parameters": len(params),
        "parameters_without_finite_grad": missing,
        "ok": bool(all(map(lambda v: v == v, losses))) and not missing,
    }
    print(json.dumps(result), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
