"""Distances (issue 4): cosine_similarity, pairwise_distance, pdist, cdist, and their backward ops.

cosine_similarity(x1, x2, dim=1, eps=1e-8)   torch's current formula: sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps)))
    over ``dim`` of the broadcast shape; the gradient treats the clamped norms as the norms (torch clamps them
    under no_grad), i.e. d|x1|/dx1 = x1 / |x1| (0 where |x1| == 0).
pairwise_distance(x1, x2, p=2, eps=1e-6, keepdim=False)   vector_norm(x1 - x2 + eps, p) over the last dim
pdist(x, p=2)            ||x_i - x_j||_p for i < j of the rows of a 2-D x (row-major condensed order)
cdist(x1, x2, p=2)       ||x1[..., i, :] - x2[..., j, :]||_p, batch dims broadcast; computed directly (no GEMM
    expansion ||a||^2 + ||b||^2 - 2ab, which loses the small distances) whatever torch's compute_mode says: its
    matrix-multiply modes give the same values up to their rounding.
p >= 0 for pdist/cdist (torch's domain); p = inf is the max norm.

Backward ops (torch's _cdist_backward / _pdist_backward conventions per p: 0 -> 0; 1 -> sign(diff);
2 -> diff / dist (0 at dist 0); inf -> sign(diff) * (|diff| == dist), no split of ties; otherwise
sign(diff) |diff|^(p-1) / dist^(p-1), 0 at dist 0 and, for p < 1, at diff 0):
cosine_similarity_backward(grad, x1, x2) -> (dx1, dx2) on the broadcast shape (the rule reduces them)
cdist_backward(grad, x1, x2, out, wrt) -> the gradient of x1 (wrt=0) or x2 (wrt=1), same batch dims
pdist_backward(grad, x, out) -> dx
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import broadcast_shapes, float_operands
from .reduction import KEEPDIM
from .reduction_stats import norm_grad

__all__ = ["DIST_P"]

DIST_P = (2.0, 1.0, 0.0, float("inf"), 0.5, 3.0, 1.5)


def _inputs(op, inputs, n, names):
    if len(inputs) != n:
        raise InvalidProblemError(op, "inputs", f"{n} operands ({', '.join(names)})", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    for name, t in zip(names[1:], inputs[1:]):
        if t.dtype != inputs[0].dtype:
            raise DTypeMismatchError(op, name, str(inputs[0].dtype), str(t.dtype))
    return inputs


_P = Attr("p", "float", 2.0, none_default=True, ge=0, expected="a non-negative p (or inf)")
_P_ANY = Attr("p", "float", 2.0, none_default=True, ge=-math.inf, expected="a real p")   # (the range: not NaN)


def _eps(default):
    return Attr("eps", "float", default, none_default=True)


def _bcast_rank(inputs, attrs):
    """cosine_similarity's dim: an axis of the broadcast x1, x2 (the last two operands); 0-d: the check refuses."""
    return max(len(t.shape) for t in inputs[-2:]) or None if len(inputs) >= 2 else None


_COS_ATTRS = (Attr("dim", "axis", 1, rank=_bcast_rank), _eps(1e-8))


# -- cosine_similarity ----------------------------------------------------------------------------
def _cos_geom(op, x1, x2, attrs):
    shape = broadcast_shapes(op, ("x1", "x2"), (x1.shape, x2.shape))
    if not shape:
        raise InvalidProblemError(op, "x1", "inputs of rank >= 1", "0-d inputs")
    return shape, attrs["dim"], attrs["eps"]


def _check_cos(inputs, attrs):
    op = "cosine_similarity"
    x1, x2 = _inputs(op, inputs, 2, ("x1", "x2"))
    shape, dim, eps = _cos_geom(op, x1, x2, attrs)
    out = tuple(s for i, s in enumerate(shape) if i != dim)
    return {"dim": dim, "eps": eps}, (TensorSpec(out, x1.dtype),)


def _check_cos_bw(inputs, attrs):
    op = "cosine_similarity_backward"
    g, x1, x2 = _inputs(op, inputs, 3, ("grad", "x1", "x2"))
    shape, dim, eps = _cos_geom(op, x1, x2, attrs)
    want = tuple(s for i, s in enumerate(shape) if i != dim)
    if g.shape != want:
        raise InvalidProblemError(op, "grad", f"shape {want}", g.shape)
    return {"dim": dim, "eps": eps}, (TensorSpec(shape, x1.dtype),) * 2


def _g_cos(ctx, d, grads, s):
    dx1, dx2 = ctx.op("cosine_similarity_backward", grads[0], s["x1"], s["x2"], dim=d.attr("dim"), eps=d.attr("eps"))
    return ctx.reduce_to(dx1, d.inputs[0].shape), ctx.reduce_to(dx2, d.inputs[1].shape)


def _peer_cos(x1, x2, dim=1, eps=1e-8):
    import torch.nn.functional as F

    return F.cosine_similarity(x1, x2, dim=dim, eps=eps)


def _peer_cos_bw(g, x1, x2, *, dim=1, eps=1e-8):
    import torch

    a, b = torch.broadcast_tensors(x1, x2)
    n1 = a.norm(dim=dim, keepdim=True)
    n2 = b.norm(dim=dim, keepdim=True)
    c1, c2 = n1.clamp_min(eps), n2.clamp_min(eps)
    s12 = (a * b).sum(dim=dim, keepdim=True)
    g = g.unsqueeze(dim)
    u1 = torch.where(n1 == 0, 0.0, a / n1)
    u2 = torch.where(n2 == 0, 0.0, b / n2)
    return (g * (b / (c1 * c2) - s12 * u1 / (c1 * c1 * c2)), g * (a / (c1 * c2) - s12 * u2 / (c2 * c2 * c1)))


def _dropin_cos(x1, x2, dim=1, eps=1e-8):
    if x1.dim() == 0 and x2.dim() == 0:   # two scalars: one 1-element vector each (dim 0 or -1, as torch)
        if dim not in (0, -1):
            raise InvalidProblemError("cosine_similarity", "dim", "an axis in [-1, 0] for 0-d inputs", dim)
        x1, x2, dim = x1.reshape(1), x2.reshape(1), 0
    return (x1, x2), {"dim": dim, "eps": eps}


def _cos_samples(rng):
    n = rng.standard_normal
    for shape1, shape2, dim in [((3, 5), (3, 5), 1), ((4, 6), (4, 6), 0), ((2, 3, 4), (3, 4), -1),
                                ((5, 1), (1, 7), 0), ((7,), (7,), 0), ((3, 300), (3, 300), 1), ((0, 4), (0, 4), 1),
                                ((2, 3, 4, 5), (2, 3, 4, 5), 2)]:
        yield Sample((n(shape1), n(shape2)), {"dim": dim}, name=f"{shape1}x{shape2}-dim{dim}")
    x = n((3, 4))
    x[1] = 0.0   # a zero row: the eps clamp
    yield Sample((x, n((3, 4))), {"dim": 1, "eps": 1e-8}, name="zero-row", grad=False)  # FD sees no clamp
    yield Sample((n((3, 5)), n((3, 5))), {}, name="defaults", grad=False)


def _cos_bw_samples(rng):
    n = rng.standard_normal
    for shape, dim in [((3, 5), 1), ((4, 6), 0), ((2, 3, 4), 1), ((3, 300), 1), ((0, 4), 1)]:
        gs = tuple(s for i, s in enumerate(shape) if i != dim)
        yield Sample((n(gs), n(shape), n(shape)), {"dim": dim}, name=f"{shape}-dim{dim}", grad=False)


# -- pairwise_distance ----------------------------------------------------------------------------
def _check_pw(inputs, attrs):
    op = "pairwise_distance"
    x1, x2 = _inputs(op, inputs, 2, ("x1", "x2"))
    shape = broadcast_shapes(op, ("x1", "x2"), (x1.shape, x2.shape))
    if not shape:
        raise InvalidProblemError(op, "x1", "inputs of rank >= 1", "0-d inputs")
    out = shape[:-1] + ((1,) if attrs["keepdim"] else ())
    return attrs, (TensorSpec(out, x1.dtype),)


def _g_pw(ctx, d, grads, s):
    x1, x2 = d.inputs
    shape = broadcast_shapes("pairwise_distance", ("x1", "x2"), (x1.shape, x2.shape))
    diff = ctx.op("affine", ctx.op("sub", s["x1"], s["x2"]), a=1.0, b=d.attr("eps"))
    gd = norm_grad(ctx, grads[0], diff, s["out"], d.attr("p"), (len(shape) - 1,), d.attr("keepdim"))
    return ctx.reduce_to(gd, x1.shape), ctx.reduce_to(ctx.op("neg", gd), x2.shape)


def _peer_pw(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    import torch.nn.functional as F

    return F.pairwise_distance(x1, x2, p=p, eps=eps, keepdim=keepdim)


def _dropin_pw(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    if x1.dim() == 0 and x2.dim() == 0:   # two scalars: torch's norm over the one element, a 0-d result
        x1, x2, keepdim = x1.reshape(1), x2.reshape(1), False
    return float_operands(x1, x2), {"p": float(p), "eps": eps, "keepdim": keepdim}


def _pw_samples(rng):
    n = rng.standard_normal
    for i, (s1, s2, p) in enumerate([((3, 5), (3, 5), 2.0), ((4, 6), (6,), 1.0), ((2, 3, 4), (3, 4), float("inf")),
                                     ((5, 7), (5, 7), 0.5), ((7,), (7,), 3.0), ((3, 300), (3, 300), 2.0),
                                     ((0, 4), (0, 4), 2.0), ((5, 1), (1, 4), 0.0), ((3, 5), (3, 5), -1.0)]):
        yield Sample((n(s1), n(s2)), {"p": p, "keepdim": i % 2 == 1}, name=f"{s1}x{s2}-p{p}")
    yield Sample((n((3, 5)), n((3, 5))), {}, name="defaults", grad=False)


# -- pdist / cdist --------------------------------------------------------------------------------
def _check_pdist(inputs, attrs):
    op = "pdist"
    (x,) = _inputs(op, inputs, 1, ("x",))
    if len(x.shape) != 2:
        raise InvalidProblemError(op, "x", "a 2-D input (rows are the points)", f"shape {x.shape}")
    n = x.shape[0]
    return attrs, (TensorSpec((n * (n - 1) // 2,), x.dtype),)


def _check_pdist_bw(inputs, attrs):
    op = "pdist_backward"
    g, x, out = _inputs(op, inputs, 3, ("grad", "x", "out"))
    if len(x.shape) != 2:
        raise InvalidProblemError(op, "x", "a 2-D input", f"shape {x.shape}")
    n = x.shape[0]
    for name, t in (("grad", g), ("out", out)):
        if t.shape != (n * (n - 1) // 2,):
            raise InvalidProblemError(op, name, f"shape {(n * (n - 1) // 2,)}", t.shape)
    return attrs, (TensorSpec(x.shape, x.dtype),)


def _cdist_shapes(op, x1, x2):
    if len(x1.shape) < 2 or len(x2.shape) < 2:
        raise InvalidProblemError(op, "x1" if len(x1.shape) < 2 else "x2", "a tensor of rank >= 2 (..., rows, M)",
                                  f"shape {x1.shape if len(x1.shape) < 2 else x2.shape}")
    if x1.shape[-1] != x2.shape[-1]:
        raise InvalidProblemError(op, "x2", f"the same number of columns as x1 ({x1.shape[-1]})", x2.shape[-1])
    batch = broadcast_shapes(op, ("x1", "x2"), (x1.shape[:-2], x2.shape[:-2]))
    return batch, batch + (x1.shape[-2], x2.shape[-2])


def _check_cdist(inputs, attrs):
    op = "cdist"
    x1, x2 = _inputs(op, inputs, 2, ("x1", "x2"))
    _, out = _cdist_shapes(op, x1, x2)
    return attrs, (TensorSpec(out, x1.dtype),)


def _check_cdist_bw(inputs, attrs):
    op = "cdist_backward"
    g, x1, x2, out = _inputs(op, inputs, 4, ("grad", "x1", "x2", "out"))
    if x1.shape[:-2] != x2.shape[:-2]:
        raise InvalidProblemError(op, "x2", f"the batch dims of x1 {x1.shape[:-2]} (broadcast them first)",
                                  x2.shape[:-2])
    _, want = _cdist_shapes(op, x1, x2)
    for name, t in (("grad", g), ("out", out)):
        if t.shape != want:
            raise InvalidProblemError(op, name, f"shape {want}", t.shape)
    return attrs, (TensorSpec((x1, x2)[attrs["wrt"]].shape, x1.dtype),)


def _g_pdist(ctx, d, grads, s):
    return (ctx.op("pdist_backward", grads[0], s["x"], s["out"], p=d.attr("p")),)


def _g_cdist(ctx, d, grads, s):
    x1, x2 = d.inputs
    batch, _ = _cdist_shapes("cdist", x1, x2)
    a, b = s["x1"], s["x2"]
    if x1.shape[:-2] != batch:
        a = ctx.op("broadcast_to", a, shape=batch + x1.shape[-2:])
    if x2.shape[:-2] != batch:
        b = ctx.op("broadcast_to", b, shape=batch + x2.shape[-2:])
    g1 = ctx.op("cdist_backward", grads[0], a, b, s["out"], p=d.attr("p"), wrt=0)
    g2 = ctx.op("cdist_backward", grads[0], a, b, s["out"], p=d.attr("p"), wrt=1)
    return ctx.reduce_to(g1, x1.shape), ctx.reduce_to(g2, x2.shape)


def _peer_pdist(x, p=2.0):
    import torch.nn.functional as F

    return F.pdist(x, p=p)


def _peer_cdist(x1, x2, p=2.0):
    import torch

    return torch.cdist(x1, x2, p=p, compute_mode="donot_use_mm_for_euclid_dist")


def _peer_cdist_bw(g, x1, x2, out, *, p=2.0, wrt=0):
    import torch

    xs = [x1.detach().clone().requires_grad_(), x2.detach().clone().requires_grad_()]
    with torch.enable_grad():
        y = torch.cdist(xs[0], xs[1], p=p, compute_mode="donot_use_mm_for_euclid_dist")
        return torch.autograd.grad(y, xs[wrt], g)[0]


def _peer_pdist_bw(g, x, out, *, p=2.0):
    import torch
    import torch.nn.functional as F

    xx = x.detach().clone().requires_grad_()
    with torch.enable_grad():
        return torch.autograd.grad(F.pdist(xx, p=p), xx, g)[0]


def _dropin_pdist(input, p=2):
    return (input,), {"p": float(p)}


_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _dropin_cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    # every mode computes the differences directly: torch's matrix-multiply expansion is a speed choice whose
    # values differ from the exact distances by its rounding only (the expansion loses small distances)
    if compute_mode not in _COMPUTE_MODES:
        raise InvalidProblemError("cdist", "compute_mode", " or ".join(map(repr, _COMPUTE_MODES)), repr(compute_mode))
    return (x1, x2), {"p": float(p)}


def _pdist_samples(rng):
    for shape, p in zip([(5, 3), (4, 7), (6, 2), (3, 5), (7, 4), (5, 6), (4, 3)], DIST_P):
        yield Sample((rng.standard_normal(shape),), {"p": p}, name=f"{shape}-p{p}")
    x = rng.standard_normal((4, 3))
    x[2] = x[0]    # a zero distance: the gradient is 0 there
    yield Sample((x,), {"p": 2.0}, name="dup-row")
    yield Sample((rng.standard_normal((33, 20)),), {"p": 2.0}, name="(33,20)", grad=False)
    yield Sample((rng.standard_normal((1, 4)),), {"p": 2.0}, name="one-row")
    yield Sample((rng.standard_normal((5, 3)),), {}, name="defaults", grad=False)


def _cdist_samples(rng):
    n = rng.standard_normal
    for (s1, s2), p in zip([((4, 3), (5, 3)), ((2, 3, 4), (2, 5, 4)), ((3, 2), (4, 2)), ((2, 1, 3, 4), (5, 2, 4)),
                            ((5, 6), (3, 6)), ((4, 3), (4, 3)), ((3, 5), (2, 5))], DIST_P):
        yield Sample((n(s1), n(s2)), {"p": p}, name=f"{s1}x{s2}-p{p}")
    yield Sample((n((37, 19)), n((21, 19))), {"p": 2.0}, name="(37,19)x(21,19)", grad=False)
    yield Sample((n((0, 3)), n((4, 3))), {"p": 2.0}, name="empty")
    yield Sample((n((4, 3)), n((5, 3))), {}, name="defaults", grad=False)


def _cdist_bw_samples(rng):
    n = rng.standard_normal
    for (s1, s2), p in zip([((4, 3), (5, 3)), ((2, 3, 4), (2, 5, 4)), ((6, 2), (3, 2)), ((37, 19), (21, 19))],
                           (0.5, 1.5, float("inf"), 1.0)):   # the last (plan-reuse test) is independent of `out`
        a, b = n(s1), n(s2)
        if math.isinf(p):   # halves: |diff| == dist is exact in every dtype (and ties occur)
            a, b = np.round(2 * a) / 2, np.round(2 * b) / 2
        diff = a[..., :, None, :] - b[..., None, :, :]
        out = np.max(np.abs(diff), -1) if math.isinf(p) else np.sum(np.abs(diff) ** p, -1) ** (1 / p)
        for wrt in (0, 1):
            yield Sample((n(out.shape), a, b, out), {"p": p, "wrt": wrt}, name=f"{s1}x{s2}-p{p}-wrt{wrt}", grad=False)


def _pdist_bw_samples(rng):
    # the last sample (the plan-reuse test draws arbitrary `out`) is p = 1: independent of `out`
    for shape, p in [((5, 3), 2.0), ((4, 7), 3.0), ((6, 2), float("inf")), ((7, 4), 0.5), ((33, 20), 1.0)]:
        x = rng.standard_normal(shape)
        if math.isinf(p):   # halves: |diff| == dist is exact in every dtype (and ties occur)
            x = np.round(2 * x) / 2
        i, j = np.triu_indices(shape[0], 1)
        diff = np.abs(x[i] - x[j])
        out = np.max(diff, -1) if math.isinf(p) else np.sum(diff ** p, -1) ** (1 / p)
        yield Sample((rng.standard_normal(out.shape), x, out), {"p": p}, name=f"{shape}-p{p}", grad=False)


# -- errors, tolerances, workloads, costs ---------------------------------------------------------
def _errors(op):
    def errors():
        f = ((3, 4), "f32")
        two = op in ("cosine_similarity", "pairwise_distance", "cdist")
        ins = (f, f) if two else (f,)
        yield ErrorCase(tuple(((3, 4), "i32") for _ in ins), {}, UnsupportedError, r"dtype i32", "int-dtype")
        yield ErrorCase(ins, {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        if two:
            yield ErrorCase((f, ((3, 4), "f64")), {}, DTypeMismatchError, rf"{op}: argument 'x2': expected dtype f32",
                            "mixed-dtype")
            yield ErrorCase((f, ((5, 5), "f32")), {}, InvalidProblemError, rf"{op}: argument 'x2'", "bad-shape")
        if op in ("pdist", "cdist"):
            yield ErrorCase(ins, {"p": -1.0}, InvalidProblemError, rf"{op}: argument 'p': expected a non-negative p",
                            "neg-p")
        if op == "pdist":
            yield ErrorCase((((2, 3, 4), "f32"),), {}, InvalidProblemError, r"pdist: argument 'x': expected a 2-D",
                            "3d")
        if op == "cosine_similarity":
            yield ErrorCase(ins, {"dim": 2}, InvalidProblemError, r"expected an axis in \[-2, 1\]", "bad-dim")
    return errors


def _bw_errors(op, names):
    def errors():
        yield ErrorCase(tuple(((3, 4), "i32") for _ in names), {}, UnsupportedError, r"dtype i32", "int-dtype")
        yield ErrorCase(tuple(((3, 4), "f32") for _ in names[:-1]) + (((3, 4), "f16"),), {}, DTypeMismatchError,
                        rf"{op}: argument '{names[-1]}': expected dtype f32", "mixed")
    return errors


def _tol(dt):
    # sums over <= 300 products in f32 (f64 for f64); halves round the inputs and once the output
    return {DType.f64: (1e-10, 1e-10), DType.f32: (2e-5, 2e-5)}.get(dt) or (2e-2, 2e-2)


def _bw_tol(dt):
    return {DType.f64: (1e-9, 1e-9), DType.f32: (1e-4, 1e-4)}.get(dt) or (5e-2, 5e-2)


def _cost_rows(flops):
    def cost(desc):
        return (sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs),
                flops * max(t.numel for t in desc.inputs))
    return cost


def _cost_pairs(desc):
    x1 = desc.inputs[0]
    m = x1.shape[-1]
    pairs = desc.outputs[0].numel
    return sum(t.nbytes for t in desc.inputs) + desc.outputs[0].nbytes, 3 * pairs * m


_SPECS: dict[str, OpSpec] = {}


def _reg(**kw):
    kw.setdefault("family", "distance")
    kw.setdefault("dtypes", FLOAT_TYPES)
    kw.setdefault("category", "reduction")
    _SPECS[kw["name"]] = register_spec(OpSpec(**kw))


_reg(name="cosine_similarity", arg_names=("x1", "x2"), check=_check_cos, attrs=_COS_ATTRS,
     torch_peer=_peer_cos, torch_name="torch.nn.functional.cosine_similarity", torch_aliases=("torch.cosine_similarity",),
     dropin=_dropin_cos, grad=_g_cos, saves=("inputs",), differentiable=(0, 1), samples=_cos_samples,
     errors=_errors("cosine_similarity"), tol=_tol, grad_tol=_bw_tol,
     workloads=tuple(Workload(f"cosine_similarity-[16384,4096]-{dt}", ((16384, 4096), (16384, 4096)), dt, {"dim": 1},
                              backward=True) for dt in (DType.bf16, DType.f32)),
     cost=_cost_rows(6), doc="one read of x1 and x2: (x1.x1, x2.x2, x1.x2) per output, torch's eps clamp per norm.")
_reg(name="cosine_similarity_backward", arg_names=("grad", "x1", "x2"), check=_check_cos_bw,
     attrs=_COS_ATTRS, torch_peer=_peer_cos_bw,
     torch_name="torch autograd rule of cosine_similarity", samples=_cos_bw_samples,
     errors=_bw_errors("cosine_similarity_backward", ("grad", "x1", "x2")), tol=_bw_tol,
     workloads=(Workload("cosine_similarity_backward-[16384,4096]-bf16", ((16384,), (16384, 4096), (16384, 4096)),
                         DType.bf16, {"dim": 1}),),
     cost=_cost_rows(10), doc="fused: the three row sums are recomputed, then dx1 and dx2 written in one pass.")
_reg(name="pairwise_distance", arg_names=("x1", "x2"), check=_check_pw,
     attrs=(_P_ANY, _eps(1e-6), KEEPDIM), torch_peer=_peer_pw,
     torch_name="torch.nn.functional.pairwise_distance", torch_aliases=("torch.pairwise_distance",),
     dropin=_dropin_pw, grad=_g_pw, saves=("inputs", "outputs"), differentiable=(0, 1), samples=_pw_samples,
     errors=_errors("pairwise_distance"), tol=_tol, grad_tol=_bw_tol,
     workloads=(Workload("pairwise_distance-[16384,4096]-bf16", ((16384, 4096), (16384, 4096)), DType.bf16, {},
                         backward=True),),
     cost=_cost_rows(4), doc="vector_norm(x1 - x2 + eps, p) over the last dim, in one read of x1 and x2.")
_reg(name="pdist", arg_names=("x",), check=_check_pdist, attrs=(_P,), torch_peer=_peer_pdist,
     torch_name="torch.nn.functional.pdist", torch_aliases=("torch.pdist",), dropin=_dropin_pdist, grad=_g_pdist,
     saves=("inputs", "outputs"), differentiable=(0,), samples=_pdist_samples, errors=_errors("pdist"), tol=_tol,
     grad_tol=_bw_tol, workloads=(Workload("pdist-[2048,128]-f32", ((2048, 128),), DType.f32, {}, backward=True),),
     cost=_cost_pairs, doc="condensed distances of the rows (upper triangle only is computed).")
_reg(name="pdist_backward", arg_names=("grad", "x", "out"), check=_check_pdist_bw, attrs=(_P,),
     torch_peer=_peer_pdist_bw, torch_name="torch autograd rule of pdist (_pdist_backward)",
     samples=_pdist_bw_samples, errors=_bw_errors("pdist_backward", ("grad", "x", "out")), tol=_bw_tol,
     cost=_cost_pairs, doc="gradient of pdist: each row sums its pairs' terms (no atomics).")
_reg(name="cdist", arg_names=("x1", "x2"), check=_check_cdist, attrs=(_P,), torch_peer=_peer_cdist,
     torch_name="torch.cdist", dropin=_dropin_cdist, grad=_g_cdist, saves=("inputs", "outputs"),
     differentiable=(0, 1), samples=_cdist_samples, errors=_errors("cdist"), tol=_tol, grad_tol=_bw_tol,
     workloads=(Workload("cdist-[4096,256]x[4096,256]-f32", ((4096, 256), (4096, 256)), DType.f32, {},
                         backward=True),
                Workload("cdist-[8,1024,64]x[8,1024,64]-f32-p1", ((8, 1024, 64), (8, 1024, 64)), DType.f32,
                         {"p": 1.0})),
     cost=_cost_pairs, doc="direct p-norm distances of every row pair (tile kernel; no GEMM expansion).")
_reg(name="cdist_backward", arg_names=("grad", "x1", "x2", "out"), check=_check_cdist_bw,
     attrs=(_P, Attr("wrt", "int", 0, choices=(0, 1), expected="0 (x1) or 1 (x2)")), torch_peer=_peer_cdist_bw, torch_name="torch autograd rule of cdist",
     samples=_cdist_bw_samples, errors=_bw_errors("cdist_backward", ("grad", "x1", "x2", "out")), tol=_bw_tol,
     cost=_cost_pairs, doc="gradient of cdist w.r.t. x1 (wrt=0) or x2 (wrt=1): a tile kernel over the pairs.")


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "abs", "affine", "amax_backward", "broadcast_to", "cdist_backward", "cosine_similarity_backward",
                 "mul", "neg", "pdist_backward", "sign", "sub", "vector_norm_backward")
