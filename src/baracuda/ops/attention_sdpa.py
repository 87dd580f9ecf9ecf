"""Attention family: scaled dot-product attention, dense and variable-length, forward and backward (issue 15).

sdpa(q, k, v[, mask][, alibi_slopes][, block_mask], layout, scale, causal, window_left, window_right, softcap,
     dropout_p, seed, offset, has_mask, has_alibi, block_size) -> (out, lse)
    layout "bhsd": q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv]; "bshd": [B, S, H, .].  Any strides.
    Hq % Hkv == 0: query head h reads kv head h // (Hq // Hkv) (GQA / MQA).  Dv may differ from D.
    Score s[b, h, i, j] = scale * <q_i, k_j> (scale None: 1 / sqrt(D)); softcap > 0: s = softcap * tanh(s /
    softcap); alibi: s -= slope[b?, h] * |i + Sk - Sq - j|; float mask: s += mask[b, h, i, j] (broadcast by torch's
    rules).  Excluded -> -inf: a False of a bool mask (True = take part, torch's convention), causal ("top_left":
    j <= i, torch's is_causal; "bottom_right": j <= i + Sk - Sq, FlashAttention's), the window (i + off -
    window_left <= j <= i + off + window_right, off = 0 for top_left, Sk - Sq otherwise), a False block of
    block_mask [B|1, Hq|1, ceil(Sq / block_size), ceil(Sk / block_size)].
    P = softmax_j(s); lse = logsumexp_j(s) (natural log; f32, f64 for f64 inputs).  A row with every key excluded
    gives out = 0 and lse = -inf (torch's safe softmax), never NaN.
    Dropout: key j of row (b, h, i) is kept iff u >= float32(dropout_p), u = tl.rand(seed, n) with the int64 counter
    n = offset + ((b * Hq + h) * Sq + i) * Sk + j (Philox-4x32-10; the reference reimplements it bit for bit), and
    out = (P * keep / (1 - dropout_p)) @ V; lse is that of the undropped scores.  out: q's dtype and layout with Dv.
    Operand dtypes: q / k / v f16, bf16, f32, f64 (one of them); mask bool, f32 or q's; alibi_slopes f32 or q's;
    block_mask bool.  FP8: q / k / v f8e4m3 with optional descale operands (per tensor or per head, has_descale)
    and a bf16 / f16 out (out_dtype), the op attending over the dequantized values: ops/attention_fp8.py.
    The descriptor stores scale resolved (None -> 1 / sqrt(D), 1 for D = 0).
sdpa_backward(grad_out, q, k, v, out, lse[, mask][, alibi_slopes][, block_mask][, grad_lse], <sdpa's attrs>,
              has_grad_lse) -> (dq, dk, dv)
    From the saved out and lse (P = exp(s - lse) recomputed, the dropout mask regenerated from seed / offset):
    ds = P * (dP - rowsum(grad_out * out) + grad_lse), dP = grad_out @ V^T * keep / (1 - p), through softcap's
    tanh; dk / dv of a kv head summed over its Hq // Hkv query heads.  ``grad_lse`` (has_grad_lse) is the gradient
    of the lse output (its derivative is P itself), so both outputs of sdpa are differentiable.  lse and grad_lse
    are f32 (f64 for f64) or q's dtype.
sdpa_varlen / sdpa_varlen_backward: the packed variable-length form, in ops/attention_varlen.py (this module's
checks, rule and cost serve both).

mask / alibi_slopes / block_mask / cu_seqlens get no gradient.  torch's F.scaled_dot_product_attention is the peer
where it expresses the case (no softcap, no dropout: its dropout stream is not Philox-by-counter); the others are a
dense torch composition of the same formula.

    >>> import torch, baracuda as bc
    >>> q, k, v = torch.randn(2, 8, 100, 64), torch.randn(2, 2, 120, 64), torch.randn(2, 2, 120, 32)
    >>> plan = bc.Plan.select(bc.Descriptor.like("sdpa", q, k, v, causal="bottom_right"), "cpu", bc.PlanPreference())
    >>> [tuple(t.shape) for t in plan.run(q, k, v)]
    [(2, 8, 100, 32), (2, 8, 100)]
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, OpSpec, TensorSpec, register_spec
from .attention_dropin import sdpa_dropin
from .attention_fp8 import DESCALE_NAMES, F8, FP8_ATTRS, check_fp8, compute_dtype, descale_names, fp8_errors
from ._common import check_nonneg

__all__ = ["SDPA_OPS", "LAYOUTS", "CAUSAL", "SDPA_DTYPES", "sdpa_dims", "lse_dtype", "check_attention_bw"]

SDPA_OPS = ("sdpa", "sdpa_backward")
LAYOUTS = ("bhsd", "bshd")
CAUSAL = ("none", "top_left", "bottom_right")
SDPA_DTYPES = (DType.f16, DType.bf16, DType.f32, DType.f64)
_OPT_INT = "None (unbounded) or an int >= 0"

# the attributes every attention op of this module shares (the score, its exclusions, dropout)
_SCORE_ATTRS = (
    Attr("scale", "float", None, optional=True, expected="a real number or None (1 / sqrt(D))",
         doc="the score multiplier; None -> 1 / sqrt(D), stored as the number"),
    Attr("causal", "str", "none", choices=CAUSAL,
         doc="top_left: key j allowed iff j <= i (torch's is_causal); bottom_right: iff j <= i + Sk - Sq"),
    Attr("window_left", "int", None, optional=True, ge=0, expected=_OPT_INT,
         doc="keys allowed from i + off - window_left (off = 0 for top_left, Sk - Sq otherwise)"),
    Attr("window_right", "int", None, optional=True, ge=0, expected=_OPT_INT,
         doc="keys allowed up to i + off + window_right"),
    Attr("softcap", "float", 0.0, ge=0, expected="a real number >= 0 (0: off)",
         doc="s -> softcap * tanh(s / softcap) (Gemma-2 / Grok logit capping), 0 = off"),
    Attr("dropout_p", "float", 0.0, ge=0, lt=1, expected="a probability in [0, 1)"),
    Attr("seed", "int", 0, ge=0, lt=2 ** 63, expected="an int in [0, 2**63) (the Philox key)"),
    Attr("offset", "int", 0, ge=0, expected="an int >= 0 (added to the Philox counter)"),
    Attr("has_alibi", "bool", False, doc="an alibi_slopes operand follows"),
)
_DENSE_ATTRS = (
    Attr("layout", "str", "bhsd", choices=LAYOUTS, doc="bhsd: [B, H, S, D]; bshd: [B, S, H, D]"),
    *_SCORE_ATTRS,
    Attr("has_mask", "bool", False, doc="a mask operand follows v (bool: True = take part; float: added)"),
    Attr("block_size", "int", None, optional=True, gt=0, expected="None or an int > 0 (a block_mask operand follows)"),
    *FP8_ATTRS,
)
_GRAD_LSE = Attr("has_grad_lse", "bool", False, doc="a grad_lse operand (the lse output's gradient) comes last")


def lse_dtype(dt: DType) -> DType:
    """The lse output's dtype: f64 for f64 inputs, f32 otherwise."""
    return DType.f64 if dt == DType.f64 else DType.f32


def sdpa_dims(layout: str, q, k, v) -> tuple[int, ...]:
    """(B, Hq, Hkv, Sq, Sk, D, Dv) of q / k / v shapes in ``layout``."""
    (Hq, Sq), (Hkv, Sk) = _hs(layout, q), _hs(layout, k)
    return q[0], Hq, Hkv, Sq, Sk, q[3], v[3]


def _extra_names(attrs, dense: bool) -> tuple[str, ...]:
    """The optional operands present, in order, per the has_* attributes."""
    names = ("mask",) * (dense and attrs["has_mask"]) + ("alibi_slopes",) * attrs["has_alibi"]
    return names + ("block_mask",) * (dense and attrs["block_size"] is not None) + descale_names(attrs) * dense


def _count(op, inputs, lead: tuple, names: tuple, flags: str):
    if len(inputs) != len(lead) + len(names):
        raise InvalidProblemError(op, "inputs", f"{len(lead) + len(names)} operands ({', '.join(lead + names)}) "
                                  f"for {flags}", len(inputs))


def _hs(layout, shape) -> tuple[int, int]:
    """(heads, sequence length) of a q / k / v shape: bhsd [B, H, S, .], bshd [B, S, H, .], None (varlen) [T, H, .]."""
    return (shape[1], shape[2]) if layout == "bhsd" else (shape[2], shape[1]) if layout == "bshd" else \
        (shape[1], shape[0])


def _qkv(op, q, k, v, layout: str | None):
    """dtype, rank and shape checks of q / k / v; returns (B, Hq, Hkv, Sq, Sk, D, Dv) (varlen, layout None:
    B = 1 and S = the packed token counts)."""
    if q.dtype not in SDPA_DTYPES and not (q.dtype == F8 and layout is not None):
        raise UnsupportedError(op, f"argument 'q' has dtype {q.dtype}; the op is defined for "
                                   f"{', '.join(map(str, SDPA_DTYPES))}" + (" and f8e4m3" if layout else ""))
    for n, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise DTypeMismatchError(op, n, f"{q.dtype} (q's dtype)", str(t.dtype))
    check_nonneg(op, ("q", "k", "v"), (q.shape, k.shape, v.shape))
    rank, what = (3, "[T, H, D]") if layout is None else (4, "[B, H, S, D]" if layout == "bhsd" else "[B, S, H, D]")
    for n, t in (("q", q), ("k", k), ("v", v)):
        if len(t.shape) != rank:
            raise InvalidProblemError(op, n, f"a {rank}-d tensor {what}" + (f" (layout={layout!r})" if layout else ""),
                                      t.shape)
    B = 1 if layout is None else q.shape[0]
    (Hq, Sq), (Hkv, Sk), (Hv, Sv) = _hs(layout, q.shape), _hs(layout, k.shape), _hs(layout, v.shape)
    D, Dv = q.shape[-1], v.shape[-1]
    for n, t in (("k", k), ("v", v)):
        if layout is not None and t.shape[0] != B:
            raise InvalidProblemError(op, n, f"batch size B={B} (q's)", t.shape)
    if (Hv, Sv) != (Hkv, Sk):
        raise InvalidProblemError(op, "v", f"Hkv={Hkv} heads and Sk={Sk} keys (k's)", v.shape)
    if k.shape[-1] != D:
        raise InvalidProblemError(op, "k", f"head dim D={D} (q's)", k.shape)
    if (Hkv == 0 and Hq != 0) or (Hkv and Hq % Hkv):
        raise InvalidProblemError(op, "k", f"a number of kv heads dividing Hq={Hq} (GQA / MQA)", k.shape)
    return B, Hq, Hkv, Sq, Sk, D, Dv


def _check_extras(op, extras: dict, dims, dt: DType, attrs):
    """mask (broadcastable to [B, Hq, Sq, Sk]), alibi_slopes ([Hq] or [B, Hq]), block_mask (the block grid)."""
    B, Hq, _, Sq, Sk, _, _ = dims
    full = (B, Hq, Sq, Sk)
    m = extras.get("mask")
    if m is not None:
        if m.dtype not in (DType.bool, dt, DType.f32):
            raise DTypeMismatchError(op, "mask", f"bool, f32 or q's dtype {dt}", str(m.dtype))
        if len(m.shape) > 4 or any(a not in (1, b) for a, b in zip(m.shape[::-1], full[::-1])):
            raise InvalidProblemError(op, "mask", f"a shape broadcastable to [B, Hq, Sq, Sk] = {list(full)}", m.shape)
    s = extras.get("alibi_slopes")
    if s is not None:
        if s.dtype not in (DType.f32, dt):
            raise DTypeMismatchError(op, "alibi_slopes", f"f32 or q's dtype {dt}", str(s.dtype))
        if tuple(s.shape) not in ((Hq,), (B, Hq)):
            raise InvalidProblemError(op, "alibi_slopes", f"shape [Hq] = [{Hq}] or [B, Hq] = [{B}, {Hq}]", s.shape)
    bm = extras.get("block_mask")
    if bm is not None:
        bs = attrs["block_size"]
        nq, nk = -(-Sq // bs), -(-Sk // bs)
        if bm.dtype != DType.bool:
            raise DTypeMismatchError(op, "block_mask", "bool", str(bm.dtype))
        if len(bm.shape) != 4 or bm.shape[0] not in (1, B) or bm.shape[1] not in (1, Hq) or bm.shape[2:] != (nq, nk):
            raise InvalidProblemError(op, "block_mask", f"shape [B|1, Hq|1, ceil(Sq/{bs}), ceil(Sk/{bs})] = "
                                      f"[{B}|1, {Hq}|1, {nq}, {nk}]", bm.shape)


def _normalized(op, attrs, D: int, n_counters: int) -> dict:
    """scale None -> 1 / sqrt(D) (1 for D = 0); the dropout counter range checked against int64."""
    a = dict(attrs)
    if a["scale"] is None:
        a["scale"] = 1.0 / math.sqrt(D) if D else 1.0
    if a["dropout_p"] > 0 and a["offset"] + n_counters > 2 ** 63:
        raise InvalidProblemError(op, "offset", f"offset + {n_counters} (the dropout counters) <= 2**63", a["offset"])
    return a


def _flags(attrs, dense: bool) -> str:
    keys = ("has_mask", "has_alibi", "block_size", "has_descale") if dense else ("has_alibi",)
    return ", ".join(f"{k}={attrs[k]}" for k in keys)


def _sdpa_problem(op, qkv, extras, attrs):
    """The dense forward problem: (normalized attrs, out spec, lse spec)."""
    q, k, v = qkv
    layout = attrs["layout"]
    dims = _qkv(op, q, k, v, layout)
    B, Hq, _, Sq, Sk, D, Dv = dims
    named = dict(zip(_extra_names(attrs, True), extras))
    check_fp8(op, q.dtype, {n: named.pop(n) for n in descale_names(attrs)}, Hq, dims[2], attrs)
    odt = compute_dtype(q.dtype, attrs)
    _check_extras(op, named, dims, odt, attrs)
    a = _normalized(op, attrs, D, B * Hq * Sq * Sk)
    out = (B, Hq, Sq, Dv) if layout == "bhsd" else (B, Sq, Hq, Dv)
    return a, TensorSpec(out, odt), TensorSpec((B, Hq, Sq), lse_dtype(q.dtype))


def _check_sdpa(inputs, attrs):
    op = "sdpa"
    names = _extra_names(attrs, True)
    _count(op, inputs, ("q", "k", "v"), names, _flags(attrs, True))
    a, out, lse = _sdpa_problem(op, inputs[:3], inputs[3:], attrs)
    return a, (out, lse)


def _check_saved(op, named: dict, out: TensorSpec, lse: TensorSpec, dt: DType):
    """grad_out / out against the forward's out; lse / grad_lse against its lse (f32 / f64, or q's dtype)."""
    for n, t in named.items():
        want = out if n in ("grad_out", "out") else lse
        what = "out" if want is out else "lse"
        if t.shape != want.shape:
            raise InvalidProblemError(op, n, f"the forward's {what} shape {want.shape}", t.shape)
        ok = (dt,) if want is out else (want.dtype, dt)
        if t.dtype not in ok:
            raise DTypeMismatchError(op, n, " or ".join(dict.fromkeys(map(str, ok))), str(t.dtype))


def check_attention_bw(op, inputs, attrs, lead, problem):
    """A fused attention backward's rule, dense and varlen alike: inputs (grad_out, <the forward's operands>, out,
    lse, <the forward's extras>, [grad_lse]) named by ``lead``; the forward's own checks (``problem``), the saved
    tensors against its outputs, and dq / dk / dv in out's dtype (the gradients of the dequantized values for FP8)."""
    dense = op == "sdpa_backward"
    names = _extra_names(attrs, dense)
    _count(op, inputs, lead, names + ("grad_lse",) * attrs["has_grad_lse"],
           _flags(attrs, dense) + f", has_grad_lse={attrs['has_grad_lse']}")
    n = len(lead) - 3           # the forward's operands, between grad_out and (out, lse)
    fa = {k: v for k, v in attrs.items() if k != "has_grad_lse"}
    a, out, lse = problem(op, inputs[1:1 + n], inputs[len(lead):len(lead) + len(names)], fa)
    saved = dict(zip(("grad_out", "out", "lse"), (inputs[0], inputs[n + 1], inputs[n + 2])))
    if attrs["has_grad_lse"]:
        saved["grad_lse"] = inputs[-1]
    _check_saved(op, saved, out, lse, out.dtype)
    return dict(a, has_grad_lse=attrs["has_grad_lse"]), tuple(TensorSpec(t.shape, out.dtype) for t in inputs[1:4])


def _check_sdpa_bw(inputs, attrs):
    return check_attention_bw("sdpa_backward", inputs, attrs, ("grad_out", "q", "k", "v", "out", "lse"),
                              _sdpa_problem)


# -- backward rules: one fused backward op each ---------------------------------------------------
def _g_attention(bw_op: str, n_lead: int):
    """dq, dk, dv from the fused backward op; the saved operands are the forward's own (q, k, v, [cu_seqlens],
    extras) and both outputs; a missing grad_out is zeros (only lse's gradient flows), a missing grad_lse is left
    out (has_grad_lse=False)."""
    def rule(ctx, d, grads, s):
        go, gl = grads
        if go is None and gl is None:
            return (None,) * len(d.inputs)
        names = d.spec.arg_names[:len(d.inputs)]
        ins = [s[n] for n in names]
        if go is None:
            go = ctx.op("zeros_like", s["out0"])
        extra = (gl,) if gl is not None else ()
        r = ctx.op(bw_op, go, *ins[:n_lead], s["out0"], s["out1"], *ins[n_lead:], *extra,
                   **d.attr_dict, has_grad_lse=gl is not None)
        return tuple(r) + (None,) * (len(d.inputs) - 3)
    return rule


# -- torch peer: F.scaled_dot_product_attention where it expresses the case, else the dense formula in torch ----
def _peer_dense(q, k, v, extras: dict, attrs, counters=None):
    """(out, lse) in bhsd of one dense problem (q [B, Hq, Sq, D], k / v [B, Hkv, Sk, .]) in torch; ``counters``:
    the dropout counters [B, Hq, Sq, Sk] (NumPy int64) where dropout_p > 0."""
    import torch
    import torch.nn.functional as F

    B, Hq, Sq, D = q.shape
    Sk, G = k.shape[2], Hq // max(k.shape[1], 1)
    sc, cap, p = attrs["scale"], attrs["softcap"], attrs["dropout_p"]
    kk, vv = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
    s = sc * (q @ kk.transpose(-1, -2))
    if cap:
        s = cap * torch.tanh(s / cap)
    bias = torch.zeros((), dtype=s.dtype)
    from ..backends.reference.attention_sdpa import band_allowed

    ok = band_allowed(Sq, Sk, attrs, lambda n: torch.arange(n, device=q.device)).expand(B, Hq, Sq, Sk)
    slopes = extras.get("alibi_slopes")
    if slopes is not None:
        dist = (torch.arange(Sq)[:, None] + (Sk - Sq) - torch.arange(Sk)[None, :]).abs().to(s.dtype)
        bias = bias - slopes.to(s.dtype).reshape(-1 if slopes.dim() == 1 else B, *((Hq, 1, 1) if slopes.dim() == 2
                                                                                   else (1, 1))) * dist
    m = extras.get("mask")
    if m is not None:
        if m.dtype == torch.bool:
            ok = ok & m
        else:
            bias = bias + m.to(s.dtype)
    bm = extras.get("block_mask")
    if bm is not None:
        bs = attrs["block_size"]
        ok = ok & bm.repeat_interleave(bs, 2).repeat_interleave(bs, 3)[:, :, :Sq, :Sk]
    s = torch.where(ok, s + bias, -math.inf)
    lse = torch.logsumexp(s, -1)
    if not cap and not p:
        # torch's own op: the causal / window / block / bool exclusions and the additive parts as one float mask
        # (is_causal alone where that is all there is)
        plain = attrs["causal"] == "top_left" and not extras and attrs["window_left"] is None and \
            attrs["window_right"] is None
        additive = slopes is not None or (m is not None and m.dtype != torch.bool)
        mask = None if plain else torch.where(ok, bias, -math.inf) if additive else ok
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=plain, scale=sc, enable_gqa=G > 1)
        return out, lse
    P = torch.where(torch.isinf(lse)[..., None], 0.0, torch.exp(s - lse[..., None]))
    if p:
        from ..backends.reference.attention_sdpa import dropout_keep

        P = P * torch.from_numpy(dropout_keep(attrs["seed"], counters, p)).to(P.dtype) / (1 - p)
    return P @ vv, lse


def _peer_sdpa(q, k, v, *extras, **attrs):
    from ..backends.reference.attention_sdpa import dense_counters

    bshd = attrs["layout"] == "bshd"
    if bshd:
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    B, Hq, Sq, _ = q.shape
    counters = dense_counters(attrs["offset"], B, Hq, Sq, k.shape[2]) if attrs["dropout_p"] else None
    out, lse = _peer_dense(q, k, v, dict(zip(_extra_names(attrs, True), extras)), attrs, counters)
    return (out.transpose(1, 2) if bshd else out).to(q.dtype), lse


# -- samples ----------------------------------------------------------------------------------------------------
def _qkv_arrays(rng, layout, B, Hq, Hkv, Sq, Sk, D, Dv, packed=False):
    """Random q / k / v in ``layout``; packed: views of one [B, S, Hq + 2 Hkv, D] buffer (a fused QKV projection's
    output: strided, non-contiguous heads), for D == Dv and Sq == Sk in bshd."""
    if packed:
        buf = rng.standard_normal((B, Sq, Hq + 2 * Hkv, D))
        return buf[:, :, :Hq], buf[:, :, Hq:Hq + Hkv], buf[:, :, Hq + Hkv:]
    shape = (lambda h, s, d: (B, h, s, d)) if layout == "bhsd" else (lambda h, s, d: (B, s, h, d))
    return (rng.standard_normal(shape(Hq, Sq, D)), rng.standard_normal(shape(Hkv, Sk, D)),
            rng.standard_normal(shape(Hkv, Sk, Dv)))


def _extra_arrays(rng, B, Hq, Sq, Sk, mask, alibi, block):
    """mask: (kind, shape) with kind "bool" / "float" / "float-inf" (a float mask with -inf entries); alibi: a
    slopes shape; block: (block_size, B|1, Hq|1).  Bool masks keep the diagonal (j = i + Sk - Sq) where it exists,
    so only the cases built for it have rows with every key excluded."""
    out = []
    if mask is not None:
        kind, shape = mask
        if kind == "bool":
            m = rng.random(shape) < 0.7
            if len(shape) >= 2 and shape[-2] == Sq and shape[-1] == Sk:
                i = np.arange(Sq)
                j = i + Sk - Sq
                m[..., i[(j >= 0) & (j < Sk)], j[(j >= 0) & (j < Sk)]] = True
        else:
            m = rng.standard_normal(shape)
            if kind == "float-inf":
                m = np.where(rng.random(shape) < 0.25, -np.inf, m)
        out.append(m)
    if alibi is not None:
        out.append(rng.uniform(0.05, 1.0, alibi))
    if block is not None:
        bs, bb, bh = block
        bm = rng.random((bb, bh, -(-Sq // bs), -(-Sk // bs))) < 0.6
        bm[..., 0] = True   # every row keeps its first key block
        out.append(bm)
    return out


# (name, layout, (B, Hq, Hkv, Sq, Sk, D, Dv), attrs, mask, alibi, block, grad)
# the first three are the generic gradient samples (every operand <= 64 elements, no row without keys)
_CASES = [
    ("gqa-br-softcap-alibi", "bhsd", (1, 2, 1, 3, 4, 4, 3), {"causal": "bottom_right", "softcap": 1.5}, None, (2,),
     None, True),
    ("bshd-floatmask-window", "bshd", (2, 2, 2, 3, 3, 4, 4), {"window_left": 1, "scale": 0.7},
     ("float", (2, 1, 3, 3)), None, None, True),
    ("dropout-tl-block", "bhsd", (1, 2, 1, 4, 3, 3, 2), {"causal": "top_left", "dropout_p": 0.3, "seed": 5,
                                                          "offset": 7}, None, None, (2, 1, 1), True),
    ("plain", "bhsd", (2, 3, 3, 5, 5, 8, 8), {}, None, None, None, True),
    ("bshd-plain-odd", "bshd", (2, 3, 3, 7, 9, 12, 12), {}, None, None, None, False),
    ("causal-tl", "bhsd", (2, 2, 2, 6, 6, 20, 20), {"causal": "top_left"}, None, None, None, False),
    ("causal-tl-sq<sk", "bshd", (1, 4, 2, 5, 9, 12, 8), {"causal": "top_left"}, None, None, None, False),
    ("causal-br-sq<sk", "bhsd", (2, 4, 2, 5, 9, 12, 12), {"causal": "bottom_right"}, None, None, None, False),
    ("causal-br-sq>sk", "bshd", (1, 2, 2, 9, 5, 8, 4), {"causal": "bottom_right"}, None, None, None, False),
    ("causal-tl-sq>sk", "bhsd", (1, 2, 1, 9, 5, 8, 8), {"causal": "top_left"}, None, None, None, False),
    ("mqa-4/1-dv", "bshd", (2, 4, 1, 6, 7, 20, 12), {}, None, None, None, False),
    ("gqa-4/2-causal", "bhsd", (1, 4, 2, 8, 8, 12, 12), {"causal": "top_left", "scale": 0.3}, None, None, None, False),
    ("sq=1-br", "bhsd", (2, 4, 2, 1, 11, 8, 8), {"causal": "bottom_right"}, None, None, None, False),
    ("sq=1-bshd-window", "bshd", (1, 2, 2, 1, 9, 12, 12), {"window_left": 3, "causal": "bottom_right"}, None, None,
     None, False),
    ("window-lr", "bhsd", (1, 2, 2, 8, 10, 8, 8), {"window_left": 2, "window_right": 1}, None, None, None, False),
    ("window-lr-tl", "bshd", (1, 2, 1, 10, 8, 8, 8), {"causal": "top_left", "window_left": 3, "window_right": 0},
     None, None, None, False),
    ("window-right-only", "bhsd", (1, 1, 1, 6, 6, 4, 4), {"window_right": 2, "window_left": 0}, None, None, None,
     False),
    ("softcap", "bhsd", (2, 2, 2, 5, 7, 8, 8), {"softcap": 0.8, "scale": 2.0}, None, None, None, False),
    ("alibi-per-batch", "bshd", (2, 4, 2, 5, 6, 8, 8), {"causal": "bottom_right"}, None, (2, 4), None, False),
    ("alibi-sq>sk", "bhsd", (1, 2, 2, 7, 4, 4, 4), {}, None, (2,), None, False),
    ("bool-mask-2d", "bhsd", (2, 2, 2, 5, 6, 8, 8), {}, ("bool", (5, 6)), None, None, False),
    ("bool-mask-b1", "bshd", (2, 4, 2, 5, 6, 8, 8), {}, ("bool", (2, 1, 5, 6)), None, None, False),
    ("bool-mask-keypad", "bhsd", (2, 2, 2, 4, 6, 8, 8), {"causal": "bottom_right"}, ("bool", (2, 1, 1, 6)), None,
     None, False),
    ("float-mask-full", "bhsd", (1, 2, 1, 4, 5, 8, 6), {}, ("float", (1, 2, 4, 5)), None, None, False),
    ("float-mask-row", "bshd", (2, 2, 2, 3, 5, 4, 4), {}, ("float", (5,)), None, None, False),
    ("float-mask-inf", "bhsd", (1, 2, 2, 6, 6, 4, 4), {}, ("float-inf", (6, 6)), None, None, False),
    ("float-mask-0d", "bhsd", (1, 1, 1, 3, 3, 4, 4), {}, ("float", ()), None, None, False),
    ("block-3", "bhsd", (2, 2, 1, 7, 8, 8, 8), {"block_size": 3}, None, None, (3, 2, 1), False),
    ("block-2-causal", "bshd", (1, 2, 2, 6, 6, 4, 4), {"block_size": 2, "causal": "top_left"}, None, None, (2, 1, 2),
     False),
    ("dropout", "bhsd", (2, 2, 1, 5, 7, 8, 8), {"dropout_p": 0.4, "seed": 2 ** 40 + 3}, None, None, None, False),
    ("dropout-bshd-causal", "bshd", (1, 4, 2, 6, 6, 8, 4), {"dropout_p": 0.1, "seed": 9, "offset": 2 ** 33,
                                                            "causal": "top_left"}, None, None, None, False),
    ("everything", "bshd", (2, 4, 2, 6, 8, 12, 8), {"causal": "bottom_right", "window_left": 4, "softcap": 2.0,
                                                    "dropout_p": 0.2, "seed": 11, "scale": 0.4},
     ("float", (2, 1, 6, 8)), (2, 4), (3, 1, 4), False),
    ("everything-bool", "bhsd", (1, 4, 1, 5, 5, 20, 12), {"causal": "top_left", "window_right": 1, "softcap": 1.0},
     ("bool", (1, 4, 5, 5)), (4,), (2, 1, 1), False),
    ("rows-without-keys", "bhsd", (1, 2, 2, 4, 5, 4, 4), {}, ("float", (4, 5)), None, None, False),
    ("br-sq>sk-no-keys", "bhsd", (1, 2, 2, 6, 2, 4, 4), {"causal": "bottom_right", "window_left": 0}, None, None,
     None, False),
    ("packed-qkv", "bshd", (2, 2, 2, 5, 5, 8, 8), {"causal": "top_left"}, None, None, None, False),
    ("zero-batch", "bhsd", (0, 2, 1, 3, 3, 4, 4), {}, None, None, None, True),
    ("zero-sq", "bshd", (1, 2, 2, 0, 3, 4, 4), {"causal": "bottom_right"}, None, None, None, True),
    ("zero-sk", "bhsd", (1, 2, 2, 3, 0, 4, 4), {}, None, None, None, False),
]


def _case_sample(rng, case):
    from .._core.spec import Sample

    name, layout, (B, Hq, Hkv, Sq, Sk, D, Dv), attrs, mask, alibi, block, grad = case
    qkv = _qkv_arrays(rng, layout, B, Hq, Hkv, Sq, Sk, D, Dv, packed=name.startswith("packed"))
    extras = _extra_arrays(rng, B, Hq, Sq, Sk, mask, alibi, block)
    if name == "rows-without-keys":     # rows 1 and 3 of the float mask all -inf: out 0, lse -inf
        extras[0][[1, 3]] = -np.inf
    a = dict(attrs, layout=layout, has_mask=mask is not None, has_alibi=alibi is not None,
             block_size=None if block is None else block[0])
    return Sample(tuple(qkv) + tuple(extras), a, name=name, grad=grad)


def _samples(rng):
    for case in _CASES:
        yield _case_sample(rng, case)


def _backward_samples(fwd_samples, bw_inputs):
    """Each forward sample with a random upstream gradient of out (and of lse on every other sample), out and lse
    computed by the reference (the saved tensors a forward pass hands the backward)."""
    def samples(rng):
        from .._core.spec import Sample

        for n, s in enumerate(fwd_samples(rng)):
            ins, glse = bw_inputs(rng, s, n % 2 == 1)
            yield Sample(ins, dict(s.attrs, has_grad_lse=glse), name=s.name + ("-glse" if glse else ""), grad=False)
    return samples


def _sdpa_bw_inputs(rng, s, with_glse):
    from ..backends.reference.attention_sdpa import sdpa_f64

    a = s.attrs
    names = _extra_names(dict(_DEFAULTS, **a), True)
    out, lse = sdpa_f64(s.inputs[:3], dict(zip(names, s.inputs[3:])), dict(_DEFAULTS, **a))
    go = rng.standard_normal(out.shape)
    extra = (np.where(np.isfinite(lse), rng.standard_normal(lse.shape), 0.0),) if with_glse else ()
    return (go,) + tuple(s.inputs[:3]) + (out, lse) + tuple(s.inputs[3:]) + extra, with_glse


# -- errors ------------------------------------------------------------------------------------------------------
def _sdpa_errors():
    from .._core.spec import ErrorCase

    q, k, v = ((2, 4, 5, 8), "f32"), ((2, 2, 6, 8), "f32"), ((2, 2, 6, 4), "f32")
    P = InvalidProblemError
    cases = [
        ((q, k, v), {"layout": "sbhd"}, P, r"sdpa: argument 'layout': expected one of 'bhsd', 'bshd'", "bad-layout"),
        ((((2, 4, 5), "f32"), k, v), {}, P, r"sdpa: argument 'q': expected a 4-d tensor \[B, H, S, D\]", "rank-q"),
        ((q, ((2, 6, 8), "f32"), v), {"layout": "bshd"}, P, r"argument 'k': expected a 4-d tensor \[B, S, H, D\]",
         "rank-k"),
        ((q, ((2, 3, 6, 8), "f32"), ((2, 3, 6, 4), "f32")), {}, P,
         r"sdpa: argument 'k': expected a number of kv heads dividing Hq=4", "heads"),
        ((q, ((2, 2, 6, 7), "f32"), v), {}, P, r"argument 'k': expected head dim D=8 \(q's\)", "d-mismatch"),
        ((q, ((3, 2, 6, 8), "f32"), v), {}, P, r"argument 'k': expected batch size B=2", "batch"),
        ((q, k, ((2, 2, 7, 4), "f32")), {}, P, r"argument 'v': expected Hkv=2 heads and Sk=6 keys", "v-keys"),
        ((q, k, ((2, 2, 6, 4), "f16")), {}, DTypeMismatchError, r"argument 'v': expected dtype f32 \(q's dtype\)",
         "v-dtype"),
        ((((2, 4, 5, 8), "i32"), k, v), {}, UnsupportedError, r"sdpa: argument 'q' has dtype i32", "int-q"),
        ((q, k, v, ((5, 7), "bool")), {"has_mask": True}, P,
         r"argument 'mask': expected a shape broadcastable to \[B, Hq, Sq, Sk\] = \[2, 4, 5, 6\]", "mask-shape"),
        ((q, k, v, ((1, 2, 4, 5, 6), "bool")), {"has_mask": True}, P, r"argument 'mask': expected a shape",
         "mask-rank"),
        ((q, k, v, ((5, 6), "i32")), {"has_mask": True}, DTypeMismatchError,
         r"argument 'mask': expected dtype bool, f32 or q's dtype f32, got i32", "mask-dtype"),
        ((q, k, v, ((3,), "f32")), {"has_alibi": True}, P,
         r"argument 'alibi_slopes': expected shape \[Hq\] = \[4\] or \[B, Hq\] = \[2, 4\]", "slopes-shape"),
        ((q, k, v, ((4,), "i64")), {"has_alibi": True}, DTypeMismatchError, r"argument 'alibi_slopes': expected dtype",
         "slopes-dtype"),
        ((q, k, v, ((2, 4, 3, 2), "bool")), {"block_size": 2}, P,
         r"argument 'block_mask': expected shape \[B\|1, Hq\|1, ceil\(Sq/2\), ceil\(Sk/2\)\] = \[2\|1, 4\|1, 3, 3\]",
         "block-shape"),
        ((q, k, v, ((1, 1, 3, 3), "f32")), {"block_size": 2}, DTypeMismatchError,
         r"argument 'block_mask': expected dtype bool", "block-dtype"),
        ((q, k, v), {"block_size": 0}, P, r"argument 'block_size': expected None or an int > 0", "block-size"),
        ((q, k, v), {"dropout_p": 1.0}, P, r"argument 'dropout_p': expected a probability in \[0, 1\)", "p=1"),
        ((q, k, v), {"dropout_p": -0.1}, P, r"argument 'dropout_p'", "p<0"),
        ((q, k, v), {"seed": -1}, P, r"sdpa: argument 'seed': expected an int in \[0, 2\*\*63\)", "seed<0"),
        ((q, k, v), {"offset": -2}, P, r"argument 'offset': expected an int >= 0", "offset<0"),
        ((q, k, v), {"dropout_p": 0.5, "offset": 2 ** 63 - 10}, P,
         r"argument 'offset': expected offset \+ 240 \(the dropout counters\) <= 2\*\*63", "counter-overflow"),
        ((q, k, v), {"softcap": -1.0}, P, r"argument 'softcap': expected a real number >= 0", "softcap<0"),
        ((q, k, v), {"window_left": -1}, P, r"argument 'window_left': expected None \(unbounded\) or an int >= 0",
         "window<0"),
        ((q, k, v), {"window_right": 1.5}, P, r"argument 'window_right'", "window-float"),
        ((q, k, v), {"causal": True}, P, r"argument 'causal': expected one of 'none', 'top_left', 'bottom_right'",
         "causal-bool"),
        ((q, k, v), {"has_mask": True}, P,
         r"sdpa: argument 'inputs': expected 4 operands \(q, k, v, mask\) for has_mask=True", "missing-mask"),
        ((q, k, v, ((5, 6), "bool")), {}, P, r"argument 'inputs': expected 3 operands \(q, k, v\)", "extra-operand"),
        ((q, k, v, ((4,), "f32")), {"has_mask": True, "has_alibi": True}, P,
         r"expected 5 operands \(q, k, v, mask, alibi_slopes\)", "missing-slopes"),
    ]
    cases += list(fp8_errors("sdpa", (), q, k, v))
    for ins, attrs, exc, match, name in cases:
        yield ErrorCase(ins, attrs, exc, match, name)


_FP8_ERR = {c[-1] for c in fp8_errors("", (), ((1, 1), ""), ((1, 1), ""), ((1, 1), ""))}


def _sdpa_bw_errors():
    from .._core.spec import ErrorCase

    q, k, v, o, lse = ((1, 2, 3, 4), "f32"), ((1, 1, 5, 4), "f32"), ((1, 1, 5, 2), "f32"), ((1, 2, 3, 2), "f32"), \
        ((1, 2, 3), "f32")
    for c in _sdpa_errors():   # the forward's errors, through the backward's operand order
        if c.name in ("extra-operand", "missing-mask", "missing-slopes") or c.name in _FP8_ERR:
            continue
        g = (c.inputs[0][0][:-1] + (c.inputs[2][0][-1],), c.inputs[0][1])
        yield ErrorCase((g,) + tuple(c.inputs[:3]) + (g, (c.inputs[0][0][:-1], "f32")) + tuple(c.inputs[3:]), c.attrs,
                        c.exc, c.match.replace("sdpa:", "sdpa_backward:"), "forward-" + c.name)
    for ins, attrs, exc, match, name in fp8_errors("sdpa_backward", ((o[0], "bf16"),), q, k, v,
                                                    ((o[0], "bf16"), lse)):
        yield ErrorCase(ins, attrs, exc, match, name)
    P = InvalidProblemError
    yield ErrorCase((((1, 2, 3, 3), "f32"), q, k, v, o, lse), {}, P,
                    r"sdpa_backward: argument 'grad_out': expected the forward's out shape \(1, 2, 3, 2\)",
                    "grad-shape")
    yield ErrorCase((o, q, k, v, o, ((1, 2, 4), "f32")), {}, P, r"argument 'lse': expected the forward's lse shape",
                    "lse-shape")
    yield ErrorCase((((1, 2, 3, 2), "f16"), q, k, v, o, lse), {}, DTypeMismatchError,
                    r"argument 'grad_out': expected dtype f32, got f16", "grad-dtype")
    yield ErrorCase((o, q, k, v, o, ((1, 2, 3), "f64")), {}, DTypeMismatchError, r"argument 'lse': expected dtype f32",
                    "lse-dtype")
    yield ErrorCase((o, q, k, v, o, lse), {"has_grad_lse": True}, P,
                    r"sdpa_backward: argument 'inputs': expected 7 operands \(grad_out, q, k, v, out, lse, grad_lse\)",
                    "missing-grad-lse")
    yield ErrorCase((o, q, k, v, o, lse, ((1, 2, 2), "f32")), {"has_grad_lse": True}, P,
                    r"argument 'grad_lse': expected the forward's lse shape", "grad-lse-shape")


# -- tolerances, cost, workloads ---------------------------------------------------------------------------------
def _tol(dt):
    # out is a convex combination of v rows: the kernels compute the scores and the softmax in f32 (f64 for f64) and
    # round P to the input dtype before the P @ V product (f16: 2^-11, bf16: 2^-8 relative), so the error of an out
    # entry is about 2^-11 (2^-8) * max |v| (|v| <= ~4 for N(0, 1) samples) plus the output's own rounding: 2e-3 /
    # 2e-2 absolute.  f32: scores are D-term dot products (D <= 20 here), exp / log to an ulp: a few 1e-6.  lse is a
    # few units: its error is the f32 rounding of the max and of log(sum) (1e-6 relative).
    # f8e4m3 (out bf16, against float64 on the dequantized values): Q K^T multiplies the e4m3 values exactly, P
    # is rounded to bf16 before P V with V widened exactly, so the default plan has bf16's bound; the
    # allow_reduced_precision plan rounds P to e4m3 (2^-4 relative, 16x bf16's: 16x the tolerance, 0.32 of |v|
    # ~ 4) -- tests/attention/test_sdpa_fp8.py holds both plans to their bounds.
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 2e-5), DType.f16: (5e-3, 2e-3),
            DType.bf16: (2e-2, 2e-2), DType.f8e4m3: (2e-2, 2e-2)}[dt]


def _grad_tol(dt):
    # dq / dk / dv sum Sk (Sq) products of the rounded P / dS with k / q / dO rows: dS = P (dP - delta) rounded to
    # the input dtype (bf16 2^-8) before the products, a cancellation-prone difference; 4x the forward's bound
    # f8e4m3: the backward's dots are bf16 on exactly widened operands (descales folded into f32 factors): bf16's
    return {DType.f64: (1e-9, 1e-10), DType.f32: (1e-4, 1e-4), DType.f16: (2e-2, 1e-2),
            DType.bf16: (8e-2, 8e-2), DType.f8e4m3: (8e-2, 8e-2)}[dt]


def allowed_pairs(Sq: int, Sk: int, causal: str, wl, wr) -> int:
    """The number of (i, j) pairs the causal / window exclusions leave (masks are data: not counted)."""
    if Sq == 0 or Sk == 0:
        return 0
    i = np.arange(Sq, dtype=np.int64)
    off = 0 if causal == "top_left" else Sk - Sq
    lo = np.zeros(Sq, np.int64) if wl is None else np.maximum(i + off - wl, 0)
    hi = np.full(Sq, Sk - 1, np.int64)
    if causal != "none":
        hi = np.minimum(hi, i + off)
    if wr is not None:
        hi = np.minimum(hi, i + off + wr)
    return int(np.sum(np.clip(hi - lo + 1, 0, None)))


def _pairs_dense(d) -> tuple[int, int, int, int]:
    """(B * Hq, allowed pairs per (b, h), D, Dv) of a dense descriptor (q is the first, or the second, operand)."""
    bw = d.op.endswith("_backward")
    q, k, v = d.inputs[1:4] if bw else d.inputs[:3]
    B, Hq, _, Sq, Sk, D, Dv = sdpa_dims(d.attr("layout"), q.shape, k.shape, v.shape)
    return B * Hq, allowed_pairs(Sq, Sk, d.attr("causal"), d.attr("window_left"), d.attr("window_right")), D, Dv


def attention_cost(pairs_of):
    """(bytes, flops): every operand read once and every output written once (the flash kernels' traffic; the
    scores never reach memory); flops of the matmuls over the allowed (i, j) pairs only (a causal square problem
    does (S^2 + S) / 2 of S^2: the kernels skip the excluded blocks): forward 2 (D + Dv) per pair (Q K^T and P V);
    backward 2 (3 D + 2 Dv) per pair (S = Q K^T recomputed, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q):
    2.5x the forward for D = Dv, as FlashAttention counts."""
    def cost(d):
        nbytes = sum(t.nbytes for t in d.inputs) + sum(t.nbytes for t in d.outputs)
        bh, pairs, D, Dv = pairs_of(d)
        per = 2 * (3 * D + 2 * Dv) if d.op.endswith("_backward") else 2 * (D + Dv)
        return nbytes, bh * pairs * per
    return cost


def _wl(name, B, Hq, Hkv, S, D, causal, dt=DType.bf16, backward=True):
    from .._core.spec import Workload

    return Workload(f"sdpa-{name}", ((B, Hq, S, D), (B, Hkv, S, D), (B, Hkv, S, D)), dt,
                    {"layout": "bhsd", "causal": causal}, backward=backward)


# the table: bf16 B4 H32 S4096 D128 causal / non-causal (forward, backward), GQA 32/8 S8192 D128 causal,
# (B2: the tokens of B4 S4096), head dims 64 and 256 (D256 with H16: the same q/k/v bytes)
_WORKLOADS = (
    _wl("b4h32s4096d128-causal-bf16", 4, 32, 32, 4096, 128, "top_left"),
    _wl("b4h32s4096d128-bf16", 4, 32, 32, 4096, 128, "none"),
    _wl("gqa32/8-b2s8192d128-causal-bf16", 2, 32, 8, 8192, 128, "top_left"),
    _wl("b4h32s4096d64-causal-bf16", 4, 32, 32, 4096, 64, "top_left"),
    _wl("b4h16s4096d256-causal-bf16", 4, 16, 16, 4096, 256, "top_left"),
)


# -- the specs ---------------------------------------------------------------------------------------------------
_SPECS: dict[str, OpSpec] = {}
_DEFAULTS = {a.name: a.default for a in _DENSE_ATTRS}
_SPECS["sdpa"] = register_spec(OpSpec(
    name="sdpa", family="attention", arg_names=("q", "k", "v", "mask", "alibi_slopes", "block_mask", *DESCALE_NAMES),
    check=_check_sdpa, dtypes=SDPA_DTYPES, attrs=_DENSE_ATTRS, torch_peer=_peer_sdpa,
    torch_name="torch.nn.functional.scaled_dot_product_attention", dropin=sdpa_dropin,
    grad=_g_attention("sdpa_backward", 3), uses=("sdpa_backward",), saves=("inputs", "outputs"),
    differentiable=(0, 1, 2),
    samples=_samples, errors=_sdpa_errors, tol=_tol, grad_tol=_grad_tol, workloads=_WORKLOADS,
    cost=attention_cost(_pairs_dense), category="attention",
    doc="scaled dot-product attention (flash): bhsd / bshd, GQA, Dv != D, causal top-left / bottom-right, window, "
        "softcap, alibi, bool / float / block mask, Philox dropout; returns (out, lse)."))
_SPECS["sdpa_backward"] = register_spec(OpSpec(
    name="sdpa_backward", family="attention",
    arg_names=("grad_out", "q", "k", "v", "out", "lse", "mask", "alibi_slopes", "block_mask", *DESCALE_NAMES,
               "grad_lse"),
    check=_check_sdpa_bw, dtypes=SDPA_DTYPES, attrs=_DENSE_ATTRS + (_GRAD_LSE,),
    samples=_backward_samples(_samples, _sdpa_bw_inputs), errors=_sdpa_bw_errors, tol=_grad_tol,
    workloads=tuple(), cost=attention_cost(_pairs_dense), category="attention",
    doc="fused backward of sdpa: dq, dk, dv from grad_out (and grad_lse), the saved out / lse, the dropout mask "
        "regenerated; dk / dv of a kv head reduced over its query heads deterministically."))

# the op names this module's backward rule composes besides its fused backward op (``uses``: data of the rule),
# checked at import (derive.check_op_references)
declare_rule_ops(__name__, "zeros_like")
