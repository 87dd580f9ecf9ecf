"""Row-wise margin losses of issue 4 (torch.nn.functional names and semantics).  A "row" is the last dim; 1-D
inputs are one row and their unreduced loss is 0-d.  'mean' averages the per-row losses (unweighted).

cosine_embedding_loss(input1 [N, D], input2, target [N]; margin)
    cos = <x1, x2> / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12));  loss = 1 - cos (y == 1) | max(0, cos - margin) (y == -1)
    | 0 (other y).  target: the input's float dtype or i64/i32.  Gradients for input1/input2.
triplet_margin_loss(anchor [N, D], positive, negative; margin, p, eps, swap)
    d(u, v) = ||u - v + eps||_p;  loss = max(0, margin + d(a, p) - d(a, n)), with swap d(a, n) -> min(d(a, n), d(p, n))
    (a tie shares the gradient half and half, as torch's minimum).  Gradients for all three.
multi_margin_loss(input [N, C], target [N] integer[, weight [C]]; p in {1, 2}, margin)
    loss_i = sum_{j != y_i} w[y_i] max(0, margin - x[y_i] + x[j])^p / C.  Gradient for input.
multilabel_margin_loss(input [N, C], target [N, C] integer)
    the targets of a row are its entries before the first -1 (every entry must lie in [-1, C), as torch checks):
    loss_i = sum_{listed j} sum_{k not a target} max(0, 1 - (x[j] - x[k])) / C (a repeated entry counts twice).
multilabel_soft_margin_loss(input [..., C], target [..., C][, weight broadcastable to the input])
    loss = sum_c w_c (softplus(-x_c) + (1 - y_c) x_c) / C  (= -mean_c w (y log s(x) + (1 - y) log s(-x))).
    Gradients for input and target.

Class indices outside their range raise InvalidProblemError (reference: on the host; Triton: see the kernels).
Backward ops <op>_backward(grad, *operands) -> the differentiable operands' gradients, one fused row kernel.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError
from .._core.spec import ErrorCase, OpSpec, TensorSpec, Workload, register_spec
from .._core.derive import backward_spec
from .._core.derive import declare_rule_ops
from ._common import case_samples, float_operands
from .loss import INDEX_DTYPES, legacy_reduction
from .loss_pointwise import REDUCTIONS, aux_ok, float_operand, param_attrs, register_makers

__all__ = ["ROW_LOSSES", "RowDef"]


class RowDef:
    def __init__(self, args, nreq, diff, params, kind):
        self.args, self.nreq, self.diff, self.params, self.kind = tuple(args), nreq, tuple(diff), dict(params), kind


ROW_LOSSES = {
    "cosine_embedding_loss": RowDef(("input1", "input2", "target"), 3, (0, 1), {"margin": (0.0, "float")}, "pair"),
    "triplet_margin_loss": RowDef(("anchor", "positive", "negative"), 3, (0, 1, 2),
                                  {"margin": (1.0, "float"), "p": (2.0, "pos"), "eps": (1e-6, "float"),
                                   "swap": (False, "bool")}, "triplet"),
    "multi_margin_loss": RowDef(("input", "target", "weight"), 2, (0,), {"p": (1, "int"), "margin": (1.0, "float")},
                                "class"),
    "multilabel_margin_loss": RowDef(("input", "target"), 2, (0,), {}, "labels"),
    "multilabel_soft_margin_loss": RowDef(("input", "target", "weight"), 2, (0, 1), {}, "soft"),
}


def _rank12(op, name, t):
    if len(t.shape) not in (1, 2):
        raise InvalidProblemError(op, name, "a 1-D [C] or 2-D [N, C] tensor", t.shape)


def _check(op: str):
    base = op
    d = ROW_LOSSES[base]

    def check(inputs, attrs):
        ops = inputs
        if not d.nreq <= len(ops) <= len(d.args):
            raise InvalidProblemError(op, "inputs", f"{d.nreq} to {len(d.args)} operands", len(inputs))
        a = attrs
        x = ops[0]
        float_operand(op, d.args[0], x)
        if d.kind == "soft":
            if len(x.shape) < 1:
                raise InvalidProblemError(op, "input", "at least 1 dim ([..., C])", x.shape)
        else:
            _rank12(op, d.args[0], x)
        rows_shape = x.shape[:-1]
        if d.kind in ("pair", "triplet", "soft"):
            k = 3 if d.kind == "triplet" else 2
            for name, t in zip(d.args[1:k], ops[1:k]):
                float_operand(op, name, t)
                if t.shape != x.shape:
                    raise InvalidProblemError(op, name, f"the {d.args[0]}'s shape {x.shape}", t.shape)
                if t.dtype != x.dtype:
                    raise DTypeMismatchError(op, name, str(x.dtype), str(t.dtype))
        if d.kind == "pair":
            t = ops[2]
            if t.shape != rows_shape:
                raise InvalidProblemError(op, "target", f"one +1/-1 per row, shape {rows_shape}", t.shape)
            if t.dtype not in INDEX_DTYPES and t.dtype != x.dtype:
                raise DTypeMismatchError(op, "target", f"{x.dtype} or i64/i32", str(t.dtype))
        if d.kind in ("class", "labels"):
            t = ops[1]
            want = x.shape if d.kind == "labels" else rows_shape
            ok = t.shape == want or (d.kind == "class" and len(x.shape) == 1 and t.shape == (1,))
            if not ok:
                raise InvalidProblemError(op, "target", f"class indices of shape {want}", t.shape)
            if t.dtype not in INDEX_DTYPES:
                raise DTypeMismatchError(op, "target", "i64/i32 class indices", str(t.dtype))
            if d.kind == "class":
                rows_shape = t.shape
            if x.shape[-1] < 1 and d.kind == "class":
                raise InvalidProblemError(op, "input", "at least one class (C >= 1)", x.shape)
        if len(ops) == 3 and d.kind in ("class", "soft"):
            w = ops[2]
            float_operand(op, "weight", w, x.dtype)
            ok = w.shape == (x.shape[-1],) if d.kind == "class" else aux_ok(x.shape, w.shape)
            if not ok:
                want = f"one weight per class, shape {(x.shape[-1],)}" if d.kind == "class" else \
                    f"a shape that broadcasts to the input's {x.shape}"
                raise InvalidProblemError(op, "weight", want, w.shape)
        return a, (TensorSpec(rows_shape if a["reduction"] == "none" else (), x.dtype),)
    return check


def _grad_rule(base):
    d = ROW_LOSSES[base]

    def rule(ctx, desc, grads, s):
        names = desc.spec.arg_names[: len(desc.inputs)]
        gs = ctx.op(f"{base}_backward", grads[0], *[s[n] for n in names], **desc.attr_dict)
        gs = gs if isinstance(gs, tuple) else (gs,)
        out = [None] * len(desc.inputs)
        for i, g in zip(d.diff, gs):
            out[i] = g
        return tuple(out)
    return rule


def _peer(base):
    def peer(*xs, **a):
        import torch
        import torch.nn.functional as F

        fn = getattr(F, base)
        xs = list(xs)
        if base in ("multi_margin_loss", "multilabel_margin_loss"):
            xs[1] = xs[1].long()
        if base == "multi_margin_loss":
            return fn(xs[0], xs[1], weight=xs[2] if len(xs) > 2 else None, **a)
        if base == "multilabel_soft_margin_loss":
            return fn(xs[0], xs[1], weight=xs[2] if len(xs) > 2 else None, **a)
        if base == "cosine_embedding_loss" and not torch.is_floating_point(xs[2]):
            xs[2] = xs[2].to(xs[0].dtype)
        return fn(*xs, **a)
    return peer


def _unbatched_0d(input, target, row_target: bool):
    """A 0-d input is one unbatched row of C = 1 class (torch's reading); its 0-d target then is that row's class
    index (multi_margin) or its one-entry label row (multilabel_margin: ``row_target``)."""
    if input.dim() == 0:
        input = input.reshape(1)
        if row_target and target.dim() == 0:
            target = target.reshape(1)
    return input, target


def _dropins():
    def red(sa, r, reduction):
        return legacy_reduction(sa, r, reduction)

    def cosine(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        import torch

        if target.dtype == torch.bool:   # True is 1 (a similar pair), False neither 1 nor -1 (a zero loss), as torch
            target = target.long()
        return float_operands(input1, input2, bools=True) + (target,), {"reduction": red(size_average, reduce, reduction), "margin": margin}

    def triplet(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                reduction="mean"):
        return float_operands(anchor, positive, negative), {"reduction": red(size_average, reduce, reduction), "margin": margin,
                                              "p": p, "eps": eps, "swap": swap}

    def multi(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        input, target = _unbatched_0d(input, target, False)
        return ((input, target) + ((weight,) if weight is not None else ()),
                {"reduction": red(size_average, reduce, reduction), "p": p, "margin": margin})

    def mlm(input, target, size_average=None, reduce=None, reduction="mean"):
        input, target = _unbatched_0d(input, target, True)
        return (input, target), {"reduction": red(size_average, reduce, reduction)}

    def mlsm(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
        return ((input, target) + ((weight,) if weight is not None else ()),
                {"reduction": red(size_average, reduce, reduction)})

    return {"cosine_embedding_loss": cosine, "triplet_margin_loss": triplet, "multi_margin_loss": multi,
            "multilabel_margin_loss": mlm, "multilabel_soft_margin_loss": mlsm}


_DROPINS = _dropins()


# -- samples --------------------------------------------------------------------------------------------
def _signs(rng, n):
    return np.where(rng.random(n) < 0.5, -1.0, 1.0)


def _labels(rng, n, c):
    """multilabel targets: a few distinct classes per row, then -1 and arbitrary valid filler (as torch reads)."""
    t = rng.integers(-1, c, size=(n, c))
    for i in range(n):
        k = int(rng.integers(0, min(c, 4) + 1))
        t[i, :k] = rng.choice(c, size=k, replace=False)
        if k < c:
            t[i, k] = -1
    return t


def _case(rng, base, shape, attrs):
    c = shape[-1]
    rows = shape[:-1]
    if base == "cosine_embedding_loss":
        x1 = rng.standard_normal(shape)
        x2 = x1 * rng.uniform(-1, 1) + rng.standard_normal(shape)
        return (x1, x2, _signs(rng, rows) if rows else np.array(_signs(rng, 1)[0]))
    if base == "triplet_margin_loss":
        a = rng.standard_normal(shape)
        return (a, a + 0.5 * rng.standard_normal(shape), a + rng.standard_normal(shape))
    if base == "multi_margin_loss":
        x = rng.standard_normal(shape)
        t = rng.integers(0, c, size=rows)
        return (x, np.asarray(t, np.int64))
    if base == "multilabel_margin_loss":
        x = rng.standard_normal(shape)
        t = _labels(rng, int(np.prod(rows)), c).reshape(shape)
        return (x, t)
    return (2 * rng.standard_normal(shape), rng.uniform(0, 1, shape))


def _cases(rng, base):
    out = []
    soft = base == "multilabel_soft_margin_loss"
    for shape, red in (((3, 5), "none"), ((3, 5), "sum"), ((3, 5), "mean"), ((6,), "none"), ((9, 33), "mean"),
                       ((2, 300), "sum"), ((0, 4), "sum"), ((0, 4), "none")):
        out.append((_case(rng, base, shape, {}), {"reduction": red}, f"{shape}-{red}", True))
    out.append((_case(rng, base, (3, 5), {}), {}, "defaults", True))   # the drop-in's call with torch's defaults
    par = {"cosine_embedding_loss": [{"margin": 0.3}, {"margin": -0.2}],
           "triplet_margin_loss": [{"p": 1.0, "swap": True}, {"p": 3.0, "margin": 0.5, "eps": 0.0},
                                   {"swap": True, "margin": 2.0}],
           "multi_margin_loss": [{"p": 2}, {"p": 2, "margin": 0.5}],
           "multilabel_margin_loss": [], "multilabel_soft_margin_loss": []}[base]
    for i, a in enumerate(par):
        attrs = {"reduction": REDUCTIONS[i % 3], **a}
        out.append((_case(rng, base, (4, 7), attrs), attrs, f"4x7-{attrs}", True))
    if base in ("multi_margin_loss", "multilabel_soft_margin_loss"):
        for red, ws in (("none", (7,)), ("mean", (7,)), ("sum", (4, 7) if soft else (7,))):
            ops = _case(rng, base, (4, 7), {}) + (rng.uniform(0.2, 2.0, ws),)
            attrs = {"reduction": red} if soft else {"reduction": red, "p": 2 if red == "sum" else 1}
            out.append((ops, attrs, f"weight{ws}-{red}", True))
    if soft:
        out.append((_case(rng, base, (2, 3, 4), {}) + (rng.uniform(0.2, 2.0, (3, 1)),), {"reduction": "none"},
                    "3d-weight31", True))
    if base == "multi_margin_loss":
        out.append(((rng.standard_normal(5), np.array([3], np.int64)), {"reduction": "none"}, "1d-t1", True))
    if base == "multilabel_margin_loss":
        t = np.array([[2, 2, -1, 5, 0, 1], [5, 0, 1, 2, 3, 4], [-1, 0, 0, 0, 0, 0]], np.int64)   # repeat, full, none
        out.append(((rng.standard_normal((3, 6)), t), {"reduction": "none"}, "edge-labels", True))
    if base == "cosine_embedding_loss":
        x = rng.standard_normal((4, 5))
        out.append(((x, -x, np.array([1.0, -1.0, 0.0, 1.0])), {"reduction": "none", "margin": 0.1}, "y0-antiparallel",
                    False))
    return out


def _errors(base):
    d = ROW_LOSSES[base]

    def ins(*ops):
        return ops

    def errors():
        f = ((4, 5), "f32")
        second = {"pair": (f, ((4,), "f32")), "triplet": (f, f), "class": (((4,), "i64"),),
                  "labels": (((4, 5), "i64"),), "soft": (f,)}[d.kind]
        ok = (f,) + second
        yield ErrorCase(ins(*ok), {"reduction": "max"}, InvalidProblemError, r"argument 'reduction'", "red")
        yield ErrorCase(ins(*ok), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "attr")
        if d.kind in ("pair", "triplet", "soft"):
            yield ErrorCase(ins(((4, 5), "f16"), *second), {}, (DTypeMismatchError, InvalidProblemError),
                            r"argument", "dtype")
        yield ErrorCase(ins(f), {}, InvalidProblemError, r"argument 'inputs'", "arity")
        if d.kind != "soft":
            yield ErrorCase(ins(((2, 4, 5), "f32"), *second), {}, InvalidProblemError, r"2-D", "rank")
        if d.kind in ("class", "labels"):
            yield ErrorCase(ins(f, ((4, 5) if d.kind == "class" else (4,), "i64")), {}, InvalidProblemError,
                            r"argument 'target': expected class indices", "target-shape")
            yield ErrorCase(ins(f, (((4,) if d.kind == "class" else (4, 5)), "f32")), {}, DTypeMismatchError,
                            r"argument 'target'", "target-dtype")
        if d.kind == "class":
            yield ErrorCase(ins(*ok, ((4,), "f32")), {}, InvalidProblemError, r"argument 'weight'", "weight-shape")
            yield ErrorCase(ins(*ok), {"p": 3}, InvalidProblemError, r"argument 'p'", "p")
        if d.kind == "soft":
            yield ErrorCase(ins(*ok, ((2, 5), "f32")), {}, InvalidProblemError, r"argument 'weight'", "weight-shape")
        if d.kind == "triplet":
            yield ErrorCase(ins(*ok), {"p": 0.0}, InvalidProblemError, r"argument 'p'", "p")
            yield ErrorCase(ins(*ok), {"swap": 2.0}, InvalidProblemError, r"argument 'swap'", "swap")
        if d.kind == "pair":
            yield ErrorCase(ins(f, f, ((5,), "f32")), {}, InvalidProblemError, r"argument 'target'", "target-shape")
    return errors


def _cost(desc):
    """Bytes: each operand read once from HBM, outputs written once (row kernels keep a row block in registers
    or re-read it from L2).  flops: ~6 per element; multilabel_margin is O(C^2) per row."""
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    x = desc.inputs[1 if desc.op.endswith("_backward") else 0]
    c = x.shape[-1] if x.shape else 1
    per = 3 * c if desc.op.startswith("multilabel_margin") else 6
    return nbytes, per * x.numel


def _tol(dt):
    # f32: a row sum over up to 300 elements plus a sum over the rows (a few tens of ulp)
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 2e-6), DType.f16: (1e-2, 1e-3),
            DType.bf16: (1.6e-2, 1e-2)}[dt]


_WL = {"cosine_embedding_loss": ((16384, 1024), 3), "triplet_margin_loss": ((16384, 1024), 3),
       "multi_margin_loss": ((16384, 1000), 2), "multilabel_margin_loss": ((8192, 256), 2),
       "multilabel_soft_margin_loss": ((16384, 4096), 2)}


def _workloads(base):
    shape, k = _WL[base]
    d = ROW_LOSSES[base]
    if d.kind == "pair":
        ops = (shape, shape, (shape[0],))
    elif d.kind == "class":
        ops = (shape, (shape[0],))
    else:
        ops = (shape,) * k
    return tuple(Workload(f"{base}-{shape[0]}x{shape[1]}-{dt}", ops, dt, {}, backward=True)
                 for dt in (DType.bf16, DType.f32))


register_makers({"cosine_embedding_loss": {"target": "sign"}, "multilabel_margin_loss": {"target": "labels"}})


_SPECS: dict[str, OpSpec] = {}
for _base, _d in ROW_LOSSES.items():
    _bw = f"{_base}_backward"
    _decl = param_attrs(_d.params)
    _SPECS[_base] = register_spec(OpSpec(
        name=_base, family="loss", arg_names=_d.args, check=_check(_base), dtypes=FLOAT_TYPES, attrs=_decl,
        torch_peer=_peer(_base), torch_name=f"torch.nn.functional.{_base}", dropin=_DROPINS[_base],
        grad=_grad_rule(_base), saves=("inputs",), differentiable=_d.diff, samples=case_samples(_cases, _base),
        errors=_errors(_base), tol=_tol, cost=_cost, category="loss", workloads=_workloads(_base),
        doc=f"{_base}: one fused Triton row kernel (per-row loss + per-program partials + a one-program fold).",
    ))
    _SPECS[_bw] = register_spec(backward_spec(
        _SPECS[_base], grad_what="the loss's", cost=_cost,
        doc=f"fused backward of {_base}: the gradients of a row block in one kernel."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, *(f"{b}_backward" for b in ROW_LOSSES))   # the fused ops, one per table row
