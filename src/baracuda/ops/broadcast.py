"""broadcast_to (torch.broadcast_to): the backward of sum/mean, and its own backward is a reduce-to (sum).

``shape`` is the target shape; ``dtype`` (internal, default None = the input's dtype) lets the backward of
``sum(..., dtype=)`` hand the gradient back in the input's dtype in the same pass (a widening or
narrowing copy), so no separate cast kernel runs.
"""
from __future__ import annotations


from .._core.dtypes import FLOAT_TYPES, as_dtype
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .reduction import sum_tol

__all__ = ["broadcast_target"]


def broadcast_target(op: str, src: tuple, shape) -> tuple[int, ...]:
    """torch.broadcast_to's rule: align right; each source dim must equal the target's or be 1."""
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise InvalidProblemError(op, "shape", "a sequence of ints", repr(shape)) from None
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


def _check(inputs, attrs):
    op = "broadcast_to"
    unknown = set(attrs) - {"shape", "dtype"}
    if unknown:
        raise InvalidProblemError(op, sorted(unknown)[0], "one of the attributes ['dtype', 'shape']", "an unknown attribute")
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    SPEC.check_dtypes(inputs)
    if "shape" not in attrs:
        raise InvalidProblemError(op, "shape", "a target shape", "nothing")
    x = inputs[0]
    shape = broadcast_target(op, x.shape, attrs["shape"])
    dt = attrs.get("dtype")
    if dt is not None:
        dt = as_dtype(dt)
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
    defaults={"dtype": None}, torch_peer=_peer, torch_name="torch.broadcast_to", dropin=_dropin,
    jax_name="jax.numpy.broadcast_to", grad=_grad, saves=(), differentiable=(0,), samples=_samples,
    errors=_errors, tol=lambda dt: (0.0, 0.0),   # a copy: exact (a dtype= widening is exact too)
    grad_tol=lambda dt: tuple(2 * t for t in sum_tol(dt)),   # the backward is a sum
    workloads=(Workload("broadcast_to-[2048]->[8,4096,2048]-bf16", ((2048,),), as_dtype("bf16"),
                        {"shape": (8, 4096, 2048)}),),
    cost=_cost, category="data_movement",
))
