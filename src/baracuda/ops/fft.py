"""FFT family (issue 19): one N-d transform op, ``fft_nd``, and torch.fft's 18 transforms as specs over it.

``fft_nd(x; kind, dim, s, out, scale, forward, doubled, halved)`` is the only transform any backend computes:

* ``kind``: ``c2c`` (complex -> complex; a real input is read as complex), ``r2c`` (real -> the one-sided half
  spectrum, last axis of ``dim`` s//2 + 1 long) or ``c2r`` (a one-sided half spectrum -> real; the imaginary parts
  of the bins without a twin (0 and n/2) are ignored, as pocketfft and cuFFT do).
* ``dim``: the transform axes in order (the last one is the halved axis of r2c / c2r); ``s``: the signal length
  along each; the input is zero-padded or cut to ``s`` (c2r: its last axis to s[-1]//2 + 1) first, as torch's n / s.
* ``out``: the output's sizes along ``dim`` (None: the transform's own); padded / cut after the transform.  Only
  backward rules use it: the gradient of a padded / cut input is cut / padded back to the input's shape.
* ``scale``: ``none`` | ``sqrt_n`` | ``n``: the result times 1, 1/sqrt(prod s) or 1/prod(s) (torch's
  normalization; ``norm=`` and the direction decide it: norm_from_string in ATen).
* ``forward``: the sign of the exponent (True: e^{-2 pi i k t / n}).  r2c with forward=False is conj(r2c(x))
  (ihfft); c2r with forward=True is c2r(conj(x)) (hfft), torch's definitions of the Hermitian forms.
* ``doubled`` (r2c only): the bins 1 .. n - n//2 - 1 of the last axis times 2 -- the bins that stand for a twin
  too.  ``W r2c`` is the adjoint of c2r (torch's "Hermitian-weighting" gradient of irfft, fft_c2r_backward).
* ``halved`` (c2r only): those bins of the input times 1/2 before the transform.  ``c2r H`` is the adjoint of plain r2c:
  Re(IDFT of the zero-padded half spectrum) counts bin 0 and bin n/2 once and every other bin's real part, which
  c2r's Hermitian extension counts twice.  (torch's gradient of rfft is that c2c of the padded gradient, then the
  real part: a full-size complex buffer, transform and read; c2r reads and writes the half spectrum.)
  So the gradient rules close over this one op: c2c <-> c2c with the sign flipped, r2c -> halved c2r, halved c2r ->
  r2c, c2r -> doubled r2c, doubled r2c -> c2r; ``scale`` stays (the adjoint of s * D is s * D^H).

The named forms (fft, ifft, rfft, irfft, hfft, ihfft and their 2-d / n-d forms) are rows of ``FORMS``; ``params(desc)``
maps any of them to fft_nd's attributes, which every backend runs (backends/reference/fft.py,
backends/nvidia/cufft.py, backends/nvidia/fft_gemm.py).  Dtypes: f32 / f64 / c64 / c128 (r2c forms: f32 / f64);
the drop-ins promote integer and bool inputs to torch's default float dtype, as torch.  Half precision is refused:
baracuda has no complex32 dtype for torch CUDA's half results (torch's CPU refuses half too; its CUDA path takes it
for power-of-two sizes only).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import float_operands, no_out

__all__ = ["FFT_DTYPES", "REAL_DTYPES", "FORMS", "FftParams", "params", "in_sizes", "natural_out", "scale_factor",
           "complex_of", "fft_cost", "fft_grad", "NORMS"]

REAL_DTYPES = (DType.f32, DType.f64)
FFT_DTYPES = REAL_DTYPES + (DType.c64, DType.c128)
NORMS = ("backward", "ortho", "forward")
_COMPLEX = {DType.f32: DType.c64, DType.f64: DType.c128, DType.c64: DType.c64, DType.c128: DType.c128}
_REAL = {DType.c64: DType.f32, DType.c128: DType.f64, DType.f32: DType.f32, DType.f64: DType.f64}


def complex_of(dt: DType) -> DType:
    return _COMPLEX[dt]


@dataclass(frozen=True)
class FftParams:
    """fft_nd's attributes: what a backend computes for any FFT descriptor."""

    kind: str                    # c2c | r2c | c2r
    dim: tuple                   # transform axes, in order (the last: the halved axis of r2c / c2r)
    s: tuple                     # signal lengths along dim
    out: tuple                   # output sizes along dim (natural_out unless a backward rule pads / cuts)
    scale: str                   # none | sqrt_n | n
    forward: bool
    doubled: bool = False
    halved: bool = False


def in_sizes(kind: str, s) -> tuple:
    """The sizes the input is padded / cut to along dim (c2r: the half spectrum on the last axis)."""
    return tuple(s[:-1]) + (s[-1] // 2 + 1,) if kind == "c2r" else tuple(s)


def natural_out(kind: str, s) -> tuple:
    return tuple(s[:-1]) + (s[-1] // 2 + 1,) if kind == "r2c" else tuple(s)


def scale_factor(p: FftParams) -> float:
    n = math.prod(p.s)
    return {"none": 1.0, "sqrt_n": 1.0 / math.sqrt(n), "n": 1.0 / n}[p.scale]


def _scale_of(norm: str, forward: bool) -> str:
    """ATen's norm_from_string: 'backward' scales the inverse by 1/n, 'forward' the forward, 'ortho' both."""
    if norm == "ortho":
        return "sqrt_n"
    return "n" if (norm == "forward") == forward else "none"


def _out_dtype(kind: str, x: DType) -> DType:
    return _REAL[x] if kind == "c2r" else _COMPLEX[x]


# -- the named forms -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FftForm:
    name: str          # torch.fft's
    kind: str
    rank: str          # "1" (n, dim) | "2" (s, dim=(-2, -1)) | "n" (s, dim=None)
    forward: bool      # the direction norm= refers to (hfft: forward; ihfft: inverse)


_BASE = (("fft", "c2c", True), ("ifft", "c2c", False), ("rfft", "r2c", True), ("irfft", "c2r", False),
         ("hfft", "c2r", True), ("ihfft", "r2c", False))
FORMS: dict[str, FftForm] = {f"{b}{sfx}": FftForm(f"{b}{sfx}", kind, rank, fwd)
                             for sfx, rank in (("", "1"), ("2", "2"), ("n", "n")) for b, kind, fwd in _BASE}


def _one_input(op, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (input)", len(inputs))
    x = inputs[0]
    if not x.shape:
        raise InvalidProblemError(op, "input", "a tensor of at least 1 dim", "a 0-d tensor")
    return x


def _resolve(op: str, form: FftForm, x: TensorSpec, a: dict) -> FftParams:
    """torch.fft's arguments (n / s, dim, norm) of ``form`` on ``x`` -> fft_nd's attributes."""
    rank = len(x.shape)
    if form.rank == "1":
        dims, sizes = (a["dim"],), None if a["n"] is None else (a["n"],)
    else:
        sizes, dims = a["s"], a["dim"]
        if dims is None:
            dims = tuple(range(rank)) if sizes is None else tuple(range(rank - len(sizes), rank))
            if sizes is not None and len(sizes) > rank:
                raise InvalidProblemError(op, "s", f"at most {rank} sizes (the input's dims)", sizes)
        if sizes is not None and len(sizes) != len(dims):
            raise InvalidProblemError(op, "s", f"as many sizes as dims ({len(dims)}: {dims})", sizes)
        if not dims:
            raise InvalidProblemError(op, "dim", "at least one dim to transform", "()")
    default = [x.shape[d] for d in dims]
    if form.kind == "c2r":
        default[-1] = 2 * (default[-1] - 1)
    s = tuple(default[i] if sizes is None or sizes[i] == -1 else sizes[i] for i in range(len(dims)))
    for i, n in enumerate(s):
        if n < 1:
            raise InvalidProblemError(op, "n" if form.rank == "1" else "s",
                                      f"a positive number of data points along dim {dims[i]}", n)
    return FftParams(form.kind, tuple(dims), s, natural_out(form.kind, s), _scale_of(a["norm"], form.forward),
                     form.forward)


@functools.lru_cache(maxsize=4096)
def params(desc) -> FftParams:
    """fft_nd's attributes of any FFT descriptor (a named form's or fft_nd's own)."""
    if desc.op == "fft_nd":
        a = desc.attr_dict
        return FftParams(a["kind"], a["dim"], a["s"], a["out"], a["scale"], a["forward"], a["doubled"], a["halved"])
    return _resolve(desc.op, FORMS[desc.op], desc.inputs[0], desc.attr_dict)


def _check_input_dtype(op, kind, x: TensorSpec):
    if x.dtype not in FFT_DTYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FFT_DTYPES))} (half precision: no complex32 dtype here)")
    if kind == "r2c" and x.dtype not in REAL_DTYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; {op} takes a real input "
                                   f"({', '.join(map(str, REAL_DTYPES))})")


def _out_spec(x: TensorSpec, p: FftParams) -> TensorSpec:
    shape = list(x.shape)
    for d, n in zip(p.dim, p.out):
        shape[d] = n
    return TensorSpec(tuple(shape), _out_dtype(p.kind, x.dtype))


def _named_check(name):
    form = FORMS[name]

    def check(inputs, attrs):
        x = _one_input(name, inputs)
        _check_input_dtype(name, form.kind, x)
        return attrs, (_out_spec(x, _resolve(name, form, x, attrs)),)
    return check


def _check_core(inputs, attrs):
    op = "fft_nd"
    x = _one_input(op, inputs)
    kind, dims, s = attrs["kind"], attrs["dim"], attrs["s"]
    _check_input_dtype(op, kind, x)
    if len(s) != len(dims) or not dims:
        raise InvalidProblemError(op, "s", f"one positive size per transform dim ({len(dims)})", s)
    if min(s) < 1:
        raise InvalidProblemError(op, "s", "positive sizes", s)
    if attrs["doubled"] and kind != "r2c":
        raise InvalidProblemError(op, "doubled", "False unless kind='r2c'", True)
    if attrs["halved"] and kind != "c2r":
        raise InvalidProblemError(op, "halved", "False unless kind='c2r'", True)
    nat = natural_out(kind, s)
    out = nat if attrs["out"] is None else attrs["out"]
    if len(out) != len(dims):
        raise InvalidProblemError(op, "out", f"one size per transform dim ({len(dims)})", out)
    if kind == "r2c" and not attrs["doubled"] and out[-1] > nat[-1]:
        # (the adjoint would have to cut the padding off before zero-padding to n; no rule asks for it)
        raise InvalidProblemError(op, "out", f"a last size <= {nat[-1]} for a plain r2c", out)
    attrs = dict(attrs, out=tuple(out))
    p = FftParams(kind, dims, s, tuple(out), attrs["scale"], attrs["forward"], attrs["doubled"], attrs["halved"])
    return attrs, (_out_spec(x, p),)


# -- backward: the closed set of adjoints (module docstring) ----------------------------------------------------------
def fft_grad(ctx, p: FftParams, x: TensorSpec, g):
    """The gradient of input ``x`` of the transform ``p`` for the output gradient ``g`` (torch's convention)."""
    back = tuple(x.shape[d] for d in p.dim)
    common = dict(dim=p.dim, s=p.s, out=back, scale=p.scale, forward=not p.forward)
    if p.kind == "c2c":
        gx = ctx.op("fft_nd", g, kind="c2c", **common)
    elif p.kind == "r2c":
        gx = ctx.op("fft_nd", g, kind="c2r", halved=not p.doubled, **common)
    else:
        gx = ctx.op("fft_nd", g, kind="r2c", doubled=not p.halved, **common)
    if not x.dtype.is_complex and ctx.spec_of(gx).dtype.is_complex:
        gx = ctx.op("real", gx)
    return gx


def _grad(ctx, d, grads, s):
    g = grads[0]
    if g is None:
        return (None,)
    return (fft_grad(ctx, params(d), d.inputs[0], g),)


# -- torch peers and drop-ins --------------------------------------------------------------------------------------
def _named_peer(name):
    form = FORMS[name]

    def peer(x, **a):
        import torch

        size = a.get("n") if form.rank == "1" else a.get("s")
        return getattr(torch.fft, name)(x, size, a["dim"], a["norm"])
    return peer


def _resize(x, dims, sizes):
    """x zero-padded / cut to ``sizes`` along ``dims`` (torch; the peer's)."""
    import torch

    for d, n in zip(dims, sizes):
        m = x.shape[d]
        if n < m:
            x = x.narrow(d, 0, n)
        elif n > m:
            shape = list(x.shape)
            shape[d] = n - m
            x = torch.cat([x, x.new_zeros(shape)], d)
    return x


def _core_peer(x, kind, dim, s, out, scale, forward, doubled=False, halved=False):
    """fft_nd in torch: the unnormalized transforms of torch.fft, the scale, the weighting, the output resize."""
    import torch

    p = FftParams(kind, tuple(dim), tuple(s), tuple(out), scale, forward, doubled, halved)
    x = _resize(x, p.dim, in_sizes(kind, p.s))
    if kind == "c2c":
        y = (torch.fft.fftn if forward else torch.fft.ifftn)(x, dim=p.dim, norm="backward" if forward else "forward")
    elif kind == "r2c":
        y = torch.fft.rfftn(x, dim=p.dim)
        y = y if forward else y.conj()
        if doubled:
            n = p.s[-1]
            w = torch.ones(y.shape[p.dim[-1]], dtype=y.real.dtype)
            w[1:n - n // 2] = 2
            y = y * w.reshape([-1] + [1] * (y.dim() - 1 - p.dim[-1]))
    else:
        if halved:
            n = p.s[-1]
            w = torch.ones(x.shape[p.dim[-1]], dtype=x.real.dtype)
            w[1:n - n // 2] = 0.5
            x = x * w.reshape([-1] + [1] * (x.dim() - 1 - p.dim[-1]))
        y = torch.fft.irfftn(x.conj() if forward else x, s=p.s, dim=p.dim, norm="forward")
    return _resize(y * scale_factor(p), p.dim, p.out)


def _operands(name, input, attrs, out):
    no_out(f"torch.fft.{name}", out)
    (x,) = float_operands(input, bools=True)    # integer / bool inputs: torch's default float dtype, as torch
    return (x,), attrs


def _named_dropin(name):
    """torch.fft.<name>'s signature: (input, n, dim=-1, norm) for the 1-d forms, (input, s, dim, norm) else."""
    rank = FORMS[name].rank
    if rank == "1":
        def dropin(input, n=None, dim=-1, norm=None, *, out=None):
            return _operands(name, input, {"n": n, "dim": dim, "norm": norm}, out)
    else:
        def dropin(input, s=None, dim=(-2, -1) if rank == "2" else None, norm=None, *, out=None):
            return _operands(name, input, {"s": s, "dim": dim, "norm": norm}, out)
    dropin.__name__ = name
    return dropin


# -- samples, errors, workloads, cost -----------------------------------------------------------------------------
_NORM = Attr("norm", "str", "backward", none_default=True, choices=NORMS)


def _attrs(rank: str):
    if rank == "1":
        return (Attr("n", "int", None, optional=True), Attr("dim", "axis", -1), _NORM)
    dim = Attr("dim", "axes", (-2, -1), ordered=True) if rank == "2" else \
        Attr("dim", "axes", None, optional=True, ordered=True)
    return (Attr("s", "ints", None, optional=True), dim, _NORM)


_CASES = {   # (shape, attrs): tiny (the generic suite runs each per dtype), odd lengths, every norm, n / s pad and cut
    "1": [((8,), {}), ((5, 3), {"n": 7, "dim": 0, "norm": "ortho"}), ((2, 6), {"n": 4, "norm": "forward"})],
    "2": [((3, 4), {}), ((2, 3, 5), {"s": (4, 3), "dim": (0, 2), "norm": "ortho"}),
          ((2, 3, 4), {"s": (-1, 6), "norm": "forward"})],
    "n": [((2, 3, 4), {}), ((3, 4, 2), {"s": (3, 5), "norm": "ortho"}),
          ((2, 3, 4), {"s": (2, 5), "dim": (2, 0), "norm": "forward"})],
}


def _named_samples(name):
    form = FORMS[name]

    def samples(rng):
        for shape, a in _CASES[form.rank]:
            yield Sample((rng.standard_normal(shape),), dict(a), name=f"{shape}-{a}")
    return samples


def _core_samples(rng):
    x = rng.standard_normal
    yield Sample((x((3, 5)),), {"kind": "c2c", "dim": (1,), "s": (6,), "forward": False, "scale": "n"}, name="c2c-pad")
    yield Sample((x((2, 4, 3)),), {"kind": "c2c", "dim": (2, 0), "s": (3, 3), "out": (4, 2), "scale": "sqrt_n"},
                 name="c2c-out")
    yield Sample((x((2, 7)),), {"kind": "r2c", "dim": (1,), "s": (6,), "doubled": True, "out": (5,)},
                 name="r2c-doubled")
    yield Sample((x((3, 4)),), {"kind": "c2r", "dim": (0, 1), "s": (3, 5), "forward": True, "out": (2, 5)},
                 name="c2r-hermitian")
    yield Sample((x((3, 4)),), {"kind": "c2r", "dim": (0, 1), "s": (3, 6), "halved": True, "out": (2, 7)},
                 name="c2r-halved-even")
    yield Sample((x((2, 3, 3)),), {"kind": "c2r", "dim": (2,), "s": (5,), "halved": True, "forward": True},
                 name="c2r-halved-odd")


def _named_errors(name):
    form = FORMS[name]

    def errors():
        f = ((3, 4), "f32")
        yield ErrorCase((((), "f32"),), {}, InvalidProblemError, rf"{name}: argument 'input': expected a tensor of at "
                        "least 1 dim" if form.rank != "2" else rf"{name}: argument 'dim': expected an axis", "0-d")
        yield ErrorCase((((3, 4), "i32"),), {}, UnsupportedError, rf"{name}: argument 'input' has dtype i32", "int")
        yield ErrorCase((((3, 4), "f16"),), {}, UnsupportedError, r"has dtype f16; .*no complex32", "half")
        yield ErrorCase((f,), {"norm": "bogus"}, InvalidProblemError, r"argument 'norm': expected one of", "norm")
        if form.kind == "r2c":
            yield ErrorCase((((3, 4), "c64"),), {}, UnsupportedError, r"takes a real input", "complex-input")
        if form.rank == "1":
            yield ErrorCase((f,), {"n": 0}, InvalidProblemError, r"argument 'n': expected a positive number", "n0")
            yield ErrorCase((f,), {"dim": 2}, InvalidProblemError, r"argument 'dim': expected an axis", "dim")
        else:
            yield ErrorCase((f,), {"s": (3, 4, 5), "dim": (0, 1)}, InvalidProblemError,
                            r"argument 's': expected as many sizes as dims", "s-len")
            yield ErrorCase((f,), {"dim": (1, 1)}, InvalidProblemError, r"argument 'dim': expected distinct", "dup")
        if form.kind == "c2r":
            yield ErrorCase((((3, 1), "c64"),), {} if form.rank == "1" else {"dim": (0, 1)},
                            InvalidProblemError, r"expected a positive number of data points", "n-default-0")
    return errors


def _core_errors():
    f = ((3, 4), "c64")
    yield ErrorCase((f,), {"kind": "c2c", "dim": (0, 1), "s": (3,)}, InvalidProblemError, r"argument 's'", "s-len")
    yield ErrorCase((f,), {"kind": "c2r", "dim": (1,), "s": (4,), "doubled": True}, InvalidProblemError,
                    r"argument 'doubled'", "doubled")
    yield ErrorCase((((3, 4), "f32"),), {"kind": "r2c", "dim": (1,), "s": (4,), "halved": True}, InvalidProblemError,
                    r"argument 'halved'", "halved")
    yield ErrorCase((((3, 4), "f32"),), {"kind": "r2c", "dim": (1,), "s": (4,), "out": (5,)}, InvalidProblemError,
                    r"argument 'out': expected a last size <= 3", "out")
    yield ErrorCase((f,), {"kind": "x2y", "dim": (1,), "s": (4,)}, InvalidProblemError, r"argument 'kind'", "kind")


def fft_cost(desc):
    """(bytes, flops): one read and one write; 5 n log2 n flops per complex transform of n points (half for r2c /
    c2r), the usual FFT count."""
    p = params(desc)
    n = math.prod(p.s)
    batch = desc.inputs[0].numel // max(1, math.prod(desc.inputs[0].shape[d] for d in p.dim))
    flops = 5 * n * max(1.0, math.log2(n)) * batch * (0.5 if p.kind != "c2c" else 1.0)
    return desc.inputs[0].nbytes + desc.outputs[0].nbytes, int(flops)


def _tol(dt):
    # an FFT's rounding error grows like eps * log2(n) * |x| (Cooley-Tukey; the GEMM path: eps * sqrt(n)); outputs
    # are sums of n terms, so bins near 0 carry an absolute error ~ eps * sqrt(n) * rms(x): f32 (eps 6e-8) with
    # n <= 60 and |x| ~ 1-3 in the samples: 1e-5 relative, 2e-5 absolute
    if dt in (DType.f32, DType.c64):
        return 1e-5, 2e-5
    return 1e-10, 1e-10


_WORKLOADS = {
    "fft": (Workload("fft-c2c-[2^24]-c64", ((1 << 24,),), DType.c64, {}, backward=True),
            Workload("fft-c2c-[4096,1024]-c64", ((4096, 1024),), DType.c64, {}, backward=True)),
    "rfft2": (Workload("rfft2-[64,1024,1024]-f32", ((64, 1024, 1024),), DType.f32, {}, backward=True),),
}

for _name, _form in FORMS.items():
    register_spec(OpSpec(
        name=_name, family="fft", arg_names=("input",), check=_named_check(_name),
        dtypes=REAL_DTYPES if _form.kind == "r2c" else FFT_DTYPES, attrs=_attrs(_form.rank),
        torch_peer=_named_peer(_name), torch_name=f"torch.fft.{_name}", dropin=_named_dropin(_name),
        grad=_grad, saves=(), differentiable=(0,), samples=_named_samples(_name), errors=_named_errors(_name),
        tol=_tol, workloads=_WORKLOADS.get(_name, ()), cost=fft_cost, category="fft",
        doc=f"torch.fft.{_name}: fft_nd(kind={_form.kind}) over torch's n / s, dim, norm (see ops/fft.py)."))

register_spec(OpSpec(
    name="fft_nd", family="fft", arg_names=("x",), check=_check_core, dtypes=FFT_DTYPES,
    attrs=(Attr("kind", "str", "c2c", choices=("c2c", "r2c", "c2r")), Attr("dim", "axes", ordered=True),
           Attr("s", "shape"), Attr("out", "shape", None, optional=True),
           Attr("scale", "str", "none", choices=("none", "sqrt_n", "n")), Attr("forward", "bool", True),
           Attr("doubled", "bool", False), Attr("halved", "bool", False)),
    torch_peer=_core_peer, grad=_grad, saves=(), differentiable=(0,), samples=_core_samples, errors=_core_errors,
    tol=_tol, cost=fft_cost, category="fft",
    doc="The one N-d FFT every torch.fft transform runs (ops/fft.py: kind, dim, s, out, scale, forward, doubled, "
        "halved)."))

del _name, _form

declare_rule_ops(__name__, "fft_nd", "real")
