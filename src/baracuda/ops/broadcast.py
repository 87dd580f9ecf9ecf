"""broadcast_to (torch.broadcast_to): the backward of sum/mean, and its own backward is a reduce-to (sum);
reduce_to (the seeds' reduce-to, torch's ``Tensor.sum_to_size``): sum a broadcast gradient back to a shape, whose
backward is a broadcast_to.

``shape`` is the target shape; ``dtype`` (internal, default None = the input's dtype) lets the backward of
``sum(..., dtype=)`` hand the gradient back in the input's dtype in the same pass (a widening or
narrowing copy), so no separate cast kernel runs.
"""
from __future__ import annotations


from .._core.dtypes import FLOAT_TYPES, as_dtype
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from .reduction import sum_tol
from .reduction_prod_nan_logic_minmax import _prod_tol

__all__ = ["broadcast_target", "reduce_dims", "reduce_to_parts"]


def broadcast_target(op: str, src: tuple, shape) -> tuple[int, ...]:
    """torch.broadcast_to's rule: align right; each source dim must equal the target's or be 1."""
    if len(shape) < len(src):
        raise InvalidProblemError(op, "shape", f"at least {len(src)} dims to broadcast {src}", shape)
    lead = len(shape) - len(src)
    out = list(shape)
    for i, s in enumerate(shape):
        if s == -1:
            if i < lead:
                raise InvalidProblemError(op, "shape", "-1 only on dims that exist in the input", shape)
            out[i] = src[i - lead]
        elif s < 0:
            raise InvalidProblemError(op, "shape", "non-negative sizes (or -1)", shape)
    for i, d in enumerate(src):
        if d != 1 and d != out[lead + i]:
            raise InvalidProblemError(op, "shape", f"a shape {src} broadcasts to (dim {lead + i}: {d} vs "
                                                   f"{out[lead + i]})", shape)
    return tuple(out)


# the target shape: ints (broadcast_to takes -1 for "keep the input's size")
_SHAPE = Attr("shape", "ints", expected="a target shape (a sequence of ints)")


def _operand(op, spec, inputs):
    """The single operand of broadcast_to / reduce_to, after the arity and dtype checks."""
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    spec.check_dtypes(inputs)
    return inputs[0]


def _check(inputs, attrs):
    op = "broadcast_to"
    x = _operand(op, SPEC, inputs)
    shape = broadcast_target(op, x.shape, attrs["shape"])
    dt = attrs["dtype"]
    if dt is not None:
        if dt not in FLOAT_TYPES:
            raise UnsupportedError(op, f"argument 'dtype' is {dt}; supported: {', '.join(map(str, FLOAT_TYPES))}")
        if dt == x.dtype:
            dt = None
    return {"shape": shape, "dtype": dt}, (TensorSpec(shape, dt or x.dtype),)


def _grad(ctx, d, grads, s):
    x = d.inputs[0]
    g = grads[0]
    gshape, shape = d.outputs[0].shape, x.shape
    lead = len(gshape) - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1)
    cast = x.dtype if d.outputs[0].dtype != x.dtype else None
    if dims:
        r = ctx.op("sum", g, dims=dims, keepdim=False, dtype=cast)
    elif cast is not None:
        r = ctx.op("broadcast_to", g, shape=gshape, dtype=cast)
    else:
        r = g
    return (ctx.reshape(r, shape),)


def _peer(x, shape, dtype=None):
    r = x.broadcast_to(tuple(shape))
    return r.to(as_dtype(dtype).torch) if dtype is not None else r


def _dropin(input, size):
    return (input,), {"shape": tuple(int(s) for s in size)}


def _samples(rng):
    for src, shape in [((3, 1), (3, 5)), ((5,), (2, 3, 5)), ((), (4, 2)), ((1, 4, 1), (2, 4, 3)), ((3, 5), (3, 5)),
                       ((1,), (0,)), ((2, 1, 3), (2, 0, 3)), ((7, 1), (-1, 6))]:
        yield Sample((rng.standard_normal(src),), {"shape": shape}, name=f"{src}->{shape}")
    yield Sample((rng.standard_normal((4, 1)),), {"shape": (4, 3), "dtype": "f64"}, name="to-f64")


def _errors():
    yield ErrorCase((((3, 2), "f32"),), {"shape": (3, 4)}, InvalidProblemError,
                    r"broadcast_to: argument 'shape': expected a shape \(3, 2\) broadcasts to", "incompatible")
    yield ErrorCase((((3, 2), "f32"),), {"shape": (2,)}, InvalidProblemError, r"at least 2 dims", "too-few-dims")
    yield ErrorCase((((3,), "i32"),), {"shape": (3,)}, UnsupportedError, r"dtype i32", "int-dtype")
    yield ErrorCase((((3,), "f32"),), {"shape": (3,), "bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")


def _cost(desc):
    return desc.inputs[0].nbytes + desc.outputs[0].nbytes, 0


SPEC = register_spec(OpSpec(
    name="broadcast_to", family="broadcast", arg_names=("x",), check=_check, dtypes=FLOAT_TYPES,
    attrs=(_SHAPE, Attr("dtype", "dtype", None, optional=True)), torch_peer=_peer, torch_name="torch.broadcast_to", dropin=_dropin,
    jax_name="jax.numpy.broadcast_to", grad=_grad, saves=(), differentiable=(0,), samples=_samples,
    errors=_errors, tol=lambda dt: (0.0, 0.0),   # a copy: exact (a dtype= widening is exact too)
    grad_tol=lambda dt: tuple(2 * t for t in sum_tol(dt)),   # the backward is a sum
    workloads=(Workload("broadcast_to-[2048]->[8,4096,2048]-bf16", ((2048,),), as_dtype("bf16"),
                        {"shape": (8, 4096, 2048)}),),
    cost=_cost, category="data_movement",
))


# -- reduce_to (the seeds' reduce-to, torch's Tensor.sum_to_size): the adjoint of broadcast_to --------------
REDUCE_TO_MODES = ("sum", "amax", "amin", "prod")   # the seeds' Sum / Max / Min / Prod


def reduce_dims(src: tuple, shape: tuple) -> tuple[int, ...]:
    """The axes of src that reduce away to reach shape (shape broadcasts to src): the leading extra axes and
    those where shape has 1 and src does not."""
    lead = len(src) - len(shape)
    return tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and src[lead + i] != 1)


def reduce_to_parts(desc) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(dims, keepdim shape): the reduction that computes reduce_to with keepdim=True; its result has the
    target's elements in the same order, so a reshape gives the target shape."""
    src = desc.inputs[0].shape
    dims = reduce_dims(src, desc.attr("shape"))
    return dims, tuple(1 if i in dims else n for i, n in enumerate(src))


def _check_reduce_to(inputs, attrs):
    op = "reduce_to"
    x = _operand(op, REDUCE_TO, inputs)
    shape = attrs["shape"]
    lead = len(x.shape) - len(shape)
    ok = lead >= 0 and all(n >= 0 for n in shape) and all(n == 1 or n == x.shape[lead + i] for i, n in enumerate(shape))
    if not ok:
        raise InvalidProblemError(op, "shape", f"a shape that broadcasts to the input's {x.shape}", shape)
    mode = attrs["mode"]
    if mode in ("amax", "amin") and any(x.shape[a] == 0 for a in reduce_dims(x.shape, shape)):
        raise InvalidProblemError(op, "x", f"no empty axis to reduce for mode={mode!r} (no identity)", x.shape)
    return {"shape": shape, "mode": mode}, (TensorSpec(shape, x.dtype),)


def _grad_reduce_to(ctx, d, grads, s):
    mode, x = d.attr("mode"), d.inputs[0]
    if mode == "sum":
        return (ctx.op("broadcast_to", grads[0], shape=x.shape),)
    dims, kshape = reduce_to_parts(d)
    g = ctx.reshape(grads[0], kshape)
    if not dims:
        return (g,)
    if mode == "prod":
        return (ctx.op("prod_backward", g, s["x"], dims=dims, keepdim=True),)
    # amax / amin: the gradient goes to the elements equal to the result, split evenly among ties (torch's rule)
    return (ctx.op("amax_backward", g, s["x"], ctx.reshape(s["out"], kshape), dims=dims, keepdim=True),)


def _saves_reduce_to(d):
    return {"sum": (), "prod": ("x",)}.get(d.attr("mode"), ("x", "out"))


def _peer_reduce_to(x, shape, mode="sum"):
    import torch

    dims = reduce_dims(tuple(x.shape), tuple(shape))
    if mode == "sum" or not dims:
        return x.sum_to_size(tuple(shape)) if dims else x.clone()
    if mode == "prod":
        for a in dims:
            x = torch.prod(x, a, keepdim=True)
        return x.reshape(tuple(shape))
    return getattr(torch, mode)(x, dims, keepdim=True).reshape(tuple(shape))


def _samples_reduce_to(rng):
    for src, shape in [((3, 5), (5,)), ((2, 3, 5), (3, 1)), ((4, 2), ()), ((2, 4, 3), (1, 4, 1)), ((3, 5), (3, 5)),
                       ((6, 1, 7), (1, 1)), ((0,), (1,)), ((2, 0, 3), (2, 1, 3)), ((3, 0), (0,)), ((64, 33), (33,))]:
        yield Sample((rng.standard_normal(src),), {"shape": shape}, name=f"{src}->{shape}")
    for mode in ("amax", "amin", "prod"):   # few terms per product (a product of many normals underflows f16)
        for src, shape in [((3, 5), (5,)), ((2, 4, 3), (1, 4, 1)), ((4, 2), ()), ((3, 5), (3, 5)), ((3, 0), (0,))]:
            yield Sample((rng.standard_normal(src),), {"shape": shape, "mode": mode}, name=f"{mode}-{src}->{shape}")


def _errors_reduce_to():
    yield ErrorCase((((3, 4), "f32"),), {"shape": (3,)}, InvalidProblemError,
                    r"reduce_to: argument 'shape': expected a shape that broadcasts to the input's \(3, 4\)", "not-expandable")
    yield ErrorCase((((3,), "f32"),), {"shape": (1, 3)}, InvalidProblemError, r"broadcasts to", "more-dims")
    yield ErrorCase((((3,), "i32"),), {"shape": (1,)}, UnsupportedError, r"dtype i32", "int-dtype")
    yield ErrorCase((((3,), "f32"),), {"shape": (3,), "dims": 0}, InvalidProblemError, r"argument 'dims'", "bad-attr")
    yield ErrorCase((((3,), "f32"),), {"shape": (1,), "mode": "mean"}, InvalidProblemError,
                    r"reduce_to: argument 'mode': expected one of \['sum', 'amax', 'amin', 'prod'\]", "bad-mode")
    yield ErrorCase((((0, 3), "f32"),), {"shape": (3,), "mode": "amax"}, InvalidProblemError,
                    r"reduce_to: argument 'x': expected no empty axis to reduce for mode='amax'", "empty-max")


def _tol_reduce_to(dt):
    # sum: ~n roundings of the f32 accumulator; prod likewise (the samples keep products short); max/min exact
    return tuple(max(a, b) for a, b in zip(sum_tol(dt), _prod_tol(dt)))


REDUCE_TO = register_spec(OpSpec(
    name="reduce_to", family="broadcast", arg_names=("x",), check=_check_reduce_to, dtypes=FLOAT_TYPES,
    attrs=(_SHAPE, Attr("mode", "str", "sum", choices=REDUCE_TO_MODES, expected=f"one of {list(REDUCE_TO_MODES)}")),
    torch_peer=_peer_reduce_to, torch_name=None, jax_name=None,
    grad=_grad_reduce_to, saves=_saves_reduce_to, differentiable=(0,), samples=_samples_reduce_to,
    errors=_errors_reduce_to, tol=_tol_reduce_to, grad_tol=_tol_reduce_to,
    workloads=(Workload("reduce_to-[8,4096,2048]->[2048]-bf16", ((8, 4096, 2048),), as_dtype("bf16"),
                        {"shape": (2048,)}),
               Workload("reduce_to-[16384,4096]->[16384,1]-f32", ((16384, 4096),), as_dtype("f32"),
                        {"shape": (16384, 1)}),
               Workload("reduce_to-amax-[8,4096,2048]->[2048]-bf16", ((8, 4096, 2048),), as_dtype("bf16"),
                        {"shape": (2048,), "mode": "amax"})),
    cost=_cost, category="reduction",
    doc="Reduce x to a shape that broadcasts to it (the seeds' reduce-to: sum, amax, amin or prod over the axes "
        "broadcasting would add; torch's Tensor.sum_to_size for mode='sum').",
))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "amax_backward", "broadcast_to", "prod_backward")
