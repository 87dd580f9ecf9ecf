"""The Triton plans of ``convolution`` and ``convolution_backward``: which pass computes what, on which operands.
Two routes, chosen by the descriptor: depthwise problems with channel multiplier 1 (``is_depthwise``) run the direct
kernels of depthwise.py, every other problem the implicit-GEMM passes of implicit_gemm.py (the same modes):

    convolution              forward: CORR(image=x -> response=y);  transposed: SCATTER(response=x -> image=y)
    convolution_backward dx  forward: SCATTER(response=g -> image=dx); transposed: CORR(image=g -> response=dx)
                         dw  forward: WCORR(image=x, response=g);   transposed: WCORR(image=g, response=x)
A channels_last descriptor's output (or grad) is (N, *spatial, C) storage: the kernel sees its (N, C, *spatial)
view, so no layout pass is ever run; inputs are read through their strides, whatever they are.
"""
from __future__ import annotations

import math

import torch

from ...._core.dtypes import FLOAT_TYPES, DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.conv import geometry_of
from ... import with_produce
from .._lib.register import register_triton
from .depthwise import dw_configs, dw_launch, dw_workspace, is_depthwise, unrolled
from .implicit_gemm import CORR, MODE_NAMES, SCATTER, WCORR, as5, choose, launch, partial_dtype


def _tf32(desc, pref) -> bool:
    return desc.dtype == DType.f32 and pref is not None and pref.allow_reduced_precision


def _logical(t, geom):
    """The op's output / grad tensor as its (N, C, *spatial) view."""
    return t.movedim(-1, 1) if geom.channels_last else t


def _writable(out):
    """``out`` where the kernel may store into it (no self-overlap: every dim of size > 1 has a nonzero stride), else a
    contiguous scratch copied back after."""
    ok = all(s != 0 for d, s in zip(out.shape, out.stride()) if d > 1)
    return out if ok else torch.empty(out.shape, dtype=out.dtype, device=out.device)


def _passes(desc):
    """[(mode, what)] of a descriptor: what in 'y', 'dx', 'dw'."""
    geom = geometry_of(desc)
    if desc.op == "convolution":
        return geom, [(SCATTER if geom.transposed else CORR, "y")]
    need_x, need_w = desc.attr("output_mask")
    out = []
    if need_x:
        out.append((CORR if geom.transposed else SCATTER, "dx"))
    if need_w:
        out.append((WCORR, "dw"))
    return geom, out


def _dw_configs(geom, passes, dtype):
    """The depthwise route's (NCHW, channels-last) tile pair per pass (picked at run time by the operands' strides)."""
    return [dw_configs(mode == WCORR, geom, dtype) for mode, _ in passes]


def _workspace(desc) -> int:
    geom, passes = _passes(desc)
    if is_depthwise(geom):
        dt = desc.dtype.torch
        return max([dw_workspace(geom, c, dt) for c in _dw_configs(geom, passes, dt)] + [0])
    for mode, what in passes:
        if mode == WCORR:
            cfg = choose(WCORR, geom, desc.dtype.torch, False)
            if cfg.split > 1:
                return partial_dtype(desc.dtype.torch).itemsize * cfg.split * desc.inputs[2].numel
    return 0


def _bind(desc, pref=None):
    geom, passes = _passes(desc)
    prec = "tf32" if _tf32(desc, pref) else "ieee"
    depthwise = is_depthwise(geom)
    if depthwise:
        cfgs = _dw_configs(geom, passes, desc.dtype.torch)
    else:
        cfgs = [choose(mode, geom, desc.dtype.torch, prec == "tf32") for mode, _ in passes]

    def go(mode, img, resp, wt, cfg, bias=None, parts=None):
        if depthwise:
            dw_launch(mode, geom, img, resp, wt, cfg, bias=bias, parts=parts, wgrad=mode == WCORR)
        else:
            launch(mode, geom, img, resp, wt, cfg, prec, bias=bias, parts=parts)

    def run(desc_, inputs, outputs, ws):
        targets = [_writable(o) for o in outputs]
        if desc.op == "convolution":
            x, w = inputs[0], inputs[1]
            bias = inputs[2] if len(inputs) == 3 else None
            y = as5(_logical(targets[0], geom))
            x5, w5 = as5(x), as5(w)
            img, resp = (y, x5) if geom.transposed else (x5, y)
            go(passes[0][0], img, resp, w5, cfgs[0], bias=bias)
        else:
            g, x, w = inputs
            g5, x5, w5 = as5(_logical(g, geom)), as5(x), as5(w)
            for (mode, what), cfg, t in zip(passes, cfgs, targets):
                if what == "dx":
                    dx = as5(t)
                    img, resp = (g5, dx) if geom.transposed else (dx, g5)
                    go(mode, img, resp, w5, cfg)
                else:
                    img, resp = (g5, x5) if geom.transposed else (x5, g5)
                    parts = None
                    split = max(c.split for c in cfg) if depthwise else cfg.split   # (depthwise: a tile pair)
                    if split > 1:
                        pdt = partial_dtype(w.dtype)
                        parts = ws.view(pdt) if ws is not None else \
                            torch.empty(split * w.numel(), dtype=pdt, device=w.device)
                    go(mode, img, resp, as5(t), cfg, parts=parts)
        for t, o in zip(targets, outputs):
            if t is not o:
                o.copy_(t)
    # a drop-in call's gradients of a channels-last convolution come channels-last, as torch's (cudnn_conv.py)
    return with_produce(run, desc, lambda xs: True) if desc.op != "convolution" and geom.channels_last else run


def _run_default(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


def _precision(desc, pref=None) -> PrecisionGuarantee:
    """One program per output tile, split-K partials summed in a fixed order: deterministic, bit-stable."""
    dt = desc.dtype
    if dt == DType.f64:
        return PrecisionGuarantee(MathPrecision.F64, DType.f64, True, True)
    if dt == DType.f32:
        return PrecisionGuarantee(MathPrecision.TF32 if _tf32(desc, pref) else MathPrecision.F32, DType.f32, True, True)
    return PrecisionGuarantee(MathPrecision.BF16 if dt == DType.bf16 else MathPrecision.F16, DType.f32, True, True)


def _route(desc, pref):
    geom, passes = _passes(desc)
    if is_depthwise(geom):
        # the tile of the descriptor's layout (channels_last: torch returns channels-last for channels-last inputs)
        cfgs = [pair[geom.channels_last] for pair in _dw_configs(geom, passes, desc.dtype.torch)]
        head = f"triton:conv-depthwise-direct[{geom.nd}d," + ("taps-unrolled," if unrolled(geom) else "")
        return head + ",".join(
            f"{what}={MODE_NAMES[mode]}[{c.bp}x{c.bc},w{c.warps}" + (f",split{c.split}" if c.split > 1 else "") + "]"
            for (mode, what), c in zip(passes, cfgs)) + "]"
    parts = []
    for mode, what in passes:
        c = choose(mode, geom, desc.dtype.torch, _tf32(desc, pref))
        parts.append(f"{what}={MODE_NAMES[mode]}[{c.bm}x{c.bn}x{c.bk},w{c.warps},s{c.stages}"
                     + (f",splitk{c.split}" if c.split > 1 else "") + "]")
    return f"triton:conv-implicit-gemm[{geom.nd}d,g{geom.groups}," + ",".join(parts) + "]"


def _supports(desc):
    geom, passes = _passes(desc)
    if is_depthwise(geom):   # (grid axis 1: channel blocks, one channel each for NCHW operands)
        return f"{geom.groups} channels (grid axis 1 holds at most 65535)" if geom.groups > 65535 else None
    if geom.groups > 65535:
        return f"{geom.groups} groups (grid axis 1 holds at most 65535)"
    for mode, _ in passes:
        if mode == WCORR:
            cfg = choose(mode, geom, desc.dtype.torch, False)
            if cfg.split * math.prod(geom.kernel) > 65535:
                return "more than 65535 kernel offsets x split-K slots (grid axis 2)"
    return None


def _priority(desc, dev) -> float:
    # a library backend (cuDNN) registers its own priority (20: it stays first where it serves); on the CPU the
    # interpreter is a correctness tool only.  Channels-last 1-d / 2-d depthwise problems (the tap-unrolled kernels)
    # rank above cuDNN (30): on the H200 (session 19, bench/depthwise_ab.py, bf16) cuDNN's graph for them took
    # 4-13x the Triton kernels' time (144ch 56^2 3x3: 0.69 vs 0.10 ms forward, 0.80 vs 0.43 backward).  NCHW
    # depthwise stays with cuDNN, 2-4x faster there (0.094 vs 0.204 ms forward)
    if dev.type != "cuda":
        return -200.0
    geom = geometry_of(desc)
    return 30.0 if is_depthwise(geom) and geom.channels_last and unrolled(geom) else 10.0


for _op in ("convolution", "convolution_backward"):
    register_triton(_op, _run_default, bind=_bind, precision=_precision, route=_route, supports=_supports,
                    priority=_priority, workspace=_workspace, dtypes=frozenset(FLOAT_TYPES),
                    dtypes_note="integer convolutions run on the reference backend (torch's CUDA convolutions have "
                                "no integer kernels either)")
