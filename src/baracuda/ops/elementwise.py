"""Elementwise family: one table mechanism (``EwDef``) for unary, binary, ternary and gated ops.

Adding an op is one ``EwDef`` row (here, in ``ew_math.py``, ``ew_binary.py`` or ``activation.py``), one
NumPy body in ``backends/reference/elementwise.py`` and one Triton body in ``backends/triton/``.
``add_ew_ops`` turns rows into ``OpSpec``s: shape rule (broadcast, or the gated split), dtype rule, samples and
error cases (drawn by the row's ``samples=ew_samples(...)``, which holds the test-input knobs apart from the op
facts), workloads, and — for rows with ``bw`` — an internal ``<op>_backward(g, saved)`` op plus the backward rule
that calls it.

Dtype rule (torch's): the operands named by ``value_args`` are promoted with torch's priority rule
(dimensioned tensors > 0-d tensors; Python scalars arrive as 0-d tensors from the drop-in adapters, see
``weak_scalar_dtype``), then ``out`` maps the promoted type to the output: "promote"/"same" keep it,
"float" turns integers and bool into f32 (torch's default dtype, e.g. ``exp(int)`` and true division),
"bool" gives bool (comparisons, isnan, logical ops).

>>> import numpy as np, baracuda as bc
>>> d = bc.Descriptor.make("add", ((2, 3), "i32"), ((3,), "i64"))
>>> d.outputs[0].dtype
DType.i64
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, result_type
from .._core.errors import ArgumentTypeError, DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec
from .._core.tensors import given
from .._core.derive import declare_rule_ops
from ._common import broadcast_shapes

__all__ = ["EwDef", "EwSamples", "ew_samples", "EW_OPS", "EW_SPECS", "add_ew_ops", "ew_result_type", "ew_compute_dtype",
           "ew_operand_shapes", "weak_scalar_dtype", "zero_grad", "is_complex_desc", "real_of", "cj", "reduce_grad",
           "FLOAT", "INT", "BOOL", "NUM", "ALL", "CPLX", "tp", "dropin_ew"]

FLOAT = FLOAT_TYPES
INT = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
BOOL = (DType.bool,)
NUM = FLOAT + INT
ALL = NUM + BOOL
CPLX = (DType.c64, DType.c128)
_CAT = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
# torch's toComplexType / toRealValueType (f16 -> complex32, which baracuda does not have: refused)
_TO_COMPLEX = {DType.f64: DType.c128, DType.f32: DType.c64, DType.bf16: DType.c64}
_REAL_OF = {DType.c64: DType.f32, DType.c128: DType.f64}


def real_of(dt: DType) -> DType:
    """The real dtype of a complex dtype's parts (c64 -> f32, c128 -> f64); real dtypes map to themselves."""
    return _REAL_OF.get(dt, dt)


@dataclass(frozen=True)
class EwDef:
    name: str
    arity: int
    torch_peer: Callable | None = None
    torch_name: str | None = None
    jax_name: str | None = None
    grad: Callable | None = None
    saves: tuple = ("inputs",)
    attrs: tuple = ()                         # the declared attributes (``Attr``; a gated row's ``dim`` is added)
    check_attrs: Callable | None = None       # (op, attrs) -> attrs: rules across attributes (min <= max)
    internal: bool = False                    # a backward helper: not part of the drop-in namespaces
    dtypes: tuple = FLOAT
    out: str = "promote"                      # "promote" | "same" | "float" | "bool"
    dtype_rule: Callable | None = None        # (op, inputs, attrs, promoted) -> out dtype (overrides ``out``)
    value_args: tuple | None = None           # operands that take part in promotion (default: all)
    arg_dtypes: dict = field(default_factory=dict)   # operand index -> its own dtype set (e.g. where's cond)
    shape: str = "broadcast"                  # "broadcast" | "gated" (split ``dim`` in halves)
    bw: str | None = None                     # "x" | "out": generate ``<name>_backward(g, x|out)``
    bw_peer: Callable | None = None           # torch peer of the generated backward (default: autograd)
    dropin: Callable | None = None
    tol: Callable | None = None
    diff_args: tuple | None = None            # operands that get gradients (default: value_args, or all)
    same_dtype: bool = False                  # torch refuses mixed dtypes (heaviside, isclose, lerp, prelu)
    # (op, shapes, attrs) -> the shape each operand broadcasts as (validates too); e.g. prelu's weight [C] acts
    # as [C, 1, ..., 1] against x [N, C, ...].  Kernels take the operand as that view (no copy).
    align: Callable | None = None
    workloads: tuple | None = None            # benchmark problems (overrides the generated 64M-element ones)
    aliases: tuple = ()                       # more torch names with the same signature
    doc: str = ""
    # test inputs: what the spec's samples and error cases draw (``ew_samples``); not a fact of the op
    samples: EwSamples | None = None

    def __post_init__(self):
        if self.samples is None:
            object.__setattr__(self, "samples", EwSamples())

    @property
    def defaults(self) -> dict:
        return {a.name: a.default for a in self.attrs}


EW_OPS: dict[str, EwDef] = {}
EW_SPECS: dict[str, OpSpec] = {}


def _arg_names(e: EwDef):
    if e.shape == "gated" or e.arity == 1:
        return ("x",)
    return ("a", "b", "c")[:e.arity]


# -- dtype rule ----------------------------------------------------------------------------------
def ew_result_type(specs, op: str = "elementwise") -> DType:
    """torch's promotion with priorities: dimensioned tensors win over 0-d tensors unless a 0-d tensor
    has a higher category (bool < integer < float < complex), in which case the 0-d tensors of that category
    decide -- except that a complex 0-d operand keeps a float tensor's precision (torch's combine_categories:
    f64[n] + 1j -> c128, f32[n] + c128 0-d -> c64; f16[n] + 1j would be complex32, refused here)."""
    dims = [t.dtype for t in specs if len(t.shape) > 0]
    zero = [t.dtype for t in specs if len(t.shape) == 0]
    if not dims:
        return result_type(*zero)
    r = result_type(*dims)
    if zero:
        z = result_type(*zero)
        if _CAT[z.kind] > _CAT[r.kind]:
            if z.is_complex and r.is_floating:
                if r not in _TO_COMPLEX:
                    raise UnsupportedError(op, f"{r} with a complex scalar promotes to complex32 in torch; "
                                           "baracuda has no complex32 (use c64)")
                return _TO_COMPLEX[r]
            r = z
    return r


def weak_scalar_dtype(value, tensor_dtypes, any_dimensioned: bool) -> DType:
    """The 0-d dtype a Python scalar becomes in a drop-in call, so that ``ew_result_type`` then gives
    torch's answer for (tensors, Python scalar): bool -> bool, int -> i64, float -> f32, complex -> c64 (the defaults);
    when every operand is 0-d the scalar is weakest, so it takes the tensors' dtype where its category
    is not higher (``tensor(1, dtype=bf16) + 1.5`` stays bf16)."""
    d = (DType.bool if isinstance(value, bool) else DType.i64 if isinstance(value, int) else
         DType.c64 if isinstance(value, complex) else DType.f32)   # torch's default dtypes
    if d in (DType.f32, DType.c64) and any(t in (DType.f64, DType.c128) for t in tensor_dtypes):
        # a double-precision operand makes the result double anyway: keep the Python value's double precision
        # (x_f64 / 0.1 must not divide by 0.1 rounded to f32); the promoted dtype is the same
        d = DType.f64 if d == DType.f32 else DType.c128
    if not any_dimensioned and tensor_dtypes:
        r = result_type(*tensor_dtypes)
        if _CAT[r.kind] >= _CAT[d.kind]:
            return r
    return d


_OUT_RULE = {
    "promote": lambda r: r,
    "same": lambda r: r,
    "float": lambda r: r if r.is_floating or r.is_complex else DType.f32,
    "bool": lambda r: DType.bool,
    "real": real_of,                                                     # abs: |c64| is f32, |i32| is i32
    "real_float": lambda r: real_of(r) if r.is_complex else r if r.is_floating else DType.f32,   # angle
    "complex": lambda r: _TO_COMPLEX.get(r, r),                          # polar / complex(re, im)
}


def _value_specs(e: EwDef, inputs):
    idx = e.value_args if e.value_args is not None else range(len(inputs))
    return [inputs[i] for i in idx]


def is_complex_desc(desc) -> bool:
    """Whether an elementwise descriptor involves a complex operand or output (the complex kernels run it)."""
    return any(t.dtype.is_complex for t in desc.inputs) or desc.outputs[0].dtype.is_complex


def ew_compute_dtype(desc) -> DType:
    """The dtype a kernel computes in: f64 when the promoted operands or the output are f64, f32 for every
    other float (half types compute in f32), the integer type itself for integer math (wrap-around like
    torch), and bool for pure-bool math (kernels hold it as 0/1 int8).  Complex math: c128 when c128 or f64
    takes part, else c64 (the kernels compute each part in f64 / f32)."""
    e = EW_OPS[desc.op]
    r = ew_result_type(_value_specs(e, desc.inputs))
    out = desc.outputs[0].dtype
    if is_complex_desc(desc):
        wide = any(t.dtype in (DType.c128, DType.f64) for t in (*desc.inputs, desc.outputs[0]))
        return DType.c128 if wide else DType.c64
    if r.is_floating or out.is_floating:
        return DType.f64 if DType.f64 in (r, out) else DType.f32
    return r


def _check_dtypes(e: EwDef, inputs):
    names = _arg_names(e)
    for i, t in enumerate(inputs):
        allowed = e.arg_dtypes.get(i, e.dtypes)
        if t.dtype not in allowed:
            raise UnsupportedError(e.name, f"argument '{names[i] if i < len(names) else i}' has dtype {t.dtype}; "
                                   f"the op is defined for {', '.join(map(str, allowed))}")
    if e.same_dtype:
        for i, t in enumerate(inputs[1:], 1):
            if t.dtype != inputs[0].dtype:
                raise DTypeMismatchError(e.name, names[i] if i < len(names) else str(i),
                                         f"{inputs[0].dtype} (the dtype of '{names[0]}'; the op does not promote)",
                                         t.dtype)


def ew_operand_shapes(desc):
    """The shape each operand broadcasts as: its own shape, or the row's ``align`` view of it."""
    e = EW_OPS[desc.op]
    shapes = tuple(tuple(t.shape) for t in desc.inputs)
    return tuple(e.align(desc.op, shapes, desc.attr_dict)) if e.align else shapes


def _make_check(e: EwDef):
    names = _arg_names(e)

    def check(inputs, attrs):
        op = e.name
        if len(inputs) != e.arity:
            raise InvalidProblemError(op, "inputs", f"{e.arity} operand(s)", len(inputs))
        a = e.check_attrs(op, attrs) if e.check_attrs else attrs
        _check_dtypes(e, inputs)
        r = ew_result_type(_value_specs(e, inputs), op)
        out_dt = e.dtype_rule(op, inputs, a, r) if e.dtype_rule else _OUT_RULE[e.out](r)
        if e.shape == "gated":
            shape = list(inputs[0].shape)
            ax = a["dim"]
            if not shape or shape[ax] % 2:
                raise InvalidProblemError(op, "x", f"an even size along dim {ax}", tuple(shape))
            shape[ax] //= 2
            return a, (TensorSpec(tuple(shape), out_dt),)
        if e.shape == "gated_bw":   # (g, x): g has x's shape with ``dim`` halved; dx has x's shape
            xs = tuple(inputs[1].shape)
            ax = a["dim"]
            want = xs[:ax] + (xs[ax] // 2,) + xs[ax + 1:]
            if xs[ax] % 2 or tuple(inputs[0].shape) != want:
                raise InvalidProblemError(op, "a", f"shape {want} (x with dim {ax} halved)", inputs[0].shape)
            return a, (TensorSpec(xs, out_dt),)
        shapes = [tuple(t.shape) for t in inputs]
        if e.align:
            shapes = e.align(op, tuple(shapes), a)
        shape = broadcast_shapes(op, names, shapes)
        return a, (TensorSpec(shape, out_dt),)
    return check


# -- samples ---------------------------------------------------------------------------------------
def _push_from(x, points, gap=0.05):
    for p in points:
        near = np.abs(x - p) < gap
        x = np.where(near, p + np.where(x >= p, gap, -gap) * 1.5, x)
    return x


def _nonint(x):
    """Values whose fractional part is in [0.1, 0.4] or [0.6, 0.9] (floor/round/trunc stay differentiable)."""
    x = 3.0 * x
    f = x - np.floor(x)
    f = np.where(np.abs(f - 0.5) < 0.1, f + 0.2, f)
    f = np.clip(f, 0.1, 0.9)
    return np.floor(x) + f


_DOMAINS = {
    "any": lambda rng, s: rng.standard_normal(s),
    "wide": lambda rng, s: 4.0 * rng.standard_normal(s),             # integers see more than {-1, 0, 1}
    "positive": lambda rng, s: np.abs(rng.standard_normal(s)) + 0.5,
    "nonneg": lambda rng, s: np.abs(2.0 * rng.standard_normal(s)) + 0.05,
    "nonzero": lambda rng, s: (lambda x: np.sign(x + 1e-30) * (np.abs(x) + 1.0))(2.0 * rng.standard_normal(s)),
    "unit": lambda rng, s: rng.uniform(-0.9, 0.9, s),                 # asin/acos/atanh/erfinv
    "ge1": lambda rng, s: 1.1 + np.abs(rng.standard_normal(s)),       # acosh
    "prob": lambda rng, s: rng.uniform(0.05, 0.95, s),                # logit
    "nonint": lambda rng, s: _nonint(rng.standard_normal(s)),         # floor/ceil/round/trunc/frac
    "shift": lambda rng, s: rng.integers(0, 7, s).astype(np.float64),  # shift amounts
    "expo": lambda rng, s: rng.uniform(0.0, 3.0, s),                  # pow exponents (ints: 0..2)
    "cond": lambda rng, s: rng.standard_normal(s),                    # where's condition (cast to bool: x > 0)
    # multiples of 1/4 in [-6, 6]: exact in every dtype, so ties (x == 0, |a - b| == atol) are hit exactly
    "grid": lambda rng, s: np.clip(np.round(rng.standard_normal(s) * 8.0), -24, 24) / 4.0,
    "weight": lambda rng, s: rng.uniform(-0.25, 1.25, s),             # lerp weights on both sides of 0.5
}

# Shapes are few on purpose: under Triton's interpreter each launch costs ~35 ms whatever its size, and the
# table has ~180 ops x up to 10 dtypes.  Zero-size samples launch nothing; odd sizes and the non-contiguous
# copy of every sample (made by the generic tests) exercise masks and the strided path.
_UNARY_SHAPES = ((), (33, 65), (0, 4))
_UNARY_LEAN = ((7,), (0, 4))
_BINARY_SHAPES = (((2, 3, 4, 5), (4, 5)), ((3, 1, 5), (4, 1)), ((7,), ()), ((0, 4), (4,)))
_BINARY_LEAN = (((3, 1, 5), (4, 1)), ((0, 4), (4,)))
_SAME_LEAN = (((3, 5), (3, 5)), ((0, 4), (0, 4)))
_TERNARY_SHAPES = (((3, 5), (3, 5), (3, 5)), ((0, 2), (0, 2), (0, 2)), ((2, 3, 4), (3, 4), (4,)))
_GATED_SHAPES = (((2, 3, 6),), ((0, 4),), ((5, 130),))
# mixed-dtype samples: (operand index, fixed dtype) — exercise promotion (int/bool operands with float ones)
_MIXED = {2: ((1, "i64"), (1, "bool")), 3: ((2, "i32"),)}


def _draw(rng, shape, domain: str, avoid):
    x = _DOMAINS[domain](rng, shape)
    return _push_from(x, avoid) if avoid else x


def _cast_fixed(x, dt):
    if dt == "bool":
        return x > 0
    return np.round(x).astype(DType[dt].numpy)


@dataclass(frozen=True)
class EwSamples:
    """The test inputs of an elementwise row (``EwDef.samples``; build with ``ew_samples``): what its samples and
    error cases draw.  These are knobs of the tests, not facts of the op; ``draw`` and ``errors`` combine them
    with the row's facts (arity, dtypes, shape rule, operand dtypes) into the spec's ``samples``/``errors``."""

    # sample domain, one for all operands or a tuple (one per operand); see ``_DOMAINS``
    domain: str | tuple = "any"
    avoid: tuple = ()                         # kinks: samples stay >= 0.05 away from these points
    attrs: tuple = ({},)                      # the attribute sets sampled (the first also serves errors, bench)
    shapes: tuple | None = None               # per-sample operand shapes (overrides the arity's default set)
    lean: bool = False                        # fewer samples (internal helpers, keeps interpreter CI short)
    same_shape: bool = False                  # samples give every operand the same shape (backward helpers)

    def draw(self, e: EwDef):
        """The spec's ``samples``: rng -> the samples of row ``e`` (its arity, dtypes, shape rule) under these knobs."""
        kn = self
        doms = kn.domain if isinstance(kn.domain, tuple) else (kn.domain,) * e.arity
        if kn.shapes is not None:
            shapes = kn.shapes
        elif e.shape == "gated":
            shapes = _GATED_SHAPES
        elif e.shape == "gated_bw":
            shapes = [(s[:-1] + (s[-1] // 2,), s) for (s,) in _GATED_SHAPES[:2]]
        elif e.arity == 1:
            shapes = [(s,) for s in (_UNARY_LEAN if kn.lean else _UNARY_SHAPES)]
        elif e.arity == 2 and kn.same_shape:
            shapes = _SAME_LEAN
        elif e.arity == 2:
            shapes = _BINARY_LEAN if kn.lean else _BINARY_SHAPES
        else:
            shapes = _TERNARY_SHAPES[:2] if kn.lean else _TERNARY_SHAPES

        def samples(rng):
            for attrs in kn.attrs:
                for sh in shapes:
                    xs = tuple(_draw(rng, s, doms[i], kn.avoid) if e.arg_dtypes.get(i) != BOOL else
                               _DOMAINS[doms[i]](rng, s) > 0 for i, s in enumerate(sh))
                    yield Sample(xs, dict(attrs), name=f"{sh}{attrs or ''}")
            if kn.lean or e.arity not in _MIXED or e.shape != "broadcast" or e.same_dtype or kn.shapes:
                return
            for i, dt in _MIXED[e.arity]:
                allowed = e.arg_dtypes.get(i, e.dtypes)
                if DType[dt] not in allowed or DType[dt] not in e.dtypes:
                    continue
                sh = shapes[0]
                xs = [_draw(rng, s, doms[k], kn.avoid) if e.arg_dtypes.get(k) != BOOL else _DOMAINS[doms[k]](rng, s) > 0
                      for k, s in enumerate(sh)]
                xs[i] = _cast_fixed(xs[i], dt)
                yield Sample(tuple(xs), dict(kn.attrs[0]), name=f"mixed-{dt}@{i}", grad=False)
        return samples

    def errors(self, e: EwDef):
        """The spec's ``errors``: () -> the error cases of row ``e`` (their attrs: the first sample attrs)."""
        kn = self

        def dt(i):
            return "bool" if e.arg_dtypes.get(i) == BOOL else "f32" if DType.f32 in e.dtypes else e.dtypes[0].short

        def errors():
            if e.shape == "gated":
                base = [((4,), "f32")]
            elif e.shape == "gated_bw":
                base = [((2,), "f32"), ((4,), "f32")]
            else:
                base = [((3,), dt(i)) for i in range(e.arity)]
            if e.shape == "broadcast" and e.arity >= 2 and e.align is None:
                ins = [((3, 4), dt(0)), ((5,), dt(1))] + [((4,), dt(i)) for i in range(2, e.arity)]
                yield ErrorCase(tuple(ins), dict(kn.attrs[0]), InvalidProblemError,
                                r"argument 'b': expected a shape broadcastable", "bad-broadcast")
            bad = next((d for d in (DType.c64, DType.f8e4m3, DType.u32) if d not in e.dtypes), None)
            if bad is not None:
                ins = list(base)
                k = next(i for i in range(e.arity) if i not in e.arg_dtypes)
                ins[k] = (ins[k][0], bad.short)
                yield ErrorCase(tuple(ins), dict(kn.attrs[0]), UnsupportedError,
                                rf"{e.name}: argument '\w+' has dtype {bad.short}; the op is defined for", "bad-dtype")
            yield ErrorCase(tuple(base), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
            if e.shape == "gated":
                yield ErrorCase((((3, 5), "f32"),), {}, InvalidProblemError, r"expected an even size along dim", "odd")
            for case in _EXTRA_ERRORS.get(e.name, ()):
                yield case
        return errors


def ew_samples(domain: str | tuple = "any", avoid: tuple = (), *, attrs: tuple = ({},), shapes: tuple | None = None,
               lean: bool = False, same_shape: bool = False) -> EwSamples:
    """The sample/error generator of an elementwise row: ``EwDef(..., samples=ew_samples("positive", avoid=(0,)))``."""
    return EwSamples(domain, tuple(avoid), tuple(attrs), shapes, lean, same_shape)


_EXTRA_ERRORS: dict[str, list] = {}


_CPLX_BENCH = frozenset({"add", "mul", "div", "exp", "log", "sqrt", "abs", "sin", "tanh", "pow_scalar", "addcmul"})


def _workloads(e: EwDef):
    if e.workloads is not None:
        return e.workloads
    if e.internal:   # backward helpers are timed through their forward's backward
        return ()
    n = 64 * 1024 * 1024
    bf, f32 = DType.bf16, DType.f32
    if e.shape == "gated":
        return (Workload(f"{e.name}-[8192,2x11008]-bf16", ((8192, 2 * 11008),), bf, backward=True),)
    # the dtypes the op is defined for: bf16 and f32 where it has them, else its integer types (bitwise ops)
    dts = tuple(dt for dt in (bf, f32) if dt in e.dtypes) or tuple(dt for dt in (DType.i32, DType.u8) if dt in e.dtypes)
    attrs = dict(e.samples.attrs[0]) if e.samples.attrs else {}
    # complex rows of the benchmark: 16M c64 elements (128 MB per operand), forward and backward
    cw = ((Workload(f"{e.name}-16M-c64", ((n // 4,),) * e.arity, DType.c64, attrs=attrs, backward=e.grad is not None),)
          if e.name in _CPLX_BENCH and DType.c64 in e.dtypes else ())
    if e.arity == 1:
        return tuple(Workload(f"{e.name}-64M-{dt}", ((n,),), dt, attrs=attrs, backward=e.grad is not None)
                     for dt in dts) + cw
    shapes = ((n,),) * e.arity
    w = [Workload(f"{e.name}-64M-{dt}", shapes, dt, attrs=attrs, backward=e.name in ("add", "mul")) for dt in dts]
    if e.name in ("add", "mul"):
        w.append(Workload(f"{e.name}-bcast-[8,4096,2048]+[2048]-bf16", ((8, 4096, 2048), (2048,)), bf))
    return tuple(w) + cw


def _ew_tol(e: EwDef):
    def tol(dt):
        # complex: the tolerance of its parts' type (c64 like f32, c128 like f64, on the complex modulus)
        if dt.is_complex:
            return default_tol(real_of(dt))
        # integer/bool inputs: the output is an integer (compared exactly) or f32 (true division, exp(int))
        if not dt.is_floating:
            return default_tol(DType.f32)
        return default_tol(dt)
    return e.tol or tol


# -- backward plumbing ---------------------------------------------------------------------------
def _inexact(dt: DType) -> bool:
    return dt.is_floating or dt.is_complex


def _float_only(e: EwDef, rule, diff):
    """Wrap a backward rule: no gradients through integer/bool outputs; None for integer/bool inputs; a real
    input of a complex op gets the real part of its (complex) gradient, as torch."""
    def grad(ctx, d, grads, s):
        if (grads[0] is None or not _inexact(d.outputs[0].dtype)
                or not any(_inexact(t.dtype) for t in d.inputs)):
            return (None,) * e.arity
        res = tuple(rule(ctx, d, grads, s)) + (None,) * e.arity
        out = []
        for i, r in enumerate(res[:e.arity]):
            if r is None or i not in diff or not _inexact(d.inputs[i].dtype):
                out.append(None)
            elif d.inputs[i].dtype.is_floating and ctx.spec_of(r).dtype.is_complex:
                out.append(ctx.op("real", r))
            else:
                out.append(r)
        return tuple(out)
    return grad


def cj(ctx, x):
    """conj(x) for a complex operand of a backward rule (torch's gradient is g * conj(df/dz)); x otherwise."""
    return ctx.op("conj", x) if ctx.spec_of(x).dtype.is_complex else x


def reduce_grad(ctx, g, shape):
    """``ctx.reduce_to`` for real and complex gradients: the sum family is real-only, so a complex gradient
    is summed as its real and imaginary parts and put back together (two reads of g, as one complex sum)."""
    if tuple(ctx.shape(g)) == tuple(shape) or not ctx.spec_of(g).dtype.is_complex:
        return ctx.reduce_to(g, shape)
    return ctx.op("complex", ctx.reduce_to(ctx.op("real", g), shape), ctx.reduce_to(ctx.op("imag", g), shape))


def zero_grad(ctx, d, grads, s):
    """The gradient of a piecewise-constant op (floor, round, sign, ...): torch's exact zero, of the input's shape
    and dtype (the upstream gradient's: these ops keep shape and dtype).  One fill, nothing read; saves nothing."""
    return (ctx.op("zeros_like", grads[0]),)


def _autograd_peer(e: EwDef):
    def peer(g, x, **attrs):
        import torch

        xr = x.detach().clone().requires_grad_(True)
        y = e.torch_peer(xr, **attrs)
        (dx,) = torch.autograd.grad(y, xr, g)
        return dx.clone()   # materializes torch's ZeroTensor (the gradient of sgn / angle of a real tensor)
    return peer


def _bw_row(e: EwDef) -> EwDef:
    """The internal ``<op>_backward(g, x|out)`` row generated for a unary row with ``bw``."""
    peer = e.bw_peer
    if peer is None and e.bw == "x" and e.torch_peer is not None:
        peer = _autograd_peer(e)
    dom = e.samples.domain if isinstance(e.samples.domain, str) else e.samples.domain[0]
    # a gated row's dim is an axis of x, the backward's second operand
    attrs = tuple(replace(a, rank=1) if a.kind == "axis" else a for a in e.attrs) if e.shape == "gated" else e.attrs
    return EwDef(f"{e.name}_backward", 2, peer, None, attrs=attrs, check_attrs=e.check_attrs,
                 shape="gated_bw" if e.shape == "gated" else "broadcast",
                 internal=True, dtypes=FLOAT + tuple(d for d in CPLX if d in e.dtypes), value_args=None,
                 samples=ew_samples(("any", dom if e.bw == "x" else "any"), e.samples.avoid, attrs=e.samples.attrs,
                                    lean=True, same_shape=True))


def _bw_rule(e: EwDef):
    name, saved = f"{e.name}_backward", e.bw

    def rule(ctx, d, grads, s):
        return (ctx.op(name, grads[0], s[saved], **d.attr_dict),)
    return rule


def add_ew_ops(defs) -> None:
    """Register table rows (and their generated backward rows) as op specs."""
    rows = []
    for e in defs:
        if e.bw:
            e = EwDef(**{**e.__dict__, "grad": _bw_rule(e), "saves": ("inputs",) if e.bw == "x" else ("outputs",)})
            rows.extend([e, _bw_row(e)])
        else:
            rows.append(e)
    for e in rows:
        if e.name in EW_OPS:
            raise ValueError(f"elementwise op {e.name!r} defined twice")
        EW_OPS[e.name] = e
        diff = tuple(range(e.arity if e.shape != "gated" else 1)) if e.grad else ()
        if e.value_args is not None and e.grad:
            diff = tuple(e.value_args)
        if e.diff_args is not None and e.grad:
            diff = tuple(e.diff_args)
        EW_SPECS[e.name] = register_spec(OpSpec(
            name=e.name, family="elementwise", arg_names=_arg_names(e), check=_make_check(e),
            dtypes=tuple(e.dtypes),
            attrs=e.attrs, torch_peer=e.torch_peer, torch_name=e.torch_name, dropin=e.dropin,
            torch_aliases=tuple(e.aliases),
            jax_name=e.jax_name, grad=_float_only(e, e.grad, diff) if e.grad else None, saves=e.saves,
            differentiable=diff, samples=e.samples.draw(e), errors=e.samples.errors(e), workloads=_workloads(e),
            tol=_ew_tol(e), category="elementwise", doc=e.doc,
        ))


# -- shared helpers for the rows -------------------------------------------------------------------
def tp(name):
    """torch peer: torch.<name>, torch.special.<name> or torch.nn.functional.<name>, resolved lazily."""
    def peer(*xs, **kw):
        import torch
        import torch.nn.functional as F

        fn = getattr(torch, name, None) or getattr(torch.special, name, None) or getattr(F, name)
        return fn(*xs, **kw)
    return peer


def dropin_ew(e_name: str, *arg_names: str, attr_names: tuple = (), unsupported: tuple = ()):
    """A drop-in adapter with torch's signature ``fn(<arg_names>, *, <attr_names>)``: tensor operands are passed
    through, Python scalars become 0-d tensors on the first tensor's device with torch's weak-scalar dtype."""
    n_ops = len(arg_names)

    def adapter(*args, **kwargs):
        # the common call, every operand a tensor given positionally: nothing to convert (host time: this is on
        # every drop-in call; the torch module is looked up once, not imported per call)
        torch = _TORCH[0] or _torch()
        if not kwargs and len(args) == n_ops:
            for a in args:
                if not isinstance(a, torch.Tensor):
                    break
            else:
                return args, {}
            if n_ops == 2:      # a tensor and a Python number (x * 0.5, 1 - p): the operand from one lookup
                a, b = args
                if type(b) in _NUMBERS and isinstance(a, torch.Tensor):
                    return (a, _number_operand(b, a)), {}
                if type(a) in _NUMBERS and isinstance(b, torch.Tensor):
                    return (_number_operand(a, b), b), {}
        for u in unsupported:   # 'out=None' / 'inplace=False' are torch's defaults: accepted
            v = kwargs.get(u)
            if v is not None and v is not False:
                raise UnsupportedError(e_name, f"argument '{u}' of the torch signature is not supported")
        kwargs = {k: v for k, v in kwargs.items() if k not in unsupported}
        names = list(arg_names) + list(attr_names)
        if len(args) > len(names):
            raise TypeError(f"{e_name}() takes {len(names)} positional arguments but {len(args)} were given")
        vals = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in vals:
                raise TypeError(f"{e_name}() got an unexpected or repeated argument '{k}'")
            vals[k] = v
        ops = [vals[n] for n in arg_names if n in vals]
        if len(ops) != len(arg_names):
            raise TypeError(f"{e_name}() missing operand(s): {[n for n in arg_names if n not in vals]}")
        for n, x in zip(arg_names, ops):
            if not isinstance(x, (torch.Tensor, bool, int, float, complex, np.number, np.bool_)):
                raise ArgumentTypeError(e_name, n, "a tensor or a number", given(x))
        tensors = [x for x in ops if isinstance(x, torch.Tensor)]
        if not tensors:
            raise ArgumentTypeError(e_name, arg_names[0], "a tensor (at least one operand must be one)",
                                    given(ops[0]))
        dev = tensors[0].device
        tdts = [DType[_tname(t)] for t in tensors]
        any_dim = any(t.dim() > 0 for t in tensors)
        ins = tuple(x if isinstance(x, torch.Tensor) else
                    scalar_operand(x, weak_scalar_dtype(x, tdts, any_dim).torch, dev) for x in ops)
        attrs = {n: vals[n] for n in attr_names if n in vals}
        return ins, attrs
    return adapter


_TORCH: list = [None]   # the torch module once a drop-in ran (ops/ import torch lazily: it is an optional dependency)
_NUMBERS = (bool, int, float)


def _number_operand(value, t):
    """``scalar_operand`` of a Python bool / int / float beside the one tensor ``t``: what the general path makes,
    with the weak-scalar dtype looked up per (value type, tensor dtype, tensor has dims) instead of worked out."""
    return scalar_operand(value, _weak_torch_dtype(type(value), t.dtype, t.dim() > 0), t.device)


@functools.lru_cache(maxsize=256)
def _weak_torch_dtype(kind, tdtype, dims: bool):
    from .._core.dtypes import as_dtype

    return weak_scalar_dtype(kind(0), (as_dtype(tdtype),), dims).torch


def _torch():
    import torch

    _TORCH[0] = torch
    return torch


def scalar_operand(value, tdt, device):
    """A Python number as a 0-d tensor operand, kept (bounded LRU) per (type, value, sign, dtype, device): a new
    CUDA scalar is a host-to-device copy that waits for the copy (~10 us, and a stall of the host's queue), paid
    once per distinct value instead of per call.  Operands are never written (the Plan API writes its outputs
    only), so one tensor serves every call."""
    sign = math.copysign(1.0, value) if type(value) is float else 0.0   # -0.0 == 0.0 but divides differently
    return _scalar_operand(type(value), value, sign, tdt, device)


@functools.lru_cache(maxsize=1024)
def _scalar_operand(kind, value, sign, tdt, device):
    import torch

    return torch.tensor(value, dtype=tdt, device=device)


def _tname(t):
    from .._core.dtypes import as_dtype

    return as_dtype(t.dtype).name


# the op names the elementwise family's backward rules compose (ctx.op; the rows' rules in ew_*.py and
# activation.py run inside this module's _float_only wrapper), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "abs_backward", "acos_backward", "acosh_backward", "angle_backward", "asin_backward", "asinh_backward",
                 "atan_backward", "atanh_backward", "celu_backward", "clamp_backward", "complex", "conj", "cos",
                 "cos_backward", "cosh_backward", "digamma_backward", "div", "div_backward_b", "elu_backward",
                 "erf_backward", "erfc_backward", "erfinv_backward", "exp", "exp2", "exp2_backward", "exp_backward",
                 "expm1_backward", "frac_backward", "ge", "geglu_backward", "gelu_backward", "gelu_mul",
                 "gelu_mul_backward", "glu_backward", "gt",
                 "hardshrink_backward", "hardsigmoid_backward", "hardswish_backward", "hardtanh_backward", "hypot",
                 "i0_backward", "imag", "ldexp", "le", "leaky_relu_backward", "lgamma_backward", "log",
                 "log10_backward", "log1p_backward", "log2_backward", "log_backward", "logical_and", "logical_or",
                 "logit_backward", "logsigmoid_backward", "lt", "minmax_backward", "mish_backward", "mul", "mul_scalar",
                 "nan_to_num_backward", "ne", "neg", "pow_backward_a", "pow_backward_b", "pow_scalar_backward",
                 "prelu_backward", "prelu_weight_grad", "real", "reciprocal_backward", "reglu_backward",
                 "relu6_backward", "relu_backward", "rrelu_backward", "rrelu_with_noise_backward", "rsqrt_backward",
                 "selu_backward", "sgn_backward", "sigmoid_backward", "sign", "silu_backward", "silu_mul",
                 "silu_mul_backward", "sin", "sin_backward",
                 "sinc_backward", "sinh_backward", "softplus_backward", "softshrink_backward", "softsign_backward",
                 "sqrt_backward", "square_backward", "sub", "swiglu_backward", "tan_backward", "tanh_backward",
                 "tanhshrink_backward", "threshold_backward", "to_dtype", "where_backward", "zeros_like")
