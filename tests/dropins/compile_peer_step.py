"""Child interpreter of test_training_step_compiles.py: one of the training harness's cases
(benchmarks/clients/pointnet2_training.py: Pointnet2_PyTorch's model, imported unmodified from the
peer's checkout, on pointops' pointnet2_ops drop-in) at a small size, its training step taken
eagerly and under torch.compile, compared. Prints one JSON object.

    python compile_peer_step.py PEER CASE POINTS DEVICE BACKEND DTYPE [MODE]

- explain: torch._dynamo.explain of the whole step (zero_grad, forward, cross-entropy, backward,
  SGD with momentum): its graphs and graph breaks by source (pointops, peer, torch, ...).
- fullgraph: the forward, loss and backward (forward and loss where this torch cannot trace
  Tensor.backward) compiled with fullgraph=True: loss and gradients against eager's.
- step: the whole step compiled (MODE: default or reduce-overhead): loss, gradients and the
  updated parameters against eager's step; two more steps (SGD's first step differs), a steady step
  from the initial weights (loss and gradients against eager's), then one on other point values
  of the same shapes (a recompile would mean a guard on values); on CUDA one
  more step under torch.cuda.set_sync_debug_mode (the harness's host_syncs_in_step: every host
  sync inside the step, with where it came from).
Dropout is off (compiled dropout draws other masks); on CUDA TF32 is off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "clients"))

import pointnet2_training as harness  # noqa: E402

BATCH = 2


def build(models, case: str, points: int, device: str, dtype: torch.dtype):
    """The case's model (dropout off) with its initial state, and a batch of `points` per cloud."""
    torch.manual_seed(0)
    model = getattr(models, harness.CASES[case][0])({"model.use_xyz": True})
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    model = model.to(device=device, dtype=dtype).train()
    data, labels = harness.synthetic_batch(case, BATCH, seed=0, points=points)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return model, initial, data.to(device=device, dtype=dtype), labels.to(device)


def grads_of(model) -> dict:
    return {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}


def worst_rel(got: dict, expected: dict) -> float:
    """The largest relative L2 difference over the entries (inf for a missing one), each measured
    against at least 1e-6 of the norm of them all. Some gradients are zero in exact arithmetic (a
    batch-norm bias whose shift a later batch norm removes: 1.6e-13 against 2.4e3 in cls-ssg,
    4e-17 in sem-ssg); what they hold is rounding noise, bitwise equal between eager and compiled
    on the CPU but not between CUDA kernels, and it has no relative size of its own."""
    floor = 1e-6 * sum(float(e.double().norm()) ** 2 for e in expected.values()) ** 0.5
    worst = 0.0
    for key, e in expected.items():
        if key not in got:
            return float("inf")
        denominator = max(float(e.double().norm()), floor) or 1.0
        worst = max(worst, float((got[key].double() - e.double()).norm()) / denominator)
    return worst


def fresh_step(model, initial, data, labels) -> tuple:
    """The harness's training step on a model reset to its initial state, with a new SGD:
    (step, optimizer)."""
    model.load_state_dict(initial)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    return harness.make_step(model, opt, data, labels), opt


def parameters_of(model) -> dict:
    return {k: p.detach().clone() for k, p in model.named_parameters()}


def eager_reference(model, initial, data, labels) -> dict:
    step, _ = fresh_step(model, initial, data, labels)
    loss = step()
    return {"loss": loss, "grads": grads_of(model), "params": parameters_of(model)}


def fullgraph_check(model, initial, data, labels, backend: str, backward_traced: bool, eager: dict) -> dict:
    model.load_state_dict(initial)
    model.zero_grad(set_to_none=True)

    def forward_backward():
        loss = harness.loss_of(model, data, labels)
        value = loss.detach().clone()
        loss.backward()
        return value

    def forward():
        return harness.loss_of(model, data, labels)

    torch._dynamo.reset()
    if backward_traced:
        loss = torch.compile(forward_backward, fullgraph=True, backend=backend)()
    else:
        loss = torch.compile(forward, fullgraph=True, backend=backend)()
        loss.backward()
    return {
        "captured": "forward, loss and backward" if backward_traced else "forward and loss",
        "loss_rel": abs(float(loss) - float(eager["loss"])) / abs(float(eager["loss"])),
        "grads_rel": worst_rel(grads_of(model), eager["grads"]),
    }


def step_check(
    model, initial, data, labels, backend: str, mode: str, device: str, eager: dict, owners
) -> dict:
    torch._dynamo.reset()
    plain, opt = fresh_step(model, initial, data, labels)
    step = harness.compile_step(plain, mode, backend, optimizer=opt)
    loss = step()
    out = {
        "loss_rel": abs(float(loss) - float(eager["loss"])) / abs(float(eager["loss"])),
        "grads_rel": worst_rel(grads_of(model), eager["grads"]),
        "params_rel": worst_rel(parameters_of(model), eager["params"]),
    }
    # SGD's first step creates its momentum buffers (another graph); with reduce-overhead the
    # next calls record and replay the CUDA graphs. Then a steady call from the initial weights:
    # its loss and gradients are eager's first step's (the momentum no longer is)
    step()
    step()
    model.load_state_dict(initial)
    loss = step()
    out["steady_loss_rel"] = abs(float(loss) - float(eager["loss"])) / abs(float(eager["loss"]))
    out["steady_grads_rel"] = worst_rel(grads_of(model), eager["grads"])
    graphs = harness.dynamo_counters()["unique_graphs"]
    with torch.no_grad():
        data.copy_(data.flip(0))  # other values, the same shapes
    step()
    out["recompiles"] = harness.dynamo_counters()["unique_graphs"] - graphs
    out["host_syncs"] = harness.host_syncs_in_step(step, torch.device(device), owners)
    return out


def main() -> int:
    peer, case, points, device, backend, dtype_name = sys.argv[1:7]
    mode = sys.argv[7] if len(sys.argv) > 7 else "default"
    dtype = getattr(torch, dtype_name)
    if device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    harness.install_standins()
    library = harness.import_library("pointops", peer, None)
    models = harness.import_models(peer)
    capture = harness.configure_capture()
    backward_traced = capture["backward_traced"]
    model, initial, data, labels = build(models, case, int(points), device, dtype)

    eager = eager_reference(model, initial, data, labels)
    owners = harness.code_owners(peer, harness.library_owners(library))
    explained = harness.explain_step(fresh_step(model, initial, data, labels)[0], owners)
    report = {
        "torch": torch.__version__,
        "library_file": library.__file__,
        "backward_traced": backward_traced,
        "explain": explained,
        "fullgraph": fullgraph_check(model, initial, data, labels, backend, backward_traced, eager),
        "step": step_check(model, initial, data, labels, backend, mode, device, eager, owners),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
