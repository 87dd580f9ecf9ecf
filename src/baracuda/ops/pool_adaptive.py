"""Adaptive pooling (issue 18, item 2): adaptive_avg_pool1d/2d/3d and adaptive_max_pool1d/2d/3d.

Output o of a dim of input size L and output size O pools [floor(o L / O), ceil((o + 1) L / O)) (torch's windows:
overlapping when O does not divide L).  adaptive_max_pool{n}d -> (y, indices int64, flat per plane), torch's NaN
and tie rules as max_pool; the drop-in returns y, or (y, indices) with return_indices=True
(F.adaptive_max_pool{n}d_with_indices and torch.adaptive_max_pool1d are its twins).  ``output_size`` entries may be
None in the drop-in (that dim keeps the input's size).  Backward: the shared gather-form ops of ops/pool.py
(max_pool_backward / avg_pool_backward with window='adaptive').
"""
from __future__ import annotations

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import InvalidProblemError
from .._core.spec import REQUIRED, Attr, ErrorCase, Sample, TensorSpec, Workload
from .pool import errors_for, nd_ints, pool_cost, pool_input, pool_tol, reg

__all__ = []


def _check(op, nd):
    def check(inputs, attrs):
        x = pool_input(op, inputs, nd, FLOAT_TYPES)
        out = tuple(x.shape[:-nd]) + attrs["output_size"]
        outs = (TensorSpec(out, x.dtype),)
        return attrs, outs + ((TensorSpec(out, DType.i64),) if "max" in op else ())
    return check


def _out_attr(nd):
    norm = nd_ints(nd, 0, "non-negative int")

    def named(op, v, inputs, attrs):
        try:
            return norm(op, v, inputs, attrs)
        except InvalidProblemError as e:
            raise InvalidProblemError(op, "output_size", str(e).split("expected ", 1)[1].split(", got")[0],
                                      tuple(v)) from None
    return Attr("output_size", "ints", REQUIRED, normalize=named)


def _g(ctx, d, grads, s):
    nd = int(d.op[-2])
    if "max" in d.op:
        return (ctx.op("max_pool_backward", grads[0], s["input"], s["out1"], nd=nd, window="adaptive"),)
    return (ctx.op("avg_pool_backward", grads[0], s["input"], nd=nd, window="adaptive"),)


def _resolve(input, output_size, nd):
    """torch's output_size: an int or an nd-sequence whose None entries keep the input's size."""
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != nd:
            return tuple(output_size)      # the op's check names the length
        sp = input.shape[-nd:]
        return tuple(sp[j] if v is None else v for j, v in enumerate(output_size))
    return output_size


def _dropin(nd, is_max):
    if is_max:
        def dropin(input, output_size, return_indices=False):
            return ((input,), {"output_size": _resolve(input, output_size, nd)},
                    tuple if return_indices else (lambda out: out[0]))
        return dropin

    def dropin(input, output_size):
        return (input,), {"output_size": _resolve(input, output_size, nd)}
    return dropin


def _peer(nd, is_max):
    def peer(x, output_size):
        import torch.nn.functional as F

        if is_max:
            return getattr(F, f"adaptive_max_pool{nd}d")(x, output_size, return_indices=True)
        return getattr(F, f"adaptive_avg_pool{nd}d")(x, output_size)
    return peer


_SHAPES = {1: ((2, 3, 10), (3,)), 2: ((2, 3, 7, 5), (3, 2)), 3: ((1, 2, 5, 4, 3), (2, 3, 2))}


def _samples(nd):
    def samples(rng):
        shape, out = _SHAPES[nd]
        yield Sample((rng.standard_normal(shape),), {"output_size": out}, name="overlap")
        # a CNN's global-average head: the GPU backends run it as the mean over the spatial dims
        yield Sample((rng.standard_normal(shape),), {"output_size": 1}, name="global")
        if nd == 2:
            yield Sample((rng.standard_normal((3, 4, 5)),), {"output_size": (7, 1)}, name="unbatched-up-down")
            yield Sample((rng.standard_normal((0, 2, 4, 4)),), {"output_size": 2}, name="empty-batch")
    return samples


_WL = {
    "adaptive_avg_pool2d": (Workload("adaptive_avg_pool2d-resnet50-head-[64,2048,7,7]to1-bf16", ((64, 2048, 7, 7),),
                                     DType.bf16, {"output_size": 1}, backward=True),
                            Workload("adaptive_avg_pool2d-[64,512,28,28]to7-bf16", ((64, 512, 28, 28),), DType.bf16,
                                     {"output_size": 7}, backward=True)),
    "adaptive_max_pool2d": (Workload("adaptive_max_pool2d-[64,512,28,28]to7-bf16", ((64, 512, 28, 28),), DType.bf16,
                                     {"output_size": 7}, backward=True),),
}


def _errors(op, nd):
    base = errors_for(op, nd, {"output_size": 2})

    def errors():
        yield from base()
        x = ((2, 3) + (6,) * nd, "f32")
        yield ErrorCase((x,), {"output_size": -1}, InvalidProblemError,
                        rf"{op}: argument 'output_size': expected non-negative ints >= 0", "negative")
        yield ErrorCase((x,), {"output_size": (2,) * (nd + 1)}, InvalidProblemError,
                        rf"{op}: argument 'output_size': expected an int or a tuple of {nd} ints", "length")
    return errors


for _nd in (1, 2, 3):
    for _max in (False, True):
        _op = f"adaptive_{'max' if _max else 'avg'}_pool{_nd}d"
        reg(name=_op, arg_names=("input",), check=_check(_op, _nd), dtypes=FLOAT_TYPES, attrs=(_out_attr(_nd),),
            torch_peer=_peer(_nd, _max), torch_name=f"torch.nn.functional.{_op}", dropin=_dropin(_nd, _max),
            grad=_g, saves=("input", "out1") if _max else ("input",), differentiable=(0,), samples=_samples(_nd),
            errors=_errors(_op, _nd), tol=pool_tol, grad_tol=pool_tol, workloads=_WL.get(_op, ()), cost=pool_cost(),
            doc=f"{_nd}-d adaptive {'max' if _max else 'average'} pooling to output_size (torch's windows)"
                + (" -> (values, indices)" if _max else "") + ".")

declare_rule_ops(__name__, "max_pool_backward", "avg_pool_backward")
