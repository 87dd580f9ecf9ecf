"""Indexing family, part 1: the gather forms -- gather, take, take_along_dim, one_hot -- and the rules the
scatter forms (``indexing_scatter.py``) share with them.

gather(input, index; dim)            out[i][j][k] = input[index[i][j][k]][j][k]      (dim = 0; any dim, any rank)
take(input, index)                   out = input.flatten()[index]                    (negative indices wrap)
take_along_dim(input, indices; dim)  gather of the operands broadcast against each other except along dim
                                     (negative indices wrap, as torch); dim=None: a gather of the flattened
                                     operands (no wrap: torch's flat form is a gather)
one_hot(tensor; num_classes)         out[..., c] = (tensor[...] == c), int64

Semantics are torch's: index dtypes int64 and int32 for gather and the scatters (torch accepts both there);
take / take_along_dim / put / one_hot take int64 only, as torch (its message names Long).  ``index`` has the
input's rank (0-d counts as 1-d) and is no larger than ``input`` along every dim but ``dim``.

Out-of-range indices never read or write out of bounds.  The reference backend raises ``InvalidProblemError``
naming the op, the argument, the offending index and the valid range before it writes anything; the Triton
kernels clamp the load address, mask the store, write 0 for a bad gathered element and set a device flag holding
the offending value, which ``_core/checks.py: flagged`` raises as the same error (now or deferred, as
``PlanPreference.check_values`` says).

one_hot's ``num_classes=-1`` (torch: the largest class + 1) makes the output shape depend on the values: the
descriptor needs the number, so the drop-in reads ``tensor.max()`` on the host (one device synchronization, as
torch's own CUDA kernel does) and the op itself takes a non-negative ``num_classes``.

Backward: gather -> scatter_add of the gradient into zeros; take -> put(accumulate=True) into zeros;
take_along_dim -> scatter_add into zeros of the broadcast shape, then summed back to the input's shape.  The
accumulating scatters use atomics on the GPU (float sums are order-dependent: their plans say
deterministic=False; ``PlanPreference(require_deterministic=True)`` refuses them there).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from ._common import broadcast_shapes, check_nonneg, norm_axis
from .layout import LAYOUT_TYPES

__all__ = ["VALUE_TYPES", "INDEX_TYPES", "oob_error", "no_out", "check_index", "check_index_shape", "index_spec",
           "index_bench_inputs", "tad_shapes", "zeros_view"]

VALUE_TYPES = LAYOUT_TYPES               # every dtype torch's CUDA gather/scatter take (complex aside)
INDEX_TYPES = (DType.i64, DType.i32)
declare_rule_ops(__name__, "scatter_add", "put", "full", "remainder", "repeat")


def oob_error(op: str, arg: str, value: int, size: int, wrap: bool, what: str = "") -> InvalidProblemError:
    """The error of an out-of-range index: names the op, the argument, the value and the valid range."""
    lo = -size if wrap else 0
    where = f" ({what})" if what else ""
    return InvalidProblemError(op, arg, f"indices in [{lo}, {size}){where}", f"index {int(value)}")


def check_index(op: str, arg: str, t: TensorSpec, long_only: bool = False) -> None:
    """An index operand's dtype: int64 (and int32 unless ``long_only``: torch's take / put / one_hot).  An empty
    index of gather / the scatters may have any dtype (torch checks nothing about an empty index there)."""
    if not long_only and math.prod(t.shape) == 0:
        return
    allowed = (DType.i64,) if long_only else INDEX_TYPES
    if t.dtype not in allowed:
        want = "i64 (torch takes Long indices only here)" if long_only else "i64 or i32"
        raise DTypeMismatchError(op, arg, want, str(t.dtype))


def check_index_shape(op: str, x: TensorSpec, index: TensorSpec, dim: int, src: TensorSpec | None = None) -> None:
    """torch's gather / scatter shape rule: index has input's rank (0-d counts as 1-d), index.size(d) <=
    input.size(d) for d != dim, and (scatter) index.size(d) <= src.size(d) for every d."""
    if math.prod(index.shape) == 0:      # an empty index touches nothing (torch checks none of its sizes)
        return
    xr, ir = max(len(x.shape), 1), max(len(index.shape), 1)
    if ir != xr:
        raise InvalidProblemError(op, "index", f"a tensor of the input's rank {len(x.shape)}", index.shape)
    xs, js = x.shape or (1,), index.shape or (1,)
    for d in range(xr):
        if d != dim and js[d] > xs[d]:
            raise InvalidProblemError(op, "index", f"a size no larger than the input's {tuple(xs)} except along "
                                      f"dim {dim}", index.shape)
    if src is not None:
        ss = src.shape or (1,)
        if max(len(src.shape), 1) != xr:
            raise InvalidProblemError(op, "src", f"a tensor of the input's rank {len(x.shape)}", src.shape)
        if any(j > s for j, s in zip(js, ss)):
            raise InvalidProblemError(op, "src", f"a size no smaller than the index's {tuple(js)}", src.shape)


def no_out(op: str, out) -> None:
    """torch's ``out=`` is not taken by the drop-ins (torch's default None is accepted)."""
    if out is not None:
        raise UnsupportedError(op, "argument 'out' of the torch signature is not supported")


def _values(op, x):
    if x.dtype not in VALUE_TYPES:
        raise DTypeMismatchError(op, "input", ", ".join(map(str, VALUE_TYPES)), str(x.dtype))


def index_spec(name, check, *, arg_names, samples, errors, workloads=(), grad=None, differentiable=(0,), saves=(),
               dtypes=VALUE_TYPES, cost=None, tol=None, attrs=(), peer=None, dropin=None, doc="", **kw) -> OpSpec:
    """Register an indexing op (bit-exact unless ``tol``: data movement)."""
    from .._core.spec import default_tol

    return register_spec(OpSpec(
        name=name, family="indexing", arg_names=arg_names, check=check, dtypes=dtypes, attrs=attrs,
        torch_peer=peer, torch_name=kw.pop("torch_name", f"torch.{name}"), dropin=dropin, grad=_float_only(grad),
        saves=saves if callable(saves) else tuple(saves), differentiable=differentiable if grad else (), samples=samples, errors=errors,
        tol=tol or (lambda dt: (0.0, 0.0)),
        # the backward scatters sum gradients (atomics in f32 for the half types: one rounding of the result)
        grad_tol=lambda dt: tuple(2 * t for t in default_tol(dt)), workloads=tuple(workloads), cost=cost,
        doc=doc, **kw))


def _float_only(rule):
    """Gradients flow to floating operands only (integer / bool values and the indices get None)."""
    if rule is None:
        return None

    @functools.wraps(rule)   # (keeps the rule's module: its declare_rule_ops applies)
    def grad(ctx, d, grads, saved):
        if grads[0] is None or not d.inputs[0].dtype.is_floating:
            return (None,) * len(d.inputs)
        res = tuple(rule(ctx, d, grads, saved))
        return tuple(r if t.dtype.is_floating else None for r, t in zip(res, d.inputs))
    return grad


def zeros_view(ctx, shape, dt):
    """Zeros of ``shape`` as a broadcast view of one element (stride 0): a backward's scatter / put / index_add
    into them reads no zeros from memory and writes its output once (the plans take operands of any strides)."""
    return ctx.expand(ctx.op("full", shape=(), value=0.0, dtype=dt), tuple(shape))


def _rng_index(rng, shape, n, wrap=False, dtype=np.int64):
    """Random valid indices in [0, n) (also negative ones when ``wrap``)."""
    lo = -n if wrap else 0
    return rng.integers(lo, max(n, 1), size=shape).astype(dtype) if n else np.zeros(shape, dtype)


def _gather_cost(desc):
    out = desc.outputs[0]
    # the index once, one input element per output element (rows of a gather: line-sized), the output once
    return desc.inputs[1].nbytes + 2 * out.nbytes, 0


# -- gather ----------------------------------------------------------------------------------------------------
def _check_gather(inputs, attrs):
    op = "gather"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (input, index)", len(inputs))
    x, idx = inputs
    check_nonneg(op, ("input", "index"), [x.shape, idx.shape])
    _values(op, x)
    check_index(op, "index", idx)
    dim = norm_axis(op, "dim", attrs["dim"], len(x.shape))
    check_index_shape(op, x, idx, dim)
    return {"dim": dim, "sparse_grad": attrs["sparse_grad"]}, (TensorSpec(idx.shape, x.dtype),)


def _g_gather(ctx, d, grads, s):
    x = d.inputs[0]
    return ctx.op("scatter_add", zeros_view(ctx, x.shape, x.dtype), s["index"], grads[0], dim=d.attr("dim")), None


def _gather_samples(rng):
    n = rng.standard_normal
    yield Sample((n((3, 4)), _rng_index(rng, (2, 4), 3)), {"dim": 0}, name="dim0")
    yield Sample((n((3, 5)), _rng_index(rng, (3, 7), 5)), {"dim": -1}, name="dim-1-longer")
    yield Sample((n((2, 3, 4)), _rng_index(rng, (2, 5, 3), 3, dtype=np.int32)), {"dim": 1}, name="3d-i32")
    yield Sample((n((2, 3, 2, 3)), _rng_index(rng, (1, 2, 4, 3), 2)), {"dim": 2}, name="4d")
    yield Sample((n(()), np.zeros((), np.int64)), {"dim": 0}, name="0d")
    yield Sample((n((3, 4)), np.zeros((0, 4), np.int64)), {"dim": 0}, name="empty-index")
    yield Sample((n((4, 6)), _rng_index(rng, (4, 6), 4)), {"dim": 0, "sparse_grad": True}, name="sparse-grad")


def _index_errors(op, three=False, **attrs):
    """The shape / dtype errors every gather / scatter op shares (plus the operand for the scatters)."""
    x, i = ((3, 4), "f32"), ((2, 4), "i64")
    extra = (((2, 4), "f32"),) if three else ()
    a = dict(attrs, dim=0)
    yield ErrorCase((x, ((2, 4), "f32")) + extra, a, DTypeMismatchError, rf"{op}: argument 'index'", "idx-dtype")
    yield ErrorCase((x, ((2, 4, 1), "i64")) + extra, a, InvalidProblemError,
                    rf"{op}: argument 'index': expected a tensor of the input's rank", "rank")
    yield ErrorCase((x, ((2, 5), "i64")) + extra, a, InvalidProblemError,
                    rf"{op}: argument 'index': expected a size no larger", "size")
    yield ErrorCase((x, i) + extra, dict(attrs, dim=2), InvalidProblemError, rf"{op}: argument 'dim'", "dim")


def _gather_errors():
    yield from _index_errors("gather")
    yield ErrorCase((((3, 4), "c64"), ((2, 4), "i64")), {"dim": 0}, DTypeMismatchError, r"gather: argument 'input'", "c64")


def _gather_dropin(input, dim, index, *, sparse_grad=False, out=None):
    """torch.gather; ``sparse_grad=True`` is accepted and the gradient is returned dense (same values)."""
    no_out("gather", out)
    return (input, index), {"dim": dim, "sparse_grad": bool(sparse_grad)}


index_spec("gather", _check_gather, arg_names=("input", "index"),
           attrs=(Attr("dim", "int", REQUIRED), Attr("sparse_grad", "bool", False)),
           peer=lambda x, i, dim, sparse_grad=False: x.gather(dim, i.long()),
           dropin=_gather_dropin, grad=_g_gather, saves=("index",), samples=_gather_samples, errors=_gather_errors,
           workloads=[Workload("gather-rows-[65536,4096]<-[16384,4096]-dim0-bf16",
                               ((65536, 4096), ((16384, 4096), DType.i64)), DType.bf16, {"dim": 0}, backward=True)],
           cost=_gather_cost, jax_name="jax.numpy.take_along_axis",
           doc="torch.gather: out[..i..] = input[.. index[..i..] along dim ..]; OOB indices raise (never read).")


# -- take -----------------------------------------------------------------------------------------------------
def _check_take(inputs, attrs):
    op = "take"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (input, index)", len(inputs))
    x, idx = inputs
    check_nonneg(op, ("input", "index"), [x.shape, idx.shape])
    _values(op, x)
    check_index(op, "index", idx, long_only=True)
    if idx.numel and not x.numel:
        raise InvalidProblemError(op, "index", "no indices into an empty input", idx.shape)
    return {}, (TensorSpec(idx.shape, x.dtype),)


def _g_take(ctx, d, grads, s):
    x = d.inputs[0]
    return ctx.op("put", zeros_view(ctx, x.shape, x.dtype), s["index"], grads[0], accumulate=True), None


def _take_samples(rng):
    n = rng.standard_normal
    yield Sample((n((3, 4)), _rng_index(rng, (5,), 12, wrap=True)), name="flat-neg")
    yield Sample((n((2, 3, 2)), _rng_index(rng, (2, 3), 12)), name="2d-index")
    yield Sample((n((5,)), _rng_index(rng, (4, 2), 5, wrap=True)), name="1d")
    yield Sample((n(()), np.zeros((), np.int64)), name="0d")
    yield Sample((n((3, 4)), np.zeros((0,), np.int64)), name="empty-index")


def _take_errors():
    yield ErrorCase((((3, 4), "f32"), ((2,), "i32")), {}, DTypeMismatchError, r"take: argument 'index': expected dtype i64", "i32")
    yield ErrorCase((((0, 4), "f32"), ((2,), "i64")), {}, InvalidProblemError, r"take: argument 'index': expected no indices", "empty")


index_spec("take", _check_take, arg_names=("input", "index"), peer=lambda x, i: x.take(i),
           dropin=lambda input, index: ((input, index), {}), grad=_g_take, saves=("index",),
           samples=_take_samples, errors=_take_errors, cost=_gather_cost, jax_name="jax.numpy.take",
           workloads=[Workload("take-[4096,4096]<-[16M]-bf16", ((4096, 4096), ((1 << 24,), DType.i64)), DType.bf16)],
           doc="torch.take: input.flatten()[index] (negative indices wrap); OOB indices raise.")


# -- take_along_dim ---------------------------------------------------------------------------------------------
def tad_shapes(op, x, idx, dim):
    """(input shape, index shape) of take_along_dim's gather: dim=None flattens both; else both are broadcast
    against each other on every dim but ``dim`` (torch's rule)."""
    if dim is None:
        return (math.prod(x.shape),), (math.prod(idx.shape),)
    if len(x.shape) != len(idx.shape):
        raise InvalidProblemError(op, "indices", f"a tensor of the input's rank {len(x.shape)}", idx.shape)
    xs, js = list(x.shape), list(idx.shape)
    xs[dim] = js[dim] = 1
    b = broadcast_shapes(op, ("input", "indices"), [tuple(xs), tuple(js)])
    bx, bj = list(b), list(b)
    bx[dim], bj[dim] = x.shape[dim], idx.shape[dim]
    return tuple(bx), tuple(bj)


def _check_tad(inputs, attrs):
    op = "take_along_dim"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (input, indices)", len(inputs))
    x, idx = inputs
    check_nonneg(op, ("input", "indices"), [x.shape, idx.shape])
    _values(op, x)
    check_index(op, "indices", idx, long_only=True)
    dim = attrs["dim"]
    if dim is not None:
        dim = norm_axis(op, "dim", dim, len(x.shape))
        if not x.shape:      # 0-d: torch views both as 1-d
            x, idx = TensorSpec((1,), x.dtype), TensorSpec(idx.shape or (1,), idx.dtype)
    _, js = tad_shapes(op, x, idx, dim)
    if math.prod(js) and not math.prod(x.shape):
        raise InvalidProblemError(op, "indices", "no indices into an empty input", idx.shape)
    out = () if dim is not None and not inputs[0].shape and not inputs[1].shape else js
    return {"dim": dim}, (TensorSpec(tuple(out), x.dtype),)


def _g_tad(ctx, d, grads, s):
    """dim=None: put(accumulate) of the gradient on the flat input.  Along a dim: the indices wrapped to [0, n)
    (remainder: Python's sign rule) and tiled to the broadcast shape, a scatter_add into zeros of the broadcast
    input's shape, summed back to the input's shape."""
    x, idx = d.inputs
    dim, g = d.attr("dim"), grads[0]
    if dim is None:
        return ctx.op("put", zeros_view(ctx, x.shape, x.dtype), s["indices"], g, accumulate=True), None
    bx, bj = tad_shapes("take_along_dim", TensorSpec(x.shape or (1,), x.dtype), TensorSpec(idx.shape or (1,),
                                                                                        idx.dtype), dim)
    if math.prod(bj) == 0:     # nothing gathered: no gradient reaches the input
        return zeros_view(ctx, x.shape, x.dtype), None
    idx_w = ctx.op("remainder", s["indices"], ctx.op("full", shape=(), value=bx[dim], dtype=DType.i64))
    ishape = ctx.shape(idx_w) or (1,)
    if tuple(ishape) != tuple(bj):
        idx_w = ctx.op("repeat", ctx.reshape(idx_w, ishape), repeats=tuple(b // a for a, b in zip(ishape, bj)))
    gi = ctx.op("scatter_add", zeros_view(ctx, bx, x.dtype), idx_w, ctx.reshape(g, bj), dim=dim)
    return ctx.reduce_to(gi, x.shape) if tuple(bx) != tuple(x.shape) else ctx.reshape(gi, x.shape), None


def _tad_samples(rng):
    n = rng.standard_normal
    yield Sample((n((3, 4)), _rng_index(rng, (2, 4), 3, wrap=True)), {"dim": 0}, name="dim0-neg")
    yield Sample((n((3, 4)), _rng_index(rng, (3, 2), 4)), {"dim": 1}, name="dim1")
    yield Sample((n((1, 4)), _rng_index(rng, (3, 2), 4)), {"dim": -1}, name="broadcast-input")
    yield Sample((n((3, 1, 4)), _rng_index(rng, (1, 2, 4), 3, wrap=True)), {"dim": 0}, name="broadcast-both")
    yield Sample((n((3, 4)), _rng_index(rng, (5,), 12)), {"dim": None}, name="flat")
    yield Sample((n((3, 4)), np.zeros((0, 4), np.int64)), {"dim": 0}, name="empty")


def _tad_errors():
    x = ((3, 4), "f32")
    yield ErrorCase((x, ((2, 4), "i32")), {"dim": 0}, DTypeMismatchError, r"take_along_dim: argument 'indices': expected dtype i64", "i32")
    yield ErrorCase((x, ((2, 4, 1), "i64")), {"dim": 0}, InvalidProblemError, r"take_along_dim: argument 'indices'", "rank")
    yield ErrorCase((x, ((2, 3), "i64")), {"dim": 0}, InvalidProblemError, r"take_along_dim: argument 'indices'", "bcast")


def _peer_tad(x, i, dim=None):
    import torch

    return torch.take_along_dim(x, i, dim)


index_spec("take_along_dim", _check_tad, arg_names=("input", "indices"),
           attrs=(Attr("dim", "int", None, optional=True),), peer=_peer_tad,
           dropin=lambda input, indices, dim=None, *, out=None: no_out("take_along_dim", out) or
           ((input, indices), {"dim": dim}),
           grad=_g_tad, saves=("indices",), samples=_tad_samples, errors=_tad_errors, cost=_gather_cost,
           jax_name="jax.numpy.take_along_axis",
           workloads=[Workload("take_along_dim-[8192,32000]<-[8192,64]-bf16", ((8192, 32000), ((8192, 64), DType.i64)),
                               DType.bf16, {"dim": 1})],
           doc="torch.take_along_dim: gather of input and indices broadcast against each other except along dim "
               "(negative indices wrap there, as torch); dim=None: a gather of the flattened operands (no wrap).")


# -- one_hot ----------------------------------------------------------------------------------------------------
def _check_one_hot(inputs, attrs):
    op = "one_hot"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (tensor)", len(inputs))
    t = inputs[0]
    check_nonneg(op, ("tensor",), [t.shape])
    check_index(op, "tensor", t, long_only=True)
    c = attrs["num_classes"]
    return {"num_classes": c}, (TensorSpec(tuple(t.shape) + (c,), DType.i64),)


def _one_hot_dropin(tensor, num_classes=-1):
    """F.one_hot.  num_classes=-1: the largest class + 1, read on the host (one synchronization, as torch)."""
    import torch

    if not isinstance(num_classes, int) or isinstance(num_classes, bool):
        raise InvalidProblemError("one_hot", "num_classes", "an int", repr(num_classes))
    if num_classes == -1 and isinstance(tensor, torch.Tensor) and tensor.dtype == torch.int64:
        if tensor.numel() == 0:
            raise InvalidProblemError("one_hot", "num_classes", "a number of classes (it cannot be inferred from an "
                                      "empty tensor)", -1)
        num_classes = int(tensor.max()) + 1
    return (tensor,), {"num_classes": num_classes}


def _one_hot_samples(rng):
    yield Sample((_rng_index(rng, (5,), 4),), {"num_classes": 4}, name="1d")
    yield Sample((_rng_index(rng, (2, 3), 3),), {"num_classes": 7}, name="2d-wider")
    yield Sample((np.array(2, np.int64),), {"num_classes": 3}, name="0d")
    yield Sample((np.zeros((0, 2), np.int64),), {"num_classes": 3}, name="empty")
    yield Sample((np.zeros((2,), np.int64),), {"num_classes": 1}, name="one-class")


def _one_hot_errors():
    yield ErrorCase((((3,), "i32"),), {"num_classes": 3}, DTypeMismatchError, r"one_hot: argument 'tensor': expected dtype i64", "i32")
    yield ErrorCase((((3,), "i64"),), {"num_classes": -1}, InvalidProblemError, r"one_hot: argument 'num_classes'", "neg")


def _one_hot_peer(t, num_classes):
    import torch

    return torch.nn.functional.one_hot(t, num_classes)


index_spec("one_hot", _check_one_hot, arg_names=("tensor",), dtypes=(DType.i64,),
           attrs=(Attr("num_classes", "int", REQUIRED, ge=0, expected="a non-negative int (the drop-in resolves "
                       "torch's -1 on the host)"),),
           peer=_one_hot_peer, dropin=_one_hot_dropin, torch_name="torch.nn.functional.one_hot",
           samples=_one_hot_samples, errors=_one_hot_errors, jax_name="jax.nn.one_hot",
           cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, 0),
           workloads=[Workload("one_hot-[16384]x32000", (((16384,), DType.i64),), DType.i64, {"num_classes": 32000})],
           doc="torch.nn.functional.one_hot (int64 output); classes outside [0, num_classes) raise.")


# -- benchmark inputs: valid indices ------------------------------------------------------------------------------
def index_bench_inputs(index_pos: int, extent, rows: bool = False):
    """A benchmark input maker: random values, and at ``index_pos`` indices in [0, extent(desc)).  ``rows``: one
    index per row, expanded along the last dim (``idx[:, None].expand(-1, D)``: a gather of whole rows, how
    models call it; torch and we receive the same stride-0 view)."""
    def maker(desc, device, gen):
        import torch

        g = dict(generator=gen, device=gen.device)
        out = []
        for k, t in enumerate(desc.inputs):
            if k == index_pos:
                shape = t.shape[:-1] + (1,) if rows and t.shape else t.shape
                i = torch.randint(0, max(extent(desc), 1), shape, **g).to(t.dtype.torch).to(device)
                out.append(i.expand(t.shape) if rows else i)
            elif t.dtype.is_floating:
                out.append(torch.randn(t.shape, **g).to(t.dtype.torch).to(device))
            else:
                out.append(torch.randint(0, 100, t.shape, **g).to(t.dtype.torch).to(device))
        return out
    return maker


set_bench_inputs("gather", index_bench_inputs(1, lambda d: (d.inputs[0].shape or (1,))[d.attr("dim")], rows=True))
set_bench_inputs("take", index_bench_inputs(1, lambda d: d.inputs[0].numel))
set_bench_inputs("take_along_dim", index_bench_inputs(
    1, lambda d: d.inputs[0].numel if d.attr("dim") is None else (d.inputs[0].shape or (1,))[d.attr("dim")]))
set_bench_inputs("one_hot", index_bench_inputs(0, lambda d: d.attr("num_classes")))
