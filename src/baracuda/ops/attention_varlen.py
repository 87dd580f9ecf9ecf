"""Attention family: variable-length (packed) scaled dot-product attention, forward and backward (issue 15).

sdpa_varlen(q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv], cu_seqlens_q [B + 1], cu_seqlens_k [B + 1]
            [, alibi_slopes [Hq] or [B, Hq]], max_seqlen_q, max_seqlen_k, scale, causal, window_left, window_right,
            softcap, dropout_p, seed, offset, has_alibi) -> (out [Tq, Hq, Dv], lse [Hq, Tq])
    Sequence b is rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] of q and cu_seqlens_k[b]:cu_seqlens_k[b + 1] of k / v,
    attended as one sdpa problem with local positions i, j (causal / window / alibi per sequence, with that
    sequence's Sq and Sk).  cu_seqlens: int32 or int64, non-decreasing, starting at 0, ending at Tq / Tk; every
    length <= max_seqlen_q / _k (the kernel's grid): the values are checked when the reference runs
    (InvalidProblemError naming the argument).  Dropout counter: n = offset + ((b * Hq + h) * max_seqlen_q + i) *
    max_seqlen_k + j.  lse is [Hq, Tq] (FlashAttention's varlen layout), f32 (f64 for f64).
sdpa_varlen_backward(grad_out, q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse[, alibi_slopes][, grad_lse],
                     <the same attrs>, has_grad_lse) -> (dq, dk, dv)

Semantics, dtypes and tolerances are sdpa's (ops/attention_sdpa.py); the peer is the dense torch formula per
sequence (torch's varlen kernels are private).

    >>> import torch, baracuda as bc
    >>> q, k, v = torch.randn(10, 4, 16), torch.randn(12, 2, 16), torch.randn(12, 2, 16)
    >>> cu_q, cu_k = torch.tensor([0, 3, 10], dtype=torch.int32), torch.tensor([0, 5, 12], dtype=torch.int32)
    >>> d = bc.Descriptor.like("sdpa_varlen", q, k, v, cu_q, cu_k, max_seqlen_q=7, max_seqlen_k=7,
    ...                        causal="bottom_right")
    >>> [tuple(t.shape) for t in bc.Plan.select(d, "cpu", bc.PlanPreference()).run(q, k, v, cu_q, cu_k)]
    [(10, 4, 16), (4, 10)]
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from .attention_sdpa import (_GRAD_LSE, _SCORE_ATTRS, SDPA_DTYPES, _backward_samples, _check_extras,
                             _count, _extra_names, _flags, _g_attention, _grad_tol, _normalized, _peer_dense, _qkv,
                             _tol, allowed_pairs, attention_cost, check_attention_bw, lse_dtype)

__all__ = ["VARLEN_OPS"]

VARLEN_OPS = ("sdpa_varlen", "sdpa_varlen_backward")
_LEAD = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")
_ATTRS = (Attr("max_seqlen_q", "int", ge=0, expected="an int >= 0, at least every query sequence's length"),
          Attr("max_seqlen_k", "int", ge=0, expected="an int >= 0, at least every key sequence's length"),
          *_SCORE_ATTRS)


def _varlen_problem(op, ins, extras, attrs):
    """(normalized attrs, out spec, lse spec) of the packed forward problem (ins: q, k, v, cu_q, cu_k)."""
    q, k, v, cq, ck = ins
    _, Hq, Hkv, Tq, Tk, D, Dv = _qkv(op, q, k, v, None)
    for n, c in (("cu_seqlens_q", cq), ("cu_seqlens_k", ck)):
        if c.dtype not in (DType.i32, DType.i64):
            raise DTypeMismatchError(op, n, "i32 or i64", str(c.dtype))
        if len(c.shape) != 1 or c.shape[0] < 1:
            raise InvalidProblemError(op, n, "a 1-d tensor [B + 1] (sequence offsets starting at 0)", c.shape)
    if ck.shape != cq.shape:
        raise InvalidProblemError(op, "cu_seqlens_k", f"the shape of cu_seqlens_q {cq.shape} (B + 1)", ck.shape)
    B = cq.shape[0] - 1
    _check_extras(op, dict(zip(_extra_names(attrs, False), extras)), (B, Hq, Hkv, 0, 0, D, Dv), q.dtype, attrs)
    a = _normalized(op, attrs, D, B * Hq * attrs["max_seqlen_q"] * attrs["max_seqlen_k"])
    return a, TensorSpec((Tq, Hq, Dv), q.dtype), TensorSpec((Hq, Tq), lse_dtype(q.dtype))


def _check(inputs, attrs):
    op = "sdpa_varlen"
    _count(op, inputs, _LEAD, _extra_names(attrs, False), _flags(attrs, False))
    a, out, lse = _varlen_problem(op, inputs[:5], inputs[5:], attrs)
    return a, (out, lse)


def _check_bw(inputs, attrs):
    return check_attention_bw("sdpa_varlen_backward", inputs, attrs, ("grad_out",) + _LEAD + ("out", "lse"),
                              _varlen_problem)


# -- torch peer: the dense formula per sequence -------------------------------------------------------------------
def _peer(q, k, v, cu_q, cu_k, *extras, **attrs):
    import torch

    from ..backends.reference.attention_sdpa import dense_counters

    cq, ck = cu_q.tolist(), cu_k.tolist()
    slopes = extras[0] if extras else None
    outs, lses = [], []
    for b in range(len(cq) - 1):
        qb, kb, vb = (t.transpose(0, 1)[None] for t in (q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]))
        ex = {} if slopes is None else {"alibi_slopes": slopes if slopes.dim() == 1 else slopes[b]}
        cnt = dense_counters(attrs["offset"], 1, q.shape[1], qb.shape[2], kb.shape[2], attrs["max_seqlen_q"],
                             attrs["max_seqlen_k"], b0=b) if attrs["dropout_p"] else None
        o, lse = _peer_dense(qb, kb, vb, ex, attrs, cnt)
        outs.append(o[0].transpose(0, 1))
        lses.append(lse[0])
    if not outs:
        return q.new_zeros(0, q.shape[1], v.shape[2]), q.new_zeros(q.shape[1], 0)
    return torch.cat(outs, 0).to(q.dtype), torch.cat(lses, 1)


# -- samples, errors, cost, workloads -----------------------------------------------------------------------------
def _cu(lengths, dt):
    return np.concatenate(([0], np.cumsum(lengths))).astype(dt)


# (name, seq lengths q, seq lengths k, (Hq, Hkv, D, Dv), attrs, alibi shape ("B" for [B, Hq]), cu dtype, grad)
# the first three: the generic gradient samples (operands <= 64 elements, every query row with a key)
_CASES = [
    ("gqa-br-softcap", (2, 3), (3, 3), (2, 1, 4, 3), {"causal": "bottom_right", "softcap": 1.2}, None, np.int32, True),
    ("alibi-window", (1, 4), (2, 4), (2, 2, 3, 3), {"window_left": 1, "causal": "bottom_right"}, "B", np.int64, True),
    ("dropout-tl", (3, 2), (3, 4), (2, 1, 4, 4), {"causal": "top_left", "dropout_p": 0.25, "seed": 3, "offset": 5},
     (2,), np.int32, True),
    ("mixed", (5, 1, 7, 3), (5, 4, 9, 3), (4, 2, 12, 8), {"causal": "bottom_right"}, None, np.int32, False),
    ("empty-seqs", (0, 4, 2, 0), (3, 4, 0, 0), (2, 2, 8, 8), {}, None, np.int64, False),
    ("mqa-tl", (6, 2), (4, 8), (4, 1, 20, 12), {"causal": "top_left", "scale": 0.5}, (4,), np.int32, False),
    ("window-lr-softcap", (7, 5), (7, 6), (2, 2, 8, 8), {"window_left": 2, "window_right": 1, "softcap": 0.9}, None,
     np.int32, False),
    ("dropout-all", (4, 6, 3), (5, 6, 2), (4, 2, 8, 4), {"causal": "bottom_right", "dropout_p": 0.3, "seed": 2 ** 35,
                                                         "window_left": 3}, "B", np.int64, False),
    ("one-seq", (9,), (9,), (2, 2, 12, 12), {"causal": "top_left"}, None, np.int32, False),
    ("no-seqs", (), (), (2, 1, 4, 4), {}, None, np.int32, False),
]


def _case_sample(rng, case):
    name, lq, lk, (Hq, Hkv, D, Dv), attrs, alibi, cdt, grad = case
    Tq, Tk, B = sum(lq), sum(lk), len(lq)
    ins = [rng.standard_normal((Tq, Hq, D)), rng.standard_normal((Tk, Hkv, D)), rng.standard_normal((Tk, Hkv, Dv)),
           _cu(lq, cdt), _cu(lk, cdt)]
    if alibi is not None:
        ins.append(rng.uniform(0.05, 1.0, (B, Hq) if alibi == "B" else alibi))
    # max_seqlen above the longest sequence on every other case (a grid larger than needed is valid)
    a = dict(attrs, has_alibi=alibi is not None, max_seqlen_q=max(lq, default=0) + (len(lq) % 2),
             max_seqlen_k=max(lk, default=0) + 1)
    return Sample(tuple(ins), a, name=name, grad=grad)


def _samples(rng):
    for case in _CASES:
        yield _case_sample(rng, case)


def _bw_inputs(rng, s, with_glse):
    from ..backends.reference.attention_sdpa import sdpa_varlen_f64

    a = dict(_DEFAULTS, **s.attrs)
    out, lse = sdpa_varlen_f64(s.inputs[:5], s.inputs[5:], a)
    extra = (np.where(np.isfinite(lse), rng.standard_normal(lse.shape), 0.0),) if with_glse else ()
    return (rng.standard_normal(out.shape),) + tuple(s.inputs[:5]) + (out, lse) + tuple(s.inputs[5:]) + extra, \
        with_glse


def _errors():
    q, k, v, c = ((10, 4, 8), "f32"), ((12, 2, 8), "f32"), ((12, 2, 6), "f32"), ((3,), "i32")
    M = {"max_seqlen_q": 8, "max_seqlen_k": 8}
    P = InvalidProblemError
    cases = [
        ((q, k, v, c, c), {}, P, r"sdpa_varlen: argument 'max_seqlen_q': expected an int >= 0", "no-max"),
        ((q, k, v, c, c), dict(M, max_seqlen_k=-1), P, r"argument 'max_seqlen_k': expected an int >= 0", "max<0"),
        ((((2, 10, 4, 8), "f32"), k, v, c, c), M, P, r"sdpa_varlen: argument 'q': expected a 3-d tensor \[T, H, D\]",
         "rank-q"),
        ((q, ((12, 3, 8), "f32"), ((12, 3, 6), "f32"), c, c), M, P, r"argument 'k': expected a number of kv heads "
         r"dividing Hq=4", "heads"),
        ((q, ((12, 2, 6), "f32"), v, c, c), M, P, r"argument 'k': expected head dim D=8", "d-mismatch"),
        ((q, k, ((11, 2, 6), "f32"), c, c), M, P, r"argument 'v': expected Hkv=2 heads and Sk=12 keys", "v-keys"),
        ((((10, 4, 8), "i64"), k, v, c, c), M, UnsupportedError, r"sdpa_varlen: argument 'q' has dtype i64", "int-q"),
        ((q, k, v, ((3,), "f32"), c), M, DTypeMismatchError, r"argument 'cu_seqlens_q': expected dtype i32 or i64",
         "cu-dtype"),
        ((q, k, v, c, ((3, 1), "i32")), M, P, r"argument 'cu_seqlens_k': expected a 1-d tensor \[B \+ 1\]", "cu-rank"),
        ((q, k, v, c, ((0,), "i32")), M, P, r"argument 'cu_seqlens_k': expected a 1-d tensor", "cu-empty"),
        ((q, k, v, c, ((4,), "i32")), M, P, r"argument 'cu_seqlens_k': expected the shape of cu_seqlens_q", "cu-len"),
        ((q, k, v, c, c, ((3, 4), "f32")), dict(M, has_alibi=True), P,
         r"argument 'alibi_slopes': expected shape \[Hq\] = \[4\] or \[B, Hq\] = \[2, 4\]", "slopes-shape"),
        ((q, k, v, c, c), dict(M, has_alibi=True), P, r"argument 'inputs': expected 6 operands \(q, k, v, "
         r"cu_seqlens_q, cu_seqlens_k, alibi_slopes\) for has_alibi=True", "missing-slopes"),
        ((q, k, v, c, c), dict(M, dropout_p=1.5), P, r"argument 'dropout_p'", "p>1"),
        ((q, k, v, c, c), dict(M, seed=-3), P, r"argument 'seed'", "seed<0"),
        ((q, k, v, c, c), dict(M, softcap=-0.5), P, r"argument 'softcap'", "softcap<0"),
        ((q, k, v, c, c), dict(M, window_right=-1), P, r"argument 'window_right'", "window<0"),
        ((q, k, v, c, c), dict(M, layout="bshd"), P, r"sdpa_varlen: argument 'layout': expected one of the attributes",
         "no-layout"),
    ]
    for ins, attrs, exc, match, name in cases:
        yield ErrorCase(ins, attrs, exc, match, name)


def _bw_errors():
    for c in _errors():
        if c.name == "missing-slopes":
            continue
        q, v = c.inputs[0], c.inputs[2]
        g = ((q[0][0], q[0][1], v[0][-1]), q[1])
        lse = ((q[0][1], q[0][0]), "f32")
        yield ErrorCase((g,) + tuple(c.inputs[:5]) + (g, lse) + tuple(c.inputs[5:]), c.attrs, c.exc,
                        c.match.replace("sdpa_varlen:", "sdpa_varlen_backward:"), "forward-" + c.name)
    M = {"max_seqlen_q": 8, "max_seqlen_k": 8}
    q, k, v, c, o, lse = ((10, 4, 8), "f32"), ((12, 2, 8), "f32"), ((12, 2, 6), "f32"), ((3,), "i32"), \
        ((10, 4, 6), "f32"), ((4, 10), "f32")
    yield ErrorCase((o, q, k, v, c, c, o, ((10, 4), "f32")), M, InvalidProblemError,
                    r"sdpa_varlen_backward: argument 'lse': expected the forward's lse shape \(4, 10\)", "lse-layout")
    yield ErrorCase((((10, 4, 6), "bf16"), q, k, v, c, c, o, lse), M, DTypeMismatchError,
                    r"argument 'grad_out': expected dtype f32", "grad-dtype")
    yield ErrorCase((o, q, k, v, c, c, o, lse), dict(M, has_grad_lse=True), InvalidProblemError,
                    r"expected 9 operands \(grad_out, q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, grad_lse\)",
                    "missing-grad-lse")


def _pairs_varlen(d):
    """The sequence lengths are data, not in the descriptor: the cost is that of the lengths the benchmark runs
    (``bench_lengths``: the mixed lengths of the workload, else an even split), exact for those inputs."""
    bw = d.op.endswith("_backward")
    q, k, v, cq = d.inputs[1:5] if bw else d.inputs[:4]
    B = cq.shape[0] - 1
    a = [d.attr(n) for n in ("causal", "window_left", "window_right")]
    pairs = sum(allowed_pairs(sq, sk, *a) for sq, sk in zip(bench_lengths(B, q.shape[0]), bench_lengths(B, k.shape[0])))
    return q.shape[1], pairs, q.shape[2], v.shape[2]


# 32 sequences of mixed length (256 to 2048), the 16384 tokens of the dense B4 S4096 case, H32 D128 causal bf16
VARLEN_LENGTHS = (256,) * 16 + (512,) * 8 + (1024,) * 4 + (2048, 1024, 512, 512)
_ORDER = np.random.default_rng(15).permutation(len(VARLEN_LENGTHS))
_T = sum(VARLEN_LENGTHS)


def bench_lengths(B: int, T: int) -> list[int]:
    """The sequence lengths the benchmark gives B sequences of T tokens: VARLEN_LENGTHS (shuffled once) for the
    workload's 32 / 16384, else T split as evenly as B allows."""
    if (B, T) == (len(VARLEN_LENGTHS), _T):
        return [VARLEN_LENGTHS[i] for i in _ORDER]
    return [T // B + (i < T % B) for i in range(B)] if B > 0 else []


_WORKLOADS = (Workload("sdpa_varlen-32seq-t16384h32d128-causal-bf16",
                       ((_T, 32, 128), (_T, 32, 128), (_T, 32, 128), ((33,), DType.i32), ((33,), DType.i32)),
                       DType.bf16, {"causal": "bottom_right", "max_seqlen_q": 2048, "max_seqlen_k": 2048},
                       backward=True),)


def _bench_inputs(desc, device, gen):
    """q / k / v N(0, 1); cu_seqlens of ``bench_lengths``; alibi slopes U(0, 1).  The backward's saved out is
    N(0, 1) and its lse 5 + U(0, 1) (finite: the timing needs valid numbers, not the forward's values)."""
    import torch

    bw = desc.op.endswith("_backward")
    lead = 1 if bw else 0
    q, k, v, cq = desc.inputs[lead:lead + 4]
    B = cq.shape[0] - 1
    g = dict(generator=gen, device=gen.device)

    def cu(T):
        return torch.tensor(_cu(bench_lengths(B, T), np.int64), dtype=cq.dtype.torch, device=device)

    def randn(t, shift=0.0, uniform=False):
        x = torch.rand(t.shape, **g) + shift if uniform else torch.randn(t.shape, **g)
        return x.to(t.dtype.torch).to(device)

    ins = [randn(t) for t in (q, k, v)] + [cu(q.shape[0]), cu(k.shape[0])]
    if bw:
        ins = [randn(desc.inputs[0])] + ins + [randn(desc.inputs[6]), randn(desc.inputs[7], 5.0, True)]
    return ins + [randn(t, 0.0, True) for t in desc.inputs[len(ins):]]


_SPECS: dict[str, OpSpec] = {}
_DEFAULTS = {a.name: a.default for a in _ATTRS if not a.required}
_SPECS["sdpa_varlen"] = register_spec(OpSpec(
    name="sdpa_varlen", family="attention", arg_names=_LEAD + ("alibi_slopes",), check=_check, dtypes=SDPA_DTYPES,
    attrs=_ATTRS, torch_peer=_peer, grad=_g_attention("sdpa_varlen_backward", 5), uses=("sdpa_varlen_backward",),
    saves=("inputs", "outputs"),
    differentiable=(0, 1, 2), samples=_samples, errors=_errors, tol=_tol, grad_tol=_grad_tol, workloads=_WORKLOADS,
    cost=attention_cost(_pairs_varlen), category="attention",
    doc="variable-length sdpa over packed [T, H, D] sequences (cu_seqlens), returns (out, lse [H, T])."))
_SPECS["sdpa_varlen_backward"] = register_spec(OpSpec(
    name="sdpa_varlen_backward", family="attention",
    arg_names=("grad_out",) + _LEAD + ("out", "lse", "alibi_slopes", "grad_lse"), check=_check_bw,
    dtypes=SDPA_DTYPES, attrs=_ATTRS + (_GRAD_LSE,), samples=_backward_samples(_samples, _bw_inputs),
    errors=_bw_errors, tol=_grad_tol, cost=attention_cost(_pairs_varlen), category="attention",
    doc="fused backward of sdpa_varlen: dq, dk, dv per packed sequence (dropout regenerated)."))
set_bench_inputs("sdpa_varlen", _bench_inputs)
set_bench_inputs("sdpa_varlen_backward", _bench_inputs)
