"""NumPy bodies of the random family (ops/random.py), and the one NumPy Philox-4x32-10 of the library.

Philox-4x32-10 (Salmon et al. 2011, the generator of Triton's ``tl.philox`` / ``tl.randint`` / ``tl.rand``) is
written here once, bit for bit: the Gumbel noise of gumbel_softmax (reference/softmax_gumbel_sparsemax.py), the
dropout of the attention kernels (``tl_rand``, reference/attention_sdpa.py) and every op of the random family draw
from it.

The random family's stream (``stream_words``): element ``e`` (= offset + the element's row-major index) is word
``e & 3`` of Philox(key = seed (lo, hi), counter = (e >> 2) lo, hi, 0, 0): one Philox evaluation gives four
consecutive elements, so a GPU kernel spends a quarter of the integer work of one evaluation per element, and
the value of an element depends on (seed, offset + index) alone, never on block sizes or the grid.
"""
from __future__ import annotations

import numpy as np

from ..._core.dtypes import DType
from ...ops.random import affine_of, draws, mask_inner, multinomial_keys, randint_range
from . import register_reference

_M32 = np.uint64(0xFFFFFFFF)
_KEY_A, _KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
# tl.rand's scale for an int32 source: the largest float32 with (2**31 - 1) * scale < 1 (triton/language/random.py)
_RAND_SCALE = np.float32(4.6566127342e-10)
_U24 = 2.0 ** -24


def philox4(seed: int, counter: np.ndarray, rounds: int = 10) -> tuple:
    """The four uint32 words of Philox-4x32 on counters (c0, c1, 0, 0) = (counter lo, counter hi), key = seed (lo,
    hi): exactly ``tl.philox(seed, lo, hi, 0, 0)``."""
    c = np.asarray(counter).astype(np.uint64)
    c0, c1 = c & _M32, (c >> np.uint64(32)) & _M32
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    for _ in range(rounds):
        pa, pb = _ROUND_A * c0, _ROUND_B * c2      # < 2^64: exact in uint64
        c0, c1, c2, c3 = (((pb >> np.uint64(32)) ^ c1 ^ k0) & _M32, pb & _M32,
                          ((pa >> np.uint64(32)) ^ c3 ^ k1) & _M32, pa & _M32)
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return tuple(w.astype(np.uint32) for w in (c0, c1, c2, c3))


def philox_u32(seed: int, counter: np.ndarray, rounds: int = 10) -> np.ndarray:
    """First uint32 of Philox-4x32 on counters (c0, c1, 0, 0) = (counter lo, counter hi), key = seed (lo, hi)."""
    return philox4(seed, counter, rounds)[0]


def tl_rand(seed: int, counters: np.ndarray) -> np.ndarray:
    """float32 uniforms in [0, 1), exactly ``tl.rand(seed, counters)`` for int64 counters: the first Philox word
    (counter (lo, hi, 0, 0), key (seed lo, seed hi)) bitcast to int32, x < 0 -> -x - 1, then float32(x) * scale
    (two float32 roundings, as the kernel)."""
    x = philox_u32(seed, np.asarray(counters, dtype=np.int64).astype(np.uint64)).view(np.int32)
    x = np.where(x < 0, -(x.astype(np.int64)) - 1, x).astype(np.int64)
    return (x.astype(np.float32) * _RAND_SCALE).astype(np.float32)


# -- the random family's stream --------------------------------------------------------------------------------
def stream_words(seed: int, e: np.ndarray):
    """For int64 element counters ``e``: (the element's own word, the first and second word of its Box-Muller
    pair (words 0, 1 or 2, 3 of its Philox block), whether it is the second of the pair)."""
    e = np.asarray(e, dtype=np.int64)
    w = philox4(seed, (e >> 2).astype(np.uint64))
    k = e & 3
    own = np.choose(k, w)
    first = np.where(k < 2, w[0], w[2])
    second = np.where(k < 2, w[1], w[3])
    return own, first, second, (k & 1) == 1


def stream_u32(seed: int, offset: int, n: int) -> np.ndarray:
    """The uint32 words of elements offset .. offset + n - 1 of the stream."""
    return stream_words(seed, offset + np.arange(n, dtype=np.int64))[0]


def unit_f32(u: np.ndarray) -> np.ndarray:
    """U in [0, 1): the word's top 24 bits times 2^-24 (exact in float32 and float64)."""
    return (u >> np.uint32(8)).astype(np.float64) * _U24


def unit_open0(u: np.ndarray) -> np.ndarray:
    """U in (0, 1]: (top 24 bits + 1) * 2^-24 (the argument of a logarithm)."""
    return ((u >> np.uint32(8)).astype(np.float64) + 1.0) * _U24


def stream_key(desc, state=()) -> tuple:
    """(seed, offset of output element 0): the attributes, or the state operand's (seed, base) + offset."""
    if len(state):
        st = np.asarray(state[0], dtype=np.int64)
        return int(st[0]), int(st[1]) + desc.attr("offset")
    return desc.attr("seed"), desc.attr("offset")


def _shape_n(desc):
    shape = desc.outputs[0].shape
    return shape, int(np.prod(shape, dtype=np.int64))


def uniform_f64(desc, u):
    """low + (high - low) * U; U from 24 bits (32 bits, u * 2^-32, for a float64 output)."""
    if desc.outputs[0].dtype == DType.f64:
        x = u.astype(np.float64) * 2.0 ** -32
    else:
        x = unit_f32(u)
    lo, hi = desc.attr("low"), desc.attr("high")
    return lo + (hi - lo) * x


def normal_f64(own, first, second, odd):
    """Box-Muller on the element's pair: r = sqrt(-2 log U1), U1 in (0, 1]; z = r cos(2 pi U2) for the first of the
    pair, r sin(2 pi U2) for the second."""
    r = np.sqrt(-2.0 * np.log(unit_open0(first)))
    t = 2.0 * np.pi * unit_f32(second)
    return np.where(odd, r * np.sin(t), r * np.cos(t))


def _fill(desc, *state):
    shape, n = _shape_n(desc)
    op = desc.op
    seed, off = stream_key(desc, state)
    own, first, second, odd = stream_words(seed, off + np.arange(n, dtype=np.int64))
    if op == "uniform":
        v = uniform_f64(desc, own)
    elif op == "normal":
        v = desc.attr("mean") + desc.attr("std") * normal_f64(own, first, second, odd)
    elif op == "exponential":
        v = -np.log(unit_open0(own)) / desc.attr("lambd")
    else:   # randint: low + floor(u * range / 2^32) (exact in uint64: u < 2^32, range <= 2^32)
        lo, rng = randint_range(desc)
        v = lo + ((own.astype(np.uint64) * np.uint64(rng)) >> np.uint64(32)).astype(np.int64)
    return v.reshape(shape)


def _bernoulli(desc, x, *state):
    u = unit_f32(stream_u32(*stream_key(desc, state), x.size)).reshape(x.shape)
    p = desc.attr("p")
    return (u < (np.float32(p) if p is not None else x.astype(np.float32))).astype(np.float64)


def keep_mask(desc, shape, state=()) -> np.ndarray:
    """The keep mask of a dropout op over ``shape``: mask element m = flat index // inner (inner: the product of
    the dims a channel mask spans, 1 for element masks) is kept iff U(offset + m) >= float32(p)."""
    n = int(np.prod(shape, dtype=np.int64))
    inner = mask_inner(desc.attr("variant") if desc.op == "dropout_backward" else desc.op, shape)
    m = np.arange(n, dtype=np.int64) // max(inner, 1)
    seed, off = stream_key(desc, state)
    u = unit_f32(stream_words(seed, off + m)[0])
    return (u >= float(np.float32(desc.attr("p")))).reshape(shape)


def _dropout(desc, x, *state):
    if not draws(desc.attr("training"), desc.attr("p")):
        return x.copy()
    s, c1, c0 = affine_of(desc.op, desc.attr("p"))
    return np.where(keep_mask(desc, x.shape, state), x * s + c1, c0)


def _dropout_bw(desc, g, *state):
    if not draws(desc.attr("training"), desc.attr("p")):
        return g.copy()
    s, _, _ = affine_of(desc.attr("variant"), desc.attr("p"))
    return np.where(keep_mask(desc, g.shape, state), g * s, 0.0)


def _randperm(desc, *state):
    n = desc.attr("n")
    keys = stream_u32(*stream_key(desc, state), n)
    return np.argsort(keys, kind="stable").astype(np.int64)     # ties (equal words) in index order


def _multinomial(desc, x, *state):
    """With replacement: sample s of row r inverts the row's CDF at U(offset + r * num_samples + s) * row sum.
    Without: the num_samples smallest keys -log(U(offset + r * K + k)) / w_k (exponential races, ``k`` not
    drawn twice), ties in index order."""
    rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    R, K = rows.shape
    ns = desc.attr("num_samples")
    seed, off = stream_key(desc, state)
    out = np.zeros((R, ns), dtype=np.int64)
    for r in range(R):
        w = rows[r]
        if desc.attr("replacement"):
            u = unit_f32(stream_u32(seed, off + r * ns, ns))
            c = np.cumsum(w)
            t = u * c[-1]
            out[r] = np.minimum(np.searchsorted(c, t, side="right"), K - 1)     # the first c > t: w > 0 there
        else:
            keys = multinomial_keys(w, unit_open0(stream_u32(seed, off + r * K, K)))
            out[r] = np.argsort(keys, kind="stable")[:ns]
    return out.reshape(x.shape[:-1] + (ns,))


for _op in ("uniform", "normal", "exponential", "randint"):
    register_reference(_op, _fill, upcast_inputs=False)
register_reference("bernoulli", _bernoulli)
for _op in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"):
    register_reference(_op, _dropout)
register_reference("dropout_backward", _dropout_bw)
register_reference("randperm", _randperm, upcast_inputs=False)
register_reference("multinomial", _multinomial)

