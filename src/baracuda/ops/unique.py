"""Unique values and the most frequent value (issue 17): unique, unique_consecutive, mode.

Semantics are torch's:

* unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None): the distinct values in
  ascending order (``sorted=False`` gives the same: torch's CUDA kernel sorts too), the index of each input
  element's value among them (inverse, the input's shape) and how often each occurs (counts).  ``dim``: distinct
  slices along ``dim`` compared lexicographically (inverse and counts of length input.shape[dim]).
* unique_consecutive(input, return_inverse=False, return_counts=False, dim=None): one value per run of equal
  consecutive elements (slices along ``dim``), in input order.
* mode(input, dim=-1, keepdim=False) -> (values, indices): the most frequent value of each row along ``dim``; on a
  tie the smallest value; its index is that value's LAST position in the row (torch returns one of its positions,
  which one depending on its unstable sort: the last one for short rows; tests/sort/test_unique.py).  The gradient flows to that position (torch's value_selecting_reduction_backward).

The number of distinct values is the data's.  The ops return fixed shapes: ``values`` and ``counts`` as long as
the input (along ``dim``), filled from the start, zeros past the number of distinct values, and that number as a
fourth 0-d int64 output.  The drop-ins read it on the host (torch synchronizes the same way) and return torch's
shapes (views of the first ``num`` entries).  A NaN is distinct from every value (NaN != NaN); the Triton unique
kernels leave NaN inputs unspecified (see backends/triton/search/unique.py).
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec
from ._common import check_nonneg
from .indexing_index import VALUE_TYPES

__all__ = ["np_unique", "np_mode", "unique_shapes"]


def _rows(x, dim):
    """``x`` as (n, rest) slices along ``dim`` (None: every element its own slice)."""
    x = np.asarray(x)
    if dim is None:
        return x.reshape(-1, 1)
    m = np.moveaxis(x, dim, 0)
    return m.reshape(x.shape[dim], int(np.prod(m.shape[1:])))


def np_unique(x, dim, consecutive: bool):
    """(values padded to the input's length along ``dim``, inverse, counts padded, num): the reference."""
    x = np.asarray(x)
    r = _rows(x, dim)
    n = r.shape[0]
    if consecutive:
        new = np.ones(n, bool)
        if n:
            new[1:] = (r[1:] != r[:-1]).any(axis=1)
        inv = np.cumsum(new) - 1
        starts = np.flatnonzero(new)
    else:
        order = sorted(range(n), key=lambda i: tuple(r[i]))       # lexicographic (NaN-free samples)
        inv = np.zeros(n, np.int64)
        starts = []
        for k, i in enumerate(order):
            if k == 0 or (r[i] != r[order[k - 1]]).any():
                starts.append(i)
            inv[i] = len(starts) - 1
        starts = np.asarray(starts, np.int64)
    num = len(starts)
    counts = np.zeros(n, np.int64)
    np.add.at(counts, inv.astype(np.int64), 1)
    vals = np.zeros_like(r)
    vals[:num] = r[starts]
    if dim is None:
        vals = vals.reshape(-1)
        inv = inv.reshape(x.shape)
    else:
        moved = np.moveaxis(x, dim, 0).shape
        vals = np.moveaxis(vals.reshape(moved), 0, dim)
    return vals, inv.astype(np.int64), counts, np.int64(num)


def np_mode(x, dim):
    """(values, indices) of torch.mode along ``dim`` (keepdim=True shapes)."""
    x = np.asarray(x)
    xm = np.moveaxis(x.reshape(x.shape or (1,)), dim if x.ndim else 0, -1)
    rows = xm.reshape(-1, xm.shape[-1])
    vals = np.empty(rows.shape[0], x.dtype)
    idx = np.empty(rows.shape[0], np.int64)
    for i, row in enumerate(rows):
        u, c = np.unique(row, return_counts=True)
        vals[i] = u[np.argmax(c)]                    # the first maximum: the smallest of the most frequent
        idx[i] = np.flatnonzero(row == vals[i])[-1]  # its last position
    shape = xm.shape[:-1] + (1,)
    vals, idx = vals.reshape(shape), idx.reshape(shape)
    if not x.ndim:
        return vals.reshape(()), idx.reshape(())
    return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)


def unique_shapes(shape, dim):
    """(values, inverse, counts) shapes of the padded outputs."""
    if dim is None:
        n = int(np.prod(shape)) if shape else 1
        return (n,), tuple(shape), (n,)
    return tuple(shape), (shape[dim],), (shape[dim],)


# -- shape / dtype rules -------------------------------------------------------------------------------
def _input(op, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (input)", len(inputs))
    check_nonneg(op, ("input",), [inputs[0].shape])
    x = inputs[0]
    if x.dtype not in VALUE_TYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, VALUE_TYPES))}")
    return x


def _check_unique(op):
    def check(inputs, attrs):
        x = _input(op, inputs)
        dim = attrs["dim"]
        if dim is not None and len(x.shape) == 0:
            raise InvalidProblemError(op, "dim", "None for a 0-d input", dim)
        if dim is not None and 0 in x.shape and x.shape[dim] != 0:
            raise InvalidProblemError(op, "input", f"no zero-size dim other than dim {dim} (torch: there are 0 sized "
                                                   "dimensions, and they aren't selected)", tuple(x.shape))
        v, i, c = unique_shapes(tuple(x.shape), dim)
        return attrs, (TensorSpec(v, x.dtype), TensorSpec(i, DType.i64), TensorSpec(c, DType.i64),
                       TensorSpec((), DType.i64))
    return check


def _check_mode(inputs, attrs):
    op = "mode"
    x = _input(op, inputs)
    dim = attrs["dim"]
    if len(x.shape) and x.shape[dim] == 0:
        raise InvalidProblemError(op, "input", f"a non-zero size along dim {dim} (torch: Expected reduction dim "
                                               f"{dim} to have non-zero size)", tuple(x.shape))
    shape = tuple(1 if i == dim else s for i, s in enumerate(x.shape))
    if not attrs["keepdim"]:
        shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    return attrs, (TensorSpec(shape, x.dtype), TensorSpec(shape, DType.i64))


# -- backward -------------------------------------------------------------------------------------------------
def _g_mode(ctx, d, grads, s):
    g = grads[0]
    x = d.inputs[0]
    if g is None or not x.dtype.is_floating:
        return (None,)
    if not x.shape:
        return (g,)
    dim = d.attr("dim")
    kshape = tuple(1 if i == dim else n for i, n in enumerate(x.shape))
    z = ctx.op("full", shape=tuple(x.shape), value=0.0, dtype=x.dtype)
    return (ctx.op("scatter", z, ctx.reshape(s["out1"], kshape), ctx.reshape(g, kshape), dim=dim),)


# -- torch peers and drop-ins -------------------------------------------------------------------------
def _pad(t, n, dim):
    import torch

    if dim is None:
        return torch.cat([t, t.new_zeros(n - t.shape[0])])
    extra = list(t.shape)
    extra[dim] = n - t.shape[dim]
    return torch.cat([t, t.new_zeros(extra)], dim=dim)


def _peer_unique(op):
    def peer(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
        import torch

        kw = {"sorted": sorted} if op == "unique" else {}
        v, inv, c = getattr(torch, op)(x, return_inverse=True, return_counts=True, dim=dim, **kw)
        n = x.numel() if dim is None else x.shape[dim]
        if dim is None and x.dim() == 0:
            n = 1
        return (_pad(v.reshape(-1) if dim is None else v, n, dim), inv.reshape(x.shape if dim is None else (n,)),
                _pad(c, n, None), torch.tensor(c.numel()))
    return peer


def _peer_mode(x, dim=-1, keepdim=False):
    import torch

    # torch's index is one position of the mode value, which one depending on its (unstable) sort: 18 of 70 in a
    # row whose mode last occurs at 65 (2.13 CPU); ours is the last one, so the peer's index is that of torch's value
    r = torch.mode(x, dim, True)
    pos = torch.arange(x.shape[dim] if x.dim() else 1).reshape([-1] + [1] * (x.dim() - 1 - (dim % max(x.dim(), 1))))
    last = torch.where(x == r.values, pos, -1).amax(dim, keepdim=True) if x.dim() else torch.tensor(0)
    if not keepdim and x.dim():
        return r.values.squeeze(dim), last.squeeze(dim)
    return (r.values, last) if x.dim() else (r.values.reshape(()), last)


def _finisher(op, return_inverse, return_counts, dim):
    def finish(out):
        vals, inv, counts, num = out
        k = int(num.item())         # the host read torch makes too
        vals = vals[:k] if dim is None else vals.narrow(dim, 0, k)
        res = (vals,) + ((inv,) if return_inverse else ()) + ((counts[:k],) if return_counts else ())
        return res[0] if len(res) == 1 else res
    return finish


def _di_unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    return (input,), {"sorted": sorted, "return_inverse": return_inverse, "return_counts": return_counts,
                      "dim": dim}, _finisher("unique", return_inverse, return_counts, dim)


def _di_unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    return (input,), {"return_inverse": return_inverse, "return_counts": return_counts, "dim": dim}, \
        _finisher("unique_consecutive", return_inverse, return_counts, dim)


# -- samples, errors, workloads -------------------------------------------------------------------------
def _ints(rng, shape, hi=4):
    # small non-negative integers: repeats in every dtype (bool: 0 / 1), exact after the cast
    return rng.integers(0, hi, shape).astype(np.float64)


def _unique_samples(op):
    def samples(rng):
        for shape, dim in (((12,), None), ((3, 5), None), ((), None), ((0,), None), ((6, 3), 0), ((2, 7), 1),
                           ((0, 3), 0), ((3, 2, 4), 2), ((60,), None)):
            x = _ints(rng, shape, 2 if dim is not None else 5)
            if op == "unique_consecutive" and dim is None:      # runs of equal values
                n = x.size
                x = np.repeat(_ints(rng, (n,), 5), rng.integers(1, 4, n))[:n].reshape(shape)
            yield Sample((x,), {"dim": dim}, name=f"{shape}-dim{dim}", grad=False)
        # distinct values (the last sample: the generic plan-reuse test's redrawn normal inputs are distinct too)
        yield Sample((rng.permutation(20).astype(np.float64).reshape(4, 5),), {"dim": None}, name="distinct",
                     grad=False)
    return samples


def _mode_samples(rng):
    for shape, dim, keep in (((4, 9), -1, False), ((5, 6), 0, True), ((3, 2, 7), 1, False), ((), 0, False),
                             ((1, 1), 1, True), ((2, 70), 1, False)):
        yield Sample((_ints(rng, shape, 4),), {"dim": dim, "keepdim": keep}, name=f"{shape}-{dim}-{keep}", grad=False)
    # distinct values: the mode is the row's minimum, a differentiable function away from ties (finite differences
    # across a tie would move the mode to another value)
    for shape, dim in (((3, 5), 1), ((4, 3), 0)):
        yield Sample((rng.permutation(12 if shape == (4, 3) else 15).reshape(shape) * 0.5 + rng.random(shape) * 0.1,),
                     {"dim": dim, "keepdim": dim == 0}, name=f"distinct-{shape}-{dim}")


def _errors(op):
    def errors():
        f = ((3, 4), "f32")
        yield ErrorCase((((3,), "c64"),), {}, UnsupportedError, rf"{op}: argument 'input' has dtype c64", "complex")
        yield ErrorCase((f,), {"dim": 2}, InvalidProblemError, rf"{op}: argument 'dim'", "dim-range")
        if op == "mode":
            yield ErrorCase((((3, 0), "f32"),), {"dim": 1}, InvalidProblemError,
                            r"mode: argument 'input': expected a non-zero size along dim 1", "empty-row")
        else:
            yield ErrorCase((((4, 0), "f32"),), {"dim": 0}, InvalidProblemError, r"argument 'input': expected no "
                            "zero-size dim", "empty-other-dim")
            yield ErrorCase((((), "f32"),), {"dim": 0}, InvalidProblemError, rf"{op}: argument 'dim'", "0d-dim")
    return errors


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), 0


_DIM = Attr("dim", "axis", None, optional=True)
_FLAGS = (Attr("return_inverse", "bool", False), Attr("return_counts", "bool", False))
def _di_mode(input, dim=-1, keepdim=False, *, out=None):
    if out is not None:
        raise UnsupportedError("mode", "argument 'out' of the torch signature is not supported")
    return (input,), {"dim": dim, "keepdim": keepdim}


def _mode_result(out):
    import torch

    return torch.return_types.mode(out)


_DEFS = {
    "unique": dict(check=_check_unique("unique"), attrs=(Attr("sorted", "bool", True),) + _FLAGS + (_DIM,),
                   torch_peer=_peer_unique("unique"), dropin=_di_unique, samples=_unique_samples("unique"),
                   # the row: 16M int64
                   workloads=(Workload("unique-16M-i64", (((1 << 24,), DType.i64),), DType.i64),)),
    "unique_consecutive": dict(check=_check_unique("unique_consecutive"), attrs=_FLAGS + (_DIM,),
                               torch_peer=_peer_unique("unique_consecutive"), dropin=_di_unique_consecutive,
                               samples=_unique_samples("unique_consecutive"),
                               workloads=(Workload("unique_consecutive-16M-i64", (((1 << 24,), DType.i64),),
                                                   DType.i64),)),
    # torch.mode's drop-in is not published at its torch name (``baracuda.torch.mode`` is the routing mode: the
    # mirror keeps "mode" in its owned names); bt.mode() routes torch.mode / Tensor.mode to it (torch/_mode.py)
    "mode": dict(check=_check_mode, attrs=(Attr("dim", "axis", -1), Attr("keepdim", "bool", False)),
                 torch_peer=_peer_mode, grad=_g_mode, dropin=_di_mode, dropin_result=_mode_result,
                 saves=("out1",), differentiable=(0,), samples=_mode_samples,
                 workloads=(Workload("mode-4096x1024-f32", ((4096, 1024),), DType.f32),)),
}
UNIQUE_OPS = tuple(_DEFS)
for _name, _kw in _DEFS.items():
    register_spec(OpSpec(name=_name, family="sort", arg_names=("input",), dtypes=VALUE_TYPES,
                         torch_name=f"torch.{_name}", errors=_errors(_name), tol=lambda dt: (0.0, 0.0),
                         grad_tol=default_tol, cost=_cost, category="sort",
                         doc=f"torch.{_name}: see the module docstring of baracuda.ops.unique.", **_kw))
del _name, _kw

declare_rule_ops(__name__, "full", "scatter")
