"""Factorizations (issue 19, item 2): cholesky (+_ex), cholesky_inverse, lu_factor (+_ex), lu, lu_unpack,
ldl_factor (+_ex); the operand checks, samples and tolerances the solve / det families (linalg_solve.py,
linalg_det.py) share.

Semantics are torch.linalg's (torch 2.13):
cholesky(A, upper=False) -> L           A's lower triangle is read (upper=True: its upper triangle, U = L^H of A^H);
                                        the other triangle of the result is zero.  Not positive-definite: LinAlgError.
cholesky_ex(A, upper=False) -> (L, info)  info (int32, batch-shaped): 0, or k (1-based) where the leading minor of
                                        order k is not positive-definite (LAPACK potrf's convention); never raises.
cholesky_inverse(L, upper=False) -> (L L^H)^-1  (upper: (U^H U)^-1); torch.cholesky_inverse; a complex L's diagonal
                                        is read as its real part (a factor's diagonal is real).
lu_factor(A, pivot=True) -> (LU, pivots)  A = P L U, (m, n) any shape, k = min(m, n) int32 pivots, 1-based LAPACK
                                        row interchanges; a zero pivot: LinAlgError (lu_factor_ex: info = its index).
lu(A, pivot=True) -> (P, L, U)          never raises; P is (m, m), L (m, k) unit lower, U (k, n).
lu_unpack(LU, pivots) -> (P, L, U)      torch.lu_unpack (unpack_data / unpack_pivots both True: the op's form; the
                                        drop-in returns torch's empty tensors for a False flag).
ldl_factor(A, hermitian=False) -> (LD, pivots)  Bunch-Kaufman (LAPACK sytrf / hetrf, lower): LD holds the unit
                                        lower L below the diagonal and D's 1x1 / 2x2 blocks; pivots as LAPACK (k > 0:
                                        1x1 block, rows k swapped; a negative pair -k: a 2x2 block).
pivot=False (LU without pivoting) is computed by the reference and the GPU backends; torch refuses it on the CPU.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import (Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, get_spec, register_spec,
                          set_bench_inputs)
from .linalg_common import LINALG_DTYPES, batch_of, matrix, square
from . import linalg_grad as G

__all__ = ["check_info", "info_message", "linalg_spec", "well_conditioned", "positive_definite", "linalg_tol", "operand_errors", "check_dtype"]

_UPPER = Attr("upper", "bool", False)
_PIVOT = Attr("pivot", "bool", True)
_HERM = Attr("hermitian", "bool", False)


def check_dtype(op: str, inputs, n: int) -> None:
    """The operand count and the float dtypes (f32 / f64 / c64 / c128: torch.linalg's; half and integers refused)."""
    if len(inputs) != n:
        raise InvalidProblemError(op, "inputs", f"{n} operand(s) ({', '.join(get_spec(op).arg_names[:n])})",
                                  len(inputs))
    s = get_spec(op)
    for i, t in enumerate(inputs):
        if t.dtype not in LINALG_DTYPES and i not in _INT_OPERANDS.get(op, ()):
            raise UnsupportedError(op, f"argument '{s.arg_name(i)}': expected dtype float32, float64, complex64 or "
                                       f"complex128, got {t.dtype}")


# operands that are int32 pivots (lu_solve's, lu_unpack's, ldl_solve's)
_INT_OPERANDS = {"lu_solve": (1,), "lu_unpack": (1,), "ldl_solve": (1,)}


def linalg_tol(dt: DType):
    """rtol, atol.  The samples' matrices have condition numbers below ~30 (diagonally shifted, see
    ``well_conditioned``), n <= 6: a factorization or solve in f32 loses about cond * n * eps = 30 * 6 * 1.2e-7 ~ 2e-5
    relative to the largest entry; 1e-4 / 1e-5 leaves a factor ~3.  f64 likewise with eps 2.2e-16 (4e-14) -> 1e-9."""
    if dt in (DType.f64, DType.c128):
        return 1e-9, 1e-10
    return 1e-4, 1e-5


def _grad_tol(dt: DType):
    # the backward chains two or three solves / products of the forward's rounded outputs: twice the forward's
    r, a = linalg_tol(dt)
    return 4 * r, 4 * a


def linalg_spec(name, arg_names, check, *, torch_name=None, grad=None, differentiable=(), saves=("inputs",),
                **kw) -> OpSpec:
    """One spec of this family (the linalg dtypes, tolerances, and the drop-in under torch_name)."""
    return register_spec(OpSpec(name=name, family="linalg", arg_names=arg_names, check=check, dtypes=LINALG_DTYPES,
                                torch_name=torch_name, grad=grad, differentiable=differentiable, saves=saves,
                                tol=linalg_tol, grad_tol=_grad_tol, category="linalg", **kw))


# -- sample matrices ---------------------------------------------------------------------------------------------
def well_conditioned(rng, shape):
    """Random N(0, 1) matrices plus n on the diagonal: diagonally dominant on average, condition number ~3-30,
    never singular (complex samples add an independent imaginary part: still dominant)."""
    a = rng.standard_normal(shape)
    n = shape[-1]
    return a + n * np.eye(shape[-2], n)


def positive_definite(rng, shape):
    """Symmetric positive-definite matrices B B^T / n + I with a strongly dominant diagonal, so the Hermitian matrix a
    complex sample implies (real part of one such sample, imaginary part of another: the triangle cholesky reads
    plus its conjugate) is positive-definite too (Gershgorin)."""
    b = rng.standard_normal(shape)
    n = shape[-1]
    return b @ np.swapaxes(b, -1, -2) / n + 2.0 * n * np.eye(n)


def _square_samples(make, attrs_list=({},), extra=()):
    def samples(rng):
        for shape, attrs in [((3, 3), attrs_list[0]), ((2, 4, 4), attrs_list[-1])]:
            yield Sample((make(rng, shape),), dict(attrs), name=f"{shape}-{attrs}")
        yield Sample((make(rng, (0, 3, 3)),), dict(attrs_list[0]), name="empty-batch", grad=False)
        yield from extra(rng) if callable(extra) else ()
    return samples


def operand_errors(op, n_ops=1, square_arg=0):
    """The error cases every matrix op shares: too few dims, a non-square matrix, half precision, an integer."""
    def ins(shape, dt="f32"):
        base = [((3, 3), "f32")] * n_ops
        base[square_arg] = (shape, dt)
        return tuple(base)

    def errors():
        yield ErrorCase(ins((3,)), {}, InvalidProblemError, f"{op}: argument '.*': expected a tensor of at least 2 dims")
        yield ErrorCase(ins((3, 4)), {}, InvalidProblemError, f"{op}: argument '.*': expected square matrices")
        yield ErrorCase(ins((3, 3), "f16"), {}, UnsupportedError, f"{op}: argument '.*': expected dtype float32.*f16")
        yield ErrorCase(ins((3, 3), "i64"), {}, UnsupportedError, f"{op}: argument '.*': expected dtype float32.*i64")
    return errors


def _workloads(op, attrs=None, backward=False):
    a = attrs or {}
    return (Workload(f"{op} 65536x32x32 f32", ((65536, 32, 32),), DType.f32, dict(a), backward=backward),
            Workload(f"{op} 4096^2 f32", ((4096, 4096),), DType.f32, dict(a), backward=backward),
            Workload(f"{op} 4096^2 f64", ((4096, 4096),), DType.f64, dict(a), backward=backward))


def _cost_cube(frac):
    """bytes: the operand and result; flops: frac * n^3 per matrix (cholesky 1/3, LU 2/3, inverse 2)."""
    def cost(d):
        a = d.inputs[0]
        n = a.shape[-1]
        return a.nbytes + sum(t.nbytes for t in d.outputs), int(frac * n ** 3 * (a.numel // max(n * n, 1)))
    return cost


def _info(a) -> TensorSpec:
    return TensorSpec(batch_of(a), DType.i32)


# -- cholesky ------------------------------------------------------------------------------------------------------
def _check_chol(op, ex):
    def check(inputs, attrs):
        check_dtype(op, inputs, 1)
        (a,) = inputs
        square(op, "A", a)
        outs = (TensorSpec(a.shape, a.dtype),) + ((_info(a),) if ex else ())
        return attrs, outs
    return check


def _peer_chol(ex):
    def peer(a, upper=False):
        import torch

        if ex:
            return tuple(torch.linalg.cholesky_ex(a, upper=upper))
        return torch.linalg.cholesky(a, upper=upper)
    return peer


def _dropin_chol(A, *, upper=False, out=None):
    if out is not None:
        raise UnsupportedError("cholesky", "out= is not supported by the drop-in")
    return (A,), {"upper": upper}


def _dropin_chol_ex(A, *, upper=False, check_errors=False, out=None):
    if out is not None:
        raise UnsupportedError("cholesky_ex", "out= is not supported by the drop-in")
    return (A,), {"upper": upper}, (_raise_info("cholesky_ex", "chol") if check_errors else None)


def _raise_info(op, kind):
    """A drop-in finisher for check_errors=True: torch's LinAlgError for a non-zero info (one host sync, as torch)."""
    def finish(outs):
        info = outs[-1]
        if info.numel() and bool((info != 0).any()):
            from .linalg_common import LinAlgError

            raise LinAlgError(op, info_message(kind, int(info[info != 0].reshape(-1)[0])))
        return outs
    return finish


def check_info(op: str, kind: str, info, pref) -> None:
    """A GPU plan of a plain form: a non-zero info (int32 device tensor) becomes torch's LinAlgError, at once or
    deferred as ``pref.check_values`` says (_core/checks.py; torch synchronizes here, the deferred default does not)."""
    if info.numel() == 0:
        return
    from .._core.checks import flagged
    from .linalg_common import LinAlgError

    flagged(info.amax().reshape(1), pref, lambda v: LinAlgError(op, info_message(kind, int(v))))


def info_message(kind: str, k: int) -> str:
    """torch's LinAlgError text for a non-zero info ``k`` of a factorization of ``kind``."""
    if kind == "chol":
        return (f"The factorization could not be completed because the input is not positive-definite (the leading "
                f"minor of order {k} is not positive-definite).")
    if kind == "lu":
        return (f"U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. If you still want "
                f"to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    if kind == "inv":
        return (f"The diagonal element {k} is zero, the inversion could not be completed because the input matrix "
                f"is singular.")
    return "The solver failed because the input matrix is singular."


def _chol_samples(rng):
    yield from _square_samples(positive_definite, ({"upper": False}, {"upper": True}))(rng)


def _chol_errors(op):
    base = operand_errors(op)
    return lambda: list(base())


for _ex in (False, True):
    _n = "cholesky_ex" if _ex else "cholesky"
    linalg_spec(_n, ("A",), _check_chol(_n, _ex), attrs=(_UPPER,), torch_name=f"torch.linalg.{_n}",
                torch_peer=_peer_chol(_ex), dropin=_dropin_chol_ex if _ex else _dropin_chol,
                dropin_result=(lambda o: __import__("torch").return_types.linalg_cholesky_ex(o)) if _ex else None,
                grad=G.g_cholesky, differentiable=(0,), saves=("out0",) if _ex else ("out",),
                grad_is_derivative=False,   # torch's gradient is Hermitian (both triangles), see linalg_grad.py
                samples=_chol_samples, errors=_chol_errors(_n), workloads=_workloads(_n, backward=not _ex),
                cost=_cost_cube(1 / 3),
                doc="Cholesky factor of Hermitian positive-definite matrices (torch.linalg semantics).")


def bench_spd(desc, device, gen):
    """Benchmark operands of the ops that need a Hermitian positive-definite matrix (the first input): B B^H / n + I,
    well conditioned for any n (the sample-derived normal matrices are not positive-definite: every row would fail)."""
    import torch

    a = desc.inputs[0]
    dt = a.dtype.torch
    b = torch.randn(a.shape, device=device, generator=gen, dtype=dt)
    n = a.shape[-1]
    spd = b @ b.mH / n + torch.eye(n, device=device, dtype=dt)
    rest = [torch.randn(t.shape, device=device, generator=gen, dtype=t.dtype.torch) for t in desc.inputs[1:]]
    return [spd, *rest]


for _n in ("cholesky", "cholesky_ex"):
    set_bench_inputs(_n, bench_spd)


# -- cholesky_inverse ------------------------------------------------------------------------------------------------
def _check_chol_inv(inputs, attrs):
    op = "cholesky_inverse"
    check_dtype(op, inputs, 1)
    square(op, "L", inputs[0])
    return attrs, (TensorSpec(inputs[0].shape, inputs[0].dtype),)


def _chol_factor(rng, shape):
    """A well-conditioned lower factor (cholesky of a positive_definite sample); both triangles filled, as torch's
    cholesky_inverse reads only the one ``upper`` names."""
    return positive_definite(rng, shape) / shape[-1]


def _peer_chol_inv(L, upper=False):
    """torch on the factor the op reads: a complex factor's diagonal's real part (a Cholesky factor's diagonal is real;
    torch's LAPACK potri mixes the complex diagonal in and the real part in (zlauum): an artifact, not a definition)."""
    import torch

    if L.is_complex():
        L = L - 1j * torch.diag_embed(L.diagonal(dim1=-2, dim2=-1).imag)
    return torch.cholesky_inverse(L, upper=upper)


linalg_spec("cholesky_inverse", ("L",), _check_chol_inv, attrs=(_UPPER,), torch_name="torch.cholesky_inverse",
            torch_peer=_peer_chol_inv, dropin=lambda L, upper=False, *, out=None: ((L,), {"upper": upper}),
            grad=G.g_cholesky_inverse, differentiable=(0,), saves=("L", "out"),
            grad_is_derivative=False,   # torch's gradient fills both triangles (the op reads one)
            samples=_square_samples(_chol_factor, ({"upper": False}, {"upper": True})),
            errors=operand_errors("cholesky_inverse"), workloads=_workloads("cholesky_inverse"),
            cost=_cost_cube(1.0), doc="The inverse of L L^H (upper: U^H U) from its Cholesky factor.")


# -- LU ------------------------------------------------------------------------------------------------------------
def lu_shapes(a):
    m, n = a.shape[-2:]
    return m, n, min(m, n)


def _check_lu(op, kind):
    def check(inputs, attrs):
        check_dtype(op, inputs, 1)
        (a,) = inputs
        matrix(op, "A", a)
        m, n, k = lu_shapes(a)
        b = batch_of(a)
        if kind == "lu":
            outs = (TensorSpec(b + (m, m), a.dtype), TensorSpec(b + (m, k), a.dtype), TensorSpec(b + (k, n), a.dtype))
        else:
            outs = (TensorSpec(a.shape, a.dtype), TensorSpec(b + (k,), DType.i32))
            if kind == "ex":
                outs += (_info(a),)
        return attrs, outs
    return check


def _peer_lu(kind):
    def peer(a, pivot=True):
        import torch

        if kind == "lu":
            return tuple(torch.linalg.lu(a, pivot=pivot))
        if kind == "ex":
            return tuple(torch.linalg.lu_factor_ex(a, pivot=pivot))
        return tuple(torch.linalg.lu_factor(a, pivot=pivot))
    return peer


def _dropin_lu(op, ex):
    def dropin(A, *, pivot=True, check_errors=False, out=None):
        if out is not None:
            raise UnsupportedError(op, "out= is not supported by the drop-in")
        return (A,), {"pivot": pivot}, (_raise_info(op, "lu") if check_errors else None)

    def plain(A, *, pivot=True, out=None):
        return dropin(A, pivot=pivot, out=out)[:2]
    return dropin if ex else plain


def _lu_samples(rng):
    for shape in ((3, 3), (2, 4, 4)):
        yield Sample((well_conditioned(rng, shape),), {}, name=f"{shape}")
    # a rectangular pair (tall, wide): torch's two rectangular gradient formulas (linalg_grad._lu_grad)
    yield Sample((rng.standard_normal((2, 5, 3)),), {}, name="tall")
    yield Sample((rng.standard_normal((3, 5)),), {}, name="wide")
    yield Sample((rng.standard_normal((0, 3, 3)),), {}, name="empty-batch", grad=False)


def _lu_errors(op):
    def errors():
        yield ErrorCase((((3,), "f32"),), {}, InvalidProblemError, f"{op}: argument 'A': expected a tensor of at least 2")
        yield ErrorCase((((3, 3), "f16"),), {}, UnsupportedError, f"{op}: argument 'A': expected dtype float32.*f16")
        yield ErrorCase((((3, 3), "i32"),), {}, UnsupportedError, f"{op}: argument 'A': expected dtype float32.*i32")
    return errors


_RT = "torch.return_types"
for _n, _kind, _names in (("lu_factor", "plain", ("LU", "pivots")), ("lu_factor_ex", "ex", ("LU", "pivots", "info")),
                          ("lu", "lu", ("P", "L", "U"))):
    linalg_spec(_n, ("A",), _check_lu(_n, _kind), attrs=(_PIVOT,), torch_name=f"torch.linalg.{_n}",
                torch_peer=_peer_lu(_kind), dropin=_dropin_lu(_n, _kind == "ex"),
                dropin_result=(lambda o, _n=_n: getattr(__import__("torch").return_types, f"linalg_{_n}")(o)),
                grad=G.g_lu if _kind == "lu" else G.g_lu_factor, differentiable=(0,),
                saves=("out0", "out1", "out2") if _kind == "lu" else ("out0", "out1"),
                samples=_lu_samples, errors=_lu_errors(_n), workloads=_workloads(_n), cost=_cost_cube(2 / 3),
                doc=f"LU factorization with partial pivoting (torch.linalg.{_n}).")


def _check_unpack(inputs, attrs):
    op = "lu_unpack"
    check_dtype(op, inputs, 2)
    lu, piv = inputs
    matrix(op, "LU_data", lu)
    m, n, k = lu_shapes(lu)
    if piv.dtype != DType.i32:
        raise UnsupportedError(op, f"argument 'LU_pivots': expected dtype int32, got {piv.dtype}")
    if tuple(piv.shape) != batch_of(lu) + (k,):
        raise InvalidProblemError(op, "LU_pivots", f"shape {batch_of(lu) + (k,)} (the batch of LU_data, min(m, n))",
                                  tuple(piv.shape))
    b = batch_of(lu)
    return attrs, (TensorSpec(b + (m, m), lu.dtype), TensorSpec(b + (m, k), lu.dtype), TensorSpec(b + (k, n), lu.dtype))


def _pivots(rng, batch, m, k=None):
    """Valid 1-based LAPACK pivots of k = m rows (or k of m): row i swapped with a row in [i, m) (lu_unpack's,
    lu_solve's, and ldl_solve's with 1x1 blocks only: its 2x2 blocks are tested in tests/linalg on real factors)."""
    k = m if k is None else k
    return np.stack([rng.integers(i + 1, m + 1, size=batch) for i in range(k)], -1).astype(np.int32)


def _unpack_samples(rng):
    """(LU, pivots) of random problems: LU entries N(0, 1), valid pivots."""
    for shape in ((3, 3), (2, 4, 4), (5, 3), (2, 3, 5)):
        m, n = shape[-2:]
        yield Sample((rng.standard_normal(shape), _pivots(rng, shape[:-2], m, min(m, n))), {}, name=f"{shape}")


def _dropin_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    import torch

    if out is not None:
        raise UnsupportedError("lu_unpack", "out= is not supported by the drop-in")

    def finish(outs):   # torch returns empty tensors for what it was told not to unpack
        P, L, U = outs
        e = LU_data.new_empty(0)
        return (P if unpack_pivots else e, L if unpack_data else e, U if unpack_data else e)
    return (LU_data, LU_pivots.to(torch.int32)), {}, finish


def _peer_unpack(lu, piv):
    import torch

    return tuple(torch.lu_unpack(lu, piv))


linalg_spec("lu_unpack", ("LU_data", "LU_pivots"), _check_unpack, attrs=(), torch_name="torch.lu_unpack",
            torch_peer=_peer_unpack, dropin=_dropin_unpack,
            dropin_result=lambda o: __import__("torch").return_types.lu_unpack(o),
            grad=G.g_lu_unpack, differentiable=(0,), saves=(),
            samples=_unpack_samples, errors=lambda: [
                ErrorCase((((3, 3), "f32"), ((3,), "i64")), {}, UnsupportedError, "lu_unpack: argument 'LU_pivots'"),
                ErrorCase((((3, 3), "f32"), ((2,), "i32")), {}, InvalidProblemError, "lu_unpack: argument 'LU_pivots'"),
                ErrorCase((((3, 3), "f16"), ((3,), "i32")), {}, UnsupportedError, "lu_unpack: argument 'LU_data'")],
            workloads=(Workload("lu_unpack 65536x32x32 f32", ((65536, 32, 32), ((65536, 32), DType.i32)), DType.f32),),
            doc="P, L, U of a packed LU factorization (torch.lu_unpack).")


# -- LDL (Bunch-Kaufman) ---------------------------------------------------------------------------------------------
def _check_ldl(op, ex):
    def check(inputs, attrs):
        check_dtype(op, inputs, 1)
        (a,) = inputs
        n = square(op, "A", a)
        outs = (TensorSpec(a.shape, a.dtype), TensorSpec(batch_of(a) + (n,), DType.i32))
        return attrs, outs + ((_info(a),) if ex else ())
    return check


def _peer_ldl(ex):
    def peer(a, hermitian=False):
        import torch

        f = torch.linalg.ldl_factor_ex if ex else torch.linalg.ldl_factor
        return tuple(f(a, hermitian=hermitian))
    return peer


def _ldl_samples(rng):
    """Symmetric indefinite matrices (random symmetric, no diagonal shift): Bunch-Kaufman takes 2x2 pivots on some."""
    for shape, attrs in (((4, 4), {}), ((2, 5, 5), {"hermitian": True}), ((3, 3), {"hermitian": False})):
        b = rng.standard_normal(shape)
        yield Sample((b + np.swapaxes(b, -1, -2),), attrs, name=f"{shape}-{attrs}", grad=False)


def _dropin_ldl(op, ex):
    def dropin(A, *, hermitian=False, check_errors=False, out=None):
        if out is not None:
            raise UnsupportedError(op, "out= is not supported by the drop-in")
        return (A,), {"hermitian": hermitian}, (_raise_info(op, "ldl") if check_errors else None)

    def plain(A, *, hermitian=False, out=None):
        return dropin(A, hermitian=hermitian, out=out)[:2]
    return dropin if ex else plain


for _ex in (False, True):
    _n = "ldl_factor_ex" if _ex else "ldl_factor"
    linalg_spec(_n, ("A",), _check_ldl(_n, _ex), attrs=(_HERM,), torch_name=f"torch.linalg.{_n}",
                torch_peer=_peer_ldl(_ex), dropin=_dropin_ldl(_n, _ex),
                dropin_result=(lambda o, _n=_n: getattr(__import__("torch").return_types, f"linalg_{_n}")(o)),
                samples=_ldl_samples, errors=operand_errors(_n), workloads=_workloads(_n)[:1], cost=_cost_cube(1 / 3),
                doc="LDL^T (hermitian: LDL^H) Bunch-Kaufman factorization, LAPACK sytrf's layout (torch.linalg). "
                    "Not differentiable (as torch).")
