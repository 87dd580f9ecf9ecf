"""gumbel_softmax and sparsemax, the softmax family's noisy and sparse variants (issue 4).

gumbel_softmax(x, tau, hard, dim, seed)  y = softmax((x + G) / tau) along dim, G = -log(-log(U)) Gumbel noise.
    U comes from a counter-based generator (Philox-4x32-10, the one tl.randint uses): the uint32 drawn for
    element i (its row-major index in the logical shape of x) with key ``seed`` is r = philox(seed, (i_lo, i_hi,
    0, 0))[0], and U = (2 * (r >> 9) + 1) * 2^-24, exact in f32 and in (0, 1).  The reference backend runs the
    same Philox in NumPy, so both backends draw bit-identical uniforms for a seed.
    hard=True: the forward value is (one_hot(argmax) - y_soft) + y_soft (torch's straight-through form; the
    argmax is taken over the unrounded logits), the gradient is that of y_soft (straight-through).
    The drop-in F.gumbel_softmax draws ``seed`` from torch's default generator (torch.randint), so
    torch.manual_seed makes it reproducible (the noise itself differs from torch's exponential_ stream).
gumbel_softmax_backward(grad, x, tau, dim, seed): dx = y_soft * (grad - sum(grad * y_soft)) / tau, with
    y_soft recomputed from x and the seed (the noise is regenerated, never stored): one read of grad and x.
sparsemax(x, dim): the Euclidean projection of x onto the simplex: y = max(x - tau, 0) with sum(y) = 1.
    Sort-free: tau is bracketed in [max - 1, max) and bisected, then refined exactly (Michelot's iteration
    tau = (sum_{x > tau} x - 1) / #{x > tau} until the support stops changing), so any row length works.
sparsemax_backward(grad, out, dim): dx = s * (grad - sum(grad * s) / sum(s)), s = (out > 0): from the saved output.
"""
from __future__ import annotations


import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import check_nonneg

__all__ = ["SOFTMAX_EXTRA_OPS"]

SOFTMAX_EXTRA_OPS = ("gumbel_softmax", "sparsemax")
_DIM = Attr("dim", "axis", -1)
_TAU = Attr("tau", "float", 1.0, gt=0, expected="a positive real number")
_SEED = Attr("seed", "int", ge=0, lt=2 ** 63, expected="an int in [0, 2**63) (the Philox key)")
_ATTRS = {"gumbel_softmax": (_TAU, Attr("hard", "bool", False), _DIM, _SEED),
          "gumbel_softmax_backward": (_TAU, _DIM, _SEED), "sparsemax": (_DIM,), "sparsemax_backward": (_DIM,)}


def _check(op):
    nin = 2 if op.endswith("_backward") else 1

    def check(inputs, attrs):
        if len(inputs) != nin:
            raise InvalidProblemError(op, "inputs", f"{nin} operand(s)", len(inputs))
        _SPECS[op].check_dtypes(inputs)
        x = inputs[0]
        check_nonneg(op, ("x",), (x.shape,))
        for t in inputs[1:]:
            if t.shape != x.shape:
                raise InvalidProblemError(op, "x" if "gumbel" in op else "out", f"the shape of 'grad' {x.shape}", t.shape)
            if t.dtype != x.dtype:
                raise DTypeMismatchError(op, "x" if "gumbel" in op else "out", str(x.dtype), str(t.dtype))
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


def _g_gumbel(ctx, d, grads, s):
    a = {k: d.attr(k) for k in ("tau", "dim", "seed")}
    return (ctx.op("gumbel_softmax_backward", grads[0], s["x"], **a),)


def _g_sparsemax(ctx, d, grads, s):
    return (ctx.op("sparsemax_backward", grads[0], s["out"], dim=d.attr("dim")),)


def _dropin_gumbel(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    import torch

    seed = int(torch.randint(0, 2 ** 62, (), dtype=torch.int64).item())   # torch.manual_seed reproduces it
    return (logits,), {"tau": float(tau), "hard": bool(hard), "dim": dim, "seed": seed}


# -- samples, errors, workloads -------------------------------------------------------------------
_SHAPES = [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1), ((4, 300), 1), ((0, 4), 1), ((5, 1), -1),
           ((2, 1100), -1)]


def _gumbel_samples(rng):
    for i, (shape, dim) in enumerate(_SHAPES):
        for hard in (False, True):
            yield Sample((rng.standard_normal(shape) * 2,), {"tau": (1.0, 0.5, 2.0)[i % 3], "hard": hard,
                                                             "dim": dim, "seed": 1234 + i},
                         name=f"{shape}d{dim}h{hard}", grad=not hard)


def _gumbel_bw_samples(rng):
    for i, (shape, dim) in enumerate(_SHAPES):
        yield Sample((rng.standard_normal(shape), rng.standard_normal(shape) * 2),
                     {"tau": (1.0, 0.5, 2.0)[i % 3], "dim": dim, "seed": 99 + i}, name=f"{shape}d{dim}", grad=False)


def _sparsemax_samples(rng):
    for shape, dim in _SHAPES:
        yield Sample((rng.standard_normal(shape) * 2,), {"dim": dim}, name=f"{shape}d{dim}")
    yield Sample((np.array([[0.5, 0.5, 0.5, -1.0], [3.0, 0.0, 0.0, 0.0]]),), {"dim": 1}, name="ties", grad=False)
    yield Sample((rng.standard_normal((2, 5000)) * 0.05,), {"dim": 1}, name="wide-support", grad=False)


def _sparsemax_bw_samples(rng):
    from ..backends.reference.softmax_gumbel_sparsemax import sparsemax_f64

    for shape, dim in _SHAPES:
        y = sparsemax_f64(rng.standard_normal(shape) * 2, dim % len(shape))
        yield Sample((rng.standard_normal(shape), y), {"dim": dim}, name=f"{shape}d{dim}", grad=False)


def _errors(op):
    def errors():
        nin = 2 if op.endswith("_backward") else 1
        f = ((3, 4), "f32")
        extra = {"seed": 1} if "gumbel" in op else {}
        yield ErrorCase(((((3, 4), "i32"),) * nin), dict(extra), UnsupportedError, r"dtype i32", "int")
        yield ErrorCase((f,) * nin, dict(extra, dim=2), InvalidProblemError, rf"{op}: argument 'dim'", "dim")
        yield ErrorCase((f,) * nin, dict(extra, bogus=1), InvalidProblemError, r"argument 'bogus'", "attr")
        if "gumbel" in op:
            yield ErrorCase((f,) * nin, {"tau": 0.0, "seed": 1}, InvalidProblemError, r"argument 'tau'", "tau")
            yield ErrorCase((f,) * nin, {}, InvalidProblemError, r"argument 'seed'", "no-seed")
        if nin == 2:
            yield ErrorCase((f, ((3, 5), "f32")), dict(extra), InvalidProblemError, r"expected the shape", "shape")
    return errors


def _tol(dt):
    return {DType.f64: (1e-9, 1e-11), DType.f32: (2e-5, 2e-6), DType.f16: (1e-2, 1e-3), DType.bf16: (1.6e-2, 1e-2)}[dt]


def _cost(flops):
    def cost(desc):
        return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), flops * desc.inputs[0].numel
    return cost


def _wl(op, attrs, bw=False):
    shapes = ((16384, 4096), (4096, 32768), (256, 262144))
    n = 2 if op.endswith("_backward") else 1
    return tuple(Workload(f"{op}-{r}x{c}-bf16", ((r, c),) * n, DType.bf16, dict(attrs), backward=bw) for r, c in shapes)


_SPECS: dict[str, OpSpec] = {}


def _reg(**kw):
    _SPECS[kw["name"]] = register_spec(OpSpec(family="softmax", dtypes=FLOAT_TYPES, category="softmax",
                                              check=_check(kw["name"]), attrs=_ATTRS[kw["name"]], errors=_errors(kw["name"]), tol=_tol, **kw))


_reg(name="gumbel_softmax", arg_names=("x",),
     torch_name="torch.nn.functional.gumbel_softmax", dropin=_dropin_gumbel, grad=_g_gumbel, saves=("inputs",),
     differentiable=(0,), samples=_gumbel_samples, grad_tol=_tol,
     workloads=_wl("gumbel_softmax", {"tau": 1.0, "hard": False, "dim": -1, "seed": 7}, True), cost=_cost(30),
     doc="softmax((x + Gumbel noise) / tau) with counter-based (Philox) noise keyed by `seed`; hard=True: "
         "straight-through one-hot.")
_reg(name="gumbel_softmax_backward", arg_names=("grad", "x"), samples=_gumbel_bw_samples,
     workloads=_wl("gumbel_softmax_backward", {"tau": 1.0, "dim": -1, "seed": 7}), cost=_cost(35),
     doc="fused gumbel_softmax backward: regenerates the noise from the seed, one read of grad and x.")
_reg(name="sparsemax", arg_names=("x",), grad=_g_sparsemax, saves=("outputs",),
     differentiable=(0,), samples=_sparsemax_samples, grad_tol=_tol,
     workloads=_wl("sparsemax", {"dim": -1}, True), cost=_cost(60),
     doc="sparsemax (projection onto the simplex), sort-free for any row length.")
_reg(name="sparsemax_backward", arg_names=("grad", "out"), samples=_sparsemax_bw_samples,
     workloads=_wl("sparsemax_backward", {"dim": -1}), cost=_cost(4),
     doc="sparsemax backward from the saved output: grad minus its mean over the support, on the support.")


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "gumbel_softmax_backward", "sparsemax_backward")
