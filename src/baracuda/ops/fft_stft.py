"""torch.stft (issue 19): frames of the (padded) signal times the window, then ``fft_nd`` over each frame.

stft(input, window?; n_fft, hop_length, win_length, center, pad_mode, normalized, onesided):
* input: real (L,) or (B, L), f32 / f64; window: None (rectangular) or a (win_length,) tensor of input's dtype,
  placed in the middle of the n_fft frame (offset (n_fft - win_length) // 2), as torch;
* center: the signal padded by n_fft // 2 on both sides with ``pad_mode`` (reflect, constant, replicate, circular);
* frame t = padded[t * hop : t * hop + n_fft], T = 1 + (L_padded - n_fft) // hop frames;
* the transform: fft_nd over the n_fft axis of the (B, n_fft, T) frames -- r2c when onesided (the default for a real
  input), c2c else; normalized: times n_fft^-1/2 (scale sqrt_n) -- so the output (B?, F, T) needs no transpose.
* return_complex: True (torch 2.13 requires it to be given for a real input: None raises torch's error); False gives
  torch's deprecated real view (view_as_real of the complex result, with torch's warning) in the drop-in.
Complex inputs (torch accepts them, two-sided) are refused: the gradient's overlap-add (col2im) and pad adjoints are
real-only ops here.

Backward (a rule over other ops): the frames' gradient is fft_nd's adjoint (ops/fft.py: fft_grad), times the window,
overlap-added by col2im (kernel (1, n_fft), stride (1, hop)), then the adjoint of the centre padding (pad's own rule:
a crop, or pad_backward for the reflecting modes); the window's gradient sums frames(x) * that frame gradient over
batch and frames (im2col of the padded signal), cut to win_length.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from dataclasses import dataclass

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import float_operands
from .fft import REAL_DTYPES, FftParams, complex_of, fft_grad

__all__ = ["StftLayout", "stft_layout", "IstftLayout", "istft_layout"]

PAD_MODES = ("reflect", "constant", "replicate", "circular")


@dataclass(frozen=True)
class StftLayout:
    batch: int
    length: int          # L
    pad: int             # the centre padding on each side (0 without center)
    padded: int          # L + 2 pad
    n_fft: int
    hop: int
    win: int
    left: int            # the window's offset in the frame
    frames: int          # T
    fft: FftParams       # over dim 1 of the (B, n_fft, T) frames

    @property
    def frames_shape(self) -> tuple:
        return (self.batch, self.n_fft, self.frames)


def _layout(op, x: TensorSpec, a: dict) -> StftLayout:
    if len(x.shape) not in (1, 2):
        raise InvalidProblemError(op, "input", "a 1-D (L,) or 2-D (B, L) signal", f"shape {x.shape}")
    n_fft, L = a["n_fft"], x.shape[-1]
    hop = a["hop_length"] if a["hop_length"] is not None else n_fft // 4
    win = a["win_length"] if a["win_length"] is not None else n_fft
    if hop < 1:
        raise InvalidProblemError(op, "hop_length", "a positive int", hop)
    if not 0 < win <= n_fft:
        raise InvalidProblemError(op, "win_length", f"an int in [1, n_fft={n_fft}]", win)
    pad = n_fft // 2 if a["center"] else 0
    if pad and a["pad_mode"] == "reflect" and pad >= L:
        raise InvalidProblemError(op, "input", f"a signal longer than the reflect padding {pad}", L)
    padded = L + 2 * pad
    if n_fft > padded:
        raise InvalidProblemError(op, "n_fft", f"an int in [1, {padded}] (the padded signal's length)", n_fft)
    onesided = True if a["onesided"] is None else a["onesided"]
    p = FftParams("r2c" if onesided else "c2c", (1,), (n_fft,), (n_fft // 2 + 1 if onesided else n_fft,),
                  "sqrt_n" if a["normalized"] else "none", True)
    return StftLayout(x.shape[0] if len(x.shape) == 2 else 1, L, pad, padded, n_fft, hop, win, (n_fft - win) // 2,
                      1 + (padded - n_fft) // hop, p)


@functools.lru_cache(maxsize=1024)
def stft_layout(desc) -> StftLayout:
    return _layout(desc.op, desc.inputs[0], desc.attr_dict)


def _check(inputs, attrs):
    op = "stft"
    if len(inputs) not in (1, 2):
        raise InvalidProblemError(op, "inputs", "input and an optional window", len(inputs))
    x = inputs[0]
    if x.dtype not in REAL_DTYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; supported: f32, f64 (a complex signal's "
                                   "gradient would need complex overlap-add / pad adjoints: not here)")
    lay = _layout(op, x, attrs)
    if len(inputs) == 2:
        w = inputs[1]
        if w.dtype != x.dtype:
            raise DTypeMismatchError(op, "window", str(x.dtype), str(w.dtype))
        if w.shape != (lay.win,):
            raise InvalidProblemError(op, "window", f"a 1-D window of win_length={lay.win} values", f"shape {w.shape}")
    out = lay.fft.out + (lay.frames,)
    return attrs, (TensorSpec(tuple(x.shape[:-1]) + out, complex_of(x.dtype)),)


def _pad_attrs(lay: StftLayout, mode: str) -> dict:
    return {"pad": (lay.pad, lay.pad), "mode": mode}


def _grad(ctx, d, grads, s):
    g = grads[0]
    if g is None:
        return (None,) * len(d.inputs)
    lay, x = stft_layout(d), d.inputs[0]
    B, n, T, dt = lay.batch, lay.n_fft, lay.frames, x.dtype
    g = ctx.reshape(g, (B,) + lay.fft.out + (T,))
    gf = fft_grad(ctx, lay.fft, TensorSpec(lay.frames_shape, dt), g)          # (B, n_fft, T), real
    w = None
    if len(d.inputs) == 2:
        w = ctx.op("pad", s["window"], pad=(lay.left, n - lay.win - lay.left))     # (n_fft,)
    window = dict(kernel_size=(1, n), stride=(1, lay.hop))
    gx = None
    if ctx.needs[0]:
        gw = gf if w is None else ctx.op("mul", gf, ctx.reshape(w, (n, 1)))
        gp = ctx.op("col2im", gw, output_size=(1, lay.padded), **window)        # (B, 1, 1, padded): overlap-add
        gp = ctx.reshape(gp, (B, 1, lay.padded))
        if lay.pad:
            mode = d.attr("pad_mode")
            gp = (ctx.op("pad", gp, pad=(-lay.pad, -lay.pad), mode="constant") if mode == "constant" else
                  ctx.op("pad_backward", gp, pad=(lay.pad, lay.pad), mode=mode, shape=(B, 1, lay.length)))
        gx = ctx.reshape(gp, x.shape)
    gwin = None
    if w is not None and ctx.needs[1]:
        xp = ctx.reshape(s["input"], (B, 1, lay.length))
        if lay.pad:
            xp = ctx.op("pad", xp, **_pad_attrs(lay, d.attr("pad_mode")))
        frames = ctx.op("im2col", ctx.reshape(xp, (B, 1, 1, lay.padded)), **window)   # (B, n_fft, T)
        gfull = ctx.op("sum", ctx.op("mul", frames, gf), dims=(0, 2))
        gwin = ctx.op("pad", gfull, pad=(-lay.left, -(n - lay.win - lay.left)))
    return (gx, gwin) if len(d.inputs) == 2 else (gx,)


def _peer(x, window=None, **a):
    import torch

    return torch.stft(x, a["n_fft"], a["hop_length"], a["win_length"], window, a["center"], a["pad_mode"],
                      a["normalized"], a["onesided"], return_complex=True)


def _dropin(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
            normalized=False, onesided=None, return_complex=None):
    import warnings

    import torch

    finish = None
    if return_complex is None:
        if not input.is_complex():
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                               "require that return_complex=True in a future PyTorch release.")
    elif not return_complex:
        warnings.warn("stft with return_complex=False is deprecated (torch's warning): the real view of the complex "
                      "result is returned", UserWarning, stacklevel=3)
        finish = torch.view_as_real
    (x,) = float_operands(input)
    ops = (x,) if window is None else (x, window)
    return ops, {"n_fft": n_fft, "hop_length": hop_length, "win_length": win_length, "center": center,
                 "pad_mode": pad_mode, "normalized": normalized, "onesided": onesided}, finish


def _samples(rng):
    n = rng.standard_normal
    yield Sample((n((20,)),), {"n_fft": 8, "hop_length": 3}, name="1d-reflect")
    yield Sample((n((2, 17)), n((6,))), {"n_fft": 8, "win_length": 6, "hop_length": 4, "pad_mode": "constant",
                                         "normalized": True}, name="2d-window")
    yield Sample((n((1, 12)), n((5,))), {"n_fft": 5, "hop_length": 2, "center": False, "onesided": False},
                 name="two-sided-no-center")
    yield Sample((n((2, 16)),), {"n_fft": 6, "pad_mode": "replicate"}, name="replicate-default-hop")


def _errors():
    f = ((2, 20), "f32")
    yield ErrorCase((((20,), "c64"),), {"n_fft": 8}, UnsupportedError, r"stft: argument 'input' has dtype c64", "cplx")
    yield ErrorCase((((2, 3, 20), "f32"),), {"n_fft": 8}, InvalidProblemError, r"argument 'input': expected a 1-D",
                    "rank")
    yield ErrorCase((f,), {"n_fft": 30, "center": False}, InvalidProblemError, r"argument 'n_fft': expected an int in",
                    "long")
    yield ErrorCase((f,), {"n_fft": 8, "win_length": 9}, InvalidProblemError, r"argument 'win_length'", "win")
    yield ErrorCase((f, ((7,), "f32")), {"n_fft": 8}, InvalidProblemError, r"argument 'window': expected a 1-D window",
                    "window-len")
    yield ErrorCase((f, ((8,), "f64")), {"n_fft": 8}, DTypeMismatchError, r"argument 'window'", "window-dtype")
    yield ErrorCase((f,), {"n_fft": 8, "pad_mode": "wrap"}, InvalidProblemError, r"argument 'pad_mode'", "mode")
    yield ErrorCase((((2, 3), "f32"),), {"n_fft": 8}, InvalidProblemError, r"longer than the reflect padding", "short")


def _cost(desc):
    """(bytes, flops): the signal and window read, the spectrum written; 5 n log2 n (half for r2c) per frame."""
    lay = stft_layout(desc)
    n = lay.n_fft
    flops = 5 * n * max(1.0, math.log2(n)) * lay.batch * lay.frames * (0.5 if lay.fft.kind == "r2c" else 1.0)
    return sum(t.nbytes for t in desc.inputs) + desc.outputs[0].nbytes, int(flops)


register_spec(OpSpec(
    name="stft", family="fft", arg_names=("input", "window"), check=_check, dtypes=REAL_DTYPES,
    attrs=(Attr("n_fft", "int", ge=1), Attr("hop_length", "int", None, optional=True),
           Attr("win_length", "int", None, optional=True), Attr("center", "bool", True),
           Attr("pad_mode", "str", "reflect", choices=PAD_MODES), Attr("normalized", "bool", False),
           Attr("onesided", "bool", None, optional=True)),
    torch_peer=_peer, torch_name="torch.stft", dropin=_dropin, grad=_grad, saves=("inputs",),
    differentiable=(0, 1), samples=_samples, errors=_errors, category="fft", cost=_cost,
    tol=lambda dt: (1e-5, 2e-5) if dt == DType.f32 else (1e-10, 1e-10),
    workloads=(Workload("stft-[16,2^20]-n1024-h256-f32", ((16, 1 << 20), (1024,)), DType.f32,
                        {"n_fft": 1024, "hop_length": 256}, backward=True),),
    doc="torch.stft (return_complex=True; see ops/fft_stft.py): frames x window, then fft_nd over each frame."))


# -- istft -------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IstftLayout:
    batch: int
    bins: int            # F
    frames: int          # T
    n_fft: int
    hop: int
    win: int
    left: int
    expected: int        # n_fft + hop (T - 1): the overlap-added length
    start: int           # n_fft // 2 with center, else 0
    end: int             # start + length, else expected - start (center) / expected
    fft: FftParams       # c2r over dim 1 of the (B, F, T) spectrum -> (B, n_fft, T) frames

    @property
    def valid(self) -> int:
        """The output samples the overlap-add covers (the rest of a longer ``length`` is zeros, as torch)."""
        return max(0, min(self.end, self.expected) - self.start)


def _istft_layout(op, x: TensorSpec, a: dict) -> IstftLayout:
    if len(x.shape) not in (2, 3):
        raise InvalidProblemError(op, "input", "a 2-D (F, T) or 3-D (B, F, T) spectrum", f"shape {x.shape}")
    n_fft, (F, T) = a["n_fft"], x.shape[-2:]
    hop = a["hop_length"] if a["hop_length"] is not None else n_fft // 4
    win = a["win_length"] if a["win_length"] is not None else n_fft
    if hop < 1 or hop > win:
        raise InvalidProblemError(op, "hop_length", f"an int in [1, win_length={win}]", hop)
    if not 0 < win <= n_fft:
        raise InvalidProblemError(op, "win_length", f"an int in [1, n_fft={n_fft}]", win)
    onesided = a["onesided"] if a["onesided"] is not None else F != n_fft
    if F != (n_fft // 2 + 1 if onesided else n_fft):
        raise InvalidProblemError(op, "input", f"{n_fft // 2 + 1 if onesided else n_fft} frequency bins (n_fft="
                                  f"{n_fft}, onesided={onesided})", F)
    if T < 1:
        raise InvalidProblemError(op, "input", "at least one frame", T)
    expected = n_fft + hop * (T - 1)
    start = n_fft // 2 if a["center"] else 0
    end = start + a["length"] if a["length"] is not None else expected - start if a["center"] else expected
    p = FftParams("c2r", (1,), (n_fft,), (n_fft,), "sqrt_n" if a["normalized"] else "n", False)
    return IstftLayout(x.shape[0] if len(x.shape) == 3 else 1, F, T, n_fft, hop, win, (n_fft - win) // 2, expected,
                       start, end, p)


@functools.lru_cache(maxsize=1024)
def istft_layout(desc) -> IstftLayout:
    return _istft_layout(desc.op, desc.inputs[0], desc.attr_dict)


def _check_istft(inputs, attrs):
    op = "istft"
    if len(inputs) not in (1, 2):
        raise InvalidProblemError(op, "inputs", "input and an optional window", len(inputs))
    x = inputs[0]
    if x.dtype not in (DType.c64, DType.c128):
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; istft takes the complex spectrum stft "
                                   "returns (c64, c128)")
    lay = _istft_layout(op, x, attrs)
    real = {DType.c64: DType.f32, DType.c128: DType.f64}[x.dtype]
    if len(inputs) == 2:
        w = inputs[1]
        if w.dtype.is_complex:   # (torch's error: a complex window makes a complex signal)
            raise UnsupportedError(op, f"argument 'window' has dtype {w.dtype}: complex windows are incompatible "
                                       "with return_complex=False")
        if w.dtype != real:
            raise DTypeMismatchError(op, "window", str(real), str(w.dtype))
        if w.shape != (lay.win,):
            raise InvalidProblemError(op, "window", f"a 1-D window of win_length={lay.win} values", f"shape {w.shape}")
    n = max(0, lay.end - lay.start)
    return attrs, (TensorSpec(tuple(x.shape[:-2]) + (n,), real),)


def _full_window(ctx, d, lay, s, dt):
    """The (n_fft,) window: the given one (or ones) zero-padded in the middle of the frame."""
    w = s["window"] if len(d.inputs) == 2 else ctx.op("full", shape=(lay.win,), value=1.0, dtype=dt)
    return ctx.op("pad", w, pad=(lay.left, lay.n_fft - lay.win - lay.left))


def _istft_grad(ctx, d, grads, s):
    g = grads[0]
    if g is None:
        return (None,) * len(d.inputs)
    lay, x = istft_layout(d), d.inputs[0]
    B, n, T, m = lay.batch, lay.n_fft, lay.frames, lay.valid
    dt = d.outputs[0].dtype
    window = dict(kernel_size=(1, n), stride=(1, lay.hop))
    w = _full_window(ctx, d, lay, s, dt)
    wcol = ctx.reshape(w, (n, 1))
    ones = ctx.op("full", shape=(1, 1, T), value=1.0, dtype=dt)
    env = ctx.op("col2im", ctx.op("mul", ctx.op("mul", wcol, wcol), ones), output_size=(1, lay.expected), **window)
    env = ctx.op("pad", ctx.reshape(env, (1, lay.expected)), pad=(-lay.start, m + lay.start - lay.expected))
    n_out = d.outputs[0].shape[-1]
    gv = ctx.op("pad", ctx.reshape(g, (B, n_out)), pad=(0, m - n_out))           # (B, m): the covered part
    q = ctx.op("div", gv, env)

    def frames_of(t):      # (B', m) -> the (B', n_fft, T) frames of its placement in the overlap-added signal
        b = ctx.spec_of(t).shape[0]
        t = ctx.op("pad", t, pad=(lay.start, lay.expected - lay.start - m))
        return ctx.op("im2col", ctx.reshape(t, (b, 1, 1, lay.expected)), **window)
    qf = frames_of(q)
    gx = None
    if ctx.needs[0]:
        gx = fft_grad(ctx, lay.fft, TensorSpec((B, lay.bins, T), x.dtype), ctx.op("mul", qf, wcol))
        gx = ctx.reshape(gx, x.shape)
    gwin = None
    if len(d.inputs) == 2 and ctx.needs[1]:
        spec = ctx.reshape(s["input"], (B, lay.bins, T))
        frames = ctx.op("fft_nd", spec, kind="c2r", dim=(1,), s=(n,), scale=lay.fft.scale, forward=False)
        ga = ctx.op("sum", ctx.op("mul", frames, qf), dims=(0, 2))                  # through the numerator
        y = ctx.op("pad", ctx.reshape(s["out"], (B, n_out)), pad=(0, m - n_out))
        r = ctx.op("neg", ctx.op("sum", ctx.op("mul", q, y), dims=(0,), keepdim=True))   # d/d envelope
        gb = ctx.op("mul", ctx.op("sum", frames_of(r), dims=(0, 2)), ctx.op("mul", w, ctx.op("full", shape=(),
                                                                                          value=2.0, dtype=dt)))
        gwin = ctx.op("pad", ctx.op("add", ga, gb), pad=(-lay.left, -(n - lay.win - lay.left)))
    return (gx, gwin) if len(d.inputs) == 2 else (gx,)


def _istft_peer(x, window=None, **a):
    import torch

    return torch.istft(x, a["n_fft"], a["hop_length"], a["win_length"], window, a["center"], a["normalized"],
                       a["onesided"], a["length"], return_complex=False)


def _istft_dropin(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
                  onesided=None, length=None, return_complex=False):
    if return_complex:
        raise UnsupportedError("istft", "return_complex=True (a complex signal from a two-sided spectrum) is not "
                                        "implemented; the real signal (return_complex=False) is")
    ops = (input,) if window is None else (input, window)
    return ops, {"n_fft": n_fft, "hop_length": hop_length, "win_length": win_length, "center": center,
                 "normalized": normalized, "onesided": onesided, "length": length}


def _istft_samples(rng):
    """Spectra of real signals (the f64 stft of random frames): what istft inverts; windows positive (NOLA)."""
    def spec(shape, n_fft, hop, onesided=True):
        frames = rng.standard_normal(shape[:-2] + (n_fft, shape[-1]))
        y = np.fft.rfft(frames, axis=-2) if onesided else np.fft.fft(frames, axis=-2)
        return y.real, y.imag

    def cplx(re_im):
        return re_im[0] + 1j * re_im[1]
    yield Sample((cplx(spec((5, 6), 8, 2)),), {"n_fft": 8, "hop_length": 2}, name="center")
    yield Sample((cplx(spec((2, 4, 4), 6, 3)), 0.5 + rng.random(6)), {"n_fft": 6, "hop_length": 3, "normalized": True,
                                                                     "length": 12}, name="window-length")
    yield Sample((cplx(spec((5, 5), 5, 2, onesided=False)), 0.5 + rng.random(4)),
                 {"n_fft": 5, "hop_length": 2, "win_length": 4, "center": False, "onesided": False, "length": 10},
                 name="two-sided-short-window")
    yield Sample((cplx(spec((3, 4), 4, 2)),), {"n_fft": 4, "hop_length": 2, "length": 9}, name="length-beyond")


def _istft_errors():
    f = ((5, 6), "c64")
    yield ErrorCase((((5, 6), "f32"),), {"n_fft": 8}, UnsupportedError, r"istft: argument 'input' has dtype f32",
                    "real")
    yield ErrorCase((f,), {"n_fft": 16}, InvalidProblemError, r"argument 'input': expected 9 frequency bins", "bins")
    yield ErrorCase((f,), {"n_fft": 8, "hop_length": 9}, InvalidProblemError, r"argument 'hop_length'", "hop")
    yield ErrorCase((f, ((8,), "f64")), {"n_fft": 8}, DTypeMismatchError, r"argument 'window'", "window-dtype")


register_spec(OpSpec(
    name="istft", family="fft", arg_names=("input", "window"), check=_check_istft, dtypes=(DType.c128, DType.c64),
    attrs=(Attr("n_fft", "int", ge=1), Attr("hop_length", "int", None, optional=True),
           Attr("win_length", "int", None, optional=True), Attr("center", "bool", True),
           Attr("normalized", "bool", False), Attr("onesided", "bool", None, optional=True),
           Attr("length", "int", None, optional=True, ge=0)),
    torch_peer=_istft_peer, torch_name="torch.istft", dropin=_istft_dropin, grad=_istft_grad,
    saves=("inputs", "outputs"), differentiable=(0, 1), samples=_istft_samples, errors=_istft_errors, category="fft",
    tol=lambda dt: (1e-5, 2e-5) if dt == DType.c64 else (1e-10, 1e-10),
    workloads=(Workload("istft-[16,513,4097]-n1024-h256-c64", ((16, 513, 4097), ((1024,), DType.f32)), DType.c64,
                        {"n_fft": 1024, "hop_length": 256}, backward=True),),
    doc="torch.istft (return_complex=False): c2r frames x window, overlap-add, / the window envelope (NOLA checked)."))

declare_rule_ops(__name__, "pad", "pad_backward", "mul", "col2im", "im2col", "sum", "fft_nd", "real", "full", "div",
                 "neg", "add")   # (fft_grad)
