"""A PointNet++ training step captured whole (issue 48): each of the six cases of the training
harness (benchmarks/clients/pointnet2_training.py: Pointnet2_PyTorch's models, unmodified, on
pointops' pointnet2_ops drop-in) at a small size, in a child interpreter (compile_peer_step.py):

- torch._dynamo.explain of the whole step (zero_grad, forward, loss, backward, SGD) finds no
  graph break in pointops' code (nor in the drop-in's); the breaks it finds are torch's own:
  SGD's step() (torch.optim breaks the graph around it on purpose) and, where this torch cannot
  trace Tensor.backward() (before trace_autograd_ops), the backward() call;
- the forward, loss and backward (forward and loss on such a torch) compile with fullgraph=True
  and give eager's loss and gradients;
- the whole step compiled gives eager's loss, gradients and updated parameters, recompiles for
  nothing when the point values change, and on CUDA syncs with the host nowhere inside the step.

The aot_eager backend everywhere (dynamo's capture and AOTAutograd's graphs, where the ops' fake
kernels and autograd formulas take part); on CUDA also inductor and mode="reduce-overhead" (CUDA
graphs), in float64 there: float32 rounding, amplified by batch norm over a batch of two, would
hide nothing but blur the comparison. The checkout is $POINTOPS_PEERS/Pointnet2_PyTorch or
.peers/Pointnet2_PyTorch of this repository (git-ignored; tests/helpers/peers.py fetches it); without
it the tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow  # a child interpreter per case that imports torch and compiles a model

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# the harness's cases at small sizes: the fewest points each model's first layer samples (512 for
# classification, 1024 for segmentation), more for the cases the harness runs at 4096 points
CASES = {
    "cls-ssg-1024": 512,
    "cls-ssg-4096": 768,
    "cls-msg-1024": 512,
    "cls-msg-4096": 768,
    "sem-ssg-4096": 1024,
    "sem-msg-4096": 1024,
}
TOLERANCE = {"float32": 1e-5, "float64": 1e-8}  # relative, for the loss, gradients and parameters


def compile_case(peer: Path, case: str, device: str, backend: str, dtype: str, mode: str = "default") -> dict:
    command = [sys.executable, str(HERE / "compile_peer_step.py"), str(peer), case, str(CASES[case])]
    proc = subprocess.run(
        [*command, device, backend, dtype, mode], capture_output=True, text=True, timeout=1500, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_captured_whole(report: dict, dtype: str, device: str) -> None:
    assert report["library_file"].endswith(os.path.join("pointnet2_ops", "pointnet2_utils.py"))
    for graph_break in report["explain"]["breaks"]:
        assert graph_break["source"] != "pointops", graph_break
        is_optimizer = "optimizer.py" in graph_break["where"]  # torch.optim's deliberate break
        is_backward = not report["backward_traced"] and "backward" in graph_break["reason"]
        assert is_optimizer or is_backward, graph_break
    tolerance = TOLERANCE[dtype]
    fullgraph, step = report["fullgraph"], report["step"]
    assert fullgraph["loss_rel"] <= tolerance and fullgraph["grads_rel"] <= tolerance, fullgraph
    assert step["loss_rel"] <= tolerance and step["grads_rel"] <= tolerance, step
    assert step["params_rel"] <= tolerance, step
    assert step["steady_loss_rel"] <= tolerance and step["steady_grads_rel"] <= tolerance, step
    assert step["recompiles"] == 0, step
    if device == "cuda":
        assert not step["host_syncs"]["synced"], step["host_syncs"]


def needs_cuda(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("case", list(CASES))
def test_the_training_step_compiles_whole(peer, case, device):
    needs_cuda(device)
    dtype = "float32" if device == "cpu" else "float64"  # cuDNN's algorithm choice is not bitwise stable
    assert_captured_whole(compile_case(peer, case, device, "aot_eager", dtype), dtype, device)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("case", "mode"),
    [("cls-ssg-1024", "default"), ("sem-msg-4096", "default"), ("sem-ssg-4096", "reduce-overhead")],
)
def test_the_training_step_compiles_with_inductor_on_cuda(peer, case, mode):
    needs_cuda("cuda")
    assert_captured_whole(compile_case(peer, case, "cuda", "inductor", "float64", mode), "float64", "cuda")


class BreakingModel(torch.nn.Module):
    """Two layers with a graph break between them, as pointnet2_ops' extension calls (or PTv2's
    data-dependent pooling without captured outputs) break a forward."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        hidden = self.first(x).relu()
        torch._dynamo.graph_break()
        return self.second(hidden)


def test_a_step_whose_forward_breaks_the_graph_still_trains_every_parameter():
    # a traced backward() (trace_autograd_ops) is not trusted after a break in the forward: PTv2's
    # compiled step ended with no gradients at all that way (aot_eager, CPU, torch 2.13). The
    # harness's capture_step keeps the backward outside the graph there; every gradient arrives.
    sys.path.insert(0, str(REPO / "benchmarks" / "clients"))
    import pointnet2_training as harness

    torch.manual_seed(0)
    model = BreakingModel()
    x = torch.randn(8, 3)
    initial = {k: v.clone() for k, v in model.state_dict().items()}

    def step_of(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            value = loss.detach().clone()
            loss.backward()
            opt.step()
            return value

        return step

    step_of(model)()
    expected = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.load_state_dict(initial)
    torch._dynamo.reset()
    try:
        capture = harness.capture_step(step_of(model), harness.code_owners(str(REPO), {}))
        assert not capture["backward_traced"]
        assert all(b["source"] != "pointops" for b in capture["explain"]["breaks"])
        model.load_state_dict(initial)
        torch.compile(step_of(model), backend="aot_eager")()
    finally:
        harness.configure_capture(trace_backward=False)  # this process's dynamo as it was
        torch._dynamo.reset()
    got = {k: p.grad for k, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad)


def _harness():
    sys.path.insert(0, str(REPO / "benchmarks" / "clients"))
    import pointnet2_training as harness

    return harness


def test_momentum_buffers_made_before_the_graphs_give_sgds_own_steps():
    # Under mode "reduce-overhead", buffers SGD makes in its first step would live in the CUDA
    # graphs' pool; the harness makes them first, as zeros. Every step must stay SGD's own, bitwise.
    harness = _harness()
    torch.manual_seed(0)
    x = torch.randn(16, 3)
    trajectories = []
    for premade in (False, True):
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        torch.manual_seed(1)
        for p in model.parameters():
            torch.nn.init.normal_(p)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if premade:
            harness.momentum_buffers_outside_graphs(opt)
            assert all(opt.state[p]["momentum_buffer"].count_nonzero() == 0 for p in model.parameters())
        params = []
        for _ in range(4):
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()
            params.append([p.detach().clone() for p in model.parameters()])
        trajectories.append(params)
    for without, with_premade in zip(*trajectories, strict=True):
        for a, b in zip(without, with_premade, strict=True):
            assert torch.equal(a, b)


def test_momentum_buffers_outside_graphs_keeps_existing_buffers_and_skips_plain_sgd():
    harness = _harness()
    p, q = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([{"params": [p], "momentum": 0.9}, {"params": [q]}], lr=0.1)
    kept = torch.full((3,), 7.0)
    opt.state[p]["momentum_buffer"] = kept
    harness.momentum_buffers_outside_graphs(opt)
    assert opt.state[p]["momentum_buffer"] is kept
    assert "momentum_buffer" not in opt.state[q]  # momentum 0: SGD keeps no buffer


def test_host_sync_count_ignores_the_sync_debug_modes_own_note(monkeypatch):
    # torch warns "Synchronization debug mode is a prototype feature ..." when the mode is set:
    # that note is no sync (it made every CUDA step look synced once). No GPU here: the mode
    # switch is a double that warns as torch 2.11 does; the step warns as a real sync does.
    import warnings

    harness = _harness()
    modes = []

    def set_mode(mode):
        if mode != "default":
            warnings.warn(
                "Synchronization debug mode is a prototype feature and does not yet detect all "
                "synchronizing operations",
                stacklevel=2,
            )
        modes.append(mode)

    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", set_mode)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    report = harness.host_syncs_in_step(
        lambda: warnings.warn("called a synchronizing CUDA operation", stacklevel=2), torch.device("cuda"), []
    )
    assert modes == ["warn", "default"]
    assert report["synced"] and [s["count"] for s in report["syncs"]] == [1]
    assert "synchronizing CUDA operation" in report["syncs"][0]["message"]


def _timed_run(round_medians):
    grads = {"w": torch.ones(3)}
    return {
        "median_step_ms": round_medians[0],
        "round_median_ms": round_medians,
        "first_call": {},
        "losses": [1.0],
        "grads": [grads, grads],
        "audit": [],
        "indices": {},
    }


@pytest.mark.parametrize(
    "rounds, status", [([3.0, 3.0, 5.0], "MISS"), ([3.0, 4.0, 3.5], "PASS"), ([5.0], "MISS")]
)
def test_a_compiled_row_passes_only_if_every_round_does(rounds, status):
    # --rounds R: round i of a variant against round i of pointnet2_ops' eager steps; the 0.4x
    # target of issue 48 must hold in every round, not only in the first
    harness = _harness()
    base = _timed_run([10.0] * len(rounds))
    report = harness.compare(
        {"cls-ssg-1024": {"pointnet2_ops": base, "pointops-compiled": _timed_run(rounds)}}, "pointnet2_ops"
    )
    (row,) = report["rows"]
    assert row["variant"] == "pointops-compiled"
    assert row["ratio"] == rounds[0] / 10.0
    assert row["round_ratios"] == [ms / 10.0 for ms in rounds]
    assert row["status"] == status


def test_each_run_records_its_host_and_the_report_keeps_it():
    # the small models' steps are host-bound: two runs' times compare only on like host CPUs
    harness = _harness()
    facts = harness.host_facts()
    assert facts["cpus"] == os.cpu_count()
    assert facts["load_1min"] is None or facts["load_1min"] >= 0
    if sys.platform == "linux":
        with open("/proc/cpuinfo") as f:
            assert facts["cpu"] and facts["cpu"] in f.read()
    runs = {"pointnet2_ops": _timed_run([10.0]), "pointops-compiled": _timed_run([3.0])}
    for run in runs.values():
        run["host"] = facts
    report = harness.compare({"cls-ssg-1024": runs}, "pointnet2_ops")
    assert {v["host"]["cpu"] for v in report["cases"]["cls-ssg-1024"]["variants"].values()} == {facts["cpu"]}
    # the CPU model string does not tell a slow host from a fast one; its measured speed does,
    # and each baseline row carries it
    assert facts["torch_op_us"] > 0
    (row,) = report["rows"]
    assert f"host {facts['torch_op_us']} µs a tiny torch op" in row["note"]


def test_the_host_speed_probe_times_torch_dispatch(monkeypatch):
    harness = _harness()
    usual = harness.torch_op_us(calls=200, rounds=3)
    add = torch.add

    def slow_add(*args, **kwargs):  # a host that takes 0.5 ms more per op
        time.sleep(0.0005)
        return add(*args, **kwargs)

    monkeypatch.setattr(torch, "add", slow_add)
    slow = harness.torch_op_us(calls=20, rounds=3)
    assert usual > 0
    assert slow > usual + 400
