"""Speculative-decoding acceptance on the random family's Philox stream (ops/random.py): the rejection-sampling rule
of Leviathan et al. 2023 / Chen et al. 2023, batched, in one kernel per batch of rows.

speculative_sampling(draft_token_ids [B, K], draft_probs [B, K, V], target_probs [B, K + 1, V]; seed, offset)
speculative_sampling_greedy(draft_token_ids [B, K], target_probs [B, K + 1, V]; seed, offset)
    -> (output_token_ids [B, K + 1] (draft_token_ids' dtype), accepted [B] int32)
The greedy form is the rule for a deterministic draft (greedy decoding, n-gram / prompt lookup): its draft
distribution is one-hot at the proposed token.  Row b draws stream elements e0 .. e0 + 2K, e0 = offset + b (2K + 1)
(``consumed`` = B (2K + 1)), so a row's tokens depend on (seed, offset, b) and its own probabilities only, never on
the launch.  For j = 0 .. K - 1 with x = draft_token_ids[b, j], p = target_probs[b, j, x], q = draft_probs[b, j, x]
(greedy: q = 1) and U_j the 24-bit uniform of element e0 + 2j:
    accept x iff U_j * q < p (float64: U_j q is exact for every input dtype but f64), i.e. with probability
    min(1, p / q); at the first rejection stop: the replacement is drawn from max(0, target_j - draft_j) (greedy:
    target_j with x's entry removed) with element e0 + 2j + 1.  If all K are accepted the bonus token is drawn from
    target_probs[b, K] with element e0 + 2K.
    output_token_ids[b] = the accepted drafts, the drawn token, then -1; accepted[b] = the number of accepted drafts.
The draw is exact integer arithmetic, so every backend picks the same token whatever its summation order: weights
w_v (the residual, or the target row) clamped to [0, 1] become q_v = floor(w_v 2^40) (int64; a probability below
2^-40 counts as 0), Q = sum q_v, T = floor(u Q / 2^24) with u the element's top 24 bits, and the token is the first
v whose running sum of q exceeds T.  Q = 0 (the residual vanishes at that resolution: target and draft agree) draws
from the target row instead; if that is 0 too (not a probability row) the token is 0.  Vocabularies up to 2^23
(V 2^40 < 2^63).  Draft ids outside [0, V) are an error (the reference raises; the Triton kernel rejects the
position, never dereferences the id, and sets the device flag ``flagged`` raises).
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from .indexing import INDEX_TYPES, oob_error
from .random import _OFFSET, _SEED, stream_check

__all__ = ["SPECULATIVE_OPS", "FIXED_BITS", "VOCAB_CAP", "draft_error", "row_stride"]

SPECULATIVE_OPS = ("speculative_sampling", "speculative_sampling_greedy")
FIXED_BITS = 40                 # q_v = floor(w_v * 2^40)
VOCAB_CAP = 2 ** 23             # V * 2^40 < 2^63: the int64 sums never overflow
_ARGS = {"speculative_sampling": ("draft_token_ids", "draft_probs", "target_probs"),
         "speculative_sampling_greedy": ("draft_token_ids", "target_probs")}


def row_stride(K: int) -> int:
    """Stream elements per row: an acceptance and a replacement uniform per draft, one for the bonus token."""
    return 2 * K + 1


def draft_error(op: str, value: int, vocab: int) -> InvalidProblemError:
    return oob_error(op, "draft_token_ids", value, vocab, False, "token ids of the vocabulary")


def _check(op):
    names = _ARGS[op]

    def check(inputs, attrs):
        ids, tgt = inputs[0], inputs[-1]
        if len(ids.shape) != 2:
            raise InvalidProblemError(op, "draft_token_ids", "a 2-d [batch, K] tensor", ids.shape)
        if ids.dtype not in INDEX_TYPES:
            raise DTypeMismatchError(op, "draft_token_ids", "i32 or i64", str(ids.dtype))
        B, K = ids.shape
        if tgt.dtype not in FLOAT_TYPES:
            raise UnsupportedError(op, f"target_probs dtype {tgt.dtype}; the op is defined for "
                                       f"{', '.join(map(str, FLOAT_TYPES))}")
        if len(tgt.shape) != 3 or tgt.shape[:2] != (B, K + 1) or tgt.shape[2] == 0:
            raise InvalidProblemError(op, "target_probs", f"a 3-d [batch = {B}, K + 1 = {K + 1}, vocab >= 1] tensor",
                                      tgt.shape)
        V = tgt.shape[2]
        if V > VOCAB_CAP:
            raise UnsupportedError(op, f"a vocabulary of {V} > 2**23 (the draw's int64 fixed-point sums)")
        if len(names) == 3:
            d = inputs[1]
            if d.shape != (B, K, V):
                raise InvalidProblemError(op, "draft_probs", f"shape ({B}, {K}, {V}) (target_probs' without the "
                                                             "bonus position)", d.shape)
            if d.dtype != tgt.dtype:
                raise DTypeMismatchError(op, "draft_probs", f"target_probs' dtype {tgt.dtype}", str(d.dtype))
        return attrs, (TensorSpec((B, K + 1), ids.dtype), TensorSpec((B,), DType.i32))
    return check


def _probs(rng, shape, peaked):
    """Rows of a probability distribution (some mass exactly zero): Dirichlet-like, peaked or flat."""
    w = rng.uniform(0, 1, size=shape) ** (6 if peaked else 1)
    w[..., 1] = 0.0
    return w / w.sum(-1, keepdims=True)


def _samples(op):
    def samples(rng):
        # (name, B, K, V): the draft is the target perturbed (most drafts accepted) or independent (early stops)
        for i, (name, B, K, V, mix) in enumerate((("close", 4, 3, 16, 0.9), ("far", 5, 4, 9, 0.0),
                                                  ("k1", 3, 1, 40, 0.5), ("k0", 2, 0, 7, 0.5),
                                                  ("empty", 0, 2, 5, 0.5))):
            tgt = _probs(rng, (B, K + 1, V), True)
            draft = mix * tgt[:, :K] + (1 - mix) * _probs(rng, (B, K, V), True)
            ids = np.array([rng.choice(V, p=draft[b, j]) for b in range(B) for j in range(K)],
                           dtype=np.int64).reshape(B, K)
            ops = (ids, draft, tgt) if op == "speculative_sampling" else (ids, tgt)
            yield Sample(ops, {"seed": 70 + i, "offset": i}, name=name, grad=False)
        B, K, V = 3, 2, 6
        tgt = _probs(rng, (B, K + 1, V), False)
        ids = rng.integers(0, V, size=(B, K))
        st = np.array([2 ** 35 + 1, 8], dtype=np.int64)
        ops = (ids, tgt[:, :K], tgt, st) if op == "speculative_sampling" else (ids, tgt, st)
        yield Sample(ops, {"offset": 1}, name="state", grad=False)
    return samples


def _errors(op):
    def errors():
        n = len(_ARGS[op])
        good = (((4, 3), "i64"), ((4, 3, 10), "f32"), ((4, 4, 10), "f32"))
        good = good if n == 3 else (good[0], good[2])
        a = {"seed": 1}
        yield ErrorCase(good, {}, InvalidProblemError, r"argument 'seed'", "no-seed")
        yield ErrorCase(good[:-1], a, InvalidProblemError, rf"{op}: argument 'inputs'", "short")
        yield ErrorCase(good + (((2,), "i32"),), {}, InvalidProblemError, rf"{op}: argument 'state'", "state")
        yield ErrorCase((((4, 3), "f32"),) + good[1:], a, DTypeMismatchError, r"argument 'draft_token_ids'", "fids")
        yield ErrorCase((((12,), "i64"),) + good[1:], a, InvalidProblemError, r"argument 'draft_token_ids'", "1d")
        yield ErrorCase(good[:-1] + (((4, 3, 10), "f32"),), a, InvalidProblemError, r"argument 'target_probs'", "k")
        yield ErrorCase(good[:-1] + (((4, 4, 10), "i32"),), a, UnsupportedError, r"target_probs dtype i32", "int")
        if n == 3:
            yield ErrorCase((good[0], ((4, 3, 9), "f32"), good[2]), a, InvalidProblemError, r"argument 'draft_probs'",
                            "v")
            yield ErrorCase((good[0], ((4, 3, 10), "f64"), good[2]), a, DTypeMismatchError, r"argument 'draft_probs'",
                            "dt")
    return errors


def _bench_inputs(desc, device, gen):
    """Softmax rows (the draft a blend of the target and noise), draft ids drawn from the draft rows."""
    import torch

    g = dict(generator=gen, device=gen.device)
    B, K = desc.inputs[0].shape
    tgt_spec = desc.inputs[-1]
    V = tgt_spec.shape[2]
    tgt = torch.softmax(torch.randn((B, K + 1, V), **g) * 4, -1)
    draft = torch.softmax(torch.log(tgt[:, :K] + 1e-9) + torch.randn((B, K, V), **g), -1)
    ids = torch.multinomial(draft.reshape(B * K, V), 1, generator=gen).reshape(B, K).to(desc.inputs[0].dtype.torch)
    dt = tgt_spec.dtype.torch
    ins = [ids, draft.to(dt), tgt.to(dt)] if len(desc.inputs) == 3 else [ids, tgt.to(dt)]
    return [t.to(device) for t in ins]


for _op in SPECULATIVE_OPS:
    _names = _ARGS[_op]
    _shapes = (((64, 4), DType.i64),) + (((64, 4, 128256),) if len(_names) == 3 else ()) + ((64, 5, 128256),)
    register_spec(OpSpec(
        name=_op, family="random", arg_names=_names + ("state",), check=stream_check(_op, len(_names), _check(_op)),
        dtypes=FLOAT_TYPES, attrs=(_SEED, _OFFSET), samples=_samples(_op), errors=_errors(_op),
        tol=lambda dt: (0.0, 0.0),         # token ids and counts: exact
        workloads=(Workload(f"{_op}-64x4x128256-f32", _shapes, DType.f32, {"seed": 7}),),
        cost=lambda d: (sum(t.nbytes for t in d.inputs) + sum(t.nbytes for t in d.outputs), 0),
        doc="Speculative-decoding acceptance (rejection sampling): accepted drafts, the replacement or bonus token, "
            "-1 padding; and the accepted count per row" + (" (a one-hot draft distribution)." if len(_names) == 2
                                                             else ".")))
    set_bench_inputs(_op, _bench_inputs)
