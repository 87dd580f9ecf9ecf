"""nms / batched_nms (ops/image_nms.py) on Triton, in three launches and no host read:

1. the score order: the sort family's stable descending row sort (``sort_rows``: equal scores by index, NaN first);
2. ``_iou_mask_kernel``: one program per (row block, column block) of 64 boxes in score order (the blocks at or
   right of the diagonal), each computing the 64 x 64 IoUs and storing, per row box i, one int64 word whose bit t is
   set when box j = 64 col + t comes later (j > i) and IoU(i, j) > iou_threshold (and, batched, shares i's category):
   mask[K, ceil(K / 64)] (torchvision's CUDA design);
3. ``_nms_reduce_kernel``: one program sweeps the blocks in order.  The removal words of block b (``remv``, written by
   the kept boxes of earlier blocks) decide box by box inside the block -- a kept box ORs in its own diagonal word,
   64 scalar steps -- then the block's kept boxes are written in order (a prefix count) and their mask rows ORed into
   the removal words of the later blocks (a [64, CH] tile reduction per chunk of words; a barrier orders those
   stores before the next block's loads).  The tail of ``keep`` is filled with -1 and ``count`` written.
IoU in f32 (f64 for f64) with a correctly rounded division (torchvision's ``inter / (area_a + area_b - inter)``).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.geometry import cdiv
from .._lib.geometry import ws_align as _align
from .._lib.interp import INTERPRETING, loop
from .._lib.register import register_triton
from .._lib.scalars import join_f64, split_f64
from ..sort.rows import sort_rows, sort_ws_bytes

_WORD = 64       # boxes per mask word (and per block)


@triton.jit
def _box(boxes, ids, ok, s_bk, s_bc, ACC: tl.constexpr):
    p = boxes + ids * s_bk
    return (tl.load(p, mask=ok, other=0.0).to(ACC), tl.load(p + s_bc, mask=ok, other=0.0).to(ACC),
            tl.load(p + 2 * s_bc, mask=ok, other=0.0).to(ACC), tl.load(p + 3 * s_bc, mask=ok, other=0.0).to(ACC))


@triton.jit
def _iou_mask_kernel(boxes, order, idxs, mask, K, NB, s_bk, s_bc, s_i, thr_hi, thr_lo,
                     HAS_IDX: tl.constexpr, ACC: tl.constexpr, F64: tl.constexpr):
    rb = tl.program_id(0)
    cb = tl.program_id(1)
    if cb >= rb:
        lanes = tl.arange(0, 64)
        i = rb * 64 + lanes
        j = cb * 64 + lanes
        iok = i < K
        jok = j < K
        oi = tl.load(order + i, mask=iok, other=0)
        oj = tl.load(order + j, mask=jok, other=0)
        ax1, ay1, ax2, ay2 = _box(boxes, oi, iok, s_bk, s_bc, ACC)
        bx1, by1, bx2, by2 = _box(boxes, oj, jok, s_bk, s_bc, ACC)
        iw = tl.maximum(tl.minimum(ax2[:, None], bx2[None, :]) - tl.maximum(ax1[:, None], bx1[None, :]), 0.0)
        ih = tl.maximum(tl.minimum(ay2[:, None], by2[None, :]) - tl.maximum(ay1[:, None], by1[None, :]), 0.0)
        inter = iw * ih
        union = ((ax2 - ax1) * (ay2 - ay1))[:, None] + ((bx2 - bx1) * (by2 - by1))[None, :] - inter
        if F64:
            iou = inter / union
        else:
            iou = tl.div_rn(inter, union)
        sup = (iou > join_f64(thr_hi, thr_lo, F64)) & (j[None, :] > i[:, None]) & jok[None, :]
        if HAS_IDX:
            ci = tl.load(idxs + oi * s_i, mask=iok, other=0)
            cj = tl.load(idxs + oj * s_i, mask=jok, other=-1)
            sup = sup & (ci[:, None] == cj[None, :])
        bits = tl.where(sup, tl.full((64, 64), 1, tl.int64) << (lanes % 64).to(tl.int64)[None, :], 0)
        # distinct bits: their sum is their OR (a subset sum of distinct powers of two never overflows int64's
        # two's complement, bit 63 included)
        tl.store(mask + i.to(tl.int64) * NB + cb, tl.sum(bits, 1), mask=iok)


@triton.jit
def _nms_reduce_kernel(mask, order, keep, count, remv, K, NB, CH: tl.constexpr, FILL: tl.constexpr):
    lanes = tl.arange(0, 64)
    cols = tl.arange(0, CH)
    for c0 in loop(0, NB, CH):
        tl.store(remv + c0 + cols, tl.zeros((CH,), tl.int64), mask=c0 + cols < NB)
    tl.debug_barrier()
    kept_so_far = tl.full([], 0, tl.int64)
    for b in loop(0, NB):
        rows = b * 64 + lanes
        rok = rows < K
        diag = tl.load(mask + rows.to(tl.int64) * NB + b, mask=rok, other=0)
        w = tl.load(remv + b)
        for t in loop(0, tl.minimum(K - b * 64, 64)):     # (the last block's boxes only)
            alive = ((w >> t) & 1) == 0
            w = w | tl.where(alive, tl.sum(tl.where(lanes == t, diag, 0)), 0)
        kept = (((w >> lanes.to(tl.int64)) & 1) == 0) & rok
        ki = kept.to(tl.int64)
        rank = tl.cumsum(ki, 0) - ki
        tl.store(keep + kept_so_far + rank, tl.load(order + rows, mask=kept, other=0), mask=kept)
        kept_so_far += tl.sum(ki)
        for c0 in loop(b + 1, NB, CH):
            cc = c0 + cols
            words = tl.load(mask + rows.to(tl.int64)[:, None] * NB + cc[None, :],
                            mask=kept[:, None] & (cc < NB)[None, :], other=0)
            old = tl.load(remv + cc, mask=cc < NB, other=0)
            tl.store(remv + cc, old | tl.reduce_or(words, 0), mask=cc < NB)
        tl.debug_barrier()
    for s0 in loop(0, K, FILL):
        e = s0 + tl.arange(0, FILL)
        tl.store(keep + e, tl.full((FILL,), -1, tl.int64), mask=(e >= kept_so_far) & (e < K))
    tl.store(count, kept_so_far)


# -- host ----------------------------------------------------------------------------------------------------------
def _parts(desc) -> list[int]:
    """Byte sizes of the workspace parts: order (K int64), mask (K x NB int64), remv (NB int64), the sort's."""
    k = desc.inputs[0].shape[0]
    nb = cdiv(k, _WORD)
    return [_align(8 * k), _align(8 * k * nb), _align(8 * nb), _align(sort_ws_bytes(1, k, desc.dtype))]


def _workspace(desc) -> int:
    return sum(_parts(desc))


def _run(desc, inputs, outputs, ws):
    boxes, scores = inputs[:2]
    idxs = inputs[2] if len(inputs) == 3 else None
    keep, count = outputs
    k = boxes.shape[0]
    nb = cdiv(k, _WORD)
    parts = _parts(desc)
    if ws is None:
        ws = torch.empty(sum(parts), dtype=torch.uint8, device=boxes.device)
    views, at = [], 0
    for p in parts:
        views.append(ws.reshape(-1)[at:at + p])
        at += p
    order = views[0][:8 * k].view(torch.int64)
    mask = views[1][:8 * k * nb].view(torch.int64)
    remv = views[2][:8 * nb].view(torch.int64)
    if k:
        s = scores if scores.stride(0) == 1 else scores.contiguous()
        sort_rows(s.view(1, k), None, order.view(1, k), k, True, views[3])
        f64 = boxes.dtype == torch.float64
        _iou_mask_kernel[(nb, nb)](boxes, order, idxs if idxs is not None else order, mask, k, nb, *boxes.stride(),
                                   idxs.stride(0) if idxs is not None else 0,
                                   *split_f64(desc.attr("iou_threshold")), HAS_IDX=idxs is not None,
                                   ACC=tl.float64 if f64 else tl.float32, F64=f64, num_warps=8)   # (64 x 64: 212-253 regs at 4)
    ch = min(triton.next_power_of_2(max(nb, 1)), 64 if INTERPRETING else 32)
    keep_t = keep if keep.stride(0) == 1 or k <= 1 else torch.empty_like(keep, memory_format=torch.contiguous_format)
    _nms_reduce_kernel[(1,)](mask, order, keep_t, count, remv, k, nb, CH=ch, FILL=256 if INTERPRETING else 1024,
                             num_warps=4)
    if keep_t is not keep:
        keep.copy_(keep_t)


def _supports(desc):
    k = desc.inputs[0].shape[0]
    return f"{k} boxes (the mask grid's axis 1 holds 65535 blocks of 64)" if cdiv(k, _WORD) > 65535 else None


for _op in ("nms", "batched_nms"):
    register_triton(_op, _run, workspace=_workspace, supports=_supports, route=f"triton:{_op}:iou-bitmask+sweep",
                    dtypes=frozenset((DType.f32, DType.f64, DType.f16, DType.bf16)))
