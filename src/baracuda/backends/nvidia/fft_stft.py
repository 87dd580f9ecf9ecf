"""stft on the GPU FFT executors (cufft.py, fft_gemm.py): the frames are a strided view of the centre-padded signal
(torch's pad and unfold: layout glue on torch's stream), the window multiply materializes them (B, n_fft, T), and
fft_layout's ``transform`` runs fft_nd over the n_fft axis straight into the (B, F, T) output."""
from __future__ import annotations

from ..._core.registry import Impl, register
from ..._core.sku import Backend
from ...ops.fft_stft import stft_layout
from . import cufft, fft_gemm
from .fft_layout import transform

__all__ = ["frames_of"]

_TORCH_MODE = {"reflect": "reflect", "constant": "constant", "replicate": "replicate", "circular": "circular"}


def frames_of(desc, x, window):
    """The (B, n_fft, T) windowed frames of ``x`` (a view when there is no window)."""
    import torch
    import torch.nn.functional as F

    lay = stft_layout(desc)
    x = x.reshape(lay.batch, 1, lay.length)
    if lay.pad:
        x = F.pad(x, (lay.pad, lay.pad), mode=_TORCH_MODE[desc.attr("pad_mode")])
    frames = x.reshape(lay.batch, lay.padded).unfold(-1, lay.n_fft, lay.hop).transpose(-1, -2)
    if window is None:
        return frames
    w = torch.zeros(lay.n_fft, dtype=window.dtype, device=window.device)
    w[lay.left:lay.left + lay.win] = window
    return frames * w[:, None]


def _run_of(execute):
    def run(desc, inputs, outputs, ws):
        lay = stft_layout(desc)
        out = outputs[0]
        out3 = out.unsqueeze(0) if out.dim() == 2 else out
        transform(lay.fft, frames_of(desc, inputs[0], inputs[1] if len(inputs) > 1 else None), out3, execute)
    return run


def _gemm_supports(desc):
    return fft_gemm.refusal(stft_layout(desc).fft)


for _backend, _mod, _prio, _supports in ((Backend.CUFFT, cufft, 10.0, None),
                                          (Backend.CUBLAS, fft_gemm, -10.0, _gemm_supports)):
    register(Impl(op="stft", backend=_backend, run=_run_of(_mod.execute), precision=_mod._precision,
                  supports=_supports, devices=frozenset({"cuda"}), priority=_prio,
                  route=lambda d, p=None, _b=_backend: f"{_b}: frames (torch pad/unfold) + fft_nd", array_api="torch"))
