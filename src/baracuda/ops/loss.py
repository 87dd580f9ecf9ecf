"""Loss family (issue 4): cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss and their fused
backward ops (linear_cross_entropy lives in loss_ce.py).  The pointwise losses are at the end of this module.

cross_entropy(input [N, C, d1, ...] (or unbatched [C]), target, weight=None; reduction, ignore_index, label_smoothing)
  the class dim is dim 1 as in torch; a "row" below is one (n, d1, ...) position, R = N * d1 * ... rows.
  target integer [N, d1, ...] (class indices; rows equal to ignore_index contribute nothing):
    loss_r = (1 - eps) * w[t_r] * (lse_r - x[r, t_r]) + eps / C * sum_c w_c * (lse_r - x[r, c])
    mean divides by sum_r w[t_r] over non-ignored rows (torch's rule; NaN when every row is ignored)
  target floating, the input's shape (class probabilities, smoothed as y * (1 - eps) + eps / C):
    loss_r = -sum_c w_c * y'[r, c] * (x[r, c] - lse_r);  mean divides by R
nll_loss(input [N, C, d1, ...] (or [C]) log-probabilities, target [N, d1, ...] integer, weight=None; reduction, ignore_index)
  loss_r = -w[t_r] * x[r, t_r];  mean divides by sum_r w[t_r] over non-ignored rows.

cross_entropy returns (loss, lse): lse [N, d1, ...] (the rows' shape; f32, f64 for f64 inputs) is the per-row
logsumexp over the classes, saved for the backward so that it reads the logits once; the drop-in returns the
loss only (``dropin_result``), as torch.  lse is differentiable (d lse / d x = softmax(x) along the class dim).

Backward ops (not differentiable themselves, one fused kernel each):
cross_entropy_backward(grad, lse, input, target[, weight]) -> dinput (the input's shape)
  = (exp(x - lse) * sum_c(w_c y'_c) - w * y') * scale_r  with y' the smoothed one-hot (or probability) target,
  scale_r = grad_r (none) | grad (sum) | grad / denominator (mean); lse is the forward's (the softmax is taken
  from it, the op is defined with the given lse), except on rows with |lse| >= LSE_FAR = 128 (or non-finite):
  there an lse rounded to f32 would cost p more than ~8e-6 relative (|lse| 2^-24; at 3e38 it absorbs log 2
  entirely), so those rows take the softmax from their own max and sum (a second read of those rows only).  sum_c w_c y'_c is (1 - eps) w_t + eps / C sum_c w_c for class
  indices: no pass over the row unless label smoothing meets class weights; probability targets (a per-row sum
  of w y') and smoothing with class weights still read the row for that sum (backends/triton/loss).
nll_loss_backward(grad, input, target[, weight]) -> dinput: -w[t_r] * scale_r at (r, t_r), 0 elsewhere.

Out-of-range class indices (other than ignore_index) raise InvalidProblemError; no kernel ever reads out of
bounds (the reference checks on the host; the Triton kernels clamp the index and record a flag; see there).
"""
from __future__ import annotations


import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from .._core.derive import backward_spec
from .._core.derive import declare_rule_ops

__all__ = ["LSE_FAR", "lse_dtype", "lse_rows", "LOSS_OPS", "legacy_reduction", "INDEX_DTYPES", "rows_shape", "reduction_attr", "REDUCTION", "IGNORE_INDEX",
           "LABEL_SMOOTHING", "CE_ATTRS"]

LSE_FAR = 128.0   # see the module docstring: rows whose saved lse is this large recompute their softmax
LOSS_OPS = ("cross_entropy", "nll_loss", "cross_entropy_backward", "nll_loss_backward")
INDEX_DTYPES = (DType.i64, DType.i32)
_REDUCTIONS = ("none", "mean", "sum")


def legacy_reduction(size_average, reduce, reduction: str) -> str:
    """torch's mapping of the deprecated size_average / reduce arguments onto ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "mean" if (size_average and reduce) else "sum" if reduce else "none"


def reduction_attr(choices=_REDUCTIONS, default="mean") -> Attr:
    """torch's ``reduction=`` of a loss (the error text lists the choices)."""
    return Attr("reduction", "str", default, choices=tuple(choices), expected="one of " + ", ".join(map(repr, choices)))


REDUCTION = reduction_attr()
IGNORE_INDEX = Attr("ignore_index", "int", -100)
LABEL_SMOOTHING = Attr("label_smoothing", "float", 0.0, ge=0.0, le=1.0, expected="a float in [0.0, 1.0]")
CE_ATTRS = (REDUCTION, IGNORE_INDEX, LABEL_SMOOTHING)
_DECL = {"cross_entropy": CE_ATTRS, "nll_loss": (REDUCTION, IGNORE_INDEX)}


def _check(op: str):
    """The shape rule of the loss ``op`` (its fused backward's is derived: ``backward_spec``)."""
    base = op

    def check(inputs, attrs):
        if len(inputs) not in (2, 3):
            raise InvalidProblemError(op, "inputs", "2 or 3 operands (input, target[, weight])", len(inputs))
        x, t = inputs[0], inputs[1]
        w = inputs[2] if len(inputs) == 3 else None
        if x.dtype not in FLOAT_TYPES:
            raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")
        if any(d < 0 for d in x.shape):
            raise InvalidProblemError(op, "input", "non-negative dimensions", x.shape)
        if len(x.shape) < 1:
            raise InvalidProblemError(op, "input", "an [N, C, d1, ...] or unbatched [C] tensor", x.shape)
        c = x.shape[0] if len(x.shape) == 1 else x.shape[1]
        rs = rows_shape(x.shape)   # the target's / per-row loss's shape
        if c < 1:
            raise InvalidProblemError(op, "input", "at least one class (C >= 1, dim 1)", x.shape)
        if t.dtype in INDEX_DTYPES:
            if t.shape != rs:
                raise InvalidProblemError(op, "target", f"class indices of shape {rs} (the input's shape "
                                          "without the class dim 1)", t.shape)
        elif t.dtype in FLOAT_TYPES and base == "cross_entropy":
            if t.shape != x.shape:
                raise InvalidProblemError(op, "target", f"class probabilities of the input's shape {x.shape}", t.shape)
            if t.dtype != x.dtype:
                raise DTypeMismatchError(op, "target", str(x.dtype), str(t.dtype))
        else:
            kinds = "i64/i32 class indices" + (" or probabilities of the input's dtype" if base == "cross_entropy" else "")
            raise DTypeMismatchError(op, "target", kinds, str(t.dtype))
        if w is not None:
            if w.shape != (c,):
                raise InvalidProblemError(op, "weight", f"one weight per class, shape {(c,)}", w.shape)
            if w.dtype != x.dtype:
                raise DTypeMismatchError(op, "weight", str(x.dtype), str(w.dtype))
        loss = TensorSpec(rs if attrs["reduction"] == "none" else (), x.dtype)
        if base == "cross_entropy":   # + the rows' logsumexp (saved for the backward)
            return attrs, (loss, TensorSpec(rs, lse_dtype(x.dtype)))
        return attrs, (loss,)
    return check


def lse_dtype(dt: DType) -> DType:
    """cross_entropy's lse output dtype: f64 for f64 inputs, f32 otherwise."""
    return DType.f64 if dt == DType.f64 else DType.f32


def lse_rows(x: np.ndarray) -> np.ndarray:
    """The rows' logsumexp over the class dim (dim 1, dim 0 for an unbatched [C] input) of a NumPy input (-inf
    for an empty row set): cross_entropy's lse output, for samples and the reference."""
    x = np.asarray(x, np.float64)
    ax = 1 if x.ndim > 1 else 0
    if x.size == 0:
        return np.zeros(rows_shape(x.shape))
    m = x.max(axis=ax, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        ms = np.where(np.isfinite(m), m, 0.0)
        return np.squeeze(ms + np.log(np.exp(x - ms).sum(axis=ax, keepdims=True)), axis=ax)


# -- backward rules: one fused op each ----------------------------------------------------------
def _grad_rule(bw_op):
    def rule(ctx, d, grads, s):
        names = ("input", "target", "weight")[: len(d.inputs)]
        ce = d.op == "cross_entropy"
        g, g_lse = grads[0], (grads[1] if ce else None)
        gx = gt = None
        if ctx.needs[0]:
            if g is not None:
                lead = (s["out1"],) if ce else ()
                gx = ctx.op(bw_op, g, *lead, *[s[n] for n in names], **d.attr_dict)
            if g_lse is not None:   # d lse / d x = softmax(x) along the class dim
                gl = _lse_grad(ctx, d, g_lse, s["input"])
                gx = gl if gx is None else ctx.op("add", gx, gl)
        if g is not None and d.inputs[1].dtype in FLOAT_TYPES and ctx.needs[1]:
            gt = _prob_target_grad(ctx, d, g, s)
        return (gx, gt) + (None,) * (len(d.inputs) - 2)
    return rule


def _lse_grad(ctx, d, g_lse, x):
    """softmax(x) * g_lse (g_lse broadcast along the class dim), in the input's dtype."""
    shape = d.inputs[0].shape
    cdim = 0 if len(shape) == 1 else 1
    rows = rows_shape(shape)
    gb = ctx.reshape(g_lse, rows[:1] + (1,) + rows[1:] if cdim else (1,))
    return ctx.op("to_dtype", ctx.op("mul", ctx.op("softmax", x, dim=cdim), gb), dtype=d.inputs[0].dtype)


def _prob_target_grad(ctx, d, g, s):
    """d loss / d y of cross_entropy with class probabilities y (torch differentiates the target there):
    -(1 - eps) w_c log_softmax(x)_c scale_r, scale_r = g_r (none) | g (sum) | g / R (mean over the R rows)."""
    x = d.inputs[0]
    cdim = 0 if len(x.shape) == 1 else 1
    lsm = ctx.op("log_softmax", s["input"], dim=cdim)
    if len(d.inputs) == 3:     # the class weights along the class dim
        lsm = ctx.op("mul", lsm, ctx.reshape(s["weight"], (x.shape[cdim],) + (1,) * (len(x.shape) - cdim - 1)))
    red, rows = d.attr("reduction"), rows_shape(x.shape)
    if red == "none" and cdim:   # per-row upstream, broadcast over the classes
        g = ctx.reshape(g, rows[:1] + (1,) + rows[1:])
    k = -(1.0 - d.attr("label_smoothing")) / (max(int(np.prod(rows)), 1) if red == "mean" else 1)
    return ctx.op("mul_scalar", ctx.op("mul", lsm, g), scalar=k)


# -- torch peers and drop-in adapters -----------------------------------------------------------
def _tt(t):
    import torch

    return t.long() if not torch.is_floating_point(t) else t


def _peer_ce(x, t, w=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    import torch
    import torch.nn.functional as F

    loss = F.cross_entropy(x, _tt(t), weight=w, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    return loss, torch.logsumexp(x.to(acc), dim=0 if x.dim() == 1 else 1)


def _peer_nll(x, t, w=None, reduction="mean", ignore_index=-100):
    import torch.nn.functional as F

    return F.nll_loss(x, _tt(t), weight=w, ignore_index=ignore_index, reduction=reduction)


def _dropin_ce(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
               label_smoothing=0.0):
    ins = (input, target) if weight is None else (input, target, weight)
    return ins, {"reduction": legacy_reduction(size_average, reduce, reduction), "ignore_index": ignore_index,
                 "label_smoothing": float(label_smoothing)}


def _dropin_nll(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    ins = (input, target) if weight is None else (input, target, weight)
    return ins, {"reduction": legacy_reduction(size_average, reduce, reduction), "ignore_index": ignore_index}


# -- samples --------------------------------------------------------------------------------------
def _targets(rng, n, c, ignore=-100, p_ignore=0.2):
    t = rng.integers(0, c, size=n).astype(np.int64)
    if n:
        t[rng.random(n) < p_ignore] = ignore
    return t


def _log_probs(z):
    if z.size == 0:
        return z
    ax = 1 if z.ndim > 1 else 0   # the class dim
    m = z.max(axis=ax, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=ax, keepdims=True))


def rows_shape(x_shape) -> tuple:
    """The target's / per-row loss's shape: the input's shape without the class dim 1 (() for unbatched [C])."""
    return () if len(x_shape) == 1 else (x_shape[0],) + tuple(x_shape[2:])


def _nd_targets(rng, shape, c, ignore=-100, p_ignore=0.2):
    t = rng.integers(0, c, size=shape).astype(np.int64)
    t[rng.random(shape) < p_ignore] = ignore
    return t


def _fw_cases(rng, base):
    """(inputs, attrs, name, grad) of the forward samples; the last one has no weight (the plan-reuse test
    redraws float inputs from N(0, 1), and a mean over random-sign weights would divide by ~0)."""
    nll = base == "nll_loss"
    conv = _log_probs if nll else (lambda z: z)
    out = []
    # every reduction on a small shape; the wider shapes (multi-row blocks, 300-wide rows) once each
    for n, c, reds in ((3, 5, _REDUCTIONS), (1, 7, ("mean",)), (33, 65, ("none",)), (6, 300, ("sum",)),
                       (5, 1, ("mean",))):
        for red in reds:
            x = conv(2.0 * rng.standard_normal((n, c)))
            out.append(((x, _targets(rng, n, c)), {"reduction": red}, f"{n}x{c}-{red}", True))
    x = conv(rng.standard_normal((4, 6)))
    w = rng.uniform(0.2, 2.0, 6)
    for red in _REDUCTIONS:
        out.append(((x, _targets(rng, 4, 6, ignore=3), w), {"reduction": red, "ignore_index": 3}, f"weight-ign3-{red}", True))
    out.append(((conv(rng.standard_normal((0, 5))), np.zeros(0, np.int64)), {"reduction": "mean"}, "N=0-mean", False))
    out.append(((conv(rng.standard_normal((0, 5))), np.zeros(0, np.int64)), {"reduction": "sum"}, "N=0-sum", False))
    out.append(((conv(rng.standard_normal((0, 5))), np.zeros(0, np.int64), rng.uniform(0.5, 1, 5)),
                {"reduction": "none"}, "N=0-none-weight", False))
    out.append(((conv(rng.standard_normal((4, 3))), np.full(4, -100, np.int64)), {"reduction": "sum"}, "all-ignored", True))
    # N-D [N, C, d1, ...] (class dim 1, as torch) and unbatched [C]
    w5 = rng.uniform(0.2, 2.0, 5)
    for shape, red, wt in (((2, 5, 3), "none", None), ((3, 5, 2, 3), "mean", w5), ((2, 5, 7), "sum", w5)):
        x = conv(2.0 * rng.standard_normal(shape))
        ins = (x, _nd_targets(rng, rows_shape(shape), 5)) + ((wt,) if wt is not None else ())
        out.append((ins, {"reduction": red}, f"nd{shape}-{red}", True))
    out.append(((conv(rng.standard_normal((2, 4, 3))), _nd_targets(rng, (2, 3), 4, ignore=1)),
                {"reduction": "mean", "ignore_index": 1}, "nd-ign1-mean", True))
    out.append(((conv(rng.standard_normal((0, 5, 3))), np.zeros((0, 3), np.int64)), {"reduction": "mean"}, "nd-N=0", False))
    out.append(((conv(rng.standard_normal((2, 5, 0))), np.zeros((2, 0), np.int64)), {"reduction": "none"}, "nd-d=0", False))
    out.append(((conv(rng.standard_normal(6)), np.asarray(4, np.int64)), {"reduction": "none"}, "unbatched", True))
    if not nll:
        for red in _REDUCTIONS:
            x = rng.standard_normal((5, 9))
            out.append(((x, _targets(rng, 5, 9), rng.uniform(0.2, 2.0, 9)), {"reduction": red, "label_smoothing": 0.1},
                        f"smooth-weight-{red}", True))
            p = rng.dirichlet(np.ones(9), 5)
            out.append(((x, p), {"reduction": red, "label_smoothing": 0.2 if red == "sum" else 0.0}, f"prob-{red}", True))
        out.append(((rng.standard_normal((4, 7)), rng.dirichlet(np.ones(7), 4), rng.uniform(0.2, 2.0, 7)),
                    {"reduction": "mean", "label_smoothing": 0.05}, "prob-weight-smooth", True))
        out.append(((2 * rng.standard_normal((7, 33)), _targets(rng, 7, 33)), {"reduction": "mean", "label_smoothing": 0.3},
                    "smooth-mean", True))
        x = rng.standard_normal((2, 4, 3, 2))
        out.append(((x, _nd_targets(rng, (2, 3, 2), 4), rng.uniform(0.2, 2.0, 4)),
                    {"reduction": "mean", "label_smoothing": 0.2}, "nd-smooth-weight-mean", True))
        for red in ("none", "mean"):
            p = np.moveaxis(rng.dirichlet(np.ones(4), (2, 3)), -1, 1)   # [2, 4, 3] probabilities over dim 1
            out.append(((x[..., 0], p), {"reduction": red, "label_smoothing": 0.1}, f"nd-prob-{red}", True))
        out.append(((rng.standard_normal(5), rng.dirichlet(np.ones(5))), {"reduction": "sum"}, "unbatched-prob", True))
    else:
        out.append(((conv(rng.standard_normal((7, 33))), _targets(rng, 7, 33)), {"reduction": "mean"}, "7x33-mean", True))
    return out


def _fw_samples(base):
    def samples(rng):
        for ins, attrs, name, grad in _fw_cases(rng, base):
            yield Sample(ins, attrs, name=name, grad=grad)
    return samples


def _errors(base):
    def mk(x, t, w=None):
        return (x, t) if w is None else (x, t, w)

    def errors():
        f = ((4, 5), "f32")
        t = ((4,), "i64")
        yield ErrorCase(mk(((4, 5), "i32"), t), {}, UnsupportedError, r"argument 'input' has dtype i32", "int-input")
        yield ErrorCase(mk(((2, 5, 3), "f32"), ((2, 5), "i64")), {}, InvalidProblemError,
                        r"argument 'target': expected class indices of shape \(2, 3\)", "nd-target")
        yield ErrorCase(mk(((), "f32"), ((), "i64")), {}, InvalidProblemError, r"argument 'input'", "0-d-input")
        yield ErrorCase(mk(f, ((5,), "i64")), {}, InvalidProblemError, r"argument 'target': expected class indices", "target-shape")
        yield ErrorCase(mk(f, ((4,), "f32")), {}, (InvalidProblemError, DTypeMismatchError), r"argument 'target'", "target-kind")
        yield ErrorCase(mk(f, t, ((4,), "f32")), {}, InvalidProblemError, r"argument 'weight': expected one weight", "weight-shape")
        yield ErrorCase(mk(f, t, ((5,), "f16")), {}, DTypeMismatchError, r"argument 'weight': expected dtype f32", "weight-dtype")
        yield ErrorCase(mk(f, t), {"reduction": "avg"}, InvalidProblemError, r"argument 'reduction'", "bad-reduction")
        yield ErrorCase(mk(f, t), {"ignore_index": 1.5}, InvalidProblemError, r"argument 'ignore_index'", "bad-ignore")
        yield ErrorCase(mk(f, t), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        yield ErrorCase(mk(((4, 0), "f32"), t), {}, InvalidProblemError, r"at least one class", "no-classes")
        if base == "cross_entropy":
            yield ErrorCase(mk(f, t), {"label_smoothing": 1.5}, InvalidProblemError, r"argument 'label_smoothing'", "bad-ls")
            yield ErrorCase(mk(f, ((4, 5), "f16")), {}, DTypeMismatchError, r"argument 'target': expected dtype f32", "prob-dtype")
    return errors


# -- workloads and cost -------------------------------------------------------------------------
_WL = ((4096, 128256, DType.bf16), (8192, 32000, DType.bf16), (16384, 1000, DType.f32), (4096, 128256, DType.f32))


def _workloads(base):
    wl = tuple(Workload(f"{base}-{n}x{c}-{dt}", ((n, c), (n,)), dt, {}, backward=True) for n, c, dt in _WL)
    if base == "cross_entropy":   # N-D: a segmentation map, classes D = 512 x 512 apart (the hinted j-vector path)
        wl += (Workload("cross_entropy-16x19x512x512-bf16", ((16, 19, 512, 512), (16, 512, 512)), DType.bf16, {},
                        backward=True),)
    return wl


def _cost(desc):
    """Bytes at the floor: cross_entropy forward reads the logits once; its backward reads them once and writes
    dinput (the GPU's single-read path; the streaming pair of backends/triton/loss.py reads them twice); nll_loss reads one element per row forward and
    writes dinput backward. flops: ~5 per logit (max, sub, exp, add, and the gradient's fma)."""
    bw = desc.op.endswith("_backward")
    x = desc.inputs[1 if bw else 0]
    others = sum(t.nbytes for t in desc.inputs if t is not x) + sum(t.nbytes for t in desc.outputs)
    if desc.op.startswith("nll_loss"):
        n = x.numel // max(x.shape[0 if len(x.shape) == 1 else 1], 1)   # rows
        return others + (0 if bw else n * x.dtype.itemsize), 2 * (x.numel if bw else n)
    return x.nbytes + others, 5 * x.numel


def _tol(dt):
    # one rounding of the output dtype; f32: the lse of rows up to 300 wide and a sum over up to 33 rows
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 2e-6), DType.f16: (1e-2, 1e-3),
            DType.bf16: (1.6e-2, 1e-2)}[dt]


def _register_input_makers_for(ops):
    """Benchmark inputs: class indices in range for index targets, normal draws for the rest."""

    def maker(desc, device, gen):
        import torch

        # the logits' position: after a leading upstream gradient (and cross_entropy_backward's saved lse)
        lead = 2 if desc.op == "cross_entropy_backward" else 1 if desc.op.endswith(("_backward", "_with_grad")) else 0
        ins = []
        for i, t in enumerate(desc.inputs):
            if t.dtype in INDEX_DTYPES:
                c = desc.inputs[lead].shape[1]
                ins.append(torch.randint(0, c, t.shape, generator=gen, device=gen.device).to(t.dtype.torch).to(device))
            else:
                r = torch.randn(t.shape, generator=gen, device=gen.device, dtype=torch.float32)
                ins.append(r.to(t.dtype.torch).to(device))
        if desc.op == "cross_entropy_backward":     # the saved lse is the logits' own (what the forward returned)
            ins[1] = torch.logsumexp(ins[2].float(), dim=1).to(ins[1].dtype)
        return ins

    for op in ops:
        set_bench_inputs(op, maker)


_SPECS: dict[str, OpSpec] = {}
for _base, _peer, _dropin in (("cross_entropy", _peer_ce, _dropin_ce), ("nll_loss", _peer_nll, _dropin_nll)):
    _bw = f"{_base}_backward"
    _SPECS[_base] = register_spec(OpSpec(
        name=_base, family="loss", arg_names=("input", "target", "weight"), check=_check(_base), dtypes=FLOAT_TYPES,
        attrs=_DECL[_base], torch_peer=_peer, torch_name=f"torch.nn.functional.{_base}", dropin=_dropin,
        dropin_result=(lambda o: o[0]) if _base == "cross_entropy" else None,
        grad=_grad_rule(_bw), saves=("inputs", "out1") if _base == "cross_entropy" else ("inputs",),
        samples=_fw_samples(_base),
        # class probabilities (cross_entropy's floating target) get a gradient too, as torch's
        differentiable=(0, 1) if _base == "cross_entropy" else (0,),
        fused_grad="cross_entropy_with_grad" if _base == "cross_entropy" else None, fused_grad_inputs=(0,),
        errors=_errors(_base), tol=_tol, workloads=_workloads(_base), cost=_cost, category="loss",
        doc=f"{_base} over [N, C, d1, ...] inputs (class dim 1, or unbatched [C]): class-index targets with ignore_index and weights"
            + (", probability targets, label smoothing" if _base == "cross_entropy" else "")
            + "; reductions none/sum/mean (mean divides by the summed weights of the kept rows, as torch).",
    ))
    _SPECS[_bw] = register_spec(backward_spec(
        _SPECS[_base], grads=(0,), grad_what="the loss's", cost=_cost,
        **(dict(lead=(("lse", 1),), lead_values=lambda ins, a: (lse_rows(ins[0]),)) if _base == "cross_entropy" else {}),
        doc=f"fused backward of {_base}: d input from grad (the loss's gradient) in one kernel."))

_register_input_makers_for(LOSS_OPS)


# == pointwise regression losses: mse_loss, l1_loss, smooth_l1_loss(beta), huber_loss(delta) ==================
# loss = reduce(f(input - target)); f and f' per op (d = input - target):
#   mse d^2 | 2d;  l1 |d| | sign d;  smooth_l1 |d| < beta ? d^2 / (2 beta) : |d| - beta / 2 | d / beta or sign d
#   huber |d| < delta ? d^2 / 2 : delta (|d| - delta / 2) | d or delta sign d
# Backward op <op>_backward(grad, input, target) -> d input (d target is its negation, via `neg`).
POINTWISE_LOSSES = {"mse_loss": None, "l1_loss": None, "smooth_l1_loss": ("beta", 1.0), "huber_loss": ("delta", 1.0)}


def _pw_decl(base: str) -> tuple:
    par = POINTWISE_LOSSES[base]
    if not par:
        return (REDUCTION,)
    rng = {"ge": 0.0, "expected": "a float >= 0"} if base == "smooth_l1_loss" else {"gt": 0.0, "expected": "a float > 0"}
    return (REDUCTION, Attr(par[0], "float", par[1], **rng))


def _pw_check(op: str):
    def check(inputs, attrs):
        if len(inputs) != 2:
            raise InvalidProblemError(op, "inputs", "2 operands (input, target)", len(inputs))
        x, y = inputs
        for name, t in (("input", x), ("target", y)):
            if t.dtype not in FLOAT_TYPES:
                raise UnsupportedError(op, f"argument '{name}' has dtype {t.dtype}; the op is defined for "
                                       f"{', '.join(map(str, FLOAT_TYPES))}")
            if any(d < 0 for d in t.shape):
                raise InvalidProblemError(op, name, "non-negative dimensions", t.shape)
        if y.shape != x.shape:
            raise InvalidProblemError(op, "target", f"the input's shape {x.shape} (no broadcasting)", y.shape)
        if y.dtype != x.dtype:
            raise DTypeMismatchError(op, "target", str(x.dtype), str(y.dtype))
        return attrs, (TensorSpec(x.shape if attrs["reduction"] == "none" else (), x.dtype),)
    return check


def _pw_grad(bw_op):
    def rule(ctx, d, grads, s):
        gi = ctx.op(bw_op, grads[0], s["input"], s["target"], **d.attr_dict)
        return gi, ctx.op("neg", gi)
    return rule


def _pw_peer(base):
    def peer(x, y, **attrs):
        import torch.nn.functional as F

        return getattr(F, base)(x, y, **attrs)
    return peer


def _pw_dropin(base):
    par = POINTWISE_LOSSES[base]
    if par is None:
        def dropin(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
            if weight is not None:
                raise UnsupportedError(base, "the weight= argument (torch >= 2.6) is not supported")
            return (input, target), {"reduction": legacy_reduction(size_average, reduce, reduction)}
    elif base == "smooth_l1_loss":
        def dropin(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
            return (input, target), {"reduction": legacy_reduction(size_average, reduce, reduction), "beta": beta}
    else:
        def dropin(input, target, reduction="mean", delta=1.0, weight=None):
            if weight is not None:
                raise UnsupportedError(base, "the weight= argument (torch >= 2.6) is not supported")
            return (input, target), {"reduction": reduction, "delta": delta}
    return dropin


def _pw_cases(rng, base):
    par = POINTWISE_LOSSES[base]
    out = []
    for shape, red in (((3, 5), "none"), ((3, 5), "sum"), ((3, 5), "mean"), ((7,), "mean"), ((), "sum"),
                       ((2, 3, 4, 5), "none"), ((33, 65), "mean"), ((0, 4), "mean"), ((0, 4), "sum")):
        attrs = {"reduction": red}
        if par and shape == (3, 5):
            attrs[par[0]] = {"none": 0.5, "sum": 2.0, "mean": par[1]}[red]
        out.append(((1.5 * rng.standard_normal(shape), rng.standard_normal(shape)), attrs,
                    f"{shape}-{attrs}", True))
    if base == "smooth_l1_loss":
        out.append(((rng.standard_normal((4, 3)), rng.standard_normal((4, 3))), {"reduction": "sum", "beta": 0.0},
                    "beta=0", True))
    return out


def _pw_samples(base):
    def samples(rng):
        for (x, y), attrs, name, grad in _pw_cases(rng, base):
            yield Sample((x, y), attrs, name=name, grad=grad)
    return samples


def _pw_errors(base):
    par = POINTWISE_LOSSES[base]

    def ins(a, b):
        return (a, b)

    def errors():
        f = ((3, 4), "f32")
        yield ErrorCase(ins(((3, 4), "i32"), ((3, 4), "i32")), {}, UnsupportedError, r"dtype i32", "int")
        yield ErrorCase(ins(f, ((4,), "f32")), {}, InvalidProblemError, r"argument 'target': expected the input's shape",
                        "shape")
        yield ErrorCase(ins(f, ((3, 4), "f16")), {}, DTypeMismatchError, r"argument 'target': expected dtype f32", "dtype")
        yield ErrorCase(ins(f, f), {"reduction": "max"}, InvalidProblemError, r"argument 'reduction'", "reduction")
        yield ErrorCase(ins(f, f), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "attr")
        if par:
            yield ErrorCase(ins(f, f), {par[0]: -1.0}, InvalidProblemError, rf"argument '{par[0]}'", "param")
    return errors


def _pw_cost(desc):
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    return nbytes, 4 * desc.inputs[-1].numel


for _base in POINTWISE_LOSSES:
    _bw = f"{_base}_backward"
    _SPECS[_base] = register_spec(OpSpec(
        name=_base, family="loss", arg_names=("input", "target"), check=_pw_check(_base), dtypes=FLOAT_TYPES,
        attrs=_pw_decl(_base), torch_peer=_pw_peer(_base), torch_name=f"torch.nn.functional.{_base}",
        dropin=_pw_dropin(_base), grad=_pw_grad(_bw), saves=("inputs",), differentiable=(0, 1),
        samples=_pw_samples(_base), errors=_pw_errors(_base), tol=_tol, cost=_pw_cost, category="loss",
        workloads=(Workload(f"{_base}-16384x4096-bf16", ((16384, 4096), (16384, 4096)), DType.bf16, {}, backward=True),
                   Workload(f"{_base}-16384x4096-f32", ((16384, 4096), (16384, 4096)), DType.f32, {}, backward=True)),
        doc=f"{_base}: one fused Triton kernel (elementwise + per-program partial sums + a one-program fold).",
    ))
    # d target = -d input (the forward's rule negates it): the fused op returns d input only
    _SPECS[_bw] = register_spec(backward_spec(
        _SPECS[_base], grads=(0,), grad_what="the loss's", cost=_pw_cost,
        doc=f"fused backward of {_base}: d input in one pass."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "add", "cross_entropy_backward", "huber_loss_backward", "l1_loss_backward", "log_softmax",
                 "mse_loss_backward", "mul", "mul_scalar", "neg", "softmax", "to_dtype",
                 "nll_loss_backward", "smooth_l1_loss_backward")
