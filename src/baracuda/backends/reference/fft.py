"""NumPy float64 / complex128 bodies of the FFT family (the oracle): every transform is ``fft_nd`` (ops/fft.py)
computed with ``numpy.fft`` (pocketfft) unnormalized, then scaled, weighted and resized once."""
from __future__ import annotations

import numpy as np

from ...ops.fft import FORMS, FftParams, in_sizes, params, scale_factor
from ...ops.fft_shift import freq_terms, shift_amounts
from ..._core.errors import InvalidProblemError
from ...ops.fft_stft import istft_layout, stft_layout
from . import register_reference


def resize(x: np.ndarray, dims, sizes) -> np.ndarray:
    """``x`` zero-padded at the end or cut to ``sizes`` along ``dims`` (torch's n / s)."""
    idx = [slice(None)] * x.ndim
    pad = [(0, 0)] * x.ndim
    for d, n in zip(dims, sizes):
        idx[d] = slice(0, min(n, x.shape[d]))
        pad[d] = (0, max(0, n - x.shape[d]))
    return np.pad(x[tuple(idx)], pad)


def fft_nd(p: FftParams, x: np.ndarray) -> np.ndarray:
    x = resize(x, p.dim, in_sizes(p.kind, p.s))
    if x.size == 0:   # an empty batch (the transform sizes are positive): numpy.fft refuses no points
        shape = list(x.shape)
        for d, n in zip(p.dim, p.out):
            shape[d] = n
        return np.zeros(shape, np.float64 if p.kind == "c2r" else np.complex128)
    if p.kind == "c2c":
        # numpy's unnormalized inverse: norm="forward" puts the 1/n on the forward transform
        y = np.fft.fftn(x, axes=p.dim) if p.forward else np.fft.ifftn(x, axes=p.dim, norm="forward")
    elif p.kind == "r2c":
        y = np.fft.rfftn(np.real(x), axes=p.dim)
        y = y if p.forward else np.conj(y)
        if p.doubled:
            n, ax = p.s[-1], p.dim[-1]
            w = np.ones(y.shape[ax])
            w[1:n - n // 2] = 2.0
            y = y * w.reshape((-1,) + (1,) * (y.ndim - 1 - ax))
    else:
        x = x.astype(np.complex128)
        if p.halved:
            n, ax = p.s[-1], p.dim[-1]
            w = np.ones(x.shape[ax])
            w[1:n - n // 2] = 0.5
            x = x * w.reshape((-1,) + (1,) * (x.ndim - 1 - ax))
        y = np.fft.irfftn(np.conj(x) if p.forward else x, s=p.s, axes=p.dim, norm="forward")
    return resize(y * scale_factor(p), p.dim, p.out)


def _body(desc, x):
    return fft_nd(params(desc), x)


for _name in (*FORMS, "fft_nd"):
    register_reference(_name, _body)


# -- shifts and sample frequencies ---------------------------------------------------------------------------------
def _shift(desc, x):
    shifts, dims = shift_amounts(desc)
    return np.roll(x, shifts, dims) if dims else x.copy()


def _freq(desc):
    n, wrap, scale = freq_terms(desc)
    k = np.arange(n, dtype=np.float64)
    return np.where(k >= wrap, k - desc.attr("n"), k) * scale


register_reference("fftshift", _shift)
register_reference("ifftshift", _shift)
register_reference("fftfreq", _freq)
register_reference("rfftfreq", _freq)


# -- stft -------------------------------------------------------------------------------------------------------------
_NP_PAD = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def stft_frames(lay, x: np.ndarray, mode: str) -> np.ndarray:
    """The (B, n_fft, T) frames of the centre-padded signal."""
    x = x.reshape(lay.batch, lay.length)
    if lay.pad:
        x = np.pad(x, ((0, 0), (lay.pad, lay.pad)), mode=_NP_PAD[mode])
    idx = np.arange(lay.n_fft)[:, None] + lay.hop * np.arange(lay.frames)[None, :]
    return x[:, idx]


def _stft(desc, x, window=None):
    lay = stft_layout(desc)
    frames = stft_frames(lay, x, desc.attr("pad_mode"))
    if window is not None:
        w = np.zeros(lay.n_fft)
        w[lay.left:lay.left + lay.win] = window
        frames = frames * w[:, None]
    return fft_nd(lay.fft, frames).reshape(desc.outputs[0].shape)


register_reference("stft", _stft)


# -- istft ------------------------------------------------------------------------------------------------------------
def overlap_add(frames: np.ndarray, hop: int, length: int) -> np.ndarray:
    """(B, n_fft, T) frames summed into (B, length) at offsets t * hop."""
    b, n, t = frames.shape
    out = np.zeros((b, length), frames.dtype)
    for k in range(t):
        out[:, k * hop:k * hop + n] += frames[:, :, k]
    return out


def istft_envelope(lay, window) -> np.ndarray:
    """The overlap-added squared window over the covered output samples; NOLA checked as torch (min |.| >= 1e-11)."""
    w = np.zeros(lay.n_fft)
    w[lay.left:lay.left + lay.win] = 1.0 if window is None else window
    env = overlap_add(np.broadcast_to((w * w)[None, :, None], (1, lay.n_fft, lay.frames)), lay.hop, lay.expected)
    env = env[0, lay.start:lay.start + lay.valid]
    if env.size and np.abs(env).min() < 1e-11:
        raise InvalidProblemError("istft", "window", "a window whose overlap-added square is nonzero on the output "
                                  "(the NOLA condition; torch: 'window overlap add min')", f"{np.abs(env).min():g}")
    return w, env


def _istft(desc, x, window=None):
    lay = istft_layout(desc)
    w, env = istft_envelope(lay, window)
    frames = fft_nd(lay.fft, x.reshape(lay.batch, lay.bins, lay.frames)) * w[:, None]
    y = overlap_add(frames, lay.hop, lay.expected)[:, lay.start:lay.start + lay.valid] / env
    y = np.pad(y, ((0, 0), (0, lay.end - lay.start - lay.valid)))
    return y.reshape(desc.outputs[0].shape)


register_reference("istft", _istft)
