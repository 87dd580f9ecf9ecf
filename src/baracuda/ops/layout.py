"""Layout family, part 1: one-input data movement that materializes a view.

contiguous, permute, movedim, transpose, slice (x[start:end:step] along a dim), flip/fliplr/flipud, roll,
rot90, repeat/tile, repeat_interleave (int repeats, or a repeats tensor as second operand with its
segment-sum backward ``repeat_interleave_backward``), triu/tril.  Every op here is an index map: each output
element reads one input element (or writes 0 for triu/tril), so the Triton backend describes each op as
per-dim (size, stride, offset, divisor) maps and one dispatcher (backends/triton/layout_copy.py) picks the
tiled row copy, the tiled transpose or the per-element gather.

Multi-input ops (cat, stack, pad, full, slice_scatter, select_scatter, write_slice) live in
``layout_join.py``.  Outputs are always new contiguous tensors; the dtype is the input's (cat/stack promote).
Backward rules: permute -> inverse permute, flip -> flip, roll -> roll back, rot90(k) -> rot90(-k),
repeat -> sum over the repeats, slice -> zero-pad back (step 1) or slice_scatter into zeros, triu/tril ->
the same mask.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError
from .._core.spec import REQUIRED, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec
from .._core.derive import declare_rule_ops
from ._common import check_nonneg, norm_axis

__all__ = ["LAYOUT_TYPES", "norm_dims_list", "layout_spec", "ints", "Variadic", "int_attr", "ints_attr", "SLICE_ATTRS"]

LAYOUT_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16, DType.i64, DType.i32, DType.i16, DType.i8, DType.u8,
                DType.bool)
_KV = (32, 8, 4096, 128)   # a KV-cache block [batch, kv_heads, seq, head_dim]


def ints(op: str, arg: str, v, n: int | None = None) -> tuple[int, ...]:
    """An int or a sequence of ints -> tuple (length n when given)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v),)
    try:
        out = tuple(int(x) for x in v)
        if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in v):
            raise TypeError
    except TypeError:
        raise InvalidProblemError(op, arg, "an int or a sequence of ints", repr(v)) from None
    if n is not None and len(out) != n:
        raise InvalidProblemError(op, arg, f"{n} ints", repr(v))
    return out


def norm_dims_list(op: str, arg: str, dims, rank: int) -> tuple[int, ...]:
    """Dims in the given order, normalized (negative allowed), duplicates rejected."""
    out = tuple(norm_axis(op, arg, d, rank) for d in ints(op, arg, dims))
    if len(set(out)) != len(out):
        raise InvalidProblemError(op, arg, "distinct dims", repr(dims))
    return out


def int_attr(name, default=REQUIRED, **kw) -> Attr:
    return Attr(name, "int", default, **kw)


def ints_attr(name, default=REQUIRED, **kw) -> Attr:
    """An int or a sequence of ints (-> tuple); the checks normalize dims against the rank their own way."""
    kw.setdefault("expected", "an int or a sequence of ints")
    return Attr(name, "ints", default, **kw)


def _one(op, spec, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    check_nonneg(op, ("x",), [inputs[0].shape])
    spec().check_dtypes(inputs)
    return inputs[0]


class Variadic(tuple):
    """arg_names of a variadic op: shows as ('tensors',), names input i 'tensors[i]' for any i."""

    def __new__(cls, name):
        self = super().__new__(cls, (name,))
        self.base = name
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(f"{self.base}[{k}]" for k in range(*i.indices(1 << 20)))
        return f"{self.base}[{i}]"

    def _position(self, name) -> int | None:
        pre = self.base + "["
        if isinstance(name, str) and name.startswith(pre) and name.endswith("]") and name[len(pre):-1].isdigit():
            return int(name[len(pre):-1])
        return None

    def __contains__(self, name) -> bool:
        """'tensors[i]' names operand i (what saved_names lists for saves=("inputs",))."""
        return name == self.base or self._position(name) is not None

    def index(self, name, *args) -> int:
        k = self._position(name)
        return k if k is not None else super().index(name, *args)


_REG: dict[str, OpSpec] = {}


def _float_only(rule):
    """Gradients flow to floating inputs only; integer/bool layouts have none (and get no output grad)."""
    if rule is None:
        return None

    def grad(ctx, d, grads, saved):
        if all(g is None for g in grads) or not any(t.dtype.is_floating for t in d.inputs):
            return (None,) * len(d.inputs)
        res = tuple(rule(ctx, d, grads, saved))
        return tuple(r if t.dtype.is_floating else None for r, t in zip(res, d.inputs))
    return grad


def layout_spec(name, check, *, samples, errors, attrs=(), torch_name=None, peer=None, dropin=None, grad=None,
                workloads=(), arg_names=("x",), dtypes=LAYOUT_TYPES, jax_name=None, doc="", cost=None,
                differentiable=None, tol=None, saves=(), aliases=()):
    """Register a layout op (bit-exact unless ``tol``; saves nothing by default: the rules need only shapes)."""
    spec = register_spec(OpSpec(
        name=name, family="layout", arg_names=arg_names, check=check, dtypes=dtypes, attrs=attrs,
        torch_peer=peer, torch_name=torch_name, torch_aliases=tuple(aliases), dropin=dropin, jax_name=jax_name,
        grad=_float_only(grad), saves=tuple(saves),
        differentiable=differentiable if differentiable is not None else ((0,) if grad else ()),
        samples=samples, errors=errors, tol=tol or (lambda dt: (0.0, 0.0)),
        # repeat/pad backward sum (one rounding each)
        grad_tol=lambda dt: tuple(2 * t for t in default_tol(dt)), workloads=tuple(workloads),
        cost=cost, doc=doc))
    _REG[name] = spec
    return spec


def _spec(name):
    return lambda: _REG[name]


def _out(x, shape):
    return (TensorSpec(tuple(shape), x.dtype),)


def _rng_samples(shapes, attr_sets, grad_max=64):
    def samples(rng):
        for shape in shapes:
            for a in attr_sets(shape):
                yield Sample((rng.standard_normal(shape),), dict(a), name=f"{shape}{a}",
                             grad=0 < math.prod(shape) <= grad_max)
    return samples


def _torch():
    import torch

    return torch


# -- contiguous ---------------------------------------------------------------------------------------
def _check_contig(inputs, attrs):
    x = _one("contiguous", _spec("contiguous"), inputs)
    return {}, _out(x, x.shape)


layout_spec("contiguous", _check_contig, torch_name="torch.Tensor.contiguous",
            peer=lambda x: x.contiguous(), grad=lambda ctx, d, g, s: (g[0],),
            dropin=lambda self, memory_format=None: ((self,), {}) if memory_format in (None, _torch().contiguous_format)
            else (_ for _ in ()).throw(NotImplementedError("baracuda contiguous: only torch.contiguous_format")),
            samples=_rng_samples(((7,), (3, 5), (2, 3, 4), (0, 3), ()), lambda s: [{}]),
            errors=lambda: [ErrorCase((((3,), "f32"),), {"x": 1}, InvalidProblemError, r"argument 'x'", "bad-attr")],
            workloads=[Workload("contiguous-[8,32,4096,128]-bf16", ((8, 32, 4096, 128),), DType.bf16)],
            doc="Materialize x in row-major order (the input may be any strided view, e.g. after permute).")


# -- permute / transpose / movedim ----------------------------------------------------------------------
def _check_permute(inputs, attrs):
    x = _one("permute", _spec("permute"), inputs)
    if "dims" not in attrs:
        raise InvalidProblemError("permute", "dims", "a permutation of the dims", "nothing")
    dims = norm_dims_list("permute", "dims", attrs["dims"], len(x.shape)) if x.shape else ints("permute", "dims", attrs["dims"])
    if len(dims) != len(x.shape) or (not x.shape and dims):
        raise InvalidProblemError("permute", "dims", f"a permutation of {len(x.shape)} dims", repr(attrs["dims"]))
    return {"dims": dims}, _out(x, [x.shape[d] for d in dims])


def _inverse(p):
    inv = [0] * len(p)
    for i, d in enumerate(p):
        inv[d] = i
    return tuple(inv)


layout_spec("permute", _check_permute, attrs=(ints_attr("dims", expected="a permutation of the dims"),), torch_name="torch.permute", peer=lambda x, dims: x.permute(dims).contiguous(),
            dropin=lambda input, dims: ((input,), {"dims": tuple(dims)}), jax_name="jax.numpy.transpose",
            grad=lambda ctx, d, g, s: (ctx.op("permute", g[0], dims=_inverse(d.attr("dims"))),),
            samples=_rng_samples(((3, 5), (2, 3, 4), (2, 1, 3, 4), (0, 3, 2)),
                                 lambda s: [{"dims": tuple(reversed(range(len(s))))}, {"dims": (-1,) + tuple(range(len(s) - 1))}]),
            errors=lambda: [
                ErrorCase((((3, 4), "f32"),), {"dims": (0, 0)}, InvalidProblemError, r"permute: argument 'dims': expected distinct", "dup"),
                ErrorCase((((3, 4), "f32"),), {"dims": (0, 2)}, InvalidProblemError, r"argument 'dims': expected an axis in \[-2, 1\]", "range"),
                ErrorCase((((3, 4), "f32"),), {"dims": (0,)}, InvalidProblemError, r"a permutation of 2 dims", "short")],
            workloads=[Workload("permute-[8,4096,32,128]->[0,2,1,3]-bf16", ((8, 4096, 32, 128),), DType.bf16,
                                {"dims": (0, 2, 1, 3)}, backward=True),                    # tiled rows
                       Workload("permute-[64,2048,2048]->[0,2,1]-bf16", ((64, 2048, 2048),), DType.bf16,
                                {"dims": (0, 2, 1)}),                                      # tiled transpose
                       Workload("permute-[16,4096,4096]->[0,2,1]-f32", ((16, 4096, 4096),), DType.f32,
                                {"dims": (0, 2, 1)}),
                       Workload("permute-[8,64,64,4096]->[0,3,1,2]-bf16", ((8, 64, 64, 4096),), DType.bf16,
                                {"dims": (0, 3, 1, 2)})],                                  # NHWC -> NCHW
            doc="Permuted copy (torch.permute(...).contiguous()).")


def _check_transpose(inputs, attrs):
    x = _one("transpose", _spec("transpose"), inputs)
    r = len(x.shape)
    d0 = norm_axis("transpose", "dim0", attrs.get("dim0", 0), r)
    d1 = attrs.get("dim1")
    d1 = norm_axis("transpose", "dim1", (1 if r > 1 else 0) if d1 is None else d1, r)
    shape = list(x.shape)
    if shape:
        shape[d0], shape[d1] = shape[d1], shape[d0]
    return {"dim0": d0, "dim1": d1}, _out(x, shape)


layout_spec("transpose", _check_transpose, attrs=(int_attr("dim0", 0), int_attr("dim1", None, optional=True)), torch_name="torch.transpose", aliases=("torch.swapaxes", "torch.swapdims"),
            peer=lambda x, dim0, dim1: x.transpose(dim0, dim1).contiguous(),
            dropin=lambda input, dim0, dim1: ((input,), {"dim0": dim0, "dim1": dim1}),
            grad=lambda ctx, d, g, s: (ctx.op("transpose", g[0], dim0=d.attr("dim0"), dim1=d.attr("dim1")),),
            samples=_rng_samples(((3, 5), (2, 3, 4), (0, 3)), lambda s: [{"dim0": 0, "dim1": -1}]),
            errors=lambda: [ErrorCase((((3, 4), "f32"),), {"dim0": 2, "dim1": 0}, InvalidProblemError,
                                      r"transpose: argument 'dim0': expected an axis in \[-2, 1\], got 2", "range")],
            workloads=[Workload("transpose-[8,4096,32,128](1,2)-bf16", ((8, 4096, 32, 128),), DType.bf16,
                                {"dim0": 1, "dim1": 2})],
            doc="transpose(dim0, dim1), materialized.")


def _movedim_perm(rank, src, dst):
    order = [None] * rank
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(rank) if i not in src)
    return tuple(o if o is not None else next(rest) for o in order)


def _check_movedim(inputs, attrs):
    op = "movedim"
    x = _one(op, _spec(op), inputs)
    r = len(x.shape)
    src = norm_dims_list(op, "source", attrs.get("source", ()), r)
    dst = norm_dims_list(op, "destination", attrs.get("destination", ()), r)
    if len(src) != len(dst):
        raise InvalidProblemError(op, "destination", f"as many dims as source ({len(src)})", len(dst))
    perm = _movedim_perm(r, src, dst)
    return {"source": src, "destination": dst}, _out(x, [x.shape[p] for p in perm])


layout_spec("movedim", _check_movedim, attrs=(ints_attr("source", ()), ints_attr("destination", ())), torch_name="torch.movedim", aliases=("torch.moveaxis",),
            peer=lambda x, source, destination: x.movedim(source, destination).contiguous(),
            dropin=lambda input, source, destination: ((input,), {"source": source, "destination": destination}),
            grad=lambda ctx, d, g, s: (ctx.op("movedim", g[0], source=d.attr("destination"), destination=d.attr("source")),),
            samples=_rng_samples(((2, 3, 4), (2, 0, 3)), lambda s: [{"source": 0, "destination": -1},
                                                                    {"source": (0, 2), "destination": (1, 0)}]),
            errors=lambda: [ErrorCase((((3, 4), "f32"),), {"source": (0, 1), "destination": (0,)}, InvalidProblemError,
                                      r"movedim: argument 'destination': expected as many dims", "len")],
            workloads=[Workload("movedim-[8,4096,32,128](2->1)-bf16", ((8, 4096, 32, 128),), DType.bf16,
                                {"source": 2, "destination": 1})],
            doc="torch.movedim(source, destination), materialized.")


# -- slice (x[start:end:step] along one dim): the backward of cat / stack / slice_scatter -----------------
def slice_bounds(op, shape, dim, start, end):
    n = shape[dim]
    start = 0 if start is None else int(start)
    end = n if end is None else int(end)
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    return start, end


# slice / slice_scatter: dim, start / end (None: the ends), step (None: 1)
SLICE_ATTRS = (int_attr("dim", 0), int_attr("start", None, optional=True), int_attr("end", None, optional=True),
               int_attr("step", 1, none_default=True, ge=1, expected="a positive int (torch: slice step must be positive)"))


def slice_step(op, attrs):
    return attrs.get("step", 1)


def slice_len(start, end, step):
    return max(0, -(-(end - start) // step))


def _check_slice(inputs, attrs):
    op = "slice"
    x = _one(op, _spec(op), inputs)
    if not x.shape:
        raise InvalidProblemError(op, "x", "at least 1 dim", x.shape)
    dim = norm_axis(op, "dim", attrs.get("dim", 0), len(x.shape))
    step = slice_step(op, attrs)
    start, end = slice_bounds(op, x.shape, dim, attrs.get("start"), attrs.get("end"))
    shape = list(x.shape)
    shape[dim] = slice_len(start, end, step)
    return {"dim": dim, "start": start, "end": end, "step": step}, _out(x, shape)


def _g_slice(ctx, d, g, s):
    dim, n, step = d.attr("dim"), d.inputs[0].shape[d.attr("dim")], d.attr("step")
    if step == 1:
        return (ctx.op("pad", g[0], pad=pad_for_dim(len(d.inputs[0].shape), dim, d.attr("start"), n - d.attr("end"))),)
    x = d.inputs[0]
    zeros = ctx.op("full", shape=x.shape, value=0.0, dtype=x.dtype)
    return (ctx.op("slice_scatter", zeros, g[0], dim=dim, start=d.attr("start"), end=d.attr("end"), step=step),)


def pad_for_dim(rank, dim, before, after):
    """torch.nn.functional.pad's pad tuple (last dim first) padding only ``dim``."""
    p = [0] * (2 * (rank - dim))
    p[-2], p[-1] = before, after
    return tuple(p)


def _peer_slice(x, dim, start, end, step):
    return x[(slice(None),) * dim + (slice(start, end, step),)].contiguous()


def _dropin_narrow(input, dim, start, length):
    """torch.narrow's arguments as the slice op's: ``start`` an int or a 0-d integer tensor, counted from the end
    when negative (in [-size, size]), ``length`` >= 0 with start + length <= size (torch raises otherwise: a slice
    would clamp silently)."""
    import torch

    op = "narrow"
    if isinstance(start, torch.Tensor):
        if start.dim() != 0 or start.dtype.is_floating_point or start.dtype.is_complex:
            raise InvalidProblemError(op, "start", "an int or a 0-d integer tensor", f"a {start.dim()}-d "
                                      f"{start.dtype} tensor")
        start = int(start.item())
    if input.dim() == 0:
        raise InvalidProblemError(op, "input", "at least 1 dim (narrow() cannot be applied to a 0-dim tensor)", 0)
    n = input.shape[norm_axis(op, "dim", dim, input.dim())]
    if not -n <= start <= n:
        raise InvalidProblemError(op, "start", f"a start in [{-n}, {n}] (dimension size {n})", start)
    start = start + n if start < 0 else start
    if length < 0:
        raise InvalidProblemError(op, "length", "a non-negative length", length)
    if start + length > n:
        raise InvalidProblemError(op, "length", f"start ({start}) + length <= dimension size ({n})", length)
    return (input,), {"dim": dim, "start": start, "end": start + length}


layout_spec("slice", _check_slice, torch_name="torch.narrow", peer=_peer_slice, attrs=SLICE_ATTRS,
            dropin=_dropin_narrow,
            grad=_g_slice,
            samples=_rng_samples(((7,), (3, 5), (2, 6, 4), (0, 4)),
                                 lambda s: [{"dim": -1, "start": 1, "end": -1}, {"dim": 0, "start": 0, "end": 2},
                                            {"dim": -1, "start": 0, "end": None, "step": 2},
                                            {"dim": 0, "start": -5, "end": 6, "step": 3}]),
            errors=lambda: [ErrorCase((((3, 4), "f32"),), {"dim": 2}, InvalidProblemError, r"slice: argument 'dim'", "dim"),
                            ErrorCase((((), "f32"),), {}, InvalidProblemError, r"at least 1 dim", "scalar"),
                            ErrorCase((((3, 4), "f32"),), {"step": 0}, InvalidProblemError, r"slice: argument 'step': expected a positive", "step")],
            workloads=[Workload("slice-KV-[32,8,4096,128][:,:,:2048]-bf16", (_KV,), DType.bf16,
                                {"dim": 2, "start": 0, "end": 2048}, backward=True)],
            doc="x[..., start:end:step, ...] along ``dim`` (Python slice clamping, positive step), materialized.")


# -- flip / fliplr / flipud / roll / rot90 ------------------------------------------------------------------
def _check_flip_like(op, fixed=None, min_rank=0):
    def check(inputs, attrs):
        x = _one(op, _spec(op), inputs)
        if len(x.shape) < min_rank:
            raise InvalidProblemError(op, "x", f"at least {min_rank} dims", x.shape)
        dims = fixed if fixed is not None else attrs.get("dims", ())
        dims = tuple(sorted(norm_dims_list(op, "dims", dims, len(x.shape)))) if x.shape else ()
        return ({} if fixed is not None else {"dims": dims}), _out(x, x.shape)
    return check


def _flip_dims(d):
    return d.attr("dims") if d.op == "flip" else ((1,) if d.op == "fliplr" else (0,))


for _name, _fixed, _min in (("flip", None, 0), ("fliplr", (1,), 2), ("flipud", (0,), 1)):
    layout_spec(
        _name, _check_flip_like(_name, _fixed, _min), torch_name=f"torch.{_name}",
        attrs=(ints_attr("dims", ()),) if _fixed is None else (),
        peer=(lambda x, dims: x.flip(dims)) if _name == "flip" else (lambda x, _n=_name: getattr(x, _n)()),
        dropin=(lambda input, dims: ((input,), {"dims": tuple(dims)})) if _name == "flip" else (lambda input: ((input,), {})),
        grad=(lambda ctx, d, g, s: (ctx.op(d.op, g[0], **d.attr_dict),)),
        samples=_rng_samples(((7,), (3, 5), (2, 3, 4), (0, 4)) if _name != "fliplr" else ((3, 5), (2, 3, 4), (0, 4)),
                             (lambda s: [{"dims": (0,)}, {"dims": tuple(range(len(s)))}]) if _name == "flip" else (lambda s: [{}])),
        errors=(lambda _n=_name, _m=_min: [ErrorCase((((3,) * max(_m, 1), "f32"),), {"dims": (0, 0)} if _n == "flip" else {"bogus": 1},
                                                     InvalidProblemError, r"argument '(dims|bogus)'", "bad")]
                + ([ErrorCase(((( 3,), "f32"),), {}, InvalidProblemError, r"at least 2 dims", "rank")] if _m == 2 else [])),
        workloads=[Workload(f"{_name}-[4096,4096]-bf16", ((4096, 4096),), DType.bf16, {"dims": (1,)} if _name == "flip" else {})],
        doc=f"torch.{_name}, materialized.")


def _check_roll(inputs, attrs):
    op = "roll"
    x = _one(op, _spec(op), inputs)
    shifts = attrs["shifts"]
    dims = attrs.get("dims")
    if dims is None or dims == ():
        if len(shifts) != 1:
            raise InvalidProblemError(op, "shifts", "one shift when dims is None", repr(shifts))
        dims = None
    elif not x.shape:     # torch.roll of a 0-d tensor takes no dims (with none it returns the value)
        raise InvalidProblemError(op, "dims", "no dims for a 0-d tensor (it has no dimension to roll)", repr(dims))
    else:
        if not x.shape:     # torch: "Dimension specified as 0 but tensor has no dimensions"
            raise InvalidProblemError(op, "dims", "no dims for a 0-d tensor", repr(attrs["dims"]))
        dims = tuple(norm_axis(op, "dims", d, len(x.shape)) for d in dims)
        if len(dims) != len(shifts):
            raise InvalidProblemError(op, "dims", f"as many dims as shifts ({len(shifts)})", repr(attrs["dims"]))
    return {"shifts": shifts, "dims": dims}, _out(x, x.shape)


layout_spec("roll", _check_roll, attrs=(ints_attr("shifts", (0,)), ints_attr("dims", None, optional=True)), torch_name="torch.roll",
            peer=lambda x, shifts, dims: x.roll(shifts, dims) if dims is not None else x.roll(shifts),
            dropin=lambda input, shifts, dims=None: ((input,), {"shifts": shifts, "dims": dims}),
            grad=lambda ctx, d, g, s: (ctx.op("roll", g[0], shifts=tuple(-k for k in d.attr("shifts")), dims=d.attr("dims")),),
            samples=_rng_samples(((7,), (3, 5), (2, 3, 4), (0, 4)),
                                 lambda s: [{"shifts": 2, "dims": 0}, {"shifts": -9}, {"shifts": (1, -1), "dims": (0, -1)}]
                                 if len(s) > 1 else [{"shifts": 3, "dims": 0}, {"shifts": -9}]),
            errors=lambda: [ErrorCase((((3, 4), "f32"),), {"shifts": (1, 2), "dims": (0,)}, InvalidProblemError,
                                      r"roll: argument 'dims': expected as many dims as shifts", "len"),
                            ErrorCase((((3, 4), "f32"),), {"shifts": (1, 2)}, InvalidProblemError, r"one shift when dims is None", "flat")],
            workloads=[Workload("roll-[8,4096,4096]-bf16", ((8, 4096, 4096),), DType.bf16, {"shifts": 7, "dims": 1})],
            doc="torch.roll (dims=None rolls the flattened tensor).")


def _check_rot90(inputs, attrs):
    op = "rot90"
    x = _one(op, _spec(op), inputs)
    if len(x.shape) < 2:
        raise InvalidProblemError(op, "x", "at least 2 dims", x.shape)
    dims = norm_dims_list(op, "dims", attrs.get("dims", (0, 1)), len(x.shape))
    if len(dims) != 2:
        raise InvalidProblemError(op, "dims", "2 dims", repr(attrs.get("dims")))
    k = attrs.get("k", 1) % 4
    shape = list(x.shape)
    if k % 2:
        shape[dims[0]], shape[dims[1]] = shape[dims[1]], shape[dims[0]]
    return {"k": k, "dims": dims}, _out(x, shape)


layout_spec("rot90", _check_rot90, attrs=(int_attr("k", 1), ints_attr("dims", (0, 1))), torch_name="torch.rot90", peer=lambda x, k, dims: x.rot90(k, dims),
            dropin=lambda input, k=1, dims=(0, 1): ((input,), {"k": k, "dims": tuple(dims)}),
            grad=lambda ctx, d, g, s: (ctx.op("rot90", g[0], k=-d.attr("k"), dims=d.attr("dims")),),
            samples=_rng_samples(((3, 5), (2, 3, 4), (0, 4)), lambda s: [{"k": 1}, {"k": 2, "dims": (1, 0)}, {"k": -1, "dims": (0, -1)}]),
            errors=lambda: [ErrorCase((((3,), "f32"),), {}, InvalidProblemError, r"rot90: argument 'x': expected at least 2 dims", "rank"),
                            ErrorCase((((3, 4), "f32"),), {"dims": (0, 0)}, InvalidProblemError, r"distinct dims", "dup")],
            workloads=[Workload("rot90-[64,3,512,512]-bf16", ((64, 3, 512, 512),), DType.bf16, {"k": 1, "dims": (2, 3)})],
            doc="torch.rot90(k, dims): rotation by 90 degrees k times, from dims[0] towards dims[1].")


# -- repeat / tile / repeat_interleave ---------------------------------------------------------------------
def _check_repeat(op):
    def check(inputs, attrs):
        x = _one(op, _spec(op), inputs)
        reps = attrs.get("repeats", ())
        if any(r < 0 for r in reps):
            raise InvalidProblemError(op, "repeats", "non-negative repeats", reps)
        if op == "repeat" and len(reps) < len(x.shape):
            raise InvalidProblemError(op, "repeats", f"at least {len(x.shape)} repeats (one per dim)", reps)
        if op == "tile":
            reps = (1,) * (len(x.shape) - len(reps)) + reps
        shape = (1,) * (len(reps) - len(x.shape)) + x.shape
        return {"repeats": reps}, _out(x, [s * r for s, r in zip(shape, reps)])
    return check


def _g_repeat(ctx, d, g, s):
    reps, xs = d.attr("repeats"), d.inputs[0].shape
    shape = (1,) * (len(reps) - len(xs)) + xs
    split = []
    for r, n in zip(reps, shape):
        split += [r, n]
    gr = ctx.reshape(g[0], split)
    summed = ctx.op("sum", gr, dims=tuple(range(0, 2 * len(reps), 2)), keepdim=False)
    return (ctx.reshape(summed, xs),)


for _name in ("repeat", "tile"):
    layout_spec(
        _name, _check_repeat(_name), attrs=(ints_attr("repeats", ()),), torch_name="torch.Tensor.repeat" if _name == "repeat" else "torch.tile",
        peer=(lambda x, repeats: x.repeat(*repeats)),
        dropin=(lambda self, *sizes: ((self,), {"repeats": tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes}))
        if _name == "repeat" else (lambda input, dims: ((input,), {"repeats": tuple(dims)})),
        grad=_g_repeat,
        samples=_rng_samples(((3,), (2, 3), (2, 1, 3), (0, 2)),
                             (lambda s: [{"repeats": (2,) * len(s)}, {"repeats": (2,) + (1,) * (len(s) - 1) + (3,)}])
                             if _name == "repeat" else (lambda s: [{"repeats": (2,)}, {"repeats": (2, 1, 3)}])),
        errors=lambda _n=_name: [ErrorCase((((3, 4), "f32"),), {"repeats": (2, -1)}, InvalidProblemError,
                                           rf"{_n}: argument 'repeats': expected non-negative", "neg")]
        + ([ErrorCase((((3, 4), "f32"),), {"repeats": (2,)}, InvalidProblemError, r"at least 2 repeats", "short")] if _n == "repeat" else []),
        workloads=[Workload(f"{_name}-[4096,1024]x(1,4)-bf16", ((4096, 1024),), DType.bf16, {"repeats": (1, 4)}, backward=True)],
        doc=f"torch.{'Tensor.repeat' if _name == 'repeat' else 'tile'}.")


_INDEX_TYPES = (DType.i64, DType.i32)


def _check_rinter(inputs, attrs):
    op = "repeat_interleave"
    if len(inputs) == 2:
        return _check_rinter_tensor(inputs, attrs)
    x = _one(op, _spec(op), inputs)
    r = attrs.get("repeats")
    if r is None:
        raise InvalidProblemError(op, "repeats", "a non-negative int (or a repeats tensor as the second operand)", repr(r))
    dim = attrs.get("dim")
    if dim is None:
        return {"repeats": int(r), "dim": None}, _out(x, (math.prod(x.shape) * int(r),))
    dim = norm_axis(op, "dim", int(dim), len(x.shape))
    shape = list(x.shape) or [1]
    shape[dim] *= int(r)
    return {"repeats": int(r), "dim": dim}, _out(x, shape)


_RINTER_ATTRS = (
    int_attr("repeats", None, optional=True, ge=0,
             expected="a non-negative int (or a repeats tensor as the second operand)"),
    int_attr("dim", None, optional=True),
    int_attr("output_size", None, optional=True, ge=0, expected="the non-negative sum of the repeats (the output "
             "extent along the dim; needed with a repeats tensor)"))


def rinter_extent(op, x_shape, dim):
    """(number of elements repeated, output shape with the repeated extent left as -1) for dim (None: flat)."""
    if dim is None:
        return math.prod(x_shape), [-1]
    shape = list(x_shape) or [1]
    return shape[dim], shape


def _check_rinter_tensor(inputs, attrs, op="repeat_interleave"):
    """x, repeats (int64/int32, 1-D of x.shape[dim] counts, or 1 count for every element): output_size, the
    sum of the counts, is an attribute because the output shape depends on the values (torch's drop-in
    computes it on the host with one sync when it is not given, as torch does)."""
    if attrs.get("repeats") is not None:
        raise InvalidProblemError(op, "repeats", "one of the attribute and the tensor operand", "both")
    x, reps = inputs
    check_nonneg(op, ("x", "repeats"), [x.shape, reps.shape])
    _spec("repeat_interleave")().check_dtypes((x,))
    if reps.dtype not in _INDEX_TYPES:
        raise InvalidProblemError(op, "repeats", "an int64 or int32 tensor (torch: repeats has to be Long or Int)", str(reps.dtype))
    if len(reps.shape) > 1:
        raise InvalidProblemError(op, "repeats", "a 0-D or 1-D tensor", reps.shape)
    dim = attrs.get("dim")
    dim = None if dim is None else norm_axis(op, "dim", int(dim), len(x.shape))
    n, shape = rinter_extent(op, x.shape, dim)
    k = math.prod(reps.shape)
    if k != n and k != 1:
        raise InvalidProblemError(op, "repeats", f"{n} counts (one per element along the dim) or 1", reps.shape)
    size = attrs.get("output_size")
    if size is None:
        raise InvalidProblemError(op, "output_size", "the non-negative sum of the repeats (the output extent along "
                                                     "the dim; needed with a repeats tensor)", repr(size))
    shape[0 if dim is None else dim] = int(size)
    return {"dim": dim, "output_size": int(size)}, _out(x, shape)


def _g_rinter(ctx, d, g, s):
    if len(d.inputs) == 2:    # per-element counts: segment sums of the output gradient
        return (ctx.op("repeat_interleave_backward", g[0], s["repeats"], dim=d.attr("dim"), shape=d.inputs[0].shape),
                None)
    xs, r, dim = d.inputs[0].shape, d.attr("repeats"), d.attr("dim")
    flat = (math.prod(xs),) if dim is None else (xs or (1,))
    dim = 0 if dim is None else dim
    split = tuple(flat[:dim + 1]) + (r,) + tuple(flat[dim + 1:])
    summed = ctx.op("sum", ctx.reshape(g[0], split), dims=(dim + 1,), keepdim=False)
    return (ctx.reshape(summed, xs),)


def _peer_rinter(x, repeats=None, dim=None, output_size=None):
    return x.repeat_interleave(repeats, dim, output_size=output_size)


def _dropin_rinter(input, repeats=None, dim=None, *, output_size=None):
    import torch

    if repeats is None:          # torch.repeat_interleave(repeats): each index i repeated repeats[i] times
        input, repeats, dim = torch.arange(input.numel(), device=input.device), input, 0
    if not isinstance(repeats, torch.Tensor):
        return (input,), {"repeats": repeats, "dim": dim}
    if output_size is None:      # the host needs the total, as torch's own kernel does (one device sync)
        n = input.numel() if dim is None else (input.shape[dim] if input.dim() else 1)
        output_size = int(repeats.sum()) if repeats.numel() != 1 or n == 1 else int(repeats.reshape(())) * n
    return (input, repeats), {"dim": dim, "output_size": int(output_size)}


def _rinter_samples(rng):
    yield from _rng_samples(((5,), (2, 3), (2, 3, 2), (0, 2)),
                            lambda s: [{"repeats": 2, "dim": -1}, {"repeats": 3, "dim": 0}, {"repeats": 2, "dim": None}])(rng)
    n, i = rng.standard_normal, (lambda *v: np.array(v, dtype=np.int64))
    yield Sample((n((4, 3)), i(1, 0, 3, 2)), {"dim": 0, "output_size": 6}, name="counts-dim0")
    yield Sample((n((2, 3, 2)), i(2, 1, 0)), {"dim": 1, "output_size": 3}, name="counts-mid")
    yield Sample((n((2, 3)), i(1, 2, 0, 1, 3, 1)), {"dim": None, "output_size": 8}, name="counts-flat")
    yield Sample((n((3, 2)), i(2)), {"dim": 0, "output_size": 6}, name="counts-broadcast")
    yield Sample((n((2, 3)), i(0, 0, 0)), {"dim": -1, "output_size": 0}, name="counts-zero", grad=False)
    yield Sample((n((0, 2)), np.zeros((0,), np.int64)), {"dim": 0, "output_size": 0}, name="counts-empty", grad=False)


def _rinter_errors():
    yield ErrorCase((((3, 4), "f32"),), {"repeats": (1, 2), "dim": 0}, InvalidProblemError,
                    r"repeat_interleave: argument 'repeats': expected a non-negative int", "seq-repeats")
    yield ErrorCase((((3, 4), "f32"), ((3,), "f32")), {"dim": 0, "output_size": 3}, InvalidProblemError,
                    r"argument 'repeats': expected an int64 or int32 tensor", "float-repeats")
    yield ErrorCase((((3, 4), "f32"), ((2,), "i64")), {"dim": 0, "output_size": 3}, InvalidProblemError,
                    r"argument 'repeats': expected 3 counts", "length")
    yield ErrorCase((((3, 4), "f32"), ((3,), "i64")), {"dim": 0}, InvalidProblemError,
                    r"argument 'output_size': expected the non-negative sum", "no-size")


layout_spec("repeat_interleave", _check_rinter, attrs=_RINTER_ATTRS, torch_name="torch.repeat_interleave", arg_names=("x", "repeats"),
            peer=_peer_rinter, dropin=_dropin_rinter, grad=_g_rinter, saves=("repeats",),
            samples=_rinter_samples, errors=_rinter_errors,
            workloads=[Workload("repeat_interleave-GQA-[8,8,4096,128]x4-bf16", ((8, 8, 4096, 128),), DType.bf16,
                                {"repeats": 4, "dim": 1}, backward=True)],
            doc="torch.repeat_interleave: an int repeats (the GQA KV-head expansion), or a repeats tensor of "
                "per-element counts (second operand) with output_size = their sum.")


def _check_rinter_bw(inputs, attrs):
    op = "repeat_interleave_backward"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (grad, repeats)", len(inputs))
    g, reps = inputs
    _spec(op)().check_dtypes((g,))
    shape = attrs.get("shape", ())
    dim = attrs.get("dim")
    k = 0 if dim is None else norm_axis(op, "dim", int(dim), len(shape))
    if len(g.shape) <= k:
        raise InvalidProblemError(op, "grad", f"at least {k + 1} dims", g.shape)
    fwd_attrs, (o,) = _check_rinter_tensor((TensorSpec(shape, g.dtype), reps), {"dim": dim, "output_size": g.shape[k]}, op)
    if o.shape != g.shape:
        raise InvalidProblemError(op, "grad", f"shape {o.shape} (the forward output)", g.shape)
    return {"dim": fwd_attrs["dim"], "shape": shape}, _out(g, shape)


def _peer_rinter_bw(g, repeats, dim, shape):
    import torch

    x = torch.zeros(shape, dtype=g.dtype, requires_grad=True)
    return torch.autograd.grad(x.repeat_interleave(repeats, dim, output_size=g.shape[0 if dim is None else dim]), x, g)[0]


def _rinter_bw_samples(rng):
    n, i = rng.standard_normal, (lambda *v: np.array(v, dtype=np.int64))
    yield Sample((n((6, 3)), i(1, 0, 3, 2)), {"dim": 0, "shape": (4, 3)}, name="dim0")
    yield Sample((n((8,)), i(1, 2, 0, 1, 3, 1)), {"dim": None, "shape": (2, 3)}, name="flat")
    yield Sample((n((2, 6)), i(2)), {"dim": 1, "shape": (2, 3)}, name="broadcast")


layout_spec("repeat_interleave_backward", _check_rinter_bw,
            attrs=(int_attr("dim", None, optional=True), Attr("shape", "shape")), arg_names=("grad", "repeats"), peer=_peer_rinter_bw,
            dtypes=(DType.f64, DType.f32, DType.f16, DType.bf16), samples=_rinter_bw_samples,
            tol=lambda dt: tuple(2 * t for t in default_tol(dt)),   # sums of up to max(repeats) terms
            errors=lambda: [ErrorCase((((5, 3), "f32"), ((4,), "i64")), {"dim": 0, "shape": (3, 3)}, InvalidProblemError,
                                      r"repeat_interleave_backward: argument 'repeats': expected 3 counts", "len")],
            doc="Gradient of repeat_interleave with a repeats tensor: x-grad[i] sums the output-grad rows "
                "of segment i (deterministic, one program per tile of input rows).")


# -- triu / tril -------------------------------------------------------------------------------------------
def _check_tri(op):
    def check(inputs, attrs):
        x = _one(op, _spec(op), inputs)
        if len(x.shape) < 2:
            raise InvalidProblemError(op, "x", "at least 2 dims", x.shape)
        return {"diagonal": attrs.get("diagonal", 0)}, _out(x, x.shape)
    return check


for _name in ("triu", "tril"):
    layout_spec(_name, _check_tri(_name), torch_name=f"torch.{_name}", attrs=(int_attr("diagonal", 0),),
                peer=(lambda x, diagonal, _n=_name: getattr(x, _n)(diagonal)),
                dropin=lambda input, diagonal=0: ((input,), {"diagonal": diagonal}),
                grad=lambda ctx, d, g, s: (ctx.op(d.op, g[0], diagonal=d.attr("diagonal")),),
                samples=_rng_samples(((4, 4), (3, 5), (2, 3, 4), (0, 3)),
                                     lambda s: [{"diagonal": 0}, {"diagonal": 1}, {"diagonal": -2}]),
                errors=lambda _n=_name: [ErrorCase((((3,), "f32"),), {}, InvalidProblemError,
                                                   rf"{_n}: argument 'x': expected at least 2 dims", "rank")],
                workloads=[Workload(f"{_name}-[4096,4096]-bf16", ((4096, 4096),), DType.bf16, {"diagonal": 0})],
                doc=f"torch.{_name}(diagonal): zero the elements {'below' if _name == 'triu' else 'above'} the diagonal.")


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "diagonal", "diagonal_backward", "fill", "flip", "fliplr", "flipud", "full", "movedim", "pad",
                 "pad_backward", "permute", "repeat_interleave_backward", "roll", "rot90", "select_scatter",
                 "slice", "slice_scatter", "transpose", "tril", "triu")
