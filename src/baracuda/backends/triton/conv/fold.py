"""im2col / col2im (F.unfold / F.fold) as one gather kernel: FOLD=False writes each column element from the one
image value it copies (zero in the padding); FOLD=True writes each image element as the sum, in kernel-offset order,
of the column elements that copy it (the gather form of the adjoint: no atomics, deterministic).  Operands by
element strides (any layout read in place); f32 sums (f64 for f64).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ...._core.dtypes import FLOAT_TYPES, DType
from ....ops.conv_fold import fold_geometry
from .._lib.geometry import cdiv
from .._lib.interp import INTERPRETING, loop
from .._lib.register import register_triton


@triton.jit
def _fold_kernel(img, cols, TOTAL, C, H, W, BH, BW, KH, KW, SH, SW, PH, PW, DH, DW,
                 s_in, s_ic, s_ih, s_iw, s_cn, s_cr, s_cl,
                 FOLD: tl.constexpr, ACC: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if I64:
        e = e.to(tl.int64)
    ok = e < TOTAL
    if FOLD:     # e over the image (N, C, H, W)
        iw = e % W
        t = e // W
        ih = t % H
        t = t // H
        c = t % C
        n = t // C
        acc = tl.zeros((BLOCK,), dtype=ACC)
        for kpos in loop(0, KH * KW):
            if I64:
                kpos = kpos.to(tl.int64)
            kh = kpos // KW
            kw = kpos % KW
            th = ih + PH - kh * DH
            tw = iw + PW - kw * DW
            okh = th >= 0
            okw = tw >= 0
            th = tl.maximum(th, 0)
            tw = tl.maximum(tw, 0)
            bh = th // SH
            bw = tw // SW
            take = ok & okh & okw & (bh * SH == th) & (bw * SW == tw) & (bh < BH) & (bw < BW)
            v = tl.load(cols + n * s_cn + (c * (KH * KW) + kpos) * s_cr + (bh * BW + bw) * s_cl, mask=take, other=0.0)
            acc += v.to(ACC)
        tl.store(img + n * s_in + c * s_ic + ih * s_ih + iw * s_iw, acc.to(img.dtype.element_ty), mask=ok)
    else:        # e over the columns (N, C * KH * KW, BH * BW)
        L = BH * BW
        lpos = e % L
        t = e // L
        row = t % (C * KH * KW)
        n = t // (C * KH * KW)
        c = row // (KH * KW)
        kpos = row % (KH * KW)
        ih = (lpos // BW) * SH - PH + (kpos // KW) * DH
        iw = (lpos % BW) * SW - PW + (kpos % KW) * DW
        take = ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        v = tl.load(img + n * s_in + c * s_ic + ih * s_ih + iw * s_iw, mask=take, other=0.0)
        tl.store(cols + n * s_cn + row * s_cr + lpos * s_cl, v, mask=ok)


def _bind(desc, pref=None):
    geom = fold_geometry(desc)
    fold = desc.op == "col2im"
    acc = tl.float64 if desc.dtype == DType.f64 else tl.float32
    block = 128 if INTERPRETING else 512

    def run(desc_, inputs, outputs, ws):
        src, out = inputs[0], outputs[0]
        if out.numel() == 0:
            return
        img, cols = (out, src) if fold else (src, out)
        total = out.numel()
        i64 = INTERPRETING or max(img.numel(), cols.numel()) >= 2 ** 31 or any(abs(s) * d >= 2 ** 31 for t in (img, cols)
                                                                 for s, d in zip(t.stride(), t.shape))
        _fold_kernel[(cdiv(total, block),)](
            img, cols, total, geom.c, *geom.image, *geom.blocks, *geom.kernel, *geom.stride, *geom.pad,
            *geom.dilation, *img.stride(), *cols.stride(), FOLD=fold, ACC=acc, I64=i64, BLOCK=block)
    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    return "triton:conv-fold[" + ("col2im: gather-sum" if desc.op == "col2im" else "im2col: gather") + "]"


for _op in ("im2col", "col2im"):
    register_triton(_op, _run, bind=_bind, route=_route, dtypes=frozenset(FLOAT_TYPES),
                    dtypes_note="bool im2col (a copy) runs on the reference backend")
