"""Triton kernels of gumbel_softmax and sparsemax (+ fused backward ops).

x is viewed as (outer, R, inner) with its own strides (no copies; see norm_group.lanes_view): a program owns
BL lanes (rows when inner == 1, inner positions otherwise, so loads coalesce along the contiguous axis) and
walks R in BR-wide chunks.  Rows up to 16384 elements (8192 in f64) fit one chunk (SINGLE): the row is
loaded once into registers and every pass below runs on the registers: 1 HBM read + 1 write.

gumbel_softmax: noise = -log(-log(U)), U from Philox-4x32-10 (tl.philox) keyed by ``seed`` with the element's
  row-major logical index as counter (the reference backend runs the same Philox in NumPy: identical U).
  Pass 1: online (max, sum exp) [+ first argmax for hard]; pass 2: write.  Philox is ~40 integer ops per
  element: in SINGLE mode it runs once per element (bf16 16384x4096: ~1.3 G elem/ms of Philox on H100's
  int32 pipes vs ~0.75 G elem/ms of HBM at 4 B/elem, so still memory-bound); chunked rows regenerate it
  in pass 2 (then ALU-bound, ~2x the memory time).
  Backward: dx = y (g - sum(g y)) / tau with y recomputed from x and the seed: one read of g and x.
sparsemax: sort-free.  tau* solves sum(max(x - tau, 0)) = 1 and lies in [max - 1, max): 16 bisection
  steps bracket it to 2^-16, then Michelot's exact iteration tau <- (sum_{x > tau} x - 1) / #{x > tau}
  (monotone from below, stops when the support size is unchanged; typically 1-2 rounds).  ~20 passes over
  the row: free in registers (SINGLE), L2 re-reads for longer rows (bf16 256x262144: 512 KB rows, 20 passes
  ~ 2.7 GB of L2 traffic, ~0.5 ms expected).  Backward: one reduction (sum and count of g on the support)
  and one write.
"""
from __future__ import annotations


import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.register import register_triton
from .._lib.config import overrides
from .._lib.math import exp_acc as _ex
from .._lib.math import log as _log
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.geometry import lanes_view, outer_r_inner
from .._lib.scalars import join_f64 as _f2
from .._lib.scalars import split_f64 as _split
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

_FORCE, forced = overrides("""Force the chunk width ``br`` (multi-chunk rows under the interpreter).""")
_BISECT = 16


@triton.jit
def _tile(ptr, a, lanes, lm, r0, R, sa, sl, sr, other, CT: tl.constexpr, BR: tl.constexpr):
    rr = r0 + tl.arange(0, BR)
    mask = lm[:, None] & (rr < R)[None, :]
    v = tl.load(ptr + a * sa + lanes[:, None] * sl + rr[None, :] * sr, mask=mask, other=other).to(CT)
    return v, mask, rr


@triton.jit
def _gumbel_z(x, mask, a, lanes, rr, ya, yl, yr, seed, tau, CT: tl.constexpr):
    """(x + G) / tau, G from Philox on the logical index (masked entries: -inf)."""
    idx = a * ya + lanes[:, None] * yl + rr[None, :].to(tl.int64) * yr
    lo = (idx & 0xFFFFFFFF).to(tl.uint32)
    hi = (idx >> 32).to(tl.uint32)
    zero = tl.zeros_like(lo)
    r, _r1, _r2, _r3 = tl.philox(seed, lo, hi, zero, zero)
    u = ((r >> 9).to(tl.float32) * 2.0 + 1.0) * 5.9604644775390625e-08   # (2k + 1) 2^-24, exact in f32
    g = -_log(-_log(u.to(CT)))
    return tl.where(mask, (x + g) / tau, float("-inf"))


@triton.jit
def _online(m, s, t, z, g, WITH_G: tl.constexpr, F64: tl.constexpr):
    """Fold a tile into the running (max, sum exp(z - max), sum g exp(z - max)) per lane."""
    mn = tl.maximum(m, tl.max(z, 1))
    ms = tl.where(mn == float("-inf"), 0.0, mn)
    sc = _ex(m - ms, F64)
    e = _ex(z - ms[:, None], F64)
    s = s * sc + tl.sum(e, 1)
    if WITH_G:
        t = t * sc + tl.sum(tl.where(z == float("-inf"), 0.0, g) * e, 1)
    return mn, s, t


@triton.jit
def _gumbel_chunk(g_ptr, x_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed, tau,
                  BW: tl.constexpr, CT: tl.constexpr, BR: tl.constexpr):
    x, mask, rr = _tile(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, 0.0, CT, BR)
    z = _gumbel_z(x, mask, a, lanes, rr, ya, yl, yr, seed, tau, CT)
    if BW:
        g, _m, _r = _tile(g_ptr, a, lanes, lm, r0, R, ga, gl, gr, 0.0, CT, BR)
    else:
        g = z
    return z, g, mask, rr


# Loop structure (all three kernels).  Chunk 0 is loaded before any loop; the other chunks are walked only
# when not SINGLE (a constexpr branch), so a SINGLE row (R <= BR) is straight-line code: one load and one
# store per element, no loop at all.  The chunk loops are ``for r0 in loop(first, R, BR)`` (_lib/interp.py): a
# ``for`` on the GPU (the induction variable keeps the divisibility facts that give 16-byte accesses), its
# interpreter twin under TRITON_INTERPRET=1.
# Why not a while loop on the GPU: Triton 3.6 aborts in TritonGPUCoalesce (SmallVector ``idx < size()``
# assertion) on a tensor load/store inside an scf.while whose condition is false on entry at compile time.
# The launcher specialises an int argument equal to 1 to a constant; with R == 1, ``ri = 1; while ri * BR < R``
# folds to a loop that never runs, the axis analysis never visits its body, and the coalesce pass indexes
# the empty contiguity vector of the body's pointers.  A zero-trip scf.for with constant bounds is folded
# away before that pass.  tests/softmax_gumbel_sparsemax/test_gumbel_sparsemax_sm90.py compiles every kernel for
# sm_90 over the configurations choose() picks, R == 1 included.
@triton.jit
def _gumbel_fold(g_ptr, x_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed, tau, m, s, t, best,
                 bidx, BW: tl.constexpr, HARD: tl.constexpr, F64: tl.constexpr, CT: tl.constexpr,
                 BR: tl.constexpr):
    z, g, mask, rr = _gumbel_chunk(g_ptr, x_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed,
                                   tau, BW, CT, BR)
    m, s, t = _online(m, s, t, z, g, BW, F64)
    if HARD:   # first maximum wins (strictly greater replaces), as torch's argmax
        cv = tl.max(z, 1)
        bidx = tl.where(cv > best, tl.argmax(z, 1).to(tl.int32) + r0, bidx)
        best = tl.maximum(best, cv)
    return m, s, t, best, bidx


@triton.jit
def _gumbel_store(y_ptr, a, lanes, ya, yl, yr, z, g, mask, rr, bidx, ms, inv, t, tau, BW: tl.constexpr,
                  HARD: tl.constexpr, F64: tl.constexpr, CT: tl.constexpr):
    y = _ex(z - ms[:, None], F64) * inv[:, None]
    if BW:
        out = y * (g - (t * inv)[:, None]) / tau
    elif HARD:   # torch: (y_hard - y_soft) + y_soft, each op rounded to the dtype
        ys = y.to(y_ptr.dtype.element_ty).to(CT)
        hot = tl.where(rr[None, :] == bidx[:, None], 1.0, 0.0)
        out = (hot - ys).to(y_ptr.dtype.element_ty).to(CT) + ys
    else:
        out = y
    tl.store(y_ptr + a * ya + lanes[:, None] * yl + rr[None, :] * yr, out.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gumbel_write(g_ptr, x_ptr, y_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed, tau, bidx,
                  ms, inv, t, BW: tl.constexpr, HARD: tl.constexpr, F64: tl.constexpr, CT: tl.constexpr,
                  BR: tl.constexpr):
    """Chunked rows: regenerate the chunk's noise (Philox ALU work instead of 8 B/element of z workspace traffic)
    and write it."""
    z, g, mask, rr = _gumbel_chunk(g_ptr, x_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed,
                                   tau, BW, CT, BR)
    _gumbel_store(y_ptr, a, lanes, ya, yl, yr, z, g, mask, rr, bidx, ms, inv, t, tau, BW, HARD, F64, CT)


@fast_kernel
def _gumbel_kernel(g_ptr, x_ptr, y_ptr, L, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed, tau_hi, tau_lo, NLB,
                   BW: tl.constexpr, HARD: tl.constexpr, SINGLE: tl.constexpr, F64: tl.constexpr,
                   BL: tl.constexpr, BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    tau = _f2(tau_hi, tau_lo, F64)
    pid = tl.program_id(0).to(tl.int64)
    a = pid // NLB
    lanes = ((pid % NLB) * BL + tl.arange(0, BL)).to(tl.int64)
    lm = lanes < L
    # chunk 0 stays live in registers (the whole row when SINGLE: the noise is generated once)
    z0, g0, mask0, rr0 = _gumbel_chunk(g_ptr, x_ptr, a, lanes, lm, 0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed,
                                       tau, BW, CT, BR)
    m, s, t = _online(tl.full([BL], float("-inf"), CT), tl.zeros([BL], CT), tl.zeros([BL], CT), z0, g0, BW, F64)
    best = tl.max(z0, 1)
    bidx = tl.argmax(z0, 1).to(tl.int32)
    if SINGLE:
        ms = tl.where(m == float("-inf"), 0.0, m)
        _gumbel_store(y_ptr, a, lanes, ya, yl, yr, z0, g0, mask0, rr0, bidx, ms, 1.0 / s, t, tau, BW, HARD, F64, CT)
    else:
        for r0 in loop(BR, R, BR):
            m, s, t, best, bidx = _gumbel_fold(g_ptr, x_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr,
                                               seed, tau, m, s, t, best, bidx, BW, HARD, F64, CT, BR)
        ms = tl.where(m == float("-inf"), 0.0, m)
        for r0 in loop(0, R, BR):
            _gumbel_write(g_ptr, x_ptr, y_ptr, a, lanes, lm, r0, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, seed, tau,
                          bidx, ms, 1.0 / s, t, BW, HARD, F64, CT, BR)


# -- sparsemax ----------------------------------------------------------------------------------------------
@triton.jit
def _fold_support(x, tau, f, k, sx):
    """Add a tile's sum(max(x - tau, 0)), #{x > tau}, sum_{x > tau} x per lane (padding is -inf: never in)."""
    pos = x > tau[:, None]
    return (f + tl.sum(tl.where(pos, x - tau[:, None], 0.0), 1), k + tl.sum(pos.to(x.dtype), 1),
            sx + tl.sum(tl.where(pos, x, 0.0), 1))


@triton.jit
def _support_step(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, tau, f, k, sx, CT: tl.constexpr, BR: tl.constexpr):
    x, _m, _r = _tile(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, float("-inf"), CT, BR)
    return _fold_support(x, tau, f, k, sx)


@triton.jit
def _support(x_ptr, xt, a, lanes, lm, R, sa, sl, sr, tau, SINGLE: tl.constexpr, CT: tl.constexpr,
             BL: tl.constexpr, BR: tl.constexpr):
    """Per lane: sum(max(x - tau, 0)), #{x > tau}, sum_{x > tau} x: from the registers (SINGLE) or one pass."""
    f = tl.zeros([BL], CT)
    k = tl.zeros([BL], CT)
    sx = tl.zeros([BL], CT)
    if SINGLE:
        f, k, sx = _fold_support(xt, tau, f, k, sx)
    else:
        for r0 in loop(0, R, BR):
            f, k, sx = _support_step(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, tau, f, k, sx, CT, BR)
    return f, k, sx


@triton.jit
def _tile_max(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, mx, CT: tl.constexpr, BR: tl.constexpr):
    x, _m, _r = _tile(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, float("-inf"), CT, BR)
    return tl.maximum(mx, tl.max(x, 1))


@triton.jit
def _sparsemax_write(x_ptr, y_ptr, a, lanes, lm, r0, R, sa, sl, sr, ya, yl, yr, tau, CT: tl.constexpr,
                     BR: tl.constexpr):
    x, mask, rr = _tile(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, float("-inf"), CT, BR)
    y = tl.maximum(x - tau[:, None], 0.0)
    tl.store(y_ptr + a * ya + lanes[:, None] * yl + rr[None, :] * yr, y.to(y_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def _sparsemax_kernel(x_ptr, y_ptr, L, R, sa, sl, sr, ya, yl, yr, NLB, BISECT: tl.constexpr,
                      SINGLE: tl.constexpr, F64: tl.constexpr, BL: tl.constexpr, BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0).to(tl.int64)
    a = pid // NLB
    lanes = ((pid % NLB) * BL + tl.arange(0, BL)).to(tl.int64)
    lm = lanes < L
    xt, mask0, rr0 = _tile(x_ptr, a, lanes, lm, 0, R, sa, sl, sr, float("-inf"), CT, BR)
    mx = tl.max(xt, 1)
    if not SINGLE:
        for r0 in loop(BR, R, BR):
            mx = _tile_max(x_ptr, a, lanes, lm, r0, R, sa, sl, sr, mx, CT, BR)
    mx = tl.where(lm, mx, 0.0)
    lo = mx - 1.0
    hi = mx
    for _ in tl.static_range(BISECT):
        mid = 0.5 * (lo + hi)
        f, _k, _s = _support(x_ptr, xt, a, lanes, lm, R, sa, sl, sr, mid, SINGLE, CT, BL, BR)
        ge = f >= 1.0
        lo = tl.where(ge, mid, lo)
        hi = tl.where(ge, hi, mid)
    # Michelot from below: tau <- (sum_{x > tau} x - 1) / #{x > tau} until the support size stops changing
    # (a data-dependent trip count >= 1: its scf.while condition is true on entry)
    tau = lo
    f, k, sx = _support(x_ptr, xt, a, lanes, lm, R, sa, sl, sr, tau, SINGLE, CT, BL, BR)
    go = 1
    it = 0
    while (go > 0) & (it < 64):
        tau = tl.maximum(tau, (sx - 1.0) / tl.maximum(k, 1.0))
        f, k2, sx = _support(x_ptr, xt, a, lanes, lm, R, sa, sl, sr, tau, SINGLE, CT, BL, BR)
        go = tl.max(tl.where(lm & (k2 != k), 1, 0), 0)
        k = k2
        it += 1
    tau = tl.maximum(tau, (sx - 1.0) / tl.maximum(k, 1.0))
    if SINGLE:
        y = tl.maximum(xt - tau[:, None], 0.0)
        tl.store(y_ptr + a * ya + lanes[:, None] * yl + rr0[None, :] * yr, y.to(y_ptr.dtype.element_ty), mask=mask0)
    else:
        for r0 in loop(0, R, BR):
            _sparsemax_write(x_ptr, y_ptr, a, lanes, lm, r0, R, sa, sl, sr, ya, yl, yr, tau, CT, BR)


@triton.jit
def _bw_fold(g_ptr, o_ptr, a, lanes, lm, r0, R, ga, gl, gr, sa, sl, sr, sg, k, CT: tl.constexpr, BR: tl.constexpr):
    g, _m, _r = _tile(g_ptr, a, lanes, lm, r0, R, ga, gl, gr, 0.0, CT, BR)
    o, _m, _r = _tile(o_ptr, a, lanes, lm, r0, R, sa, sl, sr, 0.0, CT, BR)
    on = o > 0
    return sg + tl.sum(tl.where(on, g, 0.0), 1), k + tl.sum(on.to(CT), 1)


@triton.jit
def _bw_write(g_ptr, o_ptr, dx_ptr, a, lanes, lm, r0, R, ga, gl, gr, sa, sl, sr, ya, yl, yr, mg, CT: tl.constexpr,
              BR: tl.constexpr):
    g, mask, rr = _tile(g_ptr, a, lanes, lm, r0, R, ga, gl, gr, 0.0, CT, BR)
    o, _m, _r = _tile(o_ptr, a, lanes, lm, r0, R, sa, sl, sr, 0.0, CT, BR)
    dx = tl.where(o > 0, g - mg[:, None], 0.0)
    tl.store(dx_ptr + a * ya + lanes[:, None] * yl + rr[None, :] * yr, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def _sparsemax_bw_kernel(g_ptr, o_ptr, dx_ptr, L, R, ga, gl, gr, sa, sl, sr, ya, yl, yr, NLB, SINGLE: tl.constexpr,
                         F64: tl.constexpr, BL: tl.constexpr, BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0).to(tl.int64)
    a = pid // NLB
    lanes = ((pid % NLB) * BL + tl.arange(0, BL)).to(tl.int64)
    lm = lanes < L
    g0, mask0, rr0 = _tile(g_ptr, a, lanes, lm, 0, R, ga, gl, gr, 0.0, CT, BR)
    o0, _m, _r = _tile(o_ptr, a, lanes, lm, 0, R, sa, sl, sr, 0.0, CT, BR)
    on0 = o0 > 0
    sg = tl.sum(tl.where(on0, g0, 0.0), 1)
    k = tl.sum(on0.to(CT), 1)
    if SINGLE:
        dx = tl.where(on0, g0 - (sg / tl.maximum(k, 1.0))[:, None], 0.0)
        tl.store(dx_ptr + a * ya + lanes[:, None] * yl + rr0[None, :] * yr, dx.to(dx_ptr.dtype.element_ty),
                 mask=mask0)
    else:
        for r0 in loop(BR, R, BR):
            sg, k = _bw_fold(g_ptr, o_ptr, a, lanes, lm, r0, R, ga, gl, gr, sa, sl, sr, sg, k, CT, BR)
        mg = sg / tl.maximum(k, 1.0)
        for r0 in loop(0, R, BR):
            _bw_write(g_ptr, o_ptr, dx_ptr, a, lanes, lm, r0, R, ga, gl, gr, sa, sl, sr, ya, yl, yr, mg, CT, BR)


def choose(outer: int, r: int, inner: int, f64: bool):
    """(BL lanes, BR chunk, SINGLE, warps).

    Rows (inner == 1): a row of up to CAP = 16384 elements (8192 in f64) is one chunk held in registers
    (SINGLE: one HBM read and one write per element); short rows share a program, up to 2048 elements.
    Longer rows stream in CAP / 2 chunks with 16 warps: 16 elements per thread per chunk (32 B of bf16 in
    flight per load).  Full-CAP chunks hit the 128-register ceiling of 16 warps and spilled on sm_90 (Philox
    and f64 kernels: 40-112 B/thread); half-CAP chunks need 32-120 registers and no stack, so 2-3 programs
    share an SM and keep at least as many bytes in flight (offline sm_90 compile, tests/softmax_gumbel_sparsemax).
    Inner lanes: up to 64 contiguous lanes x 4096 // BL rows per chunk."""
    if inner == 1:
        cap = 8192 if f64 else 16384
        if r > cap and "br" not in _FORCE:
            return 1, cap // 2, False, 16
        br = _FORCE.get("br", min(next_power_of_2(max(r, 1)), cap))
        bl = max(1, min(next_power_of_2(max(outer, 1)), 2048 // br))
    else:
        bl = min(next_power_of_2(inner), 64)
        br = _FORCE.get("br", min(next_power_of_2(max(r, 1)), 4096 // bl))
    n = bl * br
    return bl, br, r <= br, 4 if n <= 2048 else 8 if n <= 4096 else 16


def _bind(desc, pref=None):
    shape = desc.inputs[0].shape or (1,)
    dim = desc.attr("dim") if desc.inputs[0].shape else 0
    outer, r, inner = outer_r_inner(shape, dim)
    f64 = desc.inputs[0].dtype == DType.f64
    bl, br, single, warps = choose(outer, r, inner, f64)
    op = desc.op
    bw = op.endswith("_backward")
    nlb = cdiv(outer if inner == 1 else inner, bl)
    grid = ((1 if inner == 1 else outer) * nlb,)

    def run(desc_, inputs, outputs, ws):
        views = [lanes_view(t, outer, r, inner) for t in inputs]
        y, _ga, L, ya, yl, yr = lanes_view(outputs[0], outer, r, inner)
        if y.numel() == 0:
            return
        if op.startswith("gumbel"):
            x, _, _, sa, sl, sr = views[-1]
            g, _, _, gsa, gsl, gsr = views[0] if bw else (x, 0, 0, 0, 0, 0)
            _gumbel_kernel[grid](g, x, y, L, r, sa, sl, sr, gsa, gsl, gsr, ya, yl, yr, desc.attr("seed"),
                                 *_split(desc.attr("tau")), nlb, BW=bw, HARD=(not bw) and desc.attr("hard"),
                                 SINGLE=single, F64=f64, BL=bl, BR=br, num_warps=warps)
        elif bw:
            g, _, _, gsa, gsl, gsr = views[0]
            o, _, _, sa, sl, sr = views[1]
            _sparsemax_bw_kernel[grid](g, o, y, L, r, gsa, gsl, gsr, sa, sl, sr, ya, yl, yr, nlb, SINGLE=single,
                                       F64=f64, BL=bl, BR=br, num_warps=warps)
        else:
            x, _, _, sa, sl, sr = views[0]
            _sparsemax_kernel[grid](x, y, L, r, sa, sl, sr, ya, yl, yr, nlb, BISECT=_BISECT, SINGLE=single, F64=f64,
                                    BL=bl, BR=br, num_warps=warps)
    return run


for _op in ("gumbel_softmax", "gumbel_softmax_backward", "sparsemax", "sparsemax_backward"):
    register_triton(_op, _run_of(_guarded(_bind)), bind=_guarded(_bind), route=f"triton:{_op}")
