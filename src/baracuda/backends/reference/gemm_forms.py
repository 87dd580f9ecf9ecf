"""NumPy bodies of the GEMM forms (float64): addmm & co., mv / dot / vdot, kron, einsum, tensordot, inner, outer,
multi_dot, bilinear.  Each is written with NumPy's own function of that meaning (np.einsum, np.tensordot, np.kron,
np.linalg.multi_dot, ...), independently of the contraction schedule the GPU plans run."""
from __future__ import annotations

import numpy as np

from ...ops.gemm_einsum import contraction_of
from . import register_reference
from .gemm import exact_ints, wrap_scalar

_PRODUCT = {"addmm": np.matmul, "addmv": np.matmul, "addr": np.outer, "baddbmm": np.matmul,
            "addbmm": lambda a, b: np.matmul(a, b).sum(axis=0)}


def _add_form(desc, inp, a, b):
    """beta * input + alpha * product; beta = 0 leaves input out (its NaN / inf do not propagate, as torch)."""
    beta, alpha = wrap_scalar(desc.attr("beta"), inp), wrap_scalar(desc.attr("alpha"), inp)
    with np.errstate(invalid="ignore", over="ignore"):
        p = alpha * _PRODUCT[desc.op](a, b)
        return p + beta * inp if beta != 0 else p


def _broadcast_operands(desc, xs):
    """The operands with their broadcast (size-1) axes at the label's size (torch's einsum / tensordot broadcast;
    NumPy's einsum and tensordot do not)."""
    c = contraction_of(desc)
    return c, [np.broadcast_to(x, c.full_shape(i)) for i, x in enumerate(xs)]


def _einsum(desc, *xs):
    c, xs = _broadcast_operands(desc, xs)
    return np.einsum(c.equation, *xs)


def _tensordot(desc, a, b):
    _, (a, b) = _broadcast_operands(desc, (a, b))
    da, db = desc.attr("dims")
    return np.tensordot(a, b, axes=(list(da), list(db)))


def _kron(desc, a, b):
    return np.kron(a, b) if a.ndim or b.ndim else a * b


def _bilinear(desc, x1, x2, w, b=None):
    y = np.einsum("...i,oij,...j->...o", x1, w, x2)
    return y if b is None else y + b


_BODIES = {"einsum": _einsum, "tensordot": _tensordot, "inner": lambda desc, a, b: np.inner(a, b),
           "outer": lambda desc, a, b: np.outer(a, b), "mv": lambda desc, a, b: a @ b,
           "dot": lambda desc, a, b: np.dot(a, b), "vdot": lambda desc, a, b: np.vdot(a, b), "kron": _kron,
           "multi_dot": lambda desc, *xs: np.linalg.multi_dot(xs), "bilinear": _bilinear,
           **{op: _add_form for op in _PRODUCT}}
for _op, _fn in _BODIES.items():
    register_reference(_op, exact_ints(_fn))
