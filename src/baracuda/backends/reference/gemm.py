"""NumPy bodies of the GEMM family (float64: the oracle every GPU GEMM is compared with; integers exact, see
``exact_ints``)."""
from __future__ import annotations

import math

import numpy as np

from ...ops.gemm import GEMM_OPS
from . import register_reference

_erf = np.vectorize(math.erf, otypes=[np.float64])
_ACT = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


def exact_ints(fn):
    """A GEMM body for integer and bool operands too: they are computed in uint64, whose arithmetic NumPy defines as
    wrapping mod 2^64 (never through float64, which is inexact past 2^53), and the result reinterpreted as int64; the
    output cast then keeps the low bits of the output's width (bool: nonzero).  That is torch's CPU integer matmul:
    wrapping two's-complement arithmetic, and sums and products mod 2^64 reduced mod 2^bits are the same bits as
    computed in the narrow type."""
    def body(desc, *xs):
        if all(x.dtype.kind in "fc" for x in xs):
            return fn(desc, *xs)
        r = fn(desc, *(x.astype(np.uint64) for x in xs))
        return tuple(_signed(x) for x in r) if isinstance(r, tuple) else _signed(r)
    return body


def _signed(r):
    r = np.asarray(r)
    return r.view(np.int64) if r.dtype == np.uint64 else r


def wrap_scalar(v, like: np.ndarray):
    """beta / alpha for ``like``'s arithmetic: a uint64 (mod 2^64) for the uint64 integer path, else as given."""
    return np.uint64(int(v) % 2 ** 64) if like.dtype == np.uint64 else v


def _op(x, trans: bool):
    return np.swapaxes(x, -1, -2) if trans else x


def _gemm(desc, a, b):
    # np.matmul has torch.matmul's semantics (1-D operands, batch broadcasting)
    return np.matmul(_op(a, desc.attr("trans_a")), _op(b, desc.attr("trans_b")))


def _preact(x, w, b=None):
    y = np.matmul(x, w.T)
    return y if b is None else y + b


def _linear(desc, x, w, b=None):
    return _preact(x, w, b)


def _linear_act(desc, x, w, b=None):
    pre = _preact(x, w, b)
    with np.errstate(all="ignore"):
        y = _ACT[desc.attr("activation")](pre)
    return (y, pre) if desc.attr("save_preact") else y


for _name in GEMM_OPS:
    register_reference(_name, exact_ints(_gemm))
register_reference("linear", exact_ints(_linear))
register_reference("linear_act", _linear_act)
