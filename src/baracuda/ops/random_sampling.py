"""LLM sampling on the random family's Philox stream (ops/random.py): top-k, top-p, min-p and their combination,
with per-row thresholds, sort-free.

top_k_top_p_sampling(probs [B, V], top_k [B], top_p [B], min_p [B]; seed, offset) -> int64 [B]
    Each row's weights need not be normalized (total = the row's sum; a negative weight counts as 0).  A token is
    kept iff p >= t with t = min(max(t_kp, min_p * max(p)), max(p)), t_kp the largest value such that
    #{p >= t_kp} >= k or mass{p >= t_kp} >= top_p * total: the tokens both filters keep when applied jointly to the
    original distribution (FlashInfer's 'joint' filter order; tokens tied with the threshold are all kept).
    top_k <= 0 or >= V disables top-k, top_p >= 1 disables top-p (top_p <= 0 keeps the maximum only), min_p = 0
    disables min-p.  The argmax is always kept.  Then the token is the first kept index whose running mass (index
    order) exceeds U * mass(kept), U the 24-bit uniform of stream element offset + row.  The threshold is found
    without sorting: a bisection over the float's bit pattern (31 steps, each one pass over the row counting and
    summing p >= t), as FlashInfer's pivot searches do, so any vocabulary size works.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .random import _OFFSET, _SEED, _tol, stream_check

__all__ = ["SAMPLING_OPS"]
SAMPLING_OPS = ("top_k_top_p_sampling",)
_NAMES = ("probs", "top_k", "top_p", "min_p")


def _check(inputs, attrs):
    op = "top_k_top_p_sampling"
    probs = inputs[0]
    if probs.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"dtype {probs.dtype}; the op is defined for {', '.join(map(str, FLOAT_TYPES))}")
    if len(probs.shape) != 2 or probs.shape[1] == 0:
        raise InvalidProblemError(op, "probs", "a 2-d [batch, vocab] tensor with vocab >= 1", probs.shape)
    B = probs.shape[0]
    for name, t in zip(_NAMES[1:], inputs[1:]):
        if t.shape != (B,):
            raise InvalidProblemError(op, name, f"one value per row: shape ({B},)", t.shape)
    if inputs[1].dtype not in (DType.i32, DType.i64):
        raise DTypeMismatchError(op, "top_k", "i32 or i64", str(inputs[1].dtype))
    for name, t in zip(_NAMES[2:], inputs[2:]):
        if t.dtype not in FLOAT_TYPES:
            raise DTypeMismatchError(op, name, "a floating dtype", str(t.dtype))
    return attrs, (TensorSpec((B,), DType.i64),)


def _samples(rng):
    cases = (("topk", (3, 20), [2, 5, 1], [1.0] * 3, [0.0] * 3),
             ("topp", (3, 20), [0] * 3, [0.5, 0.9, 0.05], [0.0] * 3),
             ("minp", (2, 33), [0, 0], [1.0, 1.0], [0.3, 0.05]), ("joint", (4, 50), [10, 3, 0, 60],
                                                                   [0.8, 0.95, 0.6, 0.3], [0.1, 0.0, 0.2, 0.0]),
             ("off", (2, 9), [0, 9], [1.0, 1.0], [0.0, 0.0]), ("greedy", (2, 7), [1, 0], [1.0, 0.0], [0.0, 0.0]),
             ("long", (2, 3000), [50, 0], [0.9, 0.7], [0.0, 0.01]), ("empty", (0, 5), [], [], []))
    for i, (name, shape, k, p, m) in enumerate(cases):
        probs = rng.uniform(0.0, 1.0, size=shape) ** 3       # skewed, all distinct
        yield Sample((probs, np.array(k, dtype=np.int64), np.array(p, dtype=np.float64), np.array(m, dtype=np.float64)),
                     {"seed": 40 + i, "offset": i}, name=name, grad=False)


def _errors():
    op = "top_k_top_p_sampling"
    good = (((4, 10), "f32"), ((4,), "i64"), ((4,), "f32"), ((4,), "f32"))
    yield ErrorCase(good, {}, InvalidProblemError, r"argument 'seed'", "no-seed")
    yield ErrorCase(good[:3], {"seed": 1}, InvalidProblemError, rf"{op}: argument 'inputs'", "three")
    yield ErrorCase(good + (((2,), "i32"),), {}, InvalidProblemError, rf"{op}: argument 'state'", "state")
    yield ErrorCase((((4, 10), "i32"),) + good[1:], {"seed": 1}, UnsupportedError, r"dtype i32", "int-probs")
    yield ErrorCase((((40,), "f32"),) + good[1:], {"seed": 1}, InvalidProblemError, r"argument 'probs'", "1d")
    yield ErrorCase((good[0], ((3,), "i64")) + good[2:], {"seed": 1}, InvalidProblemError, r"argument 'top_k'", "k")
    yield ErrorCase((good[0], ((4,), "f32")) + good[2:], {"seed": 1}, DTypeMismatchError, r"argument 'top_k'", "kf")
    yield ErrorCase(good[:2] + (((4,), "i32"), good[3]), {"seed": 1}, DTypeMismatchError, r"argument 'top_p'", "pi")


def _bench_peer(probs, top_k, top_p, min_p, *, seed, offset=0):
    """What a torch user writes for the same filter (the bench's peer, not compared: torch.multinomial draws another
    stream): sort each row, keep the top-k ranks, the top-p prefix (mass before the token < top_p * total) and
    min-p, zero the rest, draw with torch.multinomial, map back through the sort's indices."""
    import torch

    p, idx = probs.clamp_min(0).sort(dim=-1, descending=True)
    v = p.shape[-1]
    k = torch.where((top_k <= 0) | (top_k >= v), v, top_k)
    keep = torch.arange(v, device=p.device)[None, :] < k[:, None]
    before = p.cumsum(-1) - p
    keep &= before < top_p.to(p.dtype)[:, None] * p.sum(-1, keepdim=True)
    keep &= p >= min_p.to(p.dtype)[:, None] * p[:, :1]
    keep[:, 0] = True
    gen = torch.Generator(device=p.device).manual_seed(seed + offset)
    pick = torch.multinomial(p.masked_fill(~keep, 0), 1, generator=gen)
    return idx.gather(-1, pick).squeeze(-1)


register_spec(OpSpec(
    name="top_k_top_p_sampling", family="random", arg_names=_NAMES + ("state",), bench_peer=_bench_peer,
    check=stream_check("top_k_top_p_sampling", 4, _check), dtypes=FLOAT_TYPES,
    attrs=(_SEED, _OFFSET), samples=_samples, errors=_errors, tol=_tol,
    workloads=(Workload("top_k_top_p_sampling-64x128256-f32", ((64, 128256), ((64,), DType.i64), (64,), (64,)),
                        DType.f32, {"seed": 7}),),
    cost=lambda d: (d.inputs[0].nbytes, 0),
    doc="Token indices from each row's top-k / top-p / min-p filtered distribution (joint thresholds, per row), "
        "sort-free: the threshold by bisection over the float bits."))
