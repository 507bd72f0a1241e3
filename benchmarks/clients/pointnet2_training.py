"""Real-client benchmark: Pointnet2_PyTorch's four PointNet++ models (unmodified) take full
training steps (forward, cross-entropy, backward, SGD) with pointnet2_ops, the library they
were written for, and with pointops' pointnet2_ops drop-in in its place.

    # on the GPU host: the peer checkout in .peers/Pointnet2_PyTorch, pointnet2_ops built into
    # .peers/build/pointnet2_ops by benchmarks/peers/build_peers.sh
    python benchmarks/clients/pointnet2_training.py all --peer .peers/Pointnet2_PyTorch \
        --pointnet2-ops .peers/build/pointnet2_ops --device cuda --out-dir out/pointnet2 \
        --json out/pointnet2/report.json

    # CPU smoke run (pointops and the plain-torch oracle only)
    python benchmarks/clients/pointnet2_training.py all --peer .peers/Pointnet2_PyTorch \
        --device cpu --batch 2 --steps 1 --warmup 0 --variants pointops torch --out-dir out/p2cpu

    # compiled training steps (issue 48): adds pointnet2_ops-compiled, pointops-compiled,
    # pointnet2_ops-cudagraphs and pointops-cudagraphs to the two eager variants
    python benchmarks/clients/pointnet2_training.py all --peer .peers/Pointnet2_PyTorch \
        --pointnet2-ops .peers/build/pointnet2_ops --device cuda --no-dropout \
        --compile default --compile reduce-overhead --out-dir out/pn2-compiled \
        --json out/pn2-compiled/report.json

Variants, each in its own fresh process per model (the libraries never meet in one process):
- pointnet2_ops: the peer's compiled library, imported from --pointnet2-ops (a pip --target
  directory) or from site-packages.
- pointops, pointops-nochecks (value checks off), pointops-contiguous (QueryAndGroup's groups in
  pointnet2_ops' contiguous layout instead of channels_last): the pointnet2_ops package that
  pointops serves (ops-src/dropins/pointnet2_ops: its pointnet2_utils and pointnet2_modules), as
  `import pointnet2_ops` finds it when that is the drop-in (pip install ops-src/dropins/pointnet2_ops),
  else the source tree's copy (pure Python, the same package); nothing is swapped. The report's
  library_file says which.
- torch, torch-fma: the peer's pointnet2_modules.py, loaded from the checkout unmodified, with
  `pointnet2_ops.pointnet2_utils` resolved to _pointnet2_reference.py (a sys.modules alias installed
  before the import), pointnet2_ops' behaviour in plain torch (torch-fma rounds the float32 sums as
  pointnet2_ops' CUDA kernels do). Any device.
- float64: the same in float64, model and data (the searches still on float32 points, so that
  it picks the float32 variants' samples and neighbours): the float32 variants' gradients
  compared with it (--baseline float64) tell how far float32 rounding alone moves them.

Cases (batch 16 by default): cls-ssg and cls-msg at 1024 and 4096 points (xyz + 3 feature
channels, 40 classes), sem-ssg and sem-msg at 4096 points (xyz + 6 channels, 13 classes per
point). Synthetic data from a seeded generator: points in the unit ball (classification) or the
unit cube (segmentation), none with |p|^2 <= 2e-3, because pointnet2_ops' FPS never picks those
(a documented pointops difference that would otherwise change the samples).

Every process, in order: imports torch, initialises the device, runs a small plain-torch model
(conv 1x1, batch norm, max pool, cross-entropy) for two steps (torch's own first-call cost),
imports the library and the model modules, builds the model (the first variant saves its
initial weights, the others load them), times the first step phase by phase, runs --warmup
steps, times --steps steps (CUDA events; the median is reported; with --rounds R, R such rounds
one after another, the first compiled once for all: the report's round ratios pair each round
with the baseline's round of the same number, and a row passes only if every round does), then
reloads the initial
weights and takes two gradient steps with the same data and dropout seed: their gradients
(saved) give the variant's run-to-run difference, and during the first one every
pointnet2_utils call is recorded: index outputs (compared across variants) and each op's
forward/backward error against the plain-torch reference in float64 (the audit).

Compiled steps (issue 48): `--compile default` / `--compile reduce-overhead` (repeatable; `none`,
the default, adds nothing) add variants NAME-compiled / NAME-cudagraphs of the pointops variants
and of pointnet2_ops that are in --variants: the whole training step (zero_grad, forward, loss,
backward, SGD step) under torch.compile with that mode. With torch._dynamo.config.trace_autograd_ops
(torch >= 2.13) the backward is traced into the forward's graph, unless the forward itself breaks
the graph (pointnet2_ops' extension calls do; PTv2 with the traced backward, aot_eager, CPU,
torch 2.13, ended its compiled step with no parameter gradient at all and no error), so there,
as on older torch, Tensor.backward() is a graph break of torch's and AOTAutograd's compiled
backward of each forward graph runs. SGD's
step() is a graph of its own: torch.optim breaks the graph around it on purpose (_use_grad).
Before compiling, torch._dynamo.explain runs the step: its graph count and each graph break, with
the code it comes from (pointops: the stack passes through pointops or its drop-in; else the owner
of the innermost frame: pointnet2_ops, peer, torch, harness). The first call (tracing and
compilation) is timed apart from the steady steps; the dynamo counters after the timed steps say
whether anything recompiled. On CUDA every variant runs one more step under
torch.cuda.set_sync_debug_mode (at "warn", so that every host sync is recorded with the code it
came from, where "error" would stop at the first). Compiled variants are not audited (the
recording wrappers would be traced), and list any parameter left without a gradient; compare
their gradients with --no-dropout (compiled dropout draws other masks). The first call depends on
inductor's on-disk cache: --fresh-compile-cache gives every process an empty one.

`all` prints a table and writes --json; `run` is one process, `compare` re-reads the results.
Stand-ins: pytorch_lightning's LightningModule is replaced by nn.Module (the models assign
self.hparams, which Lightning >= 1.3 forbids, and no Lightning machinery is part of a step);
torchvision, h5py, lmdb, msgpack_numpy and tqdm get inert modules only when absent (the
models' data-loading code imports them; a step never calls them).
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()
import torch  # noqa: E402

_T_TORCH = time.perf_counter() - _T0

import argparse  # noqa: E402
import collections  # noqa: E402
import glob  # noqa: E402
import importlib  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402

import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(HERE))  # benchmarks/, for bench_common (appended: it shadows nothing)
from bench_common import cpu_model, median_host_us  # noqa: E402

DROPIN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "ops-src", "dropins", "pointnet2_ops")

CASES = {  # name: (model class, points, input channels beyond xyz, classes, task)
    "cls-ssg-1024": ("PointNet2ClassificationSSG", 1024, 3, 40, "cls"),
    "cls-ssg-4096": ("PointNet2ClassificationSSG", 4096, 3, 40, "cls"),
    "cls-msg-1024": ("PointNet2ClassificationMSG", 1024, 3, 40, "cls"),
    "cls-msg-4096": ("PointNet2ClassificationMSG", 4096, 3, 40, "cls"),
    "sem-ssg-4096": ("PointNet2SemSegSSG", 4096, 6, 13, "sem"),
    "sem-msg-4096": ("PointNet2SemSegMSG", 4096, 6, 13, "sem"),
}
VARIANTS = (
    "pointnet2_ops",
    "pointops",
    "pointops-nochecks",
    "pointops-contiguous",
    "torch",
    "torch-fma",
    "float64",
)
# torch.compile mode -> the suffix of its variants; the variants that can be compiled
COMPILE_MODES = {"default": "compiled", "reduce-overhead": "cudagraphs"}
COMPILABLE = ("pointnet2_ops", "pointops", "pointops-nochecks", "pointops-contiguous")
AUDITED = (
    "furthest_point_sample",
    "gather_operation",
    "ball_query",
    "grouping_operation",
    "three_nn",
    "three_interpolate",
)


# ---------------------------------------------------------------------------------------------
# imports: stand-ins, the library, the peer's model code


class _Inert(types.ModuleType):
    """An absent third-party module the models import but a training step never uses. It has a
    module spec: torch._dynamo (imported by torch.optim) calls importlib's find_spec on tqdm and
    other names, which raises for a module in sys.modules whose __spec__ is None."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__spec__ = importlib.machinery.ModuleSpec(name, None)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(
            f"{self.__name__} is not installed; the pointnet2_training harness only stands in "
            f"for it so that the model modules import ({self.__name__}.{name} was used)"
        )


def install_standins() -> list[str]:
    installed = []
    lightning = types.ModuleType("pytorch_lightning")
    lightning.LightningModule = type(
        "LightningModule",
        (nn.Module,),
        {"__doc__": "nn.Module standing in for Lightning's (pointnet2_training harness)"},
    )
    sys.modules["pytorch_lightning"] = lightning
    installed.append("pytorch_lightning (LightningModule = nn.Module)")
    for name in ("torchvision", "h5py", "lmdb", "msgpack_numpy", "tqdm"):
        if importlib.util.find_spec(name) is None:
            sys.modules[name] = _Inert(name)
            installed.append(name)
    if isinstance(sys.modules.get("torchvision"), _Inert):
        transforms = _Inert("torchvision.transforms")
        sys.modules["torchvision.transforms"] = transforms
        sys.modules["torchvision"].__dict__["transforms"] = transforms
    return installed


def _alias_pointnet2_utils(peer: str, utils_module: types.ModuleType) -> None:
    """`pointnet2_ops` = the peer's package directory, without its __init__ (which imports the
    compiled extension), with `pointnet2_ops.pointnet2_utils` resolved to utils_module."""
    package = types.ModuleType("pointnet2_ops")
    package.__path__ = [os.path.join(peer, "pointnet2_ops_lib", "pointnet2_ops")]
    package.pointnet2_utils = utils_module
    sys.modules["pointnet2_ops"] = package
    sys.modules["pointnet2_ops.pointnet2_utils"] = utils_module


def _is_compiled_pointnet2_ops(spec) -> bool:
    """Whether the pointnet2_ops package `spec` locates is Pointnet2_PyTorch's compiled library
    (an _ext extension or its sources beside the modules), found without importing it."""
    locations = list(spec.submodule_search_locations or [])
    return any(glob.glob(os.path.join(location, "_ext*")) for location in locations)


def import_dropin() -> types.ModuleType:
    """pointops' pointnet2_ops drop-in: the installed package when `import pointnet2_ops` finds
    it, else the source tree's (also where the compiled library is what is installed)."""
    spec = importlib.util.find_spec("pointnet2_ops")
    if spec is None or _is_compiled_pointnet2_ops(spec):
        if not os.path.isfile(os.path.join(DROPIN, "pointnet2_ops", "pointnet2_modules.py")):
            raise SystemExit(
                f"the pointnet2_ops drop-in is neither installed nor at {DROPIN}: "
                "pip install ops-src/dropins/pointnet2_ops of a pointops checkout"
            )
        sys.path.insert(0, DROPIN)
    from pointnet2_ops import pointnet2_utils

    if hasattr(pointnet2_utils, "_ext"):
        raise SystemExit(f"{pointnet2_utils.__file__} is the compiled pointnet2_ops, not pointops' drop-in")
    return pointnet2_utils


def recorded_modules(library: types.ModuleType) -> list[types.ModuleType]:
    """The modules whose functions a step calls: the library's pointnet2_utils and, for the
    drop-in, pointops.compat.pointnet2_utils, whose QueryAndGroup calls its own module's
    ball_query and grouping_operation."""
    compat = sys.modules.get("pointops.compat.pointnet2_utils")
    return [library] + ([compat] if compat is not None and compat is not library else [])


def import_library(variant: str, peer: str, site_dir: str | None) -> types.ModuleType:
    """Makes `pointnet2_ops.pointnet2_utils` importable for the variant; returns that module."""
    if variant == "pointnet2_ops":
        if site_dir:
            site_dir = os.path.abspath(site_dir)
            if not glob.glob(os.path.join(site_dir, "pointnet2_ops", "_ext*.so")):
                raise SystemExit(
                    f"no compiled pointnet2_ops in {site_dir} (pointnet2_ops/_ext*.so): build it with "
                    "benchmarks/peers/build_peers.sh, or pass the directory it was installed into"
                )
            sys.path.insert(0, site_dir)
        from pointnet2_ops import pointnet2_utils  # its __init__ also imports pointnet2_modules

        if not hasattr(pointnet2_utils, "_ext"):
            raise SystemExit(
                f"the pointnet2_ops at {pointnet2_utils.__file__} is pointops' drop-in, not Pointnet2_PyTorch's "
                "compiled library: pass --pointnet2-ops DIR (see build_peers.sh)"
            )
        where = os.path.abspath(pointnet2_utils._ext.__file__)
        if site_dir and not where.startswith(site_dir + os.sep):
            raise SystemExit(f"pointnet2_ops' extension came from {where}, not from {site_dir}")
        return pointnet2_utils
    if variant.startswith("pointops"):
        import pointops
        from pointops.compat import pointnet2_utils as compat

        if variant == "pointops-nochecks":
            pointops.set_value_checks(False)
        if variant == "pointops-contiguous":
            compat.CHANNELS_LAST = False  # the switch lives in the compat module the drop-in re-exports
        return import_dropin()
    sys.path.insert(0, HERE)
    import _pointnet2_reference as reference

    reference.EMULATE_FMA = variant == "torch-fma"
    reference.SEARCH_FLOAT32 = variant == "float64"
    _alias_pointnet2_utils(peer, reference)
    return reference


def import_models(peer: str) -> types.ModuleType:
    sys.path.insert(0, os.path.abspath(peer))
    return importlib.import_module("pointnet2.models")


def check_separation(variant: str) -> None:
    """The two libraries never share a process."""
    ours = "pointops" in sys.modules
    theirs = any(name.startswith("pointnet2_ops._ext") for name in sys.modules)
    if (variant == "pointnet2_ops" and ours) or (variant != "pointnet2_ops" and theirs):
        raise SystemExit(f"{variant} run: pointops and pointnet2_ops' extension were both imported")


# ---------------------------------------------------------------------------------------------
# data, timing


def synthetic_batch(case: str, batch: int, seed: int, points: int | None = None):
    """(points [B, N, 3 + C], labels) on the CPU, the same for every variant; N is the case's
    unless `points` is given (the tests' small clouds)."""
    _, n, channels, classes, task = CASES[case]
    n = points or n
    g = torch.Generator().manual_seed(seed)

    def sample(count):
        if task == "cls":  # unit ball, as ModelNet40's normalised shapes
            p = torch.randn(count, 3, generator=g)
            return p / p.norm(dim=1, keepdim=True) * torch.rand(count, 1, generator=g).pow(1 / 3)
        return torch.rand(count, 3, generator=g)  # a unit block, as S3DIS' blocks

    xyz = sample(batch * n)
    while True:  # keep points away from the origin (pointnet2_ops' FPS skips |p|^2 <= 1e-3)
        near = (xyz * xyz).sum(1) <= 2e-3
        if not bool(near.any()):
            break
        xyz[near] = sample(int(near.sum()))
    xyz = xyz.view(batch, n, 3)
    if task == "cls":
        normals = torch.randn(batch, n, 3, generator=g)
        feats = normals / normals.norm(dim=2, keepdim=True)
        labels = torch.randint(classes, (batch,), generator=g)
    else:  # colour and the position in the block
        feats = torch.cat([torch.rand(batch, n, 3, generator=g), xyz], dim=2)
        labels = torch.randint(classes, (batch, n), generator=g)
    return torch.cat([xyz, feats], dim=2).contiguous(), labels


class Clock:
    """Wall time with the device drained at both ends."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def __call__(self, fn):
        self.sync()
        t = time.perf_counter()
        out = fn()
        self.sync()
        return out, (time.perf_counter() - t) * 1e3


def plain_torch_first_calls(device: torch.device, clock: Clock) -> dict:
    """torch's own first-call costs: a small model of the same layer types, two steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(9, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True)).to(device)
    head = nn.Conv1d(64, 13, 1).to(device)
    opt = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=1e-3, momentum=0.9)
    x = torch.randn(4, 9, 256, 32, device=device)
    y = torch.randint(13, (4, 256), device=device)
    out = {}
    for i in (1, 2):
        opt.zero_grad(set_to_none=True)
        loss, out[f"fwd{i}_ms"] = clock(lambda: F.cross_entropy(head(model(x).amax(dim=3)), y))
        _, out[f"bwd{i}_ms"] = clock(loss.backward)
        _, out[f"opt{i}_ms"] = clock(opt.step)
    return out


def loss_of(model, points, labels):
    return F.cross_entropy(model(points), labels)


# ---------------------------------------------------------------------------------------------
# the audit: every pointnet2_utils call of one step, checked against float64 plain torch


def _rel(a: Tensor, b: Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


class Recorder:
    """Wraps the audited functions of the pointnet2_utils modules a step calls (recorded_modules),
    for one step."""

    def __init__(self, modules: list[types.ModuleType]):
        self.modules, self.calls, self.saved = modules, [], []
        self.inside_ball_query = False

    def __enter__(self):
        for module in self.modules:
            for name in AUDITED:
                self._patch(module, name, self._wrap(name, getattr(module, name)))
            # pointops' QueryAndGroup on CUDA groups in channels_last from the native ball query
            # (int64, -1 for an empty ball) without calling ball_query: record those calls as
            # ball_query, in pointnet2_ops' convention, so that its indices are audited too
            native = getattr(module, "_native_ball_query", None)
            if native is not None:
                self._patch(module, "_native_ball_query", self._wrap_native(module, native))
        return self

    def __exit__(self, *exc):
        for module, name, fn in reversed(self.saved):
            setattr(module, name, fn)

    def _patch(self, module, name, fn):
        self.saved.append((module, name, getattr(module, name)))
        setattr(module, name, fn)

    def _wrap_native(self, module, native):
        def native_recorded(*args):
            idx = native(*args)
            if not self.inside_ball_query:  # else ball_query records it
                self._record("ball_query", args, module._int32(idx))
            return idx

        return native_recorded

    def _wrap(self, name, fn):
        def recorded(*args):
            self.inside_ball_query = name == "ball_query"
            try:
                out = fn(*args)
            finally:
                self.inside_ball_query = False
            self._record(name, args, out)
            return out

        return recorded

    def _record(self, name, args, out):
        call = {"op": name, "args": [a.detach().clone() if torch.is_tensor(a) else a for a in args]}
        if name in ("gather_operation", "grouping_operation", "three_interpolate"):
            call["out"] = out.detach().clone()
            if out.requires_grad:
                out.register_hook(lambda g: call.__setitem__("grad_out", g.detach().clone()))
        elif name == "three_nn":
            call["out"] = tuple(t.detach().clone() for t in out)
        else:
            call["out"] = out.detach().clone()
        self.calls.append(call)


def audit(calls: list, library: types.ModuleType) -> tuple[list, dict]:
    """Per call: the shapes, and the library's error against the reference; plus the index
    outputs for the cross-variant comparison."""
    sys.path.insert(0, HERE)
    import _pointnet2_reference as ref

    emulate, ref.EMULATE_FMA = ref.EMULATE_FMA, False
    rows, indices = [], {}
    try:
        ordinal: dict = {}
        for i, call in enumerate(calls):
            op, args, out = call["op"], call["args"], call["out"]
            row = {"call": i, "op": op, "shapes": [list(a.shape) if torch.is_tensor(a) else a for a in args]}
            # the n-th call of this op: variants that group differently make different other calls
            ordinal[op] = ordinal.get(op, -1) + 1
            key = f"{ordinal[op]}:{op}"
            if op == "furthest_point_sample":
                expect = ref.furthest_point_sample(args[0], args[1])
                row["rows_differing"] = int((expect != out.to(expect.dtype)).any(dim=1).sum())
                indices[key] = out.cpu()
            elif op == "ball_query":
                expect = ref.ball_query(args[0], args[1], args[2], args[3])
                row["balls_differing"] = int((expect != out.to(expect.dtype)).any(dim=2).sum())
                indices[key] = out.cpu()
            elif op == "three_nn":
                dist, idx = out
                e_dist, e_idx = ref.three_nn(args[0].double(), args[1].double())
                row["rows_differing_idx"] = int((e_idx != idx.to(e_idx.dtype)).any(dim=2).sum())
                same = e_idx == idx.to(e_idx.dtype)
                row["dist_rel_err"] = _rel(dist[same], e_dist[same]) if bool(same.any()) else None
                indices[key] = idx.cpu()
                indices[key + ":dist"] = dist.cpu()
            else:
                ref_fn = getattr(ref, op)
                feat = args[0].double().requires_grad_(True)
                expect = ref_fn(
                    feat,
                    *[a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args[1:]],
                )
                row["fwd_rel_err"] = _rel(out, expect)
                if "grad_out" in call:
                    g = call["grad_out"]
                    (e_grad,) = torch.autograd.grad(expect, feat, g.double())
                    lib_feat = args[0].clone().requires_grad_(True)
                    (lib_grad,) = torch.autograd.grad(getattr(library, op)(lib_feat, *args[1:]), lib_feat, g)
                    row["bwd_rel_err"] = _rel(lib_grad, e_grad)
            rows.append(row)
    finally:
        ref.EMULATE_FMA = emulate
    return rows, indices


# ---------------------------------------------------------------------------------------------
# compiled steps: capture settings, graph breaks, host syncs


def variant_name(base: str, mode: str) -> str:
    """The name a variant's results go by: the base name, with -compiled / -cudagraphs when compiled."""
    return base if mode == "none" else f"{base}-{COMPILE_MODES[mode]}"


def split_variant(name: str) -> tuple[str, str]:
    """variant_name's inverse: (base variant, torch.compile mode or "none")."""
    for mode, suffix in COMPILE_MODES.items():
        if name.endswith("-" + suffix) and name[: -len(suffix) - 1] in COMPILABLE:
            return name[: -len(suffix) - 1], mode
    return name, "none"


def configure_capture(dynamic_outputs: bool = False, trace_backward: bool = True) -> dict:
    """Dynamo settings for a whole step; says where the backward and the optimizer step run.
    dynamic_outputs: capture ops whose output sizes are data (torch.unique, bincount, .item()),
    as Pointcept's PTv2 pools with, instead of breaking the graph there. trace_backward: trace
    Tensor.backward() into the graph where this torch can (trace_autograd_ops, torch >= 2.13)."""
    config = torch._dynamo.config
    backward_traced = trace_backward and hasattr(config, "trace_autograd_ops")
    if hasattr(config, "trace_autograd_ops"):
        config.trace_autograd_ops = backward_traced
    config.capture_dynamic_output_shape_ops = config.capture_scalar_outputs = dynamic_outputs
    return {
        "dynamic_outputs": dynamic_outputs,
        "backward_traced": backward_traced,
        "backward": "in the step's graph (trace_autograd_ops)"
        if backward_traced
        else "a graph break of torch's at Tensor.backward(); AOTAutograd's compiled backward runs there",
        "optimizer": "its own graph: torch.optim breaks the graph around step() on purpose (_use_grad)",
    }


def breaks_before_backward(explained: dict) -> list[dict]:
    """explain's graph breaks other than torch.optim's around step() (and backward() itself)."""
    return [
        b
        for b in explained["breaks"]
        if not b["where"].startswith("optimizer.py") and "Tensor.backward()" not in b["reason"]
    ]


def capture_step(step, owners: list, dynamic_outputs: bool = False) -> dict:
    """Configures dynamo for the whole step and explains it (explain runs the step once). The
    traced backward() is kept only for a forward without graph breaks: PTv2's compiled step, whose
    forward breaks, ended with no parameter gradient and no error with it (aot_eager, CPU, torch
    2.13). Otherwise the backward stays outside the graph (a break of torch's), and the step is
    explained again."""
    capture = configure_capture(dynamic_outputs)
    capture["explain"] = explain_step(step, owners)
    if capture["backward_traced"] and breaks_before_backward(capture["explain"]):
        capture = configure_capture(dynamic_outputs, trace_backward=False)
        capture["backward"] += " (the forward breaks the graph: a traced backward is not trusted there)"
        capture["explain"] = explain_step(step, owners)
    return capture


def make_step(model, opt, points, labels):
    """One training step returning its loss (a copy: backward consumes the loss's graph, which a
    compiled function may not return)."""

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, points, labels)
        value = loss.detach().clone()
        loss.backward()
        opt.step()
        return value

    return step


def code_owners(peer: str, libraries: dict[str, str]) -> list[tuple[str, str]]:
    """(directory, owner) of the code a graph break or a host sync can come from, longest
    directory first: torch, the peer's checkout, these harnesses, inductor's generated code and
    `libraries` ({directory: owner})."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        generated = {cache_dir(): "compiled graph"}
    except ImportError:
        generated = {}
    owners = {
        os.path.dirname(os.path.abspath(torch.__file__)): "torch",
        os.path.abspath(peer): "peer",
        HERE: "harness",
        **generated,
        **libraries,
    }
    return sorted(((os.path.abspath(d) + os.sep, o) for d, o in owners.items()), key=lambda e: -len(e[0]))


def library_owners(library: types.ModuleType) -> dict[str, str]:
    """The library's directories for code_owners: pointnet2_ops' own, or the drop-in and pointops
    (none for the plain-torch reference, a file of this harness)."""
    library_dir = os.path.dirname(os.path.abspath(library.__file__))
    if hasattr(library, "_ext"):
        return {library_dir: "pointnet2_ops"}
    if "pointops" not in sys.modules:
        return {}
    return {
        library_dir: "pointops",
        os.path.dirname(os.path.abspath(sys.modules["pointops"].__file__)): "pointops",
    }


def _owner(filename: str, owners: list) -> str:
    path = os.path.abspath(filename)
    return next((owner for directory, owner in owners if path.startswith(directory)), "other")


def stack_source(stack, owners: list, past_torch: bool = False) -> str:
    """pointops when the stack passes through pointops' code; else the owner of the innermost
    frame (past_torch: of the innermost frame outside torch, i.e. who called torch)."""
    files = [_owner(frame.filename, owners) for frame in stack or []]
    if "pointops" in files:
        return "pointops"
    if past_torch:
        files = [owner for owner in files if owner != "torch"] or files
    return files[-1] if files else "unknown"


def _frame_text(frame) -> str:
    return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"


def explain_step(step, owners: list) -> dict:
    """torch._dynamo.explain of one step (it runs the step): graphs, and each graph break with its
    reason, innermost frames and source."""
    explanation = torch._dynamo.explain(step)()
    breaks = collections.Counter()
    for reason in explanation.break_reasons:
        stack = reason.user_stack or []
        where = " < ".join(_frame_text(f) for f in reversed(stack[-3:]))
        text = reason.reason.strip().splitlines()[0]
        # backward() is torch's break wherever it is called (before trace_autograd_ops)
        source = "torch" if "Tensor.backward()" in text else stack_source(stack, owners)
        breaks[(text, where, source)] += 1
    by_source = collections.Counter()
    for (_, _, source), count in breaks.items():
        by_source[source] += count
    return {
        "graphs": explanation.graph_count,
        "graph_breaks": sum(breaks.values()),
        "breaks_by_source": dict(by_source),
        "breaks": [
            {"reason": reason, "where": where, "source": source, "count": count}
            for (reason, where, source), count in breaks.items()
        ],
    }


def dynamo_counters() -> dict:
    """Graphs dynamo compiled and graph breaks it took in this process so far."""
    counters = torch._dynamo.utils.counters
    return {
        "unique_graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
    }


def first_compiled_calls(step, clock) -> dict:
    """The compiled step's first three calls, ms: the first traces and compiles; with CUDA
    graphs (reduce-overhead) the next ones record the graphs."""
    times = [clock(step)[1] for _ in range(3)]
    return {"compile_step_ms": times[0], "second_step_ms": times[1], "third_step_ms": times[2]}


def host_syncs_in_step(step, device: torch.device, owners: list) -> dict | None:
    """One step under torch.cuda.set_sync_debug_mode: every synchronizing call in it, with the
    Python frames it came from and their owner (at the "warn" level, so that each is recorded;
    "error" would stop the step at the first). None off CUDA."""
    if device.type != "cuda":
        return None
    syncs = collections.Counter()
    show = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None):
        # set_sync_debug_mode's own note ("... is a prototype feature ...") is no sync
        if "synchroniz" not in str(message) or "prototype feature" in str(message):
            return show(message, category, filename, lineno, file, line)
        stack = [f for f in traceback.extract_stack()[:-1] if not f.filename.endswith("warnings.py")]
        where = " < ".join(_frame_text(f) for f in reversed(stack[-3:]))
        syncs[
            (str(message).strip().splitlines()[0], where, stack_source(stack, owners, past_torch=True))
        ] += 1

    torch.cuda.synchronize()
    with warnings.catch_warnings():  # restores showwarning and the filters
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    by_source = collections.Counter()
    for (_, _, source), count in syncs.items():
        by_source[source] += count
    return {
        "synced": bool(syncs),
        "by_source": dict(by_source),
        "syncs": [{"message": m, "where": w, "source": src, "count": n} for (m, w, src), n in syncs.items()],
    }


# ---------------------------------------------------------------------------------------------
# one process: one variant, one case


def profile_steps(step, count: int, device: torch.device) -> None:
    """Prints every op's (host) and kernel's (device) time over `count` steps, then pointops'
    ops and kernels (and the cub sorts they run) per step."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(count):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"== profile of {count} steps (totals over them)")
    events = prof.key_averages()
    print(events.table(sort_by=sort, row_limit=40, max_name_column_width=70))
    if device.type == "cuda":
        # a host-bound step is read from the host side: the ops' own time and their launches'
        print(f"== host time of {count} steps, most self CPU time first")
        print(events.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70))
        print("== pointops' ops and kernels (and the cub sorts its backward runs), us per step")
        print(*pointops_lines(events, count), sep="\n")


def pointops_lines(events, count: int) -> list[str]:
    """One line per profiler event of pointops (ops and kernels) or cub, most device time
    first: its self device time and host time (with what it calls) per step, calls per step,
    name. The main table's 40 rows leave most of them out."""
    ours = [e for e in events if "pointops" in e.key or "cub::" in e.key]
    ours.sort(key=lambda e: -e.self_device_time_total)
    lines = [f"{'device':>10}  {'host':>8}  calls  name"]
    for e in ours:
        lines.append(
            f"{e.self_device_time_total / count:10.1f}  {e.cpu_time_total / count:8.1f}  "
            f"x{e.count / count:<4g} {e.key[:110]}"
        )
    return lines


def torch_op_us(calls: int = 2000, rounds: int = 5) -> float:
    """Median µs per call of a tiny CPU torch op (the dispatcher, no real work): the host's
    speed at the work that bounds the small models' eager and inductor steps. The CPU model
    string does not tell hosts apart (every GPU host so far said "Intel(R) Xeon(R) Processor"),
    and their steps moved 1.2-1.9x with it."""
    a, b = torch.ones(1), torch.ones(1)
    return round(median_host_us(lambda: torch.add(a, b), calls, rounds), 3)


def host_facts() -> dict:
    """The host CPU a step ran on: the steps of small models are host-bound, so their times move
    with the CPU and its load, and two runs compare only on like hosts."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu_model() or None,
        "cpus": os.cpu_count(),
        "load_1min": None if load is None else round(load, 2),
        "torch_op_us": torch_op_us(),
    }


def build_model(args, models: types.ModuleType, device: torch.device):
    """The case's model with the run's initial weights (saved by the first variant, loaded by
    the others), and its batch: (model, initial state, "created"/"loaded", points, labels)."""
    torch.manual_seed(args.seed)
    model = getattr(models, CASES[args.case][0])({"model.use_xyz": True}).to(device)
    if args.init and os.path.exists(args.init):
        model.load_state_dict(torch.load(args.init, map_location=device))
        init_source = "loaded"
    else:
        init_source = "created"
        if args.init:
            os.makedirs(os.path.dirname(os.path.abspath(args.init)), exist_ok=True)
            torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, args.init)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.train()
    points, labels = (t_.to(device) for t_ in synthetic_batch(args.case, args.batch, args.seed))
    if args.no_dropout:  # dropout masks differ between dtypes: off for the float64 comparisons
        for module in model.modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
    if args.variant == "float64":
        model, points = model.double(), points.double()
    return model, initial, init_source, points, labels


def time_steps(step, count: int, clock: Clock, device: torch.device) -> list[float]:
    """ms of each of `count` steps: CUDA events on CUDA (no sync between steps), else wall time."""
    if device.type != "cuda":
        return [clock(step)[1] for _ in range(count)]
    events = []
    clock.sync()
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        events.append((start, end))
    clock.sync()
    return [start.elapsed_time(end) for start, end in events]


def gradient_steps(model, initial, points, labels, seed: int, compiled_step, record) -> tuple:
    """Two gradient steps from the initial weights, the same data and dropout seed: (losses,
    gradients, the recorded calls of the first). compiled_step: the variant's compiled step,
    whose SGD update leaves the gradients in .grad; record: the library whose calls the first
    eager step records for the audit (None: no audit)."""
    grads, losses, calls = [], [], None
    for repeat in range(2):
        model.load_state_dict(initial)
        model.zero_grad(set_to_none=True)
        torch.manual_seed(seed + 1)
        if compiled_step is not None:
            loss = compiled_step()
        elif repeat == 0 and record is not None:
            with Recorder(recorded_modules(record)) as recorder:
                loss = loss_of(model, points, labels)
                loss.backward()
            calls = recorder.calls
        else:
            loss = loss_of(model, points, labels)
            loss.backward()
        losses.append(float(loss.detach()))
        grads.append(
            {
                k: p.grad.detach().float().cpu().clone()
                for k, p in model.named_parameters()
                if p.grad is not None
            }
        )
    return losses, grads, calls


def eager_first_step(args, model, opt, points, labels, clock, device) -> dict:
    """The eager first step, phase by phase (optionally profiled)."""
    first = {}
    profiler = None
    if args.profile_first:
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]
            + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
        )
        profiler.__enter__()
    torch.manual_seed(args.seed + 1)
    opt.zero_grad(set_to_none=True)
    loss, first["fwd_ms"] = clock(lambda: loss_of(model, points, labels))
    _, first["bwd_ms"] = clock(loss.backward)
    _, first["opt_ms"] = clock(opt.step)
    if profiler is not None:
        profiler.__exit__(None, None, None)
        profiler.export_chrome_trace(args.profile_first)
        first["profile_top"] = profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    return first


def compile_step(step, mode: str, backend: str = "inductor", optimizer=None):
    """torch.compile of a whole training step. With CUDA graphs (mode "reduce-overhead") every
    call is a new step: torch.compiler.cudagraph_mark_step_begin() first, or the optimizer's
    graph would read gradients that the replay of the next call's graphs has overwritten.
    `optimizer` (the step's) gets its momentum buffers outside the graphs first: made by its
    first step, they would live in the CUDA graphs' pool, and the next step, a new generation,
    may not read them (torch raises "accessing tensor output of CUDAGraphs that has been
    overwritten"). Zeros give the same first step: 0 * momentum + grad is grad."""
    compiled = torch.compile(step, backend=backend, mode=None if mode == "default" else mode)
    if mode != "reduce-overhead":
        return compiled
    if optimizer is not None:
        momentum_buffers_outside_graphs(optimizer)

    def marked_step():
        torch.compiler.cudagraph_mark_step_begin()
        return compiled()

    return marked_step


def momentum_buffers_outside_graphs(optimizer) -> None:
    """Zero momentum buffers for every parameter of `optimizer` (SGD) that has none yet."""
    for group in optimizer.param_groups:
        if group.get("momentum", 0):
            for p in group["params"]:
                optimizer.state[p].setdefault("momentum_buffer", torch.zeros_like(p))


def compiled_step(args, model, opt, points, labels, clock, owners) -> tuple:
    """The step under torch.compile: explain's account of it first (explain runs one step and
    resets dynamo), then the compiled step's first calls. (step, first-call times, capture)."""
    plain = make_step(model, opt, points, labels)
    torch.manual_seed(args.seed + 1)
    t = time.perf_counter()
    capture = capture_step(plain, owners)
    explain_ms = (time.perf_counter() - t) * 1e3
    step = compile_step(plain, args.compile, optimizer=opt)
    torch.manual_seed(args.seed + 1)
    first = first_compiled_calls(step, clock)
    first["explain_ms"] = explain_ms
    capture["counters_after_first_calls"] = dynamo_counters()
    return step, first, capture


def run(args) -> dict:
    device = torch.device(args.device)
    name = variant_name(args.variant, args.compile)
    compiled = args.compile != "none"
    if compiled and args.variant not in COMPILABLE:
        raise SystemExit(f"--compile applies to {', '.join(COMPILABLE)}, not to {args.variant}")
    if compiled and args.compile == "reduce-overhead" and device.type != "cuda":
        raise SystemExit("--compile reduce-overhead records CUDA graphs: it needs --device cuda")
    if args.no_tf32:  # cuDNN convolutions in full float32 (PyTorch's default allows TF32 there)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    clock = Clock(device)
    first = {"import_torch_ms": _T_TORCH * 1e3}
    _, first["device_init_ms"] = clock(lambda: torch.zeros(1, device=device).add_(1))
    if args.reference_model:
        first["plain_torch"] = plain_torch_first_calls(device, clock)
    standins = install_standins()
    t = time.perf_counter()
    library = import_library(args.variant, args.peer, args.pointnet2_ops)
    first["import_library_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    models = import_models(args.peer)
    first["import_models_ms"] = (time.perf_counter() - t) * 1e3
    check_separation(args.variant)

    t = time.perf_counter()
    model, initial, init_source, points, labels = build_model(args, models, device)
    first["build_model_ms"] = (time.perf_counter() - t) * 1e3
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    capture = None
    if compiled:
        step, calls, capture = compiled_step(
            args, model, opt, points, labels, clock, code_owners(args.peer, library_owners(library))
        )
        first.update(calls)
    else:
        first.update(eager_first_step(args, model, opt, points, labels, clock, device))

        def step():
            opt.zero_grad(set_to_none=True)
            loss_of(model, points, labels).backward()
            opt.step()

        _, first["second_step_ms"] = clock(step)
    for _ in range(args.warmup):
        step()
    if args.profile_steps:
        profile_steps(step, args.profile_steps, device)
    rounds = [time_steps(step, args.steps, clock, device) for _ in range(args.rounds)]
    times = rounds[0]
    if capture is not None:
        capture["counters_after_timed_steps"] = dynamo_counters()
    # a compiled variant's gradients come from its compiled step; recording wrappers would be
    # traced into its graph, so it is not audited
    record = None if compiled or not args.audit else library
    losses, grads, calls = gradient_steps(
        model, initial, points, labels, args.seed, step if compiled else None, record
    )
    host_sync = host_syncs_in_step(step, device, code_owners(args.peer, library_owners(library)))
    audit_rows, indices = audit(calls, library) if calls else ([], {})
    check_separation(args.variant)
    result = {
        "variant": name,
        "case": args.case,
        "device": str(device),
        "batch": args.batch,
        "torch": torch.__version__,
        "host": host_facts(),
        "library_file": getattr(library, "__file__", None),
        "standins": standins,
        "init": init_source,
        "compile": args.compile,
        "capture": capture,
        "compile_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR") if compiled else None,
        "host_sync": host_sync,
        # a step that trains every parameter leaves a gradient in each (a compiled step must too)
        "params_without_grad": [
            k for k, p in model.named_parameters() if p.requires_grad and k not in grads[0]
        ],
        "first_call": first,
        "step_ms": times,
        "median_step_ms": statistics.median(times) if times else None,
        "round_median_ms": [statistics.median(r) for r in rounds if r],
        "losses": losses,
        "grads": grads,
        "audit": audit_rows,
        "indices": indices,
    }
    if args.variant.startswith("pointops"):
        import pointops

        result["pointops_value_checks"] = pointops.value_checks_enabled()
    torch.save(result, args.out)
    print_run(result)
    return result


def print_run(result: dict) -> None:
    first, capture, sync = result["first_call"], result["capture"], result["host_sync"]
    med = f"{result['median_step_ms']:.2f} ms" if result["step_ms"] else "-"
    if capture is not None:
        explained = capture["explain"]
        start_text = (
            f"first call {first['compile_step_ms'] / 1e3:.1f} s, {explained['graphs']} graphs, "
            f"graph breaks by source {explained['breaks_by_source'] or 'none'}"
        )
    else:
        start_text = f"first fwd/bwd {first['fwd_ms']:.0f}/{first['bwd_ms']:.0f} ms"
    sync_text = "" if sync is None else f", host syncs in a step: {sync['by_source'] or 'none'}"
    if result["params_without_grad"]:
        sync_text += f", NO GRADIENT for {len(result['params_without_grad'])} parameters"
    host = result["host"]
    host_text = (
        f", host {host['cpu']} ({host['cpus']} CPUs, load {host['load_1min']}, "
        f"{host['torch_op_us']} µs a tiny torch op)"
    )
    print(
        f"[{result['variant']}] {result['case']}: B{result['batch']} loss {result['losses'][0]:.6g}, "
        f"median step {med} over {len(result['step_ms'])}, {start_text}{sync_text}{host_text}, "
        f"{len(result['audit'])} calls audited",
        flush=True,
    )


# ---------------------------------------------------------------------------------------------
# comparison, report


def grad_rel_l2(a: dict, b: dict) -> float:
    """|a - b| / |b| over all of b's gradients; one missing from a counts as a zero gradient."""
    num = sum(float(((a[k].double() if k in a else 0) - b[k].double()).square().sum()) for k in b)
    den = sum(float(b[k].double().square().sum()) for k in b)
    return (num / den) ** 0.5 if den > 0 else float("nan")


def worst_params(a: dict, b: dict, count: int = 3) -> list:
    rel = [(_rel(a[k], b[k]), k) for k in b if k in a and float(b[k].norm()) > 0]
    return [{"param": k, "rel_l2": r} for r, k in sorted(rel, reverse=True)[:count]]


def index_agreement(a: dict, b: dict) -> dict:
    """Per op kind: how many calls have identical index outputs; three_nn distance difference."""
    out = {}
    for key, ta in a.items():
        if key.endswith(":dist") or key not in b:
            continue
        op = key.split(":", 1)[1]
        entry = out.setdefault(op, {"calls": 0, "identical": 0, "rows_differing": 0})
        entry["calls"] += 1
        tb = b[key]
        same = ta.shape == tb.shape and bool(torch.equal(ta, tb))
        entry["identical"] += same
        if ta.shape == tb.shape and not same:
            entry["rows_differing"] += int((ta != tb).reshape(ta.shape[0], ta.shape[1], -1).any(-1).sum())
        if op == "three_nn" and key + ":dist" in b:
            entry["max_dist_abs_diff"] = max(
                entry.get("max_dist_abs_diff", 0.0), float((a[key + ":dist"] - b[key + ":dist"]).abs().max())
            )
    return out


def audit_summary(rows: list) -> dict:
    out = {}
    for row in rows:
        entry = out.setdefault(row["op"], {"calls": 0})
        entry["calls"] += 1
        for k, v in row.items():
            if k in ("call", "op", "shapes") or v is None:
                continue
            entry[k] = max(entry.get(k, 0), v)
    return out


def round_ratios(rounds: list, base_rounds: list) -> list:
    """Round i of a variant against round i of the baseline, for the rounds both ran."""
    return [a / b for a, b in zip(rounds, base_rounds, strict=False) if a and b]


def compare(results: dict, baseline: str) -> dict:
    """results[case][variant] = the run's saved dict."""
    report = {"baseline": baseline, "cases": {}}
    for case, by_variant in results.items():
        entry = {"variants": {}}
        base = by_variant.get(baseline)
        for variant, r in by_variant.items():
            v = {
                "median_step_ms": r["median_step_ms"],
                "first_call": r["first_call"],
                "loss": r["losses"][0],
                "self_grad_rel_l2": grad_rel_l2(r["grads"][1], r["grads"][0]),
                "audit": audit_summary(r["audit"]),
            }
            if "pointops_value_checks" in r:
                v["pointops_value_checks"] = r["pointops_value_checks"]
            for key in ("capture", "host_sync", "host"):
                if r.get(key) is not None:
                    v[key] = r[key]
            v["round_median_ms"] = r.get("round_median_ms", [])
            if base is not None and variant != baseline:
                if base["median_step_ms"] and r["median_step_ms"]:
                    v["ratio_to_baseline"] = r["median_step_ms"] / base["median_step_ms"]
                v["round_ratios"] = round_ratios(v["round_median_ms"], base.get("round_median_ms", []))
                v["grad_rel_l2_to_baseline"] = grad_rel_l2(r["grads"][0], base["grads"][0])
                v["worst_params_to_baseline"] = worst_params(r["grads"][0], base["grads"][0])
                v["indices_vs_baseline"] = index_agreement(r["indices"], base["indices"])
            entry["variants"][variant] = v
        report["cases"][case] = entry
    report["rows"] = summary_rows(report)
    return report


TARGET_RATIO = 0.7  # issue 19: each model's step at most 0.7x pointnet2_ops' time
TARGET_RATIO_COMPILED = 0.4  # issue 48: pointops' compiled steps at most 0.4x pointnet2_ops' eager time


def target_ratio(variant: str) -> float | None:
    """The ratio a variant's step must meet against the baseline; None for pointnet2_ops compiled."""
    base, mode = split_variant(variant)
    if mode == "none":
        return TARGET_RATIO
    return TARGET_RATIO_COMPILED if base.startswith("pointops") else None


def capture_words(
    explained: dict | None, compile_step_ms: float | None, host_syncs: dict | None
) -> list[str]:
    """A compiled step's capture (dynamo's explain and its first call) and a step's host syncs, in
    words: the note of a baseline row (also PTv2's in pointcept_models.py)."""
    parts = []
    if explained:
        by_source = ", ".join(f"{k} {n}" for k, n in sorted(explained["breaks_by_source"].items()))
        parts.append(f"{explained['graphs']} graphs, breaks: {by_source or 'none'}")
        parts.append(f"first call {compile_step_ms / 1e3:.1f} s")
    if host_syncs:
        by_source = ", ".join(f"{k} {n}" for k, n in sorted(host_syncs["by_source"].items()))
        parts.append(f"host syncs in the step: {by_source or 'none'}")
    return parts


def capture_note(v: dict) -> str | None:
    """A compiled variant's capture, a variant's host sync and its host's speed, in words, for the
    baseline's note."""
    capture = v.get("capture")
    explained = capture["explain"] if capture else None
    first_call_ms = v["first_call"]["compile_step_ms"] if capture else None
    words = capture_words(explained, first_call_ms, v.get("host_sync"))
    op_us = (v.get("host") or {}).get("torch_op_us")  # runs before it was recorded have none
    if op_us is not None:
        words.append(f"host {op_us} µs a tiny torch op")
    return "; ".join(words) or None


def summary_rows(report: dict) -> list[dict]:
    """One row per case and variant against the baseline, for benchmarks/update_baseline.py."""
    base, rows = report["baseline"], []
    for case, entry in report["cases"].items():
        b = entry["variants"].get(base)
        for variant, v in entry["variants"].items():
            if variant == base or b is None:
                continue
            ratio, target = v.get("ratio_to_baseline"), target_ratio(variant)
            worst = max([ratio, *v.get("round_ratios", [])]) if ratio is not None else None
            fc = v["first_call"]
            rows.append(
                {
                    "case": case,
                    "variant": variant,
                    f"{base}_ms": b["median_step_ms"],
                    "pointops_ms" if variant.startswith("pointops") else f"{variant}_ms": v["median_step_ms"],
                    "ratio": ratio,
                    "round_ratios": v.get("round_ratios") or None,
                    "grad_rel_l2": v.get("grad_rel_l2_to_baseline"),
                    "self_grad_rel_l2": b["self_grad_rel_l2"],
                    "first_fwd_bwd_ms": [round(fc["fwd_ms"]), round(fc["bwd_ms"])]
                    if "fwd_ms" in fc
                    else None,
                    "status": None
                    if worst is None or target is None
                    else ("PASS" if worst <= target else "MISS"),
                    "note": capture_note(v),
                }
            )
    return rows


def _fmt(x, spec=".3g", missing="-"):
    return missing if x is None else format(x, spec)


def print_rounds(report: dict) -> None:
    """With --rounds: each round's median step and its ratio to the baseline's round."""
    rows = [
        (case, variant, v)
        for case, entry in report["cases"].items()
        for variant, v in entry["variants"].items()
        if len(v.get("round_median_ms", [])) > 1
    ]
    if not rows:
        return
    print("\nRounds, one after another in each process: median step ms (ratio to the baseline's round)")
    for case, variant, v in rows:
        ratios = v.get("round_ratios", [])
        cells = [
            f"{ms:.2f}" + (f" ({ratios[i]:.2f})" if i < len(ratios) else "")
            for i, ms in enumerate(v["round_median_ms"])
        ]
        print(f"{case:14} {variant:24} " + "  ".join(cells))


def print_capture(report: dict) -> None:
    """The compiled variants' capture (explain's graphs and breaks) and every variant's host sync."""
    rows = [
        (case, variant, v)
        for case, entry in report["cases"].items()
        for variant, v in entry["variants"].items()
        if v.get("capture") or v.get("host_sync")
    ]
    if not rows:
        return
    print(
        "\nCaptured steps: torch.compile's first call (s), explain's graphs and graph breaks by "
        "source, recompiles during the timed steps; host syncs: every one in a steady step "
        "(torch.cuda.set_sync_debug_mode), by source"
    )
    for case, variant, v in rows:
        capture, sync = v.get("capture"), v.get("host_sync")
        text = ""
        if capture:
            explained = capture["explain"]
            before = capture["counters_after_first_calls"]["unique_graphs"]
            after = capture["counters_after_timed_steps"]["unique_graphs"]
            text = (
                f"first call {v['first_call']['compile_step_ms'] / 1e3:6.1f} s, {explained['graphs']} graphs, "
                f"breaks {explained['breaks_by_source'] or 'none'}, recompiles {after - before}; "
            )
        if sync is not None:
            text += f"host syncs: {sync['by_source'] or 'none'}"
        print(f"{case:14} {variant:24} {text}")
        for b in (capture or {}).get("explain", {}).get("breaks", []):
            print(f"{'':40} break [{b['source']}] x{b['count']} {b['reason'][:100]} ({b['where']})")
        for e in (sync or {}).get("syncs", []):
            print(f"{'':40} sync [{e['source']}] x{e['count']} ({e['where']})")
    described = next((v["capture"] for _, _, v in rows if v.get("capture")), None)
    if described:
        print(f"backward: {described['backward']}; optimizer step: {described['optimizer']}")


def print_report(report: dict) -> None:
    base = report["baseline"]
    print(
        f"\nTraining step (forward, loss, backward, SGD), median ms; ratio and gradient difference "
        f"against {base}; 'self' = two gradient steps of the same variant"
    )
    head = (
        f"{'case':14} {'variant':24} {'step ms':>9} {'ratio':>6} {'grad vs base':>12} {'self':>9} "
        f"{'first fwd':>9} {'first bwd':>9} {'import':>7}  index outputs vs base"
    )
    print(head)
    print("-" * len(head))
    for case, entry in report["cases"].items():
        for variant, v in entry["variants"].items():
            fc = v["first_call"]
            idx = v.get("indices_vs_baseline")
            idx_text = (
                ", ".join(f"{op} {e['identical']}/{e['calls']}" for op, e in idx.items()) if idx else ""
            )
            print(
                f"{case:14} {variant:24} {_fmt(v['median_step_ms'], '.2f'):>9} "
                f"{_fmt(v.get('ratio_to_baseline'), '.2f'):>6} {_fmt(v.get('grad_rel_l2_to_baseline'), '.2e'):>12} "
                f"{_fmt(v['self_grad_rel_l2'], '.1e'):>9} {_fmt(fc.get('fwd_ms'), '9.0f'):>9} "
                f"{_fmt(fc.get('bwd_ms'), '9.0f'):>9} "
                f"{fc['import_library_ms'] + fc['import_models_ms']:7.0f}  {idx_text}"
            )
    print_rounds(report)
    print("\nFirst calls in a fresh process, ms (plain torch model first, then the library):")
    print(
        f"{'case':14} {'variant':24} {'torch':>6} {'init':>6} {'pt fwd1':>8} {'pt bwd1':>8} {'pt bwd2':>8} "
        f"{'lib imp':>8} {'models':>7} {'build':>6} {'fwd':>7} {'bwd':>7} {'opt':>6} {'2nd step':>8}"
    )
    for case, entry in report["cases"].items():
        for variant, v in entry["variants"].items():
            fc, pt = v["first_call"], v["first_call"].get("plain_torch", {})
            print(
                f"{case:14} {variant:24} {fc['import_torch_ms']:6.0f} {fc['device_init_ms']:6.0f} "
                f"{_fmt(pt.get('fwd1_ms'), '8.0f'):>8} {_fmt(pt.get('bwd1_ms'), '8.0f'):>8} "
                f"{_fmt(pt.get('bwd2_ms'), '8.1f'):>8} {fc['import_library_ms']:8.0f} "
                f"{fc['import_models_ms']:7.0f} {fc['build_model_ms']:6.0f} {_fmt(fc.get('fwd_ms'), '7.0f'):>7} "
                f"{_fmt(fc.get('bwd_ms'), '7.0f'):>7} {_fmt(fc.get('opt_ms'), '6.0f'):>6} {fc['second_step_ms']:8.1f}"
            )
    print_capture(report)
    print(
        "\nAudit: worst error of each op against plain torch in float64 (fwd/bwd relative L2; "
        "index rows that differ from the reference's choice)"
    )
    for case, entry in report["cases"].items():
        for variant, v in entry["variants"].items():
            parts = []
            for op, e in v["audit"].items():
                fields = ", ".join(
                    f"{k} {_fmt(val, '.1e') if isinstance(val, float) else val}"
                    for k, val in e.items()
                    if k != "calls"
                )
                parts.append(f"{op}[{e['calls']}]: {fields}")
            print(f"{case:14} {variant:24} " + "; ".join(parts))


# ---------------------------------------------------------------------------------------------
# the whole run


def compile_runs(
    variants: list[str], modes: list[str] | None, compiled: list[str] | None = None
) -> list[tuple[str, str]]:
    """(variant, compile mode) of every process: each variant eager, then per mode the compilable
    ones (only those in `compiled`, where given)."""
    runs = [(variant, "none") for variant in variants]
    for mode in dict.fromkeys(modes or []):
        if mode != "none":
            runs += [
                (variant, mode)
                for variant in variants
                if variant in COMPILABLE and (compiled is None or variant in compiled)
            ]
    return runs


def child_env(args, case: str, name: str) -> dict | None:
    """With --fresh-compile-cache, an empty inductor cache (kernels, graphs, autotuning) per process."""
    if not args.fresh_compile_cache:
        return None
    cache = os.path.join(os.path.abspath(args.out_dir), "inductor-cache", f"{case}.{name}")
    if os.path.isdir(cache):
        shutil.rmtree(cache)
    return {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}


def run_all(args) -> int:
    os.makedirs(args.out_dir, exist_ok=True)
    variants = list(dict.fromkeys(args.variants))
    if (
        "pointnet2_ops" in variants
        and not args.pointnet2_ops
        and importlib.util.find_spec("pointnet2_ops") is None
    ):
        raise SystemExit(
            "pointnet2_ops is not installed: pass --pointnet2-ops DIR (see build_peers.sh) or drop "
            "it from --variants"
        )
    runs = compile_runs(variants, args.compile, args.compile_variants)
    if "reduce-overhead" in (args.compile or []) and not args.device.startswith("cuda"):
        raise SystemExit("--compile reduce-overhead records CUDA graphs: it needs --device cuda")
    me = [sys.executable, os.path.abspath(__file__), "run"]
    common = [
        "--peer",
        args.peer,
        "--device",
        args.device,
        "--batch",
        str(args.batch),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--rounds",
        str(args.rounds),
        "--seed",
        str(args.seed),
    ]
    if args.pointnet2_ops:
        common += ["--pointnet2-ops", args.pointnet2_ops]
    if not args.audit:
        common.append("--no-audit")
    if args.no_tf32:
        common.append("--no-tf32")
    if args.no_dropout:
        common.append("--no-dropout")
    results, failures = {}, []
    for case in args.cases:
        init = os.path.join(args.out_dir, "init", f"{case}-b{args.batch}.pt")
        if os.path.exists(init) and not args.keep_init:
            os.remove(init)
        for base, mode in runs:
            name = variant_name(base, mode)
            out = os.path.join(args.out_dir, f"{case}.{name}.pt")
            cmd = [
                *me,
                "--variant",
                base,
                "--compile",
                mode,
                "--case",
                case,
                "--init",
                init,
                "--out",
                out,
                *common,
            ]
            proc = subprocess.run(cmd, env=child_env(args, case, name))
            if proc.returncode != 0:
                failures.append(f"{case} {name} rc={proc.returncode}")
                continue
            results.setdefault(case, {})[name] = torch.load(out, weights_only=False)
    baseline = args.baseline or variants[0]
    report = compare(results, baseline)
    report["config"] = {
        "device": args.device,
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "seed": args.seed,
        "tf32": not args.no_tf32,
        "dropout": not args.no_dropout,
        "variants": [variant_name(base, mode) for base, mode in runs],
        "fresh_compile_cache": args.fresh_compile_cache,
        "failures": failures,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
    }
    print_report(report)
    if failures:
        print("\nFAILED runs: " + "; ".join(failures))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failures else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd in ("run", "all"):
        s = sub.add_parser(cmd)
        s.add_argument(
            "--peer",
            required=True,
            help="Pointnet2_PyTorch checkout (holds pointnet2/ and pointnet2_ops_lib/)",
        )
        s.add_argument("--pointnet2-ops", help="directory pointnet2_ops was installed into (pip --target)")
        s.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
        s.add_argument("--batch", type=int, default=16)
        s.add_argument("--steps", type=int, default=50, help="timed steps (median reported)")
        s.add_argument("--warmup", type=int, default=10, help="untimed steps after the first two")
        s.add_argument(
            "--rounds", type=int, default=1, help="rounds of --steps timed steps, one after another"
        )
        s.add_argument("--seed", type=int, default=0)
        s.add_argument(
            "--no-audit",
            dest="audit",
            action="store_false",
            help="skip recording and checking every op call of the gradient step",
        )
        s.add_argument(
            "--no-tf32",
            action="store_true",
            help="convolutions and matmuls in full float32: layouts and algorithms then differ by "
            "float32 rounding only, not TF32's",
        )
        s.add_argument(
            "--no-dropout", action="store_true", help="dropout layers at p = 0 (deterministic steps)"
        )
        if cmd == "run":
            s.add_argument("--variant", choices=VARIANTS, required=True)
            s.add_argument(
                "--compile",
                choices=["none", *COMPILE_MODES],
                default="none",
                help="run the whole step under torch.compile with this mode (variant NAME-compiled / NAME-cudagraphs)",
            )
            s.add_argument("--case", choices=list(CASES), required=True)
            s.add_argument("--out", required=True)
            s.add_argument("--init", help="initial weights: loaded if the file exists, else saved there")
            s.add_argument(
                "--no-reference-model",
                dest="reference_model",
                action="store_false",
                help="skip the plain-torch model run before the library is imported",
            )
            s.add_argument(
                "--profile-first",
                metavar="TRACE.json",
                help="profile the first step (torch.profiler) and write a chrome trace",
            )
            s.add_argument(
                "--profile-steps",
                type=int,
                default=0,
                metavar="N",
                help="after the warm-up, profile N steps and print each op's and kernel's time per step",
            )
        else:
            s.add_argument("--variants", nargs="+", choices=VARIANTS, default=["pointnet2_ops", "pointops"])
            s.add_argument(
                "--baseline",
                choices=VARIANTS,
                help="the variant others are compared with (default: the first of --variants)",
            )
            s.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
            s.add_argument("--out-dir", required=True)
            s.add_argument("--json", help="write the report here")
            s.add_argument(
                "--keep-init", action="store_true", help="reuse initial weights saved by an earlier run"
            )
            s.add_argument(
                "--compile",
                action="append",
                choices=["none", *COMPILE_MODES],
                help="add the compiled variants of the pointops variants and pointnet2_ops: default -> "
                "NAME-compiled, reduce-overhead (CUDA graphs) -> NAME-cudagraphs; repeatable",
            )
            s.add_argument(
                "--compile-variants",
                nargs="+",
                choices=COMPILABLE,
                help="compile only these of --variants (default: every compilable one); e.g. "
                "pointops alone, where pointnet2_ops' compiled steps are not wanted",
            )
            s.add_argument(
                "--fresh-compile-cache",
                action="store_true",
                help="an empty inductor cache for every process (OUT_DIR/inductor-cache), so that the "
                "compiled first call includes all of the compilation",
            )
    c = sub.add_parser("compare", help="re-read the runs of an out-dir")
    c.add_argument("out_dir")
    c.add_argument("--baseline", choices=VARIANTS, default="pointnet2_ops")
    c.add_argument("--json")
    args = p.parse_args()
    if args.cmd == "run":
        run(args)
        return 0
    if args.cmd == "all":
        return run_all(args)
    results = {}
    for path in sorted(glob.glob(os.path.join(args.out_dir, "*.pt"))):
        case, variant = os.path.basename(path)[:-3].split(".", 1)
        results.setdefault(case, {})[variant] = torch.load(path, weights_only=False)
    report = compare(results, args.baseline)
    print_report(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
