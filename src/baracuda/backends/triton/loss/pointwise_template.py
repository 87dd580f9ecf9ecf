"""Triton kernels of the pointwise losses (ops/loss_pointwise.py): one template forward and one template
backward, specialised per op by the constexpr KIND (the op's scalar body in ``_body``) and FLAGS.

Forward: each program reads BLOCK elements of every operand once, computes f and either stores it
('none') or reduces it to one partial in the workspace; the one-program fold of loss.py sums the partials in a
fixed order (deterministic, no atomics).  Bytes: 2 (3 for margin_ranking / gaussian) reads per element, + 1
write for 'none': bf16 16384x4096 BCE moves 268 MB, ~0.09 ms at ~3 TB/s on H100.
Backward: one pass, every differentiable operand's gradient from the same loads (BCE: 3 reads + 2 writes
per element, where the unfused autograd graph makes ~4 passes).
Broadcast operands (weight, pos_weight, var) are read in place when they broadcast over one block of dims
(a [C] weight over [N, C], var [N, 1], var [B, 1, H, W]): index = (i // (B*C)) * C + i % C; any other pattern
is expanded to the input's shape first (a copy; rare).  They are small or L2-resident.

Bad values (BCE input outside [0, 1], negative gaussian var) never risk a bad read; the forward stores NaN for
them and sets a flag word in the workspace (zeroed before the launch); the host reads it after the launch
(one 4-byte copy, a sync; skipped under CUDA-graph capture where the NaN is the signal) and raises
InvalidProblemError.  The backward ops do not re-check (their forward did).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.checks import flagged
from ...._core.errors import InvalidProblemError
from ....ops.loss_pointwise import PW_EXTRA, aux_of, var_shape
from .._lib.register import register_triton
from .._lib.math import exp, log, log1p
from .ce_kernels import _RED, _ws_view
from .pointwise import _flat, _pw_fold, _upstream
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_KIND = {"binary_cross_entropy": 0, "binary_cross_entropy_with_logits": 1, "kl_div": 2, "poisson_nll_loss": 3,
         "gaussian_nll_loss": 4, "hinge_embedding_loss": 5, "margin_ranking_loss": 6, "soft_margin_loss": 7}
_CHECKED = ("binary_cross_entropy", "gaussian_nll_loss")   # ops whose values are validated through the flag
_BLOCK = 2048
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# FLAGS bits: 1 log_target / log_input, 2 full
_FLAG_ATTRS = {"kl_div": (("log_target", 1),), "poisson_nll_loss": (("log_input", 1), ("full", 2)),
               "gaussian_nll_loss": (("full", 2),)}


@triton.jit
def _sp(x):
    """softplus(x) = log(1 + e^x) without overflow."""
    return tl.maximum(x, 0.0) + log1p(exp(-tl.abs(x)))


@triton.jit
def _sig(x):
    return 1.0 / (1.0 + exp(-x))


@triton.jit
def _body(a, b, c, w, q, p0, KIND: tl.constexpr, FLAGS: tl.constexpr):
    """(f, bad, g0, g1, g2): the loss, the bad-value code (0: good; else which check failed, see _WHAT), and
    d f / d (differentiable operands, in order)."""
    bad = tl.full(a.shape, 0.0, a.dtype)
    g1 = a * 0.0
    g2 = a * 0.0
    if KIND == 0:     # BCE: a = x in [0, 1], b = y in [0, 1] (NaN is outside, as torch's check): 1 input, 2 target
        bad = tl.where((a >= 0.0) & (a <= 1.0), tl.where((b >= 0.0) & (b <= 1.0), 0.0, 2.0), 1.0)
        lx = tl.maximum(log(a), -100.0)
        l1x = tl.maximum(log1p(-a), -100.0)
        f = -w * (b * lx + (1.0 - b) * l1x)
        f = tl.where(bad != 0.0, float("nan"), f)
        g0 = w * (a - b) / tl.maximum(a * (1.0 - a), 1e-12)
        g1 = w * (log1p(-a) - log(a))
    elif KIND == 1:   # BCE with logits: w = weight, q = pos_weight
        lw = 1.0 + (q - 1.0) * b
        spn = _sp(-a)
        f = w * ((1.0 - b) * a + lw * spn)
        g0 = w * (_sig(a) * lw - q * b)
        g1 = w * ((q - 1.0) * spn - a)
    elif KIND == 2:   # kl_div
        if FLAGS & 1:
            e = exp(b)
            f = e * (b - a)
            g0 = -e
            g1 = e * (b - a + 1.0)
        else:
            nz = b != 0.0
            ly = tl.where(nz, log(tl.where(nz, b, 1.0)), 0.0)
            f = b * ly - b * a
            g0 = -b
            g1 = ly + b / b - a   # torch's xlogy(y, y) gradient: NaN at y == 0
    elif KIND == 3:   # poisson_nll_loss (p0 = eps)
        if FLAGS & 1:
            e = exp(a)
            f = e - b * a
            g0 = e - b
            g1 = -a
        else:
            xe = a + p0
            lxe = log(xe)
            f = a - b * lxe
            g0 = 1.0 - b / xe
            g1 = -lxe
        if FLAGS & 2:
            big = b > 1.0
            ys = tl.where(big, b, 2.0)
            ly = log(ys)
            f += tl.where(big, ys * ly - ys + 0.5 * log(6.283185307179586 * ys), 0.0)
            g1 += tl.where(big, ly + 0.5 / ys, 0.0)
    elif KIND == 4:   # gaussian_nll_loss: w = var (p0 = eps)
        bad = tl.where(w < 0.0, 1.0, 0.0)
        v = tl.maximum(w, p0)
        d = a - b
        iv = 1.0 / v
        f = 0.5 * (log(v) + d * d * iv)
        if FLAGS & 2:
            f += 0.9189385332046727   # log(2 pi) / 2
        f = tl.where(bad != 0.0, float("nan"), f)
        g0 = d * iv
        g1 = -g0
        g2 = 0.5 * iv * (1.0 - d * d * iv)
    elif KIND == 5:   # hinge_embedding_loss (p0 = margin)
        notpos = b != 1.0
        notneg = b != -1.0
        f = tl.where(notpos, tl.maximum(p0 - a, 0.0), 0.0) + tl.where(notneg, a, 0.0)
        g0 = tl.where(notpos & (p0 - a >= 0.0), -1.0, 0.0) + tl.where(notneg, 1.0, 0.0)
    elif KIND == 6:   # margin_ranking_loss: a = x1, b = x2, c = y (p0 = margin)
        v = -c * (a - b) + p0
        act = tl.where(v >= 0.0, 1.0, 0.0)
        f = tl.maximum(v, 0.0)
        g0 = -c * act
        g1 = c * act
        g2 = -(a - b) * act
    else:             # soft_margin_loss
        z = -b * a
        f = _sp(z)
        g0 = -b * _sig(z)
    return f, bad, g0, g1, g2


@triton.jit
def _operands(a_ptr, b_ptr, c_ptr, w_ptr, q_ptr, i, m, wBC, wC, qBC, qC, NM: tl.constexpr, HAS_W: tl.constexpr,
              HAS_Q: tl.constexpr, CT: tl.constexpr):
    a = tl.load(a_ptr + i, mask=m, other=0.5).to(CT)
    b = tl.load(b_ptr + i, mask=m, other=0.5).to(CT)
    if NM == 3:
        c = tl.load(c_ptr + i, mask=m, other=0.0).to(CT)
    else:
        c = a
    if HAS_W:   # broadcast over one block of dims: (i // (B*C)) * C + i % C
        w = tl.load(w_ptr + (i // wBC) * wC + i % wC, mask=m, other=1.0).to(CT)
    else:
        w = tl.full(a.shape, 1.0, CT)
    if HAS_Q:
        q = tl.load(q_ptr + (i // qBC) * qC + i % qC, mask=m, other=1.0).to(CT)
    else:
        q = tl.full(a.shape, 1.0, CT)
    return a, b, c, w, q


@fast_kernel
def _fw(a_ptr, b_ptr, c_ptr, w_ptr, q_ptr, out_ptr, ws_ptr, flag_ptr, prm_ptr, n, wBC, wC, qBC, qC,
        KIND: tl.constexpr, FLAGS: tl.constexpr, NM: tl.constexpr, HAS_W: tl.constexpr, HAS_Q: tl.constexpr,
        CHECK: tl.constexpr, NONE: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0)
    if I64:   # 32-bit indices otherwise: the broadcast index's // and % are 3-4x cheaper in 32 bits
        pid = pid.to(tl.int64)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    a, b, c, w, q = _operands(a_ptr, b_ptr, c_ptr, w_ptr, q_ptr, i, m, wBC, wC, qBC, qC, NM, HAS_W, HAS_Q, CT)
    f, bad, _g0, _g1, _g2 = _body(a, b, c, w, q, tl.load(prm_ptr), KIND, FLAGS)
    if NONE:
        tl.store(out_ptr + i, f.to(out_ptr.dtype.element_ty), mask=m)
    else:
        tl.store(ws_ptr + pid, tl.sum(tl.where(m, f, 0.0), 0))
    if CHECK:   # writers race, but any bad code written names a real bad value: the race is benign
        tl.store(flag_ptr + i * 0, bad.to(CT), mask=(bad != 0.0) & m)


@fast_kernel
def _bw(g_ptr, a_ptr, b_ptr, c_ptr, w_ptr, q_ptr, d0_ptr, d1_ptr, d2_ptr, prm_ptr, n, div, wBC, wC, qBC, qC,
        KIND: tl.constexpr, FLAGS: tl.constexpr, NM: tl.constexpr, HAS_W: tl.constexpr, HAS_Q: tl.constexpr,
        ND: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    a, b, c, w, q = _operands(a_ptr, b_ptr, c_ptr, w_ptr, q_ptr, i, m, wBC, wC, qBC, qC, NM, HAS_W, HAS_Q, CT)
    _f, _bad, g0, g1, g2 = _body(a, b, c, w, q, tl.load(prm_ptr), KIND, FLAGS)
    g = _upstream(g_ptr, i, m, div, RED, CT)
    tl.store(d0_ptr + i, (g0 * g).to(d0_ptr.dtype.element_ty), mask=m)
    if ND >= 2:
        tl.store(d1_ptr + i, (g1 * g).to(d1_ptr.dtype.element_ty), mask=m)
    if ND >= 3:
        tl.store(d2_ptr + i, (g2 * g).to(d2_ptr.dtype.element_ty), mask=m)


# -- host side ---------------------------------------------------------------------------------------------
def bcast_pattern(shape, ashape):
    """(B*C, C) when an operand of shape ``ashape`` broadcasts to ``shape`` over one block of dims (B the block's
    size, C the size of the dims after it); None for other patterns.  A full-shape operand gives (1, 1)."""
    ashape = (1,) * (len(shape) - len(ashape)) + tuple(ashape)
    bdims = [k for k, (s, a) in enumerate(zip(shape, ashape)) if a == 1 and s != 1]
    if not bdims:
        return 1, 1
    lo, hi = bdims[0], bdims[-1]
    if any(ashape[k] != 1 and shape[k] != 1 for k in range(lo, hi + 1)):
        return None
    b = math.prod(shape[lo:hi + 1])
    c = math.prod(shape[hi + 1:])
    return b * c, c


def aux_arg(t, shape, ashape):
    """(contiguous tensor, BC, C) for a broadcast operand."""
    pat = bcast_pattern(shape, ashape)
    t = t.reshape(ashape)
    if pat is None:
        return t.expand(shape).contiguous(), 1, 1
    return t.contiguous(), pat[0], pat[1]


def _divisor(base, red, shape):
    if red == "batchmean":
        return shape[0] if len(shape) else 1
    return math.prod(shape) if red == "mean" else 1


def _geometry(desc):
    base = desc.op.replace("_backward", "")
    bw = desc.op.endswith("_backward")
    d = PW_EXTRA[base]
    ops = desc.inputs[1:] if bw else desc.inputs
    nm = len(d.main)
    names = aux_of(base, len(ops) - nm, desc.attr_dict)
    return base, bw, d, ops, nm, names


def _workspace(desc) -> int:
    base, bw, _, ops, _, _ = _geometry(desc)
    if bw:
        return 0
    n = ops[0].numel
    nparts = 0 if desc.attr("reduction") == "none" else max(1, cdiv(n, _BLOCK))
    return (nparts + (base in _CHECKED)) * (8 if ops[0].dtype == DType.f64 else 4)   # [partials][flag]


def _check_flag(op, flag, what, pref):
    """Raise on a bad value flagged by the kernels (now or deferred: _core/checks.py); ``what``: the
    (argument, expected, given) of each bad-value code 1, 2, ... the kernel writes."""
    flagged(flag, pref, lambda code: InvalidProblemError(op, *what[int(code) - 1]))


# per op, the error of each bad-value code (1, 2, ...) the kernel's _body writes
_WHAT = {"binary_cross_entropy": (("input", "values in [0, 1]", "a value outside (or NaN)"),
                                  ("target", "values in [0, 1]", "a value outside (or NaN)")),
         "gaussian_nll_loss": (("var", "non-negative variances", "a negative entry"),)}


def _bind(desc, pref=None):
    base, bw, d, ops, nm, names = _geometry(desc)
    kind = _KIND[base]
    shape = ops[0].shape
    n = ops[0].numel
    f64 = ops[0].dtype == DType.f64
    red = desc.attr("reduction")
    at = desc.attr_dict
    flags = sum(bit for name, bit in _FLAG_ATTRS.get(base, ()) if at[name])
    p0 = at.get("eps", at.get("margin", 0.0))
    nparts = max(1, cdiv(n, _BLOCK))
    div = _divisor(base, red, shape)
    check = base in _CHECKED
    ws_parts = 0 if red == "none" else nparts
    i64 = n + _BLOCK >= 2 ** 31
    slot = {"weight": 0, "var": 0, "pos_weight": 1}
    ashapes = [var_shape(shape, t.shape) if nmn == "var" else t.shape for nmn, t in zip(names, ops[nm:])]
    params: dict = {}

    def prm_of(dev):   # eps / margin in the compute dtype (a Python float argument would be typed f32)
        p = params.get(dev)
        if p is None:
            p = params[dev] = torch.full((1,), p0, dtype=torch.float64 if f64 else torch.float32, device=dev)
        return p

    def prep(inputs):
        main = [_flat(t) for t in inputs[:nm]]
        auxs = [main[0], main[0]]
        pats = [1, 1, 1, 1]
        for name, t, ash in zip(names, inputs[nm:], ashapes):
            k = slot[name]
            auxs[k], pats[2 * k], pats[2 * k + 1] = aux_arg(t, shape, ash)
        has = [any(slot[x] == k for x in names) for k in (0, 1)]
        c = main[2] if nm == 3 else main[0]
        return main[0], main[1], c, auxs, pats, has

    def fw(desc_, inputs, outputs, ws):
        out = outputs[0]
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        w = _ws_view(ws, f64) if ws is not None else tgt
        flag = w[ws_parts:ws_parts + 1] if check else tgt
        if check:
            flag.zero_()
        if n:
            a, b, c, auxs, pats, has = prep(inputs)
            _fw[(nparts,)](a, b, c, auxs[0], auxs[1], tgt, w, flag, prm_of(a.device), n, *pats, KIND=kind,
                           FLAGS=flags, NM=nm, HAS_W=has[0], HAS_Q=has[1], CHECK=check, NONE=red == "none", F64=f64,
                           I64=i64, BLOCK=_BLOCK, num_warps=8)
        if red != "none":
            _pw_fold[(1,)](w, tgt, nparts if n else 0, div, MEAN=red != "sum", F64=f64, BLOCK=1024,
                           num_warps=4)
        if tgt is not out:
            out.copy_(tgt)
        if n and check:
            _check_flag(desc.op, flag, _WHAT[base], pref)

    def bwd(desc_, inputs, outputs, ws):
        if not n:
            return
        g = inputs[0]
        g = _flat(g) if red == "none" else g
        a, b, c, auxs, pats, has = prep(inputs[1:])
        outs = list(outputs)
        tg = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outs]
        dp = tg + [tg[0]] * (3 - len(tg))
        _bw[(nparts,)](g, a, b, c, auxs[0], auxs[1], dp[0], dp[1], dp[2], prm_of(a.device), n, div, *pats, KIND=kind,
                       FLAGS=flags, NM=nm, HAS_W=has[0], HAS_Q=has[1], ND=len(tg), RED=_RED["mean" if red ==
                                                                                          "batchmean" else red],
                       F64=f64, I64=i64, BLOCK=_BLOCK, num_warps=8)
        for o, t in zip(outs, tg):
            if o is not t:
                o.copy_(t)

    return bwd if bw else fw


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    red = "" if desc.op.endswith("_backward") or desc.attr("reduction") == "none" else "+fold"
    return f"triton:{desc.op}:flat{_BLOCK}{red}"


for _base in PW_EXTRA:
    for _op in (_base, f"{_base}_backward"):
        register_triton(_op, _run, workspace=_workspace, bind=_bind, route=_route)
