"""NumPy bodies of the GEMM family (float64: the oracle every GPU GEMM is compared with)."""
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
    register_reference(_name, _gemm)
register_reference("linear", _linear)
register_reference("linear_act", _linear_act)
