"""Resampling (issue 18): interpolate (torch.nn.functional.interpolate; F.upsample / upsample_bilinear /
upsample_nearest are its twins in torch/_aliases.py) and its fused backward.

interpolate(x, size, mode, align_corners, scales, antialias) -> y
    x is (N, C, *spatial) with 1 to 3 spatial dims; y is (N, C, *size).  Every mode torch has is separable: y is x
    multiplied along each spatial dim d by a matrix M_d (size[d] x in[d]) whose rows hold the taps of one output
    index.  ``interp_matrix`` builds M_d in float64 from torch's own index arithmetic (the facts of the op), so the
    NumPy reference (y = x x_d M_d) and the Triton tap tables come from one definition:
      nearest        src = min(floor(dst * s), in - 1), s = 1/scale or in/out in float32 (torch's float math,
                     which decides ties); out == in and out == 2 in are torch's exact shortcuts
      nearest-exact  src = min(floor((dst + 0.5) * s), in - 1), float32 as above
      linear / bilinear / trilinear  2 taps per dim at src = s (dst + 0.5) - 0.5 clamped below at 0, or s dst
                     under align_corners (s = (in - 1)/(out - 1))
      bicubic        4 taps, Keys' kernel with A = -0.75, tap indices clamped to [0, in - 1] (torch's border)
      area           adaptive average pooling: rows average [floor(o in/out), ceil((o + 1) in/out))
      antialias      (bilinear / bicubic, 4-d): torch's separable antialiased filter (triangle / Keys A = -0.5),
                     support widened by the downscale factor, weights normalized per row
    scales: the scale factors torch uses for the coordinates (the drop-in passes scale_factor when
    recompute_scale_factor is not set, None otherwise: then in/out).
interpolate_backward(grad, input_size, ...) -> dx = grad x_d M_d^T (the adjoint; the Triton backward gathers:
    every input index reads its column of M_d, no atomics).
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import check_nonneg

__all__ = ["INTERP_MODES", "interp_matrix", "interp_tables"]

INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_LINEAR = ("linear", "bilinear", "trilinear", "bicubic")
_RANK_OF = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_NEAREST = ("nearest", "nearest-exact")


def _scales(op, v, inputs, attrs):
    if v is None:
        return None
    try:
        t = tuple(float(s) for s in (v if isinstance(v, (tuple, list)) else (v,)))
    except (TypeError, ValueError):
        raise InvalidProblemError(op, "scales", "None or a tuple of positive floats", repr(v)) from None
    if any(not s > 0 or math.isinf(s) for s in t):
        raise InvalidProblemError(op, "scales", "positive finite scale factors", repr(v))
    return t


_ATTRS = (Attr("size", "shape", expected="the output spatial size, positive ints"),
          Attr("mode", "str", "nearest", choices=INTERP_MODES),
          Attr("align_corners", "bool", False),
          Attr("scales", "any", None, optional=True, normalize=_scales),
          Attr("antialias", "bool", False))


def _check_problem(op, x, attrs):
    """The forward's rule on x's spec: returns the output spec."""
    mode, size = attrs["mode"], attrs["size"]
    check_nonneg(op, ("x",), (x.shape,))
    r = len(x.shape)
    if not 3 <= r <= 5:
        raise InvalidProblemError(op, "x", "a 3-d, 4-d or 5-d tensor (N, C, *spatial)", x.shape)
    if mode in _RANK_OF and _RANK_OF[mode] != r:
        raise InvalidProblemError(op, "x", f"a {_RANK_OF[mode]}-d tensor for mode '{mode}'", x.shape)
    if len(size) != r - 2:
        raise InvalidProblemError(op, "size", f"{r - 2} output sizes (one per spatial dim of x {x.shape})",
                                  size)
    if any(s < 1 for s in size) or any(s < 1 for s in x.shape[2:]):
        raise InvalidProblemError(op, "size", f"input and output spatial sizes > 0 (input {x.shape[2:]})", size)
    sc = attrs["scales"]
    if sc is not None and len(sc) != r - 2:
        raise InvalidProblemError(op, "scales", f"{r - 2} scale factors", sc)
    if attrs["align_corners"] and mode not in _LINEAR:
        raise InvalidProblemError(op, "align_corners", "False for mode '" + mode + "' (align_corners is for the "
                                  "interpolating modes: linear | bilinear | bicubic | trilinear)", True)
    if attrs["antialias"] and mode not in ("bilinear", "bicubic"):
        raise InvalidProblemError(op, "antialias", "False unless mode is bilinear or bicubic on a 4-d input",
                                  True)
    if x.dtype == DType.u8 and mode not in _NEAREST:
        raise UnsupportedError(op, f"dtype u8 with mode '{mode}' (u8 is for the nearest modes)")
    return TensorSpec(tuple(x.shape[:2]) + tuple(size), x.dtype)


def _check(inputs, attrs):
    op = "interpolate"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (x)", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    return attrs, (_check_problem(op, inputs[0], attrs),)


def _check_bw(inputs, attrs):
    op = "interpolate_backward"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (grad)", len(inputs))
    g = inputs[0]
    _SPECS[op].check_dtypes(inputs)
    xin = tuple(attrs["input_size"])
    if len(xin) != len(g.shape) or tuple(xin[:2]) != tuple(g.shape[:2]):
        raise InvalidProblemError(op, "input_size", f"the input's shape (N, C, *spatial) with N, C = "
                                  f"{tuple(g.shape[:2])}", xin)
    want = _check_problem(op, TensorSpec(xin, g.dtype), attrs)
    if want.shape != g.shape:
        raise InvalidProblemError(op, "grad", f"the output's shape {want.shape}", g.shape)
    return attrs, (TensorSpec(xin, g.dtype),)


# -- the per-dim matrices -------------------------------------------------------------------------------------------
def _area_scale(n_in, n_out, align, scale):
    """torch's area_pixel_compute_scale (float64)."""
    if align:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _cubic(t, a):
    """Keys' cubic convolution weights of the 4 taps at offsets -1, 0, 1, 2 from floor(src), t = frac."""
    def c1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def c2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return (c2(t + 1), c1(t), c1(1 - t), c2(2 - t))


def _aa_filter(x, bicubic):
    x = abs(x)
    if not bicubic:
        return max(0.0, 1.0 - x)
    a = -0.5   # torch's antialiased bicubic uses Keys' a = -0.5 (PIL's), unlike the plain bicubic's -0.75
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2.0:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def interp_matrix(n_in: int, n_out: int, mode: str, align_corners: bool, scale, antialias: bool) -> np.ndarray:
    """The float64 (n_out, n_in) matrix of one spatial dim: y = M @ x along that dim (see the module docstring)."""
    m = np.zeros((n_out, n_in))
    if mode in _NEAREST:
        if n_out == n_in and mode == "nearest":
            src = np.arange(n_out)
        elif n_out == 2 * n_in and mode == "nearest":
            src = np.arange(n_out) >> 1
        else:
            s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n_in) / np.float32(n_out)
            off = np.float32(0.5 if mode == "nearest-exact" else 0.0)
            src = np.minimum(np.floor((np.arange(n_out, dtype=np.float32) + off) * s).astype(np.int64), n_in - 1)
        m[np.arange(n_out), src] = 1.0
        return m
    if mode == "area":
        for o in range(n_out):
            lo, hi = (o * n_in) // n_out, -((-(o + 1) * n_in) // n_out)
            m[o, lo:hi] = 1.0 / (hi - lo)
        return m
    s = _area_scale(n_in, n_out, align_corners, scale)
    bicubic = mode == "bicubic"
    if antialias:
        interp = 4 if bicubic else 2
        support = interp * 0.5 * s if s >= 1.0 else interp * 0.5
        inv = 1.0 / s if s >= 1.0 else 1.0
        for o in range(n_out):
            center = s * (o + 0.5)
            lo = max(int(center - support + 0.5), 0)
            hi = min(int(center + support + 0.5), n_in)
            w = np.array([_aa_filter((j - center + 0.5) * inv, bicubic) for j in range(lo, hi)])
            tot = w.sum()
            m[o, lo:hi] = w / tot if tot != 0.0 else w
        return m
    for o in range(n_out):
        src = s * o if align_corners else s * (o + 0.5) - 0.5
        if bicubic:
            i0 = math.floor(src)
            for k, w in enumerate(_cubic(src - i0, -0.75)):
                m[o, min(max(i0 - 1 + k, 0), n_in - 1)] += w
        else:
            src = max(src, 0.0)
            i0 = int(src)
            lam = src - i0
            m[o, i0] += 1.0 - lam
            m[o, i0 + (i0 < n_in - 1)] += lam
    return m


def interp_matrices(desc_attrs: dict, in_spatial) -> list[np.ndarray]:
    """M_d for every spatial dim of a forward problem (attrs: size, mode, align_corners, scales, antialias)."""
    a = desc_attrs
    sc = a["scales"] or (None,) * len(in_spatial)
    return [interp_matrix(i, o, a["mode"], a["align_corners"], s, a["antialias"])
            for i, o, s in zip(in_spatial, a["size"], sc)]


def interp_tables(m: np.ndarray):
    """The sparse rows of ``m``: (idx int32 [rows, T], w float64 [rows, T]), T the most nonzeros of a row (at least 1;
    padding taps read index 0 with weight 0)."""
    nz = m != 0
    t = max(int(nz.sum(axis=1).max(initial=0)), 1)
    idx = np.zeros((m.shape[0], t), np.int32)
    w = np.zeros((m.shape[0], t))
    for r in range(m.shape[0]):
        cols = np.nonzero(nz[r])[0]
        idx[r, :len(cols)] = cols
        w[r, :len(cols)] = m[r, cols]
    return idx, w


# -- backward rule, peers, drop-in ----------------------------------------------------------------------------
def _fw_attrs(d):
    return {k: d.attr(k) for k in ("size", "mode", "align_corners", "scales", "antialias")}


def _g(ctx, d, grads, s):
    if grads[0] is None or not d.dtype.is_floating:     # a u8 output (nearest): no gradient
        return (None,)
    return (ctx.op("interpolate_backward", grads[0], input_size=d.inputs[0].shape, **_fw_attrs(d)),)


def _torch_fn(x, size, mode, align_corners, scales, antialias):
    import torch.nn.functional as F

    ac = align_corners if mode in _LINEAR else None
    if scales is not None:   # the scales drive the coordinates: torch's scale_factor path reproduces the size
        return F.interpolate(x, scale_factor=list(scales), mode=mode, align_corners=ac, antialias=antialias,
                             recompute_scale_factor=False)
    return F.interpolate(x, size=list(size), mode=mode, align_corners=ac, antialias=antialias)


def _peer(x, **a):
    y = _torch_fn(x, **a)
    if tuple(y.shape[2:]) != tuple(a["size"]):
        raise AssertionError("interpolate peer: the scales do not reproduce the size")
    return y


def _peer_bw(g, *, input_size, **a):
    import torch

    x = torch.zeros(input_size, dtype=g.dtype, requires_grad=True)
    y = _torch_fn(x, **a)
    return torch.autograd.grad(y, x, g)[0]


def _dropin(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
            antialias=False):
    op = "interpolate"
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise InvalidProblemError(op, "size", "only one of size or scale_factor", f"size={size!r} and "
                                  f"scale_factor={scale_factor!r}")
    if size is None and scale_factor is None:
        raise InvalidProblemError(op, "size", "either size or scale_factor", "neither")
    if align_corners is not None and mode not in _LINEAR:
        raise InvalidProblemError(op, "align_corners", "None for mode '" + str(mode) + "' (align_corners is for "
                                  "the interpolating modes: linear | bilinear | bicubic | trilinear)", align_corners)
    if mode not in INTERP_MODES:
        raise UnsupportedError(op, f"mode {mode!r} (supported: {', '.join(INTERP_MODES)})")
    if recompute_scale_factor and size is not None:
        raise InvalidProblemError(op, "recompute_scale_factor", "None or False with an explicit size", True)
    scales = None
    if size is not None:
        out = tuple(size) if isinstance(size, (tuple, list)) else (size,) * dim
        if len(out) != dim:
            raise InvalidProblemError(op, "size", f"{dim} output sizes (the spatial dims of input "
                                      f"{tuple(input.shape)})", tuple(out))
    else:
        sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * dim
        if len(sf) != dim:
            raise InvalidProblemError(op, "scale_factor", f"{dim} scale factors (the spatial dims of input "
                                      f"{tuple(input.shape)})", tuple(sf))
        out = tuple(int(n * float(f)) for n, f in zip(input.shape[2:], sf))
        if not recompute_scale_factor and mode != "area":
            scales = tuple(float(f) for f in sf)
    return (input,), {"size": out, "mode": mode, "align_corners": bool(align_corners), "scales": scales,
                      "antialias": bool(antialias)}


# -- samples, errors, workloads --------------------------------------------------------------------------------
_CASES = [   # (shape, size, mode, align_corners, scales, antialias)
    ((1, 2, 5), (8,), "linear", False, None, False),
    ((2, 1, 6), (4,), "linear", True, None, False),
    ((1, 2, 4, 5), (7, 3), "bilinear", False, None, False),
    ((1, 2, 4, 4), (8, 8), "bilinear", True, (2.0, 2.0), False),
    ((1, 1, 5, 6), (3, 9), "bicubic", False, (0.7, 1.5), False),
    ((1, 2, 4, 3), (6, 5), "bicubic", True, None, False),
    ((1, 2, 8, 7), (3, 4), "bilinear", False, None, True),
    ((1, 1, 7, 8), (3, 5), "bicubic", False, None, True),
    ((1, 1, 3, 4, 3), (5, 3, 4), "trilinear", False, None, False),
    ((1, 2, 5, 7), (3, 10), "nearest", False, (0.65, 1.5), False),
    ((1, 2, 3, 4, 2), (6, 3, 4), "nearest-exact", False, None, False),
    ((1, 2, 7), (3,), "area", False, None, False),
    ((1, 1, 7, 5), (3, 2), "area", False, None, False),
    ((0, 2, 4, 4), (8, 8), "bilinear", False, None, False),
]


def _samples(rng):
    for shape, size, mode, ac, sc, aa in _CASES:
        a = {"size": size, "mode": mode, "align_corners": ac, "scales": sc, "antialias": aa}
        name = f"{shape}->{size}{mode}{'-ac' if ac else ''}{'-aa' if aa else ''}{'-s' if sc else ''}"
        yield Sample((rng.standard_normal(shape),), a, name=name)
    yield Sample((rng.integers(0, 256, (1, 2, 3, 5)).astype(np.uint8),),
                 {"size": (6, 4), "mode": "nearest"}, name="u8-nearest", grad=False)


def _bw_samples(rng):
    for s in _samples(rng):
        x = np.asarray(s.inputs[0])
        if x.dtype.kind != "f":
            continue
        g = rng.standard_normal(x.shape[:2] + tuple(s.attrs["size"]))
        yield Sample((g,), dict(s.attrs, input_size=x.shape), name=s.name, grad=False)


_F = ((1, 2, 4, 4), "f32")


def _errors():
    yield ErrorCase((((2, 4), "f32"),), {"size": (3,)}, InvalidProblemError, r"interpolate: argument 'x': expected "
                    r"a 3-d, 4-d or 5-d tensor", "rank")
    yield ErrorCase((_F,), {"size": (3,), "mode": "bilinear"}, InvalidProblemError, r"argument 'size': expected 2 "
                    "output sizes", "size-len")
    yield ErrorCase((((1, 2, 4), "f32"),), {"size": (3,), "mode": "bilinear"}, InvalidProblemError,
                    r"argument 'x': expected a 4-d tensor for mode 'bilinear'", "mode-rank")
    yield ErrorCase((_F,), {"size": (3, 3), "mode": "nearest", "align_corners": True}, InvalidProblemError,
                    r"argument 'align_corners': expected False for mode 'nearest'", "align-nearest")
    yield ErrorCase((_F,), {"size": (3, 3), "mode": "area", "antialias": True}, InvalidProblemError,
                    r"argument 'antialias'", "antialias-area")
    yield ErrorCase((_F,), {"size": (0, 3)}, InvalidProblemError, r"argument 'size': expected input and output "
                    r"spatial sizes > 0", "size-zero")
    yield ErrorCase((((1, 2, 4, 4), "u8"),), {"size": (3, 3), "mode": "bilinear"}, UnsupportedError,
                    r"dtype u8 with mode 'bilinear'", "u8-bilinear")
    yield ErrorCase((_F,), {"size": (3, 3), "mode": "cubic"}, InvalidProblemError, r"argument 'mode'", "mode")
    yield ErrorCase((_F,), {"size": (3, 3), "scales": (1.0,)}, InvalidProblemError, r"argument 'scales'", "scales")


def _bw_errors():
    a = {"size": (8, 8), "mode": "bilinear", "input_size": (1, 2, 4, 4)}
    yield ErrorCase((((1, 2, 8, 7), "f32"),), a, InvalidProblemError, r"interpolate_backward: argument 'grad': "
                    r"expected the output's shape \(1, 2, 8, 8\)", "grad-shape")
    yield ErrorCase((((1, 3, 8, 8), "f32"),), a, InvalidProblemError, r"argument 'input_size'", "input-size")
    yield ErrorCase((((1, 2, 8, 8), "u8"),), dict(a, mode="nearest"), UnsupportedError, r"dtype u8", "u8")


def _tol(dt):
    # a weighted sum of at most 4^3 taps (more with antialias, weights summing to 1) in f32, one rounding of the
    # output dtype; bf16 2^-8 relative
    return {DType.f64: (1e-9, 1e-10), DType.f32: (2e-5, 2e-5), DType.f16: (1e-2, 5e-3),
            DType.bf16: (3e-2, 2e-2), DType.u8: (0.0, 0.0)}[dt]


def _cost(desc):
    """One read of x and one write of y (the taps' re-reads hit the caches); 2 flops per tap and output."""
    x, y = desc.inputs[0], desc.outputs[0]
    taps = {"nearest": 1, "nearest-exact": 1, "area": 1, "bicubic": 4}.get(desc.attr("mode"), 2) ** (len(x.shape) - 2)
    return x.nbytes + y.nbytes, 2 * taps * max(x.numel, y.numel)


def _wl(name, shape, size, mode, dt=DType.bf16, aa=False):
    return Workload(f"interpolate-{name}", (shape,), dt, {"size": size, "mode": mode, "antialias": aa},
                    backward=True)


_WL = (_wl("[8,64,128,128]-bilinear-x2up-bf16", (8, 64, 128, 128), (256, 256), "bilinear"),
       _wl("[8,64,128,128]-bilinear-x2down-bf16", (8, 64, 128, 128), (64, 64), "bilinear"),
       _wl("[8,64,128,128]-bicubic-x2up-bf16", (8, 64, 128, 128), (256, 256), "bicubic"),
       _wl("[8,64,128,128]-bicubic-x2down-bf16", (8, 64, 128, 128), (64, 64), "bicubic"),
       _wl("[64,3,224,224]-bicubic-x2up-bf16", (64, 3, 224, 224), (448, 448), "bicubic"),
       _wl("[64,3,224,224]-bilinear-aa-x2down-bf16", (64, 3, 224, 224), (112, 112), "bilinear", aa=True),
       _wl("[8,64,128,128]-nearest-x2up-bf16", (8, 64, 128, 128), (256, 256), "nearest"))

_SPECS: dict[str, OpSpec] = {}
_DTYPES = FLOAT_TYPES + (DType.u8,)


def _reg(**kw):
    _SPECS[kw["name"]] = register_spec(OpSpec(family="image", category="image", tol=_tol, cost=_cost, **kw))


_reg(name="interpolate", arg_names=("x",), check=_check, dtypes=_DTYPES, attrs=_ATTRS, torch_peer=_peer,
     torch_name="torch.nn.functional.interpolate", dropin=_dropin, grad=_g, saves=(), differentiable=(0,),
     samples=_samples, errors=_errors, grad_tol=_tol, workloads=_WL, out_format_of=0,
     doc="resample (N, C, *spatial) to size: nearest, nearest-exact, (bi/tri)linear, bicubic, area; antialias.")
_reg(name="interpolate_backward", arg_names=("grad",), check=_check_bw, dtypes=FLOAT_TYPES,
     attrs=_ATTRS + (Attr("input_size", "shape"),), torch_peer=_peer_bw, samples=_bw_samples, errors=_bw_errors, out_format_of=0,
     workloads=tuple(Workload(w.name.replace("interpolate", "interpolate_backward"),
                              ((w.shapes[0][:2] + w.attrs["size"]),), w.dtype,
                              dict(w.attrs, input_size=w.shapes[0])) for w in _WL),
     doc="the adjoint of interpolate: dx = grad times the transposed per-dim matrices (a gather per input index).")

declare_rule_ops(__name__, "interpolate_backward")
