"""Convolution family: one N-d op, ``convolution`` (torch.convolution / aten::convolution semantics), for conv1d/2d/3d
and conv_transpose1d/2d/3d, and its fused backward ``convolution_backward`` (data and weight gradients).

``convolution(x, weight[, bias], stride, padding, dilation, transposed, output_padding, groups, channels_last)``
    x (N, C_in, *spatial), 1 to 3 spatial dims; weight (C_out, C_in/groups, *k) or, transposed, (C_in,
    C_out/groups, *k); bias (C_out,).  padding: ints (symmetric, per dim or one for all) or 'valid' / 'same'
    ('same': stride 1, torch's split of an odd total, the extra zero on the high side).  output_padding (transposed
    only; ignored otherwise, as torch) adds to the output's high side and must be < max(stride, dilation).
    channels_last: the output in channels-last storage order, shape (N, *spatial, C_out): the drop-in asks for it
    when torch would return a channels_last tensor (a channels_last input or weight) and permutes the result back
    to the logical (N, C, *spatial) view, a view, so torch's memory format comes without a copy; grad has that shape.

The problem in one vocabulary for both directions (``ConvGeom``): the *image* is the side the window slides over
(a convolution's input, a transposed convolution's output), the *response* the other side (the output, resp. the
input).  weight[g*Cr + r, i, *k] links response channel r and image channel i of group g in both cases (torch's
weight layouts of the two directions are exactly that).  Three products serve every pass:
    corr:    response[n, r, o] = sum_{i, k} image[n, i, o*s - p + k*d] * w[r, i, k]      (conv forward, transposed dgrad)
    scatter: image[n, i, j]    = sum_{r, k, o: o*s - p + k*d = j} response[n, r, o] w[r, i, k]
                                                                            (conv dgrad, transposed forward)
    wcorr:   w[r, i, k]        = sum_{n, o} response[n, r, o] * image[n, i, o*s - p + k*d] (weight gradient)
Gradients: x and weight through ``convolution_backward`` (one op, ``output_mask`` says which it computes: a frozen
weight's wgrad is never run), bias as the ``sum`` of grad over N and the spatial dims.

>>> import numpy as np, baracuda as bc
>>> x, w = np.ones((1, 1, 4), np.float32), np.ones((1, 1, 3), np.float32)
>>> bc.Plan.select(bc.Descriptor.like("convolution", x, w, padding=1), device="cpu").run(x, w)
array([[[2., 3., 3., 2.]]], dtype=float32)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.derive import backward_spec, declare_rule_ops
from .._core.errors import ArgumentTypeError, DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import Layout, check_nonneg, suggest_channels_last
from .reduction import INT_TYPES

__all__ = ["ConvGeom", "conv_geometry", "CONV_TWINS", "spatial_tuple", "SPATIAL"]

SPATIAL = 3          # the kernels see 3 spatial dims: a 1-d or 2-d problem has leading size-1 dims
_OP = "convolution"


def spatial_tuple(op: str, name: str, v: tuple, nd: int, lo: int) -> tuple[int, ...]:
    """An attribute given as one int for every spatial dim or one per dim, checked against its lower bound."""
    if len(v) == 1:
        v = v * nd
    if len(v) != nd:
        raise InvalidProblemError(op, name, f"one int or {nd} ints (one per spatial dim)", v)
    if any(e < lo for e in v):
        what = {0: "non-negative ints", 1: "positive ints"}[lo]
        raise InvalidProblemError(op, name, what, v)
    return v


def _norm_padding(op, v, inputs, attrs):
    if isinstance(v, str):
        if v not in ("same", "valid"):
            raise InvalidProblemError(op, "padding", "ints, 'same' or 'valid'", repr(v))
        return v
    if isinstance(v, bool) or not (isinstance(v, int) or hasattr(v, "__iter__")):
        raise ArgumentTypeError(op, "padding", "ints, 'same' or 'valid'", repr(v))
    t = (v,) if isinstance(v, int) else tuple(v)
    if not all(isinstance(e, int) and not isinstance(e, bool) for e in t):
        raise ArgumentTypeError(op, "padding", "ints, 'same' or 'valid'", repr(v))
    return tuple(int(e) for e in t)


CONV_ATTRS = (
    Attr("stride", "ints", (1,), expected="positive ints"),
    Attr("padding", "any", (0,), normalize=_norm_padding, expected="ints, 'same' or 'valid'"),
    Attr("dilation", "ints", (1,), expected="positive ints"),
    Attr("transposed", "bool", False),
    Attr("output_padding", "ints", (0,)),
    Attr("groups", "int", 1, ge=1, expected="a positive int dividing the channels"),
    Attr("channels_last", "bool", False),
)


def _pad3(t: tuple, fill: int) -> tuple[int, int, int]:
    return (fill,) * (SPATIAL - len(t)) + tuple(t)


@dataclass(frozen=True)
class ConvGeom:
    """One convolution problem in image / response terms (module docstring), spatial tuples padded to 3 dims."""

    nd: int
    n: int
    groups: int
    ci: int                  # image channels per group
    cr: int                  # response channels per group
    image: tuple             # image spatial size (3)
    resp: tuple              # response spatial size (3)
    kernel: tuple
    stride: tuple
    pad: tuple               # low-side padding of the image (the high side follows from the sizes)
    dilation: tuple
    transposed: bool
    channels_last: bool

    @property
    def x_shape(self) -> tuple:
        """The forward input's logical shape (N, C, *spatial)."""
        c, sp = (self.cr, self.resp) if self.transposed else (self.ci, self.image)
        return (self.n, c * self.groups) + sp[SPATIAL - self.nd:]

    @property
    def y_shape(self) -> tuple:
        """The forward output's logical shape (N, C, *spatial)."""
        c, sp = (self.ci, self.image) if self.transposed else (self.cr, self.resp)
        return (self.n, c * self.groups) + sp[SPATIAL - self.nd:]

    @property
    def y_storage(self) -> tuple:
        """The forward output's shape as the op returns it: (N, *spatial, C) when channels_last."""
        y = self.y_shape
        return (y[0],) + y[2:] + (y[1],) if self.channels_last else y

    @property
    def macs(self) -> int:
        return self.n * math.prod(self.resp) * self.groups * self.cr * self.ci * math.prod(self.kernel)


def conv_geometry(op: str, x: tuple, w: tuple, a: dict) -> tuple[ConvGeom, dict]:
    """The geometry of a convolution of x (shape) by w (shape) under the attributes ``a``, validated (errors name
    ``op``), and the attributes normalized (one int per spatial dim; 'valid' -> zeros)."""
    if not 3 <= len(w) <= 5:
        raise InvalidProblemError(op, "weight", "a 3-d, 4-d or 5-d tensor (C_out, C_in/groups, *kernel)", f"shape {w}")
    nd = len(w) - 2
    if len(x) != len(w):
        raise InvalidProblemError(op, "x", f"a {nd + 2}-d tensor (N, C, *spatial) to match the {nd}-d kernel of "
                                  f"'weight' {w}", f"shape {x}")
    check_nonneg(op, ("x", "weight"), (x, w))
    a = dict(a)
    tr = a["transposed"]
    s = a["stride"] = spatial_tuple(op, "stride", a["stride"], nd, 1)
    d = a["dilation"] = spatial_tuple(op, "dilation", a["dilation"], nd, 1)
    k = tuple(w[2:])
    g = a["groups"]
    pad = a["padding"]
    if pad == "valid":
        pad = a["padding"] = (0,) * nd
    if pad == "same":
        if tr:
            raise InvalidProblemError(op, "padding", "ints for a transposed convolution (torch has no 'same' there)",
                                      "'same'")
        if any(e != 1 for e in s):
            raise InvalidProblemError(op, "padding", "ints or 'valid' for a strided convolution ('same' needs "
                                      "stride 1)", "'same'")
        lo = tuple(di * (ki - 1) // 2 for di, ki in zip(d, k))
    else:
        lo = a["padding"] = spatial_tuple(op, "padding", pad, nd, 0)
    if tr:
        op_ = a["output_padding"] = spatial_tuple(op, "output_padding", a["output_padding"], nd, 0)
        if any(p >= max(si, di) for p, si, di in zip(op_, s, d)):
            raise InvalidProblemError(op, "output_padding", f"values smaller than stride {s} or dilation {d} "
                                      "(per dim)", op_)
    else:   # torch ignores it for a convolution: normalized away
        spatial_tuple(op, "output_padding", a["output_padding"], nd, 0)
        a["output_padding"] = (0,) * nd
    n, c = x[0], x[1]
    if tr:
        if w[0] % g:
            raise InvalidProblemError(op, "groups", f"a positive int dividing the {w[0]} input channels of 'weight'",
                                      g)
        if c != w[0]:
            raise InvalidProblemError(op, "x", f"{w[0]} channels (weight {w}, transposed: (C_in, C_out/groups, "
                                      "*kernel))", f"shape {x}")
        cr, ci = w[0] // g, w[1]
        resp = x[2:]
        image = tuple((i - 1) * si - 2 * p + di * (ki - 1) + o + 1
                      for i, si, p, di, ki, o in zip(resp, s, lo, d, k, a["output_padding"]))
        if any(e < 1 for e in image):
            raise InvalidProblemError(op, "x", f"spatial sizes giving an output of at least 1 per dim (output "
                                      f"{image})", f"shape {x}")
    else:
        if w[0] % g:
            raise InvalidProblemError(op, "groups", f"a positive int dividing the {w[0]} output channels of "
                                      "'weight'", g)
        if c != w[1] * g:
            raise InvalidProblemError(op, "x", f"{w[1] * g} channels (groups={g} x weight {w}'s {w[1]})",
                                      f"shape {x}")
        cr, ci = w[0] // g, w[1]
        image = x[2:]
        if pad == "same":
            resp = tuple(image)
        else:
            padded = tuple(i + 2 * p for i, p in zip(image, lo))
            span = tuple(di * (ki - 1) + 1 for di, ki in zip(d, k))
            if any(pi < sp for pi, sp in zip(padded, span)):
                raise InvalidProblemError(op, "x", f"padded spatial sizes {padded} of at least the dilated kernel "
                                          f"size {span}", f"shape {x}")
            resp = tuple((pi - sp) // si + 1 for pi, sp, si in zip(padded, span, s))
    geom = ConvGeom(nd, n, g, ci, cr, _pad3(tuple(image), 1), _pad3(tuple(resp), 1), _pad3(k, 1), _pad3(s, 1),
                    _pad3(lo, 0), _pad3(d, 1), tr, a["channels_last"])
    return geom, a


def geometry_of(desc) -> ConvGeom:
    """The geometry of a convolution or convolution_backward descriptor."""
    ins = desc.inputs[1:] if desc.op == "convolution_backward" else desc.inputs
    return conv_geometry(desc.op, ins[0].shape, ins[1].shape, desc.attr_dict)[0]


def _same_dtype(op, names, inputs):
    for name, t in zip(names[1:], inputs[1:]):
        if t.dtype != inputs[0].dtype:
            raise DTypeMismatchError(op, name, f"{inputs[0].dtype} (the dtype of '{names[0]}')", str(t.dtype))


def _check(inputs, attrs):
    if len(inputs) not in (2, 3):
        raise InvalidProblemError(_OP, "inputs", "2 or 3 operands (x, weight[, bias])", len(inputs))
    SPECS[_OP].check_dtypes(inputs)
    _same_dtype(_OP, ("x", "weight", "bias"), inputs)
    geom, a = conv_geometry(_OP, inputs[0].shape, inputs[1].shape, attrs)
    cout = geom.y_shape[1]
    if len(inputs) == 3 and inputs[2].shape != (cout,):
        raise InvalidProblemError(_OP, "bias", f"shape ({cout},) (the output channels)", f"shape {inputs[2].shape}")
    return a, (TensorSpec(geom.y_storage, inputs[0].dtype),)


# -- backward --------------------------------------------------------------------------------------------------
def _g_conv(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.dtype.is_floating:    # (an integer tensor cannot require grad: torch)
        return (None,) * len(d.inputs)
    need = ctx.needs
    dx = dw = db = None
    if need[0] or need[1]:
        r = ctx.op("convolution_backward", g, s["x"], s["weight"], **d.attr_dict,
                   output_mask=(bool(need[0]), bool(need[1])))
        r = list(r) if isinstance(r, (tuple, list)) else [r]
        dx = r.pop(0) if need[0] else None
        dw = r.pop(0) if need[1] else None
    if len(d.inputs) == 3 and need[2]:   # bias: grad summed over N and the spatial dims
        rank = len(d.inputs[0].shape)
        chan = rank - 1 if d.attr("channels_last") else 1
        db = ctx.op("sum", g, dims=tuple(i for i in range(rank) if i != chan), keepdim=False)
    return (dx, dw, db)[: len(d.inputs)]


def _bw_outputs(xs, attrs):
    mask = attrs["output_mask"]
    return tuple(TensorSpec(t.shape, t.dtype) for t, m in zip(xs[:2], mask) if m)


def _norm_mask(op, v, inputs, attrs):
    v = tuple(v) if isinstance(v, list) else v
    if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(e, bool) for e in v) and any(v)):
        raise InvalidProblemError(op, "output_mask", "a pair of bools (input, weight gradient), not both False",
                                  repr(v))
    return v


# -- drop-ins --------------------------------------------------------------------------------------------------
def _dropin_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch.convolution's signature; an unbatched input (one dim less than the weight) gets a batch of one."""
    import torch

    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise ArgumentTypeError(_OP, name, "a Tensor", type(t).__name__)
    unbatched = input.dim() == weight.dim() - 1
    x = input.unsqueeze(0) if unbatched else input
    cl = weight.dim() in (4, 5) and (suggest_channels_last(x) or suggest_channels_last(weight))
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "transposed": bool(transposed),
             "output_padding": output_padding, "groups": groups, "channels_last": cl}
    ins = (x, weight) if bias is None else (x, weight, bias)

    def finish(out):
        if cl:
            out = out.movedim(-1, 1)
        return out.squeeze(0) if unbatched else out
    if cl and not unbatched:
        # the (N, *spatial, C) result handed back as (N, C, *spatial), a tensor of its own (not a view: a later
        # in-place write into it would otherwise make its backward rebuild the view's base)
        return ins, attrs, Layout(lambda o: o.movedim(-1, 1), lambda g: g.movedim(1, -1), x.dim())
    return ins, attrs, finish if (cl or unbatched) else None


def _rank_check(fn: str, nd: int, input, weight=None):
    dim = getattr(input, "dim", lambda: None)()
    if dim not in (nd + 1, nd + 2):
        raise InvalidProblemError(_OP, "input", f"a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) tensor for {fn}",
                                  f"shape {tuple(getattr(input, 'shape', ()))}")


def _conv_translate(nd: int):
    fn = f"conv{nd}d"

    one, zero = [1] * nd, [0] * nd   # torch's schema defaults (int[nd]); never mutated

    def translate(input, weight, bias=None, stride=one, padding=zero, dilation=one, groups=1):
        _rank_check(fn, nd, input)
        return (input, weight, bias, stride, padding, dilation, False, 0, groups), {}
    translate.__name__ = fn
    return translate


def _conv_transpose_translate(nd: int):
    fn = f"conv_transpose{nd}d"

    one, zero = [1] * nd, [0] * nd

    def translate(input, weight, bias=None, stride=one, padding=zero, output_padding=zero, groups=1, dilation=one):
        _rank_check(fn, nd, input)
        if isinstance(padding, str):
            raise ArgumentTypeError(_OP, "padding", f"ints for {fn} (torch takes no string there)", repr(padding))
        return (input, weight, bias, stride, padding, dilation, True, output_padding, groups), {}
    translate.__name__ = fn
    return translate


# torch name (relative to torch) -> (the published drop-in it runs, translator): torch/_aliases.py publishes them.
# torch.convNd is F.convNd (one object): both names share one translator, hence one drop-in (bt.mode routes by object)
_TRANSLATORS = {f"conv{n}d": _conv_translate(n) for n in (1, 2, 3)} | \
    {f"conv_transpose{n}d": _conv_transpose_translate(n) for n in (1, 2, 3)}
CONV_TWINS = {f"{ns}{name}": ("convolution", tr) for name, tr in _TRANSLATORS.items() for ns in ("", "nn.functional.")}


def _peer(x, w, *b, stride=1, padding=0, dilation=1, transposed=False, output_padding=0, groups=1,
          channels_last=False):
    import torch
    import torch.nn.functional as F

    nd = w.dim() - 2
    bias = b[0] if b else None
    if transposed:
        fn = getattr(F, f"conv_transpose{nd}d")
        y = fn(x, w, bias, stride, padding, output_padding, groups, dilation)
    else:
        y = getattr(F, f"conv{nd}d")(x, w, bias, stride, padding, dilation, groups)
    return torch.movedim(y, 1, -1).contiguous() if channels_last else y


def _peer_bw(g, x, w, *, output_mask, **attrs):
    import torch

    xs = [t.detach().clone().requires_grad_(m) for t, m in zip((x, w), output_mask)]
    y = _peer(*xs, **attrs)
    grads = torch.autograd.grad(y, [t for t, m in zip(xs, output_mask) if m], g)
    return grads[0] if len(grads) == 1 else tuple(grads)


# -- samples, errors, workloads --------------------------------------------------------------------------------
# (x shape, weight shape, bias, attrs): tiny (CI time under the Triton interpreter); the first ones are the
# gradient samples (finite differences in f64)
_CASES = [
    ((1, 2, 5), (3, 2, 3), True, {"padding": (1,)}),
    ((2, 4, 5, 4), (4, 2, 2, 3), True, {"stride": (2, 1), "padding": (1, 0), "groups": 2}),
    ((1, 2, 4, 5), (2, 3, 3, 2), True, {"transposed": True, "stride": (2,), "padding": (1,),
                                          "output_padding": (1, 0)}),
    # depthwise, 'same' with dilation: total padding 4 along H (2 + 2), 1 along W (0 + 1: torch's extra zero high)
    ((1, 2, 4, 5), (2, 1, 3, 2), False, {"padding": "same", "dilation": (2, 1), "groups": 2}),
    ((2, 1, 3, 3, 2), (2, 1, 2, 2, 1), True, {"stride": (1, 2, 1), "padding": (1, 0, 0)}),
    ((1, 4, 3, 2, 2), (4, 1, 2, 2, 2), False, {"transposed": True, "groups": 2, "dilation": (1, 2, 1)}),
    ((1, 2, 6, 5), (3, 2, 3, 3), True, {"stride": (2,), "dilation": (1, 2), "padding": "valid",
                                          "channels_last": True}),
    ((0, 2, 4, 4), (3, 2, 3, 3), True, {"padding": (1,)}),
    # a patch embedding (kernel == stride, no padding; a channels-last input): what the cuBLAS patch GEMM takes
    ((2, 3, 6, 4), (5, 3, 2, 2), True, {"stride": (2,), "channels_last": True}),
]


def _samples(rng):
    for i, (sx, sw, bias, attrs) in enumerate(_CASES):
        ins = (rng.standard_normal(sx), rng.standard_normal(sw))
        geom, _ = conv_geometry(_OP, sx, sw, {**SPECS[_OP].defaults, **attrs})
        if bias:
            ins += (rng.standard_normal(geom.y_shape[1]),)
        tags = "".join(f"-{k}{v}" for k, v in attrs.items())
        yield Sample(ins, dict(attrs), name=f"{sx}*{sw}{'+b' if bias else ''}{tags}", grad=i < 3)


def _bw_samples(rng):
    masks = ((True, True), (True, False), (False, True))
    for i, s in enumerate(_samples(rng)):
        x, w = s.inputs[:2]
        geom, _ = conv_geometry(_OP, x.shape, w.shape, {**SPECS[_OP].defaults, **s.attrs})
        g = rng.standard_normal(geom.y_storage)
        yield Sample((g, x, w), dict(s.attrs, output_mask=masks[i % 3]), name=s.name, grad=False)


def _errors():
    f = "f32"
    x, w = ((2, 4, 6, 6), f), ((3, 4, 3, 3), f)
    yield ErrorCase((x, ((3, 2, 3, 3), f)), {}, InvalidProblemError, r"convolution: argument 'x': expected 2 channels",
                    "channels")
    yield ErrorCase((x, w), {"groups": 2}, InvalidProblemError, r"argument 'groups': expected a positive int dividing",
                    "groups")
    yield ErrorCase((x, w), {"padding": (-1,)}, InvalidProblemError, r"argument 'padding': expected non-negative",
                    "negative-padding")
    yield ErrorCase((x, w), {"stride": (0,)}, InvalidProblemError, r"argument 'stride': expected positive", "stride")
    yield ErrorCase((x, w), {"stride": (1, 1, 1)}, InvalidProblemError, r"argument 'stride': expected one int or 2",
                    "stride-len")
    yield ErrorCase((((2, 4, 2, 2), f), w), {}, InvalidProblemError, r"argument 'x': expected padded spatial sizes",
                    "kernel-too-large")
    yield ErrorCase((x, w), {"padding": "same", "stride": (2,)}, InvalidProblemError, r"'same' needs stride 1",
                    "same-strided")
    yield ErrorCase((x, w), {"padding": "full"}, InvalidProblemError, r"argument 'padding': expected ints, 'same'",
                    "padding-str")
    yield ErrorCase((x, ((4, 3, 3, 3), f)), {"transposed": True, "output_padding": (1,)}, InvalidProblemError,
                    r"argument 'output_padding': expected values smaller than stride", "output-padding")
    yield ErrorCase((x, ((3, 4, 3), f)), {}, InvalidProblemError, r"argument 'x': expected a 3-d tensor", "rank")
    yield ErrorCase((x, ((3, 4), f)), {}, InvalidProblemError, r"argument 'weight': expected a 3-d, 4-d or 5-d",
                    "weight-rank")
    yield ErrorCase((x, w, ((4,), f)), {}, InvalidProblemError, r"argument 'bias': expected shape \(3,\)", "bias")
    yield ErrorCase((x, ((3, 4, 3, 3), "f16")), {}, DTypeMismatchError, r"argument 'weight': expected dtype f32",
                    "dtype")
    yield ErrorCase((((2, 4, 6, 6), "bool"), ((3, 4, 3, 3), "bool")), {}, UnsupportedError, r"dtype bool", "bool")
    yield ErrorCase((((1, 4, 1, 1), f), ((4, 2, 3, 3), f)), {"transposed": True, "padding": (2,)}, InvalidProblemError,
                    r"output of at least 1", "transposed-too-small")


def _bw_errors():
    f = "f32"
    yield ErrorCase((((2, 3, 4, 4), f), ((2, 4, 6, 6), f), ((3, 4, 3, 3), f)), {"output_mask": (False, False)},
                    InvalidProblemError, r"argument 'output_mask'", "mask")
    yield ErrorCase((((2, 3, 5, 4), f), ((2, 4, 6, 6), f), ((3, 4, 3, 3), f)), {}, InvalidProblemError,
                    r"convolution_backward: argument 'grad': expected .*shape", "grad-shape")
    yield ErrorCase((((2, 3, 4, 4), "f16"), ((2, 4, 6, 6), f), ((3, 4, 3, 3), f)), {}, DTypeMismatchError,
                    r"argument 'grad': expected dtype f32", "grad-dtype")
    yield ErrorCase((((2, 3, 4, 4), f), ((2, 4, 6, 6), f), ((3, 2, 3, 3), f)), {}, InvalidProblemError,
                    r"convolution_backward: argument 'x': expected 2 channels", "forward-channels")


# Tolerances.  Each output is a dot product of K = C_in/groups * prod(kernel) terms (K <= 27 in the samples, inputs
# standard normal, so sum |a||b| <~ 0.64 K ~ 17): f32 accumulation errs by <= K u_f32 sum|a||b| ~ 3e-5 worst case
# (typically ~sqrt(K) u: 1e-6); f16 / bf16 add one output rounding (2^-11 / 2^-8 relative) to f32 accumulation;
# f64: a 27-term sum, ~1e-14.  The weight gradient sums over N * output positions (<= 60 terms here): 2x the
# forward's f32 bound.
# Integers (torch's CPU convolutions take them; wrapping two's-complement sums): exact.
_TOL = {DType.f64: (1e-10, 1e-10), DType.f32: (2e-5, 5e-5), DType.f16: (4e-3, 4e-3), DType.bf16: (2e-2, 2e-2)}
_BW_TOL = {DType.f64: (1e-10, 1e-10), DType.f32: (4e-5, 1e-4), DType.f16: (4e-3, 8e-3), DType.bf16: (2e-2, 4e-2)}


def _cost(desc):
    geom = geometry_of(desc)
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    passes = len(desc.outputs) if desc.op == "convolution_backward" else 1
    return nbytes, 2 * geom.macs * passes


def _resnet50_shapes():
    """The distinct conv shapes of torchvision's ResNet-50 at 224x224: (C_in, H, C_out, k, stride, padding)."""
    shapes = [(3, 224, 64, 7, 2, 3)]
    cin = 64
    for width, blocks, h, stride in ((64, 3, 56, 1), (128, 4, 56, 2), (256, 6, 28, 2), (512, 3, 14, 2)):
        out = width * 4
        for b in range(blocks):
            s = stride if b == 0 else 1
            hin = h if b == 0 else h // stride
            shapes += [(cin, hin, width, 1, 1, 0), (width, hin, width, 3, s, 1), (width, hin // s, out, 1, 1, 0)]
            if b == 0:
                shapes.append((cin, hin, out, 1, s, 0))
            cin = out
    return sorted(set(shapes), key=shapes.index)


_B = 64
_WORKLOADS = tuple(
    Workload(f"convolution-resnet50-{ci}x{h}^2->{co}-k{k}s{s}-bf16-nhwc", ((_B, ci, h, h), (co, ci, k, k)), DType.bf16,
             {"stride": (s,), "padding": (p,), "channels_last": True}, backward=True)
    for ci, h, co, k, s, p in _resnet50_shapes()) + tuple(
    # depthwise: MobileNetV2 3x3 (stride 1 and 2), ConvNeXt-T 7x7 (stage 1 and 3)
    Workload(f"convolution-depthwise-{c}x{h}^2-k{k}s{s}-bf16-nhwc", ((_B, c, h, h), (c, 1, k, k)), DType.bf16,
             {"stride": (s,), "padding": (k // 2,), "groups": c, "channels_last": True}, backward=True)
    for c, h, k, s in ((144, 56, 3, 1), (384, 14, 3, 1), (96, 112, 3, 2), (96, 56, 7, 1), (384, 14, 7, 1))) + (
    Workload("convolution-depthwise-32x384x28^2-k7s1-bf16-nhwc", ((32, 384, 28, 28), (384, 1, 7, 7)), DType.bf16,
             {"stride": (1,), "padding": (3,), "groups": 384, "channels_last": True}, backward=True),
    Workload("convolution-depthwise-64x144x56^2-k3s1-bf16-nchw", ((_B, 144, 56, 56), (144, 1, 3, 3)), DType.bf16,
             {"stride": (1,), "padding": (1,), "groups": 144}, backward=True),
    Workload("convolution-vit_b16-patch-embed-224->14^2x768-bf16", ((_B, 3, 224, 224), (768, 3, 16, 16), (768,)),
             DType.bf16, {"stride": (16,)}, backward=True),
)



def _bw_workloads():
    """The forward workloads' backward problems: (grad, x, weight), both gradients."""
    out = []
    for w in _WORKLOADS:
        geom, _ = conv_geometry(_OP, w.shapes[0], w.shapes[1], {**SPECS[_OP].defaults, **w.attrs})
        out.append(Workload(w.name.replace(_OP, "convolution_backward", 1), (geom.y_storage,) + tuple(w.shapes[:2]),
                            w.dtype, dict(w.attrs)))
    return tuple(out)


SPECS: dict[str, OpSpec] = {}
SPECS[_OP] = register_spec(OpSpec(
    name=_OP, family="conv", arg_names=("x", "weight", "bias"), check=_check, dtypes=FLOAT_TYPES + INT_TYPES,
    attrs=CONV_ATTRS,
    torch_peer=_peer, torch_name="torch.convolution", dropin=_dropin_convolution, jax_name="jax.lax.conv_general_dilated",
    grad=_g_conv, saves=("x", "weight"), differentiable=(0, 1, 2), samples=_samples, errors=_errors,
    tol=lambda dt: _TOL.get(dt, (0.0, 0.0)), grad_tol=lambda dt: _BW_TOL[dt], workloads=_WORKLOADS, cost=_cost, category="conv",
    doc="N-d convolution / transposed convolution (torch.convolution; F.conv1d/2d/3d, F.conv_transpose1d/2d/3d "
        "are its twins): stride, padding (ints, 'same', 'valid'), dilation, groups, output_padding, bias."))

_BW = backward_spec(
    SPECS[_OP], "convolution_backward", grads=(0, 1), grad_what="the forward output's (storage order)",
    outputs=_bw_outputs, attrs=CONV_ATTRS + (Attr("output_mask", "any", (True, True), normalize=_norm_mask),),
    dtypes=FLOAT_TYPES, torch_peer=_peer_bw, samples=_bw_samples, errors=_bw_errors, workloads=_bw_workloads(), tol=lambda dt: _BW_TOL[dt], cost=_cost,
    doc="the data and weight gradients of convolution (output_mask: which), from the upstream gradient, x and "
        "weight: dgrad is the adjoint product (a transposed convolution's forward, resp. a convolution), wgrad the "
        "correlation of the image and the response.")
_derived_check = _BW.check


def _bw_check(inputs, attrs):
    if len(inputs) != 3:
        raise InvalidProblemError("convolution_backward", "inputs", "3 operands (grad, x, weight)", len(inputs))
    return _derived_check(inputs, attrs)


_BW.check = _bw_check
SPECS["convolution_backward"] = register_spec(_BW)

declare_rule_ops(__name__, "convolution_backward")
