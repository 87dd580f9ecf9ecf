"""cross_entropy / nll_loss (forward and fused backward) plans: the host side of ce_kernels.py's kernels (see its
docstring for the layout and the kernels) and of the N-D small-class path (ce_nd.py)."""
from __future__ import annotations


import torch
import triton

from ...._core.dtypes import DType
from .._lib.register import register_triton
from . import ce_coop as _long
from .._lib.interp import INTERPRETING
from .ce_kernels import (_FIN_BLOCK, _FORCE, _RED, _ce_fin, _ce_grad, _ce_part, _check_flag, _denom, _denom_blk, _fold,
                         _geometry,
                         _ncd, _nll_bw, _nll_fw, _ws_view, choose)
from .ce_nd import _ce_nd, _ce_nd_grad, nd_small
from .._lib.geometry import cdiv


def _plan_of(desc):
    bw, x, t, _ = _geometry(desc)
    n, c, d = _ncd(x.shape)
    r = n * d
    nll = desc.op.startswith("nll_loss")
    tile, rows, warps, split, chunk = choose(r, c, d, x.dtype.itemsize)
    part = 0 if nll or nd_small(desc) or (bw and not _needs_b(desc)) else 4 * split * r
    return n, c, d, r, tile, rows, warps, split, chunk, part


def _needs_b(desc) -> bool:
    """Whether the backward's coefficient sum_c w_c y'_c needs a row sum (probability targets, or label smoothing
    with class weights); else it is (1 - eps) w_t + eps (C / C) and dx comes from the saved lse in one pass."""
    _, _, t, has_w = _geometry(desc)
    return t.dtype.is_floating or (desc.attr("label_smoothing") > 0 and has_w)


def _coop(desc, c, d, tile, split) -> bool:
    """cross_entropy_with_grad's single-read kernel (ce_coop.py, on the descriptor of its backward half): GPU only,
    2-D, class-index targets, rows wider than a tile.  (cross_entropy_backward itself reads the saved lse: a plain
    streaming pass, no waiting between programs.)"""
    bw, _, t, _ = _geometry(desc)
    return (bw and desc.op == "cross_entropy_backward" and not t.dtype.is_floating and d == 1
            and not (split == 1 and tile >= c) and _FORCE.get("coop", not INTERPRETING) and _long.eligible(c))


def _f64(desc) -> bool:
    return _geometry(desc)[1].dtype == DType.f64


def _workspace(desc) -> int:
    """Words (f32, f64 for f64 inputs): [0, R) row losses, [R, 2R) row weights, 2R the bad-target flag, 2R + 1
    the mean's denominator, then 4 SPLIT R words of partial row statistics (cross_entropy, not on the N-D
    small-class path).  Programs that sum their rows (the fused forward, the N-D small-class path: P <= R programs,
    each holding >= 1 row) put their (loss, weight) pairs in ws[0, 2P), the mean's backward its block sums."""
    *_, r, _t, _r, _w, _s, _c, part = _plan_of(desc)
    return (2 * r + 2 + part) * (8 if _f64(desc) else 4)


def _bind(desc, pref=None):
    bw, x, t, has_w = _geometry(desc)
    n, c, d, r, tile, rows, warps, split, chunk, _ = _plan_of(desc)
    f64 = _f64(desc)
    prob = t.dtype.is_floating
    nll = desc.op.startswith("nll_loss")
    red = desc.attr("reduction")
    ignore = desc.attr("ignore_index")
    eps = 0.0 if nll else desc.attr("label_smoothing")
    nd = 0 if d == 1 else (2 if d % rows == 0 else 1)   # see _roff
    common = dict(HAS_W=has_w, F64=f64, I64=n * c * d >= 2 ** 31 - 65536, ND=nd)
    cfg = dict(PROB=prob, SMOOTH=eps > 0, ROWS=rows, TILE=tile, num_warps=warps)
    grid = (cdiv(r, rows), split)
    fused = split == 1 and tile >= c   # the backward's statistics from the same tile (no _ce_part launch)
    coop = _coop(desc, c, d, tile, split)
    small = nd_small(desc)
    if small:
        kc, bj, warps_s = small
        nbj = cdiv(d, bj)
        small_cfg = dict(HAS_W=has_w, SMOOTH=eps > 0, F64=f64, K=kc, BJ=bj, I64=common["I64"],
                         num_warps=warps_s)
        xt_sum = _FORCE.get("nd_xt_sum", True)
    eps_t: dict = {}

    def eps_of(dev):   # a Python float argument would be typed f32: f64 kernels load eps from a tensor
        e = eps_t.get(dev)
        if e is None:
            e = eps_t[dev] = torch.full((1,), eps, dtype=torch.float64 if f64 else torch.float32, device=dev)
        return e

    def operands(xt, tt):
        """[N, C, D] views of the input (and probability target), the [N, D] view of index targets, strides."""
        x3 = xt.reshape(n, c, d)   # a view unless the trailing dims don't collapse (then one copy)
        if prob:
            t3 = tt.reshape(n, c, d)
            return x3, t3, (t3.stride(0), t3.stride(1), t3.stride(2))
        t2 = tt.reshape(n, d)
        return x3, t2, (t2.stride(0), 0, t2.stride(1))

    def contig(out):
        return out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)

    def fw(desc_, inputs, outputs, ws):
        x3, tg, (stn, stc, std) = operands(inputs[0], inputs[1])
        wt = inputs[2].contiguous() if has_w else x3   # [C]: a copy is negligible next to [N, C]
        out = outputs[0]
        loss = contig(out)
        lse_o = outputs[1] if not nll else None
        lse = contig(lse_o) if lse_o is not None else None
        w = _ws_view(ws, f64)
        w[2 * r:2 * r + 1].zero_()
        sx = x3.stride()
        if r:
            if nll:
                _nll_fw[(cdiv(r, 1024),)](x3, tg, wt, loss, w, r, c, d, sx[0], sx[1], sx[2], stn, std, ignore,
                                                 NONE=red == "none", BLOCK=1024, **common)
            elif small:
                _ce_nd[(n * nbj,)](x3, tg, wt, loss, lse, w, eps_of(x3.device), r, c, d, nbj, sx[0], sx[1], sx[2], stn,
                                   std, ignore, NONE=red == "none", XT=xt_sum, **small_cfg)
            else:
                part, e = w[2 * r + 2:], eps_of(x3.device)
                _ce_part[grid](x3, tg, wt, part, e, loss, lse, w, r, c, d, chunk, sx[0], sx[1], sx[2], stn, stc, std,
                               ignore, FIN=split == 1, NONE=red == "none", **cfg, **common)
                if split > 1:
                    _ce_fin[(cdiv(r, _FIN_BLOCK),)](x3, tg, wt, part, loss, lse, w, e, r, c, d, sx[0], sx[1], sx[2],
                                                           stn, std, ignore, PROB=prob, SMOOTH=eps > 0,
                                                           NONE=red == "none", SPLIT=split, BLOCK=_FIN_BLOCK,
                                                           num_warps=4, **common)
        if red != "none":   # the fused forward left one (loss, weight) sum per program, the others one per row
            nsum = n * nbj if small else grid[0] if (split == 1 and not nll) else r
            _fold[(1,)](w, loss, nsum, MEAN=red == "mean", F64=f64, BLOCK=1024, num_warps=4)
        if loss is not out:
            out.copy_(loss)
        if lse is not lse_o:
            lse_o.copy_(lse)
        if r and not prob:
            _check_flag(desc.op, w[2 * r], c, ignore, pref)

    need_b = bw and not nll and _needs_b(desc)

    def bwd(desc_, inputs, outputs, ws):
        g = inputs[0].contiguous()   # grad: the rows' shape or a scalar
        k = 1 if nll else 2          # cross_entropy_backward: (grad, lse, input, target[, weight])
        lse = inputs[1].contiguous() if not nll else g
        x3, tg, (stn, stc, std) = operands(inputs[k], inputs[k + 1])
        wt = inputs[k + 2].contiguous() if has_w else x3
        out = outputs[0]
        dx = contig(out)
        if r == 0 or c == 0:
            return
        w = _ws_view(ws, f64)
        den = w[2 * r + 1:]
        sx = x3.stride()
        if red == "mean":   # the denominator sum_r w[t_r]: one program up to 64K rows, block sums + a fold beyond
            if r <= 65536:
                _denom[(1,)](tg, wt, den, r, c, d, stn, std, ignore, HAS_W=has_w, PROB=prob, ND=nd, F64=f64,
                             BLOCK=1024, num_warps=4)
            else:
                nblk = cdiv(r, 1024)
                _denom_blk[(nblk,)](tg, wt, w, r, c, d, stn, std, ignore, HAS_W=has_w, PROB=prob, ND=nd, F64=f64,
                                    BLOCK=1024, num_warps=4)
                _fold[(1,)](w, den, nblk, MEAN=False, F64=f64, BLOCK=1024, num_warps=4)
        if small:
            _ce_nd_grad[(n * nbj,)](g, lse, x3, tg, wt, dx, den, eps_of(x3.device), r, c, d, nbj, sx[0], sx[1], sx[2],
                                    stn, std, ignore, RED=_RED[red], **small_cfg)
        elif nll:
            _nll_bw[(cdiv(r, rows), cdiv(c, tile))](g, tg, wt, dx, den, r, c, d, stn, std, ignore,
                                                                   RED=_RED[red], ROWS=rows, TILE=tile,
                                                                   num_warps=warps, **common)
        else:
            part, e = w[2 * r + 2:], eps_of(x3.device)
            if need_b and not fused:   # the row sums of w y' (probability targets, smoothing with weights)
                _ce_part[grid](x3, tg, wt, part, e, x3, x3, w, r, c, d, chunk, sx[0], sx[1], sx[2], stn, stc, std,
                               ignore, FIN=False, NONE=False, **cfg, **common)
            _ce_grad[grid](g, lse, x3, tg, wt, dx, part, den, e, r, c, d, chunk, sx[0], sx[1], sx[2], stn, stc, std,
                           ignore, RED=_RED[red], SPLIT=split, FUSED=fused, NEED_B=need_b, **cfg, **common)
        if dx is not out:
            out.copy_(dx)

    return bwd if bw else fw


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    n, c, d, r, tile, rows, _, split, _, _ = _plan_of(desc)
    small = nd_small(desc)
    if small:
        return f"triton:{desc.op}:nd-small-k{small[0]}x{small[1]}"
    kind = ""
    if desc.op == "cross_entropy_backward":   # lse: dx from the saved lse alone; +rowsum: a _ce_part pass first
        kind = "lse-" if not _needs_b(desc) else "fused-" if split == 1 and tile >= c else "rowsum-"
    return f"triton:{desc.op}:{kind}{'nd-' if d > 1 else ''}tile{tile}x{rows}" + ("" if desc.op.startswith("nll") else f"-split{split}")


for _op in ("cross_entropy", "cross_entropy_backward", "nll_loss", "nll_loss_backward"):
    register_triton(_op, _run, route=_route, workspace=_workspace, bind=_bind)
