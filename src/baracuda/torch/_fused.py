"""The drop-in's training path for ops whose spec names a fused forward + gradient op (``OpSpec.fused_grad``).

``F.cross_entropy(logits, target)`` under eager autograd runs cross_entropy_with_grad: one pass returns the loss
and d loss / d logits for a unit upstream gradient, kept by the autograd node.  The backward scales that
buffer in place by the upstream gradient with grad_scale (on the device: when the upstream is 1, as for
``loss.backward()``, no element is touched) and hands it out as the gradient, so a training step moves the
logits once in and the gradient once out instead of eager's several passes.

Where it does not apply the ordinary custom op runs (forward op + backward op): inside torch.compile (the custom
ops are what the compiler traces; this node calls plans directly), with grad mode off or no input requiring
grad, for tensor subclasses, and wherever the fused op refuses the arguments (reduction='none', a backend
that lacks it).  A second backward through a retained graph recomputes the gradient with the ordinary backward
op from the saved inputs, because the first one handed the buffer out (it may now be someone's ``.grad``).
Memory: the node holds the gradient buffer (the size of the logits) and references to the inputs; eager torch
holds the log-probabilities (the same size) instead.
"""
from __future__ import annotations

import torch

from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.plan import plan_for
from ._library import _descriptor, _device_of, _inside, _sig, encode_attrs, get_preference


_PLANS: dict = {}   # (op, attrs, shapes, dtypes, device, preference) -> the plan, or None where it refuses


def _plan_of(name, attrs: dict, xs, strict: bool = False):
    """The plan of op ``name`` on torch tensors xs (None where it refuses them; ``strict``: the refusal raises),
    found by a key of plain values: a training step's host time builds no descriptor per call.  Bounded: shapes
    that keep changing clear it."""
    pref = get_preference()
    try:
        key = (name, tuple(sorted(attrs.items())), tuple([(x.shape, x.dtype) for x in xs]), xs[0].device, pref)
        return _PLANS[key]
    except KeyError:
        pass
    except TypeError:        # an unhashable attribute value: no caching
        key = None
    try:
        plan = plan_for(_descriptor(name, encode_attrs(attrs), _sig(xs)), _device_of(xs), pref)
    except (InvalidProblemError, UnsupportedError):
        if strict:
            raise
        plan = None
    if key is not None:
        if len(_PLANS) > 4096:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _fused_plan(spec, inputs, attrs):
    """The fused op's plan for these arguments, or None where the ordinary path must run."""
    if not torch.is_grad_enabled() or torch.compiler.is_compiling():
        return None
    if any(type(x) is not torch.Tensor for x in inputs):
        return None
    if not any(inputs[i].requires_grad for i in spec.differentiable if i < len(inputs)):
        return None
    return _plan_of(spec.fused_grad, attrs, inputs)


@_inside      # (baracuda.torch.mode leaves the torch calls of our own plumbing alone)
def _run(plan, *xs):
    return plan.run(*xs)


@_inside
def _scale_in_place(grad, g):
    plan = _plan_of("grad_scale", {}, (grad, g), strict=True)
    plan.run(grad, g, out=grad)


class _FusedGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan, diff, *xs):
        outs = _run(plan, *xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        n_out = len(plan.desc.outputs) - len(diff)
        ctx.bc_grads = list(outs[n_out:])
        ctx.bc_plan, ctx.bc_diff = plan, diff
        ctx.save_for_backward(*xs)
        return outs[0] if n_out == 1 else tuple(outs[:n_out])

    @staticmethod
    def backward(ctx, g):
        grads, ctx.bc_grads = ctx.bc_grads, None
        if grads is None:
            # a second backward through a retained graph: the first one handed the buffers out (one may be a
            # .grad by now), so the fused op runs again on the saved inputs for fresh ones
            outs = _run(ctx.bc_plan, *ctx.saved_tensors)
            grads = list(outs[len(outs) - len(ctx.bc_diff):])
        g = g.contiguous()
        for t in grads:
            _scale_in_place(t, g)
        full = [None] * len(ctx.saved_tensors)
        for i, t in zip(ctx.bc_diff, grads):
            full[i] = t
        return (None, None, *full)


def run_if_fused(spec, inputs, attrs):
    """Run the fused training path and return the op's primary outputs (the fused op's outputs before the
    gradients: what the drop-in returns), or None (the caller runs the custom op)."""
    plan = _fused_plan(spec, inputs, attrs)
    if plan is None:
        return None
    diff = tuple(i for i in spec.differentiable if i < len(inputs))
    return _FusedGrad.apply(plan, diff, *inputs)
