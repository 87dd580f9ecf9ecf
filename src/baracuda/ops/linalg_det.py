"""Determinants (issue 19, item 2): det, slogdet, logdet, through LU with partial pivoting.

det(A) -> det                       product of U's diagonal times the pivots' sign; 0 for a singular A (no error).
slogdet(A) -> (sign, logabsdet)     sign: A's dtype (+-1, or a unit complex number; 0 when singular), logabsdet: the
                                    real dtype (-inf when singular).
logdet(A) -> log(det)               torch.logdet: real A: nan for a negative determinant, -inf for zero; complex A:
                                    the complex logarithm log|det| + i arg(det).
Gradients (torch's formulas for invertible A): g * conj(det) A^{-H} (det), (g_logabs + i Im(conj(sign) g_sign))
A^{-H} (slogdet; real: g_logabs A^{-T}), g A^{-H} (logdet).  A singular A: torch's det backward falls back to an SVD;
here the backward raises LinAlgError (from inv): see linalg_grad.py.
"""
from __future__ import annotations

from .._core.dtypes import DType
from .elementwise import real_of
from .._core.spec import TensorSpec, Workload
from .linalg_common import batch_of, square
from .linalg_factor import check_dtype, linalg_spec, operand_errors, positive_definite, well_conditioned
from .._core.spec import Sample
from . import linalg_grad as G


def _check(op):
    def check(inputs, attrs):
        check_dtype(op, inputs, 1)
        (a,) = inputs
        square(op, "A", a)
        b = batch_of(a)
        if op == "slogdet":
            return attrs, (TensorSpec(b, a.dtype), TensorSpec(b, real_of(a.dtype)))
        return attrs, (TensorSpec(b, a.dtype),)
    return check


def _peer(op):
    def peer(a):
        import torch

        if op == "slogdet":
            return tuple(torch.linalg.slogdet(a))
        return torch.logdet(a) if op == "logdet" else torch.linalg.det(a)
    return peer


def _samples(op):
    def samples(rng):
        # logdet: positive-definite samples, so a real determinant is positive (a negative one is nan, no gradient)
        make = positive_definite if op == "logdet" else well_conditioned
        for shape in ((3, 3), (2, 4, 4)):
            yield Sample((make(rng, shape) - (0.0 if op == "logdet" else 2.0 * shape[-1] * (shape[-1] == 3)),), {},
                         name=f"{shape}")
        yield Sample((make(rng, (0, 3, 3)),), {}, name="empty-batch", grad=False)
    return samples


def _cost(d):
    a = d.inputs[0]
    n = a.shape[-1]
    return a.nbytes + sum(t.nbytes for t in d.outputs), int(2 / 3 * n ** 3 * (a.numel // max(n * n, 1)))


def _dropin(A, *, out=None):
    return (A,), {}


for _op, _tn, _al in (("det", "torch.linalg.det", ()), ("slogdet", "torch.linalg.slogdet", ()),
                      ("logdet", "torch.logdet", ())):   # (torch.det / torch.slogdet: twins, torch/_linalg_twins.py)
    linalg_spec(_op, ("A",), _check(_op), attrs=(), torch_name=_tn, torch_aliases=_al, torch_peer=_peer(_op),
                dropin=_dropin,
                dropin_result=(lambda o: __import__("torch").return_types.linalg_slogdet(o)) if _op == "slogdet" else None,
                grad=G.g_det, differentiable=(0,), saves=("A",) + (("out0",) if _op == "slogdet" else ("out",)),
                samples=_samples(_op), errors=operand_errors(_op),
                workloads=(Workload(f"{_op} 65536x32x32 f32", ((65536, 32, 32),), DType.f32),
                           Workload(f"{_op} 4096^2 f64", ((4096, 4096),), DType.f64)),
                cost=_cost, doc=f"{_op} of square matrices through LU with partial pivoting.")
