"""Semantics of lax_gather / lax_scatter (JAX's general gather / scatter) the generic suite cannot express.

JAX is not installed here, so the semantic peers are (a) the torch forms the dimension numbers specialise --
index_select, torch.gather, take, index_add, index_copy, scatter_add, scatter_reduce -- and (b) hand-derived
windows for the clip / fill modes and JAX's default fill values.  Triton runs under TRITON_INTERPRET=1 on the CPU
(tiny shapes) and natively on a GPU; the offline sm_90 compile checks every kernel mode for spills."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda.testing import backends_for, test_device  # noqa: E402

DEV = test_device()
BACKENDS = [b for b in (bc.Backend.REFERENCE, bc.Backend.TRITON) if b in backends_for("lax_gather", DEV)]


def _t(a):
    from baracuda._core.tensors import to_torch

    return a.to(DEV.type) if isinstance(a, torch.Tensor) else to_torch(np.asarray(a), DEV)


def _run(op, arrays, backend, **attrs):
    desc = bc.Descriptor.like(op, *arrays, **attrs)
    plan = bc.Plan.select(desc, DEV, bc.PlanPreference(prefer=(backend,)))
    assert plan.sku.backend == backend
    out = plan.run(*[_t(a) for a in arrays])
    return torch.as_tensor(out).cpu()


def _gd(offset_dims, collapsed, start_map, slice_sizes, obd=(), ibd=(), **kw):
    return dict(offset_dims=offset_dims, collapsed_slice_dims=collapsed, start_index_map=start_map,
                operand_batching_dims=obd, start_indices_batching_dims=ibd, slice_sizes=slice_sizes, **kw)


def _sd(window, inserted, to_operand, obd=(), ibd=(), **kw):
    return dict(update_window_dims=window, inserted_window_dims=inserted, scatter_dims_to_operand_dims=to_operand,
                operand_batching_dims=obd, scatter_indices_batching_dims=ibd, **kw)


@pytest.fixture
def rng():
    return np.random.default_rng(23)


# -- the torch forms as dimension numbers ----------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_lax_gather_specialises_index_select_gather_and_take(backend, rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    rows = rng.integers(0, 6, 4)
    got = _run("lax_gather", (x, rows[:, None]), backend, **_gd((1,), (0,), (0,), (1, 5)))
    assert torch.equal(got, torch.index_select(torch.from_numpy(x), 0, torch.from_numpy(rows)))
    # torch.gather(x, 1, idx): the rows of x paired with the rows of idx by a batching dim
    idx = rng.integers(0, 5, (6, 3))
    got = _run("lax_gather", (x, idx[..., None]), backend, **_gd((), (1,), (1,), (1, 1), obd=(0,), ibd=(0,)))
    assert torch.equal(got, torch.gather(torch.from_numpy(x), 1, torch.from_numpy(idx)))
    # torch.gather along dim 0 (batching on dim 1 of the operand and of the index)
    idx0 = rng.integers(0, 6, (3, 5))
    got = _run("lax_gather", (x, idx0[..., None]), backend, **_gd((), (0,), (0,), (1, 1), obd=(1,), ibd=(1,)))
    assert torch.equal(got, torch.gather(torch.from_numpy(x), 0, torch.from_numpy(idx0)))
    # take on the flat operand: point gathers with 2-d index vectors (row, column)
    flat = rng.integers(0, 30, (2, 3))
    got = _run("lax_gather", (x, np.stack([flat // 5, flat % 5], -1).astype(np.int32)), backend,
               **_gd((), (0, 1), (0, 1), (1, 1)))
    assert torch.equal(got, torch.take(torch.from_numpy(x), torch.from_numpy(flat)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_lax_scatter_specialises_index_add_index_copy_scatter_add_and_amax(backend, rng):
    x = rng.standard_normal((6, 3))
    u = rng.standard_normal((5, 3))
    tx, tu = torch.from_numpy(x), torch.from_numpy(u)
    rows = rng.integers(0, 6, 5)
    got = _run("lax_scatter", (x, rows[:, None], u), backend, **_sd((1,), (0,), (0,), combiner="add"))
    torch.testing.assert_close(got, tx.index_add(0, torch.from_numpy(rows), tu), rtol=1e-12, atol=1e-12)
    distinct = rng.permutation(6)[:5]
    got = _run("lax_scatter", (x, distinct[:, None], u), backend, **_sd((1,), (0,), (0,)))
    assert torch.equal(got, tx.index_copy(0, torch.from_numpy(distinct), tu))
    # scatter_add / scatter_reduce(amax) along dim 1: the rows paired by a batching dim
    idx = rng.integers(0, 3, (6, 4))
    src = rng.standard_normal((6, 4))
    ti, ts = torch.from_numpy(idx), torch.from_numpy(src)
    dn = _sd((), (1,), (1,), obd=(0,), ibd=(0,))
    got = _run("lax_scatter", (x, idx[..., None], src), backend, combiner="add", **dn)
    torch.testing.assert_close(got, tx.scatter_add(1, ti, ts), rtol=1e-12, atol=1e-12)
    for comb, red in (("max", "amax"), ("min", "amin"), ("mul", "prod")):
        got = _run("lax_scatter", (x, idx[..., None], src), backend, combiner=comb, **dn)
        torch.testing.assert_close(got, tx.scatter_reduce(1, ti, ts, red), rtol=1e-12, atol=1e-12)


# -- out-of-bounds windows: clip and fill ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_clamps_the_whole_window_and_fill_fills_it(backend):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    starts = np.array([[-3], [1], [5], [4]])      # windows of 3 rows: the last in-bounds start is 3
    dn = _gd((1, 2), (), (0,), (3, 2))
    clip = _run("lax_gather", (x, starts), backend, mode="clip", **dn)
    for k, s in enumerate((0, 1, 3, 3)):
        assert torch.equal(clip[k], torch.from_numpy(x[s:s + 3]))
    fill = _run("lax_gather", (x, starts), backend, mode="fill", fill_value=-7.0, **dn)
    assert torch.equal(fill[1], torch.from_numpy(x[1:4]))
    # a window only partly out of bounds (start 4: rows 4, 5, 6) is filled entirely, as JAX
    for k in (0, 2, 3):
        assert bool((fill[k] == -7).all())
    same = _run("lax_gather", (x, starts), backend, mode="promise_in_bounds", **dn)
    assert torch.equal(same, clip)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt,want", [(np.float32, math.nan), (np.int16, -2 ** 15), (np.uint8, 255),
                                     (np.bool_, True)])
def test_fill_value_defaults_are_jax_s(backend, dt, want):
    x = np.ones((4, 2)).astype(dt)
    out = _run("lax_gather", (x, np.array([[9], [0]])), backend, **_gd((1,), (0,), (0,), (1, 2)))
    got = out[0].tolist()
    assert all(math.isnan(v) for v in got) if isinstance(want, float) else got == [want, want]
    assert out[1].tolist() == [dt(1).item()] * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_fill_drops_whole_windows_and_writes_nothing_outside(backend, rng):
    x = rng.standard_normal((5, 4))
    starts = np.array([[0, 0], [4, 1], [-1, 2], [3, 2]])   # windows of 2 x 2: rows 4-5 and row -1 are out
    u = rng.standard_normal((4, 2, 2))
    for comb in ("replace", "add", "max"):
        got = _run("lax_scatter", (x, starts, u), backend, combiner=comb, **_sd((1, 2), (), (0, 1))).numpy()
        want = x.copy()
        for k in (0, 3):
            r, c = starts[k]
            tgt = want[r:r + 2, c:c + 2]
            want[r:r + 2, c:c + 2] = u[k] if comb == "replace" else tgt + u[k] if comb == "add" else \
                np.maximum(tgt, u[k])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        clip = _run("lax_scatter", (x, starts[:1], u[:1]), backend, combiner=comb, mode="clip",
                    **_sd((1, 2), (), (0, 1))).numpy()
        assert np.array_equal(clip[2:], x[2:]) and np.array_equal(clip[:, 2:], x[:, 2:])


# -- combiners on every dtype kind --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("comb", ["add", "mul", "min", "max"])
def test_combiners_on_bool_narrow_ints_and_half_floats(backend, comb, rng):
    rows = np.array([[1], [3], [1], [1], [0]])
    dn = _sd((1,), (0,), (0,), combiner=comb)
    xb, ub = rng.integers(0, 2, (4, 3)).astype(bool), rng.integers(0, 2, (5, 3)).astype(bool)
    got = _run("lax_scatter", (xb, rows, ub), backend, **dn)
    want = xb.copy()
    f = {"add": np.logical_or, "mul": np.logical_and, "min": np.logical_and, "max": np.logical_or}[comb]
    for k, r in enumerate(rows[:, 0]):
        want[r] = f(want[r], ub[k])
    assert np.array_equal(got.numpy(), want)
    x8, u8 = rng.integers(-100, 100, (4, 3)).astype(np.int8), rng.integers(-100, 100, (5, 3)).astype(np.int8)
    got = _run("lax_scatter", (x8, rows, u8), backend, **dn)
    ref = torch.from_numpy(x8).index_reduce(0, torch.from_numpy(rows[:, 0]), torch.from_numpy(u8),
                                            {"add": "prod", "mul": "prod", "min": "amin", "max": "amax"}[comb])
    if comb == "add":    # int8 sums wrap, as JAX's
        ref = torch.from_numpy(x8).index_add(0, torch.from_numpy(rows[:, 0]), torch.from_numpy(u8))
    assert torch.equal(got, ref)
    xh = torch.randn(4, 3, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    uh = torch.randn(5, 3, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    got = _run("lax_scatter", (xh, rows, uh), backend, **dn)
    want = xh.double().index_reduce(0, torch.from_numpy(rows[:, 0]), uh.double(),
                                    {"add": "prod", "mul": "prod", "min": "amin", "max": "amax"}[comb])
    if comb == "add":
        want = xh.double().index_add(0, torch.from_numpy(rows[:, 0]), uh.double())
    # bf16: one rounding of the f32 accumulator's result (2^-8 relative), after f32 combines
    torch.testing.assert_close(got.double(), want.to(torch.bfloat16).double(), rtol=8e-3, atol=8e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_max_propagate_nan(backend):
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    u = np.array([[np.nan, 0.0], [5.0, np.nan]])
    for comb in ("min", "max"):
        got = _run("lax_scatter", (x, np.array([[0], [0]]), u), backend, combiner=comb,
                   **_sd((1,), (0,), (0,))).numpy()
        assert np.isnan(got[0]).all() and np.array_equal(got[1], x[1])


def test_replace_with_duplicates_keeps_one_value_and_says_nondeterministic(rng):
    x = rng.standard_normal((3, 2))
    u = rng.standard_normal((4, 2))
    rows = np.array([[1], [1], [2], [1]])
    for backend in BACKENDS:
        got = _run("lax_scatter", (x, rows, u), backend, **_sd((1,), (0,), (0,))).numpy()
        assert any(np.array_equal(got[1], u[k]) for k in (0, 1, 3)) and np.array_equal(got[2], u[2])
        if backend == bc.Backend.REFERENCE:     # the oracle: the last in row-major update order
            assert np.array_equal(got[1], u[3])
    if bc.Backend.TRITON in BACKENDS:
        for unique, det in ((False, False), (True, True)):
            d = bc.Descriptor.like("lax_scatter", x, rows, u, unique_indices=unique, **_sd((1,), (0,), (0,)))
            p = bc.Plan.select(d, DEV, bc.PlanPreference(prefer=(bc.Backend.TRITON,)))
            assert p.precision.deterministic is det


# -- gradients vs torch.autograd of the forms they specialise -----------------------------------------------------
def _bw(op, arrays, g, **attrs):
    desc = bc.Descriptor.like(op, *arrays, **attrs)
    bw = bc.BackwardPlan.select(desc, "cpu")
    names = desc.spec.arg_names
    ref = bc.Plan.select(desc, "cpu").run(*arrays)
    saved = {n: (arrays[names.index(n)] if n in names else ref) for n in bw.saves}
    return bw.run(g, **saved)


def test_gather_and_scatter_gradients_match_torch_autograd(rng):
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    idx = torch.from_numpy(rng.integers(0, 5, (6, 3)))
    g = torch.randn(6, 3, dtype=torch.float64)
    (want,) = torch.autograd.grad(torch.gather(x, 1, idx), x, g)
    got = _bw("lax_gather", (x.detach().numpy(), idx.numpy()[..., None]), g.numpy(),
              **_gd((), (1,), (1,), (1, 1), obd=(0,), ibd=(0,)))
    np.testing.assert_allclose(got[0], want.numpy(), rtol=1e-12, atol=1e-12)
    src = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    for comb, red in (("add", "sum"), ("max", "amax"), ("min", "amin")):
        y = x.scatter_reduce(1, idx, src, red)
        wx, ws = torch.autograd.grad(y, (x, src), torch.ones_like(y) * 0.5 + g.sum())
        got = _bw("lax_scatter", (x.detach().numpy(), idx.numpy()[..., None], src.detach().numpy()),
                  (np.ones((6, 5)) * 0.5 + g.sum().item()), combiner=comb, **_sd((), (1,), (1,), obd=(0,), ibd=(0,)))
        np.testing.assert_allclose(got[0], wx.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[2], ws.numpy(), rtol=1e-12, atol=1e-12)


def test_fill_mode_gradients_skip_the_filled_and_dropped_windows():
    x = np.arange(6.0).reshape(3, 2)
    starts = np.array([[0], [5], [2]])
    g = np.ones((3, 2))
    gx = _bw("lax_gather", (x, starts), g, fill_value=0.0, **_gd((1,), (0,), (0,), (1, 2)))[0]
    assert np.array_equal(gx, [[1, 1], [0, 0], [1, 1]])
    gu = _bw("lax_scatter", (x, starts, np.ones((3, 2))), np.full((3, 2), 2.0), combiner="add",
             **_sd((1,), (0,), (0,)))[2]
    assert np.array_equal(gu, [[2, 2], [0, 0], [2, 2]])


def test_mul_gradient_needs_unique_indices():
    x, u = np.ones((3, 2)), np.ones((2, 2))
    with pytest.raises(bc.UnsupportedError, match=r"lax_scatter: combiner='mul' is differentiable only with"):
        _bw("lax_scatter", (x, np.array([[0], [0]]), u), np.ones((3, 2)), combiner="mul", **_sd((1,), (0,), (0,)))


# -- sm_90 compile ------------------------------------------------------------------------------------------------
_SCRIPT = r'''
import re, torch, baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches


def compile_(op, xs, **attrs):
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    d = bc.Descriptor.like(op, *xs, **attrs)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in d.outputs]
    print("compiling", op, attrs.get("combiner"), attrs.get("mode"), flush=True)
    with offline_launches() as launches:
        impl.bind(d, bc.PlanPreference())(d, xs, outs, torch.empty(impl.workspace(d), dtype=torch.uint8))
    for k in launches:
        regs, stack = k.resources()
        print("   ", k.name, k.constexprs.get("MODE"), "regs", regs, "stack", stack, flush=True)
        assert stack == 0 and regs <= 96, (op, k.name, regs, stack)
    return launches


rows = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), slice_sizes=(1, 4096))
g = compile_("lax_gather", [torch.empty(64, 4096, dtype=torch.bfloat16), torch.zeros(16, 1, dtype=torch.int64)],
             mode="clip", **rows)
ptx = g[0].compiled.asm["ptx"]
assert g[0].constexprs["ROW_INDEX"] and re.search(r"ld\.global(\.nc)?\.v4", ptx) and "st.global.v4" in ptx
compile_("lax_gather", [torch.empty(64, 4096, dtype=torch.bfloat16), torch.zeros(16, 1, dtype=torch.int32)],
         mode="fill", **rows)
pts = dict(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1), slice_sizes=(1, 1))
compile_("lax_gather", [torch.empty(64, 64), torch.zeros(256, 64, 2, dtype=torch.int64)], **pts)
x, i, u = torch.empty(64, 64), torch.zeros(256, 1, dtype=torch.int64), torch.empty(256, 64)
sd = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
for comb in ("replace", "add", "mul", "min", "max"):
    for dt in (torch.float32, torch.bfloat16, torch.float64, torch.int8):
        compile_("lax_scatter", [x.to(dt), i, u.to(dt)], combiner=comb, **sd)
print("ok")
'''


def test_lax_kernels_compile_for_sm90_without_spills():
    from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

    why = unavailable()
    if why:
        pytest.skip(why)
    r = run_isolated(_SCRIPT)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
