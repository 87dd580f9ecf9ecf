"""NumPy float64 bodies of the image ops: interpolate (+ backward) as products with the per-dim matrices of
ops/image.py, grid_sample (+ backward) from per-dim tap lists, affine_grid (+ backward), the shuffles as reshapes."""
from __future__ import annotations

import numpy as np

from ...ops.image import interp_matrices
from ...ops.image_grid import grid_taps, affine_base
from . import register_reference


def _apply(x, mats, transpose=False):
    """x (N, C, *s) times M_d (or M_d^T) along every spatial dim d."""
    for d, m in enumerate(mats):
        x = np.moveaxis(np.tensordot(x, m if transpose else m.T, axes=([2 + d], [0])), -1, 2 + d)
    return x


def _interp_attrs(desc):
    return {k: desc.attr(k) for k in ("size", "mode", "align_corners", "scales", "antialias")}


def _interpolate(desc, x):
    mats = interp_matrices(_interp_attrs(desc), x.shape[2:])
    if desc.attr("mode") in ("nearest", "nearest-exact"):   # a gather: exact for every dtype (u8 included)
        for d, m in enumerate(mats):
            x = np.take(x, m.argmax(axis=1), axis=2 + d)
        return x
    return _apply(x, mats)


def _interpolate_bw(desc, g):
    return _apply(g, interp_matrices(_interp_attrs(desc), desc.attr("input_size")[2:]), transpose=True)


register_reference("interpolate", _interpolate)
register_reference("interpolate_backward", _interpolate_bw)


# -- grid_sample ---------------------------------------------------------------------------------------------------
def _grid_sample(desc, x, grid, want_grads=False, g=None):
    """Forward, or (dx, dgrid) with want_grads: out[n, c, p] = sum over tap combinations of prod_k w_k x[n, c, idx]."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    pshape = grid.shape[1:-1]
    gr = grid.reshape(n, -1, nd)
    sizes = x.shape[2:][::-1]     # grid component k addresses spatial dim nd - 1 - k (x = W, y = H, z = D)
    taps = [grid_taps(gr[..., k], sizes[k], desc.attr("mode"), desc.attr("padding_mode"), desc.attr("align_corners"))
            for k in range(nd)]   # each: idx, w, dw, valid (n, P, T), mult (n, P)
    T = taps[0][0].shape[-1]
    P = gr.shape[1]
    out = np.zeros((n, c, P))
    dx = np.zeros_like(x) if want_grads else None
    dgrid = np.zeros((n, P, nd)) if want_grads else None
    gf = g.reshape(n, c, P) if want_grads else None
    nn = np.arange(n)[:, None]
    for combo in np.ndindex(*(T,) * nd):
        w = np.ones((n, P))
        valid = np.ones((n, P), bool)
        idx = []
        for k, t in enumerate(combo):
            w = w * taps[k][1][..., t]
            valid &= taps[k][3][..., t]
            idx.append(np.where(taps[k][3][..., t], taps[k][0][..., t], 0))
        sp = tuple(idx[::-1])                       # (z, y, x) order of x's spatial dims
        vals = np.moveaxis(x[(nn, slice(None)) + sp], -1, 1)      # (n, c, P)
        vals = vals * valid[:, None, :]
        if not want_grads:
            out += w[:, None, :] * vals
            continue
        contrib = (gf * w[:, None, :]) * valid[:, None, :]
        np.add.at(dx, (nn, slice(None)) + sp, np.moveaxis(contrib, 1, -1))
        gv = (gf * vals).sum(axis=1)                 # (n, P)
        for k in range(nd):
            dwk = np.ones((n, P))
            for j, t in enumerate(combo):
                dwk = dwk * (taps[j][2][..., t] if j == k else taps[j][1][..., t])
            dgrid[..., k] += dwk * gv * taps[k][4]
    if not want_grads:
        return out.reshape((n, c) + pshape)
    return dx, dgrid.reshape(grid.shape)


def _grid_sample_bw(desc, g, x, grid):
    return _grid_sample(desc, x, grid, want_grads=True, g=g)


register_reference("grid_sample", _grid_sample)
register_reference("grid_sample_backward", _grid_sample_bw)


# -- affine_grid ---------------------------------------------------------------------------------------------------
def _affine_grid(desc, theta):
    base = affine_base(desc.attr("size"), desc.attr("align_corners"))     # (*spatial, nd + 1)
    n = theta.shape[0]
    out = np.einsum("pk,nik->npi", base.reshape(-1, base.shape[-1]), theta)
    return out.reshape((n,) + base.shape[:-1] + (theta.shape[1],))


def _affine_grid_bw(desc, g, theta):
    base = affine_base(desc.attr("size"), desc.attr("align_corners"))
    n = theta.shape[0]
    return np.einsum("npi,pk->nik", g.reshape(n, -1, theta.shape[1]), base.reshape(-1, base.shape[-1]))


register_reference("affine_grid", _affine_grid)
register_reference("affine_grid_backward", _affine_grid_bw)


# -- shuffles (exact data movement, every dtype) --------------------------------------------------------------------
def _pixel_shuffle(desc, x):
    r = desc.attr("upscale_factor")
    *b, c, h, w = x.shape
    y = x.reshape(tuple(b) + (c // (r * r), r, r, h, w))
    k = len(b)
    y = y.transpose(tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return y.reshape(tuple(b) + (c // (r * r), h * r, w * r))


def _pixel_unshuffle(desc, x):
    r = desc.attr("downscale_factor")
    *b, c, h, w = x.shape
    y = x.reshape(tuple(b) + (c, h // r, r, w // r, r))
    k = len(b)
    y = y.transpose(tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return y.reshape(tuple(b) + (c * r * r, h // r, w // r))


def _channel_shuffle(desc, x):
    g = desc.attr("groups")
    n, c = x.shape[:2]
    return x.reshape((n, g, c // g) + x.shape[2:]).swapaxes(1, 2).reshape(x.shape)


register_reference("pixel_shuffle", _pixel_shuffle, upcast_inputs=False)
register_reference("pixel_unshuffle", _pixel_unshuffle, upcast_inputs=False)
register_reference("channel_shuffle", _channel_shuffle, upcast_inputs=False)
