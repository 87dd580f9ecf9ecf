"""Sampling at given coordinates (issue 18): grid_sample and affine_grid, with their fused backward ops.

grid_sample(x, grid, mode, padding_mode, align_corners) -> y
    x (N, C, H, W) with grid (N, Ho, Wo, 2), or x (N, C, D, H, W) with grid (N, Do, Ho, Wo, 3); grid[..., 0] is the
    x (width) coordinate in [-1, 1], [..., 1] y, [..., 2] z.  y (N, C, *grid.shape[1:-1]).  Per coordinate k
    (``grid_taps``, torch's index arithmetic): unnormalize ((c + 1)/2 (size - 1) under align_corners, else
    ((c + 1) size - 1)/2), then the padding (border: clamp to [0, size - 1]; reflection: reflect about the
    borders (pixel centres under align_corners, edges otherwise) then clamp), then taps:
      bilinear  floor / floor + 1 with weights 1 - f, f (2 per dim: 4 taps 2-d, 8 taps 3-d)
      nearest   round half to even (nearbyint)
      bicubic   (2-d only) 4 taps at floor - 1 .. floor + 2 of the UNPADDED coordinate, Keys A = -0.75, each tap's
                index through the padding; torch's rule
    A tap outside the input reads 0 (zeros padding; the others never leave it).
grid_sample_backward(grad, x, grid) -> (dx, dgrid): dx scatters w * grad (the Triton kernel adds atomically:
    deterministic=False, as torch's CUDA kernel), dgrid = sum over channels and taps of grad * x * dw/dc times the
    chain of the unnormalize / clamp / reflect derivatives (0 where clamped, the sign of the reflection).
affine_grid(theta, size, align_corners) -> grid: theta (N, 2, 3) with size (N, C, H, W) -> (N, H, W, 2), or
    (N, 3, 4) with (N, C, D, H, W) -> (N, D, H, W, 3); grid[n, p] = theta[n] @ (x_p, y_p[, z_p], 1) with the
    base coordinates linspace(-1, 1, n) (times (n - 1)/n without align_corners; 0 for a size-1 dim).
affine_grid_backward(grad, theta) -> dtheta[n] = sum_p grad[n, p] (x) base_p.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import backward_spec, declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import check_nonneg

__all__ = ["grid_taps", "affine_base", "GRID_MODES", "GRID_PADDING"]

GRID_MODES = ("bilinear", "nearest", "bicubic")
GRID_PADDING = ("zeros", "border", "reflection")
_A = -0.75


# -- the facts: coordinates and taps (float64 NumPy) -------------------------------------------------------------
def _clip(v, size):
    g = np.where((v <= 0) | (v >= size - 1), 0.0, 1.0)
    return np.clip(v, 0, size - 1), g


def _reflect(v, lo2, hi2):
    if lo2 == hi2:
        return np.zeros_like(v), np.zeros_like(v)
    mn, span = lo2 / 2, (hi2 - lo2) / 2
    d = v - mn
    sign = np.where(d < 0, -1.0, 1.0)
    a = np.abs(d)
    extra, flips = np.fmod(a, span), np.floor(a / span)
    even = flips % 2 == 0
    return np.where(even, extra + mn, span - extra + mn), np.where(even, sign, -sign)


def _pad(v, size, padding, align):
    """torch's compute_coordinates with its derivative."""
    if padding == "zeros":
        return v, np.ones_like(v)
    g = np.ones_like(v)
    if padding == "reflection":
        v, g = _reflect(v, 0, 2 * (size - 1)) if align else _reflect(v, -1, 2 * size - 1)
    v, gc = _clip(v, size)
    return v, g * gc


def _cubic_w(t):
    def c1(x):
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def c2(x):
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A

    def d1(x):
        return (3 * (_A + 2) * x - 2 * (_A + 3)) * x

    def d2(x):
        return (3 * _A * x - 10 * _A) * x + 8 * _A
    return (np.stack([c2(t + 1), c1(t), c1(1 - t), c2(2 - t)], -1),
            np.stack([d2(t + 1), d1(t), -d1(1 - t), -d2(2 - t)], -1))


def grid_taps(c, size, mode, padding, align):
    """Taps of one grid coordinate array ``c`` along a spatial dim of ``size``: (idx, w, dw, valid) with a trailing
    tap axis, and mult = d(unpadded or padded source coordinate)/dc (the chain the taps' dw continue)."""
    u = ((c + 1) / 2) * (size - 1) if align else ((c + 1) * size - 1) / 2
    m0 = (size - 1) / 2 if align else size / 2
    if mode == "bicubic":
        i0 = np.floor(u)
        w, dw = _cubic_w(u - i0)
        pos = i0[..., None] + np.arange(-1, 3)
        pos, _ = _pad(pos, size, padding, align)
        idx = np.trunc(pos).astype(np.int64)
        return idx, w, dw, (idx >= 0) & (idx < size), np.full_like(c, m0)
    v, g = _pad(u, size, padding, align)
    if mode == "nearest":
        idx = np.rint(v)[..., None]
        w, dw = np.ones_like(idx), np.zeros_like(idx)
    else:
        i0 = np.floor(v)
        f = v - i0
        idx = np.stack([i0, i0 + 1], -1)
        w, dw = np.stack([1 - f, f], -1), np.stack([-np.ones_like(f), np.ones_like(f)], -1)
    valid = (idx >= 0) & (idx <= size - 1)
    idx = np.where(valid, idx, 0).astype(np.int64)
    return idx, w, dw, valid, m0 * g


def _lin(n, align):
    if n <= 1:
        return np.zeros(max(n, 0))
    r = np.linspace(-1.0, 1.0, n)
    return r if align else r * (n - 1) / n


def affine_base(size, align) -> np.ndarray:
    """(*spatial, nd + 1): (x, y[, z], 1) per output point, x along the last spatial dim."""
    sp = tuple(size[2:])
    axes = np.meshgrid(*[_lin(s, align) for s in sp], indexing="ij")   # (z,) y, x
    return np.stack(list(axes[::-1]) + [np.ones(sp)], -1)


# -- grid_sample -------------------------------------------------------------------------------------------------
_GS_ATTRS = (Attr("mode", "str", "bilinear", choices=GRID_MODES),
             Attr("padding_mode", "str", "zeros", choices=GRID_PADDING),
             Attr("align_corners", "bool", False))


def _check_gs(inputs, attrs):
    op = "grid_sample"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (input, grid)", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    x, grid = inputs
    check_nonneg(op, ("input", "grid"), (x.shape, grid.shape))
    r = len(x.shape)
    if r not in (4, 5):
        raise InvalidProblemError(op, "input", "a 4-d (N, C, H, W) or 5-d (N, C, D, H, W) tensor", x.shape)
    want = f"a {r}-d tensor (N, *out, {r - 2}) with N = {x.shape[0]}"
    if len(grid.shape) != r or grid.shape[0] != x.shape[0] or grid.shape[-1] != r - 2:
        raise InvalidProblemError(op, "grid", want, grid.shape)
    if grid.dtype != x.dtype:
        raise DTypeMismatchError(op, "grid", str(x.dtype), str(grid.dtype))
    if any(s == 0 for s in x.shape[2:]):
        raise InvalidProblemError(op, "input", "non-empty spatial dims", x.shape)
    if attrs["mode"] == "bicubic" and r != 4:
        raise InvalidProblemError(op, "mode", "'bilinear' or 'nearest' for a 5-d input (bicubic is 2-d only)",
                                  "'bicubic'")
    return attrs, (TensorSpec(tuple(x.shape[:2]) + tuple(grid.shape[1:-1]), x.dtype),)


def _g_gs(ctx, d, grads, s):
    r = ctx.op("grid_sample_backward", grads[0], s["input"], s["grid"], **d.attr_dict)
    return tuple(r)


def _peer_gs(x, grid, *, mode, padding_mode, align_corners):
    import torch.nn.functional as F

    return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


def _peer_gs_bw(g, x, grid, **a):
    import torch

    x, grid = x.detach().requires_grad_(True), grid.detach().requires_grad_(True)
    return torch.autograd.grad(_peer_gs(x, grid, **a), (x, grid), g)


def _dropin_gs(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    return (input, grid), {"mode": mode, "padding_mode": padding_mode, "align_corners": bool(align_corners)}


_GS_CASES = [   # (x shape, grid out shape, mode, padding, align)
    ((1, 2, 4, 5), (3, 4), "bilinear", "zeros", False),
    ((2, 1, 3, 4), (2, 3), "bilinear", "border", True),
    ((1, 2, 5, 4), (3, 3), "bilinear", "reflection", False),
    ((1, 2, 4, 5), (3, 2), "nearest", "reflection", True),
    ((1, 2, 4, 5), (3, 3), "bicubic", "zeros", False),
    ((1, 1, 5, 5), (2, 3), "bicubic", "border", True),
    ((1, 1, 4, 4), (3, 2), "bicubic", "reflection", False),
    ((1, 1, 3, 3, 4), (2, 3, 2), "bilinear", "reflection", True),
    ((1, 1, 3, 4, 3), (2, 2, 2), "nearest", "border", False),
    ((0, 2, 3, 3), (2, 2), "bilinear", "zeros", False),
]


def _gs_samples(rng):
    for xs, gs, mode, pad, ac in _GS_CASES:
        nd = len(xs) - 2
        # coordinates spread over [-1.3, 1.3]: some taps fall outside (the padding modes); away from the kinks of
        # the piecewise interpolants only by chance, so the f64 finite-difference check uses a small step
        grid = rng.uniform(-1.3, 1.3, (xs[0],) + gs + (nd,))
        yield Sample((rng.standard_normal(xs), grid), {"mode": mode, "padding_mode": pad, "align_corners": ac},
                     name=f"{xs}{gs}{mode}-{pad}{'-ac' if ac else ''}", grad=mode != "nearest")


def _gs_errors():
    f = ((1, 2, 4, 4), "f32")
    g = ((1, 3, 3, 2), "f32")
    yield ErrorCase((((2, 4, 4), "f32"), g), {}, InvalidProblemError, r"grid_sample: argument 'input': expected a "
                    r"4-d", "rank")
    yield ErrorCase((f, ((1, 3, 3, 3), "f32")), {}, InvalidProblemError, r"argument 'grid': expected a 4-d tensor",
                    "grid-last")
    yield ErrorCase((f, ((2, 3, 3, 2), "f32")), {}, InvalidProblemError, r"argument 'grid'.*N = 1", "grid-batch")
    yield ErrorCase((f, ((1, 3, 3, 2), "f64")), {}, DTypeMismatchError, r"argument 'grid': expected dtype f32",
                    "grid-dtype")
    yield ErrorCase((((1, 2, 3, 4, 4), "f32"), ((1, 2, 3, 3, 3), "f32")), {"mode": "bicubic"}, InvalidProblemError,
                    r"argument 'mode'", "bicubic-3d")
    yield ErrorCase((f, g), {"padding_mode": "circular"}, InvalidProblemError, r"argument 'padding_mode'", "pad")


def _tol(dt):
    # at most 16 taps (bicubic) in f32 and one rounding of the output; the unnormalized coordinate carries the
    # grid's own rounding times size/2 (bf16 grid values: 2^-8 relative of a coordinate), hence the looser halves
    return {DType.f64: (1e-9, 1e-10), DType.f32: (5e-5, 5e-5), DType.f16: (2e-2, 2e-2),
            DType.bf16: (6e-2, 6e-2)}[dt]


def _gs_cost(desc):
    x, grid = desc.inputs[:2]
    y = desc.outputs[0]
    taps = {"nearest": 1, "bilinear": 2 ** (len(x.shape) - 2), "bicubic": 16}[desc.attr("mode")]
    return y.nbytes * (1 + min(taps, 4)) + grid.nbytes, 2 * taps * y.numel


_GS_WL = (Workload("grid_sample-[8,64,128,128]-grid128-bilinear-bf16", ((8, 64, 128, 128), (8, 128, 128, 2)),
                   DType.bf16, {"mode": "bilinear"}, backward=True),
          Workload("grid_sample-[8,64,128,128]-grid128-bicubic-bf16", ((8, 64, 128, 128), (8, 128, 128, 2)),
                   DType.bf16, {"mode": "bicubic"}, backward=True),
          Workload("grid_sample-[8,64,128,128]-grid128-bilinear-f32", ((8, 64, 128, 128), (8, 128, 128, 2)),
                   DType.f32, {"mode": "bilinear", "padding_mode": "reflection"}, backward=True))


# -- affine_grid ---------------------------------------------------------------------------------------------------
def _check_ag(inputs, attrs):
    op = "affine_grid"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (theta)", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    theta = inputs[0]
    size = attrs["size"]
    if len(size) not in (4, 5):
        raise InvalidProblemError(op, "size", "(N, C, H, W) or (N, C, D, H, W)", size)
    if min(size) <= 0:
        raise InvalidProblemError(op, "size", "a positive output size", size)
    nd = len(size) - 2
    want = (size[0], nd, nd + 1)
    if tuple(theta.shape) != want:
        raise InvalidProblemError(op, "theta", f"a batch of {nd}-d affine matrices of shape {want} for size "
                                  f"{tuple(size)}", theta.shape)
    return attrs, (TensorSpec((size[0],) + tuple(size[2:]) + (nd,), theta.dtype),)


def _g_ag(ctx, d, grads, s):
    return (ctx.op("affine_grid_backward", grads[0], s["theta"], **d.attr_dict),)


def _peer_ag(theta, *, size, align_corners):
    import torch.nn.functional as F

    return F.affine_grid(theta, list(size), align_corners=align_corners)


def _peer_ag_bw(g, theta, **a):
    import torch

    theta = theta.detach().requires_grad_(True)
    return torch.autograd.grad(_peer_ag(theta, **a), theta, g)[0]


def _dropin_ag(theta, size, align_corners=None):
    return (theta,), {"size": tuple(size), "align_corners": bool(align_corners)}


def _ag_samples(rng):
    for size, ac in [((2, 3, 4, 5), False), ((1, 1, 3, 1), True), ((2, 1, 2, 3, 4), True), ((1, 2, 3, 2, 1), False),
                     ]:
        nd = len(size) - 2
        yield Sample((rng.standard_normal((size[0], nd, nd + 1)),), {"size": size, "align_corners": ac},
                     name=f"{size}{'-ac' if ac else ''}")


def _ag_errors():
    yield ErrorCase((((1, 2, 3), "f32"),), {"size": (1, 1, 4)}, InvalidProblemError,
                    r"affine_grid: argument 'size': expected \(N, C, H, W\)", "size-rank")
    yield ErrorCase((((1, 3, 4), "f32"),), {"size": (1, 1, 4, 4)}, InvalidProblemError,
                    r"argument 'theta': expected a batch of 2-d affine matrices of shape \(1, 2, 3\)", "theta")
    yield ErrorCase((((1, 2, 3), "f32"),), {"size": (1, 1, 0, 4)}, InvalidProblemError, r"positive output size",
                    "size-zero")


_AG_WL = (Workload("affine_grid-[64,3,224,224]-f32", ((64, 2, 3),), DType.f32, {"size": (64, 3, 224, 224)},
                   backward=True),)

_SPECS: dict[str, OpSpec] = {}


def _reg(spec):
    _SPECS[spec.name] = register_spec(spec)
    return spec


_gs = _reg(OpSpec(name="grid_sample", family="image", category="image", arg_names=("input", "grid"),
                  check=_check_gs, dtypes=FLOAT_TYPES, attrs=_GS_ATTRS, torch_peer=_peer_gs,
                  torch_name="torch.nn.functional.grid_sample", dropin=_dropin_gs, grad=_g_gs,
                  saves=("inputs",), differentiable=(0, 1), samples=_gs_samples, errors=_gs_errors, tol=_tol,
                  grad_tol=_tol, workloads=_GS_WL, cost=_gs_cost,
                  doc="sample input at grid's normalized coordinates (bilinear / nearest / bicubic; zeros / border / "
                      "reflection padding; 2-d and 3-d)."))
_reg(backward_spec(_gs, torch_peer=_peer_gs_bw, cost=lambda d: (3 * d.inputs[0].nbytes + 2 * d.inputs[1].nbytes +
                                                               d.inputs[2].nbytes, 6 * d.inputs[0].numel),
                   doc="fused grid_sample backward: dinput (scattered: atomics in the Triton kernel) and dgrid "
                       "(a channel sum per grid point) in one pass."))
_ag = _reg(OpSpec(name="affine_grid", family="image", category="image", arg_names=("theta",), check=_check_ag,
                  dtypes=FLOAT_TYPES, attrs=(Attr("size", "shape"), Attr("align_corners", "bool", False)),
                  torch_peer=_peer_ag, torch_name="torch.nn.functional.affine_grid", dropin=_dropin_ag, grad=_g_ag,
                  saves=("inputs",), differentiable=(0,), samples=_ag_samples, errors=_ag_errors, tol=_tol,
                  grad_tol=_tol, workloads=_AG_WL,
                  cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, 2 * math.prod(d.outputs[0].shape) *
                                  (len(d.attr("size")) - 1)),
                  doc="the sampling grid of a batch of affine matrices (2-d and 3-d)."))
_reg(backward_spec(_ag, torch_peer=_peer_ag_bw,
                   doc="fused affine_grid backward: dtheta = sum over the grid points of grad (x) base."))

declare_rule_ops(__name__, "grid_sample_backward", "affine_grid_backward")
