"""Layout family, part 2: ops that join, pad, fill or overwrite.

cat / stack (any number of inputs; mixed dtypes promote like torch.result_type, the gradient of each input
goes back in its own dtype), pad (torch.nn.functional.pad: constant, reflect, replicate, circular) with its
fold ``pad_backward``, fill, slice_scatter (any positive step), select_scatter and the seeds' ``write_slice``
(KV-cache append).  (``full``, which the backward rules here compose, is a creation op: ops/creation.py.)

write_slice(dst, src, dim, start) returns dst with ``dst.narrow(dim, start, src.shape[dim])`` replaced by
src; every other extent of src must equal dst's (the seeds' contract, with the range on one axis).
Out of place it reads dst + src and writes a new tensor.  ``Plan.run(dst, src, out=dst)`` is the in-place
KV-cache append: only src's bytes are copied, and when the slab is contiguous in dst (every dim before
``dim`` has size 1, e.g. a [seq, heads, head_dim] cache appended along seq) that is one device memcpy.
Not differentiable (as in the seeds).
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import DType, result_type
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED, Attr, ErrorCase, Sample, TensorSpec, Workload, default_tol, get_spec
from ._common import check_nonneg, norm_axis
from .creation import number_attr, to_scalar
from .layout import (LAYOUT_TYPES, SLICE_ATTRS, _KV, Variadic, int_attr, ints_attr, layout_spec, slice_bounds, slice_len,
                     slice_step)

__all__ = ["PAD_MODES", "cat_inputs"]

PAD_MODES = ("constant", "reflect", "replicate", "circular")
_ALL = tuple(range(1024))   # "every input" for variadic ops


def _same_dtype(op, inputs, names=None):
    dt = inputs[0].dtype
    for i, t in enumerate(inputs):
        if t.dtype != dt:
            name = names[i] if names else f"tensors[{i}]"
            raise DTypeMismatchError(op, name, f"{dt} (the dtype of the first input; cast first)", str(t.dtype))
        if t.dtype not in LAYOUT_TYPES:
            raise UnsupportedError(op, f"dtype {t.dtype}; the op is defined for {', '.join(map(str, LAYOUT_TYPES))}")


def _promoted(op, inputs):
    """torch.cat / torch.stack promotion: the result type of every input (including legacy-skipped empties)."""
    for i, t in enumerate(inputs):
        if t.dtype not in LAYOUT_TYPES:
            raise UnsupportedError(op, f"argument 'tensors[{i}]' has dtype {t.dtype}; the op is defined for "
                                       f"{', '.join(map(str, LAYOUT_TYPES))}")
    return result_type(*(t.dtype for t in inputs))


def _as(ctx, g, have, want):
    """g (dtype ``have``) in ``want``: the gradient of a promoted input goes back in the input's own dtype."""
    return g if have == want else ctx.op("to_dtype", g, dtype=want)


def cat_inputs(inputs):
    """torch.cat's legacy rule: 1-D empty inputs are skipped when other inputs have more dims."""
    ranks = {len(t.shape) for t in inputs}
    if max(ranks) > 1:
        return [i for i, t in enumerate(inputs) if not (t.shape == (0,))]
    return list(range(len(inputs)))


# -- cat / stack -------------------------------------------------------------------------------------------
def _check_cat(inputs, attrs):
    op = "cat"
    if not inputs:
        raise InvalidProblemError(op, "tensors", "at least one tensor", "none")
    check_nonneg(op, [f"tensors[{i}]" for i in range(len(inputs))], [t.shape for t in inputs])
    dt = _promoted(op, inputs)
    keep = cat_inputs(inputs)
    if not keep:
        keep = [0]
    first = inputs[keep[0]]
    if not first.shape:
        raise InvalidProblemError(op, "tensors[0]", "tensors with at least 1 dim (zero-dim tensors cannot be concatenated)", ())
    dim = norm_axis(op, "dim", attrs.get("dim", 0), len(first.shape))
    total = 0
    for i in keep:
        s = inputs[i].shape
        if len(s) != len(first.shape) or any(a != b for j, (a, b) in enumerate(zip(s, first.shape)) if j != dim):
            raise InvalidProblemError(op, f"tensors[{i}]", f"shape {first.shape} except in dim {dim}", s)
        total += s[dim]
    shape = list(first.shape)
    shape[dim] = total
    return {"dim": dim}, (TensorSpec(tuple(shape), dt),)


def _g_cat(ctx, d, grads, s):
    dim, g = d.attr("dim"), grads[0]
    keep = set(cat_inputs(d.inputs))
    out, off = [], 0
    for i, t in enumerate(d.inputs):
        if i not in keep and len(d.outputs[0].shape) > 1:
            out.append(ctx.op("full", shape=t.shape, value=0.0, dtype=t.dtype))
            continue
        n = t.shape[dim]
        out.append(_as(ctx, ctx.op("slice", g, dim=dim, start=off, end=off + n), d.outputs[0].dtype, t.dtype)
                   if t.dtype.is_floating else None)    # integer/bool inputs of a promoted cat get no gradient
        off += n
    return tuple(out)


def _cat_samples(rng):
    n = rng.standard_normal
    yield Sample((n((2, 3)), n((4, 3))), {"dim": 0}, name="rows")
    # the skipped 1-D empty's gradient is made by a zero-operand op (full): it must come back as the gradients'
    # array type (transformers' DynamicCache concatenates onto torch.tensor([]))
    yield Sample((n((0,)), n((2, 3))), {"dim": -2}, name="legacy-empty")
    yield Sample((n((2, 3, 4)), n((2, 1, 4)), n((2, 0, 4))), {"dim": 1}, name="3-way-with-empty")
    yield Sample((n((3, 2)), n((3, 5))), {"dim": -1}, name="last")
    yield Sample((n((4,)),), {"dim": 0}, name="single")
    # an integer input promotes with the tested dtype (torch.cat([x, i64]) -> result_type(x, i64))
    yield Sample((n((2, 3)), np.arange(-3, 3, dtype=np.int64).reshape(2, 3)), {"dim": 1}, name="mixed-int")


def _cat_errors():
    yield ErrorCase((((2, 3), "f32"), ((2, 4), "f32")), {"dim": 0}, InvalidProblemError,
                    r"cat: argument 'tensors\[1\]': expected shape \(2, 3\) except in dim 0", "mismatch")
    yield ErrorCase((((2, 3), "f32"), ((2, 3), "c64")), {}, UnsupportedError, r"cat: argument 'tensors\[1\]' has dtype c64", "dtype")
    yield ErrorCase((((2, 3), "f32"),), {"dim": 2}, InvalidProblemError, r"cat: argument 'dim'", "dim")
    yield ErrorCase((), {}, InvalidProblemError, r"at least one tensor", "empty")
    yield ErrorCase((((), "f32"),), {}, InvalidProblemError, r"zero-dim", "scalar")


def _cat_dropin(tensors, dim=0, *, out=None):
    if out is not None:
        raise NotImplementedError("baracuda cat drop-in: out= is not supported (Plan.run(out=) is)")
    return tuple(tensors), {"dim": dim}


layout_spec("cat", _check_cat, attrs=(int_attr("dim", 0),), arg_names=Variadic("tensors"), torch_name="torch.cat", jax_name="jax.numpy.concatenate",
            peer=lambda *xs, dim: __import__("torch").cat(list(xs), dim), dropin=_cat_dropin, grad=_g_cat,
            differentiable=_ALL, samples=_cat_samples, errors=_cat_errors,
            workloads=[Workload("cat-KV-2x[32,8,4096,128]-dim2-bf16", (_KV, _KV), DType.bf16, {"dim": 2}, backward=True),
                       Workload("cat-3x[8192,4096]-dim1-bf16", ((8192, 4096),) * 3, DType.bf16, {"dim": 1}),
                       Workload("cat-[8192,4096]bf16+f32-dim0", (((8192, 4096), DType.bf16), ((8192, 4096), DType.f32)),
                                DType.bf16, {"dim": 0})],
            doc="torch.cat; mixed input dtypes promote as torch (torch.result_type: f16 + f32 -> f32, i64 + f16 -> f16, "
                "f16 + bf16 -> f32), converted in the copy (no separate cast pass).")


def _check_stack(inputs, attrs):
    op = "stack"
    if not inputs:
        raise InvalidProblemError(op, "tensors", "at least one tensor", "none")
    check_nonneg(op, [f"tensors[{i}]" for i in range(len(inputs))], [t.shape for t in inputs])
    dt = _promoted(op, inputs)
    first = inputs[0].shape
    for i, t in enumerate(inputs):
        if t.shape != first:
            raise InvalidProblemError(op, f"tensors[{i}]", f"shape {first} (stack needs equal shapes)", t.shape)
    dim = norm_axis(op, "dim", attrs.get("dim", 0), len(first) + 1)
    shape = first[:dim] + (len(inputs),) + first[dim:]
    return {"dim": dim}, (TensorSpec(shape, dt),)


def _g_stack(ctx, d, grads, s):
    dim = d.attr("dim")
    return tuple(_as(ctx, ctx.reshape(ctx.op("slice", grads[0], dim=dim, start=i, end=i + 1), t.shape),
                     d.outputs[0].dtype, t.dtype) if t.dtype.is_floating else None for i, t in enumerate(d.inputs))


def _stack_samples(rng):
    n = rng.standard_normal
    yield Sample((n((2, 3)), n((2, 3))), {"dim": 0}, name="dim0")
    yield Sample((n((2, 3)), n((2, 3)), n((2, 3))), {"dim": -1}, name="last")
    yield Sample((n((4,)), n((4,))), {"dim": 1}, name="1d")
    yield Sample((n((0, 2)), n((0, 2))), {"dim": 1}, name="empty")
    yield Sample((n((2, 3)), np.array([[1, 0, 1], [0, 0, 1]], dtype=np.bool_)), {"dim": 0}, name="mixed-bool")


layout_spec("stack", _check_stack, attrs=(int_attr("dim", 0),), arg_names=Variadic("tensors"), torch_name="torch.stack", jax_name="jax.numpy.stack",
            peer=lambda *xs, dim: __import__("torch").stack(list(xs), dim),
            dropin=lambda tensors, dim=0, *, out=None: (tuple(tensors), {"dim": dim}) if out is None else
            (_ for _ in ()).throw(NotImplementedError("baracuda stack drop-in: out= is not supported")),
            grad=_g_stack, differentiable=_ALL, samples=_stack_samples,
            errors=lambda: [ErrorCase((((2, 3), "f32"), ((3, 2), "f32")), {}, InvalidProblemError,
                                      r"stack: argument 'tensors\[1\]': expected shape \(2, 3\)", "shape"),
                            ErrorCase((((2, 3), "f32"),), {"dim": 3}, InvalidProblemError, r"argument 'dim'", "dim")],
            workloads=[Workload("stack-2x[8,4096,4096]-bf16", ((8, 4096, 4096),) * 2, DType.bf16, {"dim": 0})],
            doc="torch.stack (equal shapes; mixed dtypes promote as torch.cat).")


# -- pad / pad_backward ------------------------------------------------------------------------------------
def pad_pairs(rank, pad):
    """torch pad tuple (last dim first) -> per-dim (before, after)."""
    pairs = [(0, 0)] * rank
    for k in range(len(pad) // 2):
        pairs[rank - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return pairs


_MODE = Attr("mode", "str", "constant", none_default=True)


def _real(op: str, v) -> float:
    """A fill value as a Python float (bools count as 0/1), or the op's error naming 'value' (a string is an
    error, never parsed)."""
    if not isinstance(v, (int, float, np.integer, np.floating, np.bool_)):
        raise InvalidProblemError(op, "value", "a real number", repr(v))
    return float(v)


def _fill_attr(default=REQUIRED, **kw):
    return Attr("value", "any", default, normalize=lambda op, v, inputs, attrs: _real(op, v), **kw)


def _check_pad(inputs, attrs):
    op = "pad"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    x = inputs[0]
    check_nonneg(op, ("input",), [x.shape])
    _same_dtype(op, inputs, ("input",))
    pad = attrs["pad"]
    mode = attrs.get("mode") or "constant"
    if mode not in PAD_MODES:
        raise InvalidProblemError(op, "mode", f"one of {PAD_MODES}", repr(mode))
    r = len(x.shape)
    if len(pad) % 2 or len(pad) // 2 > r:
        raise InvalidProblemError(op, "pad", f"an even number of values, at most {2 * r} (2 per padded dim)", pad)
    value = attrs.get("value")
    if mode != "constant":
        if value not in (None, 0, 0.0):
            raise InvalidProblemError(op, "value", "None for non-constant padding modes", value)
        k = len(pad) // 2
        if not (k + 1 <= r <= k + 2) or k > 3:
            raise UnsupportedError(op, f"{mode} padding of {k} dims needs a {k + 1}-D or {k + 2}-D input (as torch), got {r}-D")
        # a negative pad crops that side (as torch): the index map o - a (reflected / clamped / wrapped) covers it
    pairs = pad_pairs(r, pad)
    shape = []
    for d, (n, (a, b)) in enumerate(zip(x.shape, pairs)):
        if mode == "reflect" and (a >= n or b >= n) and (a or b):
            raise InvalidProblemError(op, "pad", f"padding smaller than the input size {n} of dim {d} (reflect)", (a, b))
        kept = n - max(-a, 0) - max(-b, 0)   # circular wraps what a negative pad leaves (torch)
        if mode == "circular" and (a > kept or b > kept):
            raise InvalidProblemError(op, "pad", f"padding at most the size {kept} of dim {d} left by the cropping "
                                      "(circular)", (a, b))
        if mode == "replicate" and n == 0 and (a or b):
            raise InvalidProblemError(op, "pad", f"a non-empty dim {d} to replicate", (a, b))
        m = n + a + b
        if m < 0:
            raise InvalidProblemError(op, "pad", f"a non-negative output size for dim {d}", m)
        shape.append(m)
    return ({"pad": pad, "mode": mode, "value": float(value or 0.0) if mode == "constant" else 0.0},
            (TensorSpec(tuple(shape), x.dtype),))


def _g_pad(ctx, d, grads, s):
    mode, pad = d.attr("mode"), d.attr("pad")
    if mode == "constant":
        return (ctx.op("pad", grads[0], pad=tuple(-p for p in pad), mode="constant"),)
    return (ctx.op("pad_backward", grads[0], pad=pad, mode=mode, shape=d.inputs[0].shape),)


def _peer_pad(x, pad, mode, value):
    import torch.nn.functional as F

    return F.pad(x, pad, mode=mode, value=value) if mode == "constant" else F.pad(x, pad, mode=mode)


def _pad_samples(rng):
    n = rng.standard_normal
    yield Sample((n((3, 4)),), {"pad": (1, 2), "value": 1.5}, name="const-last")
    yield Sample((n((2, 3, 4)),), {"pad": (1, 0, -1, 2)}, name="const-negative")
    yield Sample((n((0, 3)),), {"pad": (1, 1, 2, 0)}, name="const-empty", grad=False)
    for mode in ("reflect", "replicate", "circular"):
        yield Sample((n((2, 5)),), {"pad": (2, 3), "mode": mode}, name=f"{mode}-1d")
        yield Sample((n((1, 3, 4)),), {"pad": (1, 2, 2, 1), "mode": mode}, name=f"{mode}-2d")
        # negative pads crop (reflect / replicate map over the whole input, circular wraps the cropped view)
        yield Sample((n((1, 4, 6)),), {"pad": (-1, 2, 2, -2), "mode": mode}, name=f"{mode}-crop")


def _pad_errors():
    yield ErrorCase((((2, 3), "f32"),), {"pad": (3, 0), "mode": "reflect"}, InvalidProblemError,
                    r"pad: argument 'pad': expected padding smaller than the input size 3", "reflect-too-big")
    yield ErrorCase((((2, 3), "f32"),), {"pad": (1,)}, InvalidProblemError, r"an even number", "odd")
    yield ErrorCase((((2, 3), "f32"),), {"pad": (1, 1), "mode": "wrap"}, InvalidProblemError, r"argument 'mode'", "mode")
    yield ErrorCase((((3,), "f32"),), {"pad": (-2, -2)}, InvalidProblemError, r"non-negative output size", "crop")
    yield ErrorCase((((2, 3), "f32"),), {"pad": (4, 0), "mode": "circular"}, InvalidProblemError, r"at most the size 3", "circ")
    yield ErrorCase((((2, 4), "f32"),), {"pad": (-2, 3), "mode": "circular"}, InvalidProblemError,
                    r"at most the size 2 of dim 1 left by the cropping", "circ-crop")


layout_spec("pad", _check_pad, attrs=(ints_attr("pad", ()), _MODE, _fill_attr(None, optional=True)), arg_names=("input",), torch_name="torch.nn.functional.pad", jax_name="jax.numpy.pad",
            peer=_peer_pad,
            dropin=lambda input, pad, mode="constant", value=None: ((input,), {"pad": tuple(pad), "mode": mode, "value": value}),
            grad=_g_pad, samples=_pad_samples, errors=_pad_errors,
            workloads=[Workload("pad-const-[8,64,512,512]-bf16", ((8, 64, 512, 512),), DType.bf16, {"pad": (1, 1, 1, 1)}, backward=True),
                       Workload("pad-reflect-[8,64,512,512]-bf16", ((8, 64, 512, 512),), DType.bf16,
                                {"pad": (3, 3, 3, 3), "mode": "reflect"}, backward=True)],
            doc="torch.nn.functional.pad; pad lists (before, after) pairs from the last dim backwards.")


def _check_pad_bw(inputs, attrs):
    op = "pad_backward"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    _same_dtype(op, inputs, ("grad",))
    get_spec(op).check_dtypes(inputs)      # a floating gradient (the reference would return floats for an int)
    shape = attrs.get("shape", ())
    fwd_attrs, (o,) = _check_pad((TensorSpec(shape, inputs[0].dtype),), {"pad": attrs.get("pad", ()), "mode": attrs.get("mode")})
    if o.shape != inputs[0].shape:
        raise InvalidProblemError(op, "grad", f"shape {o.shape} (the padded output)", inputs[0].shape)
    return {"pad": fwd_attrs["pad"], "mode": fwd_attrs["mode"], "shape": shape}, (TensorSpec(shape, inputs[0].dtype),)


def _pad_bw_samples(rng):
    n = rng.standard_normal
    for mode in ("reflect", "replicate", "circular"):
        yield Sample((n((2, 10)),), {"pad": (2, 3), "mode": mode, "shape": (2, 5)}, name=f"{mode}-1d")
        yield Sample((n((1, 6, 7)),), {"pad": (1, 2, 2, 1), "mode": mode, "shape": (1, 3, 4)}, name=f"{mode}-2d")
        yield Sample((n((1, 4, 7)),), {"pad": (-1, 2, 2, -2), "mode": mode, "shape": (1, 4, 6)}, name=f"{mode}-crop")


def _peer_pad_bw(g, pad, mode, shape):
    import torch

    x = torch.zeros(shape, dtype=g.dtype, requires_grad=True)
    y = _peer_pad(x, pad, mode, None)
    return torch.autograd.grad(y, x, g)[0]


layout_spec("pad_backward", _check_pad_bw, attrs=(ints_attr("pad", ()), _MODE, Attr("shape", "ints")), arg_names=("grad",), peer=_peer_pad_bw, dtypes=(DType.f64, DType.f32, DType.f16, DType.bf16),
            tol=lambda dt: tuple(2 * t for t in default_tol(dt)),   # sums up to 3 (reflect) or pad+1 terms
            samples=_pad_bw_samples,
            errors=lambda: [ErrorCase((((2, 9), "f32"),), {"pad": (2, 3), "mode": "reflect", "shape": (2, 5)}, InvalidProblemError,
                                      r"pad_backward: argument 'grad': expected shape \(2, 10\)", "shape")],
            doc="Gradient of non-constant pad: each input element sums the output elements that read it.")


# -- fill (torch.fill: a tensor of the input's shape and dtype holding one value) ---------------------------
def _check_fill(inputs, attrs):
    op = "fill"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    _REG_FILL().check_dtypes(inputs)
    x = inputs[0]
    # torch's checked scalar conversion (truncation toward zero into integer types, an overflow is an error, a
    # negative int wraps into an unsigned type, nonzero is True for bool)
    return {"value": to_scalar(op, "value", attrs["value"], x.dtype)}, (TensorSpec(x.shape, x.dtype),)


def _fill_samples(rng):
    # values that every dtype of the matrix holds (the generic tests cast each sample to each dtype; inf and
    # negative values are checked per dtype in tests/layout/test_layout_gaps.py)
    yield Sample((rng.standard_normal((3, 5)),), {"value": 1.5}, name="2d")
    yield Sample((rng.standard_normal((7,)),), {"value": 2.25}, name="1d")
    yield Sample((rng.standard_normal(()),), {"value": 3.0}, name="scalar")
    yield Sample((rng.standard_normal((0, 3)),), {"value": 4.0}, name="empty")
    yield Sample((rng.standard_normal((2, 3)),), {"value": 1.75}, name="fraction")   # exact in every float type


def _fill_grad(ctx, d, grads, s):
    return (ctx.op("fill", grads[0], value=0.0),)     # the output does not depend on the input's values


def _fill_dropin(input, value):
    if not isinstance(value, (bool, int, float)):
        raise UnsupportedError("fill", f"argument 'value' is a {type(value).__name__}; supported: a Python number")
    return (input,), {"value": value}


def _fill_peer(x, value):
    import torch

    from .cast import _widen

    return _widen(torch.fill(x, value))


_FILL = layout_spec("fill", _check_fill, attrs=(number_attr("value", 0.0, real=True),), torch_name="torch.fill", peer=_fill_peer,
                    dropin=_fill_dropin, grad=_fill_grad, samples=_fill_samples,
                    errors=lambda: [ErrorCase((((2,), "u8"),), {"value": 300}, InvalidProblemError,
                                              r"fill: argument 'value': expected a value that converts to u8", "overflow"),
                                    ErrorCase((((2,), "f32"),), {"value": "a"}, InvalidProblemError,
                                              r"fill: argument 'value': expected a real number", "not-number"),
                                    ErrorCase((((2,), "f32"), ((2,), "f32")), {"value": 1.0}, InvalidProblemError,
                                              r"fill: argument 'inputs'", "two-inputs")],
                    workloads=[Workload("fill-[8,4096,4096]-bf16", ((8, 4096, 4096),), DType.bf16, {"value": 1.0})],
                    cost=lambda d: (d.outputs[0].nbytes, 0),
                    doc="A tensor of the input's shape and dtype holding ``value`` (torch.fill; Tensor.fill_ "
                        "through bt.mode()); its gradient is zero.")


def _REG_FILL():
    return _FILL


# -- slice_scatter / select_scatter / write_slice -------------------------------------------------------------
def _two(op, inputs, names):
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands", len(inputs))
    check_nonneg(op, names, [t.shape for t in inputs])
    _same_dtype(op, inputs, names)
    return inputs


def _check_slice_scatter(inputs, attrs):
    op = "slice_scatter"
    x, src = _two(op, inputs, ("input", "src"))
    if not x.shape:
        raise InvalidProblemError(op, "input", "at least 1 dim", x.shape)
    dim = norm_axis(op, "dim", attrs.get("dim", 0), len(x.shape))
    step = slice_step(op, attrs)
    start, end = slice_bounds(op, x.shape, dim, attrs.get("start"), attrs.get("end"))
    want = x.shape[:dim] + (slice_len(start, end, step),) + x.shape[dim + 1:]
    if src.shape != want:
        raise InvalidProblemError(op, "src", f"shape {want}", src.shape)
    return {"dim": dim, "start": start, "end": end, "step": step}, (TensorSpec(x.shape, x.dtype),)


def _g_slice_scatter(ctx, d, grads, s):
    g, src = grads[0], d.inputs[1]
    kw = dict(dim=d.attr("dim"), start=d.attr("start"), end=d.attr("end"), step=d.attr("step"))
    zeros = ctx.op("full", shape=src.shape, value=0.0, dtype=src.dtype)
    return ctx.op("slice_scatter", g, zeros, **kw), ctx.op("slice", g, **kw)


def _check_select_scatter(inputs, attrs):
    op = "select_scatter"
    x, src = _two(op, inputs, ("input", "src"))
    if not x.shape:
        raise InvalidProblemError(op, "input", "at least 1 dim", x.shape)
    dim = norm_axis(op, "dim", attrs.get("dim", 0), len(x.shape))
    n = x.shape[dim]
    idx = attrs.get("index", 0)
    if not -n <= idx < n:
        raise InvalidProblemError(op, "index", f"an index in [{-n}, {n - 1}]", idx)
    want = x.shape[:dim] + x.shape[dim + 1:]
    if src.shape != want:
        raise InvalidProblemError(op, "src", f"shape {want}", src.shape)
    return {"dim": dim, "index": idx % n}, (TensorSpec(x.shape, x.dtype),)


def _g_select_scatter(ctx, d, grads, s):
    g, src = grads[0], d.inputs[1]
    dim, i = d.attr("dim"), d.attr("index")
    zeros = ctx.op("full", shape=src.shape, value=0.0, dtype=src.dtype)
    return (ctx.op("select_scatter", g, zeros, dim=dim, index=i),
            ctx.reshape(ctx.op("slice", g, dim=dim, start=i, end=i + 1), src.shape))


def _check_write_slice(inputs, attrs):
    op = "write_slice"
    dst, src = _two(op, inputs, ("dst", "src"))
    if not dst.shape:
        raise InvalidProblemError(op, "dst", "at least 1 dim (rank-0 tensors are not supported)", dst.shape)
    if len(src.shape) != len(dst.shape):
        raise InvalidProblemError(op, "src", f"{len(dst.shape)} dims (dst's rank)", src.shape)
    dim = norm_axis(op, "dim", attrs.get("dim", 0), len(dst.shape))
    start = attrs.get("start", 0)
    for j, (a, b) in enumerate(zip(src.shape, dst.shape)):
        if j != dim and a != b:
            raise InvalidProblemError(op, "src", f"extent {b} in dim {j} (dst's; only dim {dim} is ranged)", src.shape)
    if not 0 <= start <= dst.shape[dim] - src.shape[dim]:
        raise InvalidProblemError(op, "start", f"0 <= start <= {dst.shape[dim] - src.shape[dim]} "
                                               f"(start + src.shape[{dim}] <= dst.shape[{dim}])", start)
    return {"dim": dim, "start": start}, (TensorSpec(dst.shape, dst.dtype),)


def _peer_slice_scatter(x, src, dim, start, end, step):
    return x.slice_scatter(src, dim, start, end, step)


def _peer_write_slice(dst, src, dim, start):
    return dst.slice_scatter(src, dim, start, start + src.shape[dim])


def _scatter_samples(kind):
    def samples(rng):
        n = rng.standard_normal
        if kind == "select":
            yield Sample((n((3, 4)), n((4,))), {"dim": 0, "index": -1}, name="row")
            yield Sample((n((2, 3, 4)), n((2, 4))), {"dim": 1, "index": 1}, name="mid")
            yield Sample((n((0, 3)), n((0,))), {"dim": 1, "index": 2}, name="empty", grad=False)
            return
        yield Sample((n((5, 3)), n((2, 3))), {"dim": 0, "start": 1, **({"end": 3} if kind == "slice" else {})}, name="dim0")
        yield Sample((n((2, 6, 3)), n((2, 3, 3))), {"dim": 1, "start": 3, **({"end": 6} if kind == "slice" else {})}, name="mid")
        yield Sample((n((4, 5)), n((4, 0))), {"dim": 1, "start": 2, **({"end": 2} if kind == "slice" else {})}, name="empty-src")
        if kind == "slice":
            yield Sample((n((7, 3)), n((3, 3))), {"dim": 0, "start": 1, "end": 7, "step": 2}, name="step2")
            yield Sample((n((2, 8)), n((2, 3))), {"dim": 1, "start": -8, "end": None, "step": 3}, name="step3-last")
    return samples


layout_spec("slice_scatter", _check_slice_scatter, attrs=SLICE_ATTRS, arg_names=("input", "src"), torch_name="torch.slice_scatter",
            peer=_peer_slice_scatter,
            dropin=lambda input, src, dim=0, start=None, end=None, step=1: ((input, src), {"dim": dim, "start": start, "end": end, "step": step}),
            grad=_g_slice_scatter, differentiable=(0, 1), samples=_scatter_samples("slice"),
            errors=lambda: [ErrorCase((((5, 3), "f32"), ((3, 3), "f32")), {"dim": 0, "start": 1, "end": 3}, InvalidProblemError,
                                      r"slice_scatter: argument 'src': expected shape \(2, 3\)", "shape"),
                            ErrorCase((((5, 3), "f32"), ((3, 3), "f32")), {"dim": 0, "start": 0, "end": 4, "step": 2},
                                      InvalidProblemError, r"argument 'src': expected shape \(2, 3\)", "step-shape"),
                            ErrorCase((((5, 3), "f32"), ((2, 3), "f32")), {"dim": 0, "step": -1},
                                      InvalidProblemError, r"slice_scatter: argument 'step': expected a positive", "step")],
            workloads=[Workload("slice_scatter-KV-[32,8,4096,128]<-[..,1024,..]-bf16", (_KV, (32, 8, 1024, 128)), DType.bf16,
                                {"dim": 2, "start": 1024, "end": 2048}, backward=True),
                       Workload("slice_scatter-[32,8,4096,128]<-[..,2048,..]-step2-bf16", (_KV, (32, 8, 2048, 128)),
                                DType.bf16, {"dim": 2, "start": 0, "end": None, "step": 2}, backward=True)],
            doc="torch.slice_scatter (any positive step).")
layout_spec("select_scatter", _check_select_scatter, attrs=(int_attr("dim", 0), int_attr("index", 0)), arg_names=("input", "src"), torch_name="torch.select_scatter",
            peer=lambda x, src, dim, index: x.select_scatter(src, dim, index),
            dropin=lambda input, src, dim, index: ((input, src), {"dim": dim, "index": index}),
            grad=_g_select_scatter, differentiable=(0, 1), samples=_scatter_samples("select"),
            errors=lambda: [ErrorCase((((3, 4), "f32"), ((4,), "f32")), {"dim": 0, "index": 3}, InvalidProblemError,
                                      r"select_scatter: argument 'index': expected an index in \[-3, 2\]", "index")],
            workloads=[Workload("select_scatter-[32,8,4096,128]-dim2-bf16", (_KV, (32, 8, 128)), DType.bf16,
                                {"dim": 2, "index": 4095})],
            doc="torch.select_scatter.")
layout_spec("write_slice", _check_write_slice, attrs=(int_attr("dim", 0), int_attr("start", 0)), arg_names=("dst", "src"), peer=_peer_write_slice,
            samples=_scatter_samples("write"),
            errors=lambda: [ErrorCase((((5, 3), "f32"), ((2, 3), "f32")), {"dim": 0, "start": 4}, InvalidProblemError,
                                      r"write_slice: argument 'start': expected 0 <= start <= 3", "range"),
                            ErrorCase((((5, 3), "f32"), ((2, 4), "f32")), {"dim": 0}, InvalidProblemError,
                                      r"argument 'src': expected extent 3 in dim 1", "extent"),
                            ErrorCase((((5, 3), "f32"), ((2, 3), "f16")), {"dim": 0}, DTypeMismatchError, r"argument 'src'", "dtype")],
            workloads=[Workload("write_slice-KV-append-[16384,8,128]<-[4096,8,128]-bf16", ((16384, 8, 128), (4096, 8, 128)),
                                DType.bf16, {"dim": 0, "start": 8192}),
                       Workload("write_slice-[32,8,4096,128]<-[32,8,1,128]-decode-bf16", (_KV, (32, 8, 1, 128)), DType.bf16,
                                {"dim": 2, "start": 4000})],
            doc=__doc__.split("\n\n")[1])
