"""Semantics of the gather / scatter forms the generic suite cannot express: out-of-range indices (the named error
on every backend, nothing written outside the valid targets), the gradients of every scatter_reduce mode against
torch.autograd (ties of amax / amin split evenly, zeros of prod), a src larger than its index, one_hot's
num_classes=-1, the in-place Tensor forms under bt.mode(), and what the plans promise about determinism.

Triton runs under TRITON_INTERPRET=1 on the CPU (tiny shapes) and natively on a GPU."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing import backends_for, test_device  # noqa: E402

DEV = test_device()
DT = "cuda" if DEV.type == "cuda" else "cpu"
BACKENDS = [b for b in (bc.Backend.REFERENCE, bc.Backend.TRITON) if b in backends_for("gather", DEV)]
REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _plan(desc, backend, **kw):
    return bc.Plan.select(desc, DEV, bc.PlanPreference(prefer=(backend,), **kw))


def _t(a):
    from baracuda._core.tensors import to_torch

    return to_torch(np.asarray(a), DEV)


def _rng():
    return np.random.default_rng(17)


# -- out-of-range indices -----------------------------------------------------------------------------------------
def _oob_cases(rng):
    """(op, arrays, attrs, bad value, expected range text, arg) with exactly one bad index."""
    x = rng.standard_normal((3, 4))
    i = rng.integers(0, 3, (2, 4))
    i[1, 2] = 3                                              # one past the end of dim 0
    yield "gather", (x, i), {"dim": 0}, 3, r"\[0, 3\)", "index"
    j = rng.integers(0, 4, (3, 2))
    j[0, 1] = -1                                             # gather does not wrap
    yield "gather", (x, j.astype(np.int32)), {"dim": 1}, -1, r"\[0, 4\)", "index"
    src = rng.standard_normal((2, 4))
    yield "scatter", (x, i, src), {"dim": 0}, 3, r"\[0, 3\)", "index"
    yield "scatter", (x, i), {"dim": 0, "value": 2.0}, 3, r"\[0, 3\)", "index"
    yield "scatter_add", (x, i, src), {"dim": 0}, 3, r"\[0, 3\)", "index"
    for r in REDUCES:
        yield "scatter_reduce", (x, i, src), {"dim": 0, "reduce": r, "include_self": r != "sum"}, 3, r"\[0, 3\)", "index"
    k = np.array([0, 5, -12, -13, 2])                        # -13: below -numel
    yield "take", (x, k), {}, -13, r"\[-12, 12\)", "index"
    t = rng.integers(-3, 3, (2, 4))
    t[0, 0] = -4
    yield "take_along_dim", (x, t), {"dim": 0}, -4, r"\[-3, 3\)", "indices"
    yield "take_along_dim", (x, np.array([1, 12])), {"dim": None}, 12, r"\[0, 12\)", "indices"
    p = np.array([1, 12, 3])
    yield "put", (x, p, rng.standard_normal(3)), {}, 12, r"\[-12, 12\)", "index"
    yield "put", (x, p, rng.standard_normal(3)), {"accumulate": True}, 12, r"\[-12, 12\)", "index"
    yield "one_hot", (np.array([0, 2, 5, 1]),), {"num_classes": 4}, 5, r"\[0, 4\)", "tensor"


_CASES = list(_oob_cases(_rng()))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("case", range(len(_CASES)), ids=lambda k: f"{_CASES[k][0]}-{k}")
def test_out_of_range_index_raises_the_named_error(case, backend):
    op, arrays, attrs, bad, rng_text, arg = _CASES[case]
    arrays = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays]
    desc = bc.Descriptor.like(op, *arrays, **attrs)
    plan = _plan(desc, backend, check_values="sync")
    with pytest.raises(bc.InvalidProblemError, match=rf"{op}: argument '{arg}': expected indices in {rng_text}.*"
                                                       rf"got index {bad}"):
        plan.run(*[_t(a) for a in arrays])
        bc.check_errors()


def _valid_only(op, arrays, attrs):
    """The expected result of a Triton run with value checks off: the op over the valid indices only (a bad
    gathered element reads as 0; a bad scattered one touches nothing)."""
    from baracuda.testing import reference_f64

    arrays = [np.array(a) for a in arrays]
    if op in ("gather", "take_along_dim", "take"):
        x, idx = arrays
        dim = attrs.get("dim")
        n = x.size if dim is None else x.shape[dim]
        lo = -n if (op == "take" or (op == "take_along_dim" and dim is not None)) else 0
        bad = (idx < lo) | (idx >= n)
        ok_idx = np.where(bad, 0, idx)
        want = reference_f64(bc.Descriptor.like(op, x, ok_idx, **attrs), [x, ok_idx])[0]
        return np.where(bad.reshape(want.shape) if want.shape == bad.shape else bad, 0.0, want)
    if op == "one_hot":
        t = arrays[0]
        c = attrs["num_classes"]
        bad = (t < 0) | (t >= c)
        return np.where(bad[..., None], 0, np.eye(c, dtype=np.int64)[np.where(bad, 0, t)])
    # scatter forms: drop the bad element (a take-free way: redirect it onto a target whose value it cannot change
    # is reduction-specific, so the expectation is built by hand from the valid positions)
    x, idx = arrays[:2]
    n = x.size if op == "put" else x.shape[attrs["dim"]]
    lo = -n if op == "put" else 0
    keep = (idx >= lo) & (idx < n)
    if op == "put":
        src = arrays[2].reshape(-1)
        k = keep.reshape(-1)
        sub = bc.Descriptor.like(op, x, idx.reshape(-1)[k], src[k], **attrs)
        return reference_f64(sub, [x, idx.reshape(-1)[k], src[k]])[0]
    # a dim form: row 1 of the index holds the bad element; scatter the rows without it, column by column
    dim = attrs["dim"]
    out = np.array(x, np.float64)
    src = arrays[2] if len(arrays) == 3 else np.full(idx.shape, attrs["value"])
    for col in range(idx.shape[1]):
        rows = [r for r in range(idx.shape[0]) if keep[r, col]]
        sub_attrs = dict(attrs)
        sub_attrs.pop("value", None)
        xc = out[:, col:col + 1].copy()
        ic = idx[rows, col:col + 1]
        sc = np.asarray(src[rows, col:col + 1], np.float64)
        if ic.size:
            d = bc.Descriptor.like(op if op != "scatter" else "scatter", xc, ic, sc, **sub_attrs)
            out[:, col:col + 1] = reference_f64(d, [xc, ic, sc])[0]
    assert dim == 0
    return out


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("case", range(len(_CASES)), ids=lambda k: f"{_CASES[k][0]}-{k}")
def test_out_of_range_index_never_touches_other_elements(case):
    """With value checks off the Triton result is the op over the valid indices: a bad gathered element reads 0,
    a bad scattered one writes nothing (and no out-of-bounds address is ever formed: the index is clamped)."""
    op, arrays, attrs, *_ = _CASES[case]
    arrays = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    desc = bc.Descriptor.like(op, *arrays, **attrs)
    got = _plan(desc, bc.Backend.TRITON, check_values="off").run(*[_t(a) for a in arrays])
    want = _valid_only(op, arrays, attrs)
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)


def test_deferred_check_reports_at_the_next_call():
    """The default mode: on the GPU the call returns and the next one (or bc.check_errors) raises; off the GPU
    the flag is read at once."""
    x = torch.randn(3, 4, device=DT)
    i = torch.tensor([[0, 1, 2, 7]], device=DT)
    with bt.preference(bc.PlanPreference(prefer=(bc.Backend.TRITON,) if DT == "cuda" else ())):
        with pytest.raises(bc.InvalidProblemError, match=r"gather: argument 'index'.*got index 7"):
            bt.gather(x, 0, i)
            bc.check_errors()


# -- gradients: every scatter_reduce mode against torch.autograd ---------------------------------------------------
def _reduce_problem(reduce, ties):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64)
    src = torch.randn(6, 3, generator=g, dtype=torch.float64)
    idx = torch.randint(0, 4, (6, 3), generator=g)
    if ties:      # equal values: amax / amin split their gradient; a zero in prod (one, and two at one target)
        if reduce in ("amax", "amin"):
            src[1, 0] = src[0, 0] = x[2, 0] = 5.0 if reduce == "amax" else -5.0
            idx[0, 0] = idx[1, 0] = 2
        elif reduce == "prod":
            src[0, 1] = 0.0
            src[3, 2] = src[4, 2] = 0.0
            idx[3, 2] = idx[4, 2] = 1
            x[0, 0] = 0.0
    return x, idx, src


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_grad_matches_torch(reduce, include_self, ties):
    x, idx, src = _reduce_problem(reduce, ties)
    xa, sa = x.clone().requires_grad_(True), src.clone().requires_grad_(True)
    out = xa.scatter_reduce(0, idx, sa, reduce, include_self=include_self)
    go = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    want = torch.autograd.grad(out, (xa, sa), go)
    xb, sb = x.clone().requires_grad_(True), src.clone().requires_grad_(True)
    with bt.preference(bc.PlanPreference(prefer=(bc.Backend.REFERENCE,))):
        got_out = bt.scatter_reduce(xb, 0, idx, sb, reduce, include_self=include_self)
        got = torch.autograd.grad(got_out, (xb, sb), go)
    torch.testing.assert_close(got_out, out.detach(), rtol=1e-12, atol=1e-12)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_triton_backward_f32(reduce):
    """The backward composed on the Triton backend (f32) vs torch's float64 autograd (f32 tolerance)."""
    x, idx, src = _reduce_problem(reduce, True)
    xa, sa = x.clone().requires_grad_(True), src.clone().requires_grad_(True)
    out = xa.scatter_reduce(0, idx, sa, reduce, include_self=False)
    go = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    want = torch.autograd.grad(out, (xa, sa), go)
    xb = x.float().to(DT).requires_grad_(True)
    sb = src.float().to(DT).requires_grad_(True)
    with bt.preference(bc.PlanPreference(prefer=(bc.Backend.TRITON,))):
        y = bt.scatter_reduce(xb, 0, idx.to(DT), sb, reduce, include_self=False)
        got = torch.autograd.grad(y, (xb, sb), go.float().to(DT))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.double().cpu(), w, rtol=2e-5, atol=2e-5)   # f32: a few roundings


@pytest.mark.parametrize("op", ["scatter", "scatter_add", "scatter_reduce"])
def test_src_larger_than_index_gradient(op):
    """torch's autograd refuses a src larger than its index (its gather returns the index's shape); ours pads the
    gradient with zeros (the unscattered tail of src does not reach the output), checked by finite differences."""
    from baracuda.testing import finite_difference_grads, reference_f64

    rng = _rng()
    x, src = rng.standard_normal((3, 4)), rng.standard_normal((3, 5))
    idx = np.stack([rng.permutation(4)[:2] for _ in range(3)])     # distinct targets per row (an assignment)
    attrs = {"dim": 1} if op != "scatter_reduce" else {"dim": 1, "reduce": "mean"}
    desc = bc.Descriptor.like(op, x, idx, src, **attrs)
    bw = bc.BackwardPlan.select(desc, "cpu")
    go = rng.standard_normal((3, 4))
    out = reference_f64(desc, [x, idx, src])[0]
    named = {"input": x, "index": idx, "src": src, "out": out}
    got = bw.run(go, **{n: named[n] for n in bw.saves})
    want = finite_difference_grads(desc, [x, idx, src], [go])
    np.testing.assert_allclose(got[0], want[0], atol=1e-6)
    np.testing.assert_allclose(got[2], want[2], atol=1e-6)
    assert np.all(got[2][:, 2:] == 0)


# -- one_hot, drop-ins, in-place forms --------------------------------------------------------------------------
def test_one_hot_infers_num_classes_on_the_host():
    t = torch.tensor([[0, 3], [2, 1]], device=DT)
    torch.testing.assert_close(bt.nn.functional.one_hot(t), torch.nn.functional.one_hot(t.cpu()).to(DT))
    with pytest.raises(bc.InvalidProblemError, match="one_hot: argument 'num_classes'.*empty"):
        bt.nn.functional.one_hot(torch.zeros(0, dtype=torch.long, device=DT))


def test_inplace_tensor_forms_under_mode():
    """Tensor.scatter_ / scatter_add_ / scatter_reduce_ / put_ route through the drop-ins under bt.mode() and
    write into self, as torch's."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, generator=g).to(DT)
    idx = torch.tensor([[0, 1, 2], [3, 0, 1]], device=DT)
    src = torch.randn(2, 3, generator=g).to(DT)
    want = [x.clone().scatter_(0, idx, src), x.clone().scatter_add_(0, idx, src),
            x.clone().scatter_reduce_(0, idx, src, "amax", include_self=False),
            x.clone().put_(torch.tensor([0, -1], device=DT), src[0, :2], accumulate=True),
            x.clone().scatter_(0, idx, 1.5)]
    with bt.mode():
        got = [x.clone(), x.clone(), x.clone(), x.clone(), x.clone()]
        got[0].scatter_(0, idx, src)
        got[1].scatter_add_(0, idx, src)
        got[2].scatter_reduce_(0, idx, src, "amax", include_self=False)
        got[3].put_(torch.tensor([0, -1], device=DT), src[0, :2], accumulate=True)
        got[4].scatter_(0, idx, 1.5)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


# -- what the plans promise ---------------------------------------------------------------------------------------
@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
def test_precision_says_where_atomics_make_results_order_dependent():
    def prec(op, dt, **attrs):
        extra = (((8, 4), dt),) if op != "gather" else ()
        d = bc.Descriptor.make(op, ((5, 4), dt), ((8, 4), "i64"), *extra, dim=0, **attrs)
        return _plan(d, bc.Backend.TRITON).precision

    assert prec("gather", "bf16").deterministic
    assert not prec("scatter_add", "f32").deterministic
    assert not prec("scatter_reduce", "bf16", reduce="prod").deterministic
    assert prec("scatter_add", "i32").deterministic                 # integer sums: exact in any order
    assert prec("scatter_reduce", "f32", reduce="amax").deterministic
    d = bc.Descriptor.make("scatter_add", ((5, 4), "f32"), ((8, 4), "i64"), ((8, 4), "f32"), dim=0)
    p = _plan(d, bc.Backend.TRITON, require_deterministic=True)    # the sequential kernel: no atomics
    assert p.precision.deterministic and p.precision.bit_stable and "sequential" in str(p.sku)


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("op,attrs", [("scatter_add", {}), ("scatter", {}), ("scatter_reduce", {"reduce": "prod"}),
                                      ("scatter_reduce", {"reduce": "mean", "include_self": False}),
                                      ("put", {"accumulate": True}), ("put", {})])
def test_deterministic_preference_walks_in_order(op, attrs):
    """require_deterministic: the sequential kernel, bit-identical across runs; duplicates of an assignment keep
    the last value (torch's CPU order, the reference's), sums equal the reference's to f32 rounding."""
    from baracuda.testing import assert_close, reference_f64

    rng = _rng()
    x = rng.standard_normal((6, 5)).astype(np.float32)
    if op == "put":
        idx, src = rng.integers(-30, 30, (40,)), rng.standard_normal(40).astype(np.float32)
    else:
        idx, src = rng.integers(0, 6, (9, 4)), (rng.standard_normal((9, 4)) * 0.5 + 1).astype(np.float32)
        attrs = dict(attrs, dim=0)
    desc = bc.Descriptor.like(op, x, idx, src, **attrs)
    p = _plan(desc, bc.Backend.TRITON, require_deterministic=True)
    a, b = p.run(_t(x), _t(idx), _t(src)), p.run(_t(x), _t(idx), _t(src))
    assert torch.equal(a, b)
    assign = op == "scatter" or (op == "put" and not attrs.get("accumulate"))
    assert_close(a.cpu(), reference_f64(desc, [x, idx, src])[0], 0 if assign else 1e-5, 0 if assign else 1e-5, op)


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
def test_gather_backward_deterministic_option():
    """The gather backward's scatter_add follows the preference: atomics by default, the sequential walk under
    require_deterministic (bit-identical gradients run to run)."""
    x = torch.randn(7, 6, dtype=torch.float32, device=DT, requires_grad=True)
    i = torch.randint(0, 7, (20, 6), device=DT)
    go = torch.randn(20, 6, device=DT)
    d = bc.Descriptor.like("gather", x.detach(), i, dim=0)
    pref = bc.PlanPreference(prefer=(bc.Backend.TRITON,), require_deterministic=True)
    bw = bc.BackwardPlan.select(d, DEV, pref)
    assert bw.precision.deterministic
    g1 = bw.run(go, index=i)[0]
    g2 = bw.run(go, index=i)[0]
    assert torch.equal(g1, g2)
    want = torch.zeros(7, 6).scatter_add_(0, i.cpu(), go.cpu())
    torch.testing.assert_close(g1.cpu(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("dt", ["bf16", "f16", "i8", "bool"])
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_narrow_dtypes_with_duplicates(reduce, dt):
    """Many values landing on few targets (the atomics / CAS loops contend) through a transposed input and an
    int32 index along dim 1: the Triton result equals the reference's (floats: one rounding of the dtype)."""
    from baracuda.testing import cast, reference_f64

    if dt == "bool" and reduce == "mean":
        pytest.skip("torch has no bool mean")
    rng = _rng()
    scale, shift = (0.3, 1.0) if reduce == "prod" else (3.0, 0.0)    # products of 40 values near 1: no overflow
    x = cast(rng.standard_normal((5, 3)) * scale + shift, bc.as_dtype(dt))
    src = cast(rng.standard_normal((5, 40)) * scale + shift, bc.as_dtype(dt))
    idx = rng.integers(0, 3, (5, 40)).astype(np.int32)
    desc = bc.Descriptor.like("scatter_reduce", x, idx, src, dim=1, reduce=reduce, include_self=False)
    want = reference_f64(desc, [x, idx, src])[0]
    xt = _t(np.ascontiguousarray(x.T)).T             # a transposed (non-contiguous) input
    got = _plan(desc, bc.Backend.TRITON).run(xt, _t(idx), _t(src))
    tol = {"bf16": 1.6e-2, "f16": 1e-2}.get(dt, 0.0)   # prod / mean of 40 values: one rounding of the result
    from baracuda.testing import assert_close
    assert_close(got.cpu() if got.dtype != torch.bfloat16 else got.float().cpu(), want, tol, tol, f"{reduce} {dt}")


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32, torch.int64, torch.bool])
def test_gather_of_whole_rows_expanded_index(dt):
    """An index expanded along the row (stride 0: one index load per row, contiguous row accesses) equals torch's
    gather; a bad row index zeroes that output row only and raises."""
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(9, 40, generator=g) * 4).to(dt).to(DT)
    i = torch.randint(0, 9, (6, 1), generator=g).to(DT).expand(6, 40)
    d = bc.Descriptor.like("gather", x, i, dim=0)
    p = _plan(d, bc.Backend.TRITON, check_values="off")
    assert torch.equal(p.run(x, i), x.gather(0, i))
    bad = i.clone()[:, :1]
    bad[2] = 9
    got = p.run(x, bad.expand(6, 40))
    assert not got[2].any() and torch.equal(got[[0, 1, 3, 4, 5]], x.gather(0, i)[[0, 1, 3, 4, 5]])
    with pytest.raises(bc.InvalidProblemError, match="got index 9"):
        _plan(d, bc.Backend.TRITON, check_values="sync").run(x, bad.expand(6, 40))


_ROW_FORMS = [("scatter_add", {}), ("scatter", {}), ("scatter_reduce", {"reduce": "sum", "include_self": True}),
              ("scatter_reduce", {"reduce": "mean", "include_self": True}),
              ("scatter_reduce", {"reduce": "prod", "include_self": False}),
              ("scatter_reduce", {"reduce": "amax", "include_self": True}),
              ("scatter_reduce", {"reduce": "amin", "include_self": False})]


@pytest.mark.skipif(bc.Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("dt", ["bf16", "f32", "i32", "bool"])
@pytest.mark.parametrize("op,attrs", _ROW_FORMS, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_of_whole_rows_runs_the_row_kernels(op, attrs, dt, dim):
    """A row index (one index per position along dim, broadcast over the other dims: gather's backward) runs the
    row kernels -- index_add's atomic rows for an f32 sum, the sorted-segment fold otherwise: the same values as the
    reference for every mode (duplicates, untouched rows, a source larger than the index, a broadcast-zero input),
    bit-identical run to run where the plan says deterministic, and a bad row index raises."""
    from baracuda.testing import assert_close, cast, reference_f64

    if dt == "bool" and "mean" in attrs.values():
        pytest.skip("torch has no bool mean (the op refuses it: an error case of its own)")
    rng = _rng()
    shape, n_idx = ((7, 5), 12) if dim == 0 else ((5, 7), 12)
    scale, shift = (0.3, 1.0) if attrs.get("reduce") == "prod" else (3.0, 0.0)
    x = cast(rng.standard_normal(shape) * scale + shift, bc.as_dtype(dt))
    ishape = (n_idx, 5) if dim == 0 else (5, n_idx)
    sshape = (n_idx + 2, 6) if dim == 0 else (6, n_idx + 3)
    src = cast(rng.standard_normal(sshape) * scale + shift, bc.as_dtype(dt))
    rows = rng.integers(0, 4, n_idx)          # duplicates; rows 4..6 untouched
    col = rows[:, None] if dim == 0 else rows[None, :]
    idx = np.broadcast_to(col, ishape)
    desc = bc.Descriptor.like(op, x, idx.copy(), src, dim=dim, **attrs)
    want = reference_f64(desc, [x, idx.copy(), src])[0]
    it = _t(np.ascontiguousarray(col)).expand(ishape)      # stride 0 off dim
    p = _plan(desc, bc.Backend.TRITON, check_values="sync")
    from baracuda.backends.triton.indexing import scatter as S

    kinds, apply = [], S.apply_rows
    S.apply_rows = lambda kind, *a: (kinds.append(kind), apply(kind, *a))[1]
    try:
        got = p.run(_t(x), it, _t(src))
    finally:
        S.apply_rows = apply
    atomic = dt == "f32" and op != "scatter" and attrs.get("reduce", "sum") == "sum"
    reduce = None if op == "scatter" else attrs.get("reduce", "sum")
    int_mean = reduce == "mean" and dt in ("i32", "bool")     # (torch's wrapping narrow sum: the atomic path)
    assert kinds == ([] if int_mean else ["add" if atomic else S._SEGMENTS[reduce]]), kinds
    if not atomic:
        assert torch.equal(got, p.run(_t(x), it, _t(src)))
    tol = {"bf16": 1.6e-2}.get(dt, 1e-6 if dt == "f32" else 0.0)
    assert_close(got.float().cpu() if got.dtype == torch.bfloat16 else got.cpu(), want, tol, tol, f"{op} {attrs}")
    zero = torch.zeros((), dtype=got.dtype, device=DT).expand(shape)
    z_want = reference_f64(desc, [np.zeros(shape, x.dtype), idx.copy(), src])[0]
    zg = p.run(zero, it, _t(src))
    assert_close(zg.float().cpu() if zg.dtype == torch.bfloat16 else zg.cpu(), z_want, tol, tol, "broadcast zero")
    bad = _t(np.ascontiguousarray(col)).clone()
    bad.view(-1)[3] = shape[dim]
    with pytest.raises(bc.InvalidProblemError, match=f"got index {shape[dim]}"):
        p.run(_t(x), bad.expand(ishape), _t(src))
