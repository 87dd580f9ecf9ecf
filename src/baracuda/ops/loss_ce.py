"""Fused linear cross-entropy (issue 4, part 2): the loss of x @ W^T (+ b) without materializing [N, V] logits.

linear_cross_entropy(x [N, H], weight [V, H], target [N] integer, bias [V] optional;
                     ignore_index=-100, label_smoothing=0.0, softcap=None, z_loss=0.0, reduction='mean'|'sum')
  l = x @ W^T + b;  u = softcap * tanh(l / softcap) (when softcap is set) else l;  lse_i = logsumexp(u_i)
  loss_i = (1 - eps) (lse_i - u[i, t_i]) + eps / V * sum_c (lse_i - u[i, c]) + z_loss * lse_i^2   (0 on ignored rows)
  mean divides by the number of non-ignored rows (NaN when there are none, as torch).

Outputs: (loss, dx [N, H], dW [V, H][, db [V]]): the gradients of the loss for grad_out = 1, computed in the same
pass as the loss (the standard trick: the chunk's logits are overwritten by dlogits in place and consumed by two
GEMMs right away), so the backward is a scale of the saved dx / dW / db by grad_out (three `mul`s).  The extra
outputs are gradient by-products: they are treated as constants by the backward (no second derivatives), which
is why no sample feeds the generic finite-difference check (tests/loss checks the gradients instead).
reduction='none' is refused: per-row grad_out values are only known in the backward, after the GEMMs.  The drop-in
takes every form of torch's F.linear_cross_entropy: the ones the fused op does not (reduction='none', class weights,
class probabilities, a K-dim linear_weight) run as baracuda's linear followed by its cross_entropy.

Memory (see backends/triton/loss_ce.py): workspace = chunk * V * itemsize (the chunk's logits, chunk ~ N / 4)
+ 2N + 2 f32 words; with the outputs dx (N H) and dW (V H) the peak above the inputs is
  chunk V s + (N H + V H) s  bytes  (s = itemsize),
8192 x 4096 x 128256 bf16: 0.53 GB + 0.07 GB + 1.05 GB = 1.64 GB, against eager F.cross_entropy(x @ W.T)'s
logits + log_softmax output + their gradients (3 N V s = 6.3 GB alive at once) + dW: ~22%.  The drop-in
``baracuda.torch.nn.functional.linear_cross_entropy`` runs under autograd through torch/_fused.py, whose backward
scales dx / dW / db in place (nothing to do for grad_out = 1), so no second copy of dW is ever allocated.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from .loss import IGNORE_INDEX, INDEX_DTYPES, LABEL_SMOOTHING

__all__ = ["LCE_DEFAULTS"]

LCE_DEFAULTS = {"ignore_index": -100, "label_smoothing": 0.0, "softcap": None, "z_loss": 0.0, "reduction": "mean"}
_OP = "linear_cross_entropy"


_ATTRS = (IGNORE_INDEX, LABEL_SMOOTHING,
          Attr("softcap", "float", None, optional=True, gt=0.0, expected="None or a float > 0"),
          Attr("z_loss", "float", 0.0, ge=0.0, expected="a float >= 0"),
          Attr("reduction", "str", "mean", choices=("none", "mean", "sum"), expected="'mean' or 'sum'"))


def _attrs(a: dict) -> dict:
    if a["reduction"] == "none":
        raise UnsupportedError(_OP, "reduction='none' is not supported by the fused form (per-row grad_out is only "
                               "known after the GEMMs); use linear + cross_entropy (as the drop-in does)")
    return a


def _check(inputs, attrs):
    if len(inputs) not in (3, 4):
        raise InvalidProblemError(_OP, "inputs", "3 or 4 operands (x, weight, target[, bias])", len(inputs))
    x, w, t = inputs[:3]
    b = inputs[3] if len(inputs) == 4 else None
    if x.dtype not in FLOAT_TYPES:
        raise UnsupportedError(_OP, f"argument 'x' has dtype {x.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    for name, s in (("x", x), ("weight", w)):
        if len(s.shape) != 2 or any(d < 0 for d in s.shape):
            raise InvalidProblemError(_OP, name, "a 2-D tensor", s.shape)
    n, h = x.shape
    v = w.shape[0]
    if w.shape[1] != h:
        raise InvalidProblemError(_OP, "weight", f"shape [V, {h}] (the hidden size of x)", w.shape)
    if v < 1:
        raise InvalidProblemError(_OP, "weight", "at least one class (V >= 1)", w.shape)
    if w.dtype != x.dtype:
        raise DTypeMismatchError(_OP, "weight", str(x.dtype), str(w.dtype))
    if t.dtype not in INDEX_DTYPES:
        raise DTypeMismatchError(_OP, "target", "i64/i32 class indices", str(t.dtype))
    if t.shape != (n,):
        raise InvalidProblemError(_OP, "target", f"class indices of shape {(n,)}", t.shape)
    if b is not None:
        if b.shape != (v,):
            raise InvalidProblemError(_OP, "bias", f"shape {(v,)}", b.shape)
        if b.dtype != x.dtype:
            raise DTypeMismatchError(_OP, "bias", str(x.dtype), str(b.dtype))
    a = _attrs(attrs)
    outs = [TensorSpec((), x.dtype), TensorSpec(x.shape, x.dtype), TensorSpec(w.shape, w.dtype)]
    if b is not None:
        outs.append(TensorSpec(b.shape, b.dtype))
    return a, tuple(outs)


def _grad(ctx, d, grads, s):
    g = grads[0]
    if g is None:  # the loss was not used: dx, dW, db are saved values scaled by grad_out = 0
        return (None,) * len(d.inputs)
    res = [ctx.op("mul", g, s["out1"]), ctx.op("mul", g, s["out2"]), None]
    if len(d.inputs) == 4:
        res.append(ctx.op("mul", g, s["out3"]))
    return tuple(res)


def _peer(x, w, t, b=None, ignore_index=-100, label_smoothing=0.0, softcap=None, z_loss=0.0, reduction="mean"):
    """The composition in torch: the loss, and dx / dW / db by autograd (grad_out = 1)."""
    import torch

    xs = [a.detach().requires_grad_(True) for a in (x, w) + ((b,) if b is not None else ())]
    with torch.enable_grad():
        logits = xs[0] @ xs[1].T + (xs[2] if b is not None else 0)
        if softcap is not None:
            logits = softcap * torch.tanh(logits / softcap)
        t = t.long()
        keep = t != ignore_index
        lp = torch.log_softmax(logits, -1)
        tc = torch.where(keep, t, 0)
        nll = -lp.gather(1, tc[:, None])[:, 0]
        smooth = -lp.mean(-1)
        lse = torch.logsumexp(logits, -1)
        per = ((1 - label_smoothing) * nll + label_smoothing * smooth + z_loss * lse ** 2) * keep
        loss = per.sum() / keep.sum() if reduction == "mean" else per.sum()
        grads = torch.autograd.grad(loss, xs)
    return (loss.detach(),) + tuple(grads)


def _samples(rng):
    def case(n, h, v, bias=False, ign=0.2, **attrs):
        x = rng.standard_normal((n, h))
        w = rng.standard_normal((v, h)) / np.sqrt(max(h, 1))
        t = rng.integers(0, v, size=n).astype(np.int64)
        if n:
            t[rng.random(n) < ign] = attrs.get("ignore_index", -100)
        ins = (x, w, t) + ((0.5 * rng.standard_normal(v),) if bias else ())
        name = f"{n}x{h}x{v}{'+b' if bias else ''}{attrs}"
        return Sample(ins, attrs, name=name, grad=False)

    yield case(5, 8, 7)
    yield case(12, 3, 33, bias=True, reduction="sum")
    yield case(9, 16, 20, label_smoothing=0.1, z_loss=1e-3)
    yield case(7, 8, 19, bias=True, softcap=2.0, label_smoothing=0.2)
    yield case(10, 4, 5, ignore_index=2, softcap=1.5, z_loss=0.1, reduction="sum")
    yield case(0, 4, 6, bias=True)
    yield case(3, 6, 9, ign=1.0, reduction="sum")
    yield case(6, 8, 11)


def _errors():
    x, w, t = ((4, 8), "f32"), ((10, 8), "f32"), ((4,), "i64")
    yield ErrorCase((x, ((10, 7), "f32"), t), {}, InvalidProblemError, r"argument 'weight': expected shape \[V, 8\]", "h")
    yield ErrorCase((x, ((10, 8), "f16"), t), {}, DTypeMismatchError, r"argument 'weight': expected dtype f32", "w-dtype")
    yield ErrorCase((x, w, ((4,), "f32")), {}, DTypeMismatchError, r"argument 'target'", "t-dtype")
    yield ErrorCase((x, w, ((5,), "i64")), {}, InvalidProblemError, r"argument 'target': expected class indices", "t")
    yield ErrorCase((x, w, t, ((9,), "f32")), {}, InvalidProblemError, r"argument 'bias'", "bias")
    yield ErrorCase((x, w, t), {"reduction": "none"}, UnsupportedError, r"reduction='none' is not supported", "none")
    yield ErrorCase((x, w, t), {"softcap": 0.0}, InvalidProblemError, r"argument 'softcap'", "softcap")
    yield ErrorCase((x, w, t), {"z_loss": -1.0}, InvalidProblemError, r"argument 'z_loss'", "z")
    yield ErrorCase((x, w, t), {"label_smoothing": 2.0}, InvalidProblemError, r"argument 'label_smoothing'", "ls")
    yield ErrorCase((x, w, t), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "attr")
    yield ErrorCase((((4, 8), "i32"), w, t), {}, UnsupportedError, r"argument 'x' has dtype i32", "int")


def _cost(desc):
    x, w = desc.inputs[0], desc.inputs[1]
    n, h = x.shape
    v = w.shape[0]
    s = x.dtype.itemsize
    # three GEMMs (logits, dx, dW) of 2 N V H flops each; bytes: inputs, outputs, and the chunk logits written by
    # the GEMM, read twice by the CE kernel (once from L2), rewritten, read by the two gradient GEMMs
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs) + 4 * n * v * s
    return nbytes, 6 * n * v * h


def _tol(dt):
    # the logits are rounded to the input dtype by the GEMM (as eager x @ W.T) and dlogits once more before the
    # gradient GEMMs: two roundings of the dtype on values of size ~1, accumulated over V classes
    return {DType.f64: (1e-9, 1e-10), DType.f32: (5e-5, 5e-6), DType.f16: (2e-2, 4e-3),
            DType.bf16: (4e-2, 3e-2)}[dt]


def _dropin(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean", ignore_index=None,
            label_smoothing=0.0, options=None, softcap=None, z_loss=0.0):
    """``torch.nn.functional.linear_cross_entropy`` (torch >= 2.13's signature; ``options`` picks torch's chunking
    and changes no value, so it is accepted and our own chunking runs), plus baracuda's ``softcap`` / ``z_loss``.
    Under eager autograd the drop-in takes the fused training path (torch/_fused.py): the backward scales the
    saved dx / dW / db in place, which is free for grad_out = 1.  The forms the fused op does not take (a K-dim
    ``linear_weight`` (C, d_1..d_K, H), class probabilities, reduction='none', class weights) return None: the
    drop-in composes linear + cross_entropy for them (torch/_composed.py)."""
    if linear_weight.dim() != 2 or target.is_floating_point() or reduction == "none" or weight is not None:
        return None
    if input.dim() == 1 and target.dim() == 0 and not target.is_floating_point():
        # an unbatched input (torch takes 1-D or 2-D) is one row with a 0-d class index: views; the loss
        # ('mean' / 'sum') is the same scalar
        input, target = input.reshape(1, -1), target.reshape(1)
    ins = (input, linear_weight, target) + ((linear_bias,) if linear_bias is not None else ())
    return ins, {"ignore_index": -100 if ignore_index is None else ignore_index,
                 "label_smoothing": float(label_smoothing), "softcap": softcap, "z_loss": float(z_loss),
                 "reduction": reduction}


register_spec(OpSpec(
    name=_OP, family="loss", arg_names=("x", "weight", "target", "bias"), check=_check, dtypes=FLOAT_TYPES,
    attrs=_ATTRS, torch_peer=_peer, grad=_grad, saves=("outputs",), differentiable=(0, 1, 3),
    torch_name="torch.nn.functional.linear_cross_entropy", dropin=_dropin, dropin_result=lambda o: o[0],
    fused_grad=_OP,
    samples=_samples, errors=_errors, tol=_tol, cost=_cost, category="loss",
    workloads=(Workload("linear_cross_entropy-8192x4096x128256-bf16", ((8192, 4096), (128256, 4096), (8192,)),
                        DType.bf16, {}, backward=True),
               Workload("linear_cross_entropy-4096x4096x32000-bf16", ((4096, 4096), (32000, 4096), (4096,)),
                        DType.bf16, {"softcap": 30.0, "z_loss": 1e-4}, backward=True)),
    doc="cross-entropy of x @ W^T (+ b) computed in token chunks without materializing the logits; returns "
        "(loss, dx, dW[, db]) where the gradients are for grad_out = 1 (the backward scales them).",
))


def _set_bench_inputs():

    def maker(desc, device, gen):
        import torch

        x, w, t = desc.inputs[:3]
        g = dict(generator=gen, device=gen.device)   # the generator's device (CPU in tests, CUDA in the bench)
        ins = [torch.randn(x.shape, **g).to(x.dtype.torch).to(device),
               (torch.randn(w.shape, **g) / max(w.shape[1], 1) ** 0.5).to(w.dtype.torch).to(device),
               torch.randint(0, w.shape[0], t.shape, **g).to(t.dtype.torch).to(device)]
        if len(desc.inputs) == 4:
            ins.append(torch.randn(desc.inputs[3].shape, **g).to(x.dtype.torch).to(device))
        return ins

    set_bench_inputs(_OP, maker)


_set_bench_inputs()

