"""Channel / space rearrangements (issue 18): pixel_shuffle, pixel_unshuffle, channel_shuffle.

Pure data movement (exact for every dtype); each is a copy from a strided view of the input:
pixel_shuffle(x, r):    (*, C r^2, H, W) -> (*, C, H r, W r), y[..., c, h r + i, w r + j] = x[..., c r^2 + i r + j, h, w]
pixel_unshuffle(x, r):  the inverse, (*, C, H r, W r) -> (*, C r^2, H, W)
channel_shuffle(x, g):  (N, C, *) -> same shape, y[:, j g + i] = x[:, i (C/g) + j]  (C/g channels per group)
Backward: each is the other's (pixel_shuffle <-> pixel_unshuffle with the same factor; channel_shuffle with C/g
groups), composed through ctx.op.
"""
from __future__ import annotations

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import InvalidProblemError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import check_nonneg

_DTYPES = FLOAT_TYPES + (DType.i64, DType.i32, DType.u8, DType.bool)


def _head(op, inputs, rank_min, what):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (input)", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    x = inputs[0]
    check_nonneg(op, ("input",), (x.shape,))
    if len(x.shape) < rank_min:
        raise InvalidProblemError(op, "input", what, x.shape)
    return x


def _check_ps(inputs, attrs):
    op = "pixel_shuffle"
    x = _head(op, inputs, 3, "at least 3 dimensions (*, C, H, W)")
    r = attrs["upscale_factor"]
    *b, c, h, w = x.shape
    if c % (r * r):
        raise InvalidProblemError(op, "input", f"a channel count divisible by upscale_factor^2 = {r * r}", x.shape)
    return attrs, (TensorSpec(tuple(b) + (c // (r * r), h * r, w * r), x.dtype),)


def _check_pu(inputs, attrs):
    op = "pixel_unshuffle"
    x = _head(op, inputs, 3, "at least 3 dimensions (*, C, H, W)")
    r = attrs["downscale_factor"]
    *b, c, h, w = x.shape
    if h % r or w % r:
        raise InvalidProblemError(op, "input", f"height and width divisible by downscale_factor = {r}", x.shape)
    return attrs, (TensorSpec(tuple(b) + (c * r * r, h // r, w // r), x.dtype),)


def _check_cs(inputs, attrs):
    op = "channel_shuffle"
    x = _head(op, inputs, 3, "more than 2 dimensions (N, C, *)")
    g = attrs["groups"]
    if x.shape[1] % g:
        raise InvalidProblemError(op, "groups", f"a positive int dividing the {x.shape[1]} channels", g)
    return attrs, (TensorSpec(x.shape, x.dtype),)


def _g_ps(ctx, d, grads, s):
    if grads[0] is None:     # an integer output: no gradient
        return (None,)
    return (ctx.op("pixel_unshuffle", grads[0], downscale_factor=d.attr("upscale_factor")),)


def _g_pu(ctx, d, grads, s):
    if grads[0] is None:
        return (None,)
    return (ctx.op("pixel_shuffle", grads[0], upscale_factor=d.attr("downscale_factor")),)


def _g_cs(ctx, d, grads, s):
    if grads[0] is None:
        return (None,)
    return (ctx.op("channel_shuffle", grads[0], groups=d.inputs[0].shape[1] // d.attr("groups")),)


def _peer(name, attr):
    def peer(x, **a):
        import torch.nn.functional as F

        return getattr(F, name)(x, a[attr])
    return peer


def _dropin_ps(input, upscale_factor):
    return (input,), {"upscale_factor": upscale_factor}


def _dropin_pu(input, downscale_factor):
    return (input,), {"downscale_factor": downscale_factor}


def _dropin_cs(input, groups):
    return (input,), {"groups": groups}


def _samples(op):
    def samples(rng):
        if op == "pixel_shuffle":
            cases = [((1, 8, 2, 3), 2), ((2, 9, 2, 2), 3), ((2, 1, 4, 1, 2), 2), ((0, 4, 2, 2), 2), ((4, 3, 2), 1)]
            key = "upscale_factor"
        elif op == "pixel_unshuffle":
            cases = [((1, 2, 4, 6), 2), ((2, 1, 3, 6), 3), ((2, 1, 1, 4, 2), 2)]   # (torch returns an empty input unshuffled)
            key = "downscale_factor"
        else:
            cases = [((1, 6, 2), 2), ((2, 6, 2, 3), 3), ((1, 4, 2, 1, 2), 2), ((2, 4, 3), 1), ((0, 4, 2), 2)]
            key = "groups"
        for shape, f in cases:
            yield Sample((rng.standard_normal(shape),), {key: f}, name=f"{shape}f{f}")
        yield Sample((rng.integers(-50, 50, cases[0][0]),), {key: cases[0][1]}, name="int", grad=False)
    return samples


def _errors(op, key):
    def errors():
        yield ErrorCase((((4, 4), "f32"),), {key: 2}, InvalidProblemError, rf"{op}: argument 'input': expected", "rank")
        yield ErrorCase((((1, 4, 2, 2), "f32"),), {key: 0}, InvalidProblemError, rf"argument '{key}'", "factor")
        bad = {"pixel_shuffle": (1, 6, 2, 2), "pixel_unshuffle": (1, 1, 3, 4), "channel_shuffle": (1, 5, 2, 2)}[op]
        yield ErrorCase(((bad, "f32"),), {key: 2}, InvalidProblemError, rf"{op}: argument '(input|groups)': expected",
                        "divisible")
    return errors


def _cost(desc):
    return 2 * desc.inputs[0].nbytes, 0


_SPECS: dict[str, OpSpec] = {}
_BIG = (8, 256, 64, 64)
for _op, _key, _chk, _g, _din, _wl in (
        ("pixel_shuffle", "upscale_factor", _check_ps, _g_ps, _dropin_ps, (_BIG, 2)),
        ("pixel_unshuffle", "downscale_factor", _check_pu, _g_pu, _dropin_pu, (_BIG, 2)),
        ("channel_shuffle", "groups", _check_cs, _g_cs, _dropin_cs, (_BIG, 4))):
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="image", category="image", arg_names=("input",), check=_chk, dtypes=_DTYPES,
        attrs=(Attr(_key, "int", gt=0, expected="a positive int"),), torch_peer=_peer(_op, _key),
        torch_name=f"torch.nn.functional.{_op}", torch_aliases=(f"torch.{_op}",), dropin=_din, grad=_g,
        saves=(), differentiable=(0,), samples=_samples(_op), errors=_errors(_op, _key), cost=_cost, out_format_of=0,
        workloads=(Workload(f"{_op}-[{','.join(map(str, _wl[0]))}]-{_key[0]}{_wl[1]}-bf16", (_wl[0],), DType.bf16, {_key: _wl[1]},
                            backward=True),),
        doc=f"{_op}: an exact rearrangement (a copy from a strided view of the input)."))

declare_rule_ops(__name__, "pixel_shuffle", "pixel_unshuffle", "channel_shuffle")
