"""Elementwise rows for complex numbers: ``conj``, ``real``, ``imag``, ``angle`` (complex -> parts) and ``polar``,
``complex`` (parts -> complex).

Rows only (the mechanism is ``elementwise.py``; complex64/128 support of the other rows is declared in their
``dtypes``).  torch returns views for ``conj``/``real``/``imag``; baracuda materializes the result (an op writes
its output).  Gradients follow torch's convention for complex autograd: the gradient of a real loss L with
respect to z = x + iy is dL/dx + i dL/dy, so ``real``'s gradient is g (as complex), ``imag``'s is i g,
``conj``'s is conj(g), ``angle``'s is g i z / |z|^2 (0 at 0; 0 for real inputs).
"""
from __future__ import annotations

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, UnsupportedError
from .._core.spec import ErrorCase, Workload
from .elementwise import ALL, CPLX, EwDef, _EXTRA_ERRORS, add_ew_ops, cj, dropin_ew, ew_samples, reduce_grad, tp

_PARTS = (DType.f32, DType.f64)   # torch.polar / torch.complex: float and double (half would be complex32)
_N = 16 * 1024 * 1024


def _r(ctx, d, i, g):
    return reduce_grad(ctx, g, d.inputs[i].shape)


def _g_conj(ctx, d, grads, s):
    return (cj(ctx, grads[0]),)


def _g_real(ctx, d, grads, s):
    dt = d.inputs[0].dtype
    return (ctx.op("to_dtype", grads[0], dtype=dt) if dt.is_complex else grads[0],)


def _g_imag(ctx, d, grads, s):   # i g
    g = grads[0]
    return (ctx.op("complex", ctx.op("mul_scalar", g, scalar=0.0), g),)


def _g_polar(ctx, d, grads, s):
    # out = r e^{i t}, L = Re(conj(g) out): dL/dr = Re(conj(g) e^{i t}), dL/dt = -Im(conj(g) out)
    cg = cj(ctx, grads[0])
    t = s["b"]
    e = ctx.op("complex", ctx.op("cos", t), ctx.op("sin", t))
    return (_r(ctx, d, 0, ctx.op("real", ctx.op("mul", cg, e))),
            _r(ctx, d, 1, ctx.op("neg", ctx.op("imag", ctx.op("mul", cg, s["out"])))))


def _g_complex(ctx, d, grads, s):
    g = grads[0]
    return _r(ctx, d, 0, ctx.op("real", g)), _r(ctx, d, 1, ctx.op("imag", g))


def _peer_conj(x):
    import torch

    return torch.conj_physical(x)


def _angle_bw_peer(g, x):
    import torch

    xr = x.detach().clone().requires_grad_(True)
    (dx,) = torch.autograd.grad(torch.angle(xr), xr, g.real if g.is_complex() else g)
    return dx


def _wl(name, dt, n=1):
    return (Workload(f"{name}-16M-{dt}", ((_N,),) * n, dt, backward=True),)


add_ew_ops([
    EwDef("conj", 1, _peer_conj, "torch.conj_physical", "jax.numpy.conj", _g_conj, saves=(), dtypes=ALL + CPLX,
          out="same", dropin=dropin_ew("conj", "input"), aliases=("torch.conj",), workloads=_wl("conj", DType.c64),
          doc="materialized (torch.conj returns a lazy view); identity on real dtypes"),
    EwDef("real", 1, tp("real"), "torch.real", "jax.numpy.real", _g_real, saves=(), dtypes=ALL + CPLX, out="real",
          dropin=dropin_ew("real", "input"), workloads=_wl("real", DType.c64),
          doc="the real part (identity on real dtypes), materialized"),
    EwDef("imag", 1, tp("imag"), "torch.imag", "jax.numpy.imag", _g_imag, saves=(), dtypes=CPLX, out="real",
          dropin=dropin_ew("imag", "input"), workloads=_wl("imag", DType.c64),
          doc="the imaginary part, materialized (torch refuses real tensors too)"),
    EwDef("angle", 1, tp("angle"), "torch.angle", "jax.numpy.angle", bw="x", bw_peer=_angle_bw_peer, dtypes=ALL + CPLX,
          out="real_float", dropin=dropin_ew("angle", "input"),
          workloads=_wl("angle", DType.c64), doc="atan2(imag, real); real inputs give 0 or pi (NaN stays NaN)",
          samples=ew_samples("wide", avoid=(0.0,))),
    EwDef("polar", 2, tp("polar"), "torch.polar", None, _g_polar, saves=("inputs", "outputs"), dtypes=_PARTS,
          out="complex", same_dtype=True,
          dropin=dropin_ew("polar", "abs", "angle", unsupported=("out",)), workloads=_wl("polar", DType.f32, 2),
          doc="abs * (cos(angle) + i sin(angle)); f32 -> c64, f64 -> c128", samples=ew_samples(("positive", "any"))),
    EwDef("complex", 2, tp("complex"), "torch.complex", "jax.lax.complex", _g_complex, saves=(), dtypes=_PARTS,
          out="complex", same_dtype=True, dropin=dropin_ew("complex", "real", "imag", unsupported=("out",)),
          workloads=_wl("complex", DType.f32, 2), doc="real + i imag; f32 -> c64, f64 -> c128"),
])

_EXTRA_ERRORS.update({
    "imag": [ErrorCase((((3,), "f32"),), {}, UnsupportedError, r"imag: argument 'x' has dtype f32", "real-input")],
    "polar": [ErrorCase((((3,), "f32"), ((3,), "f64")), {}, DTypeMismatchError, r"polar: argument 'b': expected dtype f32",
                        "mixed-dtypes"),
              ErrorCase((((3,), "f16"), ((3,), "f16")), {}, UnsupportedError, r"polar: argument 'a' has dtype f16",
                        "complex32")],
    "complex": [ErrorCase((((3,), "c64"), ((3,), "c64")), {}, UnsupportedError,
                          r"complex: argument 'a' has dtype c64; the op is defined for f32, f64", "complex-parts")],
})
