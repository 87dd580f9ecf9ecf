"""Matrix functions, norms and least squares (issue 19): matrix_norm, cond, matrix_rank, pinv, matrix_exp,
matrix_power, vander, cross, vecdot, lstsq, and their backward ops.  torch.linalg's semantics, batched over the
leading dims, f32/f64/c64/c128 (real outputs of complex inputs where torch's are real).

matrix_norm(A, ord='fro', dim=(-2, -1), keepdim)   ord in 'fro', 'nuc', inf, -inf, 1, -1, 2, -2 (torch's errors for
    an empty matrix under a min-type ord); torch.linalg.norm publishes through it and vector_norm (torch/_aliases.py)
cond(A, p=None)         p None / 2 / -2: ratio of extreme singular values (any shape); else norm(A) norm(A^-1),
    inf for a singular A (square only)
matrix_rank(A, atol, rtol, hermitian) / pinv(A, atol, rtol, hermitian)   cutoff max(atol, rtol * s_max), s > cutoff
    kept; rtol's default eps * max(m, n) when atol is None or 0 (torch's); hermitian: eigh of the lower triangle
matrix_exp(A)           scaling and squaring (the GPU: a Taylor polynomial; the reference: Pade [13/13])
matrix_power(A, n)      binary powering; n < 0 through the inverse (the GPU: QR + a triangular inverse)
vander(x, N)            (..., n) -> (..., n, N): x^0 ... x^(N-1) (torch.linalg.vander)
cross(x, y, dim=-1)     torch.linalg.cross (broadcast); torch.cross (dim=None: the first dim of size 3) is a twin
vecdot(x, y, dim=-1)    sum(conj(x) * y, dim) (broadcast)
lstsq(A, B, rcond, driver) -> (solution, residuals, rank, singular_values): torch's per-driver outputs: rank for
    every driver but 'gels', singular_values for 'gelsd' / 'gelss', residuals (the squared column norms of A X - B)
    when m > n and the driver is not 'gelsy' -- torch returns them only where every matrix has full rank (the
    drop-in empties them otherwise: a host read of rank).  driver=None is 'gelsy' (torch's CPU default; torch's CUDA
    takes only 'gels', the GPU path here takes all four).

Backward (each a fused op with torch's formula): matrix_norm_backward(A, out, grad), cond_backward(A, out, grad),
pinv_backward(A, P, grad) (torch's pinv_backward), matrix_exp_backward(A, grad) (exp of [[A^H, G], [0, A^H]], its
upper-right block), matrix_power_backward(A, grad, n), vander_backward(x, grad, N), lstsq_backward(A, B, grad)
-> (gA, gB) through X = pinv(A) B (only the solution is differentiable, as torch).  cross and vecdot compose
cross / mul / conj.  matrix_rank is not differentiable.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, Workload
from .linalg_common import LINALG_DTYPES, batch_of, broadcast_batch, matrix, same_dtype, square
from .linalg_spectral import linalg_operands, no_out, real_of, register_linalg, ts

__all__ = ["NORM_ORDS", "COND_PS", "INT_DTYPES"]

INF = math.inf
NORM_ORDS = ("fro", "nuc", INF, -INF, 1.0, -1.0, 2.0, -2.0)
COND_PS = (None,) + NORM_ORDS
LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")
INT_DTYPES = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)    # cross and vander take integers, as torch


def _ord_attr(name, default, allowed):
    def normalize(op, v, inputs, attrs):
        if isinstance(v, str):
            ok = v in allowed
        else:
            ok = not isinstance(v, bool) and isinstance(v, (int, float, np.number)) and float(v) in allowed
            v = float(v) if ok else v
        if not ok:
            raise InvalidProblemError(op, name, "one of " + ", ".join(map(repr, (a for a in allowed if a is not None))), repr(v))
        return v
    return Attr(name, "any", default, optional=default is None, normalize=normalize)


def _dims(op, attrs, a):
    dim = tuple(attrs["dim"])
    r = len(a.shape)
    if len(dim) != 2 or any(not -r <= x < r for x in dim) or dim[0] % max(r, 1) == dim[1] % max(r, 1):
        raise InvalidProblemError(op, "dim", f"two distinct dims of the {r}-d input", repr(attrs["dim"]))
    return tuple(x % r for x in dim)


# -- forward checks --------------------------------------------------------------------------------------------
def _check_matrix_norm(inputs, attrs):
    op = "matrix_norm"
    (a,) = linalg_operands(op, inputs, ("A",))
    matrix(op, "A", a)
    dim = _dims(op, attrs, a)
    ord_ = attrs["ord"]
    m, n = a.shape[dim[0]], a.shape[dim[1]]
    empty = {-2.0: m == 0 or n == 0, -1.0: n == 0, -INF: m == 0}.get(ord_, False)
    if empty:
        raise InvalidProblemError(op, "A", f"a non-empty reduced dim for ord={ord_!r} (the min over it)", f"shape {a.shape}")
    shape = tuple(1 if i in dim else s for i, s in enumerate(a.shape)) if attrs["keepdim"] else \
        tuple(s for i, s in enumerate(a.shape) if i not in dim)
    return dict(attrs, dim=dim), (ts(shape, real_of(a.dtype)),)


def _check_cond(inputs, attrs):
    op = "cond"
    (a,) = linalg_operands(op, inputs, ("A",))
    m, n = matrix(op, "A", a)
    if attrs["p"] not in (None, 2.0, -2.0):
        square(op, "A", a)
    if m == 0 or n == 0:
        raise InvalidProblemError(op, "A", "non-empty matrices", f"shape {a.shape}")
    return attrs, (ts(batch_of(a), real_of(a.dtype)),)


def _check_pinv(op):
    def check(inputs, attrs):
        (a,) = linalg_operands(op, inputs, ("A",))
        m, n = matrix(op, "A", a)
        if attrs["hermitian"]:
            square(op, "A", a)
        return attrs, (ts(batch_of(a), DType.i64) if op == "matrix_rank" else ts(batch_of(a) + (n, m), a.dtype),)
    return check


def _check_square_same(op):
    def check(inputs, attrs):
        (a,) = linalg_operands(op, inputs, ("A",))
        square(op, "A", a)
        return attrs, (ts(a.shape, a.dtype),)
    return check


def _check_vander(inputs, attrs):
    op = "vander"
    (x,) = linalg_operands(op, inputs, ("x",), LINALG_DTYPES + INT_DTYPES)
    shape = tuple(x.shape) or (1,)          # a 0-d x is one point (torch's)
    n = attrs["N"] if attrs["N"] is not None else shape[-1]
    if n <= 1:
        raise InvalidProblemError(op, "N", "N > 1 (torch's bound; N defaults to x.shape[-1])", repr(n))
    # (integers: int64, torch's cumprod promotion)
    return dict(attrs, N=n), (ts(shape + (n,), DType.i64 if x.dtype in INT_DTYPES else x.dtype),)


def _check_pair(op):
    def check(inputs, attrs):
        x, y = linalg_operands(op, inputs, ("x", "y"), LINALG_DTYPES + INT_DTYPES if op == "cross" else LINALG_DTYPES)
        same_dtype(op, x, y=y)
        if op == "cross" and len(x.shape) != len(y.shape):   # torch.linalg.cross broadcasts equal ranks only
            raise InvalidProblemError(op, "y", f"{len(x.shape)} dims (as many as x)", f"shape {y.shape}")
        shape = broadcast_batch(op, ("x", "y"), x, y, core=(0, 0))
        dim = attrs["dim"]
        if not -len(shape) <= dim < len(shape):
            raise InvalidProblemError(op, "dim", f"a dim of the {len(shape)}-d broadcast shape", repr(dim))
        dim %= len(shape)
        for name, t in (("x", x), ("y", y)):
            k = dim - (len(shape) - len(t.shape))
            if op == "cross" and (k < 0 or t.shape[k] != 3):
                raise InvalidProblemError(op, name, f"size 3 along dim {attrs['dim']}", f"shape {t.shape}")
        if op == "cross":
            return dict(attrs, dim=dim), (ts(shape, x.dtype),)
        return dict(attrs, dim=dim), (ts(shape[:dim] + shape[dim + 1:], x.dtype),)
    return check


def _lstsq_shapes(a, b, driver):
    m, n = a.shape[-2:]
    batch = broadcast_batch("lstsq", ("A", "B"), a, b)
    k = b.shape[-1]
    rdt = real_of(a.dtype)
    res = batch + (k,) if m > n and driver != "gelsy" else (0,)
    rank = batch if driver != "gels" else (0,)
    sv = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return (ts(batch + (n, k), a.dtype), ts(res, rdt), ts(rank, DType.i64), ts(sv, rdt))


def _check_lstsq(inputs, attrs):
    op = "lstsq"
    a, b = linalg_operands(op, inputs, ("A", "B"))
    m, n = matrix(op, "A", a)
    matrix(op, "B", b)
    same_dtype(op, a, B=b)
    if b.shape[-2] != m:
        raise InvalidProblemError(op, "B", f"(*, {m}, k): as many rows as A", f"shape {b.shape}")
    return attrs, _lstsq_shapes(a, b, attrs["driver"])


# -- backward checks -------------------------------------------------------------------------------------------
def _check_bw(op, names, outs, against):
    """A backward op's operands: the forward's inputs, then its saved output and / or output gradients, each checked
    against the forward's output ``against[i]`` by the forward's own rule; the results are shaped like the operands
    at ``outs``."""
    forward = op[:-len("_backward")]
    n_in = 2 if forward == "lstsq" else 1

    def check(inputs, attrs):
        xs = linalg_operands(op, inputs, names)
        if n_in == 2:
            same_dtype(op, xs[0], B=xs[1])
        attrs, fouts = _FORWARD_CHECKS[forward](tuple(xs[:n_in]), dict(attrs))
        for name, t, j in zip(names[n_in:], xs[n_in:], against):
            want = fouts[j]
            if tuple(t.shape) != tuple(want.shape) or t.dtype != want.dtype:
                raise InvalidProblemError(op, name, f"shape {tuple(want.shape)} dtype {want.dtype} (the forward's output)",
                                          f"shape {t.shape} dtype {t.dtype}")
        return attrs, tuple(ts(xs[i].shape, xs[i].dtype) for i in outs)
    return check


# -- backward rules --------------------------------------------------------------------------------------------
def _fused_rule(bw, with_out):
    def rule(ctx, d, grads, s):
        dt = d.inputs[0].dtype
        if grads[0] is None or not (dt.is_floating or dt.is_complex):   # integer inputs (vander): no gradient
            return (None,) * len(d.inputs)
        saved = [s[n] for n in d.spec.arg_names] + ([s["out"]] if with_out else [])
        res = ctx.op(bw, *saved, grads[0], **d.attr_dict)
        return res if isinstance(res, tuple) else (res,)
    return rule


def _g_lstsq(ctx, d, grads, s):
    """The solution's and the residuals' gradients (singular_values and rank are constants, as torch's)."""
    if grads[0] is None and grads[1] is None:
        return (None, None)
    if d.inputs[0].shape[:-2] != d.inputs[1].shape[:-2]:
        raise UnsupportedError("lstsq", "the gradient of A and B with broadcast batch dims (give both the same batch)")
    gx, gr = (g if g is not None else ctx.op("zeros", shape=tuple(t.shape), dtype=t.dtype)
              for g, t in zip(grads[:2], d.outputs[:2]))
    return ctx.op("lstsq_backward", s["A"], s["B"], gx, gr, rcond=d.attr("rcond"), driver=d.attr("driver"))


def _g_cross(ctx, d, grads, s):
    (g,) = grads
    if g is None or not (d.inputs[0].dtype.is_floating or d.inputs[0].dtype.is_complex):   # integer cross: none
        return (None, None)
    x, y = s["x"], s["y"]
    cplx = d.inputs[0].dtype.is_complex
    conj = (lambda t: ctx.op("conj", t)) if cplx else (lambda t: t)
    dim = d.attr("dim")
    gx = ctx.op("cross", conj(y), g, dim=dim) if ctx.needs[0] else None
    gy = ctx.op("cross", g, conj(x), dim=dim) if ctx.needs[1] else None
    return (None if gx is None else ctx.reduce_to(gx, d.inputs[0].shape),
            None if gy is None else ctx.reduce_to(gy, d.inputs[1].shape))


def _g_vecdot(ctx, d, grads, s):
    (g,) = grads
    dim = d.attr("dim")
    shape = tuple(d.outputs[0].shape)
    gk = ctx.reshape(g, shape[:dim] + (1,) + shape[dim:])
    cplx = d.inputs[0].dtype.is_complex
    gx = ctx.op("mul", s["y"], ctx.op("conj", gk) if cplx else gk) if ctx.needs[0] else None
    gy = ctx.op("mul", s["x"], gk) if ctx.needs[1] else None
    return (None if gx is None else ctx.reduce_to(gx, d.inputs[0].shape),
            None if gy is None else ctx.reduce_to(gy, d.inputs[1].shape))


# -- drop-ins --------------------------------------------------------------------------------------------------
def _number(op, name, v):
    """A tolerance: a Python number, or a one-element tensor (read to the host); a tensor of per-matrix values is
    refused (the tolerance is an attribute)."""
    if getattr(v, "numel", None) is not None and v.numel() == 1 and not v.dtype.is_complex:
        return float(v.item())
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise UnsupportedError(op, f"argument '{name}' as a {type(v).__name__} of shape {tuple(getattr(v, 'shape', ()))} "
                                   "(a Python number, a one-element tensor or None is supported)")
    return None if v is None else float(v)


def _dropin_matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    no_out("matrix_norm", out)
    if dtype is not None:
        raise UnsupportedError("matrix_norm", "argument 'dtype' (cast the input first)")
    return (A,), {"ord": ord, "dim": tuple(dim), "keepdim": bool(keepdim)}


def _dropin_cond(A, p=None, *, out=None):
    no_out("cond", out)
    return (A,), {"p": p}


def _dropin_tol(op):
    def dropin(A, *, atol=None, rtol=None, hermitian=False, out=None):
        no_out(op, out)
        return (A,), {"atol": _number(op, "atol", atol), "rtol": _number(op, "rtol", rtol), "hermitian": bool(hermitian)}
    return dropin


def _dropin_matrix_exp(A):
    return (A,), {}


def _dropin_matrix_power(A, n, *, out=None):
    no_out("matrix_power", out)
    return (A,), {"n": n}


def _dropin_vander(x, *, N=None):
    return (x,), {"N": N}


def _dropin_pair(op):
    def dropin(x, y, *, dim=-1, out=None):
        no_out(op, out)
        return (x, y), {"dim": dim}
    dropin.__name__ = op
    return dropin


def _dropin_lstsq(A, B, rcond=None, *, driver=None):
    if driver is None:   # torch's default per device: 'gelsy' on the CPU, 'gels' (the only one) on CUDA
        driver = "gels" if getattr(A, "is_cuda", False) else "gelsy"
    attrs = {"rcond": _number("lstsq", "rcond", rcond), "driver": driver}
    full_rank_only = driver in ("gelsd", "gelss")

    def finish(outs):
        import torch

        x, res, rank, sv = outs
        if full_rank_only and res.numel() and bool((rank < A.shape[-1]).any()):
            res = torch.empty((0,), dtype=res.dtype, device=res.device)   # torch: residuals of full-rank A only
        return torch.return_types.linalg_lstsq((x, res, rank, sv))
    return (A, B), attrs, finish


# -- torch peers -----------------------------------------------------------------------------------------------
def _peer(name):
    def peer(*xs, **attrs):
        import torch

        return getattr(torch.linalg, name)(*xs, **attrs)
    return peer


def _peer_lstsq(a, b, rcond=None, driver=None):
    import torch

    return tuple(torch.linalg.lstsq(a, b, rcond=rcond, driver=driver))


# -- samples ---------------------------------------------------------------------------------------------------
def _well(rng, shape):
    """A random matrix with its diagonal pushed away from 0 (well-conditioned for inverses / powers)."""
    a = rng.standard_normal(shape)
    if shape[-1] == shape[-2]:
        a = a + 3 * np.eye(shape[-1])
    return a


def _norm_samples(rng):
    for i, o in enumerate(NORM_ORDS):
        shape = ((2, 3, 4), (3, 3), (4, 2))[i % 3]
        yield Sample((rng.standard_normal(shape),), {"ord": o}, name=f"{o}")
    yield Sample((rng.standard_normal((2, 3, 2)),), {"ord": 1.0, "dim": (0, 2), "keepdim": True}, name="dims-keep")
    yield Sample((rng.standard_normal((0, 3)),), {"ord": "fro"}, name="empty", grad=False)


def _cond_samples(rng):
    # (torch 2.13 cannot differentiate the norm-based p: its inverse is modified in place; finite differences of
    # those are in tests/linalg/test_misc.py)
    for p, shape in ((None, (2, 3, 4)), (-2.0, (3, 3)), ("fro", (3, 3)), (1.0, (2, 3, 3))):
        yield Sample((_well(rng, shape),), {"p": p}, name=f"{p}-{shape}", grad=p in (None, 2.0, -2.0))


def _tol_samples(op):
    def samples(rng):
        def with_singular_values(m, n, s):
            u = np.linalg.qr(rng.standard_normal((m, len(s))))[0]
            v = np.linalg.qr(rng.standard_normal((n, len(s))))[0]
            return (u * np.asarray(s)) @ v.T
        yield Sample((rng.standard_normal((3, 4)),), {}, name="4x3")
        # rank 2 (the third singular value rounds to ~1e-7 in f32: atol 1e-3 cuts it on every dtype)
        yield Sample((with_singular_values(4, 3, [2.0, 1.0]),), {"atol": 1e-3}, name="rank2", grad=False)
        sym = rng.standard_normal((3, 3))
        # (hermitian: torch's gradient is not folded onto the lower triangle the forward reads, as eigh's: checked
        # against torch in tests/linalg/test_misc.py, not by finite differences)
        yield Sample((sym + sym.T,), {"hermitian": True}, name="hermitian", grad=False)
        yield Sample((with_singular_values(2, 4, [3.0, 0.5]),), {"rtol": 0.3}, name="rtol-cuts", grad=False)
    return samples


def _sq_samples(attrs_list):
    def samples(rng):
        for shape, attrs in attrs_list:
            yield Sample((0.5 * rng.standard_normal(shape) if "n" not in attrs else _well(rng, shape) / 3,), attrs,
                         name=f"{shape}-{attrs}")
    return samples


def _vander_samples(rng):
    yield Sample((rng.standard_normal((4,)),), {}, name="4")
    yield Sample((np.asarray(rng.standard_normal()),), {"N": 3}, name="0-d", grad=False)
    yield Sample((rng.standard_normal((2, 3)),), {"N": 5}, name="N5")


def _pair_samples(op):
    def samples(rng):
        if op == "cross":
            yield Sample((rng.standard_normal((2, 3)), rng.standard_normal((2, 3))), {}, name="rows")
            # (broadcast gradients of complex inputs need a complex sum, which baracuda's sum lacks: real checks only)
            yield Sample((rng.standard_normal((1, 3, 2)), rng.standard_normal((2, 3, 1))), {"dim": -2}, name="bcast-dim",
                         grad=False)
        else:
            yield Sample((rng.standard_normal((2, 4)), rng.standard_normal((2, 4))), {}, name="rows")
            yield Sample((rng.standard_normal((3, 2)), rng.standard_normal((2, 3, 2))), {"dim": 1}, name="bcast-dim",
                         grad=False)
    return samples


def _lstsq_samples(rng):
    # singular_values are constants for the gradient (torch's): only the drivers without them check gradients
    for shape, k, driver in (((5, 3), 2, "gels"), ((3, 5), 2, "gelsy"), ((2, 4, 3), 1, "gelsd"), ((4, 4), 2, "gelss")):
        yield Sample((rng.standard_normal(shape), rng.standard_normal(shape[:-1] + (k,))), {"driver": driver},
                     name=f"{shape}-{driver}", grad=driver in ("gels", "gelsy"))


def _bw_samples(forward, n_extra):
    """(x, [the forward's output], grad): the forward's reference output on a sample's input, a random grad."""
    def samples(rng):
        from .._core.oracle import reference_f64
        from .._core.spec import Descriptor

        for smp in list(_SPECS[forward].samples(rng))[:3]:
            if not smp.grad:
                continue
            d = Descriptor.make(forward, *[(np.shape(x), "f64") for x in smp.inputs], **smp.attrs)
            outs = reference_f64(d, smp.inputs)
            gs = tuple(rng.standard_normal(tuple(o.shape)) for o in d.outputs[:2 if forward == "lstsq" else 1])
            yield Sample(tuple(smp.inputs) + tuple(outs[:n_extra]) + gs, smp.attrs, name=smp.name, grad=False)
    return samples


# -- errors, workloads, cost -----------------------------------------------------------------------------------
def _errors(op, shape=(3, 3), arity=1, ints=True):
    def errors():
        f = ((shape, "f32"),) * arity
        req = {"n": 2} if op == "matrix_power" else {}
        yield ErrorCase(((shape, "f16"),) * arity, req, UnsupportedError, rf"{op}: argument '\w+' has dtype f16", "half")
        if ints:
            yield ErrorCase(((shape, "i32"),) * arity, req, UnsupportedError, rf"{op}: argument '\w+' has dtype i32", "int")
        if op == "matrix_norm":
            yield ErrorCase(f, {"ord": 3}, InvalidProblemError, r"matrix_norm: argument 'ord'", "ord")
            yield ErrorCase(f, {"dim": (0, 0)}, InvalidProblemError, r"matrix_norm: argument 'dim'", "dims")
            yield ErrorCase((((3, 0), "f32"),), {"ord": -1.0}, InvalidProblemError, r"matrix_norm: argument 'A'", "empty-min")
        if op in ("matrix_exp", "matrix_power") or op == "cond":
            yield ErrorCase((((3, 4), "f32"),), {"p": 1.0} if op == "cond" else ({"n": 2} if op == "matrix_power" else {}),
                            InvalidProblemError, rf"{op}: argument 'A': expected square", "rect")
        if op in ("cross", "vecdot"):
            yield ErrorCase((((2, 3), "f32"), ((2, 3), "f64")), {}, Exception, rf"{op}: argument 'y'", "mixed")
        if op == "cross":
            yield ErrorCase((((2, 4), "f32"), ((2, 4), "f32")), {}, InvalidProblemError, r"cross: argument 'x'", "size4")
        if op == "lstsq":
            yield ErrorCase((((4, 3), "f32"), ((3, 2), "f32")), {}, InvalidProblemError, r"lstsq: argument 'B'", "rows")
            yield ErrorCase((((4, 3), "f32"), ((4, 2), "f32")), {"driver": "gesv"}, InvalidProblemError,
                            r"lstsq: argument 'driver'", "driver")
    return errors


def _cost(factor):
    def cost(desc):
        a = desc.inputs[0]
        n = a.shape[-1] if a.shape else 1
        batch = a.numel // max(n * n, 1)
        return (sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), int(factor * batch * n ** 3))
    return cost


def _workloads(op, attrs=None, backward=True):
    shapes = {"matrix_exp": (1024, 1024), "matrix_power": (1024, 1024), "pinv": (2048, 1024),
              "matrix_norm": (4096, 4096), "cond": (2048, 2048), "lstsq": (4096, 1024)}
    if op == "lstsq":
        return (Workload("lstsq-[4096,1024]x[4096,64]-f32", ((4096, 1024), (4096, 64)), DType.f32, attrs or {},
                         backward=True),)
    if op not in shapes:
        return ()
    dims = ",".join(map(str, shapes.get(op, ())))
    return tuple(Workload(f"{op}-[{dims}]-{dt}", (shapes[op],), dt, attrs or {}, backward=backward)
                 for dt in (DType.f32, DType.f64)) + (
        (Workload(f"{op}-[4096,32,32]-f32", ((4096, 32, 32),), DType.f32, attrs or {}, backward=backward),)
        if op in ("matrix_exp", "matrix_power") else ())


_SPECS: dict[str, OpSpec] = {}
_FORWARD_CHECKS: dict = {}


def _reg(**kw):
    register_linalg(_SPECS, **kw)
    _FORWARD_CHECKS[kw["name"]] = kw["check"]


def _reg_bw(forward, names, outs=(0,), against=(0, 0), **kw):
    op = forward + "_backward"
    _reg(name=op, arg_names=names, check=_check_bw(op, names, outs, against), attrs=_SPECS[forward].attrs,
         torch_name=f"torch autograd rule of linalg.{forward}", samples=_bw_samples(forward, sum(not n.startswith("grad") for n in names) - 1 - (forward == "lstsq")),
         errors=_bw_errors(op, len(names)), cost=_SPECS[forward].cost, **kw)


def _bw_errors(op, arity):
    def errors():
        yield ErrorCase((((3, 3), "i32"),) * arity, {"n": 2} if op.startswith("matrix_power") else {}, UnsupportedError,
                        rf"{op}: argument", "int")
    return errors


_TOL = (Attr("atol", "float", None, optional=True), Attr("rtol", "float", None, optional=True),
        Attr("hermitian", "bool", False))

_reg(name="matrix_norm", arg_names=("A",), check=_check_matrix_norm,
     attrs=(_ord_attr("ord", "fro", NORM_ORDS), Attr("dim", "ints", (-2, -1)), Attr("keepdim", "bool", False)),
     torch_name="torch.linalg.matrix_norm", torch_peer=_peer("matrix_norm"), dropin=_dropin_matrix_norm,
     grad=_fused_rule("matrix_norm_backward", True), saves=("inputs", "outputs"), differentiable=(0,),
     samples=_norm_samples, errors=_errors("matrix_norm"), workloads=_workloads("matrix_norm", {"ord": 2.0}),
     cost=_cost(4), doc="Matrix norms over two dims; 'nuc' / 2 / -2 through the singular values.")
_reg(name="cond", arg_names=("A",), check=_check_cond, attrs=(_ord_attr("p", None, COND_PS),),
     torch_name="torch.linalg.cond", torch_peer=_peer("cond"), dropin=_dropin_cond,
     grad=_fused_rule("cond_backward", True), saves=("inputs", "outputs"), differentiable=(0,),
     samples=_cond_samples, errors=_errors("cond"), workloads=_workloads("cond"), cost=_cost(12),
     doc="The condition number in the p-norm (None / 2 / -2: singular values; else norm(A) * norm(inv(A))).")
_reg(name="pinv", arg_names=("A",), check=_check_pinv("pinv"), attrs=_TOL, torch_name="torch.linalg.pinv",
     torch_peer=_peer("pinv"), dropin=_dropin_tol("pinv"), grad=_fused_rule("pinv_backward", True),
     saves=("inputs", "outputs"), differentiable=(0,), samples=_tol_samples("pinv"), errors=_errors("pinv"),
     workloads=_workloads("pinv"), cost=_cost(14), doc="Moore-Penrose pseudo-inverse through the SVD (or eigh).")
_reg(name="matrix_rank", arg_names=("A",), check=_check_pinv("matrix_rank"), attrs=_TOL,
     torch_name="torch.linalg.matrix_rank", torch_peer=_peer("matrix_rank"), dropin=_dropin_tol("matrix_rank"),
     samples=_tol_samples("matrix_rank"), errors=_errors("matrix_rank"), cost=_cost(4),
     doc="The number of singular values (|eigenvalues|) above the cutoff (int64).")
_reg(name="matrix_exp", arg_names=("A",), check=_check_square_same("matrix_exp"), torch_name="torch.linalg.matrix_exp",
     torch_peer=_peer("matrix_exp"), dropin=_dropin_matrix_exp,
     grad=_fused_rule("matrix_exp_backward", False), saves=("inputs",), differentiable=(0,),
     samples=_sq_samples((((3, 3), {}), ((2, 4, 4), {}), ((1, 1), {}))), errors=_errors("matrix_exp"),
     workloads=_workloads("matrix_exp"), cost=_cost(20), doc="exp(A) by scaling and squaring.")
_reg(name="matrix_power", arg_names=("A",), check=_check_square_same("matrix_power"),
     attrs=(Attr("n", "int"),), torch_name="torch.linalg.matrix_power", torch_aliases=("torch.matrix_power",),
     torch_peer=_peer("matrix_power"), dropin=_dropin_matrix_power, grad=_fused_rule("matrix_power_backward", False),
     saves=("inputs",), differentiable=(0,),
     samples=_sq_samples((((3, 3), {"n": 3}), ((2, 3, 3), {"n": -2}), ((3, 3), {"n": 0}), ((2, 2), {"n": 1}))),
     errors=_errors("matrix_power"), workloads=_workloads("matrix_power", {"n": 5}), cost=_cost(6),
     doc="A^n by binary powering; n < 0 through inv(A); n = 0 the identity.")
_reg(name="vander", arg_names=("x",), check=_check_vander, dtypes=LINALG_DTYPES + INT_DTYPES, attrs=(Attr("N", "int", None, optional=True),),
     torch_name="torch.linalg.vander", torch_peer=_peer("vander"), dropin=_dropin_vander,
     grad=_fused_rule("vander_backward", False), saves=("inputs",), differentiable=(0,), samples=_vander_samples,
     errors=_errors("vander", (3,), ints=False), cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, d.outputs[0].numel),
     doc="The Vandermonde matrix x^0 ... x^(N-1) (increasing powers, torch.linalg's).")
for _op in ("cross", "vecdot"):
    _reg(name=_op, arg_names=("x", "y"), check=_check_pair(_op), attrs=(Attr("dim", "int", -1),),
         dtypes=LINALG_DTYPES + INT_DTYPES if _op == "cross" else LINALG_DTYPES,
         torch_name=f"torch.linalg.{_op}", torch_peer=_peer(_op), dropin=_dropin_pair(_op),
         grad=_g_cross if _op == "cross" else _g_vecdot, differentiable=(0, 1), samples=_pair_samples(_op),
         errors=_errors(_op, (2, 3), 2, ints=_op != "cross"), category="elementwise" if _op == "cross" else "reduction",
         cost=lambda d: (sum(t.nbytes for t in d.inputs) + d.outputs[0].nbytes, 2 * d.outputs[0].numel),
         doc="The 3-vector cross product along dim." if _op == "cross" else "sum(conj(x) * y) along dim.")
_reg(name="lstsq", arg_names=("A", "B"), check=_check_lstsq,
     attrs=(Attr("rcond", "float", None, optional=True), Attr("driver", "str", "gelsy", choices=LSTSQ_DRIVERS,
                                                              none_default=True)),
     torch_name="torch.linalg.lstsq", torch_peer=_peer_lstsq, dropin=_dropin_lstsq, grad=_g_lstsq,
     saves=("inputs",), differentiable=(0, 1), samples=_lstsq_samples, errors=_errors("lstsq", (4, 3), 2),
     workloads=_workloads("lstsq", {"driver": "gels"}), cost=_cost(6),
     doc="Least squares / minimum norm: (solution, residuals, rank, singular_values), torch's per-driver outputs.")

_reg_bw("matrix_norm", ("A", "out", "grad"))
_reg_bw("cond", ("A", "out", "grad"))
_reg_bw("pinv", ("A", "P", "grad"))
_reg_bw("matrix_exp", ("A", "grad"))
_reg_bw("matrix_power", ("A", "grad"))
_reg_bw("vander", ("x", "grad"))
_reg_bw("lstsq", ("A", "B", "grad", "grad_residuals"), outs=(0, 1), against=(0, 1))

declare_rule_ops(__name__, "zeros", "conj", "cond_backward", "cross", "lstsq_backward", "matrix_exp_backward",
                 "matrix_norm_backward", "matrix_power_backward", "mul", "pinv_backward", "vander_backward")
