"""stft / istft on the GPU FFT executors (cufft.py, fft_gemm.py).

stft: the frames are a strided view of the centre-padded signal (torch's pad and unfold: layout glue on torch's
stream), the window multiply materializes them (B, n_fft, T), and fft_layout's ``transform`` runs fft_nd over the
n_fft axis straight into the (B, F, T) output.  istft: ``transform`` (c2r) into (B, n_fft, T) frames, the window
multiply, the overlap-add and the envelope (torch's fold: glue), the division.  torch's NOLA check (the envelope's
minimum >= 1e-11) reads one value back to the host, as torch's does: istft plans are not capturable."""
from __future__ import annotations

from ..._core.registry import Impl, register
from ..._core.sku import Backend
from ..._core.errors import InvalidProblemError
from ...ops.fft_stft import istft_layout, stft_layout
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


def _window(lay, window, like):
    import torch

    w = torch.zeros(lay.n_fft, dtype=like.real.dtype if like.is_complex() else like.dtype, device=like.device)
    w[lay.left:lay.left + lay.win] = 1.0 if window is None else window
    return w


def _istft_run_of(execute):
    def run(desc, inputs, outputs, ws):
        import torch
        import torch.nn.functional as F

        lay = istft_layout(desc)
        x = inputs[0].reshape(lay.batch, lay.bins, lay.frames)
        frames = torch.empty((lay.batch, lay.n_fft, lay.frames), dtype=outputs[0].dtype, device=x.device)
        transform(lay.fft, x, frames, execute)
        w = _window(lay, inputs[1] if len(inputs) > 1 else None, frames)
        fold = dict(output_size=(1, lay.expected), kernel_size=(1, lay.n_fft), stride=(1, lay.hop))
        y = F.fold(frames * w[:, None], **fold).reshape(lay.batch, lay.expected)
        env = F.fold((w * w)[None, :, None].expand(1, lay.n_fft, lay.frames), **fold).reshape(lay.expected)
        cut = slice(lay.start, lay.start + lay.valid)
        low = env[cut].abs().min().item() if lay.valid else 1.0
        if low < 1e-11:
            raise InvalidProblemError("istft", "window", "a window whose overlap-added square is nonzero on the "
                                      "output (the NOLA condition; torch: 'window overlap add min')", f"{low:g}")
        out = outputs[0].reshape(lay.batch, -1)
        if out.shape[-1] > lay.valid:
            out[:, lay.valid:].zero_()
        torch.div(y[:, cut], env[cut], out=out[:, :lay.valid])
    return run


def _gemm_supports(desc):
    lay = (stft_layout if desc.op == "stft" else istft_layout)(desc)
    return fft_gemm.refusal(lay.fft)


for _backend, _mod, _prio, _supports in ((Backend.CUFFT, cufft, 10.0, None),
                                          (Backend.CUBLAS, fft_gemm, -10.0, _gemm_supports)):
    for _op, _run, _capturable in (("stft", _run_of(_mod.execute), True),
                                   ("istft", _istft_run_of(_mod.execute), False)):
        register(Impl(op=_op, backend=_backend, run=_run, precision=_mod._precision, supports=_supports,
                      devices=frozenset({"cuda"}), priority=_prio, capturable=_capturable, array_api="torch",
                      route=lambda d, p=None, _b=_backend: f"{_b}: fft_nd + frames / overlap-add (torch glue)"))
