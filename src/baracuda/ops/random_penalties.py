"""LLM logit penalties (the sampling family's pre-processing): repetition, frequency and presence penalties in one
op, batched, with per-row parameters.  Not random and not differentiable: it sits beside the samplers
(random_sampling.py) because it feeds them.

apply_penalties(logits [B, V], token_ids [B, L], prompt_lens [B], seq_lens [B],
                repetition_penalty, frequency_penalty, presence_penalty) -> logits' [B, V] (logits' dtype)
    Row b's token history is ``token_ids[b, :seq_lens[b]]``: its first ``prompt_lens[b]`` ids are the prompt, the
    rest the generated output (the layout of a serving engine's per-request token buffer: prompt, then output;
    what lies past ``seq_lens[b]`` is padding and never read).  Per token v of the vocabulary:
        present = v occurs in the history (prompt or output);  c = #occurrences of v in the output part
        l = logits[b, v]
        l = l / r if present and l > 0;  l * r if present and l <= 0    (repetition, HF / vLLM; r = 1: off)
        l = l - f * c - q * (c > 0)                                      (frequency f, presence q: OpenAI / vLLM)
    with r, f, q the row's ``repetition_penalty`` / ``frequency_penalty`` / ``presence_penalty``: each a 0-d tensor
    (one value for every row) or one value per row, shape (B,), any floating dtype.  The order (repetition first,
    then the subtractions) is vLLM's.  Computed in f32 (f64 for f64 logits), rounded once to the logits' dtype.

    Value checks: a history id outside [0, V) is an error (``InvalidProblemError`` naming the argument and the id),
    and so are lengths outside 0 <= prompt_lens[b] <= seq_lens[b] <= L.  The reference raises before writing; the
    Triton kernel never dereferences a bad id (it is skipped: the token is left unpenalized), clamps bad lengths
    into range and sets a device flag that ``_core/checks.py: flagged`` raises as the same error (now, deferred or
    never, as ``PlanPreference.check_values`` says).  Indices never wrap (a negative id is an error, as vLLM's).
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from .indexing import INDEX_TYPES, oob_error

__all__ = ["PENALTY_NAMES", "token_error", "length_error"]

OP = "apply_penalties"
_NAMES = ("logits", "token_ids", "prompt_lens", "seq_lens", "repetition_penalty", "frequency_penalty",
          "presence_penalty")
PENALTY_NAMES = _NAMES[4:]


def token_error(value: int, vocab: int) -> InvalidProblemError:
    """The error of a history token id outside the vocabulary (both backends raise this one)."""
    return oob_error(OP, "token_ids", value, vocab, False, "token ids of the vocabulary, within seq_lens")


def length_error(row: int, length: int) -> InvalidProblemError:
    """The error of a row whose lengths break 0 <= prompt_lens <= seq_lens <= L."""
    return InvalidProblemError(OP, "seq_lens", f"0 <= prompt_lens[b] <= seq_lens[b] <= {length} (token_ids' length) "
                               "in every row", f"a violation in row {row}")


def _check(inputs, attrs):
    if len(inputs) != len(_NAMES):
        raise InvalidProblemError(OP, "inputs", f"{len(_NAMES)} operands ({', '.join(_NAMES)})", len(inputs))
    logits, ids, plens, slens = inputs[:4]
    if logits.dtype not in FLOAT_TYPES:
        raise UnsupportedError(OP, f"dtype {logits.dtype}; the op is defined for {', '.join(map(str, FLOAT_TYPES))}")
    if len(logits.shape) != 2:
        raise InvalidProblemError(OP, "logits", "a 2-d [batch, vocab] tensor", logits.shape)
    B = logits.shape[0]
    if len(ids.shape) != 2 or ids.shape[0] != B:
        raise InvalidProblemError(OP, "token_ids", f"a 2-d [batch = {B}, max length] tensor", ids.shape)
    for name, t in ((_NAMES[1], ids), (_NAMES[2], plens), (_NAMES[3], slens)):
        if t.dtype not in INDEX_TYPES:
            raise DTypeMismatchError(OP, name, "i32 or i64", str(t.dtype))
    for name, t in ((_NAMES[2], plens), (_NAMES[3], slens)):
        if t.shape != (B,):
            raise InvalidProblemError(OP, name, f"one length per row: shape ({B},)", t.shape)
    for name, t in zip(PENALTY_NAMES, inputs[4:]):
        if t.shape not in ((), (B,)):
            raise InvalidProblemError(OP, name, f"a 0-d tensor or one value per row: shape () or ({B},)", t.shape)
        if t.dtype not in FLOAT_TYPES:
            raise DTypeMismatchError(OP, name, "a floating dtype", str(t.dtype))
    return attrs, (TensorSpec(logits.shape, logits.dtype),)


def _torch_peer(logits, ids, plens, slens, rep, freq, pres):
    """vLLM's dense formulation in torch (counts by scatter_add into a [B, V + 1] matrix, the padding in the extra
    column; then the masked divide / multiply and the two subtractions)."""
    import torch

    B, V = logits.shape
    L = ids.shape[1]
    pos = torch.arange(L)[None, :]
    hist = pos < slens[:, None]
    out_part = hist & (pos >= plens[:, None])
    ids = ids.long()
    present = torch.zeros(B, V + 1, dtype=torch.int64).scatter_add_(1, torch.where(hist, ids, V),
                                                                    hist.long())[:, :V] > 0
    counts = torch.zeros(B, V + 1, dtype=torch.int64).scatter_add_(1, torch.where(out_part, ids, V),
                                                                   out_part.long())[:, :V]
    r, f, q = (t.to(logits.dtype).reshape(-1, 1).expand(B, 1) for t in (rep, freq, pres))
    scale = torch.where(present, r, torch.ones_like(r))
    out = torch.where(logits > 0, logits / scale, logits * scale)
    return out - f * counts - q * (counts > 0)


def _samples(rng):
    # (name, B, V, L, scalar penalties): a small vocabulary makes repeats (counts > 1) and prompt / output overlap
    for name, B, V, L, scalar in (("dup", 3, 11, 24, False), ("vocab", 2, 300, 40, False),
                                  ("scalar", 2, 17, 9, True), ("nohist", 2, 5, 0, False), ("empty", 0, 7, 3, False)):
        logits = rng.standard_normal((B, V)) * 3
        ids = rng.integers(0, V, size=(B, L))
        slens = rng.integers(0, L + 1, size=B)
        if B:
            slens[0] = L
        plens = np.array([rng.integers(0, s + 1) for s in slens], dtype=np.int64)
        shape = () if scalar else (B,)
        rep = rng.uniform(0.5, 2.0, size=shape)
        freq = rng.uniform(-0.5, 1.0, size=shape)
        pres = rng.uniform(-0.5, 1.0, size=shape)
        yield Sample((logits, ids, plens, slens.astype(np.int64), rep, freq, pres), {}, name=name, grad=False)


def _errors():
    good = (((4, 10), "f32"), ((4, 6), "i64"), ((4,), "i64"), ((4,), "i32"), ((4,), "f32"), ((), "f32"), ((4,), "f32"))
    yield ErrorCase(good[:6], {}, InvalidProblemError, rf"{OP}: argument 'inputs'", "six")
    yield ErrorCase((((4, 10), "i32"),) + good[1:], {}, UnsupportedError, rf"{OP}: dtype i32", "int-logits")
    yield ErrorCase((((40,), "f32"),) + good[1:], {}, InvalidProblemError, r"argument 'logits'", "1d")
    yield ErrorCase((good[0], ((3, 6), "i64")) + good[2:], {}, InvalidProblemError, r"argument 'token_ids'", "rows")
    yield ErrorCase((good[0], ((4, 6), "f32")) + good[2:], {}, DTypeMismatchError, r"argument 'token_ids'", "fids")
    yield ErrorCase(good[:2] + (((4,), "f32"),) + good[3:], {}, DTypeMismatchError, r"argument 'prompt_lens'", "fl")
    yield ErrorCase(good[:3] + (((5,), "i64"),) + good[4:], {}, InvalidProblemError, r"argument 'seq_lens'", "len")
    yield ErrorCase(good[:4] + (((2, 2), "f32"),) + good[5:], {}, InvalidProblemError,
                    r"argument 'repetition_penalty'", "rep")
    yield ErrorCase(good[:6] + (((4,), "i32"),), {}, DTypeMismatchError, r"argument 'presence_penalty'", "pres")


def _tol(dt):
    # f32: one division (Triton's f32 divide is 2 ulp) and two fused subtractions against the float64 reference;
    # half types: the same in f32, then one rounding to the output's 11 / 8 bits
    return {DType.f64: (1e-12, 1e-12), DType.f32: (1e-5, 1e-5), DType.f16: (1e-3, 1e-3),
            DType.bf16: (8e-3, 8e-3)}[dt]


def _bench_inputs(desc, device, gen):
    """Logits ~ N(0, 3), histories of in-range ids (prompt: the first half of each row), penalties per row."""
    import torch

    g = dict(generator=gen, device=gen.device)
    (B, V), (_, L) = desc.inputs[0].shape, desc.inputs[1].shape
    ins = [torch.randn((B, V), **g).mul(3).to(desc.inputs[0].dtype.torch),
           torch.randint(0, V, (B, L), **g).to(desc.inputs[1].dtype.torch),
           torch.full((B,), L // 2, dtype=desc.inputs[2].dtype.torch), torch.full((B,), L, dtype=desc.inputs[3].dtype.torch)]
    # repetition in [0.7, 1.3], frequency / presence in [0, 0.9] (inside the samples' ranges)
    ins += [torch.rand((B,), **g).mul(0.6 if j == 0 else 0.9).add(0.7 if j == 0 else 0.0).to(t.dtype.torch)
            for j, t in enumerate(desc.inputs[4:])]
    return [t.to(device) for t in ins]


register_spec(OpSpec(
    name=OP, family="random", arg_names=_NAMES, check=_check, dtypes=FLOAT_TYPES,
    attrs=(), samples=_samples, errors=_errors, tol=_tol, torch_peer=_torch_peer,
    workloads=tuple(Workload(f"{OP}-64x128256-L{L}-f32", ((64, 128256), ((64, L), DType.i32), ((64,), DType.i32),
                                                          ((64,), DType.i32), (64,), (64,), (64,)), DType.f32)
                    for L in (1024, 8192)),
    cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes + d.inputs[1].nbytes, 0),
    doc="Repetition (on the prompt + output history), frequency and presence (on the output) penalties of LLM "
        "logits, per row; a new logits tensor."))
set_bench_inputs(OP, _bench_inputs)
