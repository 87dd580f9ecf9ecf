"""Attention family: the pieces of an attention block around the GEMMs (issue 15).  First op: rotary embedding.

rope(x, cos, sin, [positions], layout="bshd", interleaved=False, rotary_dim=None, has_positions=False,
     inverse=False)
    x: [B, S, H, D] (layout "bshd") or [B, H, S, D] ("bhsd"), any strides.  cos / sin: [S, R/2] or [B, S, R/2]
    (B or 1), R = rotary_dim (default 2 * the tables' last dim; even, <= D).  Each pair (a, b) of the first R
    dims of a row is rotated by the angle of its position s and frequency i:
        a' = a * cos[s, i] - b * sin[s, i]      b' = b * cos[s, i] + a * sin[s, i]
    interleaved=False: pairs (i, i + R/2) (the half-split of HF Llama / GPT-NeoX, torch's ``rotate_half`` form);
    interleaved=True: pairs (2i, 2i + 1) (GPT-J).  Dims R..D-1 pass through.  The output has x's shape and dtype
    (contiguous).  Tables are f32 or x's dtype; the GPU computes in f32 (f64 for f64 x), rounding once.
    has_positions=True: a 4th operand positions, int32 / int64 [S] or [B, S] (B or 1), and tables of any number P
    of rows, [P, R/2] or [B, P, R/2] (B or 1): row s of batch b takes the tables' row positions[b, s] (a KV-cache
    decode step, packed or shifted sequences; the tables are a cache built once, e.g. by ``rope_tables``).
    A position outside [0, P) is an error (the GPU never reads out of bounds: the row's rotated dims become NaN
    and the plan raises per PlanPreference.check_values, _core/checks.py).
    inverse=True rotates by -theta (sin -> -sin): the inverse rotation.

Backward: the inverse rotation of the output gradient, dx = rope(dy, cos, sin, inverse=not inverse) (a rotation's
transpose is its inverse): one launch, the same tables and positions.  cos / sin / positions get no gradient (the
tables are position functions, not parameters; positions are integers): differentiable=(0,).
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
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from .._core.derive import declare_rule_ops
from ._common import check_nonneg

__all__ = ["ATTENTION_OPS", "seq_axis", "take_rows", "INDEX_TYPES"]

ATTENTION_OPS = ("rope",)

_LAYOUTS = ("bshd", "bhsd")
_ATTRS = (Attr("layout", "str", "bshd", choices=_LAYOUTS,
               doc="bshd: x is [B, S, H, D]; bhsd: x is [B, H, S, D]"),
          Attr("interleaved", "bool", False, doc="False: pairs (i, i + R/2) (GPT-NeoX); True: (2i, 2i + 1) (GPT-J)"),
          Attr("rotary_dim", "int", None, optional=True, ge=0,
               expected="None or an even int <= the head dim (the number of rotated dims)"),
          Attr("has_positions", "bool", False,
               doc="a 4th operand positions int [S] or [B, S] indexes the tables' rows ([P, R/2] / [B, P, R/2])"),
          Attr("inverse", "bool", False, doc="rotate by -theta (the backward's rotation)"))
INDEX_TYPES = (DType.i32, DType.i64)


def seq_axis(layout: str) -> int:
    """The sequence axis of x in ``layout`` (bshd: 1, bhsd: 2)."""
    return 1 if layout == "bshd" else 2


def take_rows(t, pos, arange):
    """Rows ``pos`` of a table t [P, H] or [Bt, P, H] (NumPy or torch, ``arange`` its module's): [S, H] or
    [B, S, H] as the tables of the no-positions form (pos [S] or [Bp, S]; Bt / Bp broadcast from 1)."""
    if t.ndim == 2:
        return t[pos]
    if pos.ndim == 1:
        return t[:, pos]
    return t[arange(t.shape[0])[:, None], pos]


def _check(inputs, attrs):
    op = "rope"
    has_pos = attrs["has_positions"]
    n = 4 if has_pos else 3
    if len(inputs) != n:
        raise InvalidProblemError(op, "inputs", f"{n} operands (x, cos, sin{', positions' if has_pos else ''}; "
                                  f"has_positions={has_pos})", len(inputs))
    x, c, s = inputs[:3]
    _SPECS[op].check_dtypes(inputs[:3])
    check_nonneg(op, ("x", "cos", "sin", "positions"), [t.shape for t in inputs])
    layout = attrs["layout"]
    if len(x.shape) != 4:
        raise InvalidProblemError(op, "x", f"a 4-d tensor ({'[B, S, H, D]' if layout == 'bshd' else '[B, H, S, D]'}"
                                  f", layout={layout!r})", x.shape)
    B, D, S = x.shape[0], x.shape[3], x.shape[seq_axis(layout)]
    for nm, t in (("cos", c), ("sin", s)):
        if t.dtype not in (DType.f32, x.dtype):
            raise DTypeMismatchError(op, nm, f"f32 or x's dtype {x.dtype}", str(t.dtype))
    if has_pos:
        p = inputs[3]
        if p.dtype not in INDEX_TYPES:
            raise DTypeMismatchError(op, "positions", "i32 or i64 (integer positions)", str(p.dtype))
        if len(p.shape) not in (1, 2) or p.shape[-1] != S or (len(p.shape) == 2 and p.shape[0] not in (B, 1)):
            raise InvalidProblemError(op, "positions", f"shape [S] or [B, S] with S={S}, B={B} (or 1)", p.shape)
        rows = f"[P, R/2] or [B, P, R/2] (any P: rows indexed by positions) with B={B} (or 1)"
        if len(c.shape) not in (2, 3) or (len(c.shape) == 3 and c.shape[0] not in (B, 1)):
            raise InvalidProblemError(op, "cos", "shape " + rows, c.shape)
    elif len(c.shape) not in (2, 3) or c.shape[-2] != S or (len(c.shape) == 3 and c.shape[0] not in (B, 1)):
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
    # y = Q x per pair with Q a rotation: dx = Q^T dy = the rotation by the negated angle, the same kernel with
    # inverse flipped (no negated copy of the sin table)
    pos = (s["positions"],) if d.attr("has_positions") else ()
    dx = ctx.op("rope", grads[0], s["cos"], s["sin"], *pos, **dict(d.attr_dict, inverse=not d.attr("inverse")))
    return (dx, None, None) + (None,) * len(pos)


# -- torch peer: the composite formula as model code writes it ------------------------------------
def _peer(x, cos, sin, positions=None, *, layout="bshd", interleaved=False, rotary_dim=None, has_positions=False,
          inverse=False):
    import torch

    R = 2 * cos.shape[-1] if rotary_dim is None else rotary_dim
    if has_positions:   # the cache rows of each token (torch's advanced indexing)
        cos, sin = take_rows(cos, positions.long(), torch.arange), take_rows(sin, positions.long(), torch.arange)
    if inverse:
        sin = -sin
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


# with positions (B, S, H, D, R, P table rows, table batch, positions batch, positions dtype): the first three are
# small enough for the generic gradient checks; repeated and unsorted positions, P < S and P > S, zero-size
_POS_SHAPES = [(1, 3, 2, 4, 4, 6, None, None, np.int64), (2, 2, 2, 4, 2, 3, 2, 2, np.int32),
               (2, 3, 1, 6, 4, 2, None, 1, np.int64), (2, 5, 3, 12, 8, 11, None, None, np.int32),
               (2, 4, 2, 10, 6, 9, None, 2, np.int64), (2, 3, 2, 8, 8, 7, 2, 2, np.int32),
               (2, 3, 2, 8, 4, 6, 1, None, np.int64), (3, 4, 1, 6, 6, 5, 3, 1, np.int32),
               (2, 0, 2, 8, 4, 3, None, 2, np.int64), (1, 0, 1, 4, 4, 0, None, None, np.int32)]


def _pos_samples(rng):
    for k, (B, S, H, D, R, P, tb, pb, pdt) in enumerate(_POS_SHAPES):
        layout, inter, inverse = _LAYOUTS[k % 2], k % 3 == 1, k % 4 == 1
        shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
        c, s = tables(rng, () if tb is None else (tb,), P, R // 2)
        pos = rng.integers(0, max(P, 1), (S,) if pb is None else (pb, S)).astype(pdt)
        yield Sample((rng.standard_normal(shape), c, s, pos),
                     {"layout": layout, "interleaved": inter, "has_positions": True, "inverse": inverse},
                     name=f"{shape}R{R}P{P}tb{tb}pb{pb}-{layout}{'-inter' if inter else ''}"
                          f"{'-inverse' if inverse else ''}", grad=B * S * H * D <= 64)


def _samples(rng):
    # one plain sample first, then the positions ones (the generic gradient checks take the first small ones; the
    # sm_90 compile check the first two per dtype: a plain and a positions kernel)
    plain = _plain_samples(rng)
    yield next(plain)
    yield from _pos_samples(rng)
    yield from plain


def _plain_samples(rng):
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
    # positions: the operand count follows has_positions; integer [S] / [B, S]; tables of any rows P
    tp, pos = ((9, 4), "f32"), ((5,), "i64")
    yield ErrorCase((x, tp, tp), {"has_positions": True}, InvalidProblemError,
                    r"rope: argument 'inputs': expected 4 operands \(x, cos, sin, positions", "no-positions")
    yield ErrorCase((x, t, t, pos), {}, InvalidProblemError, r"argument 'inputs': expected 3 operands", "extra-operand")
    yield ErrorCase((x, tp, tp, ((5,), "f32")), {"has_positions": True}, DTypeMismatchError,
                    r"rope: argument 'positions': expected dtype i32 or i64", "float-positions")
    yield ErrorCase((x, tp, tp, ((6,), "i32")), {"has_positions": True}, InvalidProblemError,
                    r"argument 'positions': expected shape \[S\] or \[B, S\] with S=5, B=2", "positions-seq")
    yield ErrorCase((x, tp, tp, ((3, 5), "i64")), {"has_positions": True}, InvalidProblemError,
                    r"argument 'positions': expected shape", "positions-batch")
    yield ErrorCase((x, ((9,), "f32"), ((9,), "f32"), pos), {"has_positions": True}, InvalidProblemError,
                    r"argument 'cos': expected shape \[P, R/2\] or \[B, P, R/2\]", "table-rank")
    yield ErrorCase((x, ((3, 9, 4), "f32"), ((3, 9, 4), "f32"), pos), {"has_positions": True}, InvalidProblemError,
                    r"argument 'cos': expected shape \[P, R/2\] .* B=2 \(or 1\)", "table-batch")
    yield ErrorCase((x, t, t), {"inverse": 0}, InvalidProblemError, r"rope: argument 'inverse'", "int-inverse")


def _cost(desc):
    # (with positions the tables' bytes count as a whole: an upper bound, a decode step reads S of the P rows)
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
    name="rope", family="attention", arg_names=("x", "cos", "sin", "positions"), check=_check, dtypes=FLOAT_TYPES,
    attrs=_ATTRS, torch_peer=_peer, grad=_g_rope, saves=("cos", "sin", "positions"), differentiable=(0,),
    samples=_samples, errors=_errors, tol=_tol,
    workloads=(Workload("rope-4x2048x32x128-bf16", ((4, 2048, 32, 128), ((2048, 64), DType.f32),
                                                    ((2048, 64), DType.f32)), DType.bf16, {"layout": "bshd"},
                        backward=True),
               # a batched decode step: 64 sequences, one new token each, at its own position of a 128k cache
               Workload("rope-decode-64x1x32x128-pos-bf16", ((64, 1, 32, 128), ((131072, 64), DType.f32),
                                                             ((131072, 64), DType.f32), ((64, 1), DType.i64)),
                        DType.bf16, {"layout": "bshd", "has_positions": True})),
    cost=_cost, category="attention",
    doc="rotary position embedding of x [B, S, H, D] / [B, H, S, D] by cos/sin tables [S, R/2] or [B, S, R/2], or "
        "by rows positions [S] / [B, S] of tables [P, R/2] / [B, P, R/2] (half-split or interleaved pairs, partial "
        "rotary dim, inverse rotation; no gradient for the tables)."))


def _bench_inputs(desc, device, gen):
    """x ~ N(0, 1), tables of angles, positions spread over all P rows (the samples' small integers would keep
    every token on the same few cache rows: L2 hits a decode step does not get)."""
    import torch

    g = dict(generator=gen, device=gen.device)
    x, c = desc.inputs[:2]
    theta = torch.rand(c.shape, **g, dtype=torch.float64) * 2 * math.pi
    ins = [torch.randn(x.shape, **g).to(x.dtype.torch), theta.cos().to(c.dtype.torch), theta.sin().to(c.dtype.torch)]
    if desc.attr("has_positions"):
        p = desc.inputs[3]
        ins.append(torch.randint(0, max(c.shape[-2], 1), p.shape, **g).to(p.dtype.torch))
    return [t.to(device) for t in ins]


set_bench_inputs("rope", _bench_inputs)


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "rope")
