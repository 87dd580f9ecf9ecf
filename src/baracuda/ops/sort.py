"""Sort family (issue 17, item 4): sort, argsort, msort, topk along one axis, and their backward op
``sort_backward`` (the gradient scattered through the saved indices).

Semantics follow torch:
* sort(x, dim=-1, descending=False, stable=False) -> (values, int64 indices) (``torch.return_types.sort``).
  Every implementation here is stable (equal keys keep their input order, also when descending), so
  ``stable=False`` gives the stable result too (torch allows any order of ties then).  NaN is larger than
  everything (last ascending, first descending, in input order among NaNs); -0.0 and +0.0 are equal keys.
* argsort: the indices of sort.  msort(x) = sort(x, dim=0).values; its op also returns the indices (the
  drop-in returns the values only) so its gradient can go through them.
* topk(x, k, dim=-1, largest=True, sorted=True) -> (values, indices) of the k largest (smallest) along dim,
  in order (also with sorted=False, which lets torch return any order).  NaN counts as the largest value.
  Ties select the lowest indices (torch's CPU kernel picks any of the tied positions).
* Gradients: ``sort_backward(grad, indices, dim, size)`` writes grad[..., j, ...] to position
  indices[..., j, ...] of a zero tensor whose ``dim`` has ``size`` entries; the indices of a row must be
  distinct (they are: a permutation for sort, k distinct positions for topk).  Integer and bool inputs have
  no gradient, as in torch.
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import (Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, get_spec, register_spec,
                          set_bench_inputs)
from ._common import check_nonneg, no_out

__all__ = ["SORT_TYPES", "TOPK_TYPES", "np_sort_order", "sort_dims", "row_geometry"]

INT_TYPES = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
TOPK_TYPES = FLOAT_TYPES + INT_TYPES
SORT_TYPES = TOPK_TYPES + (DType.bool,)

_DIM = Attr("dim", "axis", -1)
_DESC = Attr("descending", "bool", False)
_STABLE = Attr("stable", "bool", False)


# -- the one ordering rule (the reference backend and the samples use it) ---------------------------------
def np_sort_order(x: np.ndarray, axis: int, descending: bool = False) -> np.ndarray:
    """The stable sort permutation of x along axis (int64), NaN largest, -0.0 == +0.0 (torch's order)."""
    z = np.moveaxis(x.reshape(x.shape or (1,)), axis, -1)
    if z.dtype == np.bool_:
        z = z.astype(np.int64)
    if z.dtype.kind == "f":
        nan = np.isnan(z)
        key = np.where(nan, 0.0, z) + 0.0        # + 0.0: -0.0 becomes +0.0 (one key)
        if descending:
            key, nan = -key, ~nan
    else:
        key = z.astype(np.int64) if z.dtype.kind in "ui" and z.dtype.itemsize < 8 else z
        nan = np.zeros(z.shape, np.bool_)
        if descending:
            key = ~key                            # order-reversing on every integer type, no overflow
    order = np.lexsort((key, nan), axis=-1) if z.shape[-1] else np.zeros(z.shape, np.int64)
    return np.moveaxis(order.astype(np.int64), -1, axis)


def row_geometry(shape, dim) -> tuple[int, int]:
    """(rows, n): the number of independent rows along dim and their length (a 0-d tensor is one row of 1)."""
    shape = tuple(shape) or (1,)
    n = shape[dim]
    return (int(np.prod(shape)) // n if n else int(np.prod(shape[:dim] + shape[dim + 1:]))), n


def sort_dims(shape, dim) -> int:
    """The length of the sort axis (1 for a 0-d tensor)."""
    return (tuple(shape) or (1,))[dim]


# -- shape / dtype rules --------------------------------------------------------------------------------
def one_operand(op, inputs):
    """The one operand of a sort-family op, its dtype and shape checked."""
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    (x,) = inputs
    get_spec(op).check_dtypes(inputs)
    check_nonneg(op, ("x",), (x.shape,))
    return x


_one = one_operand


def _check_sort(op):
    def check(inputs, attrs):
        x = _one(op, inputs)
        if op == "argsort":
            return attrs, (TensorSpec(x.shape, DType.i64),)
        return attrs, (TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, DType.i64))
    return check


def _check_topk(inputs, attrs):
    x = _one("topk", inputs)
    n, k = sort_dims(x.shape, attrs["dim"]), attrs["k"]
    if not 0 <= k <= n:
        raise InvalidProblemError("topk", "k", f"an int in [0, {n}] (the size of dim {attrs['dim']})", k)
    shape = tuple(k if i == attrs["dim"] else s for i, s in enumerate(x.shape))
    return attrs, (TensorSpec(shape, x.dtype), TensorSpec(shape, DType.i64))


def _bw_rank(inputs, attrs):
    return len(inputs[0].shape) if inputs else 0


def _check_bw(inputs, attrs):
    op = "sort_backward"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (grad, indices)", len(inputs))
    g, idx = inputs
    check_nonneg(op, ("grad", "indices"), (g.shape, idx.shape))
    if g.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument 'grad' has dtype {g.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")
    if idx.dtype != DType.i64:
        raise DTypeMismatchError(op, "indices", "i64", str(idx.dtype))
    if idx.shape != g.shape:
        raise InvalidProblemError(op, "indices", f"the shape of 'grad' {g.shape}", idx.shape)
    dim, size = attrs["dim"], attrs["size"]
    m = sort_dims(g.shape, dim)
    if size < m:
        raise InvalidProblemError(op, "size", f"at least the {m} entries of grad along dim {dim} (distinct "
                                              f"indices)", size)
    shape = tuple(size if i == dim else s for i, s in enumerate(g.shape))
    return attrs, (TensorSpec(shape, g.dtype),)


# -- backward rules ---------------------------------------------------------------------------------------
def _g_sort(ctx, d, grads, s):
    g = grads[0]
    x = d.inputs[0]
    if g is None or not x.dtype.is_floating:
        return (None,)
    dim = d.attr("dim") if d.op != "msort" else 0
    return (ctx.op("sort_backward", g, s["out1"], dim=dim, size=sort_dims(x.shape, dim)),)


# -- torch peers and drop-in adapters ---------------------------------------------------------------------
def _peer_sort(x, dim=-1, descending=False, stable=False):
    import torch

    # the stable torch sort is the peer of every call (ours is always stable)
    return tuple(torch.sort(x, dim=dim, descending=descending, stable=True))


def _peer_argsort(x, dim=-1, descending=False, stable=False):
    return _peer_sort(x, dim, descending)[1]


def _peer_msort(x):
    return _peer_sort(x, 0)


def _peer_topk(x, k, dim=-1, largest=True, sorted=True):
    import torch

    # torch picks any of the tied positions; the peer is the stable sort's first k (ours: the lowest indices)
    v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
    if x.dim() == 0:
        return v, i
    return v.narrow(dim, 0, k), i.narrow(dim, 0, k)


def _bench_topk(x, k, dim=-1, largest=True, sorted=True):
    """torch.topk itself, the bench's peer (the tests compare with _peer_topk: torch.topk may pick any tied position)."""
    import torch

    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


def _peer_sort_bw(g, idx, dim, size):
    import torch

    if g.dim() == 0:
        return g.clone()
    shape = list(g.shape)
    shape[dim] = size
    return torch.zeros(shape, dtype=g.dtype).scatter(dim, idx, g)


def _dropin_sort(input, dim=-1, descending=False, stable=False, *, out=None):
    no_out("sort", out)
    return (input,), {"dim": dim, "descending": descending, "stable": bool(stable)}


def _dropin_argsort(input, dim=-1, descending=False, stable=False):
    return (input,), {"dim": dim, "descending": descending, "stable": bool(stable)}


def _dropin_msort(input, *, out=None):
    no_out("msort", out)
    return (input,), {}


def _dropin_topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    no_out("topk", out)
    return (input,), {"k": k, "dim": dim, "largest": largest, "sorted": sorted}


def _result(kind):
    def result(out):
        import torch

        return getattr(torch.return_types, kind)(out)
    return result


# -- samples, errors, workloads ----------------------------------------------------------------------------
# small odd shapes (the Triton interpreter sorts element by element); long rows are tests/sort's business
_CASES = [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((4, 37), -1), ((1,), 0),
          ((), 0), ((0, 4), 1), ((3, 0), 1)]


def _values(rng, shape, i):
    """Distinct values for every third case (gradient checks need no ties), small integers (ties, exact in
    every dtype) otherwise, NaN and -0.0 in one sample per op."""
    if i % 3 == 0:
        n = int(np.prod(shape))
        return (rng.permutation(n).reshape(shape) * 0.25 - 0.5 * n * 0.25) if n else np.zeros(shape)
    return rng.integers(-3, 4, size=shape).astype(np.float64) + (0.5 if i % 2 else 0.0)


def _sort_samples(op):
    def samples(rng):
        for i, (shape, dim) in enumerate(_CASES):
            a = {} if op == "msort" else {"dim": dim, "descending": i % 2 == 1, "stable": i % 4 == 1}
            if op == "msort" and not shape:
                continue
            yield Sample((_values(rng, shape, i),), a, name=f"{shape}-{a}", grad=i % 3 == 0)
        if op != "msort":
            x = rng.standard_normal((3, 9))
            x[0, 2] = x[0, 5] = x[2, 8] = np.nan
            x[1, 1], x[1, 4] = -0.0, 0.0
            for desc in (False, True):
                yield Sample((x,), {"dim": 1, "descending": desc}, name=f"nan-signed-zero-desc{desc}", grad=False)
    return samples


def _topk_samples(rng):
    for i, (shape, dim) in enumerate(_CASES):
        n = sort_dims(shape, dim)
        for k in sorted({0, min(1, n), n // 2, n}):
            yield Sample((_values(rng, shape, i),), {"k": k, "dim": dim, "largest": i % 2 == 0, "sorted": k % 2 == 0},
                         name=f"{shape}-dim{dim}-k{k}", grad=i % 3 == 0)
    x = rng.standard_normal((3, 9))
    x[0, 2] = x[0, 5] = x[2, 8] = np.nan
    for largest in (True, False):
        yield Sample((x,), {"k": 4, "largest": largest}, name=f"nan-largest{largest}", grad=False)


def _bw_samples(rng):
    for shape, dim, size in [((3, 5), 1, 5), ((3, 2), 1, 7), ((4, 3), 0, 6), ((2, 3, 4), 1, 3), ((7,), 0, 7),
                             ((), 0, 1), ((0, 4), 1, 4), ((3, 0), 1, 2)]:
        sh = shape or (1,)
        perm = np.argsort(rng.random(sh[:dim] + (size,) + sh[dim + 1:]), axis=dim)
        idx = np.take(perm, np.arange(sh[dim]), axis=dim).reshape(shape).astype(np.int64)
        yield Sample((rng.standard_normal(shape), idx), {"dim": dim, "size": size}, name=f"{shape}-{dim}-{size}")


def _errors(op):
    def errors():
        f = ((3, 4), "f32")
        yield ErrorCase((((3, 4), "c64"),), {"k": 1} if op == "topk" else {}, UnsupportedError, r"dtype c64",
                        "complex-dtype")
        if op == "msort":
            yield ErrorCase((f,), {"dim": 0}, InvalidProblemError, r"argument 'dim'", "no-dim-attr")
            return
        yield ErrorCase((f,), {"dim": 2, **({"k": 1} if op == "topk" else {})}, InvalidProblemError,
                        rf"{op}: argument 'dim': expected an axis in \[-2, 1\]", "bad-dim")
        yield ErrorCase((f,), {"dim": 1.0, **({"k": 1} if op == "topk" else {})}, InvalidProblemError,
                        r"argument 'dim': expected an int", "float-dim")
        if op == "topk":
            yield ErrorCase((f,), {"k": 5}, InvalidProblemError, r"topk: argument 'k': expected an int in \[0, 4\]",
                            "k-too-large")
            yield ErrorCase((f,), {"k": -1}, InvalidProblemError, r"topk: argument 'k'", "negative-k")
            yield ErrorCase((f,), {}, InvalidProblemError, r"topk: argument 'k'", "no-k")
            yield ErrorCase((f,), {"k": 1, "largest": 1}, InvalidProblemError, r"argument 'largest': expected a bool",
                            "int-largest")
        else:
            yield ErrorCase((f,), {"descending": 1}, InvalidProblemError, r"argument 'descending': expected a bool",
                            "int-descending")
        yield ErrorCase((f,), {"bogus": 1, **({"k": 1} if op == "topk" else {})}, InvalidProblemError,
                        r"argument 'bogus'", "bad-attr")
        yield ErrorCase((f, f), {"k": 1} if op == "topk" else {}, InvalidProblemError, rf"{op}: argument 'inputs'",
                        "two-operands")
    return errors


def _bw_errors():
    g, i = ((3, 4), "f32"), ((3, 4), "i64")
    yield ErrorCase((g, ((3, 4), "i32")), {"dim": 1, "size": 4}, DTypeMismatchError, r"argument 'indices'",
                    "i32-indices")
    yield ErrorCase((g, ((3, 5), "i64")), {"dim": 1, "size": 5}, InvalidProblemError,
                    r"argument 'indices': expected the shape", "shape-mismatch")
    yield ErrorCase((((3, 4), "i32"), i), {"dim": 1, "size": 4}, UnsupportedError, r"argument 'grad' has dtype i32",
                    "int-grad")
    yield ErrorCase((g, i), {"dim": 1, "size": 3}, InvalidProblemError, r"argument 'size'", "size-too-small")


def _cost(desc):
    """Bytes of one read and one write (the sort's extra passes are the implementation's business);
    n log2 n comparisons per row."""
    x = desc.inputs[0]
    n = max(sort_dims(x.shape, desc.attr("dim")) if desc.op != "msort" else (x.shape or (1,))[0], 2)
    return (x.nbytes + sum(t.nbytes for t in desc.outputs), int(x.numel * np.log2(n)))


def _workloads(op):
    if op == "sort":
        # issue 17's table: torch runs 0.10 TB/s on an H100 (f32 8192^2); the target is >= 2x
        return (Workload("sort-rows-[8192,8192]-f32", ((8192, 8192),), DType.f32, {"dim": -1}, backward=True),
                Workload("sort-row-[1,16777216]-f32", ((1, 1 << 24),), DType.f32, {"dim": -1}))
    if op == "topk":
        return tuple(Workload(f"topk-k{k}-[8192,32768]-bf16", ((8192, 32768),), DType.bf16, {"k": k, "dim": -1},
                              backward=k == 64) for k in (8, 64, 1024))
    if op == "argsort":
        return (Workload("argsort-rows-[8192,8192]-f32", ((8192, 8192),), DType.f32, {"dim": -1}),)
    return ()


SPECS: dict[str, OpSpec] = {}
for _op, _attrs, _check, _peer, _dropin, _res, _dt, _doc in [
    ("sort", (_DIM, _DESC, _STABLE), _check_sort("sort"), _peer_sort, _dropin_sort, _result("sort"), SORT_TYPES,
     "torch.sort (always stable; NaN largest): (values, int64 indices)"),
    ("argsort", (_DIM, _DESC, _STABLE), _check_sort("argsort"), _peer_argsort, _dropin_argsort, None, SORT_TYPES,
     "torch.argsort: the int64 indices of the stable sort"),
    ("msort", (), _check_sort("msort"), _peer_msort, _dropin_msort, lambda o: o[0], SORT_TYPES,
     "torch.msort: sort along dim 0 (the op also returns the indices; the drop-in returns the values)"),
    ("topk", (Attr("k", "int", expected="an int (how many values)"), _DIM, Attr("largest", "bool", True),
              Attr("sorted", "bool", True)), _check_topk, _peer_topk, _dropin_topk, _result("topk"), TOPK_TYPES,
     "torch.topk (any k, any row length; NaN largest; ties: the lowest indices): (values, int64 indices)"),
]:
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="sort", arg_names=("x",), check=_check, dtypes=_dt, attrs=_attrs, torch_peer=_peer,
        torch_name=f"torch.{_op}", dropin=_dropin, dropin_result=_res,
        grad=None if _op == "argsort" else _g_sort, saves=("out1",), differentiable=() if _op == "argsort" else (0,),
        samples=_topk_samples if _op == "topk" else _sort_samples(_op), errors=_errors(_op),
        tol=lambda dt: (0.0, 0.0),            # data movement: exact
        grad_tol=lambda dt: (0.0, 0.0), workloads=_workloads(_op), cost=_cost, category="sort", doc=_doc,
        jax_name={"sort": "jax.lax.sort", "topk": "jax.lax.top_k"}.get(_op),
        bench_peer=_bench_topk if _op == "topk" else None,
    ))

SPECS["sort_backward"] = register_spec(OpSpec(
    name="sort_backward", family="sort", arg_names=("grad", "indices"), check=_check_bw, dtypes=FLOAT_TYPES,
    attrs=(Attr("dim", "axis", rank=_bw_rank), Attr("size", "int", ge=0)),
    torch_peer=_peer_sort_bw, torch_name="torch autograd rule of sort / topk (value_selecting_reduction_backward)",
    samples=_bw_samples, errors=_bw_errors, tol=lambda dt: (0.0, 0.0), category="sort",
    workloads=(Workload("sort_backward-rows-[8192,8192]-f32", ((8192, 8192), ((8192, 8192), DType.i64)), DType.f32,
                        {"dim": -1, "size": 8192}),),
    cost=lambda d: (sum(t.nbytes for t in d.inputs) + d.outputs[0].nbytes, 0),
    doc="gradient of sort/topk/msort: grad written to the (distinct) indices along dim of a zero tensor",
))


def _bench_bw(desc, device, gen):
    """The indices of a sort_backward bench input must be a permutation along dim (random ones are not)."""
    import torch

    g = desc.inputs[0]
    grad = torch.randn(g.shape, generator=gen, device=gen.device).to(g.dtype.torch).to(device)
    keys = torch.rand(g.shape, generator=gen, device=gen.device).to(device)
    return [grad, torch.argsort(keys, dim=desc.attr("dim"))]


set_bench_inputs("sort_backward", _bench_bw)

# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "sort_backward")
