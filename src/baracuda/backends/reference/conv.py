"""NumPy float64 bodies of the convolution family: direct convolution (a sum over the kernel offsets of strided
window slices of the zero-padded image), the oracle the GPU kernels are tested against.  The three products of
ops/conv.py (corr, scatter, wcorr) serve the forward and both gradients of both directions; im2col / col2im
(F.unfold / F.fold) are the same windows without the channel contraction."""
from __future__ import annotations

import itertools

import numpy as np

from ...ops.conv import SPATIAL, geometry_of
from ...ops.conv_fold import fold_geometry
from . import register_reference
from .gemm import exact_ints


def _as5(a: np.ndarray) -> np.ndarray:
    """(N, C, *spatial) -> (N, C, D, H, W) with leading size-1 spatial dims."""
    return a.reshape(a.shape[:2] + (1,) * (2 + SPATIAL - a.ndim) + a.shape[2:])


def _padded_len(size, out, k, s, p, d):
    return max(size + p, (out - 1) * s + (k - 1) * d + 1)


def _windows(geom_sizes, image_shape):
    """(kernel offset, the slices of the padded image that offset reads for every response position)."""
    resp, kernel, stride, dil = geom_sizes
    for kk in itertools.product(*(range(k) for k in kernel)):
        yield kk, (slice(None), slice(None)) + tuple(
            slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, o, s in zip(kk, dil, resp, stride))


def _padded(image5, geom, dtype=None):
    """The zero-padded image buffer (N, C, *padded), in image5's dtype, and the slice of it that is the image."""
    n, c = image5.shape[:2]
    plen = tuple(_padded_len(i, o, k, s, p, d) for i, o, k, s, p, d in
                 zip(geom.image, geom.resp, geom.kernel, geom.stride, geom.pad, geom.dilation))
    inner = (slice(None), slice(None)) + tuple(slice(p, p + i) for p, i in zip(geom.pad, geom.image))
    return np.zeros((n, c) + plen, dtype=image5.dtype if dtype is None else dtype), inner


def _sizes(geom):
    return geom.resp, geom.kernel, geom.stride, geom.dilation


def _grouped_w(w5, geom):
    """weight (G*Cr, Ci, *k) -> (G, Cr, Ci, *k)."""
    return w5.reshape((geom.groups, geom.cr, geom.ci) + w5.shape[2:])


def corr(image5, w5, geom):
    """response[n, g, r, o] = sum_{i, k} image[n, g, i, o*s - p + k*d] * w[g, r, i, k] -> (N, G*Cr, *resp)."""
    buf, inner = _padded(image5, geom)
    buf[inner] = image5
    wg = _grouped_w(w5, geom)
    n = image5.shape[0]
    out = np.zeros((n, geom.groups, geom.cr) + geom.resp, dtype=np.result_type(image5, w5))
    for kk, sl in _windows(_sizes(geom), buf.shape):
        win = buf[sl].reshape((n, geom.groups, geom.ci) + geom.resp)
        out += np.einsum("ngixyz,gri->ngrxyz", win, wg[(...,) + kk])
    return out.reshape((n, geom.groups * geom.cr) + geom.resp)


def scatter(resp5, w5, geom):
    """The adjoint of corr in the image: image[n, g, i, o*s - p + k*d] += response[n, g, r, o] * w[g, r, i, k]."""
    n = resp5.shape[0]
    buf, inner = _padded(np.zeros((n, geom.groups * geom.ci) + geom.image, dtype=np.result_type(resp5, w5)), geom)
    rg = resp5.reshape((n, geom.groups, geom.cr) + geom.resp)
    wg = _grouped_w(w5, geom)
    for kk, sl in _windows(_sizes(geom), buf.shape):
        contrib = np.einsum("ngrxyz,gri->ngixyz", rg, wg[(...,) + kk])
        buf[sl] += contrib.reshape((n, geom.groups * geom.ci) + geom.resp)
    return buf[inner]


def wcorr(image5, resp5, geom):
    """w[g, r, i, k] = sum_{n, o} response[n, g, r, o] * image[n, g, i, o*s - p + k*d] -> (G*Cr, Ci, *k)."""
    buf, inner = _padded(image5, geom)
    buf[inner] = image5
    n = image5.shape[0]
    rg = resp5.reshape((n, geom.groups, geom.cr) + geom.resp)
    out = np.zeros((geom.groups, geom.cr, geom.ci) + geom.kernel)
    for kk, sl in _windows(_sizes(geom), buf.shape):
        win = buf[sl].reshape((n, geom.groups, geom.ci) + geom.resp)
        out[(...,) + kk] = np.einsum("ngixyz,ngrxyz->gri", win, rg)
    return out.reshape((geom.groups * geom.cr, geom.ci) + geom.kernel)


def _logical(a, shape):
    """A (N, C, *spatial) result of 5-d work back to the op's rank."""
    return a.reshape(shape)


def _convolution(desc, x, w, b=None):
    geom = geometry_of(desc)
    x5, w5 = _as5(x), _as5(w)
    y = scatter(x5, w5, geom) if geom.transposed else corr(x5, w5, geom)
    y = _logical(y, geom.y_shape)
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * (y.ndim - 2))
    return np.moveaxis(y, 1, -1) if geom.channels_last else y


def _convolution_backward(desc, g, x, w):
    geom = geometry_of(desc)
    if geom.channels_last:
        g = np.moveaxis(g, -1, 1)
    g5, x5, w5 = _as5(g), _as5(x), _as5(w)
    need_x, need_w = desc.attr("output_mask")
    out = []
    if need_x:
        dx = corr(g5, w5, geom) if geom.transposed else scatter(g5, w5, geom)
        out.append(dx.reshape(x.shape))
    if need_w:
        image, resp = (g5, x5) if geom.transposed else (x5, g5)
        out.append(wcorr(image, resp, geom).reshape(w.shape))
    return tuple(out) if len(out) > 1 else out[0]


def _im2col(desc, x):
    """(N, C, H, W) -> (N, C * prod(k), L): column (c, k) holds the image value window l reads at offset k."""
    geom = fold_geometry(desc)
    x4 = x.reshape((geom.n, geom.c) + geom.image)
    buf = np.zeros((geom.n, geom.c) + geom.padded, dtype=x.dtype)
    buf[(slice(None), slice(None)) + tuple(slice(p, p + i) for p, i in zip(geom.pad, geom.image))] = x4
    cols = [buf[sl] for _, sl in _windows((geom.blocks, geom.kernel, geom.stride, geom.dilation), buf.shape)]
    out = np.stack(cols, axis=2)          # (N, C, K, *blocks)
    return out.reshape(desc.outputs[0].shape)


def _col2im(desc, cols):
    """The adjoint of im2col: every column value added into the image position it was read from."""
    geom = fold_geometry(desc)
    k = int(np.prod(geom.kernel))
    c5 = cols.reshape((geom.n, geom.c, k) + geom.blocks)
    buf = np.zeros((geom.n, geom.c) + geom.padded)
    for j, (_, sl) in enumerate(_windows((geom.blocks, geom.kernel, geom.stride, geom.dilation), buf.shape)):
        buf[sl] += c5[:, :, j]
    img = buf[(slice(None), slice(None)) + tuple(slice(p, p + i) for p, i in zip(geom.pad, geom.image))]
    return img.reshape(desc.outputs[0].shape)


register_reference("convolution", exact_ints(_convolution))
register_reference("convolution_backward", _convolution_backward)
register_reference("im2col", _im2col)
register_reference("col2im", _col2im)
