"""Triton cascade merge: N partial attention results (o_n, lse_n) of the same rows -> one (out, lse).

A program owns ROWS rows (a row: one (token, head), D values) and walks the N parts once with a running maximum
(the online softmax of the parts' lse): a part at -inf weighs exactly 0 (its o is not even multiplied: a split
with no key may hold anything), a row with no finite part gets out 0, lse -inf.  Any strides for o and lse (the
rows are (t, h) pairs: offsets t * s_t + h * s_h); the outputs are contiguous [T, H, D] and [T, H].  Computes in
f32 (f64 for f64 o).  Bytes: o read once, out written once (bf16 [2, 8192, 32, 128]: 192 MiB moved).

``merge_parts`` is also the second kernel of split-KV decoding (decode.py): its f32 partials [NS, T, H, Dv] are
merged into the output here.
"""
from __future__ import annotations

import torch
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.binding import contiguous_outputs, run_of
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.math import exp_acc, log_acc
from .._lib.register import register_triton

_MAX_D = 16384   # a row's D values live in registers


@fast_kernel
def _merge_kernel(o_ptr, l_ptr, out_ptr, lo_ptr, N, R, H, D, son, sot, soh, sod, sln, slt, slh,
                  F64: tl.constexpr, ROWS: tl.constexpr, BD: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rm = rows < R
    t = (rows // H).to(tl.int64)
    h = (rows % H).to(tl.int64)
    d = tl.arange(0, BD)
    m2 = rm[:, None] & (d < D)[None, :]
    ob = (t * sot + h * soh)[:, None] + d[None, :] * sod
    lb = t * slt + h * slh
    m = tl.full([ROWS], float("-inf"), CT)
    z = tl.zeros([ROWS], CT)
    acc = tl.zeros([ROWS, BD], CT)
    for n in loop(0, N):
        x = tl.load(l_ptr + n * sln + lb, mask=rm, other=float("-inf")).to(CT)
        m_new = tl.maximum(m, x)
        ms = tl.where(m_new == float("-inf"), 0.0, m_new)
        a = exp_acc(m - ms, F64)
        w = exp_acc(x - ms, F64)
        o = tl.load(o_ptr + n * son + ob, mask=m2 & (w > 0)[:, None], other=0.0).to(CT)
        acc = acc * a[:, None] + w[:, None] * o
        z = z * a + w
        m = m_new
    live = z > 0
    out = tl.where(live[:, None], acc / tl.where(live, z, 1.0)[:, None], 0.0)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * D + d[None, :], out.to(out_ptr.dtype.element_ty), mask=m2)
    tl.store(lo_ptr + rows, tl.where(live, m + log_acc(tl.where(live, z, 1.0), F64), float("-inf")), mask=rm)


def merge_parts(o, lse, out, out_lse, f64=False):
    """out [T, H, D] / out_lse [T, H] (contiguous) <- the merge of o [N, T, H, D] by lse [N, T, H] (any strides)."""
    N, T, H, D = o.shape
    R = T * H
    if R == 0:
        return
    bd = next_power_of_2(max(D, 1))
    rows = max(1, min(next_power_of_2(R), 2048 // bd))      # ~2k values of a part per program
    _merge_kernel[(cdiv(R, rows),)](o, lse, out, out_lse, N, R, H, D, o.stride(0), o.stride(1), o.stride(2),
                                    o.stride(3), lse.stride(0), lse.stride(1), lse.stride(2), F64=f64, ROWS=rows,
                                    BD=bd, num_warps=4)


def _bind(desc, pref=None):
    f64 = desc.dtype == DType.f64

    def run(desc_, inputs, outputs, ws):
        merge_parts(inputs[0], inputs[1], outputs[0], outputs[1], f64)
    return run


def _supports(desc):
    D = desc.inputs[0].shape[3]
    return f"head dim D={D} over {_MAX_D}: a row lives in registers" if D > _MAX_D else None


_bind_c = contiguous_outputs(_bind)
register_triton("attention_merge", run_of(_bind_c), bind=_bind_c, supports=_supports,
                route="triton:attention_merge(online lse)")
