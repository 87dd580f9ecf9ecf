"""Power-average, fractional and inverse pooling (issue 18, item 2): lp_pool1d/2d/3d, fractional_max_pool2d/3d,
max_unpool1d/2d/3d.

lp_pool{n}d(x; norm_type, kernel_size, stride (default kernel_size), ceil_mode) -> y = (K * avg(x^p))^(1/p):
    torch's definition (avg_pool of x^p without padding, count_include_pad, times the kernel volume K, to the 1/p;
    an edge window of ceil_mode is averaged over its clipped size, as there).  Backward composed:
    dx = x^(p-1) * K * avg_pool_backward(grad * y^(1-p)).
fractional_max_pool{2,3}d(x, samples [N, C, nd] in [0, 1); kernel_size, output_size) -> (y, indices)
    window o of a dim starts at int((o + u) a) - int(u a), a = (L - k) / (O - 1), the last at L - k (torch's
    interval sequence, computed in f32 (f64 for f64) as torch's kernels).  The drop-in honours
    ``_random_samples``; without it the samples are drawn exactly as torch draws them: ``torch.rand(N, C, nd,
    dtype=input.dtype, device=input.device)`` from torch's default generator, so ``torch.manual_seed`` reproduces
    torch's own result.  ``output_ratio`` -> output_size = int(L * ratio) as torch.  Backward composed: a
    scatter_add of the gradient through the indices (the indexing family's deterministic or atomic route).
max_unpool{n}d(x, indices; output_size (spatial)) -> y: zeros with y.flat_plane[indices] = x (torch's;
    duplicate indices keep one of the values, unspecified as torch's CUDA kernel).  The drop-in computes torch's
    default output size (in - 1) * stride - 2 * padding + kernel and checks a given one as torch does.  An index
    outside the output plane is an error (the reference raises; the Triton kernel skips it and writes nothing).
    Backward composed: a gather (take_along_dim) of the gradient at the indices.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import InvalidProblemError
from .._core.spec import REQUIRED, Attr, ErrorCase, Sample, TensorSpec, Workload
from .pool import (MAX_POOL_TYPES, _ints, errors_for, pool_cost, pool_operands, pool_tol, reg, same_shape,
                   sliding_check, split_batch)

__all__ = []


# -- lp_pool -----------------------------------------------------------------------------------------------
def _check_lp(nd):
    return sliding_check(f"lp_pool{nd}d", nd, FLOAT_TYPES, ("norm_type", "a non-zero power"))


def _g_lp(ctx, d, grads, s):
    a = d.attr_dict
    p = a["norm_type"]
    nd = int(d.op[-2])
    t = ctx.op("mul", grads[0], ctx.op("pow_scalar", s["out"], exponent=1.0 - p))
    t = ctx.op("avg_pool_backward", t, s["input"], nd=nd, window="sliding", kernel_size=a["kernel_size"],
               stride=a["stride"], padding=(0,) * nd)
    t = ctx.op("mul_scalar", t, scalar=float(math.prod(a["kernel_size"])))
    return (ctx.op("mul", t, ctx.op("pow_scalar", s["input"], exponent=p - 1.0)),)


def _dropin_lp(nd):
    def dropin(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        return (input,), {"norm_type": float(norm_type), "kernel_size": kernel_size, "stride": stride,
                          "ceil_mode": bool(ceil_mode)}
    return dropin


def _peer_lp(nd):
    def peer(x, norm_type, kernel_size, stride=None, ceil_mode=False):
        import torch.nn.functional as F

        k = kernel_size[0] if nd == 1 and isinstance(kernel_size, (tuple, list)) else kernel_size
        return getattr(F, f"lp_pool{nd}d")(x, norm_type, k, stride, ceil_mode)
    return peer


def _lp_samples(nd):
    def samples(rng):
        shape = {1: (2, 3, 9), 2: (2, 2, 5, 6), 3: (1, 2, 4, 5, 4)}[nd]
        # positive values: a non-integer power of a negative number is NaN (in torch too)
        yield Sample((rng.random(shape) + 0.2,), {"norm_type": 1.5, "kernel_size": 3 if nd < 3 else 2, "stride": 2,
                                                  "ceil_mode": True}, name="p1.5-ceil")
        if nd == 2:
            yield Sample((rng.random(shape) + 0.2,), {"norm_type": 2.0, "kernel_size": 2}, name="p2")
    return samples


# -- fractional_max_pool -------------------------------------------------------------------------------------
def _check_frac(nd):
    op = f"fractional_max_pool{nd}d"

    def check(inputs, attrs):
        x, u = pool_operands(op, inputs, nd, FLOAT_TYPES, ("input", "samples"))
        n, c, sp = split_batch(x.shape, nd)
        same_shape(op, ("samples",), (u,), (n, c, nd), x.dtype)
        k, out = attrs["kernel_size"], attrs["output_size"]
        for L, kk, o in zip(sp, k, out):
            # torch's checks: <= for 2-d, strictly < for 3-d
            if o + kk - 1 > L or (nd == 3 and o + kk - 1 == L):
                raise InvalidProblemError(op, "output_size", f"output_size + kernel_size - 1 {'<' if nd == 3 else '<='}"
                                          f" the input size {sp} (kernel_size {k})", out)
        shape = tuple(x.shape[:-nd]) + out
        return attrs, (TensorSpec(shape, x.dtype), TensorSpec(shape, DType.i64))
    return check


def _g_frac(ctx, d, grads, s):
    x = s["input"]
    nd = int(d.op[-2])
    shape = tuple(x.shape)
    n, c, sp = split_batch(shape, nd)
    P = n * c
    g2 = ctx.reshape(grads[0], (P, math.prod(grads[0].shape[-nd:])))
    i2 = ctx.reshape(s["out1"], (P, math.prod(grads[0].shape[-nd:])))
    z = ctx.reshape(ctx.op("zeros_like", x), (P, math.prod(sp)))
    return (ctx.reshape(ctx.op("scatter_add", z, i2, g2, dim=1), shape), None)


def _dropin_frac(nd):
    def dropin(input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        import torch

        op = f"fractional_max_pool{nd}d"
        if output_size is None and output_ratio is None:
            raise InvalidProblemError(op, "output_size", "output_size or output_ratio", "neither")
        if output_size is None:
            ratio = (output_ratio,) * nd if not isinstance(output_ratio, (list, tuple)) else tuple(output_ratio)
            if len(ratio) != nd or not all(0 < r < 1 for r in ratio):
                raise InvalidProblemError(op, "output_ratio", f"{nd} ratios in (0, 1)", output_ratio)
            output_size = tuple(int(input.size(-nd + j) * ratio[j]) for j in range(nd))
        if _random_samples is None:    # torch's own draw (torch.nn.functional), same generator and shape
            n_batch = 1 if input.dim() == nd + 1 else input.size(0)
            _random_samples = torch.rand(n_batch, input.size(-nd - 1), nd, dtype=input.dtype, device=input.device)
        return ((input, _random_samples), {"kernel_size": kernel_size, "output_size": output_size},
                tuple if return_indices else (lambda out: out[0]))
    return dropin


def _peer_frac(nd):
    def peer(x, u, kernel_size, output_size):
        import torch.nn.functional as F

        return getattr(F, f"fractional_max_pool{nd}d")(x, kernel_size, output_size, return_indices=True,
                                                       _random_samples=u)
    return peer


def _frac_samples(nd):
    def samples(rng):
        shape = (2, 3, 9, 8) if nd == 2 else (1, 2, 6, 7, 6)
        n, c = shape[0], shape[1]
        yield Sample((rng.standard_normal(shape), rng.random((n, c, nd))),
                     {"kernel_size": 2, "output_size": (4,) * nd}, name="k2")
        if nd == 2:
            yield Sample((rng.standard_normal((3, 7, 7)), rng.random((1, 3, 2))),
                         {"kernel_size": (3, 2), "output_size": (5, 3)}, name="unbatched")
    return samples


def _frac_errors(nd):
    op = f"fractional_max_pool{nd}d"

    def errors():
        x = ((2, 3) + (6,) * nd, "f32")
        u = ((2, 3, nd), "f32")
        yield ErrorCase((x, u), {"kernel_size": 3, "output_size": 5}, InvalidProblemError,
                        rf"{op}: argument 'output_size': expected output_size \+ kernel_size - 1 <", "too-large")
        yield ErrorCase((x, ((2, 3, nd + 1), "f32")), {"kernel_size": 2, "output_size": 2}, InvalidProblemError,
                        rf"{op}: argument 'samples'", "samples-shape")
        yield ErrorCase((x, u), {"kernel_size": 2, "output_size": 0}, InvalidProblemError,
                        rf"{op}: argument 'output_size': expected positive ints", "out-0")
    return errors


# -- max_unpool ----------------------------------------------------------------------------------------------
def _check_unpool(nd):
    op = f"max_unpool{nd}d"

    def check(inputs, attrs):
        x, idx = pool_operands(op, inputs, nd, MAX_POOL_TYPES, ("input", "indices"))
        same_shape(op, ("indices",), (idx,), x.shape, DType.i64)
        return attrs, (TensorSpec(tuple(x.shape[:-nd]) + attrs["output_size"], x.dtype),)
    return check


def _g_unpool(ctx, d, grads, s):
    if grads[0] is None or not d.dtype.is_floating:     # (an integer input: no gradient)
        return (None, None)
    idx = s["indices"]
    nd = int(d.op[-2])
    n, c, sp = split_batch(tuple(idx.shape), nd)
    g2 = ctx.reshape(grads[0], (n * c, math.prod(grads[0].shape[-nd:])))
    r = ctx.op("take_along_dim", g2, ctx.reshape(idx, (n * c, math.prod(sp))), dim=1)
    return (ctx.reshape(r, tuple(idx.shape)), None)


def _dropin_unpool(nd):
    def dropin(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        op = f"max_unpool{nd}d"

        def tup(v, name):
            t = (v,) * nd if isinstance(v, int) else tuple(v)
            if len(t) == 1:
                t = t * nd
            if len(t) != nd:
                raise InvalidProblemError(op, name, f"an int or a tuple of {nd} ints", v)
            return t
        k = tup(kernel_size, "kernel_size")
        s = tup(stride if stride is not None and stride != [] else k, "stride")
        p = tup(padding, "padding")
        sp = tuple(input.shape[-nd:])
        default = tuple((L - 1) * ss - 2 * pp + kk for L, kk, ss, pp in zip(sp, k, s, p))
        if output_size is None:
            out = default
        else:
            out = tuple(output_size)
            if len(out) == nd + 2 or len(out) == nd + 1:
                out = out[-nd:]
            if len(out) != nd:
                raise InvalidProblemError(op, "output_size", f"{nd}, {nd + 1} or {nd + 2} sizes", output_size)
            for j, (o, dflt) in enumerate(zip(out, default)):
                if not dflt - s[j] < o < dflt + s[j]:
                    raise InvalidProblemError(op, "output_size", f"dim {j} between {dflt - s[j]} and "
                                              f"{dflt + s[j]} (exclusive)", tuple(output_size))
        return (input, indices), {"output_size": tuple(int(o) for o in out)}
    return dropin


def _peer_unpool(nd):
    def peer(x, idx, output_size):
        import torch.nn.functional as F

        return getattr(F, f"max_unpool{nd}d")(x, idx, 3, 2, 0, output_size=output_size)   # the samples' geometry
    return peer


def _unpool_samples(nd):
    def samples(rng):
        # distinct indices per plane (a max_pool's with stride >= kernel): duplicates would leave the value unspecified
        shape = {1: (2, 3, 4), 2: (2, 2, 3, 3), 3: (1, 2, 2, 3, 2)}[nd]
        n, c, sp = split_batch(shape, nd)
        out = tuple(2 * L + 1 for L in sp)
        L = math.prod(out)
        idx = np.stack([rng.permutation(L)[:math.prod(sp)] for _ in range(n * c)])
        yield Sample((rng.standard_normal(shape) * 4, idx.reshape(shape).astype("int64")), {"output_size": out},
                     name="distinct")
    return samples


def _unpool_errors(nd):
    op = f"max_unpool{nd}d"

    def errors():
        x = ((2, 3) + (3,) * nd, "f32")
        yield ErrorCase((x, ((2, 3) + (3,) * nd, "i32")), {"output_size": (6,) * nd}, Exception,
                        rf"{op}: argument 'indices'", "idx-dtype")
        yield ErrorCase((x, ((2, 3) + (2,) * nd, "i64")), {"output_size": (6,) * nd}, InvalidProblemError,
                        rf"{op}: argument 'indices': expected shape", "idx-shape")
        yield ErrorCase((x, ((2, 3) + (3,) * nd, "i64")), {"output_size": (6,) * (nd + 1)}, InvalidProblemError,
                        rf"{op}: argument 'output_size'", "out-len")
    return errors


_WL = {
    "fractional_max_pool2d": (Workload("fractional_max_pool2d-[32,64,112,112]k3to56-bf16",
                                       ((32, 64, 112, 112), (32, 64, 2)), DType.bf16,
                                       {"kernel_size": 3, "output_size": 56}, backward=True),),
    "lp_pool2d": (Workload("lp_pool2d-[64,64,56,56]p2k3s2-bf16", ((64, 64, 56, 56),), DType.bf16,
                           {"norm_type": 2.0, "kernel_size": 3, "stride": 2}, backward=True),),
    "max_unpool2d": (),
}

for _nd in (1, 2, 3):
    reg(name=f"lp_pool{_nd}d", arg_names=("input",), check=_check_lp(_nd), dtypes=FLOAT_TYPES,
        attrs=(Attr("norm_type", "float", REQUIRED), _ints("kernel_size", _nd, 1, REQUIRED, "positive int"),
               _ints("stride", _nd, 1, None, "positive int", optional=True), Attr("ceil_mode", "bool", False)),
        torch_peer=_peer_lp(_nd), torch_name=f"torch.nn.functional.lp_pool{_nd}d", dropin=_dropin_lp(_nd),
        grad=_g_lp, saves=("input", "out"), differentiable=(0,), samples=_lp_samples(_nd),
        errors=errors_for(f"lp_pool{_nd}d", _nd, {"norm_type": 2.0, "kernel_size": 2}, padding=False),
        tol=pool_tol, grad_tol=pool_tol, workloads=_WL.get(f"lp_pool{_nd}d", ()), cost=pool_cost(3),
        doc=f"{_nd}-d power-average pooling (torch's lp_pool: (K * avg(x^p))^(1/p)).")
    reg(name=f"max_unpool{_nd}d", arg_names=("input", "indices"), check=_check_unpool(_nd), dtypes=MAX_POOL_TYPES,
        attrs=(_ints("output_size", _nd, 0, REQUIRED, "non-negative int"),), torch_peer=_peer_unpool(_nd),
        torch_name=f"torch.nn.functional.max_unpool{_nd}d", dropin=_dropin_unpool(_nd), grad=_g_unpool,
        saves=("indices",), differentiable=(0,), samples=_unpool_samples(_nd), errors=_unpool_errors(_nd),
        tol=pool_tol, grad_tol=pool_tol, cost=pool_cost(0),
        doc=f"{_nd}-d max unpooling: zeros with each plane's indices set to the input's values.")
for _nd in (2, 3):
    reg(name=f"fractional_max_pool{_nd}d", arg_names=("input", "samples"), check=_check_frac(_nd), dtypes=FLOAT_TYPES,
        attrs=(_ints("kernel_size", _nd, 1, REQUIRED, "positive int"),
               _ints("output_size", _nd, 1, REQUIRED, "positive int")),
        torch_peer=_peer_frac(_nd), torch_name=f"torch.nn.functional.fractional_max_pool{_nd}d",
        dropin=_dropin_frac(_nd), grad=_g_frac, saves=("input", "out1"), differentiable=(0,),
        samples=_frac_samples(_nd), errors=_frac_errors(_nd), tol=pool_tol, grad_tol=pool_tol,
        workloads=_WL.get(f"fractional_max_pool{_nd}d", ()), cost=pool_cost(),
        doc=f"{_nd}-d fractional max pooling with explicit samples -> (values, indices) (torch's intervals).")

declare_rule_ops(__name__, "mul", "pow_scalar", "avg_pool_backward", "mul_scalar", "zeros_like", "scatter_add",
                 "take_along_dim")
