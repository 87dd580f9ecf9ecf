"""Triton index_put and advanced_index: the index tensors (broadcast to B) are folded into one linear row index over
the leading dims (``_linear_kernel``, one pass per index tensor, negative indices wrapped, an out-of-range one
flagged in that tensor's flag word and its row marked -1), then the row kernels of rows.py run on the
(1, P, rest) view: advanced_index selects rows; index_put copies (sorted segments: the last value wins, as on the
CPU) or, with accumulate, adds (atomics for f64 / f32 / f16, the sorted fold when determinism is required or for
bf16 and integers)."""
from __future__ import annotations

import math

import torch
import triton.language as tl

from ...._core.checks import flagged
from ....ops.indexing_index import index_error
from .._lib.geometry import cdiv
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .._lib.strided import RANK, expanded_strides, padded, strided_offset
from ..layout.move import copy_into, scalar
from .rows import _deterministic, _precision, apply_rows, decode_flag, flag_bad

_BLOCK = 1024


@fast_kernel
def _linear_kernel(lin_ptr, idx_ptr, flag_ptr, total, N, S1, S2, S3, S4, S5, t0, t1, t2, t3, t4, t5,
                   FIRST: tl.constexpr, BLOCK: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    pm = p < total
    v = tl.load(idx_ptr + strided_offset(p, S1, S2, S3, S4, S5, t0, t1, t2, t3, t4, t5), mask=pm, other=0).to(tl.int64)
    i = tl.where(v < 0, v + N, v)
    ok = (i >= 0) & (i < N)
    flag_bad(flag_ptr, v, pm & ~ok)
    if FIRST:
        lin = tl.where(ok, i, -1)
    else:
        prev = tl.load(lin_ptr + p, mask=pm, other=0)
        lin = tl.where(ok & (prev >= 0), prev * N + i, -1)
    tl.store(lin_ptr + p, lin, mask=pm)


def _supports(desc):
    n_idx = len(desc.inputs) - (2 if desc.op == "index_put" else 1)
    b = desc.outputs[0].shape[:len(desc.outputs[0].shape) - len(desc.inputs[0].shape) + n_idx] \
        if desc.op == "advanced_index" else None
    if b is not None and len(b) > RANK:
        return f"index tensors broadcast to more than {RANK} dims"
    return None


def _linear(indices, b, shape, flags):
    """The int64 row index over the leading len(indices) dims, (-1 where an index is out of range)."""
    total = math.prod(b)
    lin = torch.empty(max(total, 1), dtype=torch.int64, device=flags.device)
    for j, t in enumerate(indices):
        pd = padded(list(b) or [1], [expanded_strides(t, b) or [0]] if b else [[0]])
        if pd is None:
            t = t.expand(b).contiguous()
            pd = padded(list(b), [expanded_strides(t, b)])
        dims, (st,) = pd
        if total:
            _linear_kernel[(cdiv(total, _BLOCK),)](lin, t, flags[j:j + 1], total, shape[j], *dims[1:], *st,
                                                   FIRST=j == 0, BLOCK=_BLOCK, num_warps=4)
    return lin[:total]


def _bind(desc, pref):
    op = desc.op
    put = op == "index_put"
    x_spec = desc.inputs[0]
    shape = x_spec.shape or (1,)
    n_idx = len(desc.inputs) - (2 if put else 1)
    p_rows, rest = math.prod(shape[:n_idx]), math.prod(shape[n_idx:])
    if put:
        acc = desc.attr("accumulate")
        kind = ("add" if not _deterministic(desc, pref) else "seg:add") if acc else "seg:copy"
    else:
        kind = "select"

    def run(desc_, inputs, outputs, ws):
        x = inputs[0]
        indices = inputs[2:] if put else inputs[1:]
        out = outputs[0]
        flags = ws.view(torch.int64)[:n_idx + 1]
        flags.zero_()
        b = tuple(torch.broadcast_shapes(*[t.shape for t in indices]))
        lin = _linear(indices, b, shape, flags)
        k = lin.numel()
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        src = inputs[1].expand(b + tuple(shape[n_idx:]) if x.dim() else b).reshape(1, k, rest) if put else None
        val = scalar(1, res)
        # (rows marked -1 were flagged by the linearization: the row kernels' own flag is the spare last word)
        apply_rows(kind, res, x, lin, src, val, flags[n_idx:], (1, p_rows, rest), k, False, False)
        if res is not out:
            copy_into(out, res)
        for j in range(n_idx):
            flagged(flags[j:j + 1], pref, lambda v, j=j: index_error(op, f"indices[{j}]", decode_flag(v), shape[j], True))

    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


def _route(desc, pref):
    if desc.op == "advanced_index":
        return "triton:advanced_index:rows"
    if desc.attr("accumulate") and not _deterministic(desc, pref):
        return "triton:index_put:atomic"
    return "triton:index_put:sorted-segments"


for _op in ("index_put", "advanced_index"):
    register_triton(_op, _run, bind=_bind, route=_route, precision=_precision, supports=_supports,
                    workspace=lambda d: 8 * len(d.inputs))
