"""Triton cross_entropy_with_grad (loss and input gradient for the given upstream gradient) and grad_scale.

cross_entropy_with_grad, two routes (the SKU names which):
* coop (GPU; 2-D logits with unit class stride, class-index targets, rows of more than one tile): the
  single-read kernel of loss_ce_coop.py with LOSS=True.  Each program holds an 8192-class chunk of a row in
  registers, exchanges (max, sum exp[, sum w x]) partials with the row's other chunks, writes the gradient from
  registers and the row's chunk-0 program writes the row loss; a one-program fold reduces the row losses in a
  fixed order.  Bytes: one read of the logits + one write of the gradient, 2 x 1.05 GB at 4096 x 128256 bf16,
  ~0.75 ms at 2.8 TB/s — the forward and the backward of a training step together (eager torch: ~3.1 ms).
* composed (everything else, and the interpreter, where programs cannot wait for each other): cross_entropy's
  forward kernels, then its backward kernels with the upstream gradient (loss/cross_entropy.py).

grad_scale(x, g[, h]): y = x * (g / h) in one pass; in place with g == h (or g == 1) every program of a
persistent grid loads g (and h), sees a factor of 1 and stores nothing.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.spec import Descriptor
from ....ops.loss_fused import CE_WITH_GRAD
from . import ce_coop as _long
from . import cross_entropy as _ce
from .._lib.register import register_triton
from .._lib.config import num_sms, overrides
from .._lib.launch import shared
from .._lib.interp import loop
from .._lib.geometry import cdiv

_FORCE, forced = overrides("Force ``coop=False`` (tests: the composed route on the GPU).")
_SCALE_BLOCK = 4096   # 8 KB bf16 / 16 KB f32 per program: 16-byte vectors, ~4 in flight per thread


def _descs(desc):
    """cross_entropy on (input, target[, weight]) and cross_entropy_backward on (grad, its lse, the operands)."""
    fw = Descriptor("cross_entropy", desc.inputs[1:], desc.attrs)
    bw = Descriptor("cross_entropy_backward", (desc.inputs[0], fw.outputs[1]) + desc.inputs[1:], desc.attrs)
    return fw, bw


def _coop(desc) -> bool:
    _, bw = _descs(desc)
    n, c, d, r, tile, rows, warps, split, chunk, part = _ce._plan_of(bw)
    return _FORCE.get("coop", True) and _ce._coop(bw, c, d, tile, split)


def _layout(desc):
    """(bytes of the main workspace, word size): coop = [row losses R | row weights R | flag | den | partials];
    composed = the larger of cross_entropy's and its backward's workspaces, then the forward's lse (R words)."""
    fw, bw = _descs(desc)
    word = 8 if desc.dtype.itemsize == 8 else 4
    if _coop(desc):
        r, c = desc.inputs[1].shape
        main = (2 * r + 2 + _long.workspace_words(r, c, loss=True)) * word
    else:
        main = (max(_ce._workspace(fw), _ce._workspace(bw)) + 15) // 16 * 16 + fw.outputs[1].nbytes
    return (main + 15) // 16 * 16, word


def _workspace(desc) -> int:
    return _layout(desc)[0]


def _bind(desc, pref=None):
    fw_desc, bw_desc = _descs(desc)
    main, word = _layout(desc)
    f64 = word == 8
    ct = torch.float64 if f64 else torch.float32
    has_w = len(desc.inputs) == 4
    a = desc.attr_dict
    mean, eps, ignore = a["reduction"] == "mean", a["label_smoothing"], a["ignore_index"]

    shape = desc.inputs[1].shape
    c = shape[1] if len(shape) > 1 else shape[0]     # the class count ([C], [N, C] or [N, C, d1, ...])
    consts: dict = {}

    def const(dev):
        """(eps, C = sum of unit class weights) as 1-word views of one device tensor, made once per device: no
        fill per call, and f64 kernels read eps at full precision."""
        k = consts.get(dev)
        if k is None:
            t = torch.tensor([eps, float(c)], dtype=ct, device=dev)
            k = consts[dev] = (t[0:1], t[1:2])
        return k

    if not _coop(desc):
        fw, bw = _ce._bind(fw_desc, pref), _ce._bind(bw_desc, pref)
        at = (max(_ce._workspace(fw_desc), _ce._workspace(bw_desc)) + 15) // 16 * 16   # the lse's bytes
        lse_t, nrows = fw_desc.outputs[1], fw_desc.outputs[1].numel

        def composed(desc_, inputs, outputs, ws):
            lse = ws.reshape(-1)[at:at + nrows * word].view(ct).reshape(lse_t.shape)
            fw(fw_desc, inputs[1:], (outputs[0], lse), ws)
            bw(bw_desc, (inputs[0], lse) + tuple(inputs[1:]), outputs[1:], ws)

        return composed

    r = shape[0]

    def coop(desc_, inputs, outputs, ws):
        g, x, t = inputs[0], inputs[1], inputs[2]
        wt = inputs[3].contiguous() if has_w else x
        loss, dx_o = outputs
        if x.stride(1) != 1:
            x = x.contiguous()
        dx = dx_o if dx_o.is_contiguous() else torch.empty(dx_o.shape, dtype=dx_o.dtype, device=dx_o.device)
        w = _ce._ws_view(ws[:main], f64)
        w[2 * r:2 * r + 1].zero_()                 # the bad-target flag
        den = w[2 * r + 1:2 * r + 2]
        if mean:
            nblk = cdiv(r, 1024)
            shared(_ce._denom_blk, x.device)((nblk,), (t, wt, w, r, c, 1, t.stride(0), 0, ignore),
                                             dict(HAS_W=has_w, PROB=False, ND=0, F64=f64, BLOCK=1024), num_warps=4)
            shared(_ce._fold, x.device)((1,), (w, den, nblk), dict(MEAN=False, F64=f64, BLOCK=1024),
                                        num_warps=4)
        e, wsum = const(x.device)
        if eps > 0 and has_w:
            wsum = inputs[3].sum(dtype=ct).reshape(1)
        _long.launch(g.reshape(1), x, t, wt, dx, w[2 * r + 2:], den, e, wsum, r, c, ignore, has_w, eps > 0,
                     2 if mean else 1, f64, loss=w[:2 * r + 1])
        shared(_ce._fold, x.device)((1,), (w, loss, r), dict(MEAN=mean, F64=f64, BLOCK=1024),
                                    num_warps=4)
        if dx is not dx_o:
            dx_o.copy_(dx)
        _ce._check_flag(desc.op, w[2 * r], c, ignore, pref)

    return coop


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    if _coop(desc):
        return f"triton:{CE_WITH_GRAD}:coop{_long.CHUNK}x{_long.splits(desc.inputs[1].shape[1])}"
    fw, bw = _descs(desc)
    return f"triton:{CE_WITH_GRAD}:composed[{_ce._route(fw, pref)}+{_ce._route(bw, pref)}]"


register_triton(CE_WITH_GRAD, _run, route=_route, workspace=_workspace, bind=_bind)


# -- grad_scale ----------------------------------------------------------------------------------------------
@triton.jit
def _scale_block(x_ptr, y_ptr, g, b, n, I64: tl.constexpr, BLOCK: tl.constexpr, CT: tl.constexpr):
    if I64:
        offs = b.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = b * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, (x.to(CT) * g).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _scale_kernel(x_ptr, g_ptr, h_ptr, y_ptr, n, nblocks, HAS_H: tl.constexpr, SKIP_ONE: tl.constexpr,
                  F64: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    """Persistent grid (a few programs per SM walk the blocks), so that in place with g == h (or g == 1) the
    whole launch is a few hundred programs loading one or two words each (~3 us), not one program per block
    (78 us at 1 GB).  The factor g / h is formed in the compute precision: exactly 1 when g == h."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    g = tl.load(g_ptr).to(CT)
    if HAS_H:
        g = g / tl.load(h_ptr).to(CT)
    go = True
    if SKIP_ONE:          # in place: x * 1 == x, nothing to read or write
        go = g != 1.0
    if go:
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        for b in loop(pid, nblocks, nprog):
            _scale_block(x_ptr, y_ptr, g, b, n, I64, BLOCK, CT)


def _run_scale(desc, inputs, outputs, ws):
    x, g = inputs[0], inputs[1]
    h = inputs[2] if len(inputs) == 3 else None
    y = outputs[0]
    n = x.numel()
    if n == 0:
        return
    inplace = y.data_ptr() == x.data_ptr() and y.stride() == x.stride()
    src = x if x.is_contiguous() else x.contiguous()
    dst = y if y.is_contiguous() else torch.empty(y.shape, dtype=y.dtype, device=y.device)
    nblocks = cdiv(n, _SCALE_BLOCK)
    shared(_scale_kernel, x.device)((min(nblocks, 4 * num_sms()),), (src, g, g if h is None else h, dst, n, nblocks),
           dict(HAS_H=h is not None, SKIP_ONE=inplace and dst is y and src is x, F64=x.dtype == torch.float64,
                I64=n >= 2 ** 31 - _SCALE_BLOCK, BLOCK=_SCALE_BLOCK), num_warps=4)
    if dst is not y:
        y.copy_(dst)


register_triton("grad_scale", _run_scale, route="triton:grad_scale")
