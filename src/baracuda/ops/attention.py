"""Attention family: the pieces of an attention block around the GEMMs (issue 15).  First op: rotary embedding.

rope(x, cos, sin, layout="bshd", interleaved=False, rotary_dim=None)
    x: [B, S, H, D] (layout "bshd") or [B, H, S, D] ("bhsd"), any strides.  cos / sin: [S, R/2] or [B, S, R/2]
    (B or 1), R = rotary_dim (default 2 * the tables' last dim; even, <= D).  Each pair (a, b) of the first R
    dims of a row is rotated by the angle of its position s and frequency i:
        a' = a * cos[s, i] - b * sin[s, i]      b' = b * cos[s, i] + a * sin[s, i]
    interleaved=False: pairs (i, i + R/2) (the half-split of HF Llama / GPT-NeoX, torch's ``rotate_half`` form);
    interleaved=True: pairs (2i, 2i + 1) (GPT-J).  Dims R..D-1 pass through.  The output has x's shape and dtype
    (contiguous).  Tables are f32 or x's dtype; the GPU computes in f32 (f64 for f64 x), rounding once.

Backward: the inverse rotation of the output gradient, dx = rope(dy, cos, -sin) (a rotation's transpose is its
inverse).  cos / sin get no gradient (the tables are position functions, not parameters): differentiable=(0,).
torch has no rope function, so there is no drop-in under ``baracuda.torch`` (like add_rms_norm); call it as a plan:

    >>> import torch, baracuda as bc
    >>> x, cos, sin = torch.randn(2, 7, 3, 80), torch.randn(7, 32), torch.randn(7, 32)   # rotary_dim 64 of 80
    >>> plan = bc.Plan.select(bc.Descriptor.like("rope", x, cos, sin), bc.as_device("cpu"), bc.PlanPreference())
    >>> plan.run(x, cos, sin).shape
    torch.Size([2, 7, 3, 80])
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import check_nonneg

__all__ = ["ATTENTION_OPS"]

ATTENTION_OPS = ("rope",)

_LAYOUTS = ("bshd", "bhsd")
_ATTRS = (Attr("layout", "str", "bshd", choices=_LAYOUTS,
               doc="bshd: x is [B, S, H, D]; bhsd: x is [B, H, S, D]"),
          Attr("interleaved", "bool", False, doc="False: pairs (i, i + R/2) (GPT-NeoX); True: (2i, 2i + 1) (GPT-J)"),
          Attr("rotary_dim", "int", None, optional=True, ge=0,
               expected="None or an even int <= the head dim (the number of rotated dims)"))


def seq_axis(layout: str) -> int:
    """The sequence axis of x in ``layout`` (bshd: 1, bhsd: 2)."""
    return 1 if layout == "bshd" else 2


def _check(inputs, attrs):
    op = "rope"
    if len(inputs) != 3:
        raise InvalidProblemError(op, "inputs", "3 operands (x, cos, sin)", len(inputs))
    x, c, s = inputs
    _SPECS[op].check_dtypes(inputs)
    check_nonneg(op, ("x", "cos", "sin"), (x.shape, c.shape, s.shape))
    layout = attrs["layout"]
    if len(x.shape) != 4:
        raise InvalidProblemError(op, "x", f"a 4-d tensor ({'[B, S, H, D]' if layout == 'bshd' else '[B, H, S, D]'}"
                                  f", layout={layout!r})", x.shape)
    B, D, S = x.shape[0], x.shape[3], x.shape[seq_axis(layout)]
    for n, t in (("cos", c), ("sin", s)):
        if t.dtype not in (DType.f32, x.dtype):
            raise DTypeMismatchError(op, n, f"f32 or x's dtype {x.dtype}", str(t.dtype))
    if len(c.shape) not in (2, 3) or c.shape[-2] != S or (len(c.shape) == 3 and c.shape[0] not in (B, 1)):
        raise InvalidProblemError(op, "cos", f"shape [S, R/2] or [B, S, R/2] with S={S}, B={B} (or 1)", c.shape)
    if s.shape != c.shape:
        raise InvalidProblemError(op, "sin", f"the shape of 'cos' {c.shape}", s.shape)
    if s.dtype != c.dtype:
        raise DTypeMismatchError(op, "sin", f"{c.dtype} (the dtype of 'cos')", str(s.dtype))
    R = attrs["rotary_dim"]
    if R is None:
        R = 2 * c.shape[-1]
    elif R % 2:
        raise InvalidProblemError(op, "rotary_dim", "an even number of rotated dims", R)
    if R > D:
        raise InvalidProblemError(op, "rotary_dim", f"at most the head dim D={D} (2 * the tables' last dim)", R)
    if c.shape[-1] != R // 2:
        raise InvalidProblemError(op, "cos", f"a last dim of rotary_dim / 2 = {R // 2}", c.shape)
    return dict(attrs, rotary_dim=R), (TensorSpec(x.shape, x.dtype),)


def _g_rope(ctx, d, grads, s):
    # y = Q x per pair with Q a rotation: dx = Q^T dy = the rotation by the negated angle (sin -> -sin)
    return (ctx.op("rope", grads[0], s["cos"], ctx.op("neg", s["sin"]), **d.attr_dict), None, None)


# -- torch peer: the composite formula as model code writes it ------------------------------------
def _peer(x, cos, sin, *, layout="bshd", interleaved=False, rotary_dim=None):
    import torch

    R = 2 * cos.shape[-1] if rotary_dim is None else rotary_dim
    head = -2 if layout == "bshd" else -3   # where the table's broadcast H axis goes: [.., S, 1, R] / [.., 1, S, R]
    if cos.dim() == 3 or layout == "bshd":
        cos, sin = cos.unsqueeze(head), sin.unsqueeze(head)
    xr, xp = x[..., :R], x[..., R:]
    if interleaved:   # GPT-J: rotate_every_two, tables repeated per pair
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        rot = torch.stack((-xr[..., 1::2], xr[..., ::2]), -1).flatten(-2)
    else:             # HF Llama / GPT-NeoX: rotate_half, tables concatenated with themselves
        cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        rot = torch.cat((-xr[..., R // 2:], xr[..., : R // 2]), -1)
    return torch.cat((xr * cos + rot * sin, xp), -1).to(x.dtype)


# -- samples, errors, workloads, cost ------------------------------------------------------------
def tables(rng, lead, S, half):
    """cos / sin tables of random angles (positions times frequencies, plus noise so no value repeats)."""
    theta = np.arange(S)[:, None] * (10000.0 ** (-np.arange(half) / max(half, 1)))[None, :]
    theta = theta + rng.uniform(-np.pi, np.pi, tuple(lead) + (S, half))
    return np.cos(theta), np.sin(theta)


# (B, S, H, D, R, table batch): odd shapes, partial rotary, D not a power of two, per-batch tables, zero-size
_SHAPES = [(2, 7, 3, 80, 64, None), (1, 5, 2, 96, 96, None), (2, 3, 2, 8, 8, 2), (2, 4, 3, 10, 6, 1),
           (1, 1, 1, 2, 2, None), (3, 2, 2, 6, 0, None), (0, 3, 2, 8, 8, None), (2, 0, 2, 8, 4, 2)]


def _samples(rng):
    for B, S, H, D, R, tb in _SHAPES:
        for layout in _LAYOUTS:
            for inter in (False, True):
                shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
                c, s = tables(rng, () if tb is None else (tb,), S, R // 2)
                yield Sample((rng.standard_normal(shape), c, s), {"layout": layout, "interleaved": inter},
                             name=f"{shape}R{R}tb{tb}-{layout}{'-inter' if inter else ''}",
                             grad=B * S * H * D <= 200)


def _errors():
    from .._core.errors import UnsupportedError

    x, t = ((2, 5, 3, 8), "f32"), ((5, 4), "f32")
    yield ErrorCase((((2, 5, 3, 8), "i32"), t, t), {}, UnsupportedError, r"rope: argument 'x' has dtype i32", "int-x")
    yield ErrorCase((((2, 5, 8), "f32"), t, t), {}, InvalidProblemError, r"rope: argument 'x': expected a 4-d", "3d")
    yield ErrorCase((x, ((4, 4), "f32"), ((4, 4), "f32")), {}, InvalidProblemError,
                    r"rope: argument 'cos': expected shape \[S, R/2\] or \[B, S, R/2\] with S=5", "seq-mismatch")
    yield ErrorCase((x, ((3, 5, 4), "f32"), ((3, 5, 4), "f32")), {}, InvalidProblemError,
                    r"argument 'cos': expected shape .* B=2 \(or 1\)", "batch-mismatch")
    yield ErrorCase((x, t, ((5, 3), "f32")), {}, InvalidProblemError, r"argument 'sin': expected the shape", "sin-shape")
    yield ErrorCase((x, ((5, 5), "f32"), ((5, 5), "f32")), {}, InvalidProblemError,
                    r"argument 'rotary_dim': expected at most the head dim D=8", "too-large")
    yield ErrorCase((x, t, t), {"rotary_dim": 7}, InvalidProblemError,
                    r"argument 'rotary_dim': expected an even number", "odd")
    yield ErrorCase((x, t, t), {"rotary_dim": 6}, InvalidProblemError,
                    r"argument 'cos': expected a last dim of rotary_dim / 2 = 3", "table-dim")
    yield ErrorCase((((2, 5, 3, 8), "bf16"), ((5, 4), "f16"), ((5, 4), "f16")), {}, DTypeMismatchError,
                    r"rope: argument 'cos': expected dtype f32 or x's dtype bf16, got f16", "table-dtype")
    yield ErrorCase((x, t, ((5, 4), "f64")), {}, DTypeMismatchError, r"argument 'sin': expected dtype f32", "sin-dtype")
    yield ErrorCase((x, t, t), {"layout": "sbhd"}, InvalidProblemError, r"rope: argument 'layout'", "bad-layout")
    yield ErrorCase((x, t, t), {"interleaved": 1}, InvalidProblemError, r"rope: argument 'interleaved'", "int-flag")


def _cost(desc):
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    x = desc.inputs[0].shape
    return nbytes, 3 * math.prod(x[:3]) * desc.attr("rotary_dim")   # 2 mul + 1 add per rotated element


def _tol(dt):
    # each output is a*c - b*s, computed in f32 (f64) from the rounded inputs and rounded once: one rounding of
    # the output dtype; the f32 bound leaves 2 ulps for the two products' cancellation relative to |a| + |b|
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-6, 2e-6), DType.f16: (1e-2, 1e-3),
            DType.bf16: (1.6e-2, 1e-2)}[dt]


_SPECS: dict[str, OpSpec] = {}
_SPECS["rope"] = register_spec(OpSpec(
    name="rope", family="attention", arg_names=("x", "cos", "sin"), check=_check, dtypes=FLOAT_TYPES,
    attrs=_ATTRS, torch_peer=_peer, grad=_g_rope, saves=("cos", "sin"), differentiable=(0,),
    samples=_samples, errors=_errors, tol=_tol,
    workloads=(Workload("rope-4x2048x32x128-bf16", ((4, 2048, 32, 128), ((2048, 64), DType.f32),
                                                    ((2048, 64), DType.f32)), DType.bf16, {"layout": "bshd"},
                        backward=True),),
    cost=_cost, category="attention",
    doc="rotary position embedding of x [B, S, H, D] / [B, H, S, D] by cos/sin tables [S, R/2] or [B, S, R/2] "
        "(half-split or interleaved pairs, partial rotary dim; no gradient for the tables)."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "neg", "rope")
