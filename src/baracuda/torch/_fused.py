"""The drop-in's training path for ops whose spec names a fused forward + gradient op (``OpSpec.fused_grad``).

``F.cross_entropy(logits, target)`` under eager autograd runs cross_entropy_with_grad: one pass returns the loss
and h * d loss / d logits, kept by the autograd node, for a guess h of the upstream gradient: the upstream the
previous backward through this plan saw (a device scalar; 1 at first).  The backward rescales that buffer in
place by g / h with grad_scale(grad, g, h) — on the device: when the upstream g equals the guess, as it does
step after step for ``loss.backward()``, ``(loss / k).backward()`` (gradient accumulation) or a loss scaler's
``scale(loss)``, no element is touched — and hands it out as the gradient, so a training step moves the logits
once in and the gradient once out instead of eager's several passes.  A step whose upstream differs from the
previous one's pays one scaling pass (and one more rounding of the gradient: round(h d) * g / h), as every
step did before the guess; then g becomes the next guess (a zero or non-finite g never does).  Fused ops that
take no upstream (linear_cross_entropy) compute for a unit one and are scaled by g.

Where it does not apply the ordinary custom op runs (forward op + backward op): inside torch.compile (the custom
ops are what the compiler traces; this node calls plans directly), with grad mode off or no input requiring
grad, for tensor subclasses, and wherever the fused op refuses the arguments (reduction='none', a backend
that lacks it).  A second backward through a retained graph recomputes the gradient with the ordinary backward
op from the saved inputs, because the first one handed the buffer out (it may now be someone's ``.grad``).
Memory: the node holds the gradient buffer (the size of the logits) and references to the inputs; eager torch
holds the log-probabilities (the same size) instead.
"""
from __future__ import annotations

import functools

import torch

from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import get_spec
from ._call import STATE, Operand, bound, own_calls


_PLAIN = (torch.Tensor, torch.nn.Parameter)   # tensor subclasses with their own __torch_function__ take the custom op


def _plan_of(name, attrs: dict, xs, strict: bool = False):
    """The plan of op ``name`` on torch tensors xs, from the drop-ins' one cache of bound calls (None where it
    refuses them; ``strict``: the refusal raises)."""
    try:
        return bound(name, attrs, xs).plan
    except (InvalidProblemError, UnsupportedError):
        if strict:
            raise
        return None


def _inside(fn):
    """Run ``fn`` as baracuda's own code (``baracuda.torch.mode`` leaves its torch calls alone)."""
    @functools.wraps(fn)
    def wrapped(*args):
        STATE.depth += 1
        try:
            return fn(*args)
        finally:
            STATE.depth -= 1
    return wrapped


def fused_inputs(spec, n: int) -> tuple:
    """The inputs (of ``n``) whose gradients ``spec.fused_grad`` returns, in order."""
    diff = spec.differentiable if spec.fused_grad_inputs is None else spec.fused_grad_inputs
    return tuple(i for i in diff if i < n)


@functools.lru_cache(maxsize=None)
def _takes_upstream(name) -> bool:
    return get_spec(name).arg_names[:1] == ("grad",)


def _fused_plan(spec, inputs, attrs):
    """(the fused op's plan for these arguments, whether it takes the upstream), or None where the ordinary path
    must run."""
    if not torch.is_grad_enabled() or torch.compiler.is_compiling():
        return None
    if any(type(x) not in _PLAIN for x in inputs):    # (a Parameter is plain: a model's weight, the LM head's)
        return None
    fused = fused_inputs(spec, len(inputs))
    if not any(inputs[i].requires_grad for i in fused):
        return None
    if any(inputs[i].requires_grad for i in spec.differentiable if i < len(inputs) and i not in fused):
        return None     # a gradient the fused op does not compute is wanted
    up = _takes_upstream(spec.fused_grad)
    # the upstream gradient: a 0-d tensor of the logits' dtype, known only by that to the plan lookup
    xs = (Operand((), inputs[0].dtype, inputs[0].get_device()),) + tuple(inputs) if up else inputs
    plan = _plan_of(spec.fused_grad, attrs, xs)
    return None if plan is None else (plan, up)


@_inside      # (baracuda.torch.mode leaves the torch calls of our own plumbing alone)
def _run(plan, *xs):
    return plan.run(*xs)


@_inside
def _scale_in_place(grad, g, h=None):
    xs = (grad, g) if h is None else (grad, g, h)
    plan = _plan_of("grad_scale", {}, xs, strict=True)
    plan.run(*xs, out=grad)


# fused plan -> the device scalar the next forward computes for: the upstream gradient the plan's last backward
# saw.  Never written in place: a backward puts a new tensor here, so a node's h (a reference) stays what its
# forward used even when another node's backward of the same plan runs in between.
_GUESS: dict = {}


def _guess(plan, like):
    h = _GUESS.get(plan)
    if h is None:
        if len(_GUESS) > 4096:
            _GUESS.clear()
        h = _GUESS[plan] = torch.ones((), dtype=like.dtype, device=like.device)
    return h


@_inside
def _next_guess(plan, g, h):
    # g unless zero or non-finite (a forward for 0 would lose the gradient), decided on the device: g / g is
    # exactly 1 for every finite nonzero g and NaN otherwise
    _GUESS[plan] = torch.where(g / g == 1, g, h)


class _FusedGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan, diff, upstream, *xs):
        h = _guess(plan, xs[0]) if upstream else None
        outs = _run(plan, *(() if h is None else (h,)), *xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        n_out = len(plan.desc.outputs) - len(diff)
        ctx.bc_grads = list(outs[n_out:])
        ctx.bc_plan, ctx.bc_diff, ctx.bc_h = plan, diff, h
        ctx.save_for_backward(*xs)
        return outs[0] if n_out == 1 else tuple(outs[:n_out])

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors       # (before own_calls: see its docstring)
        with own_calls():
            grads, ctx.bc_grads = ctx.bc_grads, None
            g = g.contiguous()
            h = ctx.bc_h
            rerun = grads is None
            if rerun:
                # a second backward through a retained graph: the first one handed the buffers out (one may be a
                # .grad by now), so the fused op runs again on the saved inputs for fresh ones (for this upstream,
                # where the op takes one: nothing to scale then)
                outs = _run(ctx.bc_plan, *(() if h is None else (g,)), *saved)
                grads = list(outs[len(outs) - len(ctx.bc_diff):])
            if not (rerun and h is not None):
                for t in grads:
                    _scale_in_place(t, g, h)
            if h is not None:
                _next_guess(ctx.bc_plan, g, h)
        full = [None] * len(saved)
        for i, t in zip(ctx.bc_diff, grads):
            full[i] = t
        return (None, None, None, *full)


def run_if_fused(spec, inputs, attrs):
    """Run the fused training path and return the op's primary outputs (the fused op's outputs before the
    gradients: what the drop-in returns), or None (the caller runs the custom op)."""
    found = _fused_plan(spec, inputs, attrs)
    if found is None:
        return None
    plan, up = found
    diff = fused_inputs(spec, len(inputs))
    return _FusedGrad.apply(plan, diff, up, *inputs)
