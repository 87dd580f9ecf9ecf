"""GEMM family: ``matmul`` (torch.matmul semantics), ``mm`` (2-D), ``bmm`` (3-D), ``linear`` (torch's
F.linear) and ``linear_act`` (linear with a fused activation epilogue).

Transposes are attributes, not copies: ``trans_a`` / ``trans_b`` on matmul/mm/bmm multiply by the
transpose of the last two axes of the stored operand.  cuBLAS takes them as op flags and the Triton
kernel as swapped strides, so the backward rules (dA = dC @ B^T, dB = A^T @ dC) never materialize a
transpose.

``linear_act(x, weight, bias=None, activation=..., save_preact=None)`` computes
``act(x @ weight^T + bias)`` with ``act`` in relu / gelu (erf) / gelu_tanh / silu.  It is a separate op
from ``linear`` so that ``linear`` stays exactly torch.nn.functional.linear (drop-in) and saves only its
inputs.  Backward of the activation needs the pre-activation ``x @ W^T + b``:

* ``save_preact=True``: the forward writes it as a second output (outputs ``(y, pre)``: M*N elements more
  written once and kept until backward, e.g. 64 MB for 8192 x 4096 bf16); the backward is then 2 GEMMs
  (dx, dW) + one elementwise pass.  This is exactly what eager PyTorch keeps for F.gelu(F.linear(...)).
* relu without it: relu'(pre) = [pre > 0] = [out > 0], so the saved output suffices (no extra cost).
* gelu / gelu_tanh / silu without it: the backward recomputes the pre-activation with ``linear``:
  one extra GEMM (2*M*N*K flops: backward costs 6*M*N*K instead of 4*M*N*K, +50%; measured on H200 for
  8192x4096->4096 bf16: 1.27 ms vs eager's 0.87 ms).  Choose it (``save_preact=False``) only where the
  M*N activation memory matters more than backward time (inference, or memory-bound training).

Default (``save_preact=None``): the training trade-off eager makes - True for gelu / gelu_tanh / silu (two
outputs, ``(y, pre)``), False for relu (one output; nothing to gain).  The descriptor holds the resolved bool.

Integer operands (``GEMM_TYPES``: i64, i32, i16, i8, u8, as torch's CPU matmuls; not bool, which torch refuses):
the product is exact in wrapping two's-complement arithmetic, like torch's CPU kernels - an int64 product past
2^63 wraps, nothing goes through float64 - and the result keeps the operands' dtype (sums mod 2^bits: the same
bits whether accumulated in the narrow type or in int64).  Integer GEMMs have no gradient (torch: an integer
tensor cannot require grad).  linear_act stays floating (an activation of integers is not a torch function).
torch's CUDA matmuls refuse integers ("addmm_cuda" not implemented for 'Long'): the cuBLAS plans decline them
with that reason, the Triton kernel computes them (int64 multiply-adds on CUDA cores).

>>> import numpy as np, baracuda as bc
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> bc.Plan.select(bc.Descriptor.like("matmul", a, a, trans_b=True), device="cpu").run(a, a)
array([[ 5., 14.],
       [14., 50.]], dtype=float32)
"""
from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass


import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, get_spec, register_spec
from .._core.derive import declare_rule_ops
from ._common import broadcast_shapes, check_nonneg
from .reduction import INT_TYPES

__all__ = ["ACTIVATIONS", "ACT_BACKWARD", "GemmDims", "gemm_dims", "gemm_grads", "linear_dims", "GEMM_OPS", "layout_tag",
           "epilogue_tag", "default_save_preact", "pair_dropin", "check_operands", "torch_fn", "GEMM_TYPES",
           "INT_TYPES", "float_grads", "scalar_for"]

GEMM_OPS = ("matmul", "mm", "bmm")
# the dtypes of torch's CPU matmuls: the floating types and the integers (torch refuses bool and uint16/32/64)
GEMM_TYPES = FLOAT_TYPES + INT_TYPES
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
# activation -> (elementwise backward op, its attrs): d act(pre) = op(grad, pre)
ACT_BACKWARD = {
    "relu": ("relu_backward", {}),
    "gelu": ("gelu_backward", {"approximate": "none"}),
    "gelu_tanh": ("gelu_backward", {"approximate": "tanh"}),
    "silu": ("silu_backward", {}),
}
# activation -> (elementwise forward op, its attrs): the torch peer and the unfused backends use these
ACT_FORWARD = {
    "relu": ("relu", {}),
    "gelu": ("gelu", {"approximate": "none"}),
    "gelu_tanh": ("gelu", {"approximate": "tanh"}),
    "silu": ("silu", {}),
}


@dataclass(frozen=True)
class GemmDims:
    """The problem as batched [*batch, M, K] @ [*batch, K, N] (vectors unsqueezed, transposes applied)."""

    batch: tuple[int, ...]       # broadcast batch shape
    m: int
    k: int
    n: int
    a_mat: tuple[int, ...]       # a's shape with a 1-D operand unsqueezed to [1, K] (before trans_a)
    b_mat: tuple[int, ...]       # b's shape with a 1-D operand unsqueezed to [K, 1] (before trans_b)
    out: tuple[int, ...]         # the op's output shape (vector axes squeezed as torch does)

    @property
    def nbatch(self) -> int:
        return math.prod(self.batch)


def _swap(shape):
    return shape[:-2] + (shape[-1], shape[-2])


def gemm_dims(op: str, a: tuple, b: tuple, trans_a: bool = False, trans_b: bool = False) -> GemmDims:
    """Shape rule of matmul (torch.matmul semantics, plus transpose flags on >= 2-D operands)."""
    for name, s, t in (("a", a, trans_a), ("b", b, trans_b)):
        if len(s) == 0:
            raise InvalidProblemError(op, name, "a tensor with at least 1 dimension", f"a 0-d tensor (shape {s})")
        if t and len(s) == 1:
            raise InvalidProblemError(op, f"trans_{name}", f"False for the 1-D operand '{name}' (a vector has no "
                                      "transpose)", True)
    a_mat = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b_mat = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    a_op = _swap(a_mat) if trans_a else a_mat
    b_op = _swap(b_mat) if trans_b else b_mat
    m, k = a_op[-2:]
    kb, n = b_op[-2:]
    if kb != k:
        what = "rows" if not trans_b else "columns"
        raise InvalidProblemError(op, "b", f"{k} {what} to match the contraction size of 'a' "
                                  f"(a{list(a)}, trans_a={trans_a}, trans_b={trans_b})", f"shape {tuple(b)}")
    batch = broadcast_shapes(op, ("a", "b"), [a_op[:-2], b_op[:-2]])
    out = batch + ((m,) if len(a) > 1 else ()) + ((n,) if len(b) > 1 else ())
    return GemmDims(batch, m, k, n, a_mat, b_mat, out)


def scalar_for(op: str, name: str, v, dt: DType):
    """A Python number (beta / alpha) as torch converts it for tensors of dtype ``dt`` (c10's checked_convert):
    floating dtypes a float; integer dtypes an int, a float truncated toward zero, out of the dtype's range (NaN
    included) an error, except that an unsigned dtype also takes ints down to -max (they wrap: alpha=-2 on uint8 is
    254); bool 0 or 1 (any nonzero number is True)."""
    if dt.is_floating:
        return float(v)
    if dt == DType.bool:
        return int(bool(v))
    info = np.iinfo(dt.numpy)
    lo, hi = info.min, info.max
    if isinstance(v, float):
        ok = lo <= v < hi + 1          # exact comparisons of a float with ints; False for NaN
    else:
        ok = (-hi if lo == 0 else lo) <= v <= hi
    if not ok:
        raise InvalidProblemError(op, name, f"a value {dt} can hold ([{-hi if lo == 0 else lo}, {hi}]; torch "
                                  "converts the scalar to the tensors' dtype)", v)
    return int(v)


def float_grads(rule):
    """Wrap a GEMM backward rule: integer operands have no gradient (torch: an integer tensor cannot require grad;
    the family's operands share one dtype).  The wrapper keeps the rule's module: its declared ops are that
    module's (derive.declared_ops)."""
    @functools.wraps(rule)
    def grad(ctx, d, grads, s):
        if not d.inputs[0].dtype.is_floating:
            return (None,) * len(d.inputs)
        return rule(ctx, d, grads, s)
    return grad


def _same_dtype(op, names, inputs):
    d0 = inputs[0].dtype
    for name, t in zip(names[1:], inputs[1:]):
        if t.dtype != d0:
            raise DTypeMismatchError(op, name, f"{d0} (the dtype of '{names[0]}')", str(t.dtype))


def _make_gemm_check(op: str, rank: int | None):
    """rank: None (matmul: >= 1-D, broadcasting), 2 (mm) or 3 (bmm: equal batch, no broadcasting)."""

    def check(inputs, attrs):
        if len(inputs) != 2:
            raise InvalidProblemError(op, "inputs", "2 operands (a, b)", len(inputs))
        a = attrs
        SPECS[op].check_dtypes(inputs)
        _same_dtype(op, ("a", "b"), inputs)
        sa, sb = inputs[0].shape, inputs[1].shape
        check_nonneg(op, ("a", "b"), (sa, sb))
        if rank is not None:
            for name, s in (("a", sa), ("b", sb)):
                if len(s) != rank:
                    raise InvalidProblemError(op, name, f"a {rank}-D tensor", f"shape {s}")
            if rank == 3 and sa[0] != sb[0]:
                raise InvalidProblemError(op, "b", f"batch size {sa[0]} (bmm does not broadcast; use matmul)",
                                          f"shape {sb}")
        dims = gemm_dims(op, sa, sb, a["trans_a"], a["trans_b"])
        return a, (TensorSpec(dims.out, inputs[0].dtype),)
    return check


def linear_dims(op: str, inputs) -> tuple[int, int, int]:
    """(M, K, N) of linear: x [..., K] folded to M rows, weight [N, K], bias [N]."""
    x, w = inputs[0].shape, inputs[1].shape
    if len(x) == 0:
        raise InvalidProblemError(op, "x", "a tensor with at least 1 dimension [..., in_features]", f"shape {x}")
    if len(w) != 2:
        raise InvalidProblemError(op, "weight", "a 2-D tensor [out_features, in_features]", f"shape {w}")
    if w[1] != x[-1]:
        raise InvalidProblemError(op, "weight", f"in_features == {x[-1]} (the last dimension of 'x')",
                                  f"shape {w}")
    if len(inputs) == 3 and inputs[2].shape != (w[0],):
        raise InvalidProblemError(op, "bias", f"shape ({w[0]},) (out_features)", f"shape {inputs[2].shape}")
    return math.prod(x[:-1]), x[-1], w[0]


def _make_linear_check(op: str, fused: bool):
    def check(inputs, attrs):
        if len(inputs) not in (2, 3):
            raise InvalidProblemError(op, "inputs", "2 or 3 operands (x, weight[, bias])", len(inputs))
        SPECS[op].check_dtypes(inputs)
        _same_dtype(op, ("x", "weight", "bias"), inputs)
        check_nonneg(op, ("x", "weight", "bias"), [t.shape for t in inputs])
        linear_dims(op, inputs)
        out = TensorSpec(inputs[0].shape[:-1] + (inputs[1].shape[0],), inputs[0].dtype)
        if not fused:
            return attrs, (out,)
        a = attrs
        if a["save_preact"] is None:
            a["save_preact"] = default_save_preact(a["activation"])
        return a, ((out, out) if a["save_preact"] else (out,))
    return check


def default_save_preact(activation: str) -> bool:
    """save_preact=None resolves to this: keep the pre-activation exactly when the backward needs it
    (everything but relu, whose derivative reads the output), as eager PyTorch does."""
    return activation != "relu"


def layout_tag(desc) -> str:
    """SKU layout: storage order of A, B, C as the GEMM sees them (r: row-major, c: column-major / transposed).
    The tag follows the trans flags; the actual strides of the arrays passed at run time may differ (any
    strided view is accepted)."""
    if desc.op in GEMM_OPS:
        return ("c" if desc.attr("trans_a") else "r") + ("c" if desc.attr("trans_b") else "r") + "r"
    return "rcr"   # x [M, K] row-major, weight [N, K] row-major = B [K, N] column-major


def epilogue_tag(desc) -> str | None:
    """SKU epilogue: identity / bias / [bias+]act [+preact] for linear and linear_act."""
    if desc.op not in ("linear", "linear_act"):
        return None
    act = desc.attr("activation") if desc.op == "linear_act" else None
    tag = "+".join((["bias"] if len(desc.inputs) == 3 else []) + ([act] if act else [])) or "identity"
    return tag + ("+preact" if desc.op == "linear_act" and desc.attr("save_preact") else "")


# -- backward rules --------------------------------------------------------------------------------
def _g_gemm(ctx, d, grads, s):
    """C = op(A) @ op(B), op = transpose when the flag is set: see gemm_grads."""
    g = grads[0]
    if g is None:
        return None, None
    A, B = d.inputs
    return gemm_grads(ctx, d.op, A, B, d.attr("trans_a"), d.attr("trans_b"), g, s["a"], s["b"],
                      ctx.needs[0], ctx.needs[1])


def gemm_grads(ctx, op, A, B, ta, tb, g, a, b, need_a=True, need_b=True):
    """The gradients of C = op(A) @ op(B) (``op`` in matmul / mm / bmm, its shape rule; A, B the operands'
    TensorSpecs, a, b their saved tensors, g the output gradient), None where ``need_a`` / ``need_b`` is False
    (a frozen weight: its GEMM is not run):
    d op(A) = dC @ op(B)^T  ->  dA = dC @ op(B)^T (trans_a False) or op(B) @ dC^T (trans_a True)
    d op(B) = op(A)^T @ dC  ->  dB = op(A)^T @ dC (trans_b False) or dC^T @ op(A) (trans_b True)
    then summed over the batch axes an operand was broadcast along (ctx.reduce_to).  The GEMM forms (addmm,
    addmv, mv, dot, ...: ops/gemm_forms.py) take their product's gradients from here."""
    dims = gemm_dims(op, A.shape, B.shape, ta, tb)
    a = ctx.reshape(a, dims.a_mat) if len(A.shape) == 1 else a
    b = ctx.reshape(b, dims.b_mat) if len(B.shape) == 1 else b
    g = ctx.reshape(g, dims.batch + (dims.m, dims.n))
    ga = gb = None
    if not need_a:
        pass
    elif ta:
        ga = ctx.op(op, b, g, trans_a=tb, trans_b=True)
    else:
        ga = ctx.op(op, g, b, trans_a=False, trans_b=not tb)
    if not need_b:
        pass
    elif len(dims.b_mat) == 2 and len(dims.a_mat) > 2 and not ta and op == "matmul":
        # b is shared by every batch: fold the batch into the rows, one [K, bM] @ [bM, N] GEMM instead of a
        # batched product of [batch, K, N] partials followed by a reduction over the batch
        rows = dims.nbatch * dims.m
        a2 = ctx.reshape(a, (rows, dims.k))
        g2 = ctx.reshape(g, (rows, dims.n))
        gb = ctx.op(op, g2, a2, trans_a=True, trans_b=False) if tb else ctx.op(op, a2, g2, trans_a=True, trans_b=False)
    elif tb:
        gb = ctx.op(op, g, a, trans_a=True, trans_b=ta)
    else:
        gb = ctx.op(op, a, g, trans_a=not ta, trans_b=False)
    ga = ctx.reshape(ctx.reduce_to(ga, dims.a_mat), A.shape) if ga is not None else None
    gb = ctx.reshape(ctx.reduce_to(gb, dims.b_mat), B.shape) if gb is not None else None
    return ga, gb


def _g_linear_common(ctx, d, s, dpre):
    """dx = dpre @ W, dW = dpre^T @ x, db = sum of dpre over the rows (x folded to [M, K])."""
    x_spec = d.inputs[0]
    m, k, n = linear_dims(d.op, d.inputs)
    need = ctx.needs     # a frozen weight / bias / an input nobody differentiates: its GEMM or sum is not run
    dpre2 = ctx.reshape(dpre, (m, n))
    gx = ctx.reshape(ctx.op("mm", dpre2, s["weight"]), x_spec.shape) if need[0] else None
    gw = ctx.op("mm", dpre2, ctx.reshape(s["x"], (m, k)), trans_a=True) if need[1] else None
    res = [gx, gw]
    if len(d.inputs) == 3:
        res.append(ctx.reduce_to(dpre2, (n,)) if need[2] else None)
    return tuple(res)


def _g_linear(ctx, d, grads, s):
    if grads[0] is None:
        return (None,) * len(d.inputs)
    return _g_linear_common(ctx, d, s, grads[0])


def _g_linear_act(ctx, d, grads, s):
    act, save = d.attr("activation"), d.attr("save_preact")
    g = grads[0]
    g_pre = grads[1] if save else None
    if g is None and g_pre is None:
        return (None,) * len(d.inputs)
    dpre = g_pre
    if g is not None:
        if save:
            pre = s["out1"]
        elif act == "relu":
            pre = s["out"]   # relu'(pre) = [pre > 0] = [relu(pre) > 0]
        else:              # recompute: one extra GEMM (see the module docstring)
            pre = ctx.op("linear", *(s[n] for n in ("x", "weight", "bias")[: len(d.inputs)]))
        bw_op, bw_attrs = ACT_BACKWARD[act]
        dact = ctx.op(bw_op, g, pre, **bw_attrs)
        dpre = dact if dpre is None else ctx.op("add", dact, dpre)
    return _g_linear_common(ctx, d, s, dpre)


# -- torch peers and drop-ins --------------------------------------------------------------------
def _peer_gemm(fn_name):
    def peer(a, b, trans_a=False, trans_b=False):
        import torch

        a = a.mT if trans_a else a
        b = b.mT if trans_b else b
        return getattr(torch, fn_name)(a, b)
    return peer


def _peer_linear(x, weight, bias=None):
    import torch.nn.functional as F

    return F.linear(x, weight, bias)


def _peer_linear_act(x, weight, bias=None, activation="relu", save_preact=None):
    import torch.nn.functional as F

    if save_preact is None:
        save_preact = default_save_preact(activation)
    pre = F.linear(x, weight, bias)
    name, kw = ACT_FORWARD[activation]
    y = getattr(F, name)(pre, **kw)
    return (y, pre) if save_preact else y


def _no_out(op, out):
    if out is not None:
        raise UnsupportedError(op, "the drop-in does not take out=; run a Plan with out= to write into a buffer")


def torch_fn(name: str):
    """The torch peer that is torch.<name> itself, called on the operands."""
    def peer(*xs):
        import torch

        return getattr(torch, name)(*xs)
    return peer


def pair_dropin(op: str, first: str, second: str):
    """The drop-in of a torch function ``f(first, second, *, out=None)`` of two tensors (torch.mm, torch.dot, ...):
    its exact signature (``__signature__``; keyword calls bind by torch's names), out= refused (see _no_out)."""
    sig = inspect.Signature([inspect.Parameter(first, inspect.Parameter.POSITIONAL_OR_KEYWORD),
                             inspect.Parameter(second, inspect.Parameter.POSITIONAL_OR_KEYWORD),
                             inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)])

    def dropin(*args, **kwargs):
        if not kwargs and len(args) == 2:      # the common call: nothing to bind
            return args, {}
        bound = sig.bind(*args, **kwargs).arguments
        _no_out(op, bound.get("out"))
        return (bound[first], bound[second]), {}
    dropin.__signature__ = sig
    return dropin


def check_operands(op: str, names, inputs, counts=None) -> None:
    """The checks every GEMM form starts with: the operand count (one of ``counts``, None: at least one), the dtype
    (one of the op's, the same for all) and non-negative shapes."""
    if counts is not None and len(inputs) not in counts:
        raise InvalidProblemError(op, "inputs", f"{' or '.join(map(str, counts))} operands ({', '.join(names)})",
                                  len(inputs))
    if not inputs:
        raise InvalidProblemError(op, "operands", "at least one operand", "none")
    get_spec(op).check_dtypes(inputs)
    _same_dtype(op, names, inputs)
    check_nonneg(op, names, [t.shape for t in inputs])


def _dropin_linear(input, weight, bias=None):
    return ((input, weight) if bias is None else (input, weight, bias)), {}


# -- samples -------------------------------------------------------------------------------------
def _n(rng, *shapes):
    return tuple(rng.standard_normal(s) for s in shapes)


# (a shape, b shape, attrs); the first entries with <= 64 elements per operand are the gradient samples
_MM_CASES = [((5, 7), (7, 3), {}), ((7, 5), (7, 3), {"trans_a": True}), ((5, 7), (3, 7), {"trans_b": True}),
             ((7, 5), (3, 7), {"trans_a": True, "trans_b": True}), ((33, 20), (20, 40), {}),
             ((1, 1), (1, 1), {}), ((0, 3), (3, 4), {}), ((3, 0), (0, 4), {})]
_BMM_CASES = [((2, 5, 6), (2, 6, 3), {}), ((2, 6, 5), (2, 6, 3), {"trans_a": True}),
              ((2, 5, 6), (2, 3, 6), {"trans_b": True}), ((3, 17, 20), (3, 20, 18), {}),
              ((0, 3, 4), (0, 4, 2), {}), ((2, 3, 0), (2, 0, 4), {})]
_MATMUL_CASES = [((3, 1, 4, 5), (2, 5, 3), {}), ((2, 3, 4), (4, 5), {}), ((2, 4, 3), (5, 3), {"trans_b": True}),
                 ((2, 4, 3), (4, 5), {"trans_a": True}), ((4,), (4, 3), {}), ((2, 3, 4), (4,), {}),
                 ((6,), (6,), {}), ((3, 4), (2, 4, 5), {}), ((5, 7), (7, 3), {}), ((2, 17, 20), (20, 33), {}),
                 ((0, 3), (3, 4), {}), ((3, 0), (0, 4), {}), ((2, 0, 3), (3, 4), {})]


def _gemm_samples(cases):
    def samples(rng):
        for sa, sb, attrs in cases:
            yield Sample(_n(rng, sa, sb), dict(attrs), name=f"{sa}x{sb}{attrs or ''}")
    return samples


# (x shape, weight shape, bias?)
_LINEAR_CASES = [((5, 7), (3, 7), True), ((2, 3, 7), (4, 7), False), ((7,), (3, 7), True),
                 ((33, 20), (40, 20), True), ((0, 4), (3, 4), True), ((3, 0), (2, 0), True),
                 # 16-byte columns (in/out features multiples of 8): what the cuBLASLt epilogue plans take
                 ((2, 5, 16), (24, 16), True), ((6, 16), (8, 16), False)]


def _linear_samples(rng):
    for sx, sw, bias in _LINEAR_CASES:
        shapes = (sx, sw) + (((sw[0],),) if bias else ())
        yield Sample(_n(rng, *shapes), {}, name=f"{sx}x{sw}{'+b' if bias else ''}")


# (x shape, weight shape, bias?, activation, save_preact): the first three are the gradient samples
# (recompute path, relu-from-output path, saved-preact path)
_LINEAR_ACT_CASES = [((4, 6), (3, 6), True, "gelu_tanh", False), ((2, 3, 5), (4, 5), False, "relu", False),
                     ((4, 6), (3, 6), True, "silu", True), ((4, 6), (3, 6), True, "gelu", False),
                     ((33, 20), (40, 20), True, "gelu", True), ((33, 20), (40, 20), False, "silu", False),
                     ((7,), (3, 7), True, "relu", True), ((0, 4), (3, 4), True, "silu", False),
                     ((3, 0), (2, 0), True, "gelu_tanh", True),
                     # save_preact left to its default (None: resolved to True for gelu_tanh, False for relu)
                     ((9, 6), (5, 6), True, "gelu_tanh", None), ((2, 9, 6), (5, 6), False, "relu", None),
                     # 16-byte columns: the cuBLASLt epilogues (GELU_AUX_BIAS, RELU, GELU_BIAS)
                     ((2, 5, 16), (24, 16), True, "gelu_tanh", True), ((5, 16), (8, 16), False, "relu", False),
                     ((5, 16), (8, 16), True, "gelu_tanh", False)]


def _linear_act_samples(rng):
    for sx, sw, bias, act, save in _LINEAR_ACT_CASES:
        shapes = (sx, sw) + (((sw[0],),) if bias else ())
        attrs = {"activation": act} if save is None else {"activation": act, "save_preact": save}
        yield Sample(_n(rng, *shapes), attrs,
                     name=f"{sx}x{sw}{'+b' if bias else ''}-{act}"
                          f"{'-default' if save is None else '-save' if save else ''}")


# -- errors --------------------------------------------------------------------------------------
def _gemm_errors(op):
    def errors():
        two = (((3, 4), "f32"), ((5, 6), "f32")) if op != "bmm" else (((2, 3, 4), "f32"), ((2, 5, 6), "f32"))
        yield ErrorCase(two, {}, InvalidProblemError, rf"{op}: argument 'b': expected 4 rows", "inner-mismatch")
        same = (((3, 4), "f32"), ((4, 5), "bf16")) if op != "bmm" else (((2, 3, 4), "f32"), ((2, 4, 5), "bf16"))
        yield ErrorCase(same, {}, DTypeMismatchError, rf"{op}: argument 'b': expected dtype f32", "dtype-mismatch")
        bools = (((3, 4), "bool"), ((4, 5), "bool")) if op != "bmm" else (((2, 3, 4), "bool"), ((2, 4, 5), "bool"))
        yield ErrorCase(bools, {}, UnsupportedError, r"dtype bool; the op is defined for", "bool-dtype")
        yield ErrorCase(two, {"trans_a": "yes"}, InvalidProblemError, rf"{op}: argument 'trans_a': expected a bool",
                        "bad-flag")
        yield ErrorCase(two, {"alpha": 2.0}, InvalidProblemError, r"argument 'alpha'", "bad-attr")
        if op == "matmul":
            yield ErrorCase((((), "f32"), ((3,), "f32")), {}, InvalidProblemError,
                            r"argument 'a': expected a tensor with at least 1 dimension", "scalar")
            yield ErrorCase((((3,), "f32"), ((3, 2), "f32")), {"trans_a": True}, InvalidProblemError,
                            r"argument 'trans_a': expected False for the 1-D operand", "vector-transpose")
            yield ErrorCase((((2, 3, 4), "f32"), ((3, 4, 5), "f32")), {}, InvalidProblemError,
                            r"expected a shape broadcastable", "batch-broadcast")
        elif op == "mm":
            yield ErrorCase((((2, 3, 4), "f32"), ((4, 5), "f32")), {}, InvalidProblemError,
                            r"mm: argument 'a': expected a 2-D tensor", "rank")
        else:
            yield ErrorCase((((2, 3, 4), "f32"), ((1, 4, 5), "f32")), {}, InvalidProblemError,
                            r"bmm: argument 'b': expected batch size 2", "batch")
            yield ErrorCase((((3, 4), "f32"), ((4, 5), "f32")), {}, InvalidProblemError,
                            r"bmm: argument 'a': expected a 3-D tensor", "rank")
    return errors


def _linear_errors(op):
    def errors():
        act = {"activation": "relu"} if op == "linear_act" else {}
        yield ErrorCase((((5, 4), "f32"), ((3, 5), "f32")), act, InvalidProblemError,
                        rf"{op}: argument 'weight': expected in_features == 4", "in-features")
        yield ErrorCase((((5, 4), "f32"), ((4,), "f32")), act, InvalidProblemError,
                        r"argument 'weight': expected a 2-D tensor", "weight-rank")
        yield ErrorCase((((5, 4), "f32"), ((3, 4), "f32"), ((4,), "f32")), act, InvalidProblemError,
                        r"argument 'bias': expected shape \(3,\)", "bias-shape")
        yield ErrorCase((((), "f32"), ((3, 4), "f32")), act, InvalidProblemError,
                        r"argument 'x': expected a tensor with at least 1 dimension", "scalar")
        yield ErrorCase((((5, 4), "f16"), ((3, 4), "f32")), act, DTypeMismatchError,
                        r"argument 'weight': expected dtype f16", "dtype-mismatch")
        if op == "linear_act":
            yield ErrorCase((((5, 4), "f32"), ((3, 4), "f32")), {"activation": "tanh"}, InvalidProblemError,
                            r"argument 'activation': expected one of relu, gelu, gelu_tanh, silu", "bad-activation")
            yield ErrorCase((((5, 4), "f32"), ((3, 4), "f32")), {}, InvalidProblemError,
                            r"argument 'activation'", "no-activation")
            yield ErrorCase((((5, 4), "f32"), ((3, 4), "f32")), {"activation": "relu", "save_preact": 1},
                            InvalidProblemError, r"argument 'save_preact': expected a bool", "bad-save")
        else:
            yield ErrorCase((((5, 4), "f32"), ((3, 4), "f32")), {"activation": "relu"}, InvalidProblemError,
                            r"linear: argument 'activation'", "no-attrs")
    return errors


# -- tolerances ----------------------------------------------------------------------------------
# Forward: |err| <= atol + rtol*|ref| elementwise against the f64 product of the same rounded inputs.
# A K-term dot product accumulated in precision u errs by at most gamma_K * sum_k |a_ik||b_kj| with
# gamma_K ~ K*u (Higham); the samples have K <= 20 and standard-normal entries, so sum|a||b| ~ 0.64*K <= 13.
#   f64: gamma_20 * 13 = 20 * 1.1e-16 * 13 ~ 3e-14                       -> atol 1e-12.
#   f32: gamma_20 * 13 = 20 * 6e-8 * 13 ~ 1.6e-5 worst case (typical errors grow like sqrt(K) and are ~1e-6);
#        plus one output rounding (6e-8 relative)                          -> (1e-5, 5e-5).
#   f16/bf16: f32 accumulation (~1e-5, as f32) is negligible next to the output rounding (u = 2^-11 / 2^-8,
#        relative); the unfused epilogue path (cuBLAS GEMM, then the activation in a second pass) rounds
#        the pre-activation too, which propagates as u * |pre * act'(pre)| <= 0.3u absolute where the
#        output is near 0 (silu/gelu for negative pre): two roundings relative + u absolute.
#   TF32 (only when PlanPreference.allow_reduced_precision): inputs rounded to 10 mantissa bits, each product
#        errs by ~2^-10 relative -> ~1e-3 * sum|a||b|; checked in tests/gemm on a GPU.
_TOL = {DType.f64: (1e-12, 1e-12), DType.f32: (1e-5, 5e-5), DType.f16: (2e-3, 1e-3), DType.bf16: (1.6e-2, 8e-3)}
# Backward: the gradient of a fused/recomputed activation is rounded to the dtype before it enters the dx / dW
# GEMMs, so that rounding (u relative per element) is summed over N (or M) terms: ~u * sum|dpre||W|, with
# N, M <= 6 in the gradient samples (sum ~ 4) -> about 4u absolute, plus the forward tolerance.
_GRAD_TOL = {DType.f64: (1e-10, 1e-10), DType.f32: (2e-5, 1e-4), DType.f16: (4e-3, 4e-3), DType.bf16: (3e-2, 3e-2)}


def _tol(dt: DType):
    return _TOL.get(dt, (0.0, 0.0))


def _grad_tol(dt: DType):
    return _GRAD_TOL.get(dt, (0.0, 0.0))


# -- cost ----------------------------------------------------------------------------------------
def _io_bytes(desc) -> int:
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)


def _gemm_cost(desc):
    dims = gemm_dims(desc.op, desc.inputs[0].shape, desc.inputs[1].shape, desc.attr("trans_a"), desc.attr("trans_b"))
    return _io_bytes(desc), 2 * dims.m * dims.n * dims.k * dims.nbatch


def _linear_cost(desc):
    m, k, n = linear_dims(desc.op, desc.inputs)
    return _io_bytes(desc), 2 * m * n * k


# -- workloads -----------------------------------------------------------------------------------
_BIG = 8192
_WORKLOADS = {
    # the dispatcher target: >= 98% of raw cuBLAS on H100
    "mm": (Workload("mm-8192^3-bf16", ((_BIG, _BIG), (_BIG, _BIG)), DType.bf16, backward=True),
           # f32: the preference decides the math; the name says which PlanPreference to run it under
           Workload("mm-4096^3-f32-ieee", ((4096, 4096), (4096, 4096)), DType.f32),
           Workload("mm-4096^3-f32-allow_tf32", ((4096, 4096), (4096, 4096)), DType.f32,
                    pref={"allow_reduced_precision": True})),
    "bmm": (Workload("bmm-[32,2048,128]x[32,128,2048]-bf16", ((32, 2048, 128), (32, 128, 2048)), DType.bf16,
                     backward=True),),
    "matmul": (Workload("matmul-[8,1024,4096]x[4096,4096]-bf16", ((8, 1024, 4096), (4096, 4096)), DType.bf16,
                        backward=True),),
    # default: f32 accumulation throughout (no half-precision split-K reduction); "-reduced": the half
    # reductions torch allows by default, so both are compared like for like with eager
    "linear": (Workload("linear-8192x4096->4096-bf16-bias", ((_BIG, 4096), (4096, 4096), (4096,)), DType.bf16,
                        backward=True),
               Workload("linear-8192x4096->4096-bf16-bias-reduced", ((_BIG, 4096), (4096, 4096), (4096,)),
                        DType.bf16, backward=True, pref={"allow_reduced_precision": True})),
    "linear_act": tuple(
        Workload(f"linear_act-8192x4096->4096-bf16-bias-{act}", ((_BIG, 4096), (4096, 4096), (4096,)), DType.bf16,
                 {"activation": act}, backward=True) for act in ("gelu_tanh", "silu")),
}

SPECS: dict[str, OpSpec] = {}
_GEMM_DEFS = {  # op -> (rank rule, torch name, jax name, dropin, cases)
    "matmul": (None, "torch.matmul", "jax.numpy.matmul", pair_dropin("matmul", "input", "other"), _MATMUL_CASES),
    "mm": (2, "torch.mm", "jax.lax.dot", pair_dropin("mm", "input", "mat2"), _MM_CASES),
    "bmm": (3, "torch.bmm", "jax.lax.batch_matmul", pair_dropin("bmm", "input", "mat2"), _BMM_CASES),
}
for _op, (_rank, _tname, _jname, _dropin, _cases) in _GEMM_DEFS.items():
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="gemm", arg_names=("a", "b"), check=_make_gemm_check(_op, _rank), dtypes=GEMM_TYPES,
        attrs=(Attr("trans_a", "bool", False), Attr("trans_b", "bool", False)), torch_peer=_peer_gemm(_op), torch_name=_tname,
        dropin=_dropin, jax_name=_jname, grad=float_grads(_g_gemm), saves=("inputs",), differentiable=(0, 1),
        samples=_gemm_samples(_cases), errors=_gemm_errors(_op), tol=_tol, grad_tol=_grad_tol,
        workloads=_WORKLOADS[_op], cost=_gemm_cost, category="gemm",
        doc=f"{_tname} with optional transposes of the operands' last two axes (trans_a, trans_b)."))

SPECS["linear"] = register_spec(OpSpec(
    name="linear", family="gemm", arg_names=("x", "weight", "bias"), check=_make_linear_check("linear", False), attrs=(),
    dtypes=GEMM_TYPES, torch_peer=_peer_linear, torch_name="torch.nn.functional.linear", dropin=_dropin_linear,
    jax_name=None, grad=float_grads(_g_linear), saves=("inputs",), differentiable=(0, 1, 2), samples=_linear_samples,
    errors=_linear_errors("linear"), tol=_tol, grad_tol=_grad_tol, workloads=_WORKLOADS["linear"],
    cost=_linear_cost, category="gemm", doc="y = x @ weight^T + bias (torch.nn.functional.linear)."))

SPECS["linear_act"] = register_spec(OpSpec(
    name="linear_act", family="gemm", arg_names=("x", "weight", "bias"),
    check=_make_linear_check("linear_act", True), dtypes=FLOAT_TYPES,
    attrs=(Attr("activation", "str", choices=ACTIVATIONS,
                expected=f"one of {', '.join(ACTIVATIONS)} (for no activation use the op 'linear')"),
           Attr("save_preact", "bool", None, optional=True)), torch_peer=_peer_linear_act, torch_name=None,
    jax_name=None, grad=_g_linear_act, saves=("inputs", "outputs"), differentiable=(0, 1, 2),
    samples=_linear_act_samples, errors=_linear_errors("linear_act"), tol=_tol, grad_tol=_grad_tol,
    workloads=_WORKLOADS["linear_act"], cost=_linear_cost, category="gemm",
    doc="y = act(x @ weight^T + bias), act in relu/gelu/gelu_tanh/silu fused into the GEMM epilogue; "
        "save_preact (default: True except for relu) adds the pre-activation as a second output for the backward."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "add", "bmm", "gelu_backward", "linear", "matmul", "mm", "relu_backward", "silu_backward")
