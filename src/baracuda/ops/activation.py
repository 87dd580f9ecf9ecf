"""Elementwise rows: activations (torch.nn.functional) and the gated split+gate ops.

Gated ops (``shape="gated"``) split ``x`` in halves ``a, b`` along ``dim`` (``[..., 2H] -> [..., H]``):
glu = a * sigmoid(b) (torch), swiglu = silu(a) * b, geglu = gelu(a) * b, reglu = relu(a) * b (gate first, as
in a fused ``[W_gate; W_up]`` projection).  Their backward is one fused kernel: ``<op>_backward(g, x)`` reads
``x`` and ``g`` once and writes ``dx`` once.

Two-operand forms (``silu_mul(a, b) = silu(a) * b``, ``gelu_mul(a, b) = gelu(a) * b``, broadcasting like ``mul``)
take the gate and up halves as separate tensors (two Linear outputs: no ``[W_gate; W_up]`` weight copy).  Their
gradient is ``<op>_backward(g, a, b) = g * b * act'(a)`` for ``a`` and the forward op itself, ``<op>(a, g)``, for
``b``.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, Workload
from .elementwise import ALL, FLOAT, NUM, EwDef, _EXTRA_ERRORS, add_ew_ops, dropin_ew, ew_samples, reduce_grad, tp


_APPROX = Attr("approximate", "str", "none", choices=("none", "tanh"), expected="'none' or 'tanh'")


def _f(name, default, **kw):
    return Attr(name, "float", default, **kw)


def _nonzero_alpha(op, attrs):
    if attrs["alpha"] == 0:
        raise InvalidProblemError(op, "alpha", "a non-zero alpha", 0.0)
    return attrs


def _minmax(op, attrs):
    if attrs["min_val"] > attrs["max_val"]:
        raise InvalidProblemError(op, "max_val", f"a value >= min_val={attrs['min_val']}", attrs["max_val"])
    return attrs


def _int_scalar(op, name, v, dt):
    """A Python-number attribute of an integer tensor, checked as torch converts it to the tensor's dtype (c10's
    ``checked_convert``: NaN, infinities and values outside the dtype's range overflow)."""
    info = np.iinfo(dt.numpy)
    if not (info.min <= v <= info.max):   # False for NaN
        raise InvalidProblemError(op, name, f"a value representable in {dt} ([{info.min}, {info.max}]); torch "
                                  "converts it to the input's dtype", v)


def _int_limits(*names, truncate=False):
    """The dtype rule of an activation defined for integer tensors with number attributes (threshold, hardtanh):
    the result keeps the input's dtype; on integer inputs the attributes are converted to it as torch does.
    ``truncate``: hardtanh first truncates its limits to integers (torch's toLong) and refuses negative ones on
    uint8."""
    def rule(op, inputs, attrs, r):
        if not r.is_integer:
            return r
        for n in names:
            v = attrs[n]
            if truncate and math.isfinite(v):
                v = math.trunc(v)
                if r == DType.u8 and v < 0:
                    raise InvalidProblemError(op, n, "non-negative limits for an unsigned (u8) input (torch)", attrs[n])
            _int_scalar(op, n, v, r)
        return r
    return rule


def _aten(name):
    def peer(*xs, **kw):
        import torch

        return getattr(torch.ops.aten, name)(*xs, **kw)
    return peer


def _peer_relu_bw(g, x):
    import torch

    return torch.ops.aten.threshold_backward(g, x, 0)


def _gated_peer(act):
    def peer(x, dim=-1, **kw):
        import torch
        import torch.nn.functional as F

        a, b = torch.chunk(x, 2, dim)
        return getattr(F, act)(a, **kw) * b
    return peer


def _act_mul_peer(act):
    def peer(a, b, **kw):
        import torch.nn.functional as F

        return getattr(F, act)(a, **kw) * b
    return peer


def _act_mul_bw_peer(act):
    """torch autograd's gradient of act(a) * b for a (the peer of ``<act>_mul_backward(g, a, b)``)."""
    def peer(g, a, b, **kw):
        import torch

        ar = a.detach().clone().requires_grad_(True)
        (da,) = torch.autograd.grad(_act_mul_peer(act)(ar, b, **kw), ar, g)
        return da
    return peer


def _g_act_mul(name):
    """da = <name>_backward(g, a, b) (one fused pass), db = <name>(a, g) = act(a) * g (the forward op)."""
    def rule(ctx, d, grads, s):
        g, n, a, b, kw = grads[0], ctx.needs, s["a"], s["b"], d.attr_dict
        return (reduce_grad(ctx, ctx.op(f"{name}_backward", g, a, b, **kw), d.inputs[0].shape) if n[0] else None,
                reduce_grad(ctx, ctx.op(name, a, g, **kw), d.inputs[1].shape) if n[1] else None)
    return rule


def _act_mul(act, *attrs, attr_samples=({},)):
    """The rows of ``<act>_mul(a, b) = act(a) * b`` and its internal ``<act>_mul_backward(g, a, b)``."""
    name = f"{act}_mul"
    return (EwDef(name, 2, _act_mul_peer(act), None, None, _g_act_mul(name), attrs=attrs,
                  doc=f"{act}(a) * b (the gated MLP's product from separate gate / up tensors)",
                  samples=ew_samples(attrs=attr_samples)),
            EwDef(f"{name}_backward", 3, _act_mul_bw_peer(act), None, internal=True, attrs=attrs,
                  samples=ew_samples(attrs=attr_samples, lean=True)))


def _di(name, attrs=(), first="input"):
    return dropin_ew(name, first, attr_names=attrs, unsupported=("inplace",))


def _act(name, *attrs, check=None, samples=None, bw="x", dtypes=FLOAT, **kw):
    return EwDef(name, 1, tp(name), f"torch.nn.functional.{name}", kw.pop("jax", None), attrs=attrs,
                 check_attrs=check, bw=bw, dtypes=dtypes, samples=samples or ew_samples(),
                 dropin=kw.pop("dropin", None) or _di(name, tuple(a.name for a in attrs)), **kw)


# -- prelu: weight of 1 element, or one per channel (dim 1 of x), acting as [C, 1, ..., 1] ---------------
def _prelu_align(op, shapes, attrs):
    """(x, weight) or (g, x, weight) -> the shapes they broadcast as; torch's rules for the weight."""
    xs, ws = shapes[-2], shapes[-1]
    if len(ws) > 1:
        raise InvalidProblemError(op, "weight", "a 0-d or 1-D weight", f"shape {ws}")
    n = ws[0] if ws else 1
    if n == 1:
        return tuple(shapes[:-1]) + ((),)
    c = xs[1] if len(xs) >= 2 else 1
    if n != c:
        raise InvalidProblemError(op, "weight", f"1 or {c} (the channel size, dim 1 of x) elements", n)
    return tuple(shapes[:-1]) + ((c,) + (1,) * (len(xs) - 2),)


def _g_prelu(ctx, d, grads, s):
    g, x, w = grads[0], s["a"], s["b"]
    wshape = d.inputs[1].shape
    view = _prelu_align(d.op, (d.inputs[0].shape, wshape), {})[1]
    dw = ctx.reshape(ctx.reduce_to(ctx.op("prelu_weight_grad", g, x), view), wshape)
    return ctx.op("prelu_backward", g, x, w), dw


def _peer_prelu_bw(g, x, w):
    import torch

    xr = x.detach().clone().requires_grad_(True)
    (dx,) = torch.autograd.grad(torch.nn.functional.prelu(xr, w), xr, g)
    return dx


def _peer_prelu_wg(g, x):
    import torch

    return torch.where(x > 0, torch.zeros_like(g), x * g)


# -- rrelu: eval mode is the op rrelu (slope (lower + upper) / 2); training mode is rrelu_with_noise(x, noise) ----
def rrelu_bounds(op, lower, upper) -> None:
    """torch's check of rrelu's bounds (both modes): lower <= upper."""
    if lower > upper:
        raise InvalidProblemError(op, "upper", f"a value >= lower={lower}", upper)


def _check_rrelu(op, attrs):
    if attrs["training"]:
        raise UnsupportedError(op, "training=True draws a random slope per element: the op rrelu_with_noise(x, noise) "
                               "takes the slopes as an operand (baracuda.torch's rrelu draws them from torch's RNG); "
                               "eval mode (training=False, slope (lower + upper) / 2) is this op")
    rrelu_bounds(op, attrs["lower"], attrs["upper"])
    return attrs


def _peer_rrelu_noise(x, noise):
    import torch

    return torch.where(x <= 0, x * noise.to(x.dtype), x)


def _peer_rrelu_noise_bw(g, x, noise):
    import torch

    return torch.where(x <= 0, g * noise.to(g.dtype), g)


def _g_rrelu_noise(ctx, d, grads, s):
    """g * noise where x <= 0, summed back to x's shape where noise broadcasts it.  torch's forward multiplies by the
    slope in the compute dtype (f32 for bf16 / f16) but keeps the noise in x's dtype for the backward: a wider noise
    is rounded to x's dtype first (one small cast, half types only), which gives torch's gradient bit for bit."""
    x, r = s["a"], s["b"]
    if ctx.spec_of(r).dtype != d.inputs[0].dtype:
        r = ctx.op("to_dtype", r, dtype=d.inputs[0].dtype)
    return reduce_grad(ctx, ctx.op("rrelu_with_noise_backward", grads[0], x, r), d.inputs[0].shape), None


_PRELU_SHAPES = (((2, 3, 4, 5), (3,)), ((7,), (1,)), ((5, 4), ()), ((0, 3), (3,)), ((3, 6), (6,)))
_PRELU_BW_SHAPES = (((2, 3, 4), (2, 3, 4), (3,)), ((0, 3), (0, 3), (1,)))


def _gated(name, act_peer, *attrs, attr_samples=({},)):
    attrs = (Attr("dim", "axis", -1),) + attrs
    return EwDef(name, 1, _gated_peer(act_peer) if act_peer else tp(name),
                 f"torch.nn.functional.{name}" if not act_peer else None, None, shape="gated", bw="x", attrs=attrs,
                 dropin=dropin_ew(name, "input", attr_names=tuple(a.name for a in attrs)) if not act_peer else None,
                 samples=ew_samples(avoid=(0.0,), attrs=attr_samples))


add_ew_ops([
    _act("relu", bw="out", bw_peer=_peer_relu_bw, dtypes=NUM, jax="jax.nn.relu",
         aliases=("torch.relu",), samples=ew_samples("wide", avoid=(0.0,))),
    _act("gelu", _APPROX,
         bw_peer=_aten("gelu_backward"), jax="jax.nn.gelu",
         samples=ew_samples(attrs=({"approximate": "none"}, {"approximate": "tanh"}))),
    _act("silu", bw_peer=_aten("silu_backward"), jax="jax.nn.silu"),
    _act("relu6", dtypes=NUM, jax="jax.nn.relu6", samples=ew_samples("wide", avoid=(0.0, 6.0))),
    _act("leaky_relu", _f("negative_slope", 0.01),
         jax="jax.nn.leaky_relu", samples=ew_samples(avoid=(0.0,), attrs=({}, {"negative_slope": 0.2}))),
    _act("elu", _f("alpha", 1.0),
         jax="jax.nn.elu", samples=ew_samples(avoid=(0.0,), attrs=({}, {"alpha": 0.5}))),
    _act("selu", jax="jax.nn.selu", aliases=("torch.selu",), samples=ew_samples(avoid=(0.0,))),
    _act("celu", _f("alpha", 1.0), check=_nonzero_alpha,
         jax="jax.nn.celu", samples=ew_samples(avoid=(0.0,), attrs=({}, {"alpha": 2.0}))),
    _act("mish", jax=None),
    _act("softplus", _f("beta", 1.0), _f("threshold", 20.0),
         jax="jax.nn.softplus", samples=ew_samples(avoid=(1.5,), attrs=({}, {"beta": 2.0, "threshold": 3.0}))),
    # bool -> f32 (x / (1 + |x|): True -> 0.5), as torch's CUDA kernel; its CPU one (2.13) refuses bool (abs_cpu)
    _act("softsign", dtypes=ALL, out="float", jax="jax.nn.soft_sign"),
    _act("tanhshrink", dtypes=NUM, out="float"),
    _act("hardtanh", _f("min_val", -1.0), _f("max_val", 1.0), check=_minmax, dtypes=NUM,
         dtype_rule=_int_limits("min_val", "max_val", truncate=True),
         jax="jax.nn.hard_tanh",
         samples=ew_samples("wide", avoid=(-1.0, 1.0, -0.5, 2.0), attrs=({}, {"min_val": -0.5, "max_val": 2.0}))),
    _act("hardswish", jax="jax.nn.hard_swish", samples=ew_samples("wide", avoid=(-3.0, 3.0))),
    _act("hardsigmoid", jax="jax.nn.hard_sigmoid", samples=ew_samples("wide", avoid=(-3.0, 3.0))),
    # (any real lambd, as torch: a negative one makes the zero band [-lambd, lambd] empty, hardshrink the identity)
    _act("hardshrink", _f("lambd", 0.5),
         samples=ew_samples(avoid=(-1.0, -0.5, 0.5, 1.0), attrs=({}, {"lambd": 1.0}, {"lambd": -0.5}))),
    _act("softshrink", _f("lambd", 0.5, ge=0, expected="a non-negative number"),
         samples=ew_samples(avoid=(-1.0, -0.5, 0.5, 1.0), attrs=({}, {"lambd": 1.0}))),
    _act("threshold", _f("threshold", 0.0), _f("value", 0.0), dtypes=NUM,
         dtype_rule=_int_limits("threshold", "value"),
         samples=ew_samples("wide", avoid=(0.5, -1.5), attrs=({"threshold": 0.5, "value": -2.0},
                                                            {"threshold": -1.5, "value": 9.75}))),
    _act("logsigmoid", jax="jax.nn.log_sigmoid"),
    EwDef("prelu", 2, tp("prelu"), "torch.nn.functional.prelu", None, _g_prelu, same_dtype=True,
          align=_prelu_align,
          dropin=dropin_ew("prelu", "input", "weight"), aliases=("torch.prelu",),
          workloads=(Workload("prelu-[32,256,64,64]-bf16", ((32, 256, 64, 64), (256,)), DType.bf16, backward=True),
                     Workload("prelu-[32,256,64,64]-f32", ((32, 256, 64, 64), (256,)), DType.f32)),
          doc="weight of 1 element or one per channel (dim 1 of x); the weight gradient is the broadcast "
              "gradient x*g (where x <= 0) summed back to the weight",
          samples=ew_samples(("any", "unit"), avoid=(0.0,), shapes=_PRELU_SHAPES)),
    EwDef("prelu_backward", 3, _peer_prelu_bw, None, internal=True, same_dtype=True, align=_prelu_align,
          samples=ew_samples(("any", "any", "unit"), avoid=(0.0,), shapes=_PRELU_BW_SHAPES, lean=True)),
    EwDef("prelu_weight_grad", 2, _peer_prelu_wg, None, internal=True,
          samples=ew_samples(avoid=(0.0,), lean=True, same_shape=True)),
    _act("rrelu", _f("lower", 1.0 / 8.0), _f("upper", 1.0 / 3.0), Attr("training", "bool", False), check=_check_rrelu,
         dropin=dropin_ew("rrelu", "input", attr_names=("lower", "upper", "training"), unsupported=("inplace",)),
         doc="eval mode: leaky_relu with slope (lower + upper) / 2; training=True is rrelu_with_noise",
         samples=ew_samples(avoid=(0.0,), attrs=({}, {"lower": 0.1, "upper": 0.5}))),
    # rrelu's training mode, torch's rrelu_with_noise: the slopes come in as an operand (the drop-in draws them from
    # torch's RNG in the compute dtype: f32 noise for bf16 / f16 x, whose result keeps x's dtype)
    EwDef("rrelu_with_noise", 2, _peer_rrelu_noise, None, None, _g_rrelu_noise, value_args=(0,),
          doc="x * noise where x <= 0, else x (a NaN stays NaN); the gradient is g * noise where x <= 0, else g",
          samples=ew_samples(("any", "prob"), avoid=(0.0,))),
    EwDef("rrelu_with_noise_backward", 3, _peer_rrelu_noise_bw, None, internal=True, value_args=(0,),
          samples=ew_samples(("any", "any", "prob"), avoid=(0.0,), lean=True)),
    # gated
    _gated("glu", None),
    _gated("swiglu", "silu"),
    _gated("geglu", "gelu", _APPROX,
           attr_samples=({"approximate": "none"}, {"approximate": "tanh"})),
    _gated("reglu", "relu"),
    *_act_mul("silu"),
    *_act_mul("gelu", _APPROX, attr_samples=({"approximate": "none"}, {"approximate": "tanh"})),
])

_EXTRA_ERRORS.update({
    "prelu": [ErrorCase((((2, 3, 4), "f32"), ((4,), "f32")), {}, InvalidProblemError,
                        r"prelu: argument 'weight': expected 1 or 3 \(the channel size", "bad-channels"),
              ErrorCase((((2, 3), "f32"), ((1, 3), "f32")), {}, InvalidProblemError,
                        r"prelu: argument 'weight': expected a 0-d or 1-D weight", "2d-weight"),
              ErrorCase((((2, 3), "f32"), ((3,), "f64")), {}, DTypeMismatchError,
                        r"prelu: argument 'b': expected dtype f32", "mixed-dtypes")],
    "threshold": [ErrorCase((((3,), "u8"),), {"threshold": 1.0, "value": -3.0}, InvalidProblemError,
                            r"threshold: argument 'value': expected a value representable in u8", "u8-overflow")],
    "hardtanh": [ErrorCase((((3,), "u8"),), {"min_val": -1.0, "max_val": 1.0}, InvalidProblemError,
                           r"hardtanh: argument 'min_val': expected non-negative limits for an unsigned", "u8-negative"),
                 ErrorCase((((3,), "i8"),), {"min_val": -200.0, "max_val": 1.0}, InvalidProblemError,
                           r"hardtanh: argument 'min_val': expected a value representable in i8", "i8-overflow")],
    "rrelu": [ErrorCase((((3,), "f32"),), {"training": True}, UnsupportedError,
                        r"rrelu: training=True draws a random slope", "training")],
})
