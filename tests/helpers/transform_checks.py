"""torch.func against eager autograd, for a function of tensors (shared by tests/ops and
tests/compat; pyproject.toml puts this folder on pytest's path)."""

from __future__ import annotations

import torch
from torch.func import grad, jacrev


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def assert_jacrev_equals_eager(fn, inputs) -> None:
    """jacrev over every input equals torch.autograd.functional.jacobian, which is not all zero."""
    expected = torch.autograd.functional.jacobian(fn, tuple(inputs))
    assert any(torch.count_nonzero(e) for e in expected)
    for a, b in zip(jacrev(fn, argnums=tuple(range(len(inputs))))(*inputs), expected, strict=True):
        torch.testing.assert_close(a, b)


def assert_grad_equals_eager(fn, inputs) -> None:
    """grad of a weighted sum of fn's output equals torch.autograd.grad of the same loss."""

    def loss(*args):
        out = fn(*args)
        return (
            out * torch.linspace(-1, 2, out.numel(), dtype=out.dtype, device=out.device).view_as(out)
        ).sum()

    got = grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    leaves = [leaf(t) for t in inputs]
    for a, b in zip(got, torch.autograd.grad(loss(*leaves), leaves), strict=True):
        torch.testing.assert_close(a, b)


def assert_second_order_equals_eager(fn, inputs) -> None:
    """jacrev(jacrev) of a loss of fn w.r.t. its first input equals the eager Hessian (not all zero)."""

    def loss(x):
        out = fn(x, *inputs[1:])
        weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype, device=out.device).view_as(out)
        return (out.square() * weights).sum()

    expected = torch.autograd.functional.hessian(loss, inputs[0])
    assert torch.count_nonzero(expected)
    torch.testing.assert_close(jacrev(jacrev(loss))(inputs[0]), expected)
