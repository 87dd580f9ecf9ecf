"""One Triton template for every elementwise op: ``_ew_kernel`` is parametrized by the op's scalar body
(a ``@triton.jit`` function passed as a constexpr, from ``_ew_bodies`` / ``_ew_act``), its arity, the compute
dtype (f32 / f64 / the integer type) and whether operands are strided.  Gated ops (swiglu & co.) have their
own split+gate kernels (``_gated_fwd_kernel`` / ``_gated_bwd_kernel``) below.

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

from ....ops.elementwise import EW_OPS, ew_compute_dtype, ew_operand_shapes, is_complex_desc
from ...._core.dtypes import DType
from .._lib.register import register_triton
from .._lib.launch import Launcher, bind_kernel, meta
from .._lib.geometry import outer_r_inner
from .._lib.interp import INTERPRETING
from .._lib.strided import collapse as _collapse
from .._lib.strided import all_contiguous
from .._lib.strided import span as _span
from .._lib.strided import expanded_strides as _expanded_strides
from .._lib.strided import flat_offsets as _flat_offsets
from .activations import BODIES as _ACT_BODIES
from .complex import COMPLEX_BODIES, REAL_BODIES, bind_complex, ew_precision, run_complex
from .math_bodies import BODIES as _MATH_BODIES
from .numeric_bodies import BODIES as _EXTRA_BODIES
from .._lib.math import sigmoid, tanh
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

_MAX_RANK = 4
_SQRT1_2 = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654
_INV_SQRT_2PI = 0.3989422804014327

# op -> (desc, is_int) -> (body, p0, p1, p2[, float_params]); float_params=True: the body gets p0..p2 as f64
# even when it computes in an integer type (isclose's tolerances on integer operands)
BODIES = {**_MATH_BODIES, **_ACT_BODIES, **_EXTRA_BODIES}

_TL = {DType.f64: tl.float64, DType.f32: tl.float32, DType.i64: tl.int64, DType.i32: tl.int32, DType.i16: tl.int16,
       DType.i8: tl.int8, DType.u8: tl.uint8, DType.bool: tl.int8}   # bool math holds 0/1 in int8


@triton.jit
def _param(p, CT: tl.constexpr, INTERP: tl.constexpr, PF: tl.constexpr):
    """A kernel scalar (an f64 argument) in the compute dtype; integers go through i64 so that negative values
    wrap like torch's scalar cast (e.g. alpha=-2 on uint8) instead of an undefined float->unsigned cast.
    The interpreter hands Python floats over unconverted (they would become f32): tl.full keeps them f64."""
    if INTERP:
        v = tl.full([], p, tl.float64)
    else:
        v = p
    if PF:                  # the body wants the f64 value (isclose's tolerances on integer operands)
        r = v
    elif CT.is_int():
        r = v.to(tl.int64).to(CT)
    else:
        r = v.to(CT)
    return r


@triton.jit
def _apply(a_ptr, b_ptr, c_ptr, oa, ob, oc, mask, p0, p1, p2, FN: tl.constexpr, NIN: tl.constexpr,
           CT: tl.constexpr, NP: tl.constexpr, INTERP: tl.constexpr, PF: tl.constexpr):
    """Load the operands at their offsets, run the body in the compute dtype; shared by both kernels."""
    # scalar parameters arrive as f64 (exact for f64 ops) and are cast once to the compute dtype
    q0 = _param(p0, CT, INTERP, PF)
    q1 = _param(p1, CT, INTERP, PF)
    q2 = _param(p2, CT, INTERP, PF)
    a = tl.load(a_ptr + oa, mask=mask).to(CT)
    if NIN == 1:
        if NP == 3:
            y = FN(a, q0, q1, q2)
        else:
            y = FN(a, q0, q1)
    elif NIN == 2:
        b = tl.load(b_ptr + ob, mask=mask).to(CT)
        if NP == 3:
            y = FN(a, b, q0, q1, q2)
        else:
            y = FN(a, b, q0, q1)
    else:
        b = tl.load(b_ptr + ob, mask=mask).to(CT)
        c = tl.load(c_ptr + oc, mask=mask).to(CT)
        if NP == 3:
            y = FN(a, b, c, q0, q1, q2)
        else:
            y = FN(a, b, c, q0, q1)
    return y


@fast_kernel
def _ew_kernel(out_ptr, a_ptr, b_ptr, c_ptr, n, p0: tl.float64, p1: tl.float64, p2: tl.float64,
               S1, S2, S3,
               sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3, sc0, sc1, sc2, sc3,
               FN: tl.constexpr, NIN: tl.constexpr, STRIDED: tl.constexpr, CT: tl.constexpr,
               I64: tl.constexpr, BLOCK: tl.constexpr, NP: tl.constexpr, INTERP: tl.constexpr,
               PF: tl.constexpr):
    offs, mask = _flat_offsets(n, I64, BLOCK)
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
    y = _apply(a_ptr, b_ptr, c_ptr, oa, ob, oc, mask, p0, p1, p2, FN, NIN, CT, NP, INTERP, PF)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ew_flat_kernel(out_ptr, a_ptr, b_ptr, c_ptr, n, p0: tl.float64, p1: tl.float64, p2: tl.float64,
                    FN: tl.constexpr, NIN: tl.constexpr, CT: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr,
                    NP: tl.constexpr, INTERP: tl.constexpr, PF: tl.constexpr):
    """The contiguous case with 8 runtime arguments instead of 22: a bound plan relaunches it directly, and
    the C launcher's cost grows with the argument count (bench/launch_overhead.py: 22 vs 8 arguments)."""
    offs, mask = _flat_offsets(n, I64, BLOCK)
    y = _apply(a_ptr, b_ptr, c_ptr, offs, offs, offs, mask, p0, p1, p2, FN, NIN, CT, NP, INTERP, PF)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(fn, inputs, out, p0: float = 0.0, p1: float = 0.0, compute=None, p2: float = 0.0, nparams: int = 2,
           float_params: bool = False) -> None:
    """Run the elementwise template: ``out = fn(*inputs, p0, p1)`` (``nparams=3``: ``fn(*inputs, p0, p1, p2)``)
    with broadcasting of ``inputs`` to ``out.shape`` (any strides, 1 to 3 inputs).  ``compute``: the tl dtype
    to compute in (default f32, f64 for f64 outputs); the scalars are cast to it.  Other families reuse this
    (e.g. a broadcast copy with an identity body)."""
    key = None
    if out.is_contiguous():
        # a launch decided before (same op body, shapes, strides, dtypes, scalars): relaunched bound, with the
        # tensors' addresses only (deciding costs more host time than launching: ~30 us on the H100 host)
        key = (fn, out.shape, out.dtype, tuple([(x.shape, x.stride(), x.dtype) for x in inputs]), p0, p1, p2,
               compute, nparams, float_params)
        try:
            go = _DECIDED.get(key)
        except TypeError:       # (an unhashable scalar)
            go = key = None
        if go is not None:
            go(out, *inputs, *(inputs[0],) * (3 - len(inputs)))
            return
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
    grid = (cdiv(n, BLOCK),)
    tail = (n, float(p0), float(p1), float(p2), *S, *args_st)
    kw = dict(FN=fn, NIN=nin, STRIDED=strided, CT=compute, I64=i64, BLOCK=BLOCK, NP=nparams, INTERP=INTERPRETING,
              PF=float_params, num_warps=8 if BLOCK >= 4096 else 4)
    if key is not None and all(a is b for a, b in zip(ins, inputs)):     # (not the rank > 4 copies)
        if len(_DECIDED) >= 4096:
            _DECIDED.clear()
        go = _DECIDED[key] = bind_kernel(_ew_kernel.jit, grid, tail, **kw)
        go(target, *ins)
    else:
        _ew_kernel[grid](target, *ins, *tail, **kw)
    if target is not out:
        out.copy_(target)


_DECIDED: dict = {}


def bound_broadcast(fn, in_shapes, out_shape, p0: float = 0.0, p1: float = 0.0, compute=None, p2: float = 0.0,
                    nparams: int = 2, float_params: bool = False):
    """``launch`` for contiguous inputs of ``in_shapes`` broadcast to a contiguous output of ``out_shape``, with
    every size, stride and constexpr fixed once: ``bound(out, a, b, c)`` (unused operand slots repeat ``a``).
    None where ``launch`` would not run the strided kernel on them (an empty output, same shapes, or the rank > 4
    contiguize step).  The caller checks contiguity per call and takes ``launch`` otherwise."""
    out_shape = tuple(out_shape)
    n = math.prod(out_shape)
    metas = [meta(s) for s in in_shapes]
    if n == 0 or all(tuple(s) == out_shape for s in in_shapes):
        return None
    dims, sts = _collapse(out_shape, [_expanded_strides(x, out_shape) for x in metas])
    if len(dims) > _MAX_RANK:
        return None
    pad = _MAX_RANK - len(dims)
    S = ([1] * pad + dims)[1:]
    args_st = [0] * 12
    for k, st in enumerate(sts):
        args_st[4 * k: 4 * k + 4] = [0] * pad + st
    i64 = max([n] + [_span(x) for x in metas]) >= 2 ** 31 - 65536
    tail = (n, float(p0), float(p1), float(p2), *S, *args_st)
    return bind_kernel(_ew_kernel, (cdiv(n, 1024),), tail, FN=fn, NIN=len(in_shapes), STRIDED=True,
                       CT=compute if compute is not None else tl.float32, I64=i64, BLOCK=1024, NP=nparams,
                       INTERP=INTERPRETING, PF=float_params, num_warps=4)


def _select(desc):
    """(body, p0, p1, p2, float_params, operand views or None) for a descriptor."""
    ct = ew_compute_dtype(desc)
    fn, p0, p1, p2, *pf = BODIES[desc.op](desc, not ct.is_floating)
    views = ew_operand_shapes(desc) if EW_OPS[desc.op].align is not None else None
    return fn, p0, p1, p2, bool(pf and pf[0]), views


def _aligned(inputs, views):
    """Operands as their broadcast views (prelu's weight [C] -> [C, 1, ..., 1]: adds unit dims, never copies)."""
    if views is None:
        return inputs
    return [x if tuple(x.shape) == v else x.reshape(v) for x, v in zip(inputs, views)]


def _run(desc, inputs, outputs, ws):
    if is_complex_desc(desc):   # complex64/128 operands or output: the complex template (_ew_complex.py)
        return run_complex(desc, inputs, outputs, ws)
    ct = ew_compute_dtype(desc)
    fn, p0, p1, p2, pf, views = _select(desc)
    launch(fn, _aligned(inputs, views), outputs[0], p0, p1, compute=_TL[ct], p2=p2, nparams=3, float_params=pf)


def _bind(desc, pref):
    """Per-plan run: body, scalars and compute dtype are fixed by the descriptor; when every operand has the
    output's shape, the contiguous launch is prepared once and relaunched through ``Launcher`` (host cost
    ~9 us instead of ~17 us through ``kernel[grid]`` on the H200 host: bench/results/*/launch.txt).  Strided
    or broadcast operands take the general ``launch``; complex descriptors the complex template."""
    if is_complex_desc(desc):
        return bind_complex(desc, pref)
    ct = ew_compute_dtype(desc)
    fn, p0, p1, p2, pf, views = _select(desc)
    compute = _TL[ct]

    def general(d, inputs, outputs, ws):
        launch(fn, _aligned(inputs, views), outputs[0], p0, p1, compute=compute, p2=p2, nparams=3, float_params=pf)

    shape = desc.outputs[0].shape
    n = desc.outputs[0].numel
    if n == 0:
        return general
    if any(t.shape != shape for t in desc.inputs):
        # broadcast operands (a mask, a 0-d scalar): the strided launch of contiguous operands, bound once
        in_shapes = [tuple(v) for v in views] if views is not None else [tuple(t.shape) for t in desc.inputs]
        bound = bound_broadcast(fn, in_shapes, shape, p0, p1, compute, p2, 3, pf)
        if bound is None:
            return general
        nb = len(desc.inputs)

        def run_broadcast(d, inputs, outputs, ws):
            out = outputs[0]
            if not (out.is_contiguous() and all_contiguous(inputs)):
                return general(d, inputs, outputs, ws)
            a = inputs[0]
            bound(out, a, inputs[1] if nb > 1 else a, inputs[2] if nb > 2 else a)
        return run_broadcast
    nin = len(desc.inputs)
    grid = (cdiv(n, 4096),)
    tail = (n, float(p0), float(p1), float(p2))
    const = dict(FN=fn, NIN=nin, CT=compute, I64=n >= 2 ** 31 - 65536, BLOCK=4096, NP=3, INTERP=INTERPRETING, PF=pf)
    bound = Launcher(_ew_flat_kernel).bind(grid, tail, const, num_warps=8)

    def run(d, inputs, outputs, ws):
        out = outputs[0]
        a = inputs[0]
        if not (out.is_contiguous() and a.is_contiguous() and (nin < 2 or inputs[1].is_contiguous())
                and (nin < 3 or inputs[2].is_contiguous())):
            return general(d, inputs, outputs, ws)
        if nin == 3:
            bound(out, a, inputs[1], inputs[2])
        else:   # unused operand slots take the first input (never read: NIN is a constexpr)
            bound(out, a, inputs[1] if nin == 2 else a, a)
    return run


def _route(desc, pref):
    return "triton:ew_complex_template" if is_complex_desc(desc) else "triton:ew_template"


# -- gated ops: x = [a | b] split along dim; one program row per outer index ------------------------------
# FW reads a and b once and writes y once: for bf16, 4 B read + 2 B written per output element (3 passes
# of H elements, vs 5 for eager silu(a) * b).  BW reads a, b, g and writes da, db: 5 passes (eager: ~12).
@triton.jit
def _gate_glu(a, b, APPROX: tl.constexpr):
    return a * sigmoid(b)


@triton.jit
def _gate_swiglu(a, b, APPROX: tl.constexpr):
    return a * sigmoid(a) * b


@triton.jit
def _gate_geglu(a, b, APPROX: tl.constexpr):
    if APPROX:
        y = 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))
    else:
        y = 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476))
    return y * b


@triton.jit
def _gate_reglu(a, b, APPROX: tl.constexpr):
    return tl.where(a > 0, a, 0.0) * b


@triton.jit
def _dgate_glu(g, a, b, APPROX: tl.constexpr):
    s = sigmoid(b)
    return g * s, g * a * s * (1.0 - s)


@triton.jit
def _dgate_swiglu(g, a, b, APPROX: tl.constexpr):
    s = sigmoid(a)
    return g * b * s * (1.0 + a * (1.0 - s)), g * a * s


@triton.jit
def _dgate_geglu(g, a, b, APPROX: tl.constexpr):
    if APPROX:
        t = tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))
        act = 0.5 * a * (1.0 + t)
        dact = 0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * a * a)
    else:
        cdf = 0.5 * (1.0 + tl.erf(a * 0.7071067811865476))
        act = a * cdf
        dact = cdf + a * tl.exp(-0.5 * a * a) * 0.3989422804014327
    return g * b * dact, g * act


@triton.jit
def _dgate_reglu(g, a, b, APPROX: tl.constexpr):
    pos = a > 0
    return tl.where(pos, g * b, 0.0), tl.where(pos, g * a, 0.0)


@fast_kernel
def _gated_fwd_kernel(x_ptr, y_ptr, M, GATE: tl.constexpr, APPROX: tl.constexpr, CT: tl.constexpr,
                      I64: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if I64:
        row = row.to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < M
    xa = x_ptr + row * (2 * M)
    a = tl.load(xa + cols, mask=mask).to(CT)
    b = tl.load(xa + M + cols, mask=mask).to(CT)
    y = GATE(a, b, APPROX)
    tl.store(y_ptr + row * M + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def _gated_bwd_kernel(g_ptr, x_ptr, dx_ptr, M, DGATE: tl.constexpr, APPROX: tl.constexpr, CT: tl.constexpr,
                      I64: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if I64:
        row = row.to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < M
    xa = x_ptr + row * (2 * M)
    a = tl.load(xa + cols, mask=mask).to(CT)
    b = tl.load(xa + M + cols, mask=mask).to(CT)
    g = tl.load(g_ptr + row * M + cols, mask=mask).to(CT)
    da, db = DGATE(g, a, b, APPROX)
    dxa = dx_ptr + row * (2 * M)
    tl.store(dxa + cols, da.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dxa + M + cols, db.to(dx_ptr.dtype.element_ty), mask=mask)


_GATES = {"glu": (_gate_glu, _dgate_glu), "swiglu": (_gate_swiglu, _dgate_swiglu),
          "geglu": (_gate_geglu, _dgate_geglu), "reglu": (_gate_reglu, _dgate_reglu)}


def _gated_geometry(desc, x):
    dim = desc.attr("dim")
    shape = tuple(x.shape)
    outer, n, inner = outer_r_inner(shape, dim)
    m = (n // 2) * inner
    block = max(128, min(2048, next_power_of_2(max(m, 1))))
    i64 = outer * 2 * m >= 2 ** 31 - 65536
    return outer, m, block, i64


def _run_gated(desc, inputs, outputs, ws):
    (x,), y = inputs, outputs[0]
    x = x if x.is_contiguous() else x.contiguous()   # documented copy: the kernel reads rows of [a | b]
    outer, m, block, i64 = _gated_geometry(desc, x)
    if outer * m == 0:
        return
    tgt = y if y.is_contiguous() else torch.empty(y.shape, dtype=y.dtype, device=y.device)
    ct = tl.float64 if x.dtype == torch.float64 else tl.float32
    approx = desc.attr_dict.get("approximate") == "tanh"
    _gated_fwd_kernel[(outer, cdiv(m, block))](x, tgt, m, GATE=_GATES[desc.op][0], APPROX=approx, CT=ct,
                                                     I64=i64, BLOCK=block, num_warps=4 if block <= 1024 else 8)
    if tgt is not y:
        y.copy_(tgt)


def _run_gated_bw(desc, inputs, outputs, ws):
    g, x = (t if t.is_contiguous() else t.contiguous() for t in inputs)
    dx = outputs[0]
    outer, m, block, i64 = _gated_geometry(desc, x)
    if outer * m == 0:
        return
    tgt = dx if dx.is_contiguous() else torch.empty(dx.shape, dtype=dx.dtype, device=dx.device)
    ct = tl.float64 if x.dtype == torch.float64 else tl.float32
    approx = desc.attr_dict.get("approximate") == "tanh"
    op = desc.op[: -len("_backward")]
    _gated_bwd_kernel[(outer, cdiv(m, block))](g, x, tgt, m, DGATE=_GATES[op][1], APPROX=approx, CT=ct,
                                                     I64=i64, BLOCK=block, num_warps=4 if block <= 1024 else 8)
    if tgt is not dx:
        dx.copy_(tgt)


def _gated_supports(desc):
    m = desc.inputs[-1].shape
    outer, n, inner = outer_r_inner(m, desc.attr("dim"))
    if outer >= 2 ** 31:
        return f"{outer} rows exceed the grid's first dimension (2^31 - 1)"
    half = (n // 2) * inner
    if cdiv(max(half, 1), 2048) > 65535:
        return f"gated half-row of {half} elements exceeds 65535 column blocks"
    return None


# complex64/128: their own template (imported here: it reuses _flat_offsets above); real bodies of its new rows

BODIES.update(REAL_BODIES)
_GATED = {n for g in _GATES for n in (g, f"{g}_backward")}
missing = set(EW_OPS) - set(BODIES) - set(COMPLEX_BODIES) - _GATED
if missing:
    raise ImportError(f"triton elementwise: no body for {sorted(missing)}")
no_complex = {n for n, e in EW_OPS.items() if DType.c64 in e.dtypes} - set(COMPLEX_BODIES)
if no_complex:
    raise ImportError(f"triton elementwise: no complex body for {sorted(no_complex)}")

for _name in sorted((set(BODIES) | set(COMPLEX_BODIES)) - _GATED):
    register_triton(_name, _run, route=_route, bind=_bind, precision=ew_precision)
for _g in _GATES:
    register_triton(_g, _run_gated, route=f"triton:gated_fwd[{_g}]", supports=_gated_supports)
    register_triton(f"{_g}_backward", _run_gated_bw, route=f"triton:gated_bwd[{_g}]", supports=_gated_supports)
