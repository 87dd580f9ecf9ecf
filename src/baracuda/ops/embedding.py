"""Embedding family (issue 17, item 2): embedding, embedding_bag and their fused backward ops.

embedding(input [*] int32/int64, weight [V, D]; padding_idx, max_norm, norm_type, scale_grad_by_freq) -> [*, D]
  out[p] = weight[input[p]].  torch's F.embedding exactly, with:
  * max_norm: torch renormalises the looked-up rows of ``weight`` IN PLACE (row *= max_norm / (norm + 1e-7) where
    its ``norm_type``-norm exceeds max_norm) and returns the renormalised rows.  A plan never writes its inputs:
    the op returns the renormalised rows (its output IS the new value of every row it read), and the drop-in's
    finisher copies them back into ``weight`` (outside autograd, like F.batch_norm's running statistics).  The
    gradient ignores the renormalisation, as torch's.
  * padding_idx (negative wraps by V, as torch): that row gets no gradient (the forward still reads it).
  * scale_grad_by_freq: each token's gradient is divided by the number of times its id occurs in ``input``.
  * sparse=True (a sparse gradient) is refused by the drop-in with UnsupportedError.
embedding_backward(grad [*, D], indices [*]; num_weights, padding_idx, scale_grad_by_freq) -> [V, D]
  torch's embedding_dense_backward.  Two GPU routes: float atomics (fast for f32/f64 outputs, deterministic=False)
  and sort + segmented reduction (deterministic, fixed summation order); PlanPreference(require_deterministic=True)
  selects the second, and the plan's precision and route say which ran (backends/triton/embedding/).

embedding_bag(input [N] (or [B, L]), weight [V, D], offsets [B or B+1] (1-D input), per_sample_weights [N]
              optional; mode, padding_idx, max_norm, norm_type, include_last_offset, scale_grad_by_freq)
  -> (out [B, D][, max_indices [B, D] int64 (mode='max')][, rows [N, D] (max_norm: the renormalised rows)])
  bag b holds tokens [offsets[b], offsets[b+1]) (the last bag ends at N, or at offsets[B] with
  include_last_offset); sum / mean / max over the bag's tokens, padding_idx tokens left out (and not counted by
  mean); an empty bag is 0 (max_indices -1).  max_indices are weight row ids (torch's).  per_sample_weights
  (mode='sum' only) scale each token.  torch's F.embedding_bag returns ``out`` (the drop-in); its 2-D input is
  the bags [B, L] (offsets built by the drop-in).  scale_grad_by_freq divides a token's gradient by its id's count
  in ``input`` (F.embedding's definition; torch 2.13's CPU embedding_bag divides by wrong counts: tests/embedding).
embedding_bag_backward(grad [B, D], input, offsets[, per_sample_weights, weight (or the forward's renormalised
                       rows with token_rows=True: max_norm)][, max_indices (mode='max')]; num_weights, attrs)
  -> (dweight [V, D][, dper_sample_weights [N]]).  An empty bag's max index is -1 (torch's CPU kernel says 0; the
  gradient of an empty bag goes nowhere either way).  mode='max' with scale_grad_by_freq is refused, as torch.

Out-of-range token ids (and offsets that are not a non-decreasing sequence starting at 0 within [0, N]) are
errors (InvalidProblemError naming the op, the argument and the value); the reference raises at once, the Triton
kernels never read or write out of bounds (addresses clamped, stores masked) and raise through
_core/checks.py's device flag.
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec, set_bench_inputs

__all__ = ["EMB_TYPES", "INDEX_TYPES", "bad_index_error"]

INDEX_TYPES = (DType.i64, DType.i32)
EMB_TYPES = FLOAT_TYPES + (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8, DType.bool)

_PAD = Attr("padding_idx", "int", None, optional=True)
_MAXN = Attr("max_norm", "float", None, optional=True)
_NORMT = Attr("norm_type", "float", 2.0)
_FREQ = Attr("scale_grad_by_freq", "bool", False)


def bad_index_error(op: str, arg: str, value, limit: int) -> InvalidProblemError:
    return InvalidProblemError(op, arg, f"indices in [0, {limit})", f"index {int(value)}")


def _pad(op, p, v):
    """padding_idx normalized as torch: negative wraps by V; None stays None."""
    if p is None:
        return None
    if not -v <= p < v:
        raise InvalidProblemError(op, "padding_idx", f"an int in [{-v}, {v}) (weight has {v} rows)", p)
    return p % v


def _check_index(op, name, t):
    if t.dtype not in INDEX_TYPES:
        raise DTypeMismatchError(op, name, "int64 or int32 indices", str(t.dtype))


def _check_weight(op, w, max_norm):
    if len(w.shape) != 2:
        raise InvalidProblemError(op, "weight", "a 2-D tensor [num_embeddings, embedding_dim]", w.shape)
    if w.dtype not in EMB_TYPES:
        raise UnsupportedError(op, f"argument 'weight' has dtype {w.dtype}; the op is defined for "
                               f"{', '.join(map(str, EMB_TYPES))}")
    if max_norm is not None and not w.dtype.is_floating:
        raise UnsupportedError(op, f"max_norm renormalises rows: argument 'weight' must be floating, got {w.dtype}")


def _check_emb(inputs, attrs):
    op = "embedding"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (input, weight)", len(inputs))
    x, w = inputs
    _check_index(op, "input", x)
    _check_weight(op, w, attrs["max_norm"])
    a = dict(attrs, padding_idx=_pad(op, attrs["padding_idx"], w.shape[0]))
    return a, (TensorSpec(tuple(x.shape) + (w.shape[1],), w.dtype),)


def _check_emb_bw(inputs, attrs):
    op = "embedding_backward"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (grad, indices)", len(inputs))
    g, i = inputs
    _check_index(op, "indices", i)
    if g.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument 'grad' has dtype {g.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    if len(g.shape) != len(i.shape) + 1 or tuple(g.shape[:-1]) != tuple(i.shape):
        raise InvalidProblemError(op, "grad", f"shape {tuple(i.shape)} + (embedding_dim,)", g.shape)
    v = attrs["num_weights"]
    a = dict(attrs, padding_idx=_pad(op, attrs["padding_idx"], v) if v else None)
    return a, (TensorSpec((v, g.shape[-1]), g.dtype),)


def _g_emb(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[1].dtype.is_floating:
        return (None, None)
    return (None, ctx.op("embedding_backward", g, s["input"], num_weights=d.inputs[1].shape[0],
                         padding_idx=d.attr("padding_idx"), scale_grad_by_freq=d.attr("scale_grad_by_freq")))


def _peer_emb(x, w, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False):
    import torch.nn.functional as F

    w = w.clone() if max_norm is not None else w      # torch renormalises in place
    return F.embedding(x.long(), w, padding_idx, max_norm, norm_type, scale_grad_by_freq)


def _peer_emb_bw(g, i, num_weights, padding_idx=None, scale_grad_by_freq=False):
    import torch

    return torch.ops.aten.embedding_dense_backward(g, i.long(), num_weights,
                                                   -1 if padding_idx is None else padding_idx, scale_grad_by_freq)


def _dropin_emb(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                sparse=False):
    """F.embedding.  max_norm: the finisher writes the renormalised rows (the output) back into ``weight``."""
    import torch

    if sparse:
        raise UnsupportedError("embedding", "sparse=True (a sparse weight gradient) is not supported; baracuda "
                               "computes the dense gradient (sparse=False)")
    attrs = {"padding_idx": padding_idx, "max_norm": None if max_norm is None else float(max_norm),
             "norm_type": float(norm_type), "scale_grad_by_freq": bool(scale_grad_by_freq)}
    if max_norm is None:
        return (input, weight), attrs

    def finish(out):
        with torch.no_grad():
            weight.index_copy_(0, input.reshape(-1).long(), out.detach().reshape(-1, weight.shape[1]))
        return out
    return (input, weight), attrs, finish


# -- samples, errors, tolerances ---------------------------------------------------------------------------------
def _tokens(rng, shape, v, pad=None):
    t = rng.integers(0, v, size=shape).astype(np.int64)
    if pad is not None and t.size > 2:
        t.reshape(-1)[1] = pad % v
    return t


def _emb_samples(rng):
    # grad=False: padding_idx, max_norm and scale_grad_by_freq follow torch's gradient convention, not the
    # derivative of the forward (no finite differences); tests/embedding checks them against torch's autograd
    w = lambda v, d: rng.standard_normal((v, d))  # noqa: E731
    yield Sample((_tokens(rng, (5,), 7), w(7, 3)), {}, name="5-7x3")
    yield Sample((_tokens(rng, (2, 4), 6).astype(np.int32), w(6, 5)), {}, name="2x4-i32")
    yield Sample((_tokens(rng, (9,), 4), w(4, 2)), {"scale_grad_by_freq": True}, name="freq",
                 grad=False)   # not a derivative (torch's convention): tests/embedding checks it against autograd
    yield Sample((_tokens(rng, (3, 3), 5, pad=2), w(5, 4)), {"padding_idx": 2}, name="pad2", grad=False)
    yield Sample((_tokens(rng, (6,), 5, pad=-1), w(5, 3)), {"padding_idx": -1, "scale_grad_by_freq": True},
                 name="pad-1-freq", grad=False)
    yield Sample((_tokens(rng, (6,), 5), 2 * w(5, 4)), {"max_norm": 1.0}, name="max_norm", grad=False)
    yield Sample((_tokens(rng, (6,), 5), 2 * w(5, 4)), {"max_norm": 1.5, "norm_type": 1.0}, name="max_norm-l1",
                 grad=False)
    yield Sample((np.zeros((0,), np.int64), w(4, 3)), {}, name="empty-input")
    yield Sample((_tokens(rng, (), 4), w(4, 3)), {}, name="0-d")
    yield Sample((_tokens(rng, (4,), 3), w(3, 0)), {}, name="dim0", grad=False)


def _emb_bw_samples(rng):
    for s in _emb_samples(rng):
        if s.attrs.get("max_norm") is not None or s.name == "dim0":
            continue
        i, w = s.inputs
        g = rng.standard_normal(tuple(i.shape) + (w.shape[1],))
        yield Sample((g, i), {"num_weights": w.shape[0], "padding_idx": s.attrs.get("padding_idx"),
                              "scale_grad_by_freq": s.attrs.get("scale_grad_by_freq", False)}, name=s.name)


def _emb_errors():
    x, w = ((5,), "i64"), ((7, 3), "f32")
    yield ErrorCase((((5,), "f32"), w), {}, DTypeMismatchError, r"embedding: argument 'input'", "float-input")
    yield ErrorCase((x, ((7,), "f32")), {}, InvalidProblemError, r"argument 'weight': expected a 2-D", "1d-weight")
    yield ErrorCase((x, w), {"padding_idx": 7}, InvalidProblemError, r"argument 'padding_idx'", "pad-range")
    yield ErrorCase((x, w), {"padding_idx": -8}, InvalidProblemError, r"argument 'padding_idx'", "pad-neg")
    yield ErrorCase((x, ((7, 3), "i32")), {"max_norm": 1.0}, UnsupportedError, r"max_norm", "int-maxnorm")
    yield ErrorCase((x, ((7, 3), "c64")), {}, UnsupportedError, r"argument 'weight' has dtype c64", "complex")
    yield ErrorCase((x, w), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "attr")


def _emb_bw_errors():
    g, i = ((5, 3), "f32"), ((5,), "i64")
    yield ErrorCase((g, i), {}, InvalidProblemError, r"argument 'num_weights'", "no-v")
    yield ErrorCase((((4, 3), "f32"), i), {"num_weights": 4}, InvalidProblemError, r"argument 'grad'", "shape")
    yield ErrorCase((((5, 3), "i32"), i), {"num_weights": 4}, UnsupportedError, r"argument 'grad' has dtype", "int")
    yield ErrorCase((g, i), {"num_weights": 4, "padding_idx": 4}, InvalidProblemError, r"argument 'padding_idx'", "pad")


def _bw_tol(dt):
    # the gradient rows sum <= 9 token gradients in f32 (f64 for f64) and round once to the dtype
    return {DType.f64: (1e-10, 1e-10), DType.f32: (1e-5, 1e-5)}.get(dt) or default_tol(dt)


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs[:1]) + 2 * sum(t.nbytes for t in desc.outputs), 0


def _cost_bw(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), desc.inputs[0].numel


_V, _T, _H = 128256, 16384, 4096
register_spec(OpSpec(
    name="embedding", family="embedding", arg_names=("input", "weight"), check=_check_emb, dtypes=EMB_TYPES,
    attrs=(_PAD, _MAXN, _NORMT, _FREQ), torch_peer=_peer_emb, torch_name="torch.nn.functional.embedding",
    dropin=_dropin_emb, grad=_g_emb, saves=("input",), differentiable=(1,), samples=_emb_samples, errors=_emb_errors,
    # a row copy is exact; max_norm's scale is computed in f32 (f64 for f64) and applied once
    tol=lambda dt: (0.0, 0.0) if not dt.is_floating else default_tol(dt) if dt in (DType.f16, DType.bf16)
    else ((1e-6, 1e-6) if dt == DType.f32 else (1e-12, 1e-12)),
    grad_tol=_bw_tol, cost=_cost, category="embedding", jax_name="jax.numpy.take",
    # issue 17's table: rows of 4096 bf16 from a 128256-row vocabulary, 16384 tokens (>= 2.5 TB/s)
    workloads=(Workload("embedding-16384x[128256,4096]-bf16", (((_T,), DType.i64), (_V, _H)), DType.bf16, {},
                        backward=True),),
    doc="F.embedding: rows of weight by token id (padding_idx, max_norm renormalisation, scale_grad_by_freq)."))

register_spec(OpSpec(
    name="embedding_backward", family="embedding", arg_names=("grad", "indices"), check=_check_emb_bw,
    dtypes=FLOAT_TYPES, attrs=(Attr("num_weights", "int", ge=0, expected="an int >= 0 (the weight's rows)"),
                               _PAD, _FREQ),
    torch_peer=_peer_emb_bw, torch_name="torch.ops.aten.embedding_dense_backward", samples=_emb_bw_samples,
    errors=_emb_bw_errors, tol=_bw_tol, cost=_cost_bw, category="embedding",
    workloads=(Workload("embedding_backward-16384x[128256,4096]-bf16-deterministic",
                        ((_T, _H), ((_T,), DType.i64)), DType.bf16, {"num_weights": _V},
                        pref={"require_deterministic": True}),
               Workload("embedding_backward-16384x[128256,4096]-f32-atomic",
                        ((_T, _H), ((_T,), DType.i64)), DType.f32, {"num_weights": _V})),
    doc="the dense weight gradient of embedding: token gradients summed by id (atomic or sorted-deterministic)."))


def _set_bench_inputs():
    def maker(desc, device, gen):
        import torch

        kw = dict(generator=gen, device=gen.device)
        v = desc.attr("num_weights") if desc.op == "embedding_backward" else desc.inputs[1].shape[0]
        ins = []
        for t in desc.inputs:
            if t.dtype in INDEX_TYPES:
                ins.append(torch.randint(0, v, t.shape, **kw).to(t.dtype.torch).to(device))
            else:
                ins.append(torch.randn(t.shape, **kw).to(t.dtype.torch).to(device))
        return ins

    for op in ("embedding", "embedding_backward"):
        set_bench_inputs(op, maker)


_set_bench_inputs()


declare_rule_ops(__name__, "embedding_backward")
