"""Fused forward + gradient ops of the loss family, and the in-place gradient scale their backward uses.

cross_entropy_with_grad(input, target[, weight]; reduction 'mean' | 'sum', ignore_index, label_smoothing)
    -> (loss, dinput): cross_entropy's loss and d loss / d input for an upstream gradient of 1, from one read
    of the logits on the GPU (backends/triton/loss_ce_fused.py).  FW + BW of a training step then move the
    logits once in and the gradient once out: 4096 x 128256 bf16 is 2 x 1.05 GB instead of eager's five
    passes (read, write log-probabilities, read them back, read the upstream path, write the gradient).
    reduction='none' is refused: its gradient depends on a per-row upstream gradient, which a forward cannot
    know.  Semantics (weights, ignore_index, smoothing, probability targets, out-of-range targets raise) are
    cross_entropy's (ops/loss.py); the dinput output equals cross_entropy_backward(1, input, target, weight).

grad_scale(x, g) -> x * g for a 0-d g of x's dtype (rounded once).  Run in place (``out=x``) it skips the pass
    over x when g == 1 — decided on the device, so no host sync and CUDA-graph safe — which is what the drop-in's
    backward does with the saved gradient of cross_entropy_with_grad: ``loss.backward()`` on the loss itself
    costs nothing beyond the forward.

How the torch drop-in uses them: ``OpSpec.fused_grad`` on cross_entropy names cross_entropy_with_grad; under
eager autograd (not inside torch.compile, which traces the separate forward and backward custom ops) the
drop-in runs the fused op, keeps dinput, and its backward returns grad_scale(dinput, g) in place — see
baracuda/torch/_fused.py.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .loss import _check as _loss_check
from .loss import _errors, _fw_cases, _register_input_makers_for, _tol

CE_WITH_GRAD = "cross_entropy_with_grad"


def _check_ce(inputs, attrs):
    a, _ = _loss_check(CE_WITH_GRAD, "cross_entropy")(inputs, attrs)
    if a["reduction"] == "none":
        raise InvalidProblemError(CE_WITH_GRAD, "reduction", "'mean' or 'sum' (the gradient of a 'none' loss needs "
                                  "the per-row upstream gradient; use cross_entropy + cross_entropy_backward)", "'none'")
    x = inputs[0]
    return a, (TensorSpec((), x.dtype), TensorSpec(x.shape, x.dtype))


def _samples_ce(rng):
    for ins, attrs, name, _ in _fw_cases(rng, "cross_entropy"):
        if attrs["reduction"] != "none":
            yield Sample(tuple(ins), attrs, name=name, grad=False)


def _errors_ce():
    yield from _errors("cross_entropy")()
    yield ErrorCase((((4, 5), "f32"), ((4,), "i64")), {"reduction": "none"}, InvalidProblemError,
                    r"cross_entropy_with_grad.*argument 'reduction': expected 'mean' or 'sum'", "reduction-none")


def _peer_ce(x, t, w=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    import torch
    import torch.nn.functional as F

    x = x.detach().clone().requires_grad_(True)
    tt = t.long() if not torch.is_floating_point(t) else t
    loss = F.cross_entropy(x, tt, weight=w, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    (dx,) = torch.autograd.grad(loss, x)
    return loss.detach(), dx


def _cost_ce(desc):
    """Floor: read the logits once, write dinput once (+ targets, weights)."""
    x = desc.inputs[0]
    others = sum(t.nbytes for t in desc.inputs[1:])
    return 2 * x.nbytes + others, 6 * x.numel


_WL = ((4096, 128256, DType.bf16), (8192, 32000, DType.bf16), (4096, 128256, DType.f32))

register_spec(OpSpec(
    name=CE_WITH_GRAD, family="loss", arg_names=("input", "target", "weight"), check=_check_ce, dtypes=FLOAT_TYPES,
    defaults={"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0}, torch_peer=_peer_ce,
    samples=_samples_ce, errors=_errors_ce, tol=_tol,
    workloads=tuple(Workload(f"{CE_WITH_GRAD}-{n}x{c}-{dt}", ((n, c), (n,)), dt, {}) for n, c, dt in _WL),
    cost=_cost_ce, category="loss",
    doc="cross_entropy's loss and its input gradient for a unit upstream gradient, in one read of the logits "
        "(the drop-in's training path; mean/sum reductions).",
))


# -- grad_scale ----------------------------------------------------------------------------------------------
def _check_scale(inputs, attrs):
    if attrs:
        raise InvalidProblemError("grad_scale", sorted(attrs)[0], "no attributes", "an attribute")
    if len(inputs) != 2:
        raise InvalidProblemError("grad_scale", "inputs", "2 operands (x, g)", len(inputs))
    x, g = inputs
    if x.dtype not in FLOAT_TYPES:
        raise UnsupportedError("grad_scale", f"argument 'x' has dtype {x.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    if g.shape != ():
        raise InvalidProblemError("grad_scale", "g", "a 0-d tensor (a scalar loss's upstream gradient)", g.shape)
    if g.dtype != x.dtype:
        raise DTypeMismatchError("grad_scale", "g", str(x.dtype), str(g.dtype))
    return {}, (TensorSpec(x.shape, x.dtype),)


def _samples_scale(rng):
    for shape in ((3, 5), (1000,), (2, 3, 4), (0, 4)):
        yield Sample((rng.standard_normal(shape), np.asarray(rng.uniform(0.3, 2.0))), name=f"{shape}")
    yield Sample((rng.standard_normal((7, 9)), np.asarray(1.0)), name="g=1")   # out of place: still written


def _errors_scale():
    yield ErrorCase((((4,), "f32"), ((1,), "f32")), {}, InvalidProblemError, r"argument 'g': expected a 0-d", "g-shape")
    yield ErrorCase((((4,), "f32"), ((), "f16")), {}, DTypeMismatchError, r"argument 'g': expected dtype f32", "g-dtype")
    yield ErrorCase((((4,), "i32"), ((), "i32")), {}, UnsupportedError, r"argument 'x' has dtype i32", "int")


def _peer_scale(x, g):
    return x * g


register_spec(OpSpec(
    name="grad_scale", family="loss", arg_names=("x", "g"), check=_check_scale, dtypes=FLOAT_TYPES,
    torch_peer=_peer_scale, samples=_samples_scale, errors=_errors_scale,
    workloads=(Workload("grad_scale-4096x128256-bf16", ((4096, 128256), ()), DType.bf16),),
    cost=lambda d: (2 * d.inputs[0].nbytes, d.inputs[0].numel), category="loss",
    doc="x * g for a 0-d g; in place (out=x) with g == 1 it reads nothing (device-side check): the backward "
        "of the fused forward+gradient ops.",
))

_register_input_makers_for((CE_WITH_GRAD,))
