"""Elementwise family: unary, binary (broadcasting, torch type promotion) and the backward helpers.

One table, ``EW_OPS``: adding an op is one ``EwDef`` row here, one NumPy body in
``backends/reference/elementwise.py`` and one Triton body in ``backends/triton/elementwise.py``.
Backward rules compose other baracuda ops through ``ctx`` (see ``_core/plan.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, result_type
from .._core.errors import InvalidProblemError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import ODD_SHAPES, broadcast_shapes

__all__ = ["EwDef", "EW_OPS"]


@dataclass(frozen=True)
class EwDef:
    name: str
    arity: int
    torch_peer: Callable | None = None
    torch_name: str | None = None
    jax_name: str | None = None
    grad: Callable | None = None
    saves: tuple = ("inputs",)
    defaults: dict = field(default_factory=dict)
    check_attrs: Callable | None = None       # (op, attrs) -> attrs, raises on bad values
    domain: str = "any"                       # sample domain: any | positive | nonzero
    internal: bool = False                    # a backward helper: not part of the drop-in namespaces
    dtypes: tuple = FLOAT_TYPES


def _arg_names(arity: int):
    return ("x",) if arity == 1 else ("a", "b", "c")[:arity]


# -- backward rules (ctx.op runs other baracuda ops; ctx.reduce_to sums broadcast grads back) ----
def _g_neg(ctx, d, grads, s):
    return (ctx.op("neg", grads[0]),)


def _g_exp(ctx, d, grads, s):
    return (ctx.op("mul", grads[0], s["out"]),)


def _g_log(ctx, d, grads, s):
    return (ctx.op("div", grads[0], s["x"]),)


def _g_tanh(ctx, d, grads, s):
    return (ctx.op("tanh_backward", grads[0], s["out"]),)


def _g_relu(ctx, d, grads, s):
    return (ctx.op("relu_backward", grads[0], s["x"]),)


def _g_gelu(ctx, d, grads, s):
    return (ctx.op("gelu_backward", grads[0], s["x"], approximate=d.attr("approximate")),)


def _g_silu(ctx, d, grads, s):
    return (ctx.op("silu_backward", grads[0], s["x"]),)


def _g_add(ctx, d, grads, s):
    g = grads[0]
    alpha = d.attr("alpha")
    gb = g if alpha == 1.0 else ctx.op("mul_scalar", g, scalar=alpha)
    return ctx.reduce_to(g, d.inputs[0].shape), ctx.reduce_to(gb, d.inputs[1].shape)


def _g_sub(ctx, d, grads, s):
    g = grads[0]
    alpha = d.attr("alpha")
    gb = ctx.op("neg", g) if alpha == 1.0 else ctx.op("mul_scalar", g, scalar=-alpha)
    return ctx.reduce_to(g, d.inputs[0].shape), ctx.reduce_to(gb, d.inputs[1].shape)


def _g_mul(ctx, d, grads, s):
    g = grads[0]
    return ctx.reduce_to(ctx.op("mul", g, s["b"]), d.inputs[0].shape), ctx.reduce_to(ctx.op("mul", g, s["a"]), d.inputs[1].shape)


def _g_div(ctx, d, grads, s):
    g = grads[0]
    return (ctx.reduce_to(ctx.op("div", g, s["b"]), d.inputs[0].shape),
            ctx.reduce_to(ctx.op("div_backward_b", g, s["a"], s["b"]), d.inputs[1].shape))


def _g_mul_scalar(ctx, d, grads, s):
    return (ctx.op("mul_scalar", grads[0], scalar=d.attr("scalar")),)


def _check_gelu(op, attrs):
    if attrs["approximate"] not in ("none", "tanh"):
        raise InvalidProblemError(op, "approximate", "'none' or 'tanh'", repr(attrs["approximate"]))
    return attrs


def _check_float(name):
    def check(op, attrs):
        try:
            attrs[name] = float(attrs[name])
        except (TypeError, ValueError):
            raise InvalidProblemError(op, name, "a real number", repr(attrs[name])) from None
        return attrs
    return check


def _tp(name):
    """torch peer: torch.<name> or torch.nn.functional.<name>, resolved lazily."""
    def peer(*xs, **kw):
        import torch
        import torch.nn.functional as F

        fn = getattr(torch, name, None) or getattr(F, name)
        return fn(*xs, **kw)
    return peer


def _peer_gelu_bw(g, x, approximate):
    import torch

    return torch.ops.aten.gelu_backward(g, x, approximate=approximate)


def _peer_silu_bw(g, x):
    import torch

    return torch.ops.aten.silu_backward(g, x)


def _peer_tanh_bw(g, y):
    import torch

    return torch.ops.aten.tanh_backward(g, y)


def _peer_relu_bw(g, x):
    import torch

    return torch.ops.aten.threshold_backward(g, x, 0)


def _peer_div_bw_b(g, a, b):
    return -g * a / (b * b)


_G = dict(grad=None)
EW_OPS: dict[str, EwDef] = {e.name: e for e in [
    # unary
    EwDef("neg", 1, _tp("neg"), "torch.neg", "jax.lax.neg", _g_neg, saves=()),
    EwDef("exp", 1, _tp("exp"), "torch.exp", "jax.lax.exp", _g_exp, saves=("outputs",)),
    EwDef("log", 1, _tp("log"), "torch.log", "jax.lax.log", _g_log, domain="positive"),
    EwDef("tanh", 1, _tp("tanh"), "torch.tanh", "jax.lax.tanh", _g_tanh, saves=("outputs",)),
    EwDef("relu", 1, _tp("relu"), "torch.nn.functional.relu", "jax.nn.relu", _g_relu, domain="nonzero"),
    EwDef("gelu", 1, _tp("gelu"), "torch.nn.functional.gelu", "jax.nn.gelu", _g_gelu,
          defaults={"approximate": "none"}, check_attrs=_check_gelu),
    EwDef("silu", 1, _tp("silu"), "torch.nn.functional.silu", "jax.nn.silu", _g_silu),
    EwDef("mul_scalar", 1, lambda x, scalar: x * scalar, "torch.mul (Python scalar)", "jax.lax.mul", _g_mul_scalar,
          saves=(), defaults={"scalar": 1.0}, check_attrs=_check_float("scalar")),
    # binary (broadcasting)
    EwDef("add", 2, _tp("add"), "torch.add", "jax.lax.add", _g_add, saves=(), defaults={"alpha": 1.0},
          check_attrs=_check_float("alpha")),
    EwDef("sub", 2, _tp("sub"), "torch.sub", "jax.lax.sub", _g_sub, saves=(), defaults={"alpha": 1.0},
          check_attrs=_check_float("alpha")),
    EwDef("mul", 2, _tp("mul"), "torch.mul", "jax.lax.mul", _g_mul),
    EwDef("div", 2, _tp("div"), "torch.div", "jax.lax.div", _g_div, domain="nonzero"),
    # backward helpers (binary/ternary elementwise kernels from the same template)
    EwDef("tanh_backward", 2, _peer_tanh_bw, "aten.tanh_backward", internal=True),
    EwDef("relu_backward", 2, _peer_relu_bw, "aten.threshold_backward", internal=True, domain="nonzero"),
    EwDef("gelu_backward", 2, _peer_gelu_bw, "aten.gelu_backward", internal=True,
          defaults={"approximate": "none"}, check_attrs=_check_gelu),
    EwDef("silu_backward", 2, _peer_silu_bw, "aten.silu_backward", internal=True),
    EwDef("div_backward_b", 3, _peer_div_bw_b, None, internal=True, domain="nonzero"),
]}


def _make_check(e: EwDef):
    names = _arg_names(e.arity)

    def check(inputs, attrs):
        op = e.name
        if len(inputs) != e.arity:
            raise InvalidProblemError(op, "inputs", f"{e.arity} operand(s)", len(inputs))
        unknown = set(attrs) - set(e.defaults)
        if unknown:
            raise InvalidProblemError(op, sorted(unknown)[0], f"one of the attributes {sorted(e.defaults) or 'none'}",
                                      "an unknown attribute")
        a = {**e.defaults, **attrs}
        if e.check_attrs:
            a = e.check_attrs(op, a)
        spec = EW_SPECS[op]
        spec.check_dtypes(inputs)
        shape = broadcast_shapes(op, names, [t.shape for t in inputs])
        out_dt = result_type(*(t.dtype for t in inputs))
        return a, (TensorSpec(shape, out_dt),)
    return check


_UNARY_SHAPES = ODD_SHAPES
_BINARY_SHAPES = [((3, 5), (3, 5)), ((2, 3, 4, 5), (4, 5)), ((3, 1, 5), (4, 1)), ((7,), ()), ((0, 4), (4,)),
                  ((33, 65), (33, 1))]


def _draw(rng: np.random.Generator, shape, domain: str):
    x = rng.standard_normal(shape)
    if domain == "positive":
        return np.abs(x) + 0.5
    if domain == "nonzero":
        return np.where(np.abs(x) < 0.1, np.sign(x + 1e-30) * 0.1 + x, x)
    return x


def _make_samples(e: EwDef):
    def samples(rng):
        attr_sets = [{}]
        if e.name in ("gelu", "gelu_backward"):
            attr_sets = [{"approximate": "none"}, {"approximate": "tanh"}]
        if e.name in ("add", "sub"):
            attr_sets = [{}, {"alpha": 0.5}]
        if e.name == "mul_scalar":
            attr_sets = [{"scalar": -1.75}]
        if e.arity == 1:
            shapes = [(s,) for s in _UNARY_SHAPES]
        elif e.arity == 2:
            shapes = _BINARY_SHAPES
        else:
            shapes = [(s, s, s) for s in ((3, 5), (0, 2))] + [((2, 3, 4), (3, 4), (4,))]
        for attrs in attr_sets:
            for sh in shapes:
                yield Sample(tuple(_draw(rng, s, e.domain) for s in sh), dict(attrs), name=f"{sh}{attrs or ''}")
    return samples


def _make_errors(e: EwDef):
    def errors():
        if e.arity >= 2:
            yield ErrorCase((((3, 4), "f32"), ((5,), "f32")) + (((4,), "f32"),) * (e.arity - 2), {},
                            InvalidProblemError, r"argument 'b': expected a shape broadcastable", "bad-broadcast")
        ins = (((3,), "i32"),) * e.arity
        from .._core.errors import UnsupportedError

        yield ErrorCase(ins, {}, UnsupportedError, r"dtype i32; the op is defined for", "int-dtype")
        if e.name == "gelu":
            yield ErrorCase((((3,), "f32"),), {"approximate": "fast"}, InvalidProblemError,
                            r"gelu: argument 'approximate': expected 'none' or 'tanh'", "bad-approximate")
        yield ErrorCase((((3,), "f32"),) * e.arity, {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
    return errors


def _workloads(e: EwDef):
    if e.internal:
        return ()
    n = 64 * 1024 * 1024
    if e.arity == 1:
        return tuple(Workload(f"{e.name}-64M-{dt}", ((n,),), dt, backward=True) for dt in (DType.bf16, DType.f32))
    w = [Workload(f"{e.name}-64M-{dt}", ((n,), (n,)), dt, backward=e.name in ("add", "mul")) for dt in (DType.bf16, DType.f32)]
    if e.name == "add":
        w.append(Workload("add-bcast-[8,4096,2048]+[2048]-bf16", ((8, 4096, 2048), (2048,)), DType.bf16))
    return tuple(w)


EW_SPECS: dict[str, OpSpec] = {}
for _e in EW_OPS.values():
    EW_SPECS[_e.name] = register_spec(OpSpec(
        name=_e.name, family="elementwise", arg_names=_arg_names(_e.arity), check=_make_check(_e),
        dtypes=_e.dtypes, defaults=dict(_e.defaults), torch_peer=_e.torch_peer, torch_name=_e.torch_name,
        jax_name=_e.jax_name, grad=_e.grad, saves=_e.saves,
        differentiable=tuple(range(_e.arity)) if _e.grad else (),
        samples=_make_samples(_e), errors=_make_errors(_e), workloads=_workloads(_e),
        category="elementwise",
    ))
