"""Patch-embedding convolutions as one cuBLAS GEMM: ``convolution`` / ``convolution_backward`` where the kernel
equals the stride, with no padding, dilation or groups (ViT's 16x16 stride-16 patch embedding, Swin's 4x4 stride 4).

Every output pixel reads exactly one patch and every input pixel lies in at most one, so with P patches per image
and K = C_in x kernel volume:
    y[N*P, C_out]   = X[N*P, K] @ W[C_out, K]^T (+ bias: cuBLASLt's bias epilogue)
    dW[C_out, K]    = dY^T @ X
    dX[N*P, K]      = dY @ W, written back patch by patch (zero where the image's remainder rows / columns belong
                      to no patch)
X, the patch matrix, is one permuting copy of the image (a read and a write of x; the backward makes it again
rather than saving it).  Its rows are ordered (ky, kx, c) for a channels-last image -- the weight taken in that order
too, which is a channels-last weight's own storage order -- and (c, ky, kx) otherwise, so the weight of either
layout is read without a copy where its layout matches the image's.  y is written straight into the op's output:
an (N, *spatial, C_out) storage when the op's ``channels_last`` asks for it ([N*P, C_out] is that storage), else
(N, C_out, *spatial) through one batched GEMM per image order ([C_out, K] @ X_n^T, the bias added after).
Compared to a general convolution engine this moves the image twice and runs tensor-core GEMMs of K = 768 for
ViT-B/16, against an implicit-GEMM kernel that must gather its 16x16x3 windows per tile.

Selected before cuDNN on CUDA for the problems it takes (``supports`` names the rest); precision, flags and
determinism are cuBLAS's (``cublas.py``).  Registered for CUDA devices only; the tests run the same bound runs on
CPU tensors through torch's CPU GEMMs.
"""
from __future__ import annotations

import math

from ...ops._common import suggest_channels_last
from ...ops.conv import geometry_of
from .cublas import register_cublas, torch_run

PRIORITY = 30.0     # above cuDNN's 20 where it serves


def supports(desc) -> str | None:
    g = geometry_of(desc)
    if g.transposed or g.groups != 1:
        return "a transposed or grouped convolution (the patch GEMM takes plain kernel == stride convolutions)"
    if g.kernel != g.stride or any(p != 0 for p in g.pad) or any(d != 1 for d in g.dilation):
        return "kernel != stride, padding or dilation (not a patch embedding: each input pixel in one patch at most)"
    if math.prod(g.kernel) == 1:
        return "a 1x1 stride-1 kernel (a plain pointwise convolution: cuDNN and the implicit GEMM serve it)"
    if any(d == 0 for t in desc.inputs for d in t.shape):
        return "a zero-size operand"
    return None


def _route(desc, pref=None) -> str:
    g = geometry_of(desc)
    k = "x".join(str(e) for e in g.kernel[3 - g.nd:])
    what = "fprop" if desc.op == "convolution" else "+".join(
        n for n, m in zip(("dgrad", "wgrad"), desc.attr("output_mask")) if m)
    return f"cublas:conv-patch-gemm[{k},{what}" + ("+bias" if len(desc.inputs) == 3 else "") + "]"


def _split(t, nd, kernel):
    """(N, C, *spatial) -> (N, C, p1, k1, ..., pd, kd): every spatial dim split into (patch, offset) -- a view,
    the image cropped to whole patches first."""
    sp = t.shape[2:]
    t = t[(slice(None), slice(None)) + tuple(slice(0, (s // k) * k) for s, k in zip(sp, kernel))]
    for i, k in enumerate(kernel):
        d = 2 + 2 * i
        t = t.unflatten(d, (t.shape[d] // k, k))
    return t


def _orders(nd):
    """(patch dims, offset dims) of the split view, and the two row orders: (ky, kx, c) and (c, ky, kx)."""
    patches = [2 + 2 * i for i in range(nd)]
    offsets = [3 + 2 * i for i in range(nd)]
    return patches, offsets, offsets + [1], [1] + offsets


def _patch_matrix(x, nd, kernel, cl):
    """X [N*P, K] (rows in the channels-last or the channels-first order), one copy."""
    patches, _, off_c, c_off = _orders(nd)
    v = _split(x, nd, kernel).permute([0] + patches + (off_c if cl else c_off))
    return v.reshape(-1, math.prod(v.shape[1 + nd:]))


def _weight_matrix(w, nd, cl):
    """W [C_out, K] in the same row order (a view of a weight stored that way)."""
    perm = [0] + list(range(2, 2 + nd)) + [1] if cl else list(range(2 + nd))
    return w.permute(perm).reshape(w.shape[0], -1)


def _bind(desc, pref=None):
    import torch

    g = geometry_of(desc)
    nd, kernel = g.nd, g.kernel[3 - g.nd:]
    cl_out = g.channels_last
    n, cout = g.n, g.cr

    if desc.op == "convolution":
        def call(inputs, outputs):
            x, w = inputs[0], inputs[1]
            bias = inputs[2] if len(inputs) == 3 else None
            cl = suggest_channels_last(x)
            xm, wm = _patch_matrix(x, nd, kernel, cl), _weight_matrix(w, nd, cl)
            y = outputs[0]
            if cl_out:     # y's storage (N, *spatial, C_out) is the [N*P, C_out] product
                y2 = y.view(-1, cout) if y.is_contiguous() else None
                r = torch.addmm(bias, xm, wm.t(), out=y2) if bias is not None else torch.mm(xm, wm.t(), out=y2)
                if y2 is None:
                    y.copy_(r.view(y.shape))
                return
            p = xm.shape[0] // max(n, 1)
            y3 = y.view(n, cout, p) if y.is_contiguous() else None
            r = torch.matmul(wm, xm.view(n, p, -1).mT, out=y3)
            if bias is not None:
                r.add_(bias.view(1, cout, 1))
            if y3 is None:
                y.copy_(r.view(y.shape))

        def produce(inputs):
            out = torch.empty(g.y_storage, dtype=inputs[0].dtype, device=inputs[0].device)
            call(inputs, [out])
            return [out]
        return torch_run(call, produce, desc, pref)

    mask = desc.attr("output_mask")

    def call(inputs, outputs):
        gy, x, w = inputs
        cl = suggest_channels_last(x)
        # the upstream as [N*P, C_out] rows (channels_last storage) or [N, C_out, P]
        outs = list(outputs)
        wm = _weight_matrix(w, nd, cl)
        if cl_out:
            g2 = gy.reshape(-1, cout)
        else:
            g3 = gy.reshape(n, cout, -1)
            g2 = g3.mT.reshape(-1, cout)      # (a copy: dY in patch-row order for the GEMMs below)
        if mask[0]:
            dxm = torch.mm(g2, wm)                      # [N*P, K]
            dx = outs.pop(0)
            patches, offsets, off_c, c_off = _orders(nd)
            order = [0] + patches + (off_c if cl else c_off)
            if any(s % k for s, k in zip(dx.shape[2:], kernel)):
                dx.zero_()      # (the remainder rows / columns: in no patch, no gradient)
            view = _split(dx, nd, kernel).permute(order)
            view.copy_(dxm.view(view.shape))
        if mask[1]:
            dw = outs.pop(0)
            xm = _patch_matrix(x, nd, kernel, cl)
            dwm = torch.mm(g2.t(), xm)                  # [C_out, K] in the rows' order
            dw.copy_(_unweight(dwm, dw.shape, nd, cl))     # (one copy into the buffer, whatever its layout)

    def produce(inputs):
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}
        outs = [torch.empty(t.shape, dtype=t.dtype.torch, device=inputs[0].device,
                            memory_format=fmt.get(len(t.shape), torch.contiguous_format) if cl_out
                            else torch.contiguous_format) for t in desc.outputs]
        call(inputs, outs)
        return outs
    return torch_run(call, produce, desc, pref)


def _unweight(m, shape, nd, cl):
    """[C_out, K] rows back to the weight's (C_out, C_in, *kernel) shape (a view)."""
    if not cl:
        return m.view(shape)
    perm_shape = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    inv = [0, nd + 1] + list(range(1, nd + 1))
    return m.view(perm_shape).permute(inv)


for _op in ("convolution", "convolution_backward"):
    register_cublas(_op, _bind, _route, supports, priority=lambda desc, dev: PRIORITY)
