"""Indexing family, part 2: the scatter forms -- scatter (src tensor or scalar value; torch's legacy
reduce='add' | 'multiply'), scatter_add, scatter_reduce (sum / prod / mean / amax / amin, include_self) and put.

out = input.clone(), then for every position p of ``index``:  out[p with p[dim] := index[p]] (op)= src[p]
  scatter (no reduce): assignment (duplicate targets: one of the values, unspecified which, as torch);
  scatter_add / reduce='add' / 'sum': +; 'multiply' / 'prod': *; 'amax' / 'amin': max / min (NaN propagates);
  'mean': the sum over the scattered values (and input unless include_self=False) divided by their count
  (floor division for integers, as torch); include_self=False: a scattered position starts from the values
  scattered there only (positions nothing is scattered to keep input).
put(input, index, source, accumulate): the same on the flattened input with flat indices (negative wrap).

Index rules, dtypes and the out-of-range contract: see ``indexing.py``.  On the GPU the accumulating forms use
atomics (``backends/triton/indexing/scatter.py``): float sums, products and means depend on the order the atomics
land in, so those plans say ``deterministic=False``; integer sums, amax / amin and the assignments of distinct
targets are exact.

Backward (torch's formulas, ``derivatives.yaml`` / ``scatter_reduce_backward``): src's gradient is a gather of
the output gradient; input's is the gradient itself, zero where an assignment (or include_self=False) overwrote
it; prod divides the product by the factor (with torch's treatment of zeros), mean divides by the count, amax /
amin split the gradient evenly between the values equal to the result.  torch has no derivative for scatter's
legacy ``reduce=`` forms; ours are those of the matching scatter_reduce.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED, Attr, ErrorCase, Sample, TensorSpec, Workload, default_tol, set_bench_inputs
from ._common import check_nonneg, norm_axis
from .indexing import (_index_errors, _rng_index, _values, check_index, check_index_shape, index_bench_inputs,
                       index_spec, no_out, zeros_view)

__all__ = ["REDUCES", "LEGACY_REDUCE", "scatter_mode"]

REDUCES = ("sum", "prod", "mean", "amax", "amin")
LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}
declare_rule_ops(__name__, "scatter", "scatter_add", "scatter_reduce", "gather", "full", "mul", "div", "eq", "where",
                 "to_dtype", "logical_and", "slice", "pad", "take", "put")


def scatter_mode(desc) -> tuple[str | None, bool]:
    """(reduction or None for assignment, include_self) of any scatter-form descriptor."""
    op = desc.op
    if op == "scatter":
        r = desc.attr("reduce")
        return (LEGACY_REDUCE[r] if r else None), True
    if op == "scatter_add":
        return "sum", True
    if op == "scatter_reduce":
        return desc.attr("reduce"), desc.attr("include_self")
    if op == "put":
        return ("sum" if desc.attr("accumulate") else None), True
    raise KeyError(op)


def _operands(op, inputs, n, names):
    if len(inputs) not in n:
        raise InvalidProblemError(op, "inputs", f"{' or '.join(map(str, n))} operands ({', '.join(names)})", len(inputs))
    check_nonneg(op, names, [t.shape for t in inputs])


def _same_dtype(op, x, src, arg="src"):
    if src.dtype != x.dtype:
        raise DTypeMismatchError(op, arg, f"{x.dtype} (the input's)", str(src.dtype))


def _check_dim_form(op, inputs, attrs, src_required=True):
    _operands(op, inputs, (3,) if src_required else (2, 3), ("input", "index", "src"))
    x, idx = inputs[:2]
    src = inputs[2] if len(inputs) == 3 else None
    _values(op, x)
    check_index(op, "index", idx)
    if src is not None:
        _same_dtype(op, x, src)
    dim = norm_axis(op, "dim", attrs["dim"], len(x.shape))
    check_index_shape(op, x, idx, dim, src)
    return x, dim


def _refuse_bool(op, x, reduce):
    if x.dtype == DType.bool and reduce == "mean":
        raise UnsupportedError(op, "reduce='mean' on bool values is not defined (torch: not implemented for 'Bool')")


# -- scatter ----------------------------------------------------------------------------------------------------
def _check_scatter(inputs, attrs):
    op = "scatter"
    x, dim = _check_dim_form(op, inputs, attrs, src_required=False)
    value = attrs["value"]
    if (len(inputs) == 3) == (value is not None):
        raise InvalidProblemError(op, "value", "exactly one of a src tensor and a scalar value",
                                  "both" if value is not None else "neither")
    return {"dim": dim, "value": value, "reduce": attrs["reduce"]}, (TensorSpec(x.shape, x.dtype),)


def _crop(ctx, t, shape):
    """``t`` cut to its leading ``shape`` (src larger than index: only its first elements are scattered)."""
    for d, (a, b) in enumerate(zip(ctx.shape(t), shape)):
        if a != b:
            t = ctx.op("slice", t, dim=d, start=0, end=b)
    return t


def _pad_to(ctx, g, shape):
    """``g`` zero-padded at the end to ``shape`` (the unscattered tail of a larger src gets no gradient)."""
    gs = ctx.shape(g)
    if tuple(gs) == tuple(shape):
        return g
    pad = []
    for a, b in reversed(list(zip(gs, shape))):
        pad += [0, b - a]
    return ctx.op("pad", g, pad=tuple(pad))


def _full(ctx, shape, v, dt):
    return ctx.op("full", shape=tuple(shape), value=v, dtype=dt)


def reduce_grads(ctx, x, idx, src, g, out, dim, reduce, include_self):
    """(grad input, grad src) of a scatter of ``src`` (index-shaped) by ``reduce`` (None: assignment): torch's
    scatter_reduce_backward, composed of baracuda ops.  ``out`` is the forward's result (prod / amax / amin)."""
    xs, dt = ctx.shape(g), ctx.spec_of(g).dtype

    def gat(t):
        return ctx.op("gather", t, idx, dim=dim)

    def zero_scattered(t):   # the positions an assignment (or include_self=False) overwrote get none of it
        return ctx.op("scatter", t, idx, dim=dim, value=0.0)

    if reduce is None:
        return zero_scattered(g), gat(g)
    if reduce == "sum":
        gs, gsrc = g, gat(g)
    elif reduce == "mean":
        n = _full(ctx, xs, 1.0 if include_self else 0.0, dt)
        n = ctx.op("scatter_add", n, idx, _full(ctx, ctx.shape(idx), 1.0, dt), dim=dim)
        n = ctx.op("where", ctx.op("eq", n, _full(ctx, (), 0.0, dt)), _full(ctx, (), 1.0, dt), n)
        gs = ctx.op("div", g, n)
        gsrc = gat(gs)
    elif reduce == "prod":
        zero, one = _full(ctx, (), 0.0, dt), _full(ctx, (), 1.0, dt)
        masked_x = ctx.op("where", ctx.op("eq", x, zero), one, x)
        mxr = ctx.op("scatter_reduce", masked_x, idx, src, dim=dim, reduce="prod", include_self=include_self)
        gs = ctx.op("div", ctx.op("mul", g, mxr), masked_x)
        src_zero = ctx.op("eq", src, zero)
        nz = ctx.op("scatter_add", zeros_view(ctx, xs, dt), idx, ctx.op("to_dtype", src_zero, dtype=dt), dim=dim)
        single = ctx.op("logical_and", src_zero, ctx.op("eq", gat(nz), one))
        masked_src = ctx.op("where", single, one, src)
        msr = ctx.op("scatter_reduce", x, idx, masked_src, dim=dim, reduce="prod", include_self=include_self)
        gsrc = ctx.op("where", single, gat(ctx.op("mul", g, msr)),
                      ctx.op("div", gat(ctx.op("mul", g, out)), ctx.op("where", src_zero, one, src)))
    else:   # amax / amin: the gradient split evenly between the values equal to the result
        value = gat(out)
        x_is = ctx.op("eq", x, out)
        src_is = ctx.op("eq", src, value)
        n = ctx.op("scatter_add", ctx.op("to_dtype", x_is, dtype=dt), idx, ctx.op("to_dtype", src_is, dtype=dt),
                   dim=dim)
        gd = ctx.op("div", g, n)
        gs = ctx.op("mul", ctx.op("to_dtype", x_is, dtype=dt), gd)
        gsrc = ctx.op("mul", ctx.op("to_dtype", src_is, dtype=dt), gat(gd))
    if not include_self:
        gs = zero_scattered(gs)
    return gs, gsrc


def _dim_form_grad(reduce_of):
    def rule(ctx, d, grads, s):
        idx = s["index"]
        reduce, include_self = reduce_of(d)
        src = s.get("src")
        src_shape = d.inputs[2].shape if len(d.inputs) == 3 else None
        src_i = None
        if reduce in ("prod", "amax", "amin"):   # the rules that read src's values (index-shaped)
            if src is not None:
                src_i = _crop(ctx, src, ctx.shape(idx))
            else:    # the value form: the scalar broadcast to the index's shape
                src_i = _full(ctx, ctx.shape(idx), d.attr("value"), ctx.spec_of(grads[0]).dtype)
        gx, gsrc = reduce_grads(ctx, s.get("input"), idx, src_i, grads[0], s.get("out"), d.attr("dim"), reduce,
                                include_self)
        if src_shape is None:
            return gx, None
        return gx, None, _pad_to(ctx, gsrc, src_shape)
    return rule


def _scatter_saves(desc):
    reduce, _ = scatter_mode(desc)
    if reduce in ("prod", "amax", "amin"):
        return ("input", "index", "src", "out")
    return ("index",)


def _scatter_samples(rng):
    n = rng.standard_normal

    def perm_index(shape, size, dim):   # distinct targets along dim for every other coordinate (an assignment)
        idx = np.argsort(rng.random(shape[:dim] + (size,) + shape[dim + 1:]), axis=dim)
        return np.take(idx, np.arange(shape[dim]), axis=dim).astype(np.int64)

    yield Sample((n((4, 5)), perm_index((3, 5), 4, 0), n((3, 5))), {"dim": 0}, name="src-dim0")
    yield Sample((n((3, 6)), perm_index((3, 4), 6, 1).astype(np.int32), n((4, 5))), {"dim": -1}, name="src-larger-i32",
                 grad=False)   # (torch's autograd refuses a src larger than index: tests/indexing checks ours)
    yield Sample((n((2, 4, 3)), perm_index((2, 3, 3), 4, 1)), {"dim": 1, "value": 1.5}, name="value")
    yield Sample((n((4, 3)), _rng_index(rng, (5, 3), 4), n((5, 3))), {"dim": 0, "reduce": "add"}, name="legacy-add")
    yield Sample((n((4, 3)), _rng_index(rng, (5, 3), 4), n((5, 3))), {"dim": 0, "reduce": "multiply"},
                 name="legacy-multiply")
    yield Sample((n((3, 4)), _rng_index(rng, (3, 6), 4)), {"dim": 1, "value": 2.0, "reduce": "multiply"},
                 name="value-multiply")
    yield Sample((n((3, 4)), np.zeros((0, 4), np.int64), n((0, 4))), {"dim": 0}, name="empty-index")
    yield Sample((n(()), np.zeros((), np.int64), n(())), {"dim": 0}, name="0d")


def _scatter_errors():
    yield from _index_errors("scatter", three=True)
    x, i = ((3, 4), "f32"), ((2, 4), "i64")
    yield ErrorCase((x, i), {"dim": 0}, InvalidProblemError, r"scatter: argument 'value': expected exactly one", "none")
    yield ErrorCase((x, i, ((2, 4), "f32")), {"dim": 0, "value": 1.0}, InvalidProblemError,
                    r"scatter: argument 'value'", "both")
    yield ErrorCase((x, i, ((2, 4), "f64")), {"dim": 0}, DTypeMismatchError, r"scatter: argument 'src'", "src-dtype")
    yield ErrorCase((x, i, ((1, 4), "f32")), {"dim": 0}, InvalidProblemError, r"scatter: argument 'src'", "src-small")
    yield ErrorCase((x, i, ((2, 4), "f32")), {"dim": 0, "reduce": "max"}, InvalidProblemError,
                    r"scatter: argument 'reduce'", "reduce")


def _scatter_peer(x, i, src=None, dim=0, value=None, reduce=None):
    import warnings

    kw = {} if reduce is None else {"reduce": reduce}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return x.scatter(dim, i.long(), src if src is not None else value, **kw)


def _scatter_dropin(input, dim, index, src=None, *, value=None, reduce=None, out=None):
    """torch.scatter: the src tensor form and the value form (positional ``value`` where torch takes a number)."""
    import torch

    no_out("scatter", out)
    if src is not None and not isinstance(src, torch.Tensor):
        src, value = None, src
    if src is not None:
        return (input, index, src), {"dim": dim, "reduce": reduce}
    if isinstance(value, torch.Tensor):
        value = value.item()
    return (input, index), {"dim": dim, "value": value, "reduce": reduce}


def _scatter_cost(desc):
    x = desc.inputs[0]
    rest = sum(t.nbytes for t in desc.inputs[1:])
    # the copy of input (read + write), index and src once, one output element written per index element
    return 2 * x.nbytes + rest + desc.inputs[1].numel * x.dtype.itemsize, desc.inputs[1].numel


def _scatter_tol(dt):
    # the accumulating forms sum / multiply in f32 (f64 for f64) and round once: one rounding of the dtype; the
    # assignment is exact (the spec's data-movement samples have distinct targets)
    return default_tol(dt)


index_spec("scatter", _check_scatter, arg_names=("input", "index", "src"),
           attrs=(Attr("dim", "int", REQUIRED), Attr("value", "number", None, optional=True),
                  Attr("reduce", "str", None, optional=True, choices=("add", "multiply"))),
           peer=_scatter_peer, dropin=_scatter_dropin, grad=_dim_form_grad(scatter_mode), saves=_scatter_saves,
           differentiable=(0, 2), samples=_scatter_samples, errors=_scatter_errors, cost=_scatter_cost,
           tol=_scatter_tol, jax_name="jax.lax.scatter",
           workloads=[Workload("scatter-rows-[65536,4096]<-[16384,4096]-bf16",
                               ((65536, 4096), ((16384, 4096), DType.i64), (16384, 4096)), DType.bf16, {"dim": 0})],
           doc="torch.scatter (src or value; legacy reduce='add'/'multiply').")


# -- scatter_add / scatter_reduce -------------------------------------------------------------------------------
def _check_scatter_add(inputs, attrs):
    x, dim = _check_dim_form("scatter_add", inputs, attrs)
    return {"dim": dim}, (TensorSpec(x.shape, x.dtype),)


def _check_scatter_reduce(inputs, attrs):
    op = "scatter_reduce"
    x, dim = _check_dim_form(op, inputs, attrs)
    _refuse_bool(op, x, attrs["reduce"])
    return {"dim": dim, "reduce": attrs["reduce"], "include_self": attrs["include_self"]}, (TensorSpec(x.shape, x.dtype),)


def _reduce_samples(reduces):
    def samples(rng):
        n = rng.standard_normal
        for k, r in enumerate(reduces):
            attrs = {} if r is None else {"reduce": r}
            for inc in ((True,) if r is None else (True, False)):
                a = dict(attrs, **({} if r is None else {"include_self": inc}))
                yield Sample((n((4, 3)), _rng_index(rng, (6, 3), 4), n((6, 3))), dict(a, dim=0), name=f"{r}-{inc}-dim0")
                yield Sample((n((3, 5)), _rng_index(rng, (2, 7), 5, dtype=np.int32), n((3, 8))), dict(a, dim=1),
                             name=f"{r}-{inc}-dim1-larger-src-i32", grad=False)
        a = {} if reduces[0] is None else {"reduce": reduces[0]}
        yield Sample((n((2, 3, 4)), _rng_index(rng, (2, 5, 4), 3), n((2, 5, 4))), dict(a, dim=1), name="3d")
        yield Sample((n((3, 4)), np.zeros((0, 4), np.int64), n((0, 4))), dict(a, dim=0), name="empty-index")
    return samples


def _reduce_errors(op):
    def errors():
        yield from _index_errors(op, three=True, **({"reduce": "sum"} if op == "scatter_reduce" else {}))
        a = {"reduce": "sum"} if op == "scatter_reduce" else {}
        x, i = ((3, 4), "f32"), ((2, 4), "i64")
        yield ErrorCase((x, i, ((2, 4), "f16")), dict(a, dim=0), DTypeMismatchError, rf"{op}: argument 'src'", "src-dtype")
        yield ErrorCase((x, i), dict(a, dim=0), InvalidProblemError, rf"{op}: argument 'inputs'", "no-src")
        if op == "scatter_reduce":
            yield ErrorCase((x, i, ((2, 4), "f32")), {"dim": 0, "reduce": "max"}, InvalidProblemError,
                            r"scatter_reduce: argument 'reduce'", "reduce")
            b = ((3, 4), "bool")
            yield ErrorCase((b, i, ((2, 4), "bool")), {"dim": 0, "reduce": "mean"}, UnsupportedError,
                            r"scatter_reduce: reduce='mean' on bool", "bool-mean")
    return errors


_SCATTER_ADD_WL = Workload("scatter_add-[65536,64]<-[16M,64]-f32", ((65536, 64), ((1 << 24, 64), DType.i64),
                                                                    (1 << 24, 64)), DType.f32, {"dim": 0})

index_spec("scatter_add", _check_scatter_add, arg_names=("input", "index", "src"),
           attrs=(Attr("dim", "int", REQUIRED),),
           peer=lambda x, i, src, dim: x.scatter_add(dim, i.long(), src),
           dropin=lambda input, dim, index, src: ((input, index, src), {"dim": dim}),
           grad=_dim_form_grad(scatter_mode), saves=_scatter_saves, differentiable=(0, 2),
           samples=_reduce_samples((None,)), errors=_reduce_errors("scatter_add"), cost=_scatter_cost,
           tol=_scatter_tol, jax_name="jax.lax.scatter_add", workloads=[_SCATTER_ADD_WL],
           doc="torch.scatter_add: out = input; out[.. index ..] += src (atomics on the GPU).")

index_spec("scatter_reduce", _check_scatter_reduce, arg_names=("input", "index", "src"),
           attrs=(Attr("dim", "int", REQUIRED), Attr("reduce", "str", REQUIRED, choices=REDUCES),
                  Attr("include_self", "bool", True)),
           peer=lambda x, i, src, dim, reduce, include_self=True: x.scatter_reduce(dim, i.long(), src, reduce,
                                                                                   include_self=include_self),
           dropin=lambda input, dim, index, src, reduce, *, include_self=True, out=None: no_out("scatter_reduce", out) or
           ((input, index, src), {"dim": dim, "reduce": reduce, "include_self": include_self}),
           grad=_dim_form_grad(scatter_mode), saves=_scatter_saves, differentiable=(0, 2),
           samples=_reduce_samples(REDUCES), errors=_reduce_errors("scatter_reduce"), cost=_scatter_cost,
           tol=_scatter_tol, jax_name="jax.numpy.ndarray.at",
           workloads=[Workload("scatter_reduce-amax-[65536,64]<-[4M,64]-f32",
                               ((65536, 64), ((1 << 22, 64), DType.i64), (1 << 22, 64)), DType.f32,
                               {"dim": 0, "reduce": "amax"})],
           doc="torch.scatter_reduce (sum / prod / mean / amax / amin, include_self).")


# -- put ----------------------------------------------------------------------------------------------------------
def _check_put(inputs, attrs):
    op = "put"
    _operands(op, inputs, (3,), ("input", "index", "source"))
    x, idx, src = inputs
    _values(op, x)
    check_index(op, "index", idx, long_only=True)
    _same_dtype(op, x, src, "source")
    if math.prod(idx.shape) != math.prod(src.shape):
        raise InvalidProblemError(op, "source", f"as many elements as index ({math.prod(idx.shape)})", src.shape)
    if math.prod(idx.shape) and not math.prod(x.shape):
        raise InvalidProblemError(op, "index", "no indices into an empty input", idx.shape)
    return {"accumulate": attrs["accumulate"]}, (TensorSpec(x.shape, x.dtype),)


def _g_put(ctx, d, grads, s):
    """torch: input gets grad (accumulate) or grad with the written positions zeroed; source gets take(grad)."""
    g = grads[0]
    x, idx, src = d.inputs
    gx = g if d.attr("accumulate") else ctx.op("put", g, s["index"], _full(ctx, src.shape, 0.0, ctx.spec_of(g).dtype),
                                                accumulate=False)
    return gx, None, ctx.reshape(ctx.op("take", g, s["index"]), src.shape)


def _put_samples(rng):
    n = rng.standard_normal
    distinct = lambda size, k: (rng.permutation(size)[:k] - rng.integers(0, 2, k) * size).astype(np.int64)
    yield Sample((n((3, 4)), distinct(12, 5), n((5,))), {}, name="assign-neg")
    yield Sample((n((2, 3)), distinct(6, 4).reshape(2, 2), n((4,))), {}, name="assign-2d-index")
    yield Sample((n((3, 4)), _rng_index(rng, (7,), 12, wrap=True), n((7,))), {"accumulate": True}, name="accumulate")
    yield Sample((n((5,)), _rng_index(rng, (2, 3), 5), n((3, 2))), {"accumulate": True}, name="accumulate-shapes")
    yield Sample((n((3, 4)), np.zeros((0,), np.int64), n((0,))), {}, name="empty-index")


def _put_errors():
    x = ((3, 4), "f32")
    yield ErrorCase((x, ((2,), "i32"), ((2,), "f32")), {}, DTypeMismatchError, r"put: argument 'index': expected dtype i64", "i32")
    yield ErrorCase((x, ((2,), "i64"), ((3,), "f32")), {}, InvalidProblemError, r"put: argument 'source'", "numel")
    yield ErrorCase((x, ((2,), "i64"), ((2,), "f64")), {}, DTypeMismatchError, r"put: argument 'source'", "dtype")


index_spec("put", _check_put, arg_names=("input", "index", "source"), attrs=(Attr("accumulate", "bool", False),),
           peer=lambda x, i, src, accumulate=False: x.put(i, src, accumulate=accumulate),
           dropin=lambda input, index, source, accumulate=False: ((input, index, source), {"accumulate": accumulate}),
           grad=_g_put, saves=("index",), differentiable=(0, 2), samples=_put_samples, errors=_put_errors,
           cost=_scatter_cost, tol=_scatter_tol, jax_name="jax.numpy.ndarray.at",
           workloads=[Workload("put-accumulate-[4096,4096]<-[16M]-f32", ((4096, 4096), ((1 << 24,), DType.i64),
                                                                         (1 << 24,)), DType.f32, {"accumulate": True})],
           doc="torch.put: input.flatten()[index] = source (accumulate: +=); negative indices wrap.")


def _extent(d):
    return d.inputs[0].numel if d.op == "put" else (d.inputs[0].shape or (1,))[d.attr("dim")]


for _op in ("scatter", "scatter_add", "scatter_reduce", "put"):
    set_bench_inputs(_op, index_bench_inputs(1, _extent))
