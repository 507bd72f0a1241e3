"""Fake (meta) kernels, autograd formulas and vmap rules for the operators defined in C++.

Fake kernels give output shapes without data, so torch.compile and torch.library.opcheck can
trace the ops. Gradients use only our own deterministic kernels (no float atomics): the
feature gradient of a gather is a gather_backward_feat (a scatter-sum), its weight gradient a
gather_backward_weight, and the distance gradient of knn / ball_query gathers the neighbours'
coordinates and scatters back through gather_backward_feat. The two backward ops have formulas
of their own in terms of the same three ops, so gradients of any order stay on these kernels.

Each differentiable op gets one autograd kernel (the Autograd dispatch key) that runs one of two
autograd.Functions with the same formulas: a lean one for plain eager autograd, and one with
setup_context and a generated vmap rule, which torch.func transforms (grad, vjp, jacrev) need.
vmap rules fold the vmapped dimension into the ops' batch dimension, so vmap runs one call.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

ops = torch.ops.pointops

_lib = torch.library.Library("pointops", "IMPL")  # holds the autograd kernels registered below


def _fake(name):
    """torch.library.register_fake for pointops::name, with the binding's rule that every tensor
    is on one device: a call mixing a meta tensor with CPU or CUDA ones dispatches to the fake
    kernel, which must refuse it as the binding would, not return an uninitialized tensor."""

    def register(fn):
        @functools.wraps(fn)
        def on_one_device(*args, **kwargs):
            devices = {a.device for a in (*args, *kwargs.values()) if isinstance(a, Tensor)}
            if len(devices) > 1:
                names = ", ".join(sorted(str(d) for d in devices))
                raise RuntimeError(
                    f"pointops.{name}: every tensor argument must be on one device, got {names}; "
                    "move them to one device (tensor.to(device))"
                )
            return fn(*args, **kwargs)

        torch.library.register_fake(f"pointops::{name}")(on_one_device)
        return fn

    return register


@_fake("furthest_point_sample")
def _fps_fake(xyz, k, lengths, start):
    return xyz.new_empty((xyz.shape[0], k), dtype=torch.int64)


@_fake("ball_query")
def _ball_query_fake(xyz, query, radius, k, lengths, query_lengths, inclusive, return_dist2):
    B, M = query.shape[0], query.shape[1]
    idx = xyz.new_empty((B, M, k), dtype=torch.int64)
    count = xyz.new_empty((B, M), dtype=torch.int64)
    dist2 = xyz.new_empty((B, M, k) if return_dist2 else (0,))
    return idx, count, dist2


@_fake("knn")
def _knn_fake(xyz, query, k, lengths, query_lengths):
    B, M = query.shape[0], query.shape[1]
    return xyz.new_empty((B, M, k)), xyz.new_empty((B, M, k), dtype=torch.int64)


@_fake("gather")
def _gather_fake(feat, idx, weight):
    return feat.new_empty((feat.shape[0], feat.shape[1], idx.shape[1]))


@_fake("gather_backward_feat")
def _gather_backward_feat_fake(grad_out, idx, weight, n):
    return grad_out.new_empty((grad_out.shape[0], grad_out.shape[1], n))


@_fake("gather_backward_weight")
def _gather_backward_weight_fake(grad_out, feat, idx):
    return feat.new_empty((idx.shape[0], idx.shape[1], idx.shape[2]))


@_fake("knn_packed")
def _knn_packed_fake(xyz, ptr, query, query_ptr, k):
    return xyz.new_empty((query.shape[0], k)), xyz.new_empty((query.shape[0], k), dtype=torch.int64)


@_fake("ball_query_packed")
def _ball_query_packed_fake(xyz, ptr, query, query_ptr, radius, k, inclusive, return_dist2):
    Q = query.shape[0]
    return (
        xyz.new_empty((Q, k), dtype=torch.int64),
        xyz.new_empty((Q,), dtype=torch.int64),
        xyz.new_empty((Q, k) if return_dist2 else (0,)),
    )


@_fake("furthest_point_sample_packed")
def _fps_packed_fake(xyz, ptr, sample_ptr, samples, max_points):
    return xyz.new_empty((samples,), dtype=torch.int64)


@_fake("grid_cluster")
def _grid_cluster_fake(pos, size, start, end):
    return pos.new_empty((pos.shape[0],), dtype=torch.int64)


@_fake("gather_rows")
def _gather_rows_fake(feat, idx, weight):
    return feat.new_empty((idx.shape[0], feat.shape[1]))


@_fake("gather_rows_backward_feat")
def _gather_rows_backward_feat_fake(grad_out, idx, weight, rows):
    return grad_out.new_empty((rows, grad_out.shape[1]))


@_fake("gather_rows_backward_weight")
def _gather_rows_backward_weight_fake(grad_out, feat, idx):
    return feat.new_empty((idx.shape[0], idx.shape[1]))


# --- calls inside the formulas ------------------------------------------------------------------

_TRANSFORMABLE = {}  # op -> its autograd.Function for torch.func transforms (filled below)


def route(op, *args):
    """op(*args) from a backward formula (or the API under torch.func), differentiable whatever
    the context: under torch.func transforms through the op's transformable autograd.Function
    (the op's autograd kernel in the dispatcher cannot serve a transform), in grad mode through
    the dispatcher, so the call is recorded for a higher-order gradient (create_graph=True), and
    in a plain backward (grad mode off) straight below the autograd layer. While dynamo traces
    (on the CPU an eager backward after a graph break runs these formulas under its frame hook)
    the dispatcher call too: dynamo cannot trace the below-autograd guard, and with grad mode
    off the op's autograd kernel only redispatches."""
    if torch._C._are_functorch_transforms_active():
        transformable = _TRANSFORMABLE.get(op)
        return transformable.apply(*args) if transformable is not None else op(*args)
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        return op(*args)
    with torch._C._AutoDispatchBelowAutograd():
        return op(*args)


def gather(feat, idx, weight):
    return route(ops.gather.default, feat, idx, weight)


def gather_backward_feat(grad_out, idx, weight, n):
    return route(ops.gather_backward_feat.default, grad_out, idx, weight, n)


def gather_backward_weight(grad_out, feat, idx):
    return route(ops.gather_backward_weight.default, grad_out, feat, idx)


# --- gather: out[b,c,p] = sum_t w[b,p,t] * feat[b,c,idx[b,p,t]] ---------------------------------


def _gather_setup(ctx, inputs, output):
    feat, idx, weight = inputs
    ctx.n = feat.shape[2]
    ctx.has_weight = weight is not None
    ctx.save_for_backward(feat, idx, weight)


def _gather_backward(ctx, grad):
    feat, idx, weight = ctx.saved_tensors
    grad_feat = grad_weight = None
    if ctx.needs_input_grad[0]:
        grad_feat = gather_backward_feat(grad, idx, weight, ctx.n)
    if ctx.has_weight and ctx.needs_input_grad[2]:
        grad_weight = gather_backward_weight(grad, feat, idx)
    return grad_feat, None, grad_weight


# --- gather_backward_feat: out[b,c,j] = sum over (p,t) with idx[b,p,t] = j of w[b,p,t] * g[b,c,p]
# (the transpose of gather: its gradient w.r.t. g is a gather, w.r.t. w a gather_backward_weight)


def _gather_backward_feat_setup(ctx, inputs, output):
    grad_out, idx, weight, _ = inputs
    ctx.has_weight = weight is not None
    ctx.save_for_backward(grad_out, idx, weight)


def _gather_backward_feat_backward(ctx, grad):
    grad_out, idx, weight = ctx.saved_tensors
    grad_grad_out = grad_weight = None
    if ctx.needs_input_grad[0]:
        grad_grad_out = gather(grad, idx, weight)
    if ctx.has_weight and ctx.needs_input_grad[2]:
        grad_weight = gather_backward_weight(grad_out, grad, idx)
    return grad_grad_out, None, grad_weight, None


# --- gather_backward_weight: out[b,p,t] = sum_c g[b,c,p] * feat[b,c,idx[b,p,t]] (bilinear) -----


def _gather_backward_weight_setup(ctx, inputs, output):
    grad_out, feat, idx = inputs
    ctx.n = feat.shape[2]
    ctx.save_for_backward(grad_out, feat, idx)


def _gather_backward_weight_backward(ctx, grad):
    grad_out, feat, idx = ctx.saved_tensors
    grad_grad_out = grad_feat = None
    if ctx.needs_input_grad[0]:
        grad_grad_out = gather(feat, idx, grad)
    if ctx.needs_input_grad[1]:
        grad_feat = gather_backward_feat(grad_out, idx, grad, ctx.n)
    return grad_grad_out, grad_feat, None


# --- distances of knn / ball_query w.r.t. both point sets ---------------------------------------


def distance_backward(xyz, query, idx, grad_dist2):
    """Gradients of d2[b,m,s] = |query[b,m] - xyz[b,idx[b,m,s]]|^2 w.r.t. xyz and query;
    slots with idx -1 contribute nothing (whatever their incoming gradient). Written in
    differentiable ops, so it has gradients of its own."""
    B, N = xyz.shape[0], xyz.shape[1]
    M, K = idx.shape[1], idx.shape[2]
    flat_idx = idx.reshape(B, M * K, 1)
    neighbours = gather(xyz.transpose(1, 2), flat_idx, None).view(B, 3, M, K)
    diff = query.transpose(1, 2).unsqueeze(-1) - neighbours  # [B,3,M,K]; 0 - query at idx -1
    grad_valid = torch.where(idx >= 0, grad_dist2, torch.zeros_like(grad_dist2))
    g = 2 * diff * grad_valid.unsqueeze(1)
    grad_query = g.sum(-1).transpose(1, 2)
    grad_xyz = gather_backward_feat((-g).reshape(B, 3, M * K), flat_idx, None, N).transpose(1, 2)
    return grad_xyz, grad_query


def _knn_setup(ctx, inputs, output):
    xyz, query = inputs[0], inputs[1]
    ctx.save_for_backward(xyz, query, output[1])


def _knn_backward(ctx, grad_dist2, grad_idx):
    xyz, query, idx = ctx.saved_tensors
    if grad_dist2 is None:
        return (None,) * 5
    grad_xyz, grad_query = distance_backward(xyz, query, idx, grad_dist2)
    return (
        grad_xyz if ctx.needs_input_grad[0] else None,
        grad_query if ctx.needs_input_grad[1] else None,
        None,
        None,
        None,
    )


def _ball_query_setup(ctx, inputs, output):
    xyz, query = inputs[0], inputs[1]
    ctx.return_dist2 = inputs[7]
    ctx.save_for_backward(xyz, query, output[0])


def _ball_query_backward(ctx, grad_idx, grad_count, grad_dist2):
    xyz, query, idx = ctx.saved_tensors
    if grad_dist2 is None or not ctx.return_dist2:
        return (None,) * 8
    grad_xyz, grad_query = distance_backward(xyz, query, idx, grad_dist2)
    return (
        grad_xyz if ctx.needs_input_grad[0] else None,
        grad_query if ctx.needs_input_grad[1] else None,
    ) + (None,) * 6


# --- packed batches: the same formulas on channels-last rows --------------------------------------
# gather_rows: out[q,c] = sum_t w[q,t] * feat[idx[q,t],c]; its transposes as for the padded gather.


def gather_rows(feat, idx, weight):
    return route(ops.gather_rows.default, feat, idx, weight)


def gather_rows_backward_feat(grad_out, idx, weight, rows):
    return route(ops.gather_rows_backward_feat.default, grad_out, idx, weight, rows)


def gather_rows_backward_weight(grad_out, feat, idx):
    return route(ops.gather_rows_backward_weight.default, grad_out, feat, idx)


def _gather_rows_setup(ctx, inputs, output):
    feat, idx, weight = inputs
    ctx.rows = feat.shape[0]
    ctx.has_weight = weight is not None
    ctx.save_for_backward(feat, idx, weight)


def _gather_rows_backward(ctx, grad):
    feat, idx, weight = ctx.saved_tensors
    grad_feat = grad_weight = None
    if ctx.needs_input_grad[0]:
        grad_feat = gather_rows_backward_feat(grad, idx, weight, ctx.rows)
    if ctx.has_weight and ctx.needs_input_grad[2]:
        grad_weight = gather_rows_backward_weight(grad, feat, idx)
    return grad_feat, None, grad_weight


def _gather_rows_backward_feat_setup(ctx, inputs, output):
    grad_out, idx, weight, _ = inputs
    ctx.has_weight = weight is not None
    ctx.save_for_backward(grad_out, idx, weight)


def _gather_rows_backward_feat_backward(ctx, grad):
    grad_out, idx, weight = ctx.saved_tensors
    grad_grad_out = grad_weight = None
    if ctx.needs_input_grad[0]:
        grad_grad_out = gather_rows(grad, idx, weight)
    if ctx.has_weight and ctx.needs_input_grad[2]:
        grad_weight = gather_rows_backward_weight(grad_out, grad, idx)
    return grad_grad_out, None, grad_weight, None


def _gather_rows_backward_weight_setup(ctx, inputs, output):
    grad_out, feat, idx = inputs
    ctx.rows = feat.shape[0]
    ctx.save_for_backward(grad_out, feat, idx)


def _gather_rows_backward_weight_backward(ctx, grad):
    grad_out, feat, idx = ctx.saved_tensors
    grad_grad_out = grad_feat = None
    if ctx.needs_input_grad[0]:
        grad_grad_out = gather_rows(feat, idx, grad)
    if ctx.needs_input_grad[1]:
        grad_feat = gather_rows_backward_feat(grad_out, idx, grad, ctx.rows)
    return grad_grad_out, grad_feat, None


def packed_distance_backward(xyz, query, idx, grad_dist2):
    """Gradients of d2[q,s] = |query[q] - xyz[idx[q,s]]|^2 (idx global rows, -1 none)."""
    Q, K = idx.shape
    flat_idx = idx.reshape(Q * K, 1)
    neighbours = gather_rows(xyz, flat_idx, None).view(Q, K, 3)
    diff = query.unsqueeze(1) - neighbours
    grad_valid = torch.where(idx >= 0, grad_dist2, torch.zeros_like(grad_dist2))
    g = 2 * diff * grad_valid.unsqueeze(-1)
    grad_query = g.sum(1)
    grad_xyz = gather_rows_backward_feat((-g).reshape(Q * K, 3), flat_idx, None, xyz.shape[0])
    return grad_xyz, grad_query


def _knn_packed_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[2], output[1])


def _knn_packed_backward(ctx, grad_dist2, grad_idx):
    xyz, query, idx = ctx.saved_tensors
    if grad_dist2 is None:
        return (None,) * 5
    grad_xyz, grad_query = packed_distance_backward(xyz, query, idx, grad_dist2)
    return (
        grad_xyz if ctx.needs_input_grad[0] else None,
        None,
        grad_query if ctx.needs_input_grad[2] else None,
        None,
        None,
    )


def _ball_query_packed_setup(ctx, inputs, output):
    ctx.return_dist2 = inputs[7]
    ctx.save_for_backward(inputs[0], inputs[2], output[0])


def _ball_query_packed_backward(ctx, grad_idx, grad_count, grad_dist2):
    xyz, query, idx = ctx.saved_tensors
    if grad_dist2 is None or not ctx.return_dist2:
        return (None,) * 8
    grad_xyz, grad_query = packed_distance_backward(xyz, query, idx, grad_dist2)
    return (
        grad_xyz if ctx.needs_input_grad[0] else None,
        None,
        grad_query if ctx.needs_input_grad[2] else None,
    ) + (None,) * 5


# --- the autograd.Functions and the autograd kernels ---------------------------------------------


def raise_recorded(error: RuntimeError) -> None:
    """A problem found by the asynchronous CUDA checks arrives from the binding as RuntimeError;
    it is a bad argument value, so the API raises it as ValueError."""
    message = str(error)
    start = message.find("pointops.")
    if "was given bad values" in message and start >= 0:
        raise ValueError(message[start:].splitlines()[0]) from None


def _functions(name, op, setup_context, backward):
    """(eager, transformable) autograd.Functions of one op.

    eager: forward takes ctx itself; a separate setup_context staticmethod would make every
    apply() bind its arguments through inspect.signature, which costs more than the op's own
    host time. transformable: the setup_context form with a generated vmap rule, required by
    torch.func transforms (apply() checks for it whenever a transform is active)."""

    def below_autograd(*args):
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    def eager_forward(ctx, *args):
        output = below_autograd(*args)
        setup_context(ctx, args, output)
        return output

    def checked_backward(ctx, *grads):
        # a backward op can be the first call to see a problem recorded on the GPU: raise it
        # as the forward calls do (pointops.ops._call)
        try:
            return backward(ctx, *grads)
        except RuntimeError as error:
            raise_recorded(error)
            raise

    eager = type(
        name,
        (torch.autograd.Function,),
        {
            "forward": staticmethod(eager_forward),
            "backward": staticmethod(checked_backward),
        },
    )
    transformable = type(
        name + "Transformable",
        (torch.autograd.Function,),
        {
            "forward": staticmethod(below_autograd),
            "setup_context": staticmethod(setup_context),
            "backward": staticmethod(checked_backward),
            "generate_vmap_rule": True,
        },
    )
    return eager, transformable


def _register_autograd(opname, eager, transformable):
    op = getattr(ops, opname).default
    _TRANSFORMABLE[op] = transformable
    after_autograd = torch._C._after_autograd_keyset

    def autograd_kernel(keyset, *args):
        if torch.is_grad_enabled() and torch._C._any_requires_grad(*args):
            if torch._C._are_functorch_transforms_active():
                # a transform's autograd.Function cannot run from inside the dispatcher
                raise RuntimeError(
                    f"pointops: torch.ops.pointops.{opname} is not differentiable under torch.func "
                    "transforms when called directly; call it through the pointops API "
                    "(pointops.knn, pointops.gather_points, ...), which is"
                )
            return eager.apply(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & after_autograd, *args)

    _lib.impl(opname, autograd_kernel, "Autograd", with_keyset=True)


GatherFunction, GatherTransformable = _functions(
    "GatherFunction", ops.gather.default, _gather_setup, _gather_backward
)
GatherBackwardFeatFunction, GatherBackwardFeatTransformable = _functions(
    "GatherBackwardFeatFunction",
    ops.gather_backward_feat.default,
    _gather_backward_feat_setup,
    _gather_backward_feat_backward,
)
GatherBackwardWeightFunction, GatherBackwardWeightTransformable = _functions(
    "GatherBackwardWeightFunction",
    ops.gather_backward_weight.default,
    _gather_backward_weight_setup,
    _gather_backward_weight_backward,
)
KnnFunction, KnnTransformable = _functions("KnnFunction", ops.knn.default, _knn_setup, _knn_backward)
BallQueryFunction, BallQueryTransformable = _functions(
    "BallQueryFunction", ops.ball_query.default, _ball_query_setup, _ball_query_backward
)

GatherRowsFunction, GatherRowsTransformable = _functions(
    "GatherRowsFunction", ops.gather_rows.default, _gather_rows_setup, _gather_rows_backward
)
GatherRowsBackwardFeatFunction, GatherRowsBackwardFeatTransformable = _functions(
    "GatherRowsBackwardFeatFunction",
    ops.gather_rows_backward_feat.default,
    _gather_rows_backward_feat_setup,
    _gather_rows_backward_feat_backward,
)
GatherRowsBackwardWeightFunction, GatherRowsBackwardWeightTransformable = _functions(
    "GatherRowsBackwardWeightFunction",
    ops.gather_rows_backward_weight.default,
    _gather_rows_backward_weight_setup,
    _gather_rows_backward_weight_backward,
)
KnnPackedFunction, KnnPackedTransformable = _functions(
    "KnnPackedFunction", ops.knn_packed.default, _knn_packed_setup, _knn_packed_backward
)
BallQueryPackedFunction, BallQueryPackedTransformable = _functions(
    "BallQueryPackedFunction",
    ops.ball_query_packed.default,
    _ball_query_packed_setup,
    _ball_query_packed_backward,
)

_register_autograd("gather", GatherFunction, GatherTransformable)
_register_autograd("gather_rows", GatherRowsFunction, GatherRowsTransformable)
_register_autograd(
    "gather_rows_backward_feat", GatherRowsBackwardFeatFunction, GatherRowsBackwardFeatTransformable
)
_register_autograd(
    "gather_rows_backward_weight", GatherRowsBackwardWeightFunction, GatherRowsBackwardWeightTransformable
)
_register_autograd("knn_packed", KnnPackedFunction, KnnPackedTransformable)
_register_autograd("ball_query_packed", BallQueryPackedFunction, BallQueryPackedTransformable)
_register_autograd("gather_backward_feat", GatherBackwardFeatFunction, GatherBackwardFeatTransformable)
_register_autograd("gather_backward_weight", GatherBackwardWeightFunction, GatherBackwardWeightTransformable)
_register_autograd("knn", KnnFunction, KnnTransformable)
_register_autograd("ball_query", BallQueryFunction, BallQueryTransformable)


# --- vmap rules: the vmapped dimension joins the batch dimension ---------------------------------


def _fold(batch_size: int, in_dims, args) -> tuple[list, int]:
    """Every tensor argument as [V*B, ...] (vmapped dimension first, then merged with B; a tensor
    not vmapped over is repeated V times); returns the arguments and B."""
    B = None
    folded = []
    for arg, dim in zip(args, in_dims, strict=True):
        if isinstance(arg, Tensor):
            arg = arg.expand(batch_size, *arg.shape) if dim is None else arg.movedim(dim, 0)
            if B is None:
                B = arg.shape[1]
            arg = arg.reshape(batch_size * arg.shape[1], *arg.shape[2:])
        folded.append(arg)
    return folded, B


def _unfold(t: Tensor, batch_size: int, B: int) -> Tensor:
    return t.reshape(batch_size, B, *t.shape[1:])


def _vmap_rule(op):
    """A vmap rule for `op` (register_vmap: it gets the unwrapped tensors and their vmapped
    dimensions): one call of op on the folded batch. Every output is batched, except
    ball_query's distances without return_dist2 (an empty [0] tensor)."""

    def rule(info, in_dims, *args):
        args, B = _fold(info.batch_size, in_dims, args)
        out = op(*args)
        if isinstance(out, Tensor):
            return _unfold(out, info.batch_size, B), 0
        dims = tuple(0 if t.dim() > 1 else None for t in out)  # every batched output is [B, ...]
        return tuple(
            _unfold(t, info.batch_size, B) if d == 0 else t for t, d in zip(out, dims, strict=True)
        ), dims

    return rule


for _name in (
    "furthest_point_sample",
    "ball_query",
    "knn",
    "gather",
    "gather_backward_feat",
    "gather_backward_weight",
):
    torch.library.register_vmap(f"pointops::{_name}", _vmap_rule(getattr(ops, _name).default))
