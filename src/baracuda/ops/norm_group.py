"""Normalization over groups, channels and windows (issue 4): group_norm, instance_norm, batch_norm,
local_response_norm, normalize (F.normalize).

group_norm(x[, weight[, bias]], num_groups, eps) -> (y, mean, rstd)
    x is (N, C, *); statistics per (sample, group) over C/num_groups channels x the spatial dims.
    mean and rstd are (N, num_groups) in x's dtype (as torch.native_group_norm) and are what the backward
    reads (no second statistics pass in the backward).
instance_norm(x[, weight[, bias]], eps) -> (y, mean, rstd): group_norm with one group per channel
    (use_input_stats=True).  F.instance_norm with running statistics is the drop-in's composition of batch_norm
    (torch's own: batch_norm over the (1, N*C, *) view, torch/_composed.py).
batch_norm(x[, weight[, bias][, running_mean, running_var]], training, momentum, eps)
    training: statistics per channel over N x spatial; outputs (y, mean, rstd) and, when the running
      statistics are given, (new_running_mean, new_running_var) = (1 - momentum) * old + momentum * batch
      statistic, with the UNBIASED batch variance for running_var (as torch).  The plan API never writes
      its inputs: the new running statistics are outputs, and the drop-in F.batch_norm copies them into
      the caller's running_mean / running_var buffers (torch mutates them in place), outside autograd.
    eval (training=False): uses the running statistics (required); outputs (y, running_mean,
      rsqrt(running_var + eps)) so every mode has the same (y, mean, rstd) head.
    Gradients flow to x, weight, bias (the running statistics are buffers: no gradient, as torch).
local_response_norm(x, size, alpha, beta, k): y = x / (k + alpha/size * sum_window x^2)^beta across
    channels, window [c - size//2, c + (size-1)//2] zero-padded (torch's avg_pool of the padded squares).
normalize(x, p, dim, eps): y = x / max(||x||_p, eps) along dim, any p as torch.norm: p = 0 counts the nonzeros
    (no gradient through the norm), p < 0 gives 0 where an entry is 0, p = inf the max.

Gradients of the statistics outputs (mean, rstd, new running stats) are the exact derivatives with respect
to x (composed from elementwise ops, only when such a gradient is given: torch passes None for unused
outputs); the gradient of y goes through one fused backward op per family.
"""
from __future__ import annotations

import functools
import math

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import Layout, check_nonneg, float_operands, suggest_channels_last

__all__ = ["GROUP_NORM_OPS", "affine_operands"]

GROUP_NORM_OPS = ("group_norm", "instance_norm", "batch_norm", "local_response_norm", "normalize")
_AFF = ("weight", "bias")


def _eps(default):
    # any real eps, as torch (a negative one makes var + eps < 0 rows NaN, as there)
    return Attr("eps", "float", default)


_GROUPS = Attr("num_groups", "int", gt=0, expected="a positive int dividing the channels")
_BW_FLAGS = (Attr("has_bias", "bool", False), Attr("extra", "bool", False))
_LRN = (Attr("size", "int", ge=1, expected="a positive int"), Attr("alpha", "float", 1e-4),
        Attr("beta", "float", 0.75), Attr("k", "float", 1.0),
        # the window mean of the squares rounded down: torch's integer avg_pool when x is an integer tensor
        # (the drop-in casts it and sets this); piecewise constant, so the forward only
        Attr("floor_mean", "bool", False))
_NORMALIZE = (Attr("p", "float", 2.0), Attr("dim", "axis", 1),   # any p, as torch.norm (0: the nonzero count)
              _eps(1e-12))


def _same(op, x, names, ts, shape):
    for n, t in zip(names, ts):
        if t.shape != shape:
            raise InvalidProblemError(op, n, f"shape {shape}", t.shape)
        if t.dtype != x.dtype:
            raise DTypeMismatchError(op, n, str(x.dtype), str(t.dtype))


def _head(op, inputs, counts, rank_min, what):
    if len(inputs) not in counts:
        raise InvalidProblemError(op, "inputs", what, len(inputs))
    x = inputs[0]
    _SPECS[op].check_dtypes(inputs)
    check_nonneg(op, ("x",), (x.shape,))
    if len(x.shape) < rank_min:
        raise InvalidProblemError(op, "x", f"at least {rank_min} dimensions (N, C, *)", x.shape)
    return x


# -- group_norm / instance_norm ------------------------------------------------------------------
def _check_gn(op):
    def check(inputs, attrs):
        inst = op == "instance_norm"
        x = _head(op, inputs, (1, 2, 3), 3 if inst else 2, "1 to 3 operands (x, weight, bias)")
        c = x.shape[1]
        if inst:
            g = c
            if math.prod(x.shape[2:]) == 1:
                raise InvalidProblemError(op, "x", "more than 1 spatial element per channel", x.shape)
        else:
            g = attrs["num_groups"]
            if c % g:
                raise InvalidProblemError(op, "num_groups", f"a positive int dividing the {c} channels", repr(g))
        _same(op, x, _AFF, inputs[1:], (c,))
        st = TensorSpec((x.shape[0], g), x.dtype)
        return attrs, (TensorSpec(x.shape, x.dtype), st, st)
    return check


def _check_stats_bw(op):
    """group_norm_backward / batch_norm_backward: (grad, x, mean, rstd[, weight][, c0, c1]).

    extra=True appends c0, c1 (the statistics' shape): dx += c0 + c1 * xhat, the gradient that flows through the
    mean/rstd (and running-stat) outputs, folded into the dx pass instead of separate elementwise ops."""
    group = op.startswith("group")

    def check(inputs, attrs):
        extra = attrs["extra"]
        base = len(inputs) - 2 * extra
        if base not in (4, 5):
            raise InvalidProblemError(op, "inputs", "4 or 5 operands (grad, x, mean, rstd[, weight]) + (c0, c1) with "
                                      "extra=True", len(inputs))
        _SPECS[op].check_dtypes(inputs)
        g, x = inputs[:2]
        check_nonneg(op, ("grad", "x"), (g.shape, x.shape))
        if len(x.shape) < 2 or g.shape != x.shape:
            raise InvalidProblemError(op, "x", f"the shape of 'grad' {g.shape} with at least 2 dimensions", x.shape)
        _same(op, g, ("x",), (x,), x.shape)
        if group:
            ng = attrs["num_groups"]
            if x.shape[1] % ng:
                raise InvalidProblemError(op, "num_groups", f"a positive int dividing the {x.shape[1]} channels",
                                          repr(ng))
            st = (x.shape[0], ng)
        else:
            st = (x.shape[1],)
        _same(op, g, ("mean", "rstd"), inputs[2:4], st)
        _same(op, g, ("weight",), inputs[4:base], (x.shape[1],))
        _same(op, g, ("c0", "c1"), inputs[base:], st)
        hb = attrs["has_bias"]
        if hb and base != 5:
            raise InvalidProblemError(op, "has_bias", "False without a weight operand", True)
        outs = (TensorSpec(x.shape, x.dtype),) + (TensorSpec((x.shape[1],), x.dtype),) * ((base == 5) + hb)
        return attrs, outs
    return check


def _stat_terms(ctx, dx, x, shape3, mean3, rstd3, c0, c1):
    """dx + c0 + c1 * xhat with xhat = (x - mean) * rstd, broadcast in the (A, B, L) view of x."""
    if c0 is None and c1 is None:
        return dx
    x3 = ctx.reshape(x, shape3)
    xhat = ctx.op("mul", ctx.op("sub", x3, mean3), rstd3)
    if c1 is not None:
        term = ctx.op("mul", xhat, ctx.reshape(c1, tuple(mean3.shape)))
    else:
        term = ctx.op("mul_scalar", xhat, scalar=0.0)
    if c0 is not None:
        term = ctx.op("add", term, ctx.reshape(c0, tuple(mean3.shape)))
    term = ctx.reshape(term, tuple(x.shape))
    return term if dx is None else ctx.op("add", dx, term)


def _mean_rstd_coefs(ctx, gm, gr, rstd, n):
    """d mean / dx_i = 1/n;  d rstd / dx_i = -rstd^2 * xhat_i / n  (biased variance)."""
    c0 = None if gm is None else ctx.op("mul_scalar", gm, scalar=1.0 / n)
    c1 = None if gr is None else ctx.op("mul_scalar", ctx.op("mul", gr, ctx.op("mul", rstd, rstd)), scalar=-1.0 / n)
    return c0, c1


def _g_gn(ctx, d, grads, s):
    gy, gm, gr = grads
    x = s["x"]
    shape = d.inputs[0].shape
    n, c = shape[0], shape[1]
    g = d.attr("num_groups") if d.op == "group_norm" else c
    naff = len(d.inputs) - 1
    L = math.prod(shape) // max(n * g, 1) if n * g else 1
    c0, c1 = _mean_rstd_coefs(ctx, gm, gr, s["out2"], max(L, 1))
    if gy is None:
        shape3 = (n, g, math.prod(shape[1:]) // g if g else 0)
        dx = _stat_terms(ctx, None, x, shape3, ctx.reshape(s["out1"], (n, g, 1)), ctx.reshape(s["out2"], (n, g, 1)),
                         c0, c1)
        return (dx,) + (None,) * naff
    return _fused_bw(ctx, "group_norm_backward", gy, x, s, naff, c0, c1, num_groups=g)


# -- batch_norm ------------------------------------------------------------------------------------
def _check_bn(inputs, attrs):
    op = "batch_norm"
    x = _head(op, inputs, (1, 2, 3, 5), 2, "1, 2, 3 or 5 operands (x[, weight[, bias]][, running_mean, running_var])")
    c = x.shape[1]
    _same(op, x, ("weight", "bias", "running_mean", "running_var"), inputs[1:], (c,))
    tr = attrs["training"]
    m = x.numel // c if c else 0
    if not tr and len(inputs) != 5:
        raise InvalidProblemError(op, "running_mean", "running_mean and running_var (eval mode uses them)", "nothing")
    if tr and m <= 1:
        raise InvalidProblemError(op, "x", "more than 1 value per channel when training", x.shape)
    a = attrs
    st = TensorSpec((c,), x.dtype)
    outs = (TensorSpec(x.shape, x.dtype), st, st) + ((st, st) if tr and len(inputs) == 5 else ())
    return a, outs


def _g_bn(ctx, d, grads, s):
    x = s["x"]
    shape = d.inputs[0].shape
    c = shape[1]
    m = math.prod(shape) // c if c else 0
    naff = min(len(d.inputs) - 1, 2)
    tr = d.attr("training")
    c0 = c1 = None
    if tr:   # eval: mean/rstd are functions of the running statistics only (no gradient to x)
        gm, gr = grads[1], grads[2]
        c0, c1 = _mean_rstd_coefs(ctx, gm, gr, s["out2"], m)
        if len(grads) == 5:
            mom = d.attr("momentum")
            if grads[3] is not None:   # new_rm = (1 - mom) rm + mom * mean
                t = ctx.op("mul_scalar", grads[3], scalar=mom / m)
                c0 = t if c0 is None else ctx.op("add", c0, t)
            if grads[4] is not None:   # new_rv = ... + mom * var * m/(m-1);  d/dx_i = 2 mom xhat_i / (rstd (m-1))
                t = ctx.op("mul_scalar", ctx.op("div", grads[4], s["out2"]), scalar=2.0 * mom / (m - 1))
                c1 = t if c1 is None else ctx.op("add", c1, t)
    if grads[0] is None:
        shape3 = (shape[0], c, m // shape[0] if shape[0] else 0)
        dx = _stat_terms(ctx, None, x, shape3, ctx.reshape(s["out1"], (1, c, 1)), ctx.reshape(s["out2"], (1, c, 1)),
                         c0, c1)
        return ((dx,) + (None,) * 4)[: len(d.inputs)]
    r = _fused_bw(ctx, "batch_norm_backward", grads[0], x, s, naff, c0, c1, training=tr)
    return (r + (None,) * 2)[: len(d.inputs)]


def _fused_bw(ctx, op, gy, x, s, naff, c0, c1, **attrs):
    """The fused backward op; the statistics' gradient coefficients (c0, c1) ride along as extra operands."""
    extra = c0 is not None or c1 is not None
    ins = [gy, x, s["out1"], s["out2"]] + ([s["weight"]] if naff else [])
    if extra:
        zero = ctx.op("mul_scalar", s["out2"], scalar=0.0)
        ins += [zero if c0 is None else c0, zero if c1 is None else c1]
    r = ctx.op(op, *ins, has_bias=naff == 2, extra=extra, **attrs)
    return tuple(r) if isinstance(r, tuple) else (r,)


# -- local_response_norm / normalize ------------------------------------------------------------
def _check_lrn(op):
    def check(inputs, attrs):
        x = _head(op, inputs, (2,) if op.endswith("backward") else (1,), 3,
                  "2 operands (grad, x)" if op.endswith("backward") else "1 operand")
        _same(op, x, ("x",), inputs[1:], x.shape)
        if op.endswith("backward") and attrs["floor_mean"]:
            raise InvalidProblemError(op, "floor_mean", "False (an integer input has no gradient)", True)
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


def _check_normalize(op):
    def check(inputs, attrs):
        x = _head(op, inputs, (2,) if op.endswith("backward") else (1,), 0,   # 0-d: a 1-element row (dim 0 / -1)
                  "2 operands (grad, x)" if op.endswith("backward") else "1 operand")
        _same(op, x, ("x",), inputs[1:], x.shape)
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


def _g_lrn(ctx, d, grads, s):
    return (ctx.op("local_response_norm_backward", grads[0], s["x"], **d.attr_dict),)


def _g_normalize(ctx, d, grads, s):
    return (ctx.op("normalize_backward", grads[0], s["x"], **d.attr_dict),)


# -- peers and drop-ins ----------------------------------------------------------------------------
def _peer_gn(x, *aff, num_groups, eps):
    import torch

    n, c = x.shape[:2]
    w, b = (list(aff) + [None, None])[:2]
    # torch's own (y, mean, rstd): an empty group has mean 0 and rstd NaN there
    return torch.native_group_norm(x, w, b, n, c, math.prod(x.shape[2:]), num_groups, eps)


def _peer_in(x, *aff, eps):
    return _peer_gn(x, *aff, num_groups=x.shape[1], eps=eps)


def _peer_bn(x, *ins, training, momentum, eps):
    import torch
    import torch.nn.functional as F

    aff = ins[: min(len(ins), 2)]
    run = ins[2:4]
    w, b = (list(aff) + [None, None])[:2]
    c = x.shape[1]
    if not training:
        rm, rv = run
        return F.batch_norm(x, rm, rv, w, b, False, momentum, eps), rm, torch.rsqrt(rv + eps)
    x3 = x.transpose(0, 1).reshape(c, -1)
    var, mean = torch.var_mean(x3, dim=1, unbiased=False)
    y = F.batch_norm(x, None, None, w, b, True, momentum, eps)
    outs = (y, mean, torch.rsqrt(var + eps))
    if run:
        m = x3.shape[1]
        rm, rv = run
        outs += ((1 - momentum) * rm + momentum * mean, (1 - momentum) * rv + momentum * var * (m / (m - 1)))
    return outs


def _peer_lrn(x, *, size, alpha, beta, k, floor_mean=False):
    import torch.nn.functional as F

    if floor_mean:    # torch's integer path (avg_pool of the integer squares rounds down), in x's dtype
        c, lo = x.shape[1], size // 2
        sq = F.pad(x * x, (0, 0) * (x.dim() - 2) + (lo, size - 1 - lo))
        s = sum(sq[:, j: j + c] for j in range(size))
        return x / (alpha * (s / size).floor() + k) ** beta
    return F.local_response_norm(x, size, alpha, beta, k)


def _peer_normalize(x, *, p, dim, eps):
    import torch.nn.functional as F

    return F.normalize(x, p, dim, eps)


def affine_operands(input, weight, bias, need_bias=False):
    """The affine operands of a (N, C, *) norm: (weight[, bias]) as given, with ones for a missing weight where a
    bias follows (or ``need_bias``: the op's operand positions then need both) and zeros for a missing bias."""
    import torch

    c = input.shape[1]
    if weight is None and (bias is not None or need_bias):
        weight = torch.ones(c, dtype=input.dtype, device=input.device)
    if bias is None and need_bias:
        bias = torch.zeros(c, dtype=input.dtype, device=input.device)
    return tuple(t for t in (weight, bias) if t is not None)


def _dropin_gn(input, num_groups, weight=None, bias=None, eps=1e-5):
    return (input,) + affine_operands(input, weight, bias), {"num_groups": num_groups, "eps": eps}


def _dropin_in(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
               momentum=0.1, eps=1e-5):
    if use_input_stats and math.prod(input.shape[2:]) == 1:   # torch.nn.functional's own check
        raise InvalidProblemError("instance_norm", "input", "more than 1 spatial element when using the input "
                                  "statistics", tuple(input.shape))
    if running_mean is not None or running_var is not None or not use_input_stats:
        return None     # running statistics: composed of batch_norm by baracuda.torch (torch/_composed.py)
    return (input,) + affine_operands(input, weight, bias), {"eps": eps}


@functools.cache
def _torch_takes_zero_eps_in_eval() -> bool:
    """torch 2.13 takes eps = 0 in evaluation; earlier versions refuse it: the drop-in agrees with the torch it runs
    beside (asked once, on a 1x1 CPU tensor)."""
    import torch

    try:
        torch.nn.functional.batch_norm(torch.ones(1, 1), torch.zeros(1), torch.ones(1), training=False, eps=0.0)
    except (ValueError, RuntimeError):
        return False
    return True


def _dropin_bn(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Returns a third element: the finisher that copies the new running statistics into the caller's buffers
    (torch updates them in place) and returns y."""
    import torch

    if (running_mean is None) != (running_var is None):
        raise InvalidProblemError("batch_norm", "running_var", "both running statistics or neither", "only one")
    if eps < 0 or (eps == 0 and (training or not _torch_takes_zero_eps_in_eval())):
        # torch.nn.functional's own check (the op takes any eps); eps = 0 in evaluation depends on torch's version
        raise InvalidProblemError("batch_norm", "eps", "a positive eps" + (
            " when training, non-negative otherwise" if _torch_takes_zero_eps_in_eval() else ""), eps)
    if momentum is None:
        raise UnsupportedError("batch_norm", "momentum=None (cumulative moving average) is not supported")
    shape = input.shape
    if input.numel() == 0:
        # torch returns an empty result and leaves the running statistics alone: eval mode on the batch's
        # channels does exactly that (a 1-D empty input is [0, C], C from the statistics or the affine weights)
        c = next((t.numel() for t in (running_mean, weight, bias) if t is not None), 0)
        input = input.reshape(0, c) if input.dim() < 2 else input
        if running_mean is None:
            running_mean, running_var = input.new_zeros(input.shape[1]), input.new_ones(input.shape[1])
        training = False
    has_run = running_mean is not None
    attrs = {"training": bool(training), "momentum": momentum, "eps": eps}
    affine = affine_operands(input, weight, bias, need_bias=has_run) + ((running_mean, running_var) if has_run else ())

    def copy_stats(out):
        if training and has_run:
            with torch.no_grad():   # (one multi-tensor copy launch for both buffers, not two)
                torch._foreach_copy_([running_mean, running_var], [out[3], out[4]])

    def finish(out):
        copy_stats(out)
        # the op's own output, not a view of it (reshape to the same shape is a view): code that then writes into
        # y in place (ResNet's residual ``+=``) would make the backward rebuild the view's base (CopySlices:
        # a full-size zero fill, a copy and a clone per write)
        return out[0] if out[0].shape == shape else out[0].reshape(shape)
    if suggest_channels_last(input):
        # channels-last activations: the plan's problem is the [N * spatial, C] matrix they already are (the
        # statistics of each channel over every other dim, as for (N, C, *)); y comes back channels-last, as torch's
        # (an NCHW result would make the next convolution convert it back)
        c, nhwc = input.shape[1], input.movedim(1, -1)

        def finish_laid_out(out):      # (y already came back through the layout)
            copy_stats(out)
            return out[0]
        lay = Layout(lambda o: o.reshape(nhwc.shape).movedim(-1, 1), lambda g: g.movedim(1, -1).reshape(-1, c), 2,
                     input.dim(), finish=finish_laid_out)
        return (nhwc.reshape(-1, c),) + affine, attrs, lay
    return (input,) + affine, attrs, finish


def _dropin_lrn(input, size, alpha=1e-4, beta=0.75, k=1.0):
    integer = not (input.is_floating_point() or input.is_complex())
    # torch returns an empty input as it is (an integer one keeps its dtype)
    finish = (lambda out: out.to(input.dtype)) if integer and input.numel() == 0 else None
    return float_operands(input), {"size": size, "alpha": alpha, "beta": beta, "k": k, "floor_mean": integer}, finish


def _dropin_normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None:
        raise UnsupportedError("normalize", "out= is not supported")
    return (input,), {"p": float(p), "dim": dim, "eps": eps}


# -- samples, errors, workloads ------------------------------------------------------------------
_GN_SHAPES = [((2, 6, 5), 3), ((3, 4), 2), ((2, 4, 3, 3), 4), ((1, 6, 7), 1), ((0, 4, 3), 2), ((2, 8, 40), 2),
              ((2, 4, 0), 2)]   # empty groups: rstd NaN (torch)


def _gn_samples(rng):
    for shape, g in _GN_SHAPES:
        for naff in (0, 1, 2):
            ins = (rng.standard_normal(shape) * 2 + 0.5,) + tuple(rng.standard_normal(shape[1]) for _ in range(naff))
            yield Sample(ins, {"num_groups": g, "eps": 1e-5}, name=f"{shape}g{g}aff{naff}", grad=shape[0] * 4 < 60)


def _in_samples(rng):
    for shape in [(2, 3, 5), (2, 2, 3, 3), (0, 3, 4), (1, 2, 70)]:
        for naff in (0, 2):
            ins = (rng.standard_normal(shape) + 1.0,) + tuple(rng.standard_normal(shape[1]) for _ in range(naff))
            yield Sample(ins, {"eps": 1e-5}, name=f"{shape}aff{naff}")


def _gn_bw_samples(op):
    def samples(rng):
        for shape, g in _GN_SHAPES:
            n, c = shape[0], shape[1]
            gg = g if op == "group_norm_backward" else c
            x = rng.standard_normal(shape) * 2 + 0.5
            st = (rng.standard_normal((n, gg)) * 0.1 + 0.5, rng.random((n, gg)) + 0.5) if op.startswith("group") \
                else (rng.standard_normal(c) * 0.1 + 0.5, rng.random(c) + 0.5)
            for w, hb, ex in ((False, False, False), (True, False, False), (True, True, False), (False, False, True),
                              (True, True, True)):
                ins = (rng.standard_normal(shape), x) + st + ((rng.standard_normal(c),) if w else ())
                ins += tuple(rng.standard_normal(st[0].shape) for _ in range(2 * ex))
                a = {"num_groups": gg} if op.startswith("group") else {"training": shape[0] != 1}
                yield Sample(ins, dict(a, has_bias=hb, extra=ex), name=f"{shape}w{w}b{hb}x{ex}", grad=False)
    return samples


_BN_SHAPES = [(4, 3), (2, 3, 5), (3, 2, 2, 3), (1, 4, 7), (5, 2, 33)]


def _bn_samples(rng):
    for shape in _BN_SHAPES:
        c = shape[1]
        x = rng.standard_normal(shape) * 2 + 0.5
        w, b = rng.standard_normal(c), rng.standard_normal(c)
        rm, rv = rng.standard_normal(c), rng.random(c) + 0.5
        small = math.prod(shape) <= 30
        yield Sample((x, w, b, rm, rv), {"training": True, "momentum": 0.1, "eps": 1e-5}, name=f"{shape}train-run",
                     grad=small)
        yield Sample((x, w, b), {"training": True, "momentum": 0.1, "eps": 1e-5}, name=f"{shape}train", grad=small)
        yield Sample((x,), {"training": True, "momentum": 0.3, "eps": 1e-3}, name=f"{shape}train-noaff", grad=small)
        yield Sample((x, w, b, rm, rv), {"training": False, "momentum": 0.1, "eps": 1e-5}, name=f"{shape}eval",
                     grad=small)
    yield Sample((rng.standard_normal((0, 3, 2)), rng.standard_normal(3), rng.standard_normal(3),
                  rng.standard_normal(3), rng.random(3) + 0.5), {"training": False}, name="empty-eval")


def _lrn_samples(rng):
    for shape, size in [((2, 5, 3), 3), ((1, 7, 2, 2), 2), ((2, 3, 4), 5), ((2, 9, 1, 3), 4), ((0, 3, 2), 2)]:
        yield Sample((rng.standard_normal(shape) * 2,), {"size": size, "alpha": 0.3, "beta": 0.75, "k": 1.5},
                     name=f"{shape}s{size}")
    # integer values (an integer tensor cast by the drop-in): the window mean rounded down
    yield Sample((rng.integers(-8, 9, size=(2, 6, 3)).astype(float),),
                 {"size": 3, "alpha": 0.3, "beta": 0.75, "k": 1.5, "floor_mean": True}, name="floor", grad=False)


def _lrn_bw_samples(rng):
    for s in _lrn_samples(rng):
        if not s.attrs.get("floor_mean"):
            yield Sample((rng.standard_normal(s.inputs[0].shape),) + s.inputs, s.attrs, s.name, grad=False)


def _norm_samples(rng):
    for shape, p, dim in [((3, 5), 2.0, 1), ((4, 6), 1.0, 0), ((2, 3, 4), 3.0, 1), ((3, 7), float("inf"), -1),
                          ((5,), 2.0, 0), ((2, 300), 2.0, 1), ((0, 3), 2.0, 1), ((2, 2, 3), 2.0, 2),
                          ((3, 6), 0.5, 1), ((2, 5), -1.5, 1), ((4, 3), 0.0, 0), ((3, 5), -float("inf"), 1),
                          ((), 1.2, 0), ((), 2.0, -1)]:
        yield Sample((rng.standard_normal(shape) * 2,), {"p": p, "dim": dim, "eps": 1e-12}, name=f"{shape}p{p}d{dim}")
    yield Sample((rng.standard_normal((3, 4)) * 1e-3,), {"p": 2.0, "dim": 1, "eps": 0.01}, name="clamped")


def _norm_bw_samples(rng):
    for s in _norm_samples(rng):
        yield Sample((rng.standard_normal(s.inputs[0].shape),) + s.inputs, s.attrs, s.name, grad=False)


def _errors(op):
    def errors():
        f = ((2, 4, 3), "f32")
        bw = op.endswith("_backward")
        if op in ("group_norm", "instance_norm"):
            a = {"num_groups": 3} if op == "group_norm" else {}
            if op == "group_norm":
                yield ErrorCase((f,), a, InvalidProblemError, r"group_norm: argument 'num_groups': expected a positive int",
                                "groups")
            yield ErrorCase((f, ((5,), "f32")), {"num_groups": 2} if op == "group_norm" else {}, InvalidProblemError,
                            rf"{op}: argument 'weight': expected shape \(4,\)", "weight")
            yield ErrorCase((f, ((4,), "f16")), {"num_groups": 2} if op == "group_norm" else {}, DTypeMismatchError,
                            r"expected dtype f32, got f16", "weight-dtype")
        if op == "batch_norm":
            yield ErrorCase((f,), {"training": False}, InvalidProblemError, r"argument 'running_mean'", "eval-no-stats")
            yield ErrorCase((((1, 3), "f32"),), {"training": True}, InvalidProblemError,
                            r"more than 1 value per channel", "one-value")
            yield ErrorCase((f, ((4,), "f32"), ((4,), "f32"), ((4,), "f32")), {"training": True}, InvalidProblemError,
                            r"argument 'inputs'", "four-operands")
        if op.startswith("local_response"):
            yield ErrorCase(((f,) if bw else ()) + (f,), {"size": 0}, InvalidProblemError, r"argument 'size'", "size")
            yield ErrorCase(((((3, 4), "f32"),) * (2 if bw else 1)), {"size": 2}, InvalidProblemError,
                            r"at least 3 dimensions", "rank")
        if op.startswith("normalize"):
            yield ErrorCase(((f,) if bw else ()) + (f,), {"p": "2"}, InvalidProblemError, r"argument 'p'", "p")
            yield ErrorCase(((f,) if bw else ()) + (f,), {"dim": 3}, InvalidProblemError, r"argument 'dim'", "dim")
        n = 4 if bw and not op.startswith(("local", "normalize")) else 2 if bw else 1
        yield ErrorCase(((((2, 4, 3), "i32"),) * n), {"num_groups": 2} if op.startswith("group") else
                        ({"size": 2} if op.startswith("local") else {}), UnsupportedError, r"dtype i32", "int")
        yield ErrorCase((f,) * n, {"bogus": 1, "num_groups": 2, "size": 2}, InvalidProblemError, r"argument", "attr")
    return errors


def _cost(passes_in, flops):
    def cost(desc):
        x = desc.inputs[0]
        small = sum(t.nbytes for t in desc.inputs[1:] if t.numel < x.numel // 4 or x.numel < 16)
        big_in = sum(t.nbytes for t in desc.inputs if t.numel == x.numel)
        big_out = sum(t.nbytes for t in desc.outputs if t.numel == x.numel)
        return big_in + big_out + small, flops * x.numel
    return cost


def _tol(dt):
    # statistics over up to ~300 values in f32, one rounding of the output dtype
    return {DType.f64: (1e-9, 1e-10), DType.f32: (5e-5, 5e-5), DType.f16: (2e-2, 1e-2), DType.bf16: (3e-2, 3e-2)}[dt]


_IMG = (64, 256, 56, 56)
_WL = {
    "group_norm": (Workload("group_norm-[16,512,64,64]g32-bf16", ((16, 512, 64, 64), (512,), (512,)), DType.bf16,
                            {"num_groups": 32, "eps": 1e-5}, backward=True),
                   Workload("group_norm-[16,512,64,64]g32-f32", ((16, 512, 64, 64), (512,), (512,)), DType.f32,
                            {"num_groups": 32, "eps": 1e-5})),
    "instance_norm": (Workload("instance_norm-[16,256,64,64]-bf16", ((16, 256, 64, 64), (256,), (256,)), DType.bf16,
                               {"eps": 1e-5}, backward=True),),
    "batch_norm": (Workload("batch_norm-[64,256,56,56]-train-bf16", (_IMG, (256,), (256,), (256,), (256,)), DType.bf16,
                            {"training": True, "momentum": 0.1, "eps": 1e-5}, backward=True),
                   Workload("batch_norm-[64,256,56,56]-eval-bf16", (_IMG, (256,), (256,), (256,), (256,)), DType.bf16,
                            {"training": False, "momentum": 0.1, "eps": 1e-5}),
                   Workload("batch_norm-[16384,1024]-train-f32", ((16384, 1024), (1024,), (1024,)), DType.f32,
                            {"training": True, "momentum": 0.1, "eps": 1e-5}, backward=True),
                   # a channels-last [64, 256, 56, 56] activation as the drop-in runs it: the [N * H * W, C] matrix
                   Workload("batch_norm-[64x56x56,256]-channels-last-train-bf16",
                            ((64 * 56 * 56, 256), (256,), (256,), (256,), (256,)), DType.bf16,
                            {"training": True, "momentum": 0.1, "eps": 1e-5}, backward=True)),
    "local_response_norm": (Workload("local_response_norm-[64,96,55,55]s5-f32", ((64, 96, 55, 55),), DType.f32,
                                     {"size": 5, "alpha": 1e-4, "beta": 0.75, "k": 2.0}, backward=True),),
    "normalize": (Workload("normalize-[16384,4096]-dim1-bf16", ((16384, 4096),), DType.bf16,
                           {"p": 2.0, "dim": 1, "eps": 1e-12}, backward=True),
                  Workload("normalize-[64,4096,1024]-dim1-bf16", ((64, 4096, 1024),), DType.bf16,
                           {"p": 2.0, "dim": 1, "eps": 1e-12})),
}

_SPECS: dict[str, OpSpec] = {}


def _reg(**kw):
    _SPECS[kw["name"]] = register_spec(OpSpec(family="norm", dtypes=FLOAT_TYPES, category="norm", **kw))


_reg(name="group_norm", arg_names=("x", "weight", "bias"), check=_check_gn("group_norm"), attrs=(_GROUPS, _eps(1e-5)),
     torch_peer=_peer_gn, torch_name="torch.nn.functional.group_norm", dropin=_dropin_gn,
     dropin_result=lambda o: o[0], grad=_g_gn, saves=("inputs", "out1", "out2"), differentiable=(0, 1, 2),
     samples=_gn_samples, errors=_errors("group_norm"), tol=_tol, grad_tol=_tol, workloads=_WL["group_norm"],
     cost=_cost(2, 8), doc="group_norm -> (y, mean, rstd) per (sample, group); the drop-in returns y.")
_reg(name="instance_norm", arg_names=("x", "weight", "bias"), check=_check_gn("instance_norm"),
     attrs=(_eps(1e-5),), torch_peer=_peer_in, torch_name="torch.nn.functional.instance_norm", dropin=_dropin_in,
     dropin_result=lambda o: o[0], grad=_g_gn, saves=("inputs", "out1", "out2"), differentiable=(0, 1, 2),
     samples=_in_samples, errors=_errors("instance_norm"), tol=_tol, grad_tol=_tol, workloads=_WL["instance_norm"],
     cost=_cost(2, 8), doc="instance_norm (input statistics) -> (y, mean, rstd): group_norm with a group per channel.")
_reg(name="group_norm_backward", arg_names=("grad", "x", "mean", "rstd", "weight"), check=_check_stats_bw("group_norm_backward"),
     attrs=(_GROUPS,) + _BW_FLAGS,
     samples=_gn_bw_samples("group_norm_backward"), errors=_errors("group_norm_backward"), tol=_tol,
     cost=_cost(2, 10), doc="fused group_norm backward from the saved (mean, rstd): dx, dweight, dbias.")
_reg(name="batch_norm", arg_names=("x", "weight", "bias", "running_mean", "running_var"), check=_check_bn,
     attrs=(Attr("training", "bool", False), Attr("momentum", "float", 0.1), _eps(1e-5)), torch_peer=_peer_bn,
     torch_name="torch.nn.functional.batch_norm", dropin=_dropin_bn, dropin_result=None, grad=_g_bn,
     # never the running statistics: the drop-in overwrites them in place after the forward (a saved tensor whose
     # version moved breaks autograd's backward)
     saves=("x", "weight", "out1", "out2"), differentiable=(0, 1, 2), samples=_bn_samples, errors=_errors("batch_norm"),
     tol=_tol, grad_tol=_tol, workloads=_WL["batch_norm"], cost=_cost(2, 8),
     doc="batch_norm -> (y, mean, rstd[, new_running_mean, new_running_var]); the drop-in copies the new running "
         "statistics into the given buffers and returns y.")
_reg(name="batch_norm_backward", arg_names=("grad", "x", "mean", "rstd", "weight"), check=_check_stats_bw("batch_norm_backward"),
     attrs=(Attr("training", "bool", True),) + _BW_FLAGS,
     samples=_gn_bw_samples("batch_norm_backward"), errors=_errors("batch_norm_backward"), tol=_tol,
     cost=_cost(2, 10), doc="fused batch_norm backward from the saved (mean, rstd): deterministic column sums.")
_reg(name="local_response_norm", arg_names=("x",), check=_check_lrn("local_response_norm"),
     attrs=_LRN, torch_peer=_peer_lrn,
     torch_name="torch.nn.functional.local_response_norm", dropin=_dropin_lrn, grad=_g_lrn, saves=("inputs",),
     differentiable=(0,), samples=_lrn_samples, errors=_errors("local_response_norm"), tol=_tol, grad_tol=_tol,
     workloads=_WL["local_response_norm"], cost=_cost(1, 12), doc="local response normalization across channels.")
_reg(name="local_response_norm_backward", arg_names=("grad", "x"), check=_check_lrn("local_response_norm_backward"), attrs=_LRN,
     samples=_lrn_bw_samples, errors=_errors("local_response_norm_backward"), tol=_tol, cost=_cost(1, 30),
     doc="fused local_response_norm backward (window sums recomputed from x).")
_reg(name="normalize", arg_names=("x",), check=_check_normalize("normalize"), attrs=_NORMALIZE,
     torch_peer=_peer_normalize, torch_name="torch.nn.functional.normalize", dropin=_dropin_normalize,
     grad=_g_normalize, saves=("inputs",), differentiable=(0,), samples=_norm_samples, errors=_errors("normalize"),
     tol=_tol, grad_tol=_tol, workloads=_WL["normalize"], cost=_cost(1, 3),
     doc="x / max(||x||_p, eps) along dim (F.normalize).")
_reg(name="normalize_backward", arg_names=("grad", "x"), check=_check_normalize("normalize_backward"), attrs=_NORMALIZE,
     samples=_norm_bw_samples, errors=_errors("normalize_backward"), tol=_tol, cost=_cost(1, 6),
     doc="fused F.normalize backward: one row reduction (norm, sum(grad * x)) then one map pass.")


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "add", "batch_norm_backward", "div", "group_norm_backward", "local_response_norm_backward",
                 "mul", "mul_scalar", "normalize_backward")
