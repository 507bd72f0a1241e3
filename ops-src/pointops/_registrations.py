"""Fake (meta) kernels and autograd formulas for the operators defined in C++.

Fake kernels give output shapes without data, so torch.compile and torch.library.opcheck can
trace the ops. Gradients use only our own deterministic kernels (no float atomics): the
feature gradient of a gather is a gather_backward_feat, and the distance gradient of knn /
ball_query gathers the neighbours' coordinates and scatters back through gather_backward_feat.
"""

from __future__ import annotations

import torch

ops = torch.ops.pointops


@torch.library.register_fake("pointops::furthest_point_sample")
def _fps_fake(xyz, k, lengths, start):
    return xyz.new_empty((xyz.shape[0], k), dtype=torch.int64)


@torch.library.register_fake("pointops::ball_query")
def _ball_query_fake(xyz, query, radius, k, lengths, query_lengths, inclusive, return_dist2):
    B, M = query.shape[0], query.shape[1]
    idx = xyz.new_empty((B, M, k), dtype=torch.int64)
    count = xyz.new_empty((B, M), dtype=torch.int64)
    dist2 = xyz.new_empty((B, M, k) if return_dist2 else (0,))
    return idx, count, dist2


@torch.library.register_fake("pointops::knn")
def _knn_fake(xyz, query, k, lengths, query_lengths):
    B, M = query.shape[0], query.shape[1]
    return xyz.new_empty((B, M, k)), xyz.new_empty((B, M, k), dtype=torch.int64)


@torch.library.register_fake("pointops::gather")
def _gather_fake(feat, idx, weight):
    return feat.new_empty((feat.shape[0], feat.shape[1], idx.shape[1]))


@torch.library.register_fake("pointops::gather_backward_feat")
def _gather_backward_feat_fake(grad_out, idx, weight, n):
    return grad_out.new_empty((grad_out.shape[0], grad_out.shape[1], n))


@torch.library.register_fake("pointops::gather_backward_weight")
def _gather_backward_weight_fake(grad_out, feat, idx):
    return feat.new_empty((idx.shape[0], idx.shape[1], idx.shape[2]))


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
        grad_feat = ops.gather_backward_feat(grad, idx, weight, ctx.n)
    if ctx.has_weight and ctx.needs_input_grad[2]:
        grad_weight = ops.gather_backward_weight(grad, feat, idx)
    return grad_feat, None, grad_weight


torch.library.register_autograd("pointops::gather", _gather_backward, setup_context=_gather_setup)


# --- distances of knn / ball_query w.r.t. both point sets ---------------------------------------

def distance_backward(xyz, query, idx, grad_dist2):
    """Gradients of d2[b,m,s] = |query[b,m] - xyz[b,idx[b,m,s]]|^2 w.r.t. xyz and query;
    slots with idx -1 contribute nothing."""
    B, N = xyz.shape[0], xyz.shape[1]
    M, K = idx.shape[1], idx.shape[2]
    flat_idx = idx.reshape(B, M * K, 1)
    neighbours = ops.gather(xyz.transpose(1, 2), flat_idx, None).view(B, 3, M, K)
    diff = query.transpose(1, 2).unsqueeze(-1) - neighbours  # [B,3,M,K]
    valid = (idx >= 0).unsqueeze(1)
    g = torch.where(valid, 2 * diff * grad_dist2.unsqueeze(1), torch.zeros_like(diff))
    grad_query = g.sum(-1).transpose(1, 2)
    grad_xyz = ops.gather_backward_feat((-g).reshape(B, 3, M * K), flat_idx, None, N).transpose(1, 2)
    return grad_xyz, grad_query


def _knn_setup(ctx, inputs, output):
    xyz, query = inputs[0], inputs[1]
    ctx.save_for_backward(xyz, query, output[1])


def _knn_backward(ctx, grad_dist2, grad_idx):
    xyz, query, idx = ctx.saved_tensors
    if grad_dist2 is None:
        return (None,) * 5
    grad_xyz, grad_query = distance_backward(xyz, query, idx, grad_dist2)
    return (grad_xyz if ctx.needs_input_grad[0] else None,
            grad_query if ctx.needs_input_grad[1] else None, None, None, None)


torch.library.register_autograd("pointops::knn", _knn_backward, setup_context=_knn_setup)


def _ball_query_setup(ctx, inputs, output):
    xyz, query = inputs[0], inputs[1]
    ctx.return_dist2 = inputs[7]
    ctx.save_for_backward(xyz, query, output[0])


def _ball_query_backward(ctx, grad_idx, grad_count, grad_dist2):
    xyz, query, idx = ctx.saved_tensors
    if grad_dist2 is None or not ctx.return_dist2:
        return (None,) * 8
    grad_xyz, grad_query = distance_backward(xyz, query, idx, grad_dist2)
    return (grad_xyz if ctx.needs_input_grad[0] else None,
            grad_query if ctx.needs_input_grad[1] else None) + (None,) * 6


torch.library.register_autograd("pointops::ball_query", _ball_query_backward,
                                setup_context=_ball_query_setup)


# --- the same formulas for eager calls from the Python API ---------------------------------------

def _eager_function(name, op, setup_context, backward):
    """An autograd.Function with the formulas registered above, for eager calls of the Python
    API that need grad: it skips the dispatcher's round trip through the Python autograd kernel
    that register_autograd installs (about half the host time of such a call). torch.compile
    traces the registered op instead. forward takes ctx itself: a separate setup_context
    staticmethod would make every apply() bind its arguments through inspect.signature, which
    costs more than it saves."""

    def forward(ctx, *args):
        with torch._C._AutoDispatchBelowAutograd():
            output = op(*args)
        setup_context(ctx, args, output)
        return output

    return type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward),
        "backward": staticmethod(backward),
    })


GatherFunction = _eager_function("GatherFunction", ops.gather.default, _gather_setup, _gather_backward)
KnnFunction = _eager_function("KnnFunction", ops.knn.default, _knn_setup, _knn_backward)
BallQueryFunction = _eager_function("BallQueryFunction", ops.ball_query.default, _ball_query_setup,
                                    _ball_query_backward)
