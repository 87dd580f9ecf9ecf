"""One Triton kernel for the random family's element-wise ops: the fills (uniform, normal, exponential, randint),
bernoulli, the six dropout forms and dropout_backward.

Element e of the stream (ops/random.py) is word e & 3 of tl.philox(seed, (e >> 2) lo, hi, 0, 0).  ALIGNED (the
offset a multiple of 4 and one draw per element): a program of BLOCK elements evaluates Philox on BLOCK / 4
counters and interleaves the four words (tl.join + reshape), so one Philox evaluation (~10 rounds of two 32x32
multiplies, each one widening multiply there: _lib/philox.py, the same bits) serves four elements; otherwise (an
odd offset, a channel mask: element i draws e = offset + i // inner) every element evaluates the Philox of its own
counter and keeps its word.  Both give the same bits, so an element's value never depends on BLOCK or the path
(tests/random force both).

The float attributes reach the kernel as (f32 hi, f32 lo) pairs (``_lib.scalars``): Triton passes Python floats
as f32, and a float64 output needs the full value.  The keep test of the dropout forms compares the 24-bit
uniform with float32(p), as the reference backend does, so the masks of both backends are identical.
"""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.random import DROPOUT_OPS, affine_of, draws, mask_inner, randint_range
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.config import overrides
from .._lib.geometry import cdiv
from .._lib.launch import fast_kernel
from .._lib.math import cospi, fast_cos, fast_sin, fma, log, sinpi, sqrt
from .._lib.philox import philox
from .._lib.register import register_triton
from .._lib.scalars import join_f64, split_f64

__all__ = ["unit", "unit_open", "element_words", "block_words", "int_out", "stream_base", "stream_args", "forced",
           "MODES"]

_FORCE, forced = overrides("""Force ``block`` (elements per program), ``warps`` or ``aligned=False`` (the
per-element path).""")
MODES = {"uniform": 0, "normal": 1, "exponential": 2, "randint": 3, "bernoulli_p": 4, "bernoulli": 5, "affine": 6}


@triton.jit
def unit(u):
    """U in [0, 1): the word's top 24 bits times 2^-24 (exact in f32)."""
    return (u >> 8).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def unit_open(u):
    """U' in (0, 1]: (top 24 bits + 1) * 2^-24."""
    return ((u >> 8).to(tl.float32) + 1.0) * 5.9604644775390625e-08


@triton.jit
def element_words(seed, e):
    """For int64 element counters e: (own word, first and second word of its Box-Muller pair, second of the pair)."""
    c = e >> 2
    lo = (c & 0xFFFFFFFF).to(tl.uint32)
    hi = (c >> 32).to(tl.uint32)
    z = tl.zeros_like(lo)
    w0, w1, w2, w3 = tl.philox(seed, lo, hi, z, z)
    k = e & 3
    own = tl.where(k == 0, w0, tl.where(k == 1, w1, tl.where(k == 2, w2, w3)))
    return own, tl.where(k < 2, w0, w2), tl.where(k < 2, w1, w3), (k & 1) == 1


@triton.jit
def stream_base(state_ptr, seed, offset, HAS_STATE: tl.constexpr):
    """(key, offset of output element 0): the arguments, or the state tensor's (seed, base) + offset."""
    if HAS_STATE:
        return tl.load(state_ptr), tl.load(state_ptr + 1) + offset
    else:
        return seed, offset


def stream_args(desc, inputs) -> tuple:
    """(state tensor or None, seed, offset, HAS_STATE) of a call: the state is the trailing operand when given."""
    n_base = len(desc.spec.arg_names) - 1
    if len(inputs) > n_base:
        return inputs[n_base].contiguous(), 0, desc.attr("offset"), True
    return None, desc.attr("seed"), desc.attr("offset"), False


@triton.jit
def int_out(v, y_ptr):
    """int64 values for y_ptr's dtype: through f64 into an f64 output, through f32 into the others (the
    interpreter's int64 -> bf16 and f64 -> bf16 conversions give the integer's bits)."""
    if y_ptr.dtype.element_ty.is_fp64():
        return v.to(tl.float64)
    elif y_ptr.dtype.element_ty.is_floating():
        return v.to(tl.float32)
    else:
        return v


@triton.jit
def _interleave(a, b, c, d, BLOCK: tl.constexpr):
    """[a0, b0, c0, d0, a1, b1, ...] from four [BLOCK // 4] vectors."""
    return tl.reshape(tl.join(tl.join(a, c), tl.join(b, d)), [BLOCK])


@triton.jit
def _quad_words(seed, pid, offset, BLOCK: tl.constexpr):
    """The four [BLOCK // 4] Philox words of the quads of elements offset + pid * BLOCK + i (offset % 4 == 0)."""
    Q: tl.constexpr = BLOCK // 4
    c = (offset >> 2) + pid * Q + tl.arange(0, Q).to(tl.int64)
    lo = (c & 0xFFFFFFFF).to(tl.uint32)
    hi = (c >> 32).to(tl.uint32)
    z = tl.zeros_like(lo)
    return philox(seed, lo, hi, z, z)


@triton.jit
def block_words(seed, pid, offset, BLOCK: tl.constexpr):
    """element_words of the BLOCK elements offset + pid * BLOCK + i, for offset a multiple of 4: BLOCK / 4 Philox."""
    w0, w1, w2, w3 = _quad_words(seed, pid, offset, BLOCK)
    odd = (tl.arange(0, BLOCK) & 1) == 1
    return (_interleave(w0, w1, w2, w3, BLOCK), _interleave(w0, w0, w2, w2, BLOCK),
            _interleave(w1, w1, w3, w3, BLOCK), odd)


@triton.jit
def _log_unit(x):
    """ln x for f32 x in [2^-24, 1] (normal, finite, positive: no special cases to test).  x = 2^k m with m in
    [sqrt(1/2), sqrt(2)) from the bits, f = m - 1 exact, ln x = k ln2 + f + f^2 P(f) (ln2 in two parts, the high one
    exact times k).  P's coefficients (c8 first below): a weighted least-squares fit of (log1p(f) - f) / f^2 on
    [sqrt(1/2) - 1, sqrt(2) - 1] iterated towards minimax (0.07 ulp of log1p there), rounded to f32.  Within 0.87
    ulp of ln x at each of the 2^24 values U' takes (f64 emulation of this evaluation order; the CPU test checks
    the kernel's).  libdevice's logf spends ~8 more instructions a call on zero, denormal and infinite inputs, which
    this domain cannot hold."""
    ix = x.to(tl.int32, bitcast=True)
    k = (ix - 0x3F3504F3) >> 23
    f = (ix - (k << 23)).to(tl.float32, bitcast=True) - 1.0
    p = fma(f, -0.07621848583221436, 0.1290375292301178)
    p = fma(f, p, -0.13242603838443756)
    p = fma(f, p, 0.1418187916278839)
    p = fma(f, p, -0.16609129309654236)
    p = fma(f, p, 0.2000197470188141)
    p = fma(f, p, -0.25001582503318787)
    p = fma(f, p, 0.33333325386047363)
    p = fma(f, p, -0.49999988079071045)
    r = fma(f * f, p, f)
    kf = k.to(tl.float32)
    return fma(kf, 0.693359375, fma(kf, -2.1219444e-4, r))


@triton.jit
def _box_muller(w_r, w_t, F64: tl.constexpr):
    """(r cos(pi t), r sin(pi t)) of one pair of words: r = sqrt(-2 log U'(w_r)), t = 2 U(w_t).

    float64: libdevice's accurate log, sqrt, cospi and sinpi.  float32: an accurate log (_log_unit, < 1 ulp; an
    approximate one's ~1e-7 absolute error near U' = 1 becomes ~1e-5 in r = sqrt(...) where r is small), the
    hardware sin / cos on the angle moved into [-pi, pi), where they hold ~2^-20.5 absolute (cos(pi t) =
    -cos(pi (t - 1)), same for sin): a sample is within ~5e-6 of the exact Box-Muller of its words (r <= 5.8), a
    draw of the same distribution.
    libdevice's sinpi / cospi took most of the f32 kernel (544 -> 360 SASS instructions a thread of 8 elements,
    offline sm_90 compile) and made the fill compute-bound: 2^28 f32 0.649 -> 0.438 ms on an H200 (1.66 -> 2.45
    TB/s; torch.randn 1.80; a constant fill 4.6), session 17 run A.  Session 18: the Philox products as widening
    multiplies, U' and the angle as one fma each, _log_unit for libdevice's logf: 652 -> 507 instructions a thread
    of 16 elements."""
    if F64:
        r = sqrt(-2.0 * log(unit_open(w_r).to(tl.float64)))
        t = 2.0 * unit(w_t).to(tl.float64)
        zc, zs = r * cospi(t), r * sinpi(t)
    else:
        # U' = (k + 1) 2^-24 and x = pi (2 U - 1) as one fma each, with the same bits: k 2^-24 + 2^-24 is exact,
        # and k (2 pi 2^-24) - pi is exactly pi (2 k 2^-24 - 1), rounded once as the product with pi was
        # (2^-24; 2 float32(pi) 2^-24, exact in f32; float32(pi))
        r = tl.sqrt(-2.0 * _log_unit(fma((w_r >> 8).to(tl.float32), 5.9604644775390625e-08, 5.9604644775390625e-08)))
        x = fma((w_t >> 8).to(tl.float32), 3.7450703871400037e-07, -3.1415927410125732)
        zc, zs = -r * fast_cos(x), -r * fast_sin(x)
    return zc, zs


@triton.jit
def _normal_block(seed, pid, offset, a, b, BLOCK: tl.constexpr, F64: tl.constexpr):
    """MODE 1 (normal) on block_words' elements, a Box-Muller pair at a time: words (w0, w1) give elements 4j and
    4j + 1 (r cos, r sin of one r and angle), (w2, w3) elements 4j + 2 and 4j + 3.  The same operations on the same
    words as _value's per-element form (bit-identical), with each pair's log, sqrt, cos and sin evaluated once, not
    once per element."""
    w0, w1, w2, w3 = _quad_words(seed, pid, offset, BLOCK)
    ca, sa = _box_muller(w0, w1, F64)
    cb, sb = _box_muller(w2, w3, F64)
    return _interleave(a + b * ca, a + b * sa, a + b * cb, a + b * sb, BLOCK)


@triton.jit
def _value(own, first, second, odd, x, a, b, c, pk, lo_i, rng_i, MODE: tl.constexpr, F64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    if MODE == 0:       # uniform: a + (b - a) U
        if F64:
            u = own.to(tl.float64) * 2.3283064365386963e-10
        else:
            u = unit(own)
        v = a + (b - a) * u
    elif MODE == 1:     # normal: a + b z, Box-Muller
        zc, zs = _box_muller(first, second, F64)
        v = a + b * tl.where(odd, zs, zc)
    elif MODE == 2:     # exponential: -log(U') / a
        v = -log(unit_open(own).to(CT)) / a
    elif MODE == 3:     # randint: lo + floor(u * range / 2^32), exact in uint64
        v = lo_i + ((own.to(tl.uint64) * rng_i.to(tl.uint64)) >> 32).to(tl.int64)
    elif MODE == 4:     # bernoulli, p an attribute
        v = tl.where(unit(own) < pk, 1.0, 0.0)
    elif MODE == 5:     # bernoulli, p each element of x (compared in f32, as the reference)
        v = tl.where(unit(own) < x.to(tl.float32), 1.0, 0.0)
    else:               # the dropout forms: kept x * a + b, dropped c
        v = tl.where(unit(own) >= pk, x * a + b, c)
    return v


@triton.jit
def _block_value(key, pid, off, x, a, b, c, pk, lo_i, rng_i, MODE: tl.constexpr, F64: tl.constexpr,
                 BLOCK: tl.constexpr):
    """The values of a program's BLOCK elements on the aligned path: the normal fill by pairs (_normal_block),
    the other modes per element from block_words."""
    if MODE == 1:
        v = _normal_block(key, pid, off, a, b, BLOCK, F64)
    else:
        own, first, second, odd = block_words(key, pid, off, BLOCK)
        v = _value(own, first, second, odd, x, a, b, c, pk, lo_i, rng_i, MODE, F64)
    return v


@fast_kernel
def _stream_kernel(x_ptr, y_ptr, st_ptr, N, seed, offset, inner, ah, al, bh, bl, ch, cl, pk, lo_i, rng_i,
                   MODE: tl.constexpr, HAS_X: tl.constexpr, F64: tl.constexpr, ALIGNED: tl.constexpr,
                   HAS_STATE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    idx = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = idx < N
    key, off = stream_base(st_ptr, seed, offset, HAS_STATE)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    a, b, c = join_f64(ah, al, F64), join_f64(bh, bl, F64), join_f64(ch, cl, F64)
    if HAS_X:
        x = tl.load(x_ptr + idx, mask=m, other=0.0).to(CT)
    else:
        x = tl.zeros([BLOCK], dtype=CT)
    if ALIGNED:
        if HAS_STATE:       # the device offset decides (advance() keeps it a multiple of 4)
            if (off & 3) == 0:
                v = _block_value(key, pid, off, x, a, b, c, pk, lo_i, rng_i, MODE, F64, BLOCK)
            else:
                own, first, second, odd = element_words(key, off + idx)
                v = _value(own, first, second, odd, x, a, b, c, pk, lo_i, rng_i, MODE, F64)
        else:
            v = _block_value(key, pid, off, x, a, b, c, pk, lo_i, rng_i, MODE, F64, BLOCK)
    else:
        own, first, second, odd = element_words(key, off + idx // inner)
        v = _value(own, first, second, odd, x, a, b, c, pk, lo_i, rng_i, MODE, F64)
    if MODE == 3:
        v = int_out(v, y_ptr)
    tl.store(y_ptr + idx, v.to(y_ptr.dtype.element_ty), mask=m)


def _params(desc):
    """(mode, has_x, (a, b, c), pk, lo_i, rng_i, inner): the kernel's arguments of a descriptor."""
    op, f = desc.op, float
    if op in DROPOUT_OPS or op == "dropout_backward":
        variant = desc.attr("variant") if op == "dropout_backward" else op
        s, c1, c0 = affine_of(variant, desc.attr("p"))
        if op == "dropout_backward":
            c1 = c0 = 0.0
        pk = float(np.float32(desc.attr("p")))
        return MODES["affine"], True, (s, c1, c0), pk, 0, 0, mask_inner(variant, desc.inputs[0].shape)
    if op == "bernoulli":
        p = desc.attr("p")
        return (MODES["bernoulli"] if p is None else MODES["bernoulli_p"], p is None, (0.0, 0.0, 0.0),
                float(np.float32(p if p is not None else 0.0)), 0, 0, 1)
    if op == "randint":
        lo, rng = randint_range(desc)
        return MODES["randint"], False, (0.0, 0.0, 0.0), 0.0, lo, rng, 1
    ab = {"uniform": ("low", "high"), "normal": ("mean", "std"), "exponential": ("lambd",)}[op]
    vals = [f(desc.attr(k)) for k in ab] + [0.0] * (3 - len(ab))
    return MODES[op], False, tuple(vals), 0.0, 0, 0, 1


def _bind(desc, pref=None):
    mode, has_x, abc, pk, lo_i, rng_i, inner = _params(desc)
    out = desc.outputs[0]
    n = out.numel
    offset = desc.attr("offset")
    aligned = inner == 1 and offset % 4 == 0 and _FORCE.get("aligned", True)
    block = _FORCE.get("block", 2048)
    # (the normal fill is instruction-bound: 16 elements a thread, four Philox calls in flight, 2.44 -> 2.54 TB/s f32
    # at 2^28 on an H200, session 17 run B; the memory-bound modes keep 8 warps)
    warps = _FORCE.get("warps", 4 if block < 2048 or mode == MODES["normal"] else 8)
    f64 = out.dtype == DType.f64 or (has_x and desc.inputs[0].dtype == DType.f64)
    identity = desc.op in DROPOUT_OPS + ("dropout_backward",) and not draws(desc.attr("training"), desc.attr("p"))
    pairs = [v for x in abc for v in split_f64(x)]

    def run(desc_, inputs, outputs, ws):
        y = outputs[0]
        if n == 0:
            return
        x = inputs[0].contiguous() if has_x else y
        if identity:
            y.copy_(x)
            return
        st, seed, off, has_state = stream_args(desc, inputs)
        _stream_kernel[(cdiv(n, block),)](x, y, y if st is None else st, n, seed, off, max(inner, 1), *pairs, pk,
                                          lo_i, rng_i, MODE=mode, HAS_X=has_x, F64=f64, ALIGNED=aligned,
                                          HAS_STATE=has_state, BLOCK=block, num_warps=warps)
    return run


for _op in ("uniform", "normal", "exponential", "randint", "bernoulli", "dropout_backward") + DROPOUT_OPS:
    register_triton(_op, _run_of(_guarded(_bind)), bind=_guarded(_bind), route=f"triton:{_op}")

