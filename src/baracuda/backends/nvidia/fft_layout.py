"""What the GPU FFT backends share (cufft.py, fft_gemm.py): one ``fft_nd`` (ops/fft.py) as layout + an executor.

An executor computes the unnormalized transform of a contiguous tensor over its LAST k axes:
``execute(kind, buf, k, forward, s, owned) -> result`` (c2c: complex -> complex, in place on ``buf`` when ``owned``
(buf is a temporary of ours); r2c: real
-> the half spectrum; c2r: the half spectrum -> real of length s[-1]), with the transform's own sign convention
(c2r always +, r2c always -).  Everything else is done here, in at most one pass before and one after:

* before: the transform axes moved last in ``dim``'s order, the input zero-padded / cut to the signal sizes,
  promoted to complex for c2c, conjugated for hfft's c2r and its halved bins weighted for a halved c2r -- one copy
  into a contiguous buffer (none when the input already is that buffer: ``direct``);
* after: ``scale`` (1, 1/sqrt(n), 1/n), ihfft's conjugate and the output's resize and layout in one elementwise
  pass into the output (``torch.mul(..., out=view)``), then the doubled bins of a weighted r2c (a slice's mul_).
  nvmath.fft has no normalization option; a cuFFT store callback could fuse the scale (nvmath's epilog needs
  LTO-IR callbacks compiled with numba-cuda): not done, the scale costs one read + write of the output when it is
  not 1 and the output was produced in place.

The glue (copies, the scale) are torch's own elementwise kernels on torch's current stream; the transforms are the
executor's (cuFFT through nvmath, or GEMMs).
"""
from __future__ import annotations

import functools

from ...ops.fft import FftParams, in_sizes, natural_out, params, scale_factor

__all__ = ["transform", "direct", "make_run"]


def _perm(p: FftParams, rank: int) -> list[int]:
    return [d for d in range(rank) if d not in p.dim] + list(p.dim)


def _common(a, b) -> tuple:
    return tuple(slice(0, min(m, n)) for m, n in zip(a, b))


def _prepare(p: FftParams, x):
    """The contiguous executor input: transform axes last (in dim's order), resized, complex for c2c / c2r."""
    import torch

    k = len(p.dim)
    xin = x.permute(_perm(p, x.dim()))
    batch = tuple(xin.shape[:x.dim() - k])
    sizes = in_sizes(p.kind, p.s)
    dt = x.dtype
    if p.kind != "r2c" and not dt.is_complex:
        dt = torch.complex64 if dt == torch.float32 else torch.complex128
    if p.kind == "c2r" and p.forward:
        xin = xin.conj()
    if (tuple(xin.shape[-k:]) == sizes and xin.is_contiguous() and xin.dtype == dt and not xin.is_conj()
            and not p.halved):
        return xin, False       # (the caller's tensor: the executor must not write it)
    buf = (torch.zeros if tuple(xin.shape[-k:]) != sizes else torch.empty)(batch + sizes, dtype=dt, device=x.device)
    idx = (Ellipsis,) + _common(xin.shape[-k:], sizes)
    if p.halved:    # the copy weights the halved bins (a [bins] weight row broadcast over the rest)
        n = p.s[-1]
        w = _halving(sizes[-1], n, x.real.dtype if x.is_complex() else x.dtype, x.device)
        torch.mul(xin[idx], w[: idx[-1].stop], out=buf[idx])
        _hermitian_edges(buf, k, n)
    else:
        buf[idx].copy_(xin[idx])
    return buf, True


@functools.lru_cache(maxsize=64)
def _halving(bins: int, n: int, dtype, device):
    """The halved c2r's bin weights: 1/2 on bins 1 .. n - n//2 - 1, 1 elsewhere (a [bins] row, built once per size,
    dtype and device; only read)."""
    import torch

    w = torch.ones(bins, dtype=dtype, device=device)
    w[1:n - n // 2] = 0.5
    return w


def _hermitian_edges(buf, k: int, n: int) -> None:
    """The last axis' bins 0 and n/2 (n even) of ``buf`` made Hermitian along the other k - 1 transform axes:
    c = (c + conj(c at -index)) / 2.  fft_nd's c2r ignores those bins' imaginary parts after the leading axes'
    transform (numpy's irfftn: C2C on the leading axes, then C2R on the last), which a halved c2r (rfft's gradient:
    Re(IDFT of the padded half spectrum)) needs exactly; cuFFT's multi-axis C2R assumes Hermitian input and gives
    another answer for these bins otherwise (session 7: rfft2's gradient 6e-2 off torch's on the H100).  On
    Hermitian bins the two agree, and the symmetrized bins are what the decomposed transform reads."""
    import torch

    lead = tuple(range(buf.dim() - k, buf.dim() - 1))
    for j in (0, n // 2) if n % 2 == 0 else (0,):
        if j >= buf.shape[-1]:
            continue
        col = buf[..., j]
        rev = torch.roll(torch.flip(col, lead), (1,) * len(lead), lead) if lead else col
        col.copy_((col + rev.conj()) * 0.5)


def _finish(p: FftParams, res, out) -> None:
    """res (batch + natural sizes) -> out (any layout, p.out along dim): scale, ihfft's conj, resize, layout."""
    import torch

    k = len(p.dim)
    view = out.permute(_perm(p, out.dim()))
    if tuple(view.shape[-k:]) != tuple(res.shape[-k:]):
        view.zero_()
    idx = (Ellipsis,) + _common(res.shape[-k:], view.shape[-k:])
    src = res[idx]
    if p.kind == "r2c" and not p.forward:
        src = src.conj()
    torch.mul(src, scale_factor(p), out=view[idx])
    _double(p, view)


def _double(p: FftParams, view) -> None:
    """A weighted r2c's bins 1 .. n - n//2 - 1 of the last axis, times 2 (view: transform axes last)."""
    if p.doubled:
        n = p.s[-1]
        m = min(n - n // 2 - 1, view.shape[-1] - 1)
        if m > 0:
            view.narrow(-1, 1, m).mul_(2)


def transform(p: FftParams, x, out, execute) -> None:
    """fft_nd of ``x`` into ``out`` through ``execute`` (module docstring)."""
    if out.numel() == 0:
        return
    if x.numel() == 0:
        out.zero_()
        return
    buf, owned = _prepare(p, x)
    res = execute(p.kind, buf, len(p.dim), p.forward, p.s, owned)
    _finish(p, res, out)


def direct(p: FftParams, x, execute):
    """The transform's result as a fresh contiguous tensor, computed from ``x`` itself (no input copy) when ``x`` is
    contiguous, its transform axes are its last ones in order, nothing is padded / cut and nothing conjugated in;
    None otherwise.  The epilogue then runs in place on the executor's result."""
    k, r = len(p.dim), x.dim()
    if (p.dim != tuple(range(r - k, r)) or not x.is_contiguous() or x.is_conj() or x.numel() == 0
            or tuple(x.shape[-k:]) != in_sizes(p.kind, p.s) or tuple(p.out) != natural_out(p.kind, p.s)
            or (p.kind == "c2r" and (p.forward or p.halved or not x.dtype.is_complex))
            or (p.kind == "c2c" and not x.is_complex())):
        return None
    res = execute(p.kind, x, k, p.forward, p.s, False)
    f = scale_factor(p)
    if f != 1.0:
        res.mul_(f)
    if p.kind == "r2c" and not p.forward:
        res = res.conj_physical_()
    _double(p, res)
    return res


def make_run(execute):
    """Impl.run (and run.produce: the fresh-result path of ``direct`` when the plan owns the outputs) over an
    executor, for every FFT descriptor."""
    def run(desc, inputs, outputs, ws):
        transform(params(desc), inputs[0], outputs[0], execute)

    def produce_for(desc):
        import torch

        p, o = params(desc), desc.outputs[0]

        def produce(xs):
            res = direct(p, xs[0], execute)
            if res is None:
                res = torch.empty(o.shape, dtype=o.dtype.torch, device=xs[0].device)
                transform(p, xs[0], res, execute)
            return [res]
        return produce

    def bind(desc, pref=None):
        def bound(d, inputs, outputs, ws):
            transform(params(d), inputs[0], outputs[0], execute)
        bound.produce = produce_for(desc)
        return bound
    return run, bind
