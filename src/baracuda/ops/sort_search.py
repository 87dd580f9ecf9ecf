"""Binary search and membership (issue 17): searchsorted, bucketize, isin.

Semantics are torch's:

* searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None): for each value of
  ``input`` the index where it would be inserted into the innermost dim of ``sorted_sequence`` keeping it sorted.
  A 1-D sequence serves every value of ``input`` (any shape); an N-D sequence pairs its leading dims with the
  input's (``sequence.shape[:-1] == input.shape[:-1]``).  ``right`` (or ``side="right"``): the last position
  (upper bound), else the first (lower bound).  ``sorter``: int64 indices that sort each row of an unsorted
  sequence (the sequence is read as ``sequence[..., sorter]``).  The comparison is torch's own: the lower bound
  moves right while ``not (s >= v)``, the upper bound while ``not (s > v)`` (a NaN query lands past the end; a
  sequence's NaNs are at its end when it is sorted).  Output int64, int32 with ``out_int32``.  A Python number as
  ``input`` (torch's Scalar overload) is a 0-d operand.
* bucketize(input, boundaries, *, out_int32=False, right=False): searchsorted with a 1-D ``boundaries`` and the
  operands swapped.
* isin(elements, test_elements, *, assume_unique=False, invert=False): whether each element equals one of
  ``test_elements`` (any shape, flattened); ``invert`` negates.  NaN is in nothing (NaN != NaN).  Numbers are 0-d
  operands.

Operands of different dtypes are promoted to their common dtype by the drop-ins (torch does the same); the ops
take one dtype.  Nothing here is differentiable (integer / bool outputs).

GPU algorithm: searchsorted / bucketize: one binary search per value, ceil(log2(M + 1)) steps over the row (a
16M-query x 1M-boundary search reads the 4 MB of boundaries from L2); isin: each program compares a block of
elements against every test element, 64 at a time (O(N * M): torch picks this form too for small test sets;
a sort-based form for large test sets needs the sort family, see backends/triton/search).
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from ._common import check_nonneg, no_out
from .indexing_index import INT_VALUES

__all__ = ["SEARCH_TYPES", "np_search", "common_operands"]

# torch's CPU and CUDA kernels: every real dtype, not bool
SEARCH_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16) + INT_VALUES


def np_search(seq, vals, right: bool):
    """torch's binary search, vectorised: ``seq`` (B, M), ``vals`` (B, N) -> int64 (B, N).  The lower bound moves
    right while not (s >= v), the upper bound while not (s > v) (the NaN behaviour of torch's kernels)."""
    seq, vals = np.asarray(seq), np.asarray(vals)
    b, m = seq.shape
    lo = np.zeros(vals.shape, np.int64)
    hi = np.full(vals.shape, m, np.int64)
    rows = np.arange(b)[:, None]
    with np.errstate(invalid="ignore"):
        while np.any(lo < hi):
            act = lo < hi
            mid = (lo + hi) // 2
            s = seq[rows, np.minimum(mid, max(m - 1, 0))] if m else np.zeros(vals.shape)
            go = ~(s > vals) if right else ~(s >= vals)
            lo = np.where(act & go, mid + 1, lo)
            hi = np.where(act & ~go, mid, hi)
    return lo


# -- shape / dtype rules -------------------------------------------------------------------------------
def _operands(op, inputs, n, names):
    if len(inputs) not in n:
        raise InvalidProblemError(op, "inputs", f"{' or '.join(map(str, n))} operands ({', '.join(names)})",
                                  len(inputs))
    check_nonneg(op, names, [t.shape for t in inputs])


def _dtypes(op, a, b, names):
    if a.dtype not in SEARCH_TYPES:
        raise UnsupportedError(op, f"argument '{names[0]}' has dtype {a.dtype}; the op is defined for "
                                   f"{', '.join(map(str, SEARCH_TYPES))}")
    if b.dtype != a.dtype:
        raise DTypeMismatchError(op, names[1], f"{a.dtype} (the {names[0]}'s; the drop-in promotes)", str(b.dtype))


def _right(op, attrs):
    side, right = attrs.get("side"), attrs["right"]
    if side is not None:
        if side not in ("left", "right"):
            raise InvalidProblemError(op, "side", "'left' or 'right'", repr(side))
        if right and side == "left":
            raise InvalidProblemError(op, "side", "side='right' when right=True (torch: side and right can't be "
                                                  "set to opposites)", repr(side))
        right = side == "right"
    return right


def _check_searchsorted(inputs, attrs):
    op = "searchsorted"
    _operands(op, inputs, (2, 3), ("sorted_sequence", "input", "sorter"))
    seq, x = inputs[:2]
    _dtypes(op, seq, x, ("sorted_sequence", "input"))
    if len(seq.shape) == 0:
        raise InvalidProblemError(op, "sorted_sequence", "a tensor of at least 1 dim", "a 0-d tensor")
    if len(seq.shape) > 1 and tuple(seq.shape[:-1]) != tuple(x.shape[:-1]):
        raise InvalidProblemError(op, "input", f"leading dims {tuple(seq.shape[:-1])} (the sorted_sequence's, "
                                               "or a 1-D sorted_sequence)", tuple(x.shape))
    if len(inputs) == 3:
        s = inputs[2]
        if s.dtype != DType.i64:
            raise DTypeMismatchError(op, "sorter", "i64", str(s.dtype))
        if tuple(s.shape) != tuple(seq.shape):
            raise InvalidProblemError(op, "sorter", f"the sorted_sequence's shape {tuple(seq.shape)}", tuple(s.shape))
    right = _right(op, attrs)
    out = DType.i32 if attrs["out_int32"] else DType.i64
    return {"out_int32": attrs["out_int32"], "right": right, "side": None}, (TensorSpec(x.shape, out),)


def _check_bucketize(inputs, attrs):
    op = "bucketize"
    _operands(op, inputs, (2,), ("input", "boundaries"))
    x, bd = inputs
    _dtypes(op, x, bd, ("input", "boundaries"))
    if len(bd.shape) != 1:
        raise InvalidProblemError(op, "boundaries", "a 1-D tensor", f"a tensor of shape {tuple(bd.shape)}")
    out = DType.i32 if attrs["out_int32"] else DType.i64
    return attrs, (TensorSpec(x.shape, out),)


def _check_isin(inputs, attrs):
    op = "isin"
    _operands(op, inputs, (2,), ("elements", "test_elements"))
    x, t = inputs
    _dtypes(op, x, t, ("elements", "test_elements"))
    return attrs, (TensorSpec(x.shape, DType.bool),)


# -- torch peers and drop-ins -------------------------------------------------------------------------
def _peer_searchsorted(seq, x, *sorter, out_int32=False, right=False, side=None):
    import torch

    return torch.searchsorted(seq, x, out_int32=out_int32, right=right, sorter=sorter[0] if sorter else None)


def _peer_bucketize(x, bd, out_int32=False, right=False):
    import torch

    return torch.bucketize(x, bd, out_int32=out_int32, right=right)


def _peer_isin(x, t, assume_unique=False, invert=False):
    import torch

    return torch.isin(x, t, assume_unique=assume_unique, invert=invert)


def common_operands(op, a, b):
    """``a`` and ``b`` as tensors of their common dtype (torch's promotion; a number becomes a 0-d tensor on the
    other operand's device)."""
    import torch

    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        raise UnsupportedError(op, "at least one operand must be a tensor")
    dev = a.device if isinstance(a, torch.Tensor) else b.device
    dt = torch.result_type(a, b)
    a = a.to(dt) if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=dt, device=dev)
    b = b.to(dt) if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=dt, device=dev)
    return a, b


def _di_searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, out=None, sorter=None):
    no_out("searchsorted", out)
    seq, x = common_operands("searchsorted", sorted_sequence, input)
    ops = (seq, x) if sorter is None else (seq, x, sorter)
    return ops, {"out_int32": out_int32, "right": right, "side": side}


def _di_bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    no_out("bucketize", out)
    x, bd = common_operands("bucketize", input, boundaries)
    return (x, bd), {"out_int32": out_int32, "right": right}


def _di_isin(elements, test_elements, *, assume_unique=False, invert=False, out=None):
    no_out("isin", out)
    x, t = common_operands("isin", elements, test_elements)
    return (x, t), {"assume_unique": assume_unique, "invert": invert}


# -- samples, errors, workloads -------------------------------------------------------------------------
def _sorted(rng, shape):
    # non-negative integer values: exact in every dtype (u8 included), so the cast keeps the order
    return np.sort(np.clip(np.round(rng.standard_normal(shape) * 4) + 12, 0, None), axis=-1)


def _queries(rng, shape):
    # integers-valued draws hit the sequence's values exactly (left vs right matters), in every dtype
    return np.clip(np.round(rng.standard_normal(shape) * 5) + 12, 0, None)


def _search_samples(op):
    def samples(rng):
        cases = (((9,), (4, 5)), ((1,), (3,)), ((3, 7), (3, 5)), ((2, 2, 6), (2, 2, 4)), ((0,), (3,)),
                 ((5,), (0, 2)), ((64,), (40,)), ((6,), ()))
        for i, (ss, qs) in enumerate(cases):
            if op == "bucketize" and len(ss) != 1:
                continue
            seq, q = _sorted(rng, ss), _queries(rng, qs)
            for right in (False, True):
                a = {"right": right, "out_int32": bool(i % 2)}
                if op == "bucketize":
                    yield Sample((q, seq), a, name=f"{qs}-in-{ss}-r{right}", grad=False)
                else:
                    yield Sample((seq, q), a, name=f"{ss}-{qs}-r{right}", grad=False)
        if op == "searchsorted":
            perm = np.stack([rng.permutation(7) for _ in range(3)])
            seq = _sorted(rng, (3, 7))
            shuffled = np.empty_like(seq)
            np.put_along_axis(shuffled, perm, seq, axis=-1)
            yield Sample((shuffled, _queries(rng, (3, 4)), perm.astype(np.int64)), {"side": "right"},
                         name="sorter", grad=False)
    return samples


def _isin_samples(rng):
    for es, ts in (((3, 5), (7,)), ((20,), (3, 4)), ((2, 3, 4), ()), ((0,), (3,)), ((4,), (0,)), ((9, 9), (70,))):
        x, t = np.abs(np.round(rng.standard_normal(es) * 3)), np.abs(np.round(rng.standard_normal(ts) * 3))
        for inv in (False, True):
            yield Sample((x, t), {"invert": inv}, name=f"{es}-{ts}-inv{inv}", grad=False)


def _errors(op):
    def errors():
        f, i = ((3, 4), "f32"), ((3, 4), "i64")
        if op == "searchsorted":
            yield ErrorCase((((4,), "f32"), ((3,), "f64")), {}, DTypeMismatchError, r"searchsorted: argument 'input'",
                            "dtype")
            yield ErrorCase((((2, 4), "f32"), ((3, 2), "f32")), {}, InvalidProblemError,
                            r"searchsorted: argument 'input': expected leading dims \(2,\)", "leading-dims")
            yield ErrorCase((((), "f32"), ((3,), "f32")), {}, InvalidProblemError, r"argument 'sorted_sequence'",
                            "0-d")
            yield ErrorCase((((4,), "f32"), ((3,), "f32")), {"side": "up"}, InvalidProblemError,
                            r"argument 'side'", "side")
            yield ErrorCase((((4,), "f32"), ((3,), "f32")), {"side": "left", "right": True}, InvalidProblemError,
                            r"argument 'side'", "side-right")
            yield ErrorCase((((4,), "f32"), ((3,), "f32"), ((4,), "i32")), {}, DTypeMismatchError,
                            r"argument 'sorter': expected dtype i64", "sorter-dtype")
            yield ErrorCase((((4,), "f32"), ((3,), "f32"), ((5,), "i64")), {}, InvalidProblemError,
                            r"argument 'sorter'", "sorter-shape")
            yield ErrorCase((((4,), "bool"), ((3,), "bool")), {}, UnsupportedError, r"dtype bool", "bool")
        elif op == "bucketize":
            yield ErrorCase((f, ((2, 3), "f32")), {}, InvalidProblemError, r"bucketize: argument 'boundaries': "
                            "expected a 1-D tensor", "2d-boundaries")
            yield ErrorCase((f, ((3,), "i64")), {}, DTypeMismatchError, r"argument 'boundaries'", "dtype")
        else:
            yield ErrorCase((f, i), {}, DTypeMismatchError, r"isin: argument 'test_elements'", "dtype")
            yield ErrorCase((((3,), "c64"), ((3,), "c64")), {}, UnsupportedError, r"dtype c64", "complex")
    return errors


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), 0


_SEARCH_WL = (
    # the row: 16M queries into 1M sorted boundaries (4 MB of boundaries: L2-resident on the H100)
    Workload("searchsorted-1M-boundaries-16M-queries-f32", ((1 << 20,), (1 << 24,)), DType.f32),
)
_OUT_INT32 = Attr("out_int32", "bool", False)
_RIGHT = Attr("right", "bool", False)

_DEFS = {
    "searchsorted": dict(arg_names=("sorted_sequence", "input", "sorter"), check=_check_searchsorted,
                         attrs=(_OUT_INT32, _RIGHT, Attr("side", "str", None, optional=True)),
                         torch_peer=_peer_searchsorted, dropin=_di_searchsorted,
                         samples=_search_samples("searchsorted"), workloads=_SEARCH_WL),
    "bucketize": dict(arg_names=("input", "boundaries"), check=_check_bucketize, attrs=(_OUT_INT32, _RIGHT),
                      torch_peer=_peer_bucketize, dropin=_di_bucketize, samples=_search_samples("bucketize"),
                      workloads=(Workload("bucketize-16M-into-1M-f32", ((1 << 24,), (1 << 20,)), DType.f32),)),
    "isin": dict(arg_names=("elements", "test_elements"), check=_check_isin,
                 attrs=(Attr("assume_unique", "bool", False), Attr("invert", "bool", False)),
                 torch_peer=_peer_isin, dropin=_di_isin, samples=_isin_samples,
                 workloads=(Workload("isin-16M-of-256-i64", ((1 << 24,), (256,)), DType.i64),)),
}
SEARCH_OPS = tuple(_DEFS)
for _name, _kw in _DEFS.items():
    register_spec(OpSpec(name=_name, family="sort", dtypes=SEARCH_TYPES, torch_name=f"torch.{_name}",
                         errors=_errors(_name), tol=lambda dt: (0.0, 0.0), cost=_cost, category="sort",
                         doc=f"torch.{_name}: see the module docstring of baracuda.ops.sort_search.", **_kw))
del _name, _kw


def _bench_search(desc, device, gen):
    import torch

    a, b = desc.inputs
    seq_first = desc.op == "searchsorted"
    seq, q = (a, b) if seq_first else (b, a)
    # inside the samples' domains (non-negative integers around 12): a sorted sequence, queries across it
    s = (6 + 8 * torch.rand(seq.shape, device=device, generator=gen)).sort(dim=-1).values.to(seq.dtype.torch)
    v = (6 + 8 * torch.rand(q.shape, device=device, generator=gen)).to(q.dtype.torch)
    return [s, v] if seq_first else [v, s]


set_bench_inputs("searchsorted", _bench_search)
set_bench_inputs("bucketize", _bench_search)
