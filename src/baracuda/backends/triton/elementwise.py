"""One Triton template for every elementwise op: ``_ew_kernel`` is parametrized by the op's scalar body
(a ``@triton.jit`` function passed as a constexpr), its arity, and whether operands are strided.

Contiguous fast path: one flat index, each operand read once and the output written once
(2 B read + 2 B written per element for a bf16 unary op; Triton emits 16-byte vector accesses when the
pointers are 16-byte aligned, which torch's allocator guarantees).  Strided/broadcast path: the output
shape is collapsed to at most 4 dims and each operand brings its own strides (0 on broadcast axes), so
``[B,S,H] + [H]`` reads the [H] vector from cache instead of materializing it.  Offsets switch to int64
when any operand spans 2^31 elements or more.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...ops.elementwise import EW_OPS
from . import register_triton
from ._math import exp, log, sigmoid, tanh

_MAX_RANK = 4
_SQRT1_2 = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654
_INV_SQRT_2PI = 0.3989422804014327


# -- scalar bodies: (operands..., p0, p1) -> value, computed in the compute dtype ------------------
@triton.jit
def _neg(x, p0, p1):
    return -x


@triton.jit
def _exp(x, p0, p1):
    return exp(x)


@triton.jit
def _log(x, p0, p1):
    return log(x)


@triton.jit
def _tanh(x, p0, p1):
    return tanh(x)


@triton.jit
def _relu(x, p0, p1):
    return tl.where(x > 0, x, tl.zeros_like(x))


@triton.jit
def _gelu_erf(x, p0, p1):
    return 0.5 * x * (1.0 + tl.erf(x * _SQRT1_2))


@triton.jit
def _gelu_tanh(x, p0, p1):
    return 0.5 * x * (1.0 + tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


@triton.jit
def _silu(x, p0, p1):
    return x * sigmoid(x)


@triton.jit
def _mul_scalar(x, p0, p1):
    return x * p0


@triton.jit
def _add(a, b, p0, p1):
    return a + p0 * b


@triton.jit
def _sub(a, b, p0, p1):
    return a - p0 * b


@triton.jit
def _mul(a, b, p0, p1):
    return a * b


@triton.jit
def _div(a, b, p0, p1):
    return a / b


@triton.jit
def _tanh_bw(g, y, p0, p1):
    return g * (1.0 - y * y)


@triton.jit
def _relu_bw(g, x, p0, p1):
    return tl.where(x > 0, g, tl.zeros_like(g))


@triton.jit
def _gelu_erf_bw(g, x, p0, p1):
    cdf = 0.5 * (1.0 + tl.erf(x * _SQRT1_2))
    pdf = exp(-0.5 * x * x) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


@triton.jit
def _gelu_tanh_bw(g, x, p0, p1):
    u = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    t = tanh(u)
    du = _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


@triton.jit
def _silu_bw(g, x, p0, p1):
    s = sigmoid(x)
    return g * s * (1.0 + x * (1.0 - s))


@triton.jit
def _div_bw_b(g, a, b, p0, p1):
    return -g * a / (b * b)


def _p(name, default=0.0):
    return lambda d: float(d.attr(name)) if name else default


# op -> (desc -> (body, p0, p1))
BODIES = {
    "neg": lambda d: (_neg, 0.0, 0.0),
    "exp": lambda d: (_exp, 0.0, 0.0),
    "log": lambda d: (_log, 0.0, 0.0),
    "tanh": lambda d: (_tanh, 0.0, 0.0),
    "relu": lambda d: (_relu, 0.0, 0.0),
    "gelu": lambda d: (_gelu_tanh if d.attr("approximate") == "tanh" else _gelu_erf, 0.0, 0.0),
    "silu": lambda d: (_silu, 0.0, 0.0),
    "mul_scalar": lambda d: (_mul_scalar, d.attr("scalar"), 0.0),
    "add": lambda d: (_add, d.attr("alpha"), 0.0),
    "sub": lambda d: (_sub, d.attr("alpha"), 0.0),
    "mul": lambda d: (_mul, 0.0, 0.0),
    "div": lambda d: (_div, 0.0, 0.0),
    "tanh_backward": lambda d: (_tanh_bw, 0.0, 0.0),
    "relu_backward": lambda d: (_relu_bw, 0.0, 0.0),
    "gelu_backward": lambda d: (_gelu_tanh_bw if d.attr("approximate") == "tanh" else _gelu_erf_bw, 0.0, 0.0),
    "silu_backward": lambda d: (_silu_bw, 0.0, 0.0),
    "div_backward_b": lambda d: (_div_bw_b, 0.0, 0.0),
}


@triton.jit
def _ew_kernel(out_ptr, a_ptr, b_ptr, c_ptr, n, p0, p1,
               S1, S2, S3,
               sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3, sc0, sc1, sc2, sc3,
               FN: tl.constexpr, NIN: tl.constexpr, STRIDED: tl.constexpr, CT: tl.constexpr,
               I64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if I64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if STRIDED:
        i3 = offs % S3
        r = offs // S3
        i2 = r % S2
        r = r // S2
        i1 = r % S1
        i0 = r // S1
        oa = i0 * sa0 + i1 * sa1 + i2 * sa2 + i3 * sa3
        ob = i0 * sb0 + i1 * sb1 + i2 * sb2 + i3 * sb3
        oc = i0 * sc0 + i1 * sc1 + i2 * sc2 + i3 * sc3
    else:
        oa = offs
        ob = offs
        oc = offs
    a = tl.load(a_ptr + oa, mask=mask).to(CT)
    if NIN == 1:
        y = FN(a, p0, p1)
    elif NIN == 2:
        b = tl.load(b_ptr + ob, mask=mask).to(CT)
        y = FN(a, b, p0, p1)
    else:
        b = tl.load(b_ptr + ob, mask=mask).to(CT)
        c = tl.load(c_ptr + oc, mask=mask).to(CT)
        y = FN(a, b, c, p0, p1)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _collapse(shape, strides_list):
    """Drop size-1 dims and merge dims that are contiguous in every operand. Returns (shape, strides_list)."""
    dims = [(s, [st[i] for st in strides_list]) for i, s in enumerate(shape) if s != 1]
    merged: list = []
    for s, sts in dims:
        if merged:
            ps, psts = merged[-1]
            if all(pst == st * s for pst, st in zip(psts, sts)):
                merged[-1] = (ps * s, sts)
                continue
        merged.append((s, sts))
    if not merged:
        merged = [(1, [0] * len(strides_list))]
    return [m[0] for m in merged], [[m[1][k] for m in merged] for k in range(len(strides_list))]


def _expanded_strides(x: torch.Tensor, shape) -> list[int]:
    """Strides of ``x`` broadcast to ``shape`` (0 on broadcast axes)."""
    lead = len(shape) - x.dim()
    st = [0] * lead
    for i, (d, s) in enumerate(zip(x.shape, x.stride())):
        st.append(0 if (d == 1 and shape[lead + i] != 1) else s)
    return st


def _span(x: torch.Tensor) -> int:
    return 1 + sum((d - 1) * abs(s) for d, s in zip(x.shape, x.stride()) if d > 0)


def launch(fn, inputs, out, p0: float = 0.0, p1: float = 0.0, compute=None) -> None:
    """Run the elementwise template: ``out = fn(*inputs, p0, p1)`` with broadcasting of ``inputs`` to
    ``out.shape`` (any strides, 1 to 3 inputs).  ``compute``: the tl dtype to compute in (default f32, f64
    for f64 outputs).  Other families reuse this (e.g. a broadcast copy with an identity body)."""
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    n = target.numel()
    if n == 0:
        return
    shape = tuple(target.shape)
    nin = len(inputs)
    strided = not all(tuple(x.shape) == shape and x.is_contiguous() for x in inputs)
    args_st = [0] * 12
    S = [1, 1, 1]
    ins = list(inputs)
    if strided:
        dims, sts = _collapse(shape, [_expanded_strides(x, shape) for x in ins])
        if len(dims) > _MAX_RANK:  # documented contiguize step for rank > 4 after collapsing (rare)
            ins = [x.expand(shape).contiguous() for x in ins]
            strided = False
        else:
            pad = _MAX_RANK - len(dims)
            dims = [1] * pad + dims
            S = dims[1:]
            for k, st in enumerate(sts):
                args_st[4 * k: 4 * k + 4] = [0] * pad + st
    i64 = max([n] + [_span(x) for x in ins]) >= 2 ** 31 - 65536
    if compute is None:
        compute = tl.float64 if out.dtype == torch.float64 else tl.float32
    BLOCK = 1024 if strided else 4096
    while len(ins) < 3:
        ins.append(ins[0])
    grid = (triton.cdiv(n, BLOCK),)
    _ew_kernel[grid](target, ins[0], ins[1], ins[2], n, float(p0), float(p1), *S, *args_st,
                     FN=fn, NIN=nin, STRIDED=strided, CT=compute, I64=i64, BLOCK=BLOCK,
                     num_warps=8 if BLOCK >= 4096 else 4)
    if target is not out:
        out.copy_(target)


def _run(desc, inputs, outputs, ws):
    fn, p0, p1 = BODIES[desc.op](desc)
    launch(fn, inputs, outputs[0], p0, p1)


def _route(desc, pref):
    return "triton:ew_template"


missing = set(EW_OPS) - set(BODIES)
if missing:
    raise ImportError(f"triton elementwise: no body for {sorted(missing)}")

for _name in BODIES:
    register_triton(_name, _run, route=_route)
