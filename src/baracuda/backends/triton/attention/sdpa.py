"""Registration of the FlashAttention kernels (flash_fwd.py, flash_bwd.py) for sdpa, sdpa_backward, sdpa_varlen and
sdpa_varlen_backward: the descriptor -> kernel problem mapping, supports() reasons, routes and precision.

The route names the kernel and its tile configuration (``explain()`` shows it), e.g.
``triton:flash_fwd[128x64,w8,s3,bf16,causal=top_left,gqa=4]``; the precision says tf32 vs exact f32.
"""
from __future__ import annotations

import dataclasses

import torch

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.attention_sdpa import sdpa_dims
from .._lib.register import register_triton
from .flash_bwd import bwd_configs, delta_numel, flash_backward
from .flash_fwd import Problem, fwd_config, flash_forward, head_blocks

_MAX_D = 256            # the query / accumulator tiles of [BM, D] live in registers
_MAX_GRID_Y = 65535     # batch * heads is the grid's second axis
# q's dtypes (the registry's key dtype; masks, slopes and cu_seqlens are the spec's to check): f64 is reference only
# FP8: sdpa's key is q (f8e4m3), sdpa_backward's grad_out (bf16 / f16: the output dtype)
_DTYPES = frozenset({DType.f16, DType.bf16, DType.f32, DType.f8e4m3})
_F64_NOTE = "f64 is reference only (no f64 tensor-core or flash kernel; the NumPy reference computes it)"


def _varlen(desc) -> bool:
    return desc.op.startswith("sdpa_varlen")


def _bw(desc) -> bool:
    return desc.op.endswith("_backward")


def _fp8(desc) -> bool:
    return desc.inputs[1 if _bw(desc) else 0].dtype == DType.f8e4m3


def _prec(desc, pref) -> str:
    """The kernels' PREC: "tf32" (f32 under allow_reduced_precision), "fp8" (FP8 inputs under it: the forward's
    P V in e4m3), else "ieee" (exact f32 dots; 16-bit and FP8 dots in their input dtype, FP8's P V in bf16)."""
    reduced = pref is not None and pref.allow_reduced_precision
    if reduced and _fp8(desc) and not _bw(desc):
        return "fp8"
    return "tf32" if desc.dtype == DType.f32 and reduced else "ieee"


def _shapes(desc):
    """(B, Hq, Hkv, Sq, Sk, D, Dv) of the descriptor; varlen: B sequences, Sq / Sk the max lengths."""
    o = 1 if _bw(desc) else 0
    q, k, v = (t.shape for t in desc.inputs[o:o + 3])
    if _varlen(desc):
        B = desc.inputs[o + 3].shape[0] - 1
        return B, q[1], k[1], desc.attr("max_seqlen_q"), desc.attr("max_seqlen_k"), q[2], v[2]
    return sdpa_dims(desc.attr("layout"), q, k, v)


def _static(desc, pref) -> Problem:
    """The problem without its tensors (built once per plan)."""
    B, Hq, Hkv, Sq, Sk, D, Dv = _shapes(desc)
    a = desc.attr_dict
    varlen = _varlen(desc)
    bs = 0 if varlen or a.get("block_size") is None else a["block_size"]
    return Problem("thd" if varlen else a["layout"], B, Hq, Hkv, Sq, Sk, D, Dv, a["scale"], a["causal"],
                   a["window_left"], a["window_right"], a["softcap"], a["dropout_p"], a["seed"], a["offset"],
                   _prec(desc, pref), block_size=bs, extras=bool(a.get("has_mask") or a["has_alibi"]),
                   fp8=_fp8(desc))


def _with_tensors(st: Problem, desc, extras, cu=None, fp8=False, dev=None) -> Problem:
    """The static problem with this call's optional operands (mask / slopes / block mask broadcast as views, the
    FP8 descales)."""
    a = desc.attr_dict
    xs = list(extras)
    mask = slopes = bmask = None
    if a.get("has_mask"):
        mask = torch.broadcast_to(xs.pop(0), (st.B, st.Hq, st.Sq, st.Sk))
    if a["has_alibi"]:
        slopes = xs.pop(0)
    if st.block_size:
        m = xs.pop(0)
        bmask = torch.broadcast_to(m, (st.B, st.Hq) + tuple(m.shape[2:]))
    cu_q, cu_k = cu if cu is not None else (None, None)
    ds = ()
    if a.get("has_descale"):
        ds = tuple(xs[:3])
    elif fp8:       # FP8 without descale operands: descale 1
        ds = (torch.ones(1, dtype=torch.float32, device=dev),) * 3
    return dataclasses.replace(st, mask=mask, slopes=slopes, block_mask=bmask, cu_q=cu_q, cu_k=cu_k, descales=ds)


def _bind_fwd(desc, pref=None):
    st = _static(desc, pref)
    cfg = fwd_config(st, desc.dtype.torch)
    varlen = _varlen(desc)
    fp8 = _fp8(desc)

    def run(desc_, inputs, outputs, ws):
        q, k, v = inputs[:3]
        if varlen:
            p = _with_tensors(st, desc, inputs[5:], inputs[3:5])
        else:
            p = _with_tensors(st, desc, inputs[3:], fp8=fp8, dev=q.device)
        flash_forward(p, q, k, v, outputs[0], outputs[1], cfg)
    return run


def _bind_bwd(desc, pref=None):
    st = _static(desc, pref)
    cfgs = bwd_configs(st, desc.dtype.torch)
    varlen = _varlen(desc)
    fp8 = _fp8(desc)
    glse = desc.attr("has_grad_lse")

    def run(desc_, inputs, outputs, ws):
        go, q, k, v = inputs[:4]
        rest = inputs[4:]
        cu = None
        if varlen:
            cu, rest = rest[:2], rest[2:]
        out, lse, extras = rest[0], rest[1], rest[2:]
        gl = None
        if glse:
            gl, extras = extras[-1], extras[:-1]
        p = _with_tensors(st, desc, extras, cu, fp8, q.device)
        delta = ws.view(torch.float32) if ws is not None else None
        flash_backward(p, go, q, k, v, out, lse, *outputs, cfgs, glse=gl, delta=delta)
    return run


def _run_default(bind):
    def run(desc, inputs, outputs, ws):
        bind(desc, None)(desc, inputs, outputs, ws)
    return run


def _workspace(desc) -> int:
    """The backward's delta buffer: f32 per query row and head."""
    st = _static(desc, None)
    tq = desc.inputs[1].shape[0] if _varlen(desc) else None
    return 4 * delta_numel(st, tq)


def _supports(desc):
    B, Hq, Hkv, Sq, Sk, D, Dv = _shapes(desc)
    if max(D, Dv) > _MAX_D:
        return f"head dim {max(D, Dv)} over {_MAX_D}: the flash tiles keep [rows, head dim] blocks in registers"
    if min(D, Dv) == 0:
        return "head dim 0: no dot product to tile (the reference computes it)"
    if B * max(Hq, 1) > _MAX_GRID_Y:
        return f"batch * heads = {B * Hq} over {_MAX_GRID_Y} (the launch grid's second axis)"
    return None


def precision(desc, pref=None) -> PrecisionGuarantee:
    """Dot products on tensor cores in the input dtype (f32: exact IEEE on the FMA units, or TF32 when the
    preference allows), f32 accumulation and softmax; P (and dS) rounded to the input dtype before their products.
    No atomics: dK / dV of a GQA group are summed in a fixed order (deterministic and bit-stable).

    FP8 inputs: Q K^T multiplies the stored e4m3 values exactly (an e4m3 tensor-core dot, descales folded into the
    f32 scale); P (dS) is rounded to bf16 before its products, the other operands widened exactly: bf16 math, the
    accuracy of bf16 attention on the dequantized values.  Under allow_reduced_precision the forward rounds P to
    e4m3 for an e4m3 P V dot (math fp8: P's relative rounding 2^-4 instead of bf16's 2^-8, entries under 2^-9 lost,
    FlashAttention-3's recipe)."""
    if _fp8(desc):
        return PrecisionGuarantee(MathPrecision.FP8 if _prec(desc, pref) == "fp8" else MathPrecision.BF16,
                                  DType.f32, True, True)
    dt = desc.dtype
    math = {DType.bf16: MathPrecision.BF16, DType.f16: MathPrecision.F16}.get(dt)
    if math is None:
        math = MathPrecision.TF32 if _prec(desc, pref) == "tf32" else MathPrecision.F32
    return PrecisionGuarantee(math, DType.f32, True, True)


def _features(st: Problem, desc) -> str:
    parts = []
    if st.causal != "none":
        parts.append(f"causal={st.causal}")
    if st.window_left is not None or st.window_right is not None:
        parts.append(f"window=({st.window_left},{st.window_right})")
    if st.group > 1:
        parts.append(f"gqa={st.group}")
    a = desc.attr_dict
    for flag, name in ((st.softcap > 0, "softcap"), (a["has_alibi"], "alibi"), (a.get("has_mask"), "mask"),
                       (st.block_size, f"block_mask={st.block_size}"), (st.dropout_p > 0, "dropout"),
                       (st.varlen, "varlen")):
        if flag:
            parts.append(name)
    bd, bdv = head_blocks(st.D, st.Dv, st.fp8)
    if (bd, bdv) != (st.D, st.Dv):
        parts.append(f"d={st.D}->{bd}" + (f",dv={st.Dv}->{bdv}" if st.Dv != st.D else ""))
    return "".join("," + x for x in parts)


def _route(desc, pref):
    st = _static(desc, pref)
    dt = desc.dtype
    math = _prec(desc, pref) if dt == DType.f32 else str(dt)
    if _fp8(desc):
        math = "fp8,pv-" + ("fp8" if _prec(desc, pref) == "fp8" else "bf16")
    if _bw(desc):
        kv, qc = bwd_configs(st, dt.torch)
        return f"triton:flash_bwd[dkdv {kv.tag()},dq {qc.tag()},{math}{_features(st, desc)}]"
    return f"triton:flash_fwd[{fwd_config(st, dt.torch).tag()},{math}{_features(st, desc)}]"


def _register(op: str, bind, workspace=None):
    register_triton(op, _run_default(bind), bind=bind, dtypes=_DTYPES, dtypes_note=_F64_NOTE, supports=_supports,
                    precision=precision, route=_route, workspace=workspace)


_register("sdpa", _bind_fwd)
_register("sdpa_backward", _bind_bwd, _workspace)
# varlen: the same kernels with VARLEN set (sequence starts and lengths from cu_seqlens, batch stride 0)
_register("sdpa_varlen", _bind_fwd)
_register("sdpa_varlen_backward", _bind_bwd, _workspace)
