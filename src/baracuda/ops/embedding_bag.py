"""embedding_bag and embedding_bag_backward (issue 17, item 2): the semantics are in ops/embedding.py's docstring.

Operands of the op: (input [N] int, weight [V, D] float, offsets [B or B + 1] int[, per_sample_weights [N]]).
torch's 2-D input [B, L] (fixed-length bags, no offsets) is the drop-in's business: it passes the flattened
input and the offsets 0, L, 2L, ... (a B-element arange).
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec, set_bench_inputs
from .embedding import _check_index, _pad

__all__ = ["bag_bounds", "BAG_MODES"]

BAG_MODES = ("sum", "mean", "max")
_OP, _BW = "embedding_bag", "embedding_bag_backward"
_MODE = Attr("mode", "str", "mean", choices=BAG_MODES)
_COMMON = (_MODE, Attr("padding_idx", "int", None, optional=True), Attr("scale_grad_by_freq", "bool", False),
           Attr("include_last_offset", "bool", False))


def bag_bounds(op, offsets: np.ndarray, n: int, include_last: bool):
    """(starts, ends) of the bags; raises the named error for offsets that are not a non-decreasing sequence
    starting at 0 within [0, N] (torch's CPU checks; the GPU kernels flag the same)."""
    o = np.asarray(offsets).astype(np.int64).reshape(-1)
    bad = (len(o) and o[0] != 0) or (o < 0).any() or (o > n).any() or (np.diff(o) < 0).any()
    if bad:
        raise InvalidProblemError(op, "offsets", f"a non-decreasing sequence starting at 0 within [0, {n}]",
                                  o.tolist()[:8])
    b = len(o) - 1 if include_last else len(o)
    ends = o[1:b + 1] if include_last else np.append(o[1:], n)
    return o[:b], ends


def _nbags(op, offsets, include_last):
    b = offsets.shape[0] - 1 if include_last else offsets.shape[0]
    if b < 0:
        raise InvalidProblemError(op, "offsets", "at least one offset with include_last_offset=True", offsets.shape)
    return b


def _check(inputs, attrs):
    if len(inputs) not in (3, 4):
        raise InvalidProblemError(_OP, "inputs", "3 or 4 operands (input, weight, offsets[, per_sample_weights])",
                                  len(inputs))
    x, w, off = inputs[:3]
    _check_index(_OP, "input", x)
    _check_index(_OP, "offsets", off)
    if len(x.shape) != 1:
        raise InvalidProblemError(_OP, "input", "a 1-D tensor of token ids (the drop-in flattens torch's 2-D bags)",
                                  x.shape)
    if len(off.shape) != 1:
        raise InvalidProblemError(_OP, "offsets", "a 1-D tensor", off.shape)
    if len(w.shape) != 2:
        raise InvalidProblemError(_OP, "weight", "a 2-D tensor [num_embeddings, embedding_dim]", w.shape)
    if w.dtype not in FLOAT_TYPES:
        raise UnsupportedError(_OP, f"argument 'weight' has dtype {w.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    mode = attrs["mode"]
    if mode == "max" and attrs["scale_grad_by_freq"]:
        raise InvalidProblemError(_OP, "scale_grad_by_freq", "False with mode='max' (torch: max mode does not "
                                  "support scaling the gradient by the frequency)", True)
    if len(inputs) == 4:
        p = inputs[3]
        if mode != "sum":
            raise UnsupportedError(_OP, f"per_sample_weights is only supported for mode='sum' (torch), got '{mode}'")
        if p.shape != x.shape:
            raise InvalidProblemError(_OP, "per_sample_weights", f"shape {x.shape} (one weight per token)", p.shape)
        if p.dtype != w.dtype:
            raise DTypeMismatchError(_OP, "per_sample_weights", str(w.dtype), str(p.dtype))
    b = _nbags(_OP, off, attrs["include_last_offset"])
    d = w.shape[1]
    outs = [TensorSpec((b, d), w.dtype)]
    if mode == "max":
        outs.append(TensorSpec((b, d), DType.i64))
    if attrs["max_norm"] is not None:
        outs.append(TensorSpec((x.shape[0], d), w.dtype))
    return dict(attrs, padding_idx=_pad(_OP, attrs["padding_idx"], w.shape[0])), tuple(outs)


def _check_bw(inputs, attrs):
    mode = attrs["mode"]
    want = {"max": 4}.get(mode, (3, 5))
    if len(inputs) not in ((want,) if isinstance(want, int) else want):
        raise InvalidProblemError(_BW, "inputs", "(grad, input, offsets) for sum / mean, + (per_sample_weights, weight) "
                                  "for weighted sums, + (max_indices,) for max", len(inputs))
    g, x, off = inputs[:3]
    if mode == "max" and attrs["scale_grad_by_freq"]:
        raise InvalidProblemError(_BW, "scale_grad_by_freq", "False with mode='max' (torch)", True)
    _check_index(_BW, "input", x)
    _check_index(_BW, "offsets", off)
    if g.dtype not in FLOAT_TYPES:
        raise UnsupportedError(_BW, f"argument 'grad' has dtype {g.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    if len(x.shape) != 1 or len(off.shape) != 1:
        raise InvalidProblemError(_BW, "input", "1-D input and offsets", (x.shape, off.shape))
    b = _nbags(_BW, off, attrs["include_last_offset"])
    if len(g.shape) != 2 or g.shape[0] != b:
        raise InvalidProblemError(_BW, "grad", f"shape ({b}, embedding_dim)", g.shape)
    v, d = attrs["num_weights"], g.shape[1]
    outs = [TensorSpec((v, d), g.dtype)]
    if mode == "max":
        if inputs[3].shape != g.shape or inputs[3].dtype != DType.i64:
            raise InvalidProblemError(_BW, "max_indices", f"int64 of shape {g.shape}", (inputs[3].shape, inputs[3].dtype))
    elif len(inputs) == 5:
        p, w = inputs[3], inputs[4]
        if p.shape != x.shape or p.dtype != g.dtype:
            raise InvalidProblemError(_BW, "per_sample_weights", f"{g.dtype} of shape {x.shape}", (p.shape, p.dtype))
        rows = (x.shape[0], d) if attrs["token_rows"] else (v, d)
        if w.shape != rows or w.dtype != g.dtype:
            raise InvalidProblemError(_BW, "weight", f"{g.dtype} of shape {rows} (token_rows={attrs['token_rows']})",
                                      (w.shape, w.dtype))
        outs.append(TensorSpec(x.shape, g.dtype))
    return dict(attrs, padding_idx=_pad(_BW, attrs["padding_idx"], v) if v else None), tuple(outs)


def _saves(desc):
    names = ("input", "offsets")
    if len(desc.inputs) == 4:
        # with max_norm the weight is renormalised in place by the drop-in after the forward: the per-sample
        # gradient reads the forward's renormalised token rows instead (a saved weight would have moved on)
        names += ("per_sample_weights", "weight" if desc.attr("max_norm") is None else "out1")
    if desc.attr("mode") == "max":
        names += ("out1",)
    return names


def _grad(ctx, d, grads, s):
    g = grads[0]
    if g is None:
        return (None,) * len(d.inputs)
    a = {k: d.attr(k) for k in ("mode", "padding_idx", "scale_grad_by_freq", "include_last_offset")}
    rows = d.attr("max_norm") is not None
    extra = ((s["per_sample_weights"], s["out1" if rows else "weight"]) if len(d.inputs) == 4
             else (s["out1"],) if a["mode"] == "max" else ())
    res = ctx.op(_BW, g, s["input"], s["offsets"], *extra, num_weights=d.inputs[1].shape[0], token_rows=rows, **a)
    if len(d.inputs) == 4:
        return (None, res[0], None, res[1])
    return (None, res[0] if isinstance(res, tuple) else res, None)


def _peer(x, w, off, psw=None, mode="mean", padding_idx=None, max_norm=None, norm_type=2.0,
          scale_grad_by_freq=False, include_last_offset=False):
    import torch

    x = x.long()
    if max_norm is not None:   # torch renormalises in place: on a copy
        w = w.clone()
        with torch.no_grad():
            torch.embedding_renorm_(w, x, max_norm, norm_type)
    o = torch.embedding_bag(w, x, off.long(), scale_grad_by_freq, BAG_MODES.index(mode), False, psw,
                            include_last_offset, padding_idx)   # (aten reads -1 as row V - 1: None is none)
    res = (o[0],)
    if mode == "max":   # an empty bag's index: torch's CPU kernel says 0, ours -1 (nothing to route a gradient to)
        res += (torch.where(o[2][:, None] == 0, -1, o[3]),)
    if max_norm is not None:
        res += (w[x],)
    return res if len(res) > 1 else res[0]


def _np_bag(op, x, w, off, psw, mode, padding_idx, include_last_offset, max_norm, norm_type, renorm):
    """The float64 forward (NumPy; ``renorm`` is the reference's max_norm rule): (out[, max_indices][, rows])."""
    starts, ends = bag_bounds(op, off, len(x), include_last_offset)
    rows = w[x] if max_norm is None else renorm(w[x], max_norm, norm_type)
    b, d = len(starts), w.shape[1]
    out = np.zeros((b, d))
    idx = np.full((b, d), -1, np.int64)
    for j, (s0, e0) in enumerate(zip(starts, ends)):
        keep = [k for k in range(s0, e0) if padding_idx is None or x[k] != padding_idx]
        if not keep:
            continue
        r = rows[keep] * (psw[keep][:, None] if psw is not None else 1.0)
        if mode == "max":
            a = np.argmax(r, 0)             # the first maximum (torch's strict >)
            out[j], idx[j] = r[a, np.arange(d)], x[np.asarray(keep)[a]]
        else:
            out[j] = r.sum(0) / (len(keep) if mode == "mean" else 1)
    res = (out,) + ((idx,) if mode == "max" else ()) + ((rows,) if max_norm is not None else ())
    return res


def _dropin(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
            sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """F.embedding_bag: 2-D input = bags of its row length (offsets built here); max_norm: the finisher writes the
    renormalised rows back into ``weight`` (torch renormalises in place); returns the bags' output."""
    import torch

    if sparse:
        raise UnsupportedError(_OP, "sparse=True (a sparse weight gradient) is not supported")
    if input.dim() == 2:
        if offsets is not None:
            raise InvalidProblemError(_OP, "offsets", "None when input is 2-D (torch)", "a tensor")
        b, L = input.shape
        offsets = torch.arange(0, b * L, L, device=input.device, dtype=input.dtype) if b else \
            input.new_zeros((0,))
        input = input.reshape(-1)
        if include_last_offset:
            raise UnsupportedError(_OP, "include_last_offset=True with a 2-D input")
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif offsets is None:
        raise InvalidProblemError(_OP, "offsets", "a 1-D tensor when input is 1-D", None)
    offsets = offsets.to(input.dtype) if offsets.dtype != input.dtype else offsets
    ins = (input, weight, offsets) + ((per_sample_weights,) if per_sample_weights is not None else ())
    attrs = {"mode": mode, "padding_idx": padding_idx, "max_norm": None if max_norm is None else float(max_norm),
             "norm_type": float(norm_type), "scale_grad_by_freq": bool(scale_grad_by_freq),
             "include_last_offset": bool(include_last_offset)}

    def finish(out):
        if max_norm is not None:
            with torch.no_grad():
                weight.index_copy_(0, input.long(), out[-1].detach())
        return out[0] if isinstance(out, tuple) else out
    return ins, attrs, finish


# -- samples, errors -------------------------------------------------------------------------------------------
def _samples(rng):
    def case(n, v, d, offs, psw=False, **attrs):
        x = rng.integers(0, v, size=n).astype(np.int64)
        if attrs.get("padding_idx") is not None and n > 2:
            x[2] = attrs["padding_idx"] % v
        ins = (x, rng.standard_normal((v, d)) * (2 if attrs.get("max_norm") else 1), np.asarray(offs, np.int64))
        ins += (rng.standard_normal(n),) if psw else ()
        grad = not (attrs.get("padding_idx") is not None or attrs.get("max_norm") or attrs.get("scale_grad_by_freq"))
        return Sample(ins, attrs, name=f"{n}-{v}x{d}-{offs}-{attrs}{'-psw' if psw else ''}", grad=grad)

    for mode in BAG_MODES:
        yield case(7, 6, 3, [0, 2, 2, 5], mode=mode)
        yield case(6, 5, 4, [0, 3, 6], mode=mode, include_last_offset=True)
        yield case(8, 4, 2, [0, 4], mode=mode, padding_idx=1)
        yield case(5, 6, 3, [0, 1, 3], mode=mode, max_norm=1.0)
    yield case(7, 6, 3, [0, 3, 4], psw=True, mode="sum")
    yield case(6, 5, 3, [0, 2], psw=True, mode="sum", max_norm=1.0)
    yield case(6, 3, 2, [0, 2], mode="mean", scale_grad_by_freq=True)
    yield case(0, 4, 3, [0, 0], mode="mean")
    yield case(0, 4, 3, np.zeros(0), mode="sum")


def _bw_samples(rng):
    for s in _samples(rng):
        if s.attrs.get("max_norm"):
            continue
        x, w, off = s.inputs[:3]
        a = {k: s.attrs.get(k, v) for k, v in (("mode", "mean"), ("padding_idx", None), ("scale_grad_by_freq", False),
                                               ("include_last_offset", False))}
        outs = _np_bag(_OP, x, w, off, s.inputs[3] if len(s.inputs) == 4 else None, a["mode"],
                       None if a["padding_idx"] is None else a["padding_idx"] % w.shape[0], a["include_last_offset"],
                       None, 2.0, None)
        g = rng.standard_normal(outs[0].shape)
        extra = (s.inputs[3], w) if len(s.inputs) == 4 else (outs[1],) if a["mode"] == "max" else ()
        yield Sample((g, x, off) + extra, dict(a, num_weights=w.shape[0]), name=s.name, grad=False)


def _errors():
    x, w, o = ((6,), "i64"), ((5, 3), "f32"), ((3,), "i64")
    yield ErrorCase((((2, 3), "i64"), w, o), {}, InvalidProblemError, r"argument 'input': expected a 1-D", "2d")
    yield ErrorCase((x, ((5, 3), "i32"), o), {}, UnsupportedError, r"argument 'weight' has dtype i32", "int-w")
    yield ErrorCase((x, w, ((3,), "f32")), {}, DTypeMismatchError, r"argument 'offsets'", "float-off")
    yield ErrorCase((x, w, o, ((6,), "f32")), {"mode": "max"}, UnsupportedError, r"only supported for mode='sum'", "psw")
    yield ErrorCase((x, w, o, ((5,), "f32")), {"mode": "sum"}, InvalidProblemError, r"per_sample_weights", "psw-shape")
    yield ErrorCase((x, w, o), {"mode": "median"}, InvalidProblemError, r"argument 'mode'", "mode")
    yield ErrorCase((x, w, ((0,), "i64")), {"include_last_offset": True}, InvalidProblemError, r"argument 'offsets'",
                    "no-offsets")
    yield ErrorCase((x, w, o), {"padding_idx": 5}, InvalidProblemError, r"argument 'padding_idx'", "pad")
    yield ErrorCase((x, w, o), {"mode": "max", "scale_grad_by_freq": True}, InvalidProblemError,
                    r"argument 'scale_grad_by_freq'", "max-freq")


def _bw_errors():
    g, x, o = ((3, 2), "f32"), ((6,), "i64"), ((3,), "i64")
    yield ErrorCase((g, x, o), {"mode": "sum"}, InvalidProblemError, r"argument 'num_weights'", "no-v")
    yield ErrorCase((((4, 2), "f32"), x, o), {"mode": "sum", "num_weights": 5}, InvalidProblemError, r"argument 'grad'",
                    "grad-shape")
    yield ErrorCase((g, x, o), {"mode": "max", "num_weights": 5}, InvalidProblemError, r"argument 'inputs'", "max-idx")


def _tol(dt):
    # a bag sums <= 8 rows in f32 (f64 for f64), rounded once; an integer key (the first operand is the token ids,
    # which is what tests/core keys the tolerance on) means the f32 values of those tests
    if not dt.is_floating:
        dt = DType.f32
    return {DType.f64: (1e-10, 1e-10), DType.f32: (1e-5, 1e-5)}.get(dt) or default_tol(dt)


_ATTRS = (Attr("max_norm", "float", None, optional=True), Attr("norm_type", "float", 2.0)) + _COMMON
register_spec(OpSpec(
    name=_OP, family="embedding", arg_names=("input", "weight", "offsets", "per_sample_weights"), check=_check,
    dtypes=FLOAT_TYPES, attrs=_ATTRS, torch_peer=_peer, torch_name="torch.nn.functional.embedding_bag", dropin=_dropin,
    grad=_grad, saves=_saves, differentiable=(1, 3), samples=_samples, errors=_errors, tol=_tol, grad_tol=_tol,
    category="embedding",
    workloads=(Workload("embedding_bag-sum-16384x[128256,4096]-bf16", (((16384,), DType.i64), (128256, 4096),
                                                                         ((1024,), DType.i64)), DType.bf16,
                        {"mode": "sum"}, backward=True),),
    doc="F.embedding_bag: sum / mean / max of token rows per bag (offsets, per_sample_weights, padding_idx, "
        "include_last_offset, max_norm); see ops/embedding.py."))

register_spec(OpSpec(
    name=_BW, family="embedding", arg_names=("grad", "input", "offsets", "per_sample_weights", "weight"),
    check=_check_bw, dtypes=FLOAT_TYPES,
    attrs=(Attr("num_weights", "int", ge=0, expected="an int >= 0 (the weight's rows)"),
           Attr("token_rows", "bool", False, doc="the 5th operand is the forward's renormalised rows [N, D] "
                "(max_norm) instead of the weight [V, D]")) + _COMMON,
    torch_name="torch autograd rule of embedding_bag", samples=_bw_samples, errors=_bw_errors, tol=_tol,
    category="embedding",
    doc="weight (and per_sample_weights) gradient of embedding_bag; max mode through the saved max_indices."))


def _set_bench_inputs():
    def maker(desc, device, gen):
        import torch

        kw = dict(generator=gen, device=gen.device)
        x, w, off = desc.inputs[:3]
        ids = torch.randint(0, w.shape[0], x.shape, **kw).to(device)
        n, b = x.shape[0], off.shape[0]
        offs = (torch.arange(b, device=gen.device) * (n // max(b, 1))).to(device)
        return [ids, torch.randn(w.shape, **kw).to(w.dtype.torch).to(device), offs]

    set_bench_inputs(_OP, maker)


_set_bench_inputs()
declare_rule_ops(__name__, _BW)
