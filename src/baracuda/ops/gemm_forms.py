"""GEMM forms, part 2: the add-forms ``addmm``, ``addmv``, ``addr``, ``baddbmm``, ``addbmm`` (``beta * input + alpha *
product``), the vector products ``mv``, ``dot``, ``vdot`` and ``kron``.

Add-forms follow torch exactly:

* ``input`` broadcasts to the product's shape (it may have fewer dimensions, as torch's ``expand``);
* ``beta == 0`` ignores ``input``: NaN and inf there do not reach the result (torch's documented rule), and its
  gradient is ``0 * grad``;
* ``beta`` / ``alpha`` are real numbers: a bool is 0 or 1, as torch takes it for floating inputs (except addr, where
  torch refuses a bool unless the tensors are bool); a complex value is refused (the family has no complex dtypes);
* ``alpha == 0`` follows IEEE arithmetic (``0 * inf = nan``): torch's CPU kernels skip the product for addmm /
  addmv / addbmm but not for addr / baddbmm, and it documents neither;
* a zero-size contraction (K = 0, or no batches for addbmm) gives ``beta * input``.

Dtypes: the GEMM family's (``GEMM_TYPES``: f64, f32, f16, bf16 and the integers i64, i32, i16, i8, u8, exact in
wrapping arithmetic as torch's CPU kernels, see ops/gemm.py), one dtype for every operand; ``addr`` and ``kron`` also
take bool (torch's: logical and / or).  With integer or bool tensors beta / alpha are converted as torch converts
them (``scalar_for``: a float truncated toward zero, out of the dtype's range an error), except that ``addr`` refuses
a float there and a bool unless the tensors are bool, as torch.addr does.  Complex operands are refused (so ``vdot``
is ``dot``: conjugation is the identity on real numbers).  The drop-ins refuse ``out=`` (UnsupportedError, as the
other GEMM drop-ins: ``bt.mode()`` hands such calls to torch; a Plan runs with ``out=``).

Backward rules compose the GEMM family's own gradients (``gemm_grads``: mm / matmul / bmm with transpose flags,
never a materialized transpose) and honour ``ctx.needs``: a frozen weight or bias costs no GEMM and no sum
(HF GPT-2's Conv1D is ``torch.addmm(bias, x, weight)``).  ``alpha`` scales the output gradient once (no pass
when it is 1), ``beta`` the input's reduced gradient.  ``kron``'s gradients are contractions of the output
gradient (viewed with the operands' axes interleaved) with the other operand (``einsum``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .gemm import (GEMM_TYPES, _grad_tol, _io_bytes, _n, _no_out, _tol, check_operands, float_grads, gemm_grads,
                   pair_dropin, scalar_for, torch_fn)
from .gemm_einsum import LABELS, grad_contraction, make_contraction

__all__ = ["ADD_FORMS", "AddForm", "add_form_shape", "kron_shapes"]


# -- add-forms ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AddForm:
    op: str
    names: tuple[str, str, str]     # torch's argument names
    ranks: tuple[int, int]          # of the two product operands
    product: str                    # the product's GEMM op for the gradients (addr: an outer product as mm)
    what: tuple[str, str]           # "a matrix" / "a vector" / "a 3-D tensor": the operands' error texts


ADD_FORMS = {
    "addmm": AddForm("addmm", ("input", "mat1", "mat2"), (2, 2), "mm", ("a matrix", "a matrix")),
    "addmv": AddForm("addmv", ("input", "mat", "vec"), (2, 1), "matmul", ("a matrix", "a 1-D vector")),
    "addr": AddForm("addr", ("input", "vec1", "vec2"), (1, 1), "mm", ("a 1-D vector", "a 1-D vector")),
    "baddbmm": AddForm("baddbmm", ("input", "batch1", "batch2"), (3, 3), "bmm", ("a 3-D tensor", "a 3-D tensor")),
    "addbmm": AddForm("addbmm", ("input", "batch1", "batch2"), (3, 3), "matmul", ("a 3-D tensor", "a 3-D tensor")),
}


def add_form_shape(op: str, a: tuple, b: tuple) -> tuple[int, ...]:
    """The product's shape (what ``input`` broadcasts to), after checking the two product operands."""
    f = ADD_FORMS[op]
    for name, s, r, what in zip(f.names[1:], (a, b), f.ranks, f.what):
        if len(s) != r:
            raise InvalidProblemError(op, name, what, f"shape {tuple(s)}")
    if op == "addr":
        return (a[0], b[0])
    if op in ("baddbmm", "addbmm") and a[0] != b[0]:
        raise InvalidProblemError(op, f.names[2], f"{a[0]} batches (as '{f.names[1]}')", f"shape {tuple(b)}")
    if a[-1] != b[-2 if len(b) > 1 else 0]:
        raise InvalidProblemError(op, f.names[2], f"{a[-1]} {'rows' if len(b) > 1 else 'elements'} (the columns of "
                                  f"'{f.names[1]}', shape {tuple(a)})", f"shape {tuple(b)}")
    if op == "addmv":
        return (a[0],)
    if op == "addbmm":
        return (a[1], b[2])
    return a[:-1] + b[-1:]


def _check_add_form(op):
    f = ADD_FORMS[op]

    def check(inputs, attrs):
        check_operands(op, f.names, inputs, (3,))
        out = add_form_shape(op, inputs[1].shape, inputs[2].shape)
        inp = inputs[0].shape
        if len(inp) > len(out) or any(d not in (1, o) for d, o in zip(reversed(inp), reversed(out))):
            raise InvalidProblemError(op, f.names[0], f"a shape that broadcasts to the product's {out}", f"shape {inp}")
        dt = inputs[0].dtype
        for name in ("beta", "alpha"):
            v = attrs[name]
            if op == "addr" and not dt.is_floating and isinstance(v, float):
                raise InvalidProblemError(op, name, f"an int for {dt} tensors (torch.addr: for integral input "
                                          "tensors, beta and alpha must not be floating point numbers)", v)
            attrs[name] = scalar_for(op, name, v, dt)
        return attrs, (TensorSpec(out, dt),)
    return check


def _scaled(ctx, x, s: float):
    return x if s == 1 else ctx.op("mul_scalar", x, scalar=s)


def _g_add_form(ctx, d, grads, s):
    """d input = beta * (grad summed to input's shape); d mat1, d mat2 = the product's gradients of alpha * grad."""
    g = grads[0]
    if g is None:
        return None, None, None
    f = ADD_FORMS[d.op]
    inp, A, B = d.inputs
    beta, alpha = d.attr("beta"), d.attr("alpha")
    need_a, need_b = ctx.needs[1], ctx.needs[2]
    gi = _scaled(ctx, ctx.reduce_to(g, inp.shape), beta) if ctx.needs[0] else None
    if not (need_a or need_b):
        return gi, None, None
    g = _scaled(ctx, g, alpha)
    a, b = s[f.names[1]], s[f.names[2]]
    if d.op == "addbmm":
        # out = sum_b batch1[b] @ batch2[b]: the (shared) gradient meets every batch
        ga = ctx.op("matmul", g, b, trans_b=True) if need_a else None
        gb = ctx.op("matmul", a, g, trans_a=True) if need_b else None
        return gi, ga, gb
    if d.op == "addr":     # outer(vec1, vec2) = [n, 1] @ [1, m]
        A2, B2 = TensorSpec(A.shape + (1,), A.dtype), TensorSpec((1,) + B.shape, B.dtype)
        ga, gb = gemm_grads(ctx, "mm", A2, B2, False, False, g, ctx.reshape(a, A2.shape), ctx.reshape(b, B2.shape),
                            need_a, need_b)
        return gi, (ctx.reshape(ga, A.shape) if ga is not None else None), \
            (ctx.reshape(gb, B.shape) if gb is not None else None)
    ga, gb = gemm_grads(ctx, f.product, A, B, False, False, g, a, b, need_a, need_b)
    return gi, ga, gb


def _peer_add_form(op):
    def peer(inp, a, b, beta=1.0, alpha=1.0):
        import torch

        return getattr(torch, op)(inp, a, b, beta=beta, alpha=alpha)
    return peer


def _scalar_arg(op: str, name: str, v, tensors):
    """torch's Scalar beta / alpha: a bool is 0 or 1 (addr: only for bool tensors, as torch refuses a bool beta /
    alpha for a non-bool result there); complex is refused.  The descriptor converts it to the tensors' dtype."""
    import torch

    if isinstance(v, bool):
        if op == "addr" and tensors[0].dtype != torch.bool:
            raise InvalidProblemError(op, name, "a real number (a bool only for bool tensors, as torch.addr)", v)
        return int(v)
    if isinstance(v, complex):
        raise UnsupportedError(op, f"argument '{name}' is complex ({v}); the GEMM family has no complex dtypes")
    return v


def _add_form_args(op, tensors, beta, alpha, out):
    if out is None and type(beta) is int and type(alpha) is int and beta == 1 and alpha == 1:
        return tuple(tensors), {}       # torch's defaults (GPT-2's addmm(bias, x, w)): the cheapest call key
    _no_out(op, out)
    return tuple(tensors), {"beta": _scalar_arg(op, "beta", beta, tensors),
                            "alpha": _scalar_arg(op, "alpha", alpha, tensors)}


def _dropin_addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    return _add_form_args("addmm", (input, mat1, mat2), beta, alpha, out)


def _dropin_addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    return _add_form_args("addmv", (input, mat, vec), beta, alpha, out)


def _dropin_addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    return _add_form_args("addr", (input, vec1, vec2), beta, alpha, out)


def _dropin_baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    return _add_form_args("baddbmm", (input, batch1, batch2), beta, alpha, out)


def _dropin_addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    return _add_form_args("addbmm", (input, batch1, batch2), beta, alpha, out)


# (input shape, operand shapes, attrs): the first three (<= 64 elements each) are the gradient samples; then
# broadcast inputs, beta = 0, K = 0 (beta * input), empty outputs and one larger problem.  beta / alpha are ints, so
# that every sample is valid for every dtype (torch.addr refuses a float beta / alpha for integer tensors, a negative
# float is out of uint8's range); fractional ones on floating tensors: tests/gemm_forms.
_AB = {"beta": 3, "alpha": -2}
_ADD_CASES = {
    "addmm": [((5, 3), (5, 7), (7, 3), {}), ((3,), (4, 6), (6, 3), _AB), ((4, 1), (4, 5), (5, 3), {"beta": 0}),
              ((), (3, 4), (4, 2), {"alpha": 2}), ((1, 3), (2, 5), (5, 3), {"beta": -1, "alpha": 2}),
              ((40,), (33, 20), (20, 40), {}), ((4, 3), (4, 0), (0, 3), {"beta": 2}), ((0, 3), (0, 4), (4, 3), {}),
              ((3,), (5, 4), (4, 3), {"alpha": 0})],
    "addmv": [((5,), (5, 7), (7,), {}), ((1,), (4, 6), (6,), _AB), ((), (6, 5), (5,), {"beta": 0}),
              ((33,), (33, 20), (20,), {"alpha": -1}), ((4,), (4, 0), (0,), {"beta": 2}), ((0,), (0, 3), (3,), {})],
    "addr": [((5, 4), (5,), (4,), {}), ((4,), (3,), (4,), _AB), ((3, 1), (3,), (6,), {"beta": 0}),
             ((), (33,), (20,), {}), ((0, 3), (0,), (3,), {})],
    "baddbmm": [((2, 5, 3), (2, 5, 4), (2, 4, 3), {}), ((3,), (2, 3, 4), (2, 4, 3), _AB),
                ((2, 1, 3), (2, 4, 5), (2, 5, 3), {"beta": 0}), ((4, 3), (3, 4, 6), (3, 6, 3), {"alpha": -1}),
                ((3, 17, 20), (3, 17, 20), (3, 20, 20), {}), ((2, 3, 4), (2, 3, 0), (2, 0, 4), {"beta": 2}),
                ((0, 3, 4), (0, 3, 5), (0, 5, 4), {})],
    "addbmm": [((5, 3), (2, 5, 4), (2, 4, 3), {}), ((3,), (3, 4, 2), (3, 2, 3), _AB),
               ((4, 1), (2, 4, 3), (2, 3, 2), {"beta": 0}), ((17, 20), (4, 17, 20), (4, 20, 20), {"alpha": 2}),
               ((3, 4), (0, 3, 5), (0, 5, 4), {"beta": 3}), ((3, 4), (2, 3, 0), (2, 0, 4), {"beta": -1})],
}


def _add_samples(op):
    def samples(rng):
        for si, sa, sb, attrs in _ADD_CASES[op]:
            yield Sample(_n(rng, si, sa, sb), dict(attrs), name=f"{si}+{sa}x{sb}{attrs or ''}")
    return samples


def _add_errors(op):
    f = ADD_FORMS[op]
    ok = {"addmm": ((5, 3), (5, 7), (7, 3)), "addmv": ((5,), (5, 7), (7,)), "addr": ((5, 4), (5,), (4,)),
          "baddbmm": ((2, 5, 3), (2, 5, 7), (2, 7, 3)), "addbmm": ((5, 3), (2, 5, 7), (2, 7, 3))}[op]

    def with_(i, shape=None, dt="f32"):
        return tuple((shape if (k == i and shape is not None) else s, dt if k == i else "f32") for k, s in enumerate(ok))

    def errors():
        bad_inner = ok[2][:-2] + (6,) + ok[2][-1:] if len(ok[2]) > 1 else (6,)
        if op != "addr":
            yield ErrorCase(with_(2, bad_inner), {}, InvalidProblemError, rf"{op}: argument '{f.names[2]}': expected 7",
                            "inner-mismatch")
        yield ErrorCase(with_(1, ok[1] + (1,)), {}, InvalidProblemError, rf"{op}: argument '{f.names[1]}': expected "
                        rf"{f.what[0]}", "rank")
        yield ErrorCase(with_(0, (9,) + ok[0]), {}, InvalidProblemError, rf"argument '{f.names[0]}': expected a shape "
                        r"that broadcasts", "input-rank")
        yield ErrorCase(with_(0, ok[0][:-1] + (ok[0][-1] + 1,)), {}, InvalidProblemError,
                        rf"argument '{f.names[0]}': expected a shape that broadcasts", "input-shape")
        yield ErrorCase(with_(2, dt="f64"), {}, Exception, r"expected dtype f32", "dtype-mismatch")
        if op != "addr":
            yield ErrorCase(tuple((s, "bool") for s in ok), {}, UnsupportedError, r"dtype bool; the op is defined "
                            "for", "bool-dtype")
        yield ErrorCase(tuple((s, "u8") for s in ok), {"alpha": 256}, InvalidProblemError, rf"{op}: argument "
                        r"'alpha': expected a value u8 can hold \(\[-255, 255\]", "int-alpha-range")
        yield ErrorCase(tuple((s, "i32") for s in ok), {"beta": float("nan")}, InvalidProblemError,
                        r"argument 'beta': expected", "int-beta-nan")
        if op == "addr":
            yield ErrorCase(tuple((s, "i64") for s in ok), {"alpha": 2.0}, InvalidProblemError,
                            r"addr: argument 'alpha': expected an int for i64 tensors", "int-float-alpha")
        yield ErrorCase(with_(0), {"beta": True}, InvalidProblemError, rf"{op}: argument 'beta': expected a real "
                        "number", "bool-beta-attr")
        yield ErrorCase(with_(0), {"alpha": "2"}, InvalidProblemError, r"argument 'alpha': expected a real", "str")
        if op in ("baddbmm", "addbmm"):
            yield ErrorCase(with_(2, (3,) + ok[2][1:]), {}, InvalidProblemError, r"argument 'batch2': expected 2 "
                            "batches", "batch")
    return errors


# -- mv / dot / vdot ---------------------------------------------------------------------------------------------
_VEC_NAMES = {"mv": ("input", "vec"), "dot": ("input", "tensor"), "vdot": ("input", "other")}


def _check_vec(op):
    names = _VEC_NAMES[op]

    def check(inputs, attrs):
        check_operands(op, names, inputs, (2,))
        a, b = (t.shape for t in inputs)
        if op == "mv":
            if len(a) != 2:
                raise InvalidProblemError(op, names[0], "a matrix", f"shape {a}")
            if len(b) != 1 or b[0] != a[1]:
                raise InvalidProblemError(op, names[1], f"a 1-D vector of {a[1]} elements (the columns of "
                                          f"'{names[0]}')", f"shape {b}")
            return attrs, (TensorSpec((a[0],), inputs[0].dtype),)
        for name, s in zip(names, (a, b)):
            if len(s) != 1:
                raise InvalidProblemError(op, name, "a 1-D tensor", f"shape {s}")
        if a != b:
            raise InvalidProblemError(op, names[1], f"{a[0]} elements (as '{names[0]}')", f"shape {b}")
        return attrs, (TensorSpec((), inputs[0].dtype),)
    return check


def _g_vec(ctx, d, grads, s):
    """mv = matmul(mat, vec), dot = vdot = matmul(x, y) (real operands: vdot's conjugation is the identity)."""
    g = grads[0]
    if g is None:
        return None, None
    n = d.spec.arg_names
    return gemm_grads(ctx, "matmul", *d.inputs, False, False, g, s[n[0]], s[n[1]], ctx.needs[0], ctx.needs[1])


_VEC_CASES = {"mv": [((5, 7), (7,)), ((1, 6), (6,)), ((33, 20), (20,)), ((0, 3), (3,)), ((4, 0), (0,))],
              "dot": [((7,), (7,)), ((1,), (1,)), ((20,), (20,)), ((0,), (0,))]}
_VEC_CASES["vdot"] = _VEC_CASES["dot"]


def _vec_samples(op):
    def samples(rng):
        for sa, sb in _VEC_CASES[op]:
            yield Sample(_n(rng, sa, sb), {}, name=f"{sa}x{sb}")
    return samples


def _vec_errors(op):
    def errors():
        n = _VEC_NAMES[op]
        if op == "mv":
            yield ErrorCase((((3, 4), "f32"), ((3,), "f32")), {}, InvalidProblemError, r"mv: argument 'vec': expected "
                            r"a 1-D vector of 4 elements", "size")
            yield ErrorCase((((3,), "f32"), ((3,), "f32")), {}, InvalidProblemError, r"argument 'input': expected a "
                            "matrix", "rank")
        else:
            yield ErrorCase((((3,), "f32"), ((4,), "f32")), {}, InvalidProblemError, rf"{op}: argument '{n[1]}': "
                            r"expected 3 elements", "size")
            yield ErrorCase((((3, 1), "f32"), ((3,), "f32")), {}, InvalidProblemError, r"argument 'input': expected "
                            "a 1-D tensor", "rank")
            if op == "vdot":
                yield ErrorCase((((3,), "c64"), ((3,), "c64")), {}, UnsupportedError, r"dtype c64; the op is defined "
                                "for f64, f32, f16, bf16", "complex")
        yield ErrorCase((((3, 4) if op == "mv" else (4,), "f32"), ((4,), "f16")), {}, Exception,
                        r"expected dtype f32", "dtype")
        yield ErrorCase((((3, 4) if op == "mv" else (4,), "bool"), ((4,), "bool")), {}, UnsupportedError,
                        r"dtype bool", "bool")
    return errors


# -- kron ----------------------------------------------------------------------------------------------------------
def kron_shapes(a: tuple, b: tuple) -> tuple[tuple, tuple, tuple]:
    """(a's shape, b's shape) padded with leading 1s to one rank, and the interleaved [a0, b0, a1, b1, ...] shape the
    output is a view of (out[i * b_k + j] along axis k = a[i] * b[j])."""
    r = max(len(a), len(b))
    pa, pb = (1,) * (r - len(a)) + tuple(a), (1,) * (r - len(b)) + tuple(b)
    return pa, pb, tuple(x for pair in zip(pa, pb) for x in pair)


def _check_kron(inputs, attrs):
    check_operands("kron", ("input", "other"), inputs, (2,))
    pa, pb, _ = kron_shapes(inputs[0].shape, inputs[1].shape)
    return attrs, (TensorSpec(tuple(x * y for x, y in zip(pa, pb)), inputs[0].dtype),)


def _g_kron(ctx, d, grads, s):
    """kron(a, b) viewed [a0, b0, a1, b1, ...] is the contraction 'A..,a..->AaBb..' (nothing summed): its gradients
    contract the viewed output gradient with the other operand."""
    g = grads[0]
    if g is None:
        return None, None
    A, B = d.inputs
    pa, pb, inter = kron_shapes(A.shape, B.shape)
    r = len(pa)
    la, lb = LABELS[:r], LABELS[r:2 * r]
    c = make_contraction("kron", ("input", "other"), (la, lb), "".join(x + y for x, y in zip(la, lb)), (pa, pb))
    ga, gb = grad_contraction(ctx, c, ctx.reshape(g, inter), [ctx.reshape(s["input"], pa),
                                                               ctx.reshape(s["other"], pb)], ctx.needs)
    return (ctx.reshape(ga, A.shape) if ga is not None else None), (ctx.reshape(gb, B.shape) if gb is not None else None)


_KRON_CASES = [((2, 3), (3, 2)), ((4,), (2, 3)), ((), (3, 2)), ((2, 1, 3), (2, 2)), ((5, 7), (6, 4)),
               ((0, 3), (2, 2)), ((2, 2), (3, 0))]


def _kron_samples(rng):
    for sa, sb in _KRON_CASES:
        yield Sample(_n(rng, sa, sb), {}, name=f"{sa}x{sb}")


def _kron_errors():
    yield ErrorCase((((2, 3), "f32"), ((3, 2), "f64")), {}, Exception, r"kron: argument 'other': expected dtype f32",
                    "dtype")
    yield ErrorCase((((2, 3), "u32"), ((3, 2), "u32")), {}, UnsupportedError, r"kron: argument 'input' has dtype u32",
                    "u32")


# -- cost ----------------------------------------------------------------------------------------------------------
def _add_cost(desc):
    a = desc.inputs[1].shape
    k = a[-1]
    return _io_bytes(desc), 2 * desc.outputs[0].numel * k * (a[0] if desc.op == "addbmm" else 1)


def _vec_cost(desc):
    return _io_bytes(desc), 2 * desc.inputs[0].numel


# -- tolerances (the GEMM family's, see ops/gemm.py) and workloads -----------------------------------------------------
# the add-forms' beta * input + alpha * acc is formed in f32 (f64 for f64) and rounded once, like the plain GEMM;
# |alpha| <= 2 in the samples doubles at most the accumulation error, which the GEMM tolerances leave room for
_BF, _F32 = DType.bf16, DType.f32
_WORKLOADS = {
    # GPT-2's projections under bt.mode: torch.addmm(bias, x, weight) (HF Conv1D), c_attn 768 -> 2304
    "addmm": (Workload("addmm-gpt2-c_attn-[8192,768]x[768,2304]+bias-bf16", ((2304,), (8192, 768), (768, 2304)), _BF,
                       backward=True),
              Workload("addmm-4096^3-beta0.5-alpha2-f32", ((4096, 4096), (4096, 4096), (4096, 4096)), _F32,
                       {"beta": 0.5, "alpha": 2.0})),
    "addmv": (Workload("addmv-[8192,8192]-bf16", ((8192,), (8192, 8192), (8192,)), _BF, backward=True),),
    "addr": (Workload("addr-[8192]x[8192]-f32", ((8192, 8192), (8192,), (8192,)), _F32, backward=True),),
    "baddbmm": (Workload("baddbmm-scores-[32,2048,128]x[32,128,2048]-bf16", ((32, 2048, 2048), (32, 2048, 128),
                                                                            (32, 128, 2048)), _BF,
                         {"alpha": 0.125}, backward=True),),
    "addbmm": (Workload("addbmm-[16,1024,1024]^2-bf16", ((1024, 1024), (16, 1024, 1024), (16, 1024, 1024)), _BF,
                        backward=True),),
    "mv": (Workload("mv-[8192,8192]-bf16", ((8192, 8192), (8192,)), _BF, backward=True),),
    "dot": (Workload("dot-64M-f32", ((1 << 26,), (1 << 26,)), _F32, backward=True),),
    "vdot": (Workload("vdot-64M-f32", ((1 << 26,), (1 << 26,)), _F32),),
    "kron": (Workload("kron-[64,64]x[64,64]-f32", ((64, 64), (64, 64)), _F32, backward=True),),
}

SPECS: dict[str, OpSpec] = {}
# beta / alpha: numbers kept as given (an int stays an int: torch.addr refuses a float for integer tensors), converted
# to the tensors' dtype by the shape rule (scalar_for)
_BETA_ALPHA = (Attr("beta", "number", 1), Attr("alpha", "number", 1))
for _op, _f in ADD_FORMS.items():
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="gemm", arg_names=_f.names, check=_check_add_form(_op),
        dtypes=GEMM_TYPES + ((DType.bool,) if _op == "addr" else ()),
        attrs=_BETA_ALPHA, torch_peer=_peer_add_form(_op),
        torch_name=f"torch.{_op}", dropin=globals()[f"_dropin_{_op}"], grad=float_grads(_g_add_form), saves=("inputs",),
        differentiable=(0, 1, 2), samples=_add_samples(_op), errors=_add_errors(_op), tol=_tol, grad_tol=_grad_tol,
        workloads=_WORKLOADS[_op], cost=_add_cost, category="gemm",
        doc=f"torch.{_op}: beta * {_f.names[0]} + alpha * ({_f.names[1]} x {_f.names[2]}); beta = 0 ignores "
            f"{_f.names[0]} (NaN/inf there do not propagate)."))
for _op in ("mv", "dot", "vdot"):
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="gemm", arg_names=_VEC_NAMES[_op], check=_check_vec(_op), dtypes=GEMM_TYPES, attrs=(),
        torch_peer=torch_fn(_op), torch_name=f"torch.{_op}",
        dropin=pair_dropin(_op, *_VEC_NAMES[_op]), grad=float_grads(_g_vec), saves=("inputs",), differentiable=(0, 1),
        samples=_vec_samples(_op), errors=_vec_errors(_op), tol=_tol, grad_tol=_grad_tol, workloads=_WORKLOADS[_op],
        cost=_vec_cost if _op != "mv" else _add_cost, category="gemm",
        doc=f"torch.{_op}" + (" (real operands: vdot is dot)" if _op == "vdot" else "")))
SPECS["kron"] = register_spec(OpSpec(
    name="kron", family="gemm", arg_names=("input", "other"), check=_check_kron, dtypes=GEMM_TYPES + (DType.bool,),
    attrs=(), torch_peer=torch_fn("kron"), torch_name="torch.kron", dropin=pair_dropin("kron", "input", "other"),
    jax_name="jax.numpy.kron", grad=float_grads(_g_kron), saves=("inputs",), differentiable=(0, 1),
    samples=_kron_samples,
    errors=_kron_errors, tol=_tol, grad_tol=_grad_tol,
    workloads=_WORKLOADS["kron"], category="gemm",
    doc="torch.kron: the Kronecker product (ranks padded with leading 1s); one product per output element."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "bmm", "einsum", "broadcast_to", "diagonal_backward", "matmul", "mm", "mul_scalar")
