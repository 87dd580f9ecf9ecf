"""Fused forward + gradient ops of the loss family, and the in-place gradient scale their backward uses.

cross_entropy_with_grad(grad, input, target[, weight]; reduction 'mean' | 'sum', ignore_index, label_smoothing)
    -> (loss, dinput): cross_entropy's loss and grad * d loss / d input (grad: the loss's 0-d upstream gradient),
    from one read of the logits on the GPU (backends/triton/loss_ce_fused.py).  FW + BW of a training step then
    move the logits once in and the gradient once out: 4096 x 128256 bf16 is 2 x 1.05 GB instead of eager's five
    passes (read, write log-probabilities, read them back, read the upstream path, write the gradient).
    reduction='none' is refused: its gradient depends on a per-row upstream gradient, which a forward cannot
    know.  Semantics (weights, ignore_index, smoothing, probability targets, out-of-range targets raise) are
    cross_entropy's (ops/loss.py); the operands and the dinput output are cross_entropy_backward's.

grad_scale(x, g[, h]) -> x * g / h for 0-d g, h of x's dtype (h default 1; the factor g / h in the compute
    precision, the product rounded once).  Run in place (``out=x``) it skips the pass over x when g == h —
    decided on the device, so no host sync and CUDA-graph safe.  The drop-in's backward runs it on the gradient
    the fused forward computed for an upstream h: a step whose upstream g equals h costs nothing beyond the
    forward.

How the torch drop-in uses them: ``OpSpec.fused_grad`` on cross_entropy names cross_entropy_with_grad; under
eager autograd (not inside torch.compile, which traces the separate forward and backward custom ops) the
drop-in runs the fused op with h = the upstream gradient its previous backward saw (1 at first: a training
loop's upstream — 1, a gradient-accumulation 1/k, a loss scale — repeats step after step), keeps dinput, and
its backward returns grad_scale(dinput, g, h) in place — see baracuda/torch/_fused.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import BaracudaError, DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import renamed_error
from .loss import _SPECS as _LOSS_SPECS
from .loss import CE_ATTRS, _fw_cases, _register_input_makers_for, _tol

CE_WITH_GRAD = "cross_entropy_with_grad"


def _check_ce(inputs, attrs):
    if attrs.get("reduction") == "none":
        raise InvalidProblemError(CE_WITH_GRAD, "reduction", "'mean' or 'sum' (the gradient of a 'none' loss needs "
                                  "the per-row upstream gradient; use cross_entropy + cross_entropy_backward)", "'none'")
    try:   # cross_entropy's rule, then its backward's (the lse operand from the forward), under this op's name
        if not inputs:
            raise InvalidProblemError(CE_WITH_GRAD, "inputs", "the upstream gradient 'grad' first", 0)
        _, (_, lse) = _LOSS_SPECS["cross_entropy"].check(tuple(inputs[1:]), attrs)
        a, (dx,) = _LOSS_SPECS["cross_entropy_backward"].check((inputs[0], lse) + tuple(inputs[1:]), attrs)
    except BaracudaError as e:
        e = renamed_error(e, "cross_entropy", CE_WITH_GRAD)
        raise renamed_error(e, "cross_entropy_backward", CE_WITH_GRAD) from None
    return a, (TensorSpec((), dx.dtype), dx)


def _samples_ce(rng):
    for ins, attrs, name, _ in _fw_cases(rng, "cross_entropy"):
        if attrs["reduction"] != "none":
            g = np.asarray(1.0 if name.startswith("N=0") else rng.uniform(0.3, 2.0))
            yield Sample((g,) + tuple(ins), attrs, name=name, grad=False)


def _errors_ce():
    for c in _LOSS_SPECS["cross_entropy_backward"].errors():   # less its lse operand (index 1)
        if c.attrs.get("reduction", "mean") != "none" and c.name != "lse-shape":
            yield dataclasses.replace(c, inputs=c.inputs[:1] + c.inputs[2:])
    yield ErrorCase((((), "f32"), ((4, 5), "f32"), ((4,), "i64")), {"reduction": "none"}, InvalidProblemError,
                    r"cross_entropy_with_grad.*argument 'reduction': expected 'mean' or 'sum'", "reduction-none")


def _peer_ce(g, x, t, w=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    import torch
    import torch.nn.functional as F

    x = x.detach().clone().requires_grad_(True)
    tt = t.long() if not torch.is_floating_point(t) else t
    loss = F.cross_entropy(x, tt, weight=w, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    (dx,) = torch.autograd.grad(loss, x, grad_outputs=g)
    return loss.detach(), dx


def _cost_ce(desc):
    """Floor: read the logits once, write dinput once (+ targets, weights)."""
    x = desc.inputs[1]
    others = sum(t.nbytes for i, t in enumerate(desc.inputs) if i != 1)
    return 2 * x.nbytes + others, 6 * x.numel


_WL = ((4096, 128256, DType.bf16), (8192, 32000, DType.bf16), (4096, 128256, DType.f32))

register_spec(OpSpec(
    name=CE_WITH_GRAD, family="loss", arg_names=("grad", "input", "target", "weight"), check=_check_ce,
    dtypes=FLOAT_TYPES,
    attrs=CE_ATTRS, torch_peer=_peer_ce,
    samples=_samples_ce, errors=_errors_ce, tol=_tol,
    workloads=tuple(Workload(f"{CE_WITH_GRAD}-{n}x{c}-{dt}", ((), (n, c), (n,)), dt, {}) for n, c, dt in _WL),
    cost=_cost_ce, category="loss",
    doc="cross_entropy's loss and its input gradient for the upstream gradient grad, in one read of the "
        "logits (the drop-in's training path; mean/sum reductions).",
))


# -- grad_scale ----------------------------------------------------------------------------------------------
def _check_scale(inputs, attrs):
    if len(inputs) not in (2, 3):
        raise InvalidProblemError("grad_scale", "inputs", "2 or 3 operands (x, g[, h])", len(inputs))
    x = inputs[0]
    if x.dtype not in FLOAT_TYPES:
        raise UnsupportedError("grad_scale", f"argument 'x' has dtype {x.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    for name, s in zip(("g", "h"), inputs[1:]):
        if s.shape != ():
            raise InvalidProblemError("grad_scale", name, "a 0-d tensor (a scalar loss's upstream gradient)", s.shape)
        if s.dtype != x.dtype:
            raise DTypeMismatchError("grad_scale", name, str(x.dtype), str(s.dtype))
    return {}, (TensorSpec(x.shape, x.dtype),)


def _samples_scale(rng):
    for shape in ((3, 5), (1000,), (2, 3, 4), (0, 4)):
        yield Sample((rng.standard_normal(shape), np.asarray(rng.uniform(0.3, 2.0))), name=f"{shape}")
        yield Sample((rng.standard_normal(shape), np.asarray(rng.uniform(0.3, 2.0)), np.asarray(rng.uniform(0.3, 2.0))),
                     name=f"{shape}-h")
    yield Sample((rng.standard_normal((7, 9)), np.asarray(1.0)), name="g=1")   # out of place: still written
    yield Sample((rng.standard_normal((7, 9)), np.asarray(0.75), np.asarray(0.75)), name="g=h")


def _errors_scale():
    yield ErrorCase((((4,), "f32"), ((1,), "f32")), {}, InvalidProblemError, r"argument 'g': expected a 0-d", "g-shape")
    yield ErrorCase((((4,), "f32"), ((), "f16")), {}, DTypeMismatchError, r"argument 'g': expected dtype f32", "g-dtype")
    yield ErrorCase((((4,), "f32"), ((), "f32"), ((2,), "f32")), {}, InvalidProblemError, r"argument 'h': expected a 0-d",
                    "h-shape")
    yield ErrorCase((((4,), "f32"), ((), "f32"), ((), "f64")), {}, DTypeMismatchError, r"argument 'h': expected dtype f32",
                    "h-dtype")
    yield ErrorCase((((4,), "i32"), ((), "i32")), {}, UnsupportedError, r"argument 'x' has dtype i32", "int")


def _peer_scale(x, g, h=None):
    return x * g if h is None else x * (g / h)


register_spec(OpSpec(
    name="grad_scale", family="loss", arg_names=("x", "g", "h"), check=_check_scale, dtypes=FLOAT_TYPES, attrs=(),
    torch_peer=_peer_scale, samples=_samples_scale, errors=_errors_scale,
    workloads=(Workload("grad_scale-4096x128256-bf16", ((4096, 128256), ()), DType.bf16),),
    cost=lambda d: (2 * d.inputs[0].nbytes, d.inputs[0].numel), category="loss",
    doc="x * g / h for 0-d g, h (h default 1); in place (out=x) with g == h it reads nothing (device-side "
        "check): the backward of the fused forward+gradient ops.",
))

_register_input_makers_for((CE_WITH_GRAD,))
