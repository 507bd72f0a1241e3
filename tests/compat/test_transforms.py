"""Transforms and deployment beyond the five core ops (docs/ops.md, "Transforms and deployment"):
double backward (gradgradcheck in float64, fast mode: random projections of the second
derivatives, which a silently first-order backward fails), torch.func (grad, jacrev, jacrev of jacrev, vmap),
torch.compile(fullgraph=True) with and without dynamic=True, and torch.jit.trace with
torch.jit.save / load, for chamfer_distance, the compat layers (pointnet2_utils, the Pointcept
names, torch_cluster, pointnet2_batch_cuda) and the packed ops' deployment (their double
backward and torch.func tests are in tests/ops/test_ops_higher_order.py).

What does not work is marked xfail(strict=True): when it starts to work the test fails, so that
docs/ops.md's table is updated with it."""

import warnings

import pointops
import pytest
import torch
from pointops import packed
from pointops.compat import pointnet2_utils as pn2
from pointops.compat import torch_cluster as tc
from torch import nn
from torch.autograd import gradgradcheck
from torch.func import vmap
from transform_checks import (
    assert_grad_equals_eager,
    assert_jacrev_equals_eager,
    assert_second_order_equals_eager,
    leaf,
)

try:
    import pointnet2_batch_cuda as pn2_batch
except ImportError:  # pragma: no cover (installed with pointops)
    pn2_batch = None


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _rand(*shape, seed=0):
    return torch.rand(*shape, generator=_gen(seed), dtype=torch.float64)


# Differentiable paths: (name, function of the differentiable inputs, inputs). Index inputs
# repeat points; Pointcept's indices come from its own knn_query.
def _cases(device):
    x, y = _rand(2, 4, 3, seed=0).to(device), _rand(2, 3, 3, seed=1).to(device)
    x_lengths, y_lengths = torch.tensor([4, 3], device=device), torch.tensor([3, 2], device=device)
    x_normals, y_normals = (
        (_rand(2, 4, 3, seed=2) - 0.5).to(device),
        (_rand(2, 3, 3, seed=3) - 0.5).to(device),
    )
    x5, y5 = _rand(2, 4, 5, seed=4).to(device), _rand(2, 3, 5, seed=5).to(device)

    xyz, centres = _rand(2, 8, 3, seed=6).to(device), _rand(2, 3, 3, seed=7).to(device)
    feat = _rand(2, 4, 8, seed=8).to(device)
    idx2 = torch.randint(0, 8, (2, 3), generator=_gen(9), dtype=torch.int32).to(device)
    idx3 = torch.randint(0, 8, (2, 3, 3), generator=_gen(10), dtype=torch.int32).to(device)
    weight = _rand(2, 3, 3, seed=11).to(device)
    group = pn2.QueryAndGroup(0.5, 4)

    rows = _rand(9, 3, seed=12).to(device)
    offset = torch.tensor([5, 9], dtype=torch.int32, device=device)
    new_rows, new_offset = (
        _rand(4, 3, seed=13).to(device),
        torch.tensor([2, 4], dtype=torch.int32, device=device),
    )
    row_feat, other_feat = _rand(9, 4, seed=14).to(device), _rand(9, 4, seed=15).to(device)
    neighbours, _ = pointops.knn_query(3, rows, offset)
    position, row_weight = _rand(9, 3, 4, seed=16).to(device), _rand(9, 3, 2, seed=17).to(device)
    query, key, channel_weight = (
        _rand(9, 2, 4, seed=18).to(device),
        _rand(9, 2, 4, seed=19).to(device),
        _rand(4, seed=20).to(device),
    )
    target, refer = torch.tensor([0, 1, 1, 3, 8], device=device), torch.tensor([2, 0, 4, 4, 7], device=device)
    relation, value = _rand(5, 2, seed=21).to(device), _rand(9, 2, 3, seed=22).to(device)
    return {
        "chamfer": (
            lambda a, b: pointops.chamfer_distance(a, b, x_lengths=x_lengths, y_lengths=y_lengths)[0],
            (x, y),
        ),
        "chamfer_euclidean": (lambda a, b: pointops.chamfer_distance(a, b, squared=False)[0], (x, y)),
        "chamfer_normals": (
            lambda a, b, na, nb: sum(pointops.chamfer_distance(a, b, x_normals=na, y_normals=nb)),
            (x, y, x_normals, y_normals),
        ),
        "chamfer_l1": (lambda a, b: pointops.chamfer_distance(a, b, norm=1)[0], (x, y)),
        "chamfer_5d": (lambda a, b: pointops.chamfer_distance(a, b, point_reduction="sum")[0], (x5, y5)),
        "pn2_gather_operation": (lambda f: pn2.gather_operation(f, idx2), (feat,)),
        "pn2_grouping_operation": (lambda f: pn2.grouping_operation(f, idx3), (feat,)),
        "pn2_three_interpolate": (lambda f, w: pn2.three_interpolate(f, idx3, w), (feat, weight)),
        "pn2_query_and_group": (lambda a, f: group(a, centres, f), (xyz, feat)),
        "pointcept_grouping": (
            lambda f, a: pointops.grouping(neighbours, f, a, with_xyz=True),
            (row_feat, rows),
        ),
        "pointcept_interpolation": (
            lambda f: pointops.interpolation(rows, new_rows, f, offset, new_offset),
            (row_feat,),
        ),
        "pointcept_knn_query_and_group": (
            lambda f: pointops.knn_query_and_group(f, rows, offset, nsample=3)[0],
            (row_feat,),
        ),
        "pointcept_subtraction": (
            lambda a, b: pointops.subtraction(a, b, neighbours),
            (row_feat, other_feat),
        ),
        "pointcept_aggregation": (
            lambda f, p, w: pointops.aggregation(f, p, w, neighbours),
            (row_feat, position, row_weight),
        ),
        "pointcept_attention_relation_step": (
            lambda q, k, w: pointops.attention_relation_step(q, k, w, target, refer),
            (query, key, channel_weight),
        ),
        "pointcept_attention_fusion_step": (
            lambda w, v: pointops.attention_fusion_step(w, v, target, refer),
            (relation, value),
        ),
    }


CASES = list(_cases("cpu"))
# chamfer's exact search (L1, or L2 in a dimension other than 3) packs the valid points with
# boolean masks: data-dependent shapes, which vmap and fullgraph compile cannot trace
EXACT_SEARCH = ("chamfer_l1", "chamfer_5d")


@pytest.mark.parametrize("name", CASES)
def test_gradgradcheck(device, name):
    fn, inputs = _cases(device)[name]
    assert gradgradcheck(fn, tuple(leaf(t) for t in inputs), fast_mode=True)


@pytest.mark.parametrize("name", CASES)
def test_func_grad_and_jacrev_equal_eager_autograd(device, name):
    fn, inputs = _cases(device)[name]
    assert_jacrev_equals_eager(fn, inputs)
    assert_grad_equals_eager(fn, inputs)


@pytest.mark.parametrize(
    "name",
    [
        "chamfer",
        "chamfer_l1",
        "pn2_three_interpolate",
        "pn2_query_and_group",
        "pointcept_grouping",
        "pointcept_aggregation",
    ],
)
def test_func_second_order_equals_eager_double_backward(device, name):
    fn, inputs = _cases(device)[name]
    assert_second_order_equals_eager(fn, inputs)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            n, marks=pytest.mark.xfail(strict=True, reason="chamfer's exact search cannot be vmapped")
        )
        if n in EXACT_SEARCH
        else n
        for n in CASES
    ],
)
def test_vmap_equals_a_loop(device, name):
    fn, inputs = _cases(device)[name]
    batched = [torch.stack([t, t.flip(0)]) for t in inputs]
    expected = torch.stack([fn(*args) for args in zip(*batched, strict=True)])
    torch.testing.assert_close(vmap(fn)(*batched), expected)


# --- torch.compile and torch.jit.trace of small models built from each layer --------------------


def _run(model, inputs, differentiable):
    """Outputs and gradients (of the inputs at `differentiable` and of the parameters) of one call."""
    if isinstance(model, nn.Module):
        model.zero_grad()
    inputs = [leaf(t) if i in differentiable else t for i, t in enumerate(inputs)]
    outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    loss = sum(o.nan_to_num(posinf=0.0).square().sum() for o in outputs if o.is_floating_point())
    params = list(model.parameters()) if isinstance(model, nn.Module) else []
    leaves = [inputs[i] for i in differentiable] + params
    grads = torch.autograd.grad(loss, leaves) if leaves else ()
    return [o.detach() for o in outputs], list(grads)


def _assert_same_results(got, expected):
    for a, b in zip(got[0] + got[1], expected[0] + expected[1], strict=True):
        torch.testing.assert_close(a, b)


# The aot_eager backend: dynamo's capture (which fullgraph=True makes total) and AOTAutograd's
# forward and backward graphs, where the ops' fake kernels and autograd formulas take part;
# inductor's code generation (over a minute here on a cold cache) treats the ops as opaque
# calls. tests/ops compiles the core ops with inductor.
BACKEND = "aot_eager"


def _compiled_equals_eager(model, calls, differentiable, dynamic):
    """torch.compile(fullgraph=True) of model gives eager's outputs and gradients; with dynamic=True
    for every call (several sizes, one graph), without it for the first."""
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend=BACKEND)
    for inputs in calls if dynamic else calls[:1]:
        _assert_same_results(_run(compiled, inputs, differentiable), _run(model, inputs, differentiable))


def _traced_equals_eager(model, inputs, differentiable, tmp_path):
    """torch.jit.trace on inputs, saved and loaded: the loaded module gives eager's outputs and
    gradients on them and on new data of the same shapes (the float inputs reversed along their
    first dimension)."""
    first = [leaf(t) if i in differentiable else t for i, t in enumerate(inputs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the argument checks' (see docs/ops.md)
        traced = torch.jit.trace(model, tuple(first))
    path = tmp_path / "traced.pt"
    torch.jit.save(traced, str(path))
    loaded = torch.jit.load(str(path))
    assert "PythonOp" not in str(loaded.graph) + "".join(str(m.graph) for m in loaded.modules())
    other = [t.flip(0) if t.is_floating_point() else t for t in inputs]
    for data in (inputs, other):
        _assert_same_results(_run(loaded, data, differentiable), _run(model, data, differentiable))


class PackedModel(nn.Module):
    """A packed-batch layer: FPS centres, kNN interpolation and a ball-query max pool."""

    def __init__(self):
        super().__init__()
        self.radius = 0.6
        self.lin = nn.Linear(3, 4)

    def forward(self, xyz, ptr, query, query_ptr, sample_ptr):
        feat = self.lin(xyz)
        dist2, idx = packed.knn(xyz, ptr, query, query_ptr, 3)
        weight = 1.0 / (dist2 + 1e-8)
        weight = weight / weight.sum(-1, keepdim=True)
        ball, _, ball_dist2 = packed.ball_query(xyz, ptr, query, query_ptr, self.radius, 4, return_dist2=True)
        out = packed.interpolate(feat, idx, weight) + packed.gather(feat, ball).amax(1)
        picks = packed.furthest_point_sample(xyz, ptr, sample_ptr, int(query.shape[0]))
        return out, ball_dist2, packed.gather(xyz, picks)


def _packed_calls(device):
    calls = []
    for seed, counts, query_counts in ((0, [6, 5], [2, 3]), (1, [8, 7], [4, 2])):
        xyz = _rand(sum(counts), 3, seed=seed).float().to(device)
        query = _rand(sum(query_counts), 3, seed=seed + 10).float().to(device)
        ptr = packed.ptr_from_counts(torch.tensor(counts, device=device))
        query_ptr = packed.ptr_from_counts(torch.tensor(query_counts, device=device))
        calls.append([xyz, ptr, query, query_ptr, query_ptr])
    return calls


class Chamfer(nn.Module):
    def __init__(self, norm=2):
        super().__init__()
        self.norm = norm

    def forward(self, x, y, x_lengths, y_lengths):
        return pointops.chamfer_distance(x, y, x_lengths=x_lengths, y_lengths=y_lengths, norm=self.norm)[0]


def _chamfer_calls(device, dims=3):
    return [
        [
            _rand(2, p1, dims, seed=p1).float().to(device),
            _rand(2, p2, dims, seed=p2 + 10).float().to(device),
            torch.tensor([p1, p1 - 2], device=device),
            torch.tensor([p2 - 1, p2], device=device),
        ]
        for p1, p2 in ((6, 5), (9, 7))
    ]


class PointNet2Utils(nn.Module):
    """Set abstraction and feature propagation through pointnet2_ops' names."""

    def __init__(self):
        super().__init__()
        self.group = pn2.QueryAndGroup(0.4, 4)
        self.mlp = nn.Conv2d(3 + 2, 4, 1)

    def forward(self, xyz, feat):
        centres_idx = pn2.furthest_point_sample(xyz, 4)
        centres = (
            pn2.gather_operation(xyz.transpose(1, 2).contiguous(), centres_idx).transpose(1, 2).contiguous()
        )
        coarse = self.mlp(self.group(xyz, centres, feat)).amax(-1)
        dist, idx = pn2.three_nn(xyz, centres)
        weight = 1.0 / (dist + 1e-8)
        weight = weight / weight.sum(-1, keepdim=True)
        return pn2.three_interpolate(coarse, idx, weight)


def _padded_calls(device):
    return [
        [_rand(2, n, 3, seed=n).float().to(device), _rand(2, 2, n, seed=n + 10).float().to(device)]
        for n in (12, 17)
    ]


class PointTransformerBlock(nn.Module):
    """A Point Transformer (v1) style block through the Pointcept names."""

    def __init__(self):
        super().__init__()
        self.value = nn.Linear(4, 4)
        self.position = nn.Linear(3, 4)
        self.weight = nn.Linear(4, 2)

    def forward(self, xyz, feat, offset, new_xyz, new_offset):
        grouped, idx = pointops.knn_query_and_group(feat, xyz, offset, nsample=3, with_xyz=True)
        position = self.position(grouped[..., :3])
        weight = self.weight(pointops.subtraction(feat, feat, idx) + position).softmax(1)
        out = pointops.aggregation(self.value(feat), position, weight, idx)
        return pointops.interpolation(xyz, new_xyz, out, offset, new_offset)


def _pointcept_calls(device):
    calls = []
    for seed, counts, new_counts in ((0, [6, 5], [2, 3]), (1, [8, 7], [4, 2])):
        offset = torch.tensor(counts, device=device).cumsum(0).int()
        new_offset = torch.tensor(new_counts, device=device).cumsum(0).int()
        calls.append(
            [
                _rand(sum(counts), 3, seed=seed).float().to(device),
                _rand(sum(counts), 4, seed=seed + 10).float().to(device),
                offset,
                _rand(sum(new_counts), 3, seed=seed + 20).float().to(device),
                new_offset,
            ]
        )
    return calls


class TorchCluster(nn.Module):
    def forward(self, x, y, batch_x, batch_y):
        return (
            tc.knn(x, y, 3, batch_x, batch_y),
            tc.radius(x, y, 0.5, batch_x, batch_y, 4),
            tc.fps(x, batch_x, 0.5, random_start=False),
            tc.nearest(y, x, batch_y, batch_x),
        )


def _torch_cluster_calls(device):
    batch_x = torch.tensor([0] * 6 + [1] * 5, device=device)
    batch_y = torch.tensor([0, 0, 1, 1], device=device)
    return [
        [
            _rand(11, 3, seed=s).float().to(device),
            _rand(4, 3, seed=s + 10).float().to(device),
            batch_x,
            batch_y,
        ]
        for s in (0, 1)
    ]


class OpenPoints(nn.Module):
    def forward(self, xyz, feat):
        return _openpoints_forward(xyz, feat)


def _openpoints_forward(xyz, feat):
    """What openpoints' autograd.Functions run forward: its out-parameter calls."""
    B, N, _ = xyz.shape
    C, M, S = feat.shape[1], 4, 3
    idx = torch.zeros(B, M, dtype=torch.int32, device=xyz.device)
    pn2_batch.furthest_point_sampling_wrapper(B, N, M, xyz, torch.full((B, N), 1e10, device=xyz.device), idx)
    centres = torch.empty(B, 3, M, device=xyz.device)
    pn2_batch.gather_points_wrapper(B, 3, N, M, xyz.transpose(1, 2).contiguous(), idx, centres)
    centres = centres.transpose(1, 2).contiguous()
    ball = torch.zeros(B, M, S, dtype=torch.int32, device=xyz.device)
    pn2_batch.ball_query_wrapper(B, N, M, 0.4, S, centres, xyz, ball)
    grouped = torch.empty(B, C, M, S, device=xyz.device)
    pn2_batch.group_points_wrapper(B, C, N, M, S, feat, ball, grouped)
    dist2 = torch.empty(B, N, 3, device=xyz.device)
    nearest = torch.empty(B, N, 3, dtype=torch.int32, device=xyz.device)
    pn2_batch.three_nn_wrapper(B, N, M, xyz, centres, dist2, nearest)
    weight = 1.0 / (dist2 + 1e-8)
    weight = weight / weight.sum(-1, keepdim=True)
    out = torch.empty(B, C, N, device=xyz.device)
    pn2_batch.three_interpolate_wrapper(B, C, M, N, grouped.amax(-1), nearest, weight, out)
    return out


# (model, calls, indices of the inputs whose gradients are compared)
def _models(device):
    return {
        "packed": (PackedModel().to(device), _packed_calls(device), (0, 2)),
        "chamfer": (Chamfer(), _chamfer_calls(device), (0, 1)),
        "chamfer_l1": (Chamfer(norm=1), _chamfer_calls(device), (0, 1)),
        "chamfer_5d": (Chamfer(), _chamfer_calls(device, dims=5), (0, 1)),
        "pointnet2_utils": (PointNet2Utils().to(device), _padded_calls(device), (0, 1)),
        "pointcept": (PointTransformerBlock().to(device), _pointcept_calls(device), (0, 1)),
        "torch_cluster": (TorchCluster(), _torch_cluster_calls(device), ()),
        "pointnet2_batch_cuda": (OpenPoints(), _padded_calls(device), ()),
    }


# torch_cluster's batch vectors become row pointers through data-dependent sizes, which fullgraph
# cannot capture; without fullgraph the capture reaches the pointops_compat ops, which have no fake
# kernels, and fails instead of breaking the graph.
BATCH_VECTORS = pytest.mark.xfail(strict=True, reason="batch vectors give data-dependent sizes")
NO_FAKE_KERNELS = pytest.mark.xfail(strict=True, reason="the pointops_compat ops have no fake kernels")
COMPILED = [
    "packed",
    "chamfer",
    "pointnet2_utils",
    "pointcept",
    pytest.param("torch_cluster", marks=BATCH_VECTORS),
    "pointnet2_batch_cuda",
]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", COMPILED)
def test_compile_fullgraph(device, name, dynamic):
    if name == "pointnet2_batch_cuda" and pn2_batch is None:
        pytest.skip("pointnet2_batch_cuda is not installed")
    torch.manual_seed(0)
    model, calls, differentiable = _models(device)[name]
    _compiled_equals_eager(model, calls, differentiable, dynamic)


@NO_FAKE_KERNELS
def test_compile_torch_cluster_without_fullgraph(device):
    model, calls, _ = _models(device)["torch_cluster"]
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=BACKEND)
    for a, b in zip(compiled(*calls[0]), model(*calls[0]), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    "name",
    [
        "packed",
        "chamfer",
        "chamfer_l1",
        "chamfer_5d",
        "pointnet2_utils",
        "pointcept_features",
        "pointcept",
        "torch_cluster",
        "pointnet2_batch_cuda",
    ],
)
def test_jit_trace_save_load(device, name, tmp_path):
    if name == "pointnet2_batch_cuda" and pn2_batch is None:
        pytest.skip("pointnet2_batch_cuda is not installed")
    torch.manual_seed(0)
    if name == "pointcept_features":
        model, calls, _ = _models(device)["pointcept"]
        differentiable = (1,)
    else:
        model, calls, differentiable = _models(device)[name]
    _traced_equals_eager(model, calls[0], differentiable, tmp_path)


DATA_DEPENDENT = pytest.mark.xfail(strict=True, reason="data-dependent shapes: fullgraph cannot trace them")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("chamfer_l1", marks=DATA_DEPENDENT),
        pytest.param("chamfer_5d", marks=DATA_DEPENDENT),
        "pointcept_knn_query",
        pytest.param("pointcept_ball_query", marks=DATA_DEPENDENT),
        pytest.param("pointcept_farthest_point_sampling", marks=DATA_DEPENDENT),
    ],
)
def test_compile_fullgraph_of_the_other_paths(device, name):
    x, y = _rand(2, 6, 3, seed=0).float().to(device), _rand(2, 5, 3, seed=1).float().to(device)
    rows, offset = (
        _rand(9, 3, seed=2).float().to(device),
        torch.tensor([5, 9], dtype=torch.int32, device=device),
    )
    new_offset = torch.tensor([2, 4], dtype=torch.int32, device=device)
    fn, args = {
        "chamfer_l1": (lambda a, b: pointops.chamfer_distance(a, b, norm=1)[0], (x, y)),
        "chamfer_5d": (
            lambda a, b: pointops.chamfer_distance(a, b)[0],
            (torch.cat([x, x[..., :2]], -1), torch.cat([y, y[..., :2]], -1)),
        ),
        "pointcept_knn_query": (lambda a: pointops.knn_query(3, a, offset), (rows,)),
        "pointcept_ball_query": (lambda a: pointops.ball_query(3, 0.5, 0.0, a, offset), (rows,)),
        "pointcept_farthest_point_sampling": (
            lambda a: pointops.farthest_point_sampling(a, offset, new_offset),
            (rows,),
        ),
    }[name]
    torch._dynamo.reset()
    got = torch.compile(fn, fullgraph=True, dynamic=True, backend=BACKEND)(*args)
    expected = fn(*args)
    for a, b in zip(
        got if isinstance(got, tuple) else (got,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        torch.testing.assert_close(a, b)
