"""Solves and inverses (issue 19, item 2): solve (+_ex), solve_triangular, cholesky_solve, lu_solve, ldl_solve,
inv (+_ex).  Batch dims broadcast between the matrix and the right-hand side (torch.linalg's rule); the factor
operands' pivots share their factor's batch.

solve(A, B, left=True) -> X              A X = B (left=False: X A = B); B is a batch of vectors when B.ndim == 1 or
                                         B.shape == A.shape[:-1] (torch's rule), the result then too.  A singular:
                                         LinAlgError; solve_ex returns (X, info) instead, info = LU's first zero pivot.
                                         The op's outputs also carry the LU factors and pivots of A (broadcast to X's
                                         batch: lu_factor's), which the drop-ins do not return and the backward
                                         reads: A^H G = dX is lu_solve(adjoint=True) on them, as torch saves its LU
                                         (factoring A again made the 4096^2 backward 2x slower: 23.3 vs 11.7 ms on
                                         the H100, sessions 6 and 7).
solve_triangular(A, B, upper, left=True, unitriangular=False)   reads only A's ``upper`` / lower triangle (and not its
                                         diagonal when unitriangular); no singularity check (torch: inf / nan).
cholesky_solve(B, L, upper=False)        (L L^H) X = B; torch.cholesky_solve's operand order.
lu_solve(LU, pivots, B, left=True, adjoint=False)   op(A) X = B (left=False: X op(A) = B), op = A^H when adjoint.
ldl_solve(LD, pivots, B, hermitian=False)  A X = B for A = L D L^T (L D L^H) from ldl_factor.
inv(A) / inv_ex(A) -> inverse (, info).
"""
from __future__ import annotations


from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, Sample, TensorSpec, Workload
from .linalg_common import batch_of, broadcast_batch, matrix, same_dtype, square
from .linalg_factor import (_chol_factor, _cost_cube, _info, _pivots, _raise_info, check_dtype, linalg_spec,
                            operand_errors, well_conditioned)
from . import linalg_grad as G
from .linalg_grad import is_vector_rhs

__all__ = ["solve_shapes", "is_vector_rhs"]

_LEFT = Attr("left", "bool", True)


def solve_shapes(op, a, b, left, names=("A", "B"), vector=False):
    """(broadcast batch, rhs (rows, cols) as a matrix, X's shape) of A X = B / X A = B; B a vector when ``vector``."""
    n = square(op, names[0], a)
    if vector:
        batch = broadcast_batch(op, names, a, b, core=(2, 1))
        if b.shape[-1] != n:
            raise InvalidProblemError(op, names[1], f"a vector of {n} elements (A is {n}x{n})", tuple(b.shape))
        return batch, ((n, 1) if left else (1, n)), batch + (n,)
    rows, cols = matrix(op, names[1], b)
    batch = broadcast_batch(op, names, a, b)
    if (rows if left else cols) != n:
        want = f"(*, {n}, k)" if left else f"(*, k, {n})"
        raise InvalidProblemError(op, names[1], f"a right-hand side of shape {want} for a {n}x{n} A "
                                                f"(left={left})", tuple(b.shape))
    return batch, (rows, cols), batch + (rows, cols)


def _rhs_samples(make_a, attrs_list, vectors=False, a_first=True, extra_names=()):
    """(A, B) pairs: a broadcast batch, a right-side problem, an empty batch (and vector right-hand sides)."""
    def samples(rng):
        n = rng.standard_normal
        cases = [((3, 3), (3, 2), attrs_list[0]), ((2, 4, 4), (1, 4, 3), attrs_list[-1]),
                 ((1, 3, 3), (2, 3, 1), attrs_list[0])]
        for sa, sb, attrs in cases:
            if not attrs.get("left", True):
                sb = sb[:-2] + sb[:-3:-1]
            a, b = make_a(rng, sa), n(sb)
            yield Sample((a, b) if a_first else (b, a), dict(attrs), name=f"{sa}x{sb}-{attrs}", grad=sa[0] != 1)
        if vectors:   # (the gradient of a vector right-hand side: tests/linalg, through the drop-in)
            yield Sample((make_a(rng, (2, 3, 3)), n((2, 3))), {}, name="batched-vector", grad=False)
        a, b = make_a(rng, (0, 3, 3)), n((0, 3, 2))
        yield Sample((a, b) if a_first else (b, a), dict(attrs_list[0]), name="empty-batch", grad=False)
    return samples


def _solve_errors(op, names=("A", "B"), a_first=True):
    def pair(a, b):
        return (a, b) if a_first else (b, a)

    def errors():
        yield ErrorCase(pair(((3, 4), "f32"), ((3, 2), "f32")), {}, InvalidProblemError,
                        f"{op}: argument '{names[0]}': expected square matrices")
        yield ErrorCase(pair(((3, 3), "f32"), ((4, 2), "f32")), {}, InvalidProblemError,
                        f"{op}: argument '{names[1]}': expected a right-hand side")
        yield ErrorCase(pair(((2, 3, 3), "f32"), ((4, 3, 2), "f32")), {}, InvalidProblemError,
                        f"{op}: argument '{names[1]}': expected a shape broadcastable")
        yield ErrorCase(pair(((3, 3), "f32"), ((3, 2), "f64")), {}, DTypeMismatchError,
                        f"{op}: argument '{names[1]}': expected dtype f32, got f64")
        yield ErrorCase(pair(((3, 3), "f16"), ((3, 2), "f16")), {}, UnsupportedError, f"{op}: argument '.*': expected dtype")
    return errors


def _wl(op, shapes_small, shapes_big=None, attrs=None, backward=False):
    a = attrs or {}
    out = [Workload(f"{op} 65536x32x32 f32", shapes_small, DType.f32, dict(a), backward=backward)]
    if shapes_big:
        out += [Workload(f"{op} 4096^2 {dt}", shapes_big, dt, dict(a), backward=backward) for dt in (DType.f32, DType.f64)]
    return tuple(out)


def _solve_cost(d):
    """getrf (2/3 n^3) + two triangular solves (2 n^2 per right-hand column) per matrix."""
    a = d.inputs[0]
    n = a.shape[-1]
    x = d.outputs[0]
    cols = x.numel // max(n, 1)
    mats = a.numel // max(n * n, 1)
    return sum(t.nbytes for t in d.inputs) + x.nbytes, int(2 / 3 * n ** 3 * mats + 2 * n * n * cols)


# -- solve / solve_ex ------------------------------------------------------------------------------------------------
def _check_solve(op, ex):
    def check(inputs, attrs):
        check_dtype(op, inputs, 2)
        a, b = inputs
        same_dtype(op, a, B=b)
        matrix(op, "A", a)
        vec = is_vector_rhs(a, b)
        if vec and not attrs["left"]:   # torch reads the vector as a column: (n, 1) cannot be X A = B's right side
            raise InvalidProblemError(op, "B", "a matrix right-hand side (*, k, n) for left=False (a vector B is a "
                                               "column, as torch.linalg.solve reads it)", tuple(b.shape))
        _, _, xs = solve_shapes(op, a, b, attrs["left"], vector=vec)
        n = a.shape[-1]
        batch = xs[:-1] if vec else xs[:-2]
        outs = (TensorSpec(xs, a.dtype),) + ((_info(a),) if ex else ())
        return attrs, outs + (TensorSpec(batch + (n, n), a.dtype), TensorSpec(batch + (n,), DType.i32))
    return check


def _peer_solve(ex):
    """torch's function itself (what the bench times): X (, info); the LU / pivots outputs, saved for the
    backward (OpSpec.saved_outputs), are checked against the float64 reference, not against a peer."""
    def peer(a, b, left=True):
        import torch

        return tuple(torch.linalg.solve_ex(a, b, left=left)) if ex else torch.linalg.solve(a, b, left=left)
    return peer


def _dropin_solve(op, ex):
    def dropin(A, B, *, left=True, check_errors=False, out=None):
        if out is not None:
            raise UnsupportedError(op, "out= is not supported by the drop-in")
        raise_info = _raise_info(op, "solve") if check_errors else None
        return (A, B), {"left": left}, (lambda o: raise_info(o[:2]) if raise_info else o[:2])

    def plain(A, B, *, left=True, out=None):
        if out is not None:
            raise UnsupportedError(op, "out= is not supported by the drop-in")
        return (A, B), {"left": left}, (lambda o: o[0])
    return dropin if ex else plain


for _ex in (False, True):
    _n = "solve_ex" if _ex else "solve"
    linalg_spec(_n, ("A", "B"), _check_solve(_n, _ex), attrs=(_LEFT,), torch_name=f"torch.linalg.{_n}",
                torch_peer=_peer_solve(_ex), dropin=_dropin_solve(_n, _ex),
                dropin_result=(lambda o: __import__("torch").return_types.linalg_solve_ex(o)) if _ex else None,
                grad=G.g_solve, differentiable=(0, 1), saves=("out0", "out2", "out3") if _ex else ("out0", "out1", "out2"),
                saved_outputs=2,
                samples=_rhs_samples(well_conditioned, ({"left": True}, {"left": False}), vectors=True),
                errors=_solve_errors(_n),
                workloads=_wl(_n, ((65536, 32, 32), (65536, 32, 1)), ((4096, 4096), (4096, 4096)), backward=not _ex),
                cost=_solve_cost, doc="The solution of A X = B (left=False: X A = B) through LU with partial pivoting.")


# -- solve_triangular ------------------------------------------------------------------------------------------------
def _check_trsm(inputs, attrs):
    op = "solve_triangular"
    check_dtype(op, inputs, 2)
    a, b = inputs
    same_dtype(op, a, B=b)
    matrix(op, "A", a)
    _, _, xs = solve_shapes(op, a, b, attrs["left"])
    return attrs, (TensorSpec(xs, a.dtype),)


def _triangular(rng, shape):
    """Both triangles random (the op reads one), a dominant diagonal: condition number ~ 3."""
    return well_conditioned(rng, shape)


def _peer_trsm(a, b, upper, left=True, unitriangular=False):
    import torch

    return torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unitriangular)


def _dropin_trsm(A, B, *, upper, left=True, unitriangular=False, out=None):
    if out is not None:
        raise UnsupportedError("solve_triangular", "out= is not supported by the drop-in")
    return (A, B), {"upper": upper, "left": left, "unitriangular": unitriangular}


linalg_spec("solve_triangular", ("A", "B"), _check_trsm,
            attrs=(Attr("upper", "bool"), _LEFT, Attr("unitriangular", "bool", False)),
            torch_name="torch.linalg.solve_triangular", torch_peer=_peer_trsm, dropin=_dropin_trsm,
            grad=G.g_solve_triangular, differentiable=(0, 1), saves=("A", "out"),
            samples=_rhs_samples(_triangular, ({"upper": False}, {"upper": True, "left": False},
                                               {"upper": True, "unitriangular": True})),
            errors=lambda: [
             ErrorCase((((3, 4), "f32"), ((3, 2), "f32")), {"upper": True}, InvalidProblemError,
                       "solve_triangular: argument 'A': expected square matrices"),
             ErrorCase((((3, 3), "f32"), ((4, 2), "f32")), {"upper": True}, InvalidProblemError,
                       "solve_triangular: argument 'B': expected a right-hand side"),
             ErrorCase((((3, 3), "f32"), ((3, 2), "f64")), {"upper": True}, DTypeMismatchError,
                       "solve_triangular: argument 'B': expected dtype f32, got f64"),
             ErrorCase((((3, 3), "f16"), ((3, 2), "f16")), {"upper": True}, UnsupportedError,
                       "solve_triangular: argument 'A': expected dtype"),
             ErrorCase((((3, 3), "f32"), ((3, 2), "f32")), {}, InvalidProblemError, "solve_triangular.*upper")],
            workloads=_wl("solve_triangular", ((65536, 32, 32), (65536, 32, 32)), ((4096, 4096), (4096, 4096)),
                          {"upper": False}),
            cost=lambda d: (sum(t.nbytes for t in d.inputs) + d.outputs[0].nbytes,
                            d.outputs[0].numel * d.inputs[0].shape[-1]),
            doc="The solution of a triangular system (torch.linalg.solve_triangular).")


# -- cholesky_solve ----------------------------------------------------------------------------------------------------
def _check_cholsolve(inputs, attrs):
    op = "cholesky_solve"
    check_dtype(op, inputs, 2)
    b, l_ = inputs
    same_dtype(op, l_, B=b)
    matrix(op, "B", b)
    _, _, xs = solve_shapes(op, l_, b, True, names=("L", "B"))
    return attrs, (TensorSpec(xs, b.dtype),)


def _peer_cholsolve(b, l_, upper=False):
    import torch

    return torch.cholesky_solve(b, l_, upper=upper)


def _cholesky_rhs_cost(d):
    b, l_ = d.inputs
    n = l_.shape[-1]
    return sum(t.nbytes for t in d.inputs) + d.outputs[0].nbytes, 2 * n * d.outputs[0].numel


linalg_spec("cholesky_solve", ("B", "L"), _check_cholsolve, attrs=(Attr("upper", "bool", False),),
            torch_name="torch.cholesky_solve", torch_peer=_peer_cholsolve,
            dropin=lambda B, L, upper=False, *, out=None: ((B, L), {"upper": upper}),
            grad=G.g_cholesky_solve, differentiable=(0, 1), saves=("L", "out"),
            grad_is_derivative=False,   # torch's gradient of L fills both triangles (the op reads one)
            samples=_rhs_samples(_chol_factor, ({"upper": False}, {"upper": True}), a_first=False),
            errors=_solve_errors("cholesky_solve", ("L", "B"), a_first=False),
            workloads=_wl("cholesky_solve", ((65536, 32, 1), (65536, 32, 32)), ((4096, 4096), (4096, 4096))),
            cost=_cholesky_rhs_cost, doc="The solution of (L L^H) X = B from the Cholesky factor L.")


# -- lu_solve ------------------------------------------------------------------------------------------------------
def _check_pivots(op, lu, piv, name="pivots"):
    if piv.dtype != DType.i32:
        raise UnsupportedError(op, f"argument '{name}': expected dtype int32, got {piv.dtype}")
    want = batch_of(lu) + (lu.shape[-1],)
    if tuple(piv.shape) != want:
        raise InvalidProblemError(op, name, f"shape {want} (the factor's batch and n)", tuple(piv.shape))


def _check_factor_solve(op, attr_left):
    names = ("LU", "B") if op == "lu_solve" else ("LD", "B")

    def check(inputs, attrs):
        check_dtype(op, inputs, 3)
        f, piv, b = inputs
        same_dtype(op, f, B=b)
        matrix(op, names[0], f)
        square(op, names[0], f)
        _check_pivots(op, f, piv)
        _, _, xs = solve_shapes(op, f, b, attrs["left"] if attr_left else True, names=names)
        return attrs, (TensorSpec(xs, f.dtype),)
    return check


def _lu_solve_samples(rng):
    """(LU, pivots, B): a well-conditioned packed LU (unit L below, U with a dominant diagonal) and valid pivots."""
    for (sa, sb, attrs) in (((3, 3), (3, 2), {}), ((2, 4, 4), (2, 3, 4), {"left": False}),
                            ((1, 3, 3), (2, 3, 2), {"adjoint": True}), ((3, 3), (2, 3), {"left": False, "adjoint": True})):
        yield Sample((well_conditioned(rng, sa), _pivots(rng, sa[:-2], sa[-1]), rng.standard_normal(sb)), attrs,
                     name=f"{sa}x{sb}-{attrs}", grad=sa != (2, 4, 4))


def _peer_lu_solve(lu, piv, b, left=True, adjoint=False):
    import torch

    return torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint)


def _factor_errors(op, fname):
    return lambda: [
        ErrorCase((((3, 3), "f32"), ((3,), "i64"), ((3, 2), "f32")), {}, UnsupportedError, f"{op}: argument 'pivots'"),
        ErrorCase((((3, 3), "f32"), ((2,), "i32"), ((3, 2), "f32")), {}, InvalidProblemError, f"{op}: argument 'pivots'"),
        ErrorCase((((3, 4), "f32"), ((3,), "i32"), ((3, 2), "f32")), {}, InvalidProblemError,
                  f"{op}: argument '{fname}': expected square"),
        ErrorCase((((3, 3), "f32"), ((3,), "i32"), ((3, 2), "f64")), {}, DTypeMismatchError, f"{op}: argument 'B'"),
        ErrorCase((((3, 3), "f16"), ((3,), "i32"), ((3, 2), "f16")), {}, UnsupportedError, f"{op}: argument '{fname}'")]


linalg_spec("lu_solve", ("LU", "pivots", "B"), _check_factor_solve("lu_solve", True),
            attrs=(_LEFT, Attr("adjoint", "bool", False)), torch_name="torch.linalg.lu_solve", torch_peer=_peer_lu_solve,
            dropin=lambda LU, pivots, B, *, left=True, adjoint=False, out=None:
            ((LU, pivots, B), {"left": left, "adjoint": adjoint}),
            grad=G.g_lu_solve, differentiable=(0, 2), saves=("LU", "pivots", "out"),
            samples=_lu_solve_samples, errors=_factor_errors("lu_solve", "LU"),
            workloads=(Workload("lu_solve 65536x32x32 f32", ((65536, 32, 32), ((65536, 32), DType.i32), (65536, 32, 1)),
                                DType.f32),),
            doc="The solution of op(A) X = B from lu_factor's LU and pivots.")


def _ldl_solve_samples(rng):
    """(LD, pivots, B) with 1x1 blocks: a dominant diagonal D, random unit-lower L, valid interchanges."""
    for shape, herm in (((4, 4), False), ((2, 3, 3), True)):
        yield Sample((well_conditioned(rng, shape), _pivots(rng, shape[:-2], shape[-1]),
                      rng.standard_normal(shape[:-1] + (2,))), {"hermitian": herm}, name=f"{shape}-h{herm}", grad=False)


def _peer_ldl_solve(ld, piv, b, hermitian=False):
    import torch

    return torch.linalg.ldl_solve(ld, piv, b, hermitian=hermitian)


linalg_spec("ldl_solve", ("LD", "pivots", "B"), _check_factor_solve("ldl_solve", False),
            attrs=(Attr("hermitian", "bool", False),), torch_name="torch.linalg.ldl_solve", torch_peer=_peer_ldl_solve,
            dropin=lambda LD, pivots, B, *, hermitian=False, out=None: ((LD, pivots, B), {"hermitian": hermitian}),
            samples=_ldl_solve_samples, errors=_factor_errors("ldl_solve", "LD"),
            workloads=(Workload("ldl_solve 65536x32x32 f32", ((65536, 32, 32), ((65536, 32), DType.i32),
                                                              (65536, 32, 1)), DType.f32),),
            doc="The solution of A X = B from ldl_factor's LD and pivots (not differentiable, as torch).")


# -- inv / inv_ex ------------------------------------------------------------------------------------------------------
def _check_inv(op, ex):
    def check(inputs, attrs):
        check_dtype(op, inputs, 1)
        square(op, "A", inputs[0])
        a = inputs[0]
        return attrs, (TensorSpec(a.shape, a.dtype),) + ((_info(a),) if ex else ())
    return check


def _peer_inv(ex):
    def peer(a):
        import torch

        return tuple(torch.linalg.inv_ex(a)) if ex else torch.linalg.inv(a)
    return peer


def _dropin_inv(op, ex):
    def dropin(A, *, check_errors=False, out=None):
        if out is not None:
            raise UnsupportedError(op, "out= is not supported by the drop-in")
        return (A,), {}, (_raise_info(op, "inv") if check_errors else None)

    def plain(A, *, out=None):
        return dropin(A, out=out)[:2]
    return dropin if ex else plain


def _inv_samples(rng):
    for shape in ((3, 3), (2, 4, 4)):
        yield Sample((well_conditioned(rng, shape),), {}, name=f"{shape}")
    yield Sample((well_conditioned(rng, (0, 3, 3)),), {}, name="empty-batch", grad=False)


for _ex in (False, True):
    _n = "inv_ex" if _ex else "inv"
    linalg_spec(_n, ("A",), _check_inv(_n, _ex), attrs=(), torch_name=f"torch.linalg.{_n}",
                torch_peer=_peer_inv(_ex), dropin=_dropin_inv(_n, _ex),   # (torch.inverse: a twin, torch/_linalg_twins.py)
                dropin_result=(lambda o: __import__("torch").return_types.linalg_inv_ex(o)) if _ex else None,
                grad=G.g_inv, differentiable=(0,), saves=("out0",) if _ex else ("out",),
                samples=_inv_samples, errors=operand_errors(_n),
                workloads=_wl(_n, ((65536, 32, 32),), ((4096, 4096),)), cost=_cost_cube(2.0),
                doc="The inverse of square matrices (LU with partial pivoting, then a solve with the identity).")
