"""Masked indexing (issue 17): masked_fill, masked_scatter, masked_select, nonzero, nonzero_static, argwhere.

Semantics are torch's.  ``mask`` is a bool tensor broadcast with ``input``; the out-of-place results have the
broadcast shape (torch's ``expand_outplace``).  Elements are visited in row-major order of that shape:

* masked_fill(input, mask, value): where(mask, value, input).
* masked_scatter(input, mask, source): the k-th True position (row-major) takes ``source.reshape(-1)[k]``; the
  others keep the input.  More True positions than source elements is an ``InvalidProblemError`` (found by the
  kernel: the flag of ``_core/checks.py``; nothing is read past the source).
* masked_select(input, mask): the elements at the True positions, 1-D.  Its length is the data's: the drop-in reads
  the count on the host first (torch does the same), then runs the op with ``count`` as an attribute (the Plan
  API's caller passes it; a count different from the mask's is an error, never a short or overlong write).
* nonzero(input, as_tuple=False) / argwhere(input): the (count, ndim) int64 coordinates of the nonzero elements,
  row-major (as_tuple: ndim tensors of (count,); a 0-d input gives (count, 0), as_tuple one (count,) of zeros);
  ``count`` as for masked_select.
* nonzero_static(input, size, fill_value=-1): the first ``size`` coordinates, the rows past the count filled with
  ``fill_value``: a fixed output shape, so it runs without a host read (CUDA-graph capturable).

GPU algorithm (no host loop over elements): a block count of the mask, an exclusive prefix over the blocks, then
each block writes its elements at (block offset + in-block rank).

Gradients: masked_fill -> masked_fill(grad, mask, 0) summed to the input's shape; masked_scatter -> that for the
input and ``masked_scatter_backward`` (the first source.numel() selected gradients, zeros after) for the source;
masked_select -> masked_scatter of the gradient into zeros, summed to the input's shape.
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec
from ._common import broadcast_shapes, check_nonneg
from .indexing_index import VALUE_TYPES, fill_value_grad, fill_value_operand, host_count, value_operands

__all__ = ["MASKED_OPS", "count_error", "np_nonzero"]


def count_error(op: str, arg: str, expected: str, got: int) -> InvalidProblemError:
    return InvalidProblemError(op, arg, expected, f"{got} True / nonzero elements")


def np_nonzero(x) -> np.ndarray:
    """(count, ndim) int64 coordinates of the nonzero elements of ``x``, row-major (a 0-d x: (count, 0))."""
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((int(x != 0), 0), np.int64)
    return np.stack(np.nonzero(x), axis=1).astype(np.int64).reshape(-1, x.ndim)


# -- shape / dtype rules -------------------------------------------------------------------------------
def _need(op, inputs, names):
    if len(inputs) != len(names):
        raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))
    check_nonneg(op, names, [t.shape for t in inputs])


def _values(op, x, dtypes=VALUE_TYPES):
    if x.dtype not in dtypes:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, dtypes))}")


def _mask(op, x, mask, arg="mask"):
    if mask.dtype != DType.bool:
        raise DTypeMismatchError(op, arg, "bool", str(mask.dtype))
    return broadcast_shapes(op, ("input", arg), (x.shape, mask.shape))


def _check_fill(inputs, attrs):
    op = "masked_fill"
    inputs = fill_value_operand(op, inputs, attrs)
    _need(op, inputs, ("input", "mask"))
    x, mask = inputs
    _values(op, x)
    shape = _mask(op, x, mask)
    v = attrs["value"]
    if v is not None and not x.dtype.is_floating and not float(v).is_integer() and np.isfinite(float(v)):
        raise InvalidProblemError(op, "value", f"an integer for the integral input dtype {x.dtype}", v)
    return attrs, (TensorSpec(shape, x.dtype),)


def _check_scatter(inputs, attrs):
    op = "masked_scatter"
    _need(op, inputs, ("input", "mask", "source"))
    x, mask, src = inputs
    _values(op, x)
    if src.dtype != x.dtype:
        raise DTypeMismatchError(op, "source", str(x.dtype), str(src.dtype))
    return attrs, (TensorSpec(_mask(op, x, mask), x.dtype),)


def _check_select(inputs, attrs):
    op = "masked_select"
    _need(op, inputs, ("input", "mask"))
    x, mask = inputs
    _values(op, x)
    shape = _mask(op, x, mask)
    n = int(np.prod(shape)) if shape else 1
    if attrs["count"] > n:
        raise InvalidProblemError(op, "count", f"a count <= {n} (the broadcast mask's size)", attrs["count"])
    return attrs, (TensorSpec((attrs["count"],), x.dtype),)


def _check_nonzero(op):
    def check(inputs, attrs):
        _need(op, inputs, ("input",))
        (x,) = inputs
        _values(op, x)
        nd = len(x.shape)
        rows = attrs["size"] if op == "nonzero_static" else attrs["count"]
        if op != "nonzero_static" and rows > x.numel:
            raise InvalidProblemError(op, "count", f"a count <= {x.numel} (the input's size)", rows)
        if op == "nonzero" and attrs["as_tuple"]:
            return attrs, tuple(TensorSpec((rows,), DType.i64) for _ in range(max(nd, 1)))
        return attrs, (TensorSpec((rows, nd), DType.i64),)
    return check


def _check_scatter_bw(inputs, attrs):
    op = "masked_scatter_backward"
    _need(op, inputs, ("grad", "mask"))
    g, mask = inputs
    _values(op, g, FLOAT_TYPES)
    shape = _mask(op, g, mask)
    if shape != g.shape:
        raise InvalidProblemError(op, "mask", f"a shape broadcastable to grad's {g.shape}", mask.shape)
    return attrs, (TensorSpec(tuple(attrs["source_shape"]), g.dtype),)


# -- backward rules -----------------------------------------------------------------------------------
def _g_fill(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None, None)[:len(d.inputs)]
    filled = ctx.op("masked_fill", g, s["mask"], value=0.0)
    gx = ctx.reduce_to(filled, d.inputs[0].shape) if ctx.needs[0] else None
    if len(d.inputs) == 3:
        return (gx, None, fill_value_grad(ctx, g, filled) if ctx.needs[2] else None)
    return (gx, None)


def _g_scatter(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None, None)
    gx = ctx.reduce_to(ctx.op("masked_fill", g, s["mask"], value=0.0), d.inputs[0].shape) if ctx.needs[0] else None
    gs = ctx.op("masked_scatter_backward", g, s["mask"], source_shape=d.inputs[2].shape) if ctx.needs[2] else None
    return (gx, None, gs)


def _g_select(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None)
    x, mask = d.inputs
    shape = broadcast_shapes(d.op, ("input", "mask"), (x.shape, mask.shape))
    z = ctx.op("full", shape=shape, value=0.0, dtype=x.dtype)
    return (ctx.reduce_to(ctx.op("masked_scatter", z, s["mask"], g), x.shape), None)


# -- torch peers and drop-ins -------------------------------------------------------------------------
def _peer_fill(x, mask, *tv, value=None):
    import torch

    x, mask = torch.broadcast_tensors(x, mask)
    return x.masked_fill(mask, tv[0].to(x.dtype) if tv else value)


def _peer_scatter(x, mask, src):
    import torch

    x, mask = torch.broadcast_tensors(x, mask)
    return x.masked_scatter(mask, src)


def _peer_select(x, mask, count):
    import torch

    return torch.masked_select(x, mask)


def _peer_nonzero(x, count, as_tuple=False):
    import torch

    return torch.nonzero(x, as_tuple=True) if as_tuple else torch.nonzero(x)


def _peer_argwhere(x, count):
    import torch

    return torch.argwhere(x)


def _peer_static(x, size, fill_value=-1):
    import torch

    return torch.nonzero_static(x, size=size, fill_value=fill_value)


def _peer_scatter_bw(g, mask, source_shape):
    import torch

    sel = torch.masked_select(g, mask)
    n = int(np.prod(source_shape)) if source_shape else 1
    out = torch.zeros(n, dtype=g.dtype, device=g.device)
    out[:min(n, sel.numel())] = sel[:n]
    return out.reshape(source_shape)


def _di_fill(input, mask, value):
    return value_operands((input, mask), value)


def _di_scatter(input, mask, source):
    return (input, mask, source), {}


def _di_select(input, mask, *, out=None):
    import torch

    if out is not None:
        raise UnsupportedError("masked_select", "out= is not supported by the drop-in (Plan.run(out=) is)")
    if not isinstance(mask, torch.Tensor) or not isinstance(input, torch.Tensor):
        raise UnsupportedError("masked_select", "input and mask must be tensors")
    m = mask.expand(torch.broadcast_shapes(input.shape, mask.shape)) if mask.dtype == torch.bool else mask
    return (input, mask), {"count": host_count(m) if mask.dtype == torch.bool else 0}


def _di_nonzero(input, *, out=None, as_tuple=False):
    if out is not None:
        raise UnsupportedError("nonzero", "out= is not supported by the drop-in (Plan.run(out=) is)")
    return (input,), {"count": host_count(input), "as_tuple": as_tuple}


def _di_argwhere(input):
    return (input,), {"count": host_count(input)}


def _di_static(input, *, size, fill_value=-1):
    return (input,), {"size": size, "fill_value": fill_value}


def _tuple_result(out):
    """nonzero's result: a tuple of 1-D tensors for as_tuple (one for a 0-d or 1-D input), else the 2-D tensor."""
    if isinstance(out, (tuple, list)):
        return tuple(out)
    return (out,) if out.dim() == 1 else out


# -- samples, errors, workloads -------------------------------------------------------------------------
_SHAPES = (((3, 5), (3, 5)), ((2, 3, 4), (3, 1)), ((4, 1), (4, 6)), ((7,), ()), ((), ()), ((0, 3), (3,)),
           ((6, 33), (6, 33)))


def _mask_of(rng, shape):
    return np.asarray(rng.random(shape) < 0.4)


def _samples(op):
    def samples(rng):
        for xs, ms in _SHAPES:
            x = rng.standard_normal(xs)
            mask = _mask_of(rng, ms)
            name = f"{xs}-mask{ms}"
            bshape = np.broadcast_shapes(xs, ms)
            count = int(np.broadcast_to(mask, bshape).sum())
            if op == "masked_fill":
                yield Sample((x, mask), {"value": -2.5 if len(xs) % 2 else 3}, name=name)
                if len(xs) == 2:
                    yield Sample((x, mask, rng.standard_normal(())), {}, name=name + "-tensor-value")
            elif op == "masked_scatter":
                extra = 3 if len(xs) % 2 else 0
                yield Sample((x, mask, rng.standard_normal((count + extra,))), {}, name=name)
            elif op == "masked_select":
                yield Sample((x, mask), {"count": count}, name=name)
        if op == "masked_scatter":
            x, m = rng.standard_normal((3, 4)), _mask_of(rng, (3, 4))
            yield Sample((x, m, rng.standard_normal((2, 7))), {}, name="2d-source")
        if op == "masked_scatter_backward":
            for xs, ms in _SHAPES:
                g, m = rng.standard_normal(np.broadcast_shapes(xs, ms)), np.broadcast_to(_mask_of(rng, ms), np.broadcast_shapes(xs, ms))
                c = int(m.sum())
                for ss in ((c,), (c + 2, 1), ((max(c - 1, 0)),)):
                    yield Sample((g, m.copy()), {"source_shape": ss}, name=f"{xs}-{ss}", grad=False)

    return samples


def _nz_samples(op):
    def samples(rng):
        # zeros and values in [1, 2) (nonzero in every dtype, bool included: the count does not depend on the dtype)
        # (the last: no zeros, so the generic plan-reuse test's fresh normal inputs keep the count)
        for i, shape in enumerate(((3, 5), (2, 3, 4), (7,), (), (0, 3), (5, 40), (2, 1, 3, 2))):
            x = np.where(rng.random(shape) < (0.4 if i < 6 else 0.0), 0.0, 1.0 + rng.random(shape))
            c = int(np.count_nonzero(x))
            if op == "nonzero_static":
                for size, fill in ((c, -1), (c + 3, -1), (max(c - 2, 0), 7)):
                    yield Sample((x,), {"size": size, "fill_value": fill}, name=f"{shape}-size{size}", grad=False)
            elif op == "nonzero":
                for as_tuple in (False, True):
                    yield Sample((x,), {"count": c, "as_tuple": as_tuple}, name=f"{shape}-t{as_tuple}", grad=False)
            else:
                yield Sample((x,), {"count": c}, name=f"{shape}", grad=False)
    return samples


def _errors(op):
    def errors():
        f = ((3, 4), "f32")
        b = ((3, 4), "bool")
        if op in ("masked_fill", "masked_select", "masked_scatter"):
            src = (((12,), "f32"),) if op == "masked_scatter" else ()
            at = {"value": 1.0} if op == "masked_fill" else {"count": 2} if op == "masked_select" else {}
            yield ErrorCase((f, ((3, 4), "f32")) + src, at, DTypeMismatchError, rf"{op}: argument 'mask': expected dtype bool",
                            "float-mask")
            yield ErrorCase((f, ((2, 4), "bool")) + src, at, InvalidProblemError, rf"{op}: argument 'mask': expected a shape "
                            "broadcastable", "mask-shape")
            yield ErrorCase((((3, 4), "c64"), b) + ((((12,), "c64"),) if src else ()), at, UnsupportedError,
                            rf"{op}: argument 'input' has dtype c64", "complex")
        if op == "masked_scatter":
            yield ErrorCase((f, b, ((12,), "f16")), {}, DTypeMismatchError, r"argument 'source': expected dtype f32", "src-dtype")
        if op == "masked_fill":
            yield ErrorCase((((3, 4), "i32"), b), {"value": 0.5}, InvalidProblemError, r"argument 'value': expected an integer",
                            "int-frac")
            yield ErrorCase((f, b), {}, InvalidProblemError, r"argument 'value'", "no-value")
        if op == "masked_select":
            yield ErrorCase((f, b), {"count": 13}, InvalidProblemError, r"argument 'count': expected a count <= 12", "count")
        if op in ("nonzero", "argwhere"):
            yield ErrorCase((f,), {"count": 13}, InvalidProblemError, r"argument 'count': expected a count <= 12", "count")
            yield ErrorCase((f,), {"count": -1}, InvalidProblemError, r"argument 'count'", "neg-count")
        if op == "nonzero_static":
            yield ErrorCase((f,), {"size": -1}, InvalidProblemError, r"argument 'size'", "neg-size")
            yield ErrorCase((f,), {}, InvalidProblemError, r"argument 'size'", "no-size")
    return errors


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), 0


_FILL_WL = (
    # the row: HF attention masks: a [4, 32, 4096, 4096] bf16 score tensor filled through a bool mask broadcast
    # from [4, 1, 4096, 4096] (one read + one write of 4 GiB: the copy roofline)
    Workload("masked_fill-[4,32,4096,4096]-bf16-mask[4,1,4096,4096]", ((4, 32, 4096, 4096), ((4, 1, 4096, 4096), DType.bool)),
             DType.bf16, {"value": -1e4}),
)
_COUNT = Attr("count", "int", ge=0, expected="the number of True / nonzero elements (a non-negative int)")

_DEFS = {
    "masked_fill": dict(arg_names=("input", "mask", "value"), check=_check_fill,
                        attrs=(Attr("value", "number", None, optional=True),),
                        torch_peer=_peer_fill, dropin=_di_fill, grad=_g_fill, saves=("mask",), differentiable=(0, 2),
                        samples=_samples("masked_fill"), workloads=_FILL_WL),
    "masked_scatter": dict(arg_names=("input", "mask", "source"), check=_check_scatter, attrs=(),
                           torch_peer=_peer_scatter, dropin=_di_scatter, grad=_g_scatter, saves=("mask",),
                           differentiable=(0, 2), samples=_samples("masked_scatter")),
    "masked_select": dict(arg_names=("input", "mask"), check=_check_select, attrs=(_COUNT,), torch_peer=_peer_select,
                          dropin=_di_select, grad=_g_select, saves=("mask",), differentiable=(0,),
                          samples=_samples("masked_select")),
    "nonzero": dict(arg_names=("input",), check=_check_nonzero("nonzero"),
                    attrs=(_COUNT, Attr("as_tuple", "bool", False)), torch_peer=_peer_nonzero, dropin=_di_nonzero,
                    dropin_result=_tuple_result, samples=_nz_samples("nonzero")),
    "argwhere": dict(arg_names=("input",), check=_check_nonzero("argwhere"), attrs=(_COUNT,),
                     torch_peer=_peer_argwhere, dropin=_di_argwhere, samples=_nz_samples("argwhere")),
    "nonzero_static": dict(arg_names=("input",), check=_check_nonzero("nonzero_static"),
                           attrs=(Attr("size", "int", ge=0, expected="a non-negative int"), Attr("fill_value", "int", -1)),
                           torch_peer=_peer_static, dropin=_di_static, samples=_nz_samples("nonzero_static")),
}
MASKED_OPS = tuple(_DEFS)
for _name, _kw in _DEFS.items():
    register_spec(OpSpec(name=_name, family="indexing", dtypes=VALUE_TYPES, torch_name=f"torch.{_name}",
                         errors=_errors(_name), tol=lambda dt: (0.0, 0.0), cost=_cost,
                         # the input's gradient sums over the broadcast dims (reduce_to): a reduction's tolerance
                         grad_tol=default_tol, category="indexing",
                         doc=f"torch.{_name}: see the module docstring of baracuda.ops.indexing_masked.", **_kw))
del _name, _kw

register_spec(OpSpec(
    name="masked_scatter_backward", family="indexing", arg_names=("grad", "mask"), check=_check_scatter_bw,
    dtypes=FLOAT_TYPES, attrs=(Attr("source_shape", "shape"),), torch_peer=_peer_scatter_bw,
    torch_name="torch autograd rule of masked_scatter (source)", samples=_samples("masked_scatter_backward"),
    tol=lambda dt: (0.0, 0.0), cost=_cost, category="indexing",
    doc="gradient of masked_scatter's source: the first source.numel() gradients at the True positions, zeros after"))

declare_rule_ops(__name__, "full", "sum", "sub", "masked_fill", "masked_scatter", "masked_scatter_backward")
