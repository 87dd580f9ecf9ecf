"""CTC loss (issue 4): ctc_loss and its fused backward ctc_loss_backward.

ctc_loss(log_probs [T, N, C] (or unbatched [T, C]), targets, input_lengths [N], target_lengths [N];
         blank=0, reduction='mean'|'sum'|'none', zero_infinity=False)
  targets: padded [N, S] (row n holds target_lengths[n] labels), or the 1-D concatenation of the N label
  sequences (sum(target_lengths) entries); unbatched: targets [S], the two lengths 0-d.
  Per sequence n (T_n = input_lengths[n], L = target_lengths[n]), over the extended labels l' = (blank, l1, blank,
  l2, ..., lL, blank) of 2L + 1 states:
    alpha_0(s) = lp[0, l'_s] for s < 2,  alpha_t(s) = lp[t, l'_s] + lse(alpha_{t-1}(s), alpha_{t-1}(s-1),
                 alpha_{t-1}(s-2) where l'_s != blank and l'_s != l'_{s-2})
    loss_n = -lse(alpha_{T_n-1}(2L), alpha_{T_n-1}(2L-1))     (T_n = 0: 0 if L = 0 else inf)
  reduction: 'none' [N]; 'sum'; 'mean' = mean_n(loss_n / max(L_n, 1)) (torch's rule).
  zero_infinity: infinite losses (no valid alignment) and their gradients become 0.

ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths) -> d log_probs, torch's convention:
  with beta the mirrored recursion (beta_t(s) also includes lp[t, l'_s]) and scale_n = grad_n (none) | grad (sum)
  | grad / (max(L_n, 1) N) (mean), for t < T_n (0 for t >= T_n, and for a whole sequence zeroed by zero_infinity)
    d lp[t, n, c] = scale_n * (exp(lp[t, n, c]) - sum_{s: l'_s = c} exp(alpha_t(s) + beta_t(s) - lp[t, c] + loss_n))
  The second term alone is the derivative w.r.t. log_probs; torch's backward adds exp(lp) * scale_n, which makes
  it the gradient w.r.t. the logits of a log_softmax feeding the loss (the term sums to 0 through
  log_softmax's backward: for each (t, n) the occupancies sum to 1), and baracuda returns what torch returns.
  So it is not the derivative for unnormalized log_probs: the spec says so (grad_is_derivative=False) and
  tests/loss_ce checks finite differences through log_softmax instead.

Data checks (the host reads the lengths and targets, one sync): input_lengths in [0, T], target_lengths in
[0, S] (padded) or summing to at most len(targets) (concatenated), labels in [0, C) and != blank: each raises
InvalidProblemError naming the argument and the offending entry (torch reads out of bounds or miscomputes).
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, get_spec, register_spec, set_bench_inputs
from .._core.derive import backward_spec
from .._core.derive import declare_rule_ops
from .loss import INDEX_DTYPES, REDUCTION

__all__ = ["CTC_DEFAULTS", "ctc_geometry", "validate_ctc"]

CTC_DEFAULTS = {"blank": 0, "reduction": "mean", "zero_infinity": False}
_OP = "ctc_loss"
_BW = "ctc_loss_backward"


def ctc_geometry(shapes) -> tuple:
    """(T, N, C, batched, padded, S) from the (log_probs, targets) shapes; S: the padded width (or the
    concatenation's length)."""
    lp, tg = shapes
    batched = len(lp) == 3
    t, c = lp[0], lp[-1]
    n = lp[1] if batched else 1
    padded = len(tg) == 2 or not batched
    return t, n, c, batched, padded, tg[-1]


_ATTRS = (Attr("blank", "int", 0, expected="an int in [0, C) (a class of log_probs)"), REDUCTION,
          Attr("zero_infinity", "bool", False))


def _attrs(op, a, c):
    """blank must be a class of log_probs (C = its last dim)."""
    if not 0 <= a["blank"] < c:
        raise InvalidProblemError(op, "blank", f"an int in [0, {c}) (a class of log_probs)", repr(a["blank"]))
    return a


def _check(op):
    def check(inputs, attrs):
        if len(inputs) != 4:
            raise InvalidProblemError(op, "inputs", "4 operands (log_probs, targets, input_lengths, target_lengths)",
                                      len(inputs))
        lp, tg, il, tl_ = inputs
        if lp.dtype not in FLOAT_TYPES:
            raise UnsupportedError(op, f"argument 'log_probs' has dtype {lp.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")
        if len(lp.shape) not in (2, 3) or any(d < 1 for d in lp.shape):
            raise InvalidProblemError(op, "log_probs", "a non-empty [T, N, C] or unbatched [T, C] tensor", lp.shape)
        batched = len(lp.shape) == 3
        n = lp.shape[1] if batched else None
        for name, s in (("targets", tg), ("input_lengths", il), ("target_lengths", tl_)):
            if s.dtype not in INDEX_DTYPES:
                raise DTypeMismatchError(op, name, "i64/i32 integers", str(s.dtype))
        if batched:
            if not (len(tg.shape) == 1 or (len(tg.shape) == 2 and tg.shape[0] == n)):
                raise InvalidProblemError(op, "targets", f"padded [{n}, S] or concatenated 1-D labels", tg.shape)
            for name, s in (("input_lengths", il), ("target_lengths", tl_)):
                if s.shape != (n,):
                    raise InvalidProblemError(op, name, f"one length per sequence, shape {(n,)}", s.shape)
        else:
            if len(tg.shape) != 1:
                raise InvalidProblemError(op, "targets", "1-D labels [S] (unbatched log_probs)", tg.shape)
            for name, s in (("input_lengths", il), ("target_lengths", tl_)):
                if s.shape != ():
                    raise InvalidProblemError(op, name, "a 0-d length (unbatched log_probs)", s.shape)
        a = _attrs(op, attrs, lp.shape[-1])
        return a, (TensorSpec(((n,) if batched else ()) if a["reduction"] == "none" else (), lp.dtype),)
    return check


def validate_ctc(op, t, c, padded, tg, il, tl_, blank):
    """Data checks on host NumPy arrays (lengths 1-D, targets 2-D padded or 1-D): raises InvalidProblemError.
    Returns the per-sequence label offsets into the flattened targets (padded: n * S)."""
    il, tl_ = np.atleast_1d(np.asarray(il)).astype(np.int64), np.atleast_1d(np.asarray(tl_)).astype(np.int64)
    tg = np.asarray(tg).astype(np.int64)
    tg2 = tg.reshape(len(il), -1) if padded else tg.reshape(-1)
    bad = np.flatnonzero((il < 0) | (il > t))
    if bad.size:
        i = int(bad[0])
        raise InvalidProblemError(op, "input_lengths", f"values in [0, {t}] (the time steps of log_probs)",
                                  f"input_lengths[{i}] = {int(il[i])}")
    width = tg2.shape[1] if padded else None
    bad = np.flatnonzero((tl_ < 0) | (tl_ > width)) if padded else np.flatnonzero(tl_ < 0)
    if bad.size:
        i = int(bad[0])
        raise InvalidProblemError(op, "target_lengths", f"values in [0, {width}] (the padded targets' width)",
                                  f"target_lengths[{i}] = {int(tl_[i])}")
    if padded:
        offs = np.arange(len(il), dtype=np.int64) * width
        flat_used = (np.arange(width)[None, :] < tl_[:, None]).reshape(-1)
        labels = tg2
    else:
        if int(tl_.sum()) > tg2.shape[0]:
            raise InvalidProblemError(op, "target_lengths", f"a sum of at most {tg2.shape[0]} (the concatenated "
                                      "targets' length)", int(tl_.sum()))
        offs = np.concatenate([[0], np.cumsum(tl_)[:-1]]).astype(np.int64) if len(tl_) else tl_
        flat_used = np.arange(tg2.shape[0]) < int(tl_.sum())
        labels = tg2
    flat = labels.reshape(-1)
    bad = np.flatnonzero(flat_used & ((flat < 0) | (flat >= c)))
    if bad.size:
        raise InvalidProblemError(op, "targets", f"labels in [0, {c})", f"targets.flatten()[{int(bad[0])}] = "
                                  f"{int(flat[bad[0]])}")
    bad = np.flatnonzero(flat_used & (flat == blank))
    if bad.size:
        raise InvalidProblemError(op, "targets", f"labels other than blank={blank}",
                                  f"targets.flatten()[{int(bad[0])}] = {blank}")
    return offs


# -- backward rule, peer, drop-in ----------------------------------------------------------------------
def _grad(ctx, d, grads, s):
    return (ctx.op(_BW, grads[0], s["log_probs"], s["targets"], s["input_lengths"], s["target_lengths"],
                   **d.attr_dict), None, None, None)


def _peer(lp, tg, il, tl_, blank=0, reduction="mean", zero_infinity=False):
    """F.ctc_loss (its autograd gradient is torch's convention, which the backward op follows)."""
    import torch.nn.functional as F

    return F.ctc_loss(lp, tg.long(), il.long(), tl_.long(), blank=blank, reduction=reduction,
                      zero_infinity=zero_infinity)


def _dropin(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    import torch

    def as_t(v):   # torch also takes tuples of ints, and CPU length tensors for CUDA log_probs
        if isinstance(v, torch.Tensor):
            return v.to(log_probs.device)
        return torch.tensor(v, dtype=torch.long, device=log_probs.device)
    return (log_probs, targets.to(log_probs.device), as_t(input_lengths), as_t(target_lengths)), \
        {"blank": blank, "reduction": reduction, "zero_infinity": bool(zero_infinity)}


# -- samples ----------------------------------------------------------------------------------------
def _lsm(z):
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def _labels(rng, n, s, c, blank):
    pool = np.array([k for k in range(c) if k != blank])
    return pool[rng.integers(0, len(pool), size=(n, s))].astype(np.int64)


def _cases(rng):
    """(inputs, attrs, name, grad); grad samples keep every input <= 64 elements (finite differences)."""
    out = []
    # padded, each reduction; lengths below T / S; a repeated label (needs a blank between the copies)
    lp = _lsm(rng.standard_normal((5, 2, 4)))
    tg = _labels(rng, 2, 3, 4, 0)
    tg[1, 1] = tg[1, 0]
    for red in ("none", "sum", "mean"):
        out.append(((lp, tg, np.array([5, 4]), np.array([2, 3])), {"reduction": red}, f"padded-{red}", True))
    # concatenated 1-D targets, blank = C - 1, a zero-length target
    lp = _lsm(rng.standard_normal((6, 3, 3)))
    tg = _labels(rng, 1, 3, 3, 2)[0]
    out.append(((lp, tg, np.array([6, 3, 5]), np.array([2, 0, 1])), {"blank": 2, "reduction": "mean"},
                "concat-blank2", True))
    # unbatched
    lp = _lsm(rng.standard_normal((7, 5)))
    out.append(((lp, _labels(rng, 1, 3, 5, 0)[0], np.array(7), np.array(3)), {"reduction": "sum"}, "unbatched", True))
    # impossible alignments (inf): T_n = 1 < L, and a repeated label in 2 frames; zero_infinity zeroes them
    lp = _lsm(rng.standard_normal((3, 3, 4)))
    tg = np.array([[1, 2], [3, 3], [2, 1]])
    for zi, red in ((True, "mean"), (True, "none"), (False, "none")):
        out.append(((lp, tg, np.array([1, 2, 3]), np.array([2, 2, 2])), {"zero_infinity": zi, "reduction": red},
                    f"inf-zi{zi}-{red}", zi))
    # a larger case through multi-step recursions (S = 9 -> 19 states), input length 0 with an empty target
    lp = _lsm(rng.standard_normal((20, 4, 11)))
    tg = _labels(rng, 4, 9, 11, 0)
    out.append(((lp, tg, np.array([20, 17, 12, 0]), np.array([9, 5, 6, 0])), {"reduction": "mean"}, "20x4x11-S9", False))
    return out


def _samples(rng):
    for ins, attrs, name, grad in _cases(rng):
        yield Sample(ins, attrs, name=name, grad=grad)


def _errors(op):
    def ins(lp, tg, il, tl_):
        return (lp, tg, il, tl_)

    def errors():
        lp, tg, ln = ((6, 2, 5), "f32"), ((2, 3), "i64"), ((2,), "i64")
        yield ErrorCase(ins(((6, 2, 5), "i32"), tg, ln, ln), {}, UnsupportedError, r"dtype i32", "int")
        yield ErrorCase(ins(((6, 0, 5), "f32"), ((0, 3), "i64"), ((0,), "i64"), ((0,), "i64")), {},
                        InvalidProblemError, r"argument 'log_probs': expected a non-empty", "empty")
        yield ErrorCase(ins(lp, ((3, 3), "i64"), ln, ln), {}, InvalidProblemError, r"argument 'targets'", "tg-shape")
        yield ErrorCase(ins(lp, ((2, 3), "f32"), ln, ln), {}, DTypeMismatchError, r"argument 'targets'", "tg-dtype")
        yield ErrorCase(ins(lp, tg, ((3,), "i64"), ln), {}, InvalidProblemError, r"argument 'input_lengths'", "il")
        yield ErrorCase(ins(lp, tg, ln, ((2, 1), "i64")), {}, InvalidProblemError, r"argument 'target_lengths'", "tl")
        yield ErrorCase(ins(lp, tg, ln, ln), {"blank": 5}, InvalidProblemError, r"argument 'blank'", "blank")
        yield ErrorCase(ins(lp, tg, ln, ln), {"reduction": "avg"}, InvalidProblemError, r"argument 'reduction'", "red")
        yield ErrorCase(ins(lp, tg, ln, ln), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "attr")
        yield ErrorCase(ins(((6, 5), "f32"), ((3,), "i64"), ((1,), "i64"), ((), "i64")), {}, InvalidProblemError,
                        r"argument 'input_lengths': expected a 0-d length", "unbatched-len")
    return errors


# -- cost, tolerance, workloads ---------------------------------------------------------------------------
def _cost(desc):
    """The recursion reads lp[t, n, l'_s] for the 2S+1 states (gathers: ~one 32-byte sector each) and writes a
    few words per sequence; the backward also rereads them, zero-fills and writes d log_probs.  flops: ~12
    per state and step (a 3-way logsumexp)."""
    bw = desc.op == _BW
    lp = desc.inputs[1 if bw else 0]
    t, n, c, _, padded, s = ctc_geometry((lp.shape, desc.inputs[2 if bw else 1].shape))
    width = s if padded else max(1, -(-s // max(n, 1)))
    states = t * n * (2 * width + 1)
    nbytes = states * 32 + sum(x.nbytes for x in desc.inputs[1 if bw else 0:][1:])
    if bw:
        nbytes += 2 * states * 32 + 2 * lp.nbytes
    return nbytes, 12 * states * (2 if bw else 1)


def _tol(dt):
    # a chain of T log-sum-exps in f32 (f64 for f64) from inputs rounded to dt; outputs rounded once
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 2e-6), DType.f16: (1e-2, 1e-3),
            DType.bf16: (1.6e-2, 1e-2)}[dt]


_WL = ((("ctc_loss-T1000xN32xC64xS200-f32"), (1000, 32, 64), 200, DType.f32),
       (("ctc_loss-T400xN64xC1000xS100-bf16"), (400, 64, 1000), 100, DType.bf16))

register_spec(OpSpec(
    name=_OP, family="loss", arg_names=("log_probs", "targets", "input_lengths", "target_lengths"),
    check=_check(_OP), dtypes=FLOAT_TYPES, attrs=_ATTRS, torch_peer=_peer,
    torch_name="torch.nn.functional.ctc_loss", dropin=_dropin, grad=_grad, saves=("inputs",), differentiable=(0,),
    grad_is_derivative=False,   # torch's convention: + exp(log_probs) * scale (module doc)
    samples=_samples, errors=_errors(_OP), tol=_tol, cost=_cost, category="loss",
    workloads=tuple(Workload(name, (shp, (shp[1], s), (shp[1],), (shp[1],)), dt, {}, backward=True)
                    for name, shp, s, dt in _WL),
    doc="CTC loss over [T, N, C] log-probabilities (padded or concatenated targets, unbatched [T, C]); alpha "
        "recursion in log space, one program per sequence; mean divides by the target lengths (torch's rule).",
))
register_spec(backward_spec(
    get_spec(_OP), _BW, grad_what="the loss's", cost=_cost,
    doc="fused backward of ctc_loss: alpha and beta recursions and d log_probs (the derivative w.r.t. log_probs)."))


def _set_bench_inputs():

    def maker(desc, device, gen):
        import torch

        lp, tg = desc.inputs[-4], desc.inputs[-3]
        t, n, c, _, _, s = ctc_geometry((lp.shape, tg.shape))
        g = dict(generator=gen, device=gen.device)
        x = torch.randn(lp.shape, **g, dtype=torch.float32).log_softmax(-1).to(lp.dtype.torch).to(device)
        tgt = torch.randint(1, c, tg.shape, **g).to(tg.dtype.torch).to(device)   # blank 0 never a label
        il = torch.full((n,), t, dtype=torch.long).to(device)
        tl_ = torch.randint(s // 2, s + 1, (n,), **g).to(device)
        ins = [x, tgt, il, tl_]
        if desc.op == _BW:
            ins.insert(0, torch.randn(desc.inputs[0].shape, **g).to(lp.dtype.torch).to(device))
        return ins

    set_bench_inputs(_OP, maker)
    set_bench_inputs(_BW, maker)


_set_bench_inputs()


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "ctc_loss_backward")
