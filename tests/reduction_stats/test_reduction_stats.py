"""Statistical reductions: what the generic suite cannot express -- accuracy on large-mean data (one-read
shifted Welford vs torch in f64), the split (two-stage) path, +-inf/NaN semantics of logsumexp and the
norms, torch's gradient conventions (ties of the inf-norm, std == 0, mean-only gradients), the drop-in
signatures, and an offline sm_90 compile of the kernels (registers, spills)."""
from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing import backends_for  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, force_reduction_split, grad_pair, needs_sm90, run_sm90_script  # noqa: E402
from baracuda.testing.checks import assert_same as _same, run_on as _run  # noqa: E402

BACKENDS = backends_for("var", DEVICE)
INF = float("inf")


@pytest.fixture(params=[False, True], ids=["one-pass", "split"])
def split(request, monkeypatch):
    """Also force the two-stage path on small problems (splits of >= 8 elements, up to 16 programs)."""
    if request.param:
        force_reduction_split(monkeypatch)
    return request.param


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_large_mean_is_accurate(backend, split):
    """1e6 + N(0, 1) in f32: E[x^2] - E[x]^2 would lose every digit (the f32 ulp of 1e12 is 6e4)."""
    g = torch.Generator().manual_seed(0)
    x = (1e6 + torch.randn(6, 300, generator=g, dtype=torch.float64)).float()
    x64 = x.double()
    for dims in (1, 0, None):
        d = None if dims is None else [dims]
        for op in ("var", "std"):
            _same(_run(op, x, backend=backend, dims=dims), getattr(torch, op)(x64, dim=d), 2e-6, 0)
        v, m = _run("var_mean", x, backend=backend, dims=dims, correction=0)
        wv, wm = torch.var_mean(x64, dim=d, correction=0)
        _same(v, wv, 2e-6, 0)
        _same(m, wm, 1e-7, 0)
    # the backward: (x - mean) from the shifted sum, so dx keeps its digits too
    g_out = torch.randn(6, generator=g, dtype=torch.float64).float()
    out = x64.var(1).float()
    dx = _run("var_backward", g_out, x, out, backend=backend, dims=1)
    want = (2.0 / 299) * g_out.double()[:, None] * (x64 - x64.mean(1, keepdim=True))
    _same(dx, want, 1e-5, 1e-9)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_logsumexp_special_values(backend, split):
    x = torch.randn(6, 40, dtype=torch.float64)
    x[0, :] = -INF                      # -inf
    x[1, 7] = INF                       # +inf
    x[2, 3] = float("nan")              # nan
    x[3, :20] = -INF                    # finite
    x[4, 5], x[4, 9] = INF, -INF        # +inf
    for dt in (torch.float64, torch.float32, torch.bfloat16):
        xd = x.to(dt)
        for dims in (1, 0):
            _same(_run("logsumexp", xd, backend=backend, dims=dims), torch.logsumexp(xd.double(), dims), 1e-2, 1e-2)
    big = torch.full((3, 50), 1e30, dtype=torch.float32)   # no overflow: the max is subtracted
    _same(_run("logsumexp", big, backend=backend, dims=1), torch.logsumexp(big, 1), 1e-6, 0)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_norm_special_values(backend, split):
    x = torch.randn(5, 37, dtype=torch.float64)
    x[1, 3] = float("nan")
    x[2, :] = 0.0
    for o in (INF, -INF, 0.0, 1.0, 2.0, 0.5, 3.0, -1.0):
        for dims in (0, 1):
            want = torch.linalg.vector_norm(x, o, dim=dims)
            _same(_run("vector_norm", x, backend=backend, ord=o, dims=dims), want, 1e-9, 1e-12)
    xf = x.float()
    got = _run("vector_norm", xf, backend=backend, dims=1, dtype=bc.DType.f64)
    assert got.dtype == torch.float64
    _same(got, torch.linalg.vector_norm(xf, dim=1, dtype=torch.float64), 1e-12, 0)
    e = torch.empty(0, 4)
    _same(_run("vector_norm", e, backend=backend, dims=0), torch.zeros(4))
    with pytest.raises(bc.InvalidProblemError, match="non-empty reduction for ord=inf"):
        bc.Descriptor.like("vector_norm", e, ord=INF, dims=0)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_trace_strided(backend):
    x = torch.randn(9, 13, dtype=torch.float64)
    _same(_run("trace", x.t(), backend=backend), torch.trace(x.t()), 1e-12, 1e-12)
    _same(_run("trace", x[::2, 1::3], backend=backend), torch.trace(x[::2, 1::3]), 1e-12, 1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_trace_of_bool_counts_the_true_diagonal_in_int64(backend):
    """trace(bool) is an int64 count, as torch's CUDA kernel (its CUDA OpInfo declares bool); torch's CPU kernel
    (2.13) refuses bool, so the expectation is torch's trace of the same values as int64."""
    x = torch.rand(11, 7, generator=torch.Generator().manual_seed(3)) > 0.4
    got = _run("trace", x, backend=backend)
    assert got.dtype == torch.int64
    assert torch.equal(got, torch.trace(x.long())) and 0 < int(got) < 7
    assert torch.equal(_run("trace", x.t()[1:], backend=backend), torch.trace(x.t()[1:].long()))


def _grad_pair(fn_ours, fn_torch, *xs):
    grad_pair(fn_ours, fn_torch, *xs, equal_nan=True)


def test_gradient_conventions_match_torch():
    x = torch.tensor([[1.0, -3.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0], [-2.0, 2.0, 2.0, -2.0]], dtype=torch.float64)
    for o in (INF, -INF, 2.0, 1.0, 0.5, 3.0, 1.5, 0.0):   # ties split like torch's mask / count; 0 at 0
        _grad_pair(lambda t: bt.linalg.vector_norm(t, o, dim=1), lambda t: torch.linalg.vector_norm(t, o, dim=1), x)
    c = torch.tensor([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], dtype=torch.float64)   # std == 0 row: gradient 0
    _grad_pair(lambda t: bt.std(t, 1), lambda t: torch.std(t, 1), c)
    _grad_pair(lambda t: bt.std_mean(t, 1, correction=0), lambda t: torch.std_mean(t, 1, correction=0), c)
    _grad_pair(lambda t: bt.var_mean(t, (0, 1))[1] * 3, lambda t: torch.var_mean(t, (0, 1))[1] * 3, c)  # mean only
    _grad_pair(lambda t: bt.logsumexp(t, 0), lambda t: torch.logsumexp(t, 0), c)
    _grad_pair(lambda t: bt.trace(t), lambda t: torch.trace(t), c)
    _grad_pair(lambda t: bt.norm(t, "fro", dim=(0, 1)), lambda t: torch.norm(t, "fro", dim=(0, 1)), c)


@pytest.mark.parametrize("dt", [torch.int64, torch.int16, torch.uint8, torch.bool])
def test_logsumexp_of_integers_is_float(dt):
    """torch.logsumexp converts an integer/bool input to the default dtype first (f32; f64 under
    set_default_dtype(f64))."""
    g = torch.Generator().manual_seed(12)
    x = torch.randint(0, 2, (5, 7), generator=g).bool() if dt == torch.bool else \
        torch.randint(0 if dt == torch.uint8 else -9, 10, (5, 7), generator=g).to(dt)
    for dims, keep in ((1, False), (0, True), ((0, 1), False)):
        want = torch.logsumexp(x, dims, keepdim=keep)
        got = bt.logsumexp(x.to(TDEV), dims, keepdim=keep).cpu()
        assert got.dtype == want.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-6)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        want, got = torch.logsumexp(x, 1), bt.logsumexp(x.to(TDEV), 1).cpu()
    finally:
        torch.set_default_dtype(old)
    assert got.dtype == want.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_dropin_signatures():
    x = torch.randn(4, 6, dtype=torch.float64)
    pairs = [(lambda m: m.var(x, 1, True), None), (lambda m: m.var(x, True), None), (lambda m: m.var(x, False), None),
             (lambda m: m.var(x, dim=(0, 1), correction=0, keepdim=True), None),
             (lambda m: m.std(x, 0, keepdim=True, correction=2.5), None), (lambda m: m.var_mean(x, 1), tuple),
             (lambda m: m.std_mean(x, dim=0, unbiased=False), tuple), (lambda m: m.logsumexp(x, 1), None),
             (lambda m: m.logsumexp(x, (0, 1), keepdim=True), None), (lambda m: m.norm(x), None),
             (lambda m: m.norm(x, 1, dim=1), None), (lambda m: m.norm(x, p=float("inf"), dim=0, keepdim=True), None),
             (lambda m: m.norm(x, "fro", dim=(0, 1)), None), (lambda m: m.linalg.vector_norm(x, 3, dim=-1), None),
             (lambda m: m.linalg.vector_norm(x.float(), dtype=torch.float64), None), (lambda m: m.trace(x), None)]
    for f, kind in pairs:
        want, got = f(torch), f(bt)
        if kind is tuple:
            assert type(got) is tuple and len(got) == 2
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)
        else:
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    xm = x.reshape(4, -1) if x.dim() != 2 else x         # the nuclear norm: linalg's matrix_norm, as torch
    torch.testing.assert_close(bt.norm(xm, "nuc"), torch.norm(xm, "nuc"), rtol=1e-9, atol=1e-9)
    with pytest.raises(bc.UnsupportedError, match="argument 'out'"):
        bt.var(x, 1, out=torch.empty(4, dtype=torch.float64))
    with pytest.raises(bc.InvalidProblemError, match="either 'unbiased' or 'correction'"):
        bt.var(x, 1, True, correction=0)


# -- offline sm_90 compile of the kernels at their benchmark configurations (no GPU needed) -----------------
_COMPILE_CHECK = textwrap.dedent("""
    import triton.language as tl
    from baracuda.backends.triton.distance import distance as dd
    from baracuda.backends.triton.reduction import reduce as r, stats as s
    from baracuda.testing.checks import compile_sm90
    def compile_(k, sig, ce, warps, vec=True, max_regs=128):
        # runtime ints divisible by 16 are specialized as such by Triton (strides, lengths of the benchmark shapes)
        div = [n for n in sig if n not in ce and sig[n] != "fp64" and n not in ("S", "n_iblk", "n_jblk", "n_lanes")]
        b = compile_sm90(k, sig, ce, warps, div)
        regs = b["regs"]
        assert b["local"] == 0, (k.fn.__name__, ce, "spills", b["res"])
        assert regs <= max_regs, (k.fn.__name__, ce, "regs", regs)
        if vec:
            assert "LDG.E.128" in b["sass"] or "LDG.E.64" in b["sass"], (k.fn.__name__, ce, "no vector loads")
        print(k.fn.__name__, {n: ce[n] for n in ("MODE", "PK", "STAGE", "AX") if n in ce}, "regs", regs)
    def stats(shape, dims, ptr, item, mode, pk=0, nin=1, stage=0, acc=tl.float32):
        (outer, R, inner, _), (kind, b0, b1, S, chunk) = s.plan_geometry(shape, dims, item)
        warps = 8 if b0 * b1 * item >= 8192 else 4
        if stage == 2:
            row2, b0, b1 = s.stage2_tile(outer, S, inner)
            kind, warps = ("row" if row2 else "col"), 4
        ints = ["n_lanes", "inner", "n_iblk", "R", "chunk", "S", "sxo", "sxi", "tso", "tsi", "syo", "syi"]
        sig = {"x_ptr": ptr, "y_ptr": ptr, "pa_ptr": "*fp32", "pb_ptr": "*fp32", "pc_ptr": "*fp32",
               "o0_ptr": "*fp32", "o1_ptr": "*fp32", "o2_ptr": "*fp32", "p": "fp64", "corr": "fp64", "eps": "fp64"}
        sig.update({n: "i32" for n in ints})
        row = kind == "row"
        ce = dict(MODE=mode, PK=pk, SQRT=False, STAGE=stage, NIN=nin, WRITE1=mode == 0, ACC=acc, I64=False,
                  INTERP=False, tsr=1, syr=1, **s._tile(row, b0, b1))
        compile_(s._stats_kernel, sig, ce, warps, vec=stage != 2)
    for mode, pk in ((0, 0), (1, 0), (2, 2), (2, 3), (2, 4)):
        stats((16384, 4096), (1,), "*bf16", 2, mode, pk)          # rows
        stats((16384, 4096), (0,), "*bf16", 2, mode, pk, stage=1)  # columns, split
        stats((16384, 4096), (1,), "*fp32", 4, mode, pk)
    stats((16384, 4096), (1,), "*bf16", 2, 3, 0, nin=2)            # cosine
    stats((16384, 4096), (1,), "*bf16", 2, 2, 2, nin=2)            # pairwise
    stats((512, 262144), (1,), "*bf16", 2, 0, 0, stage=2)          # stage 2 of a split var (rows)
    stats((16384, 4096), (0,), "*bf16", 2, 0, 0, stage=2)          # stage 2 of a split var (columns)
    stats((64 << 20,), (0,), "*fp32", 4, 1, 0, stage=2)            # stage 2 of an all-reduce logsumexp
    sig = {n: "*bf16" for n in ("g_ptr", "x_ptr", "o_ptr", "gm_ptr", "dx_ptr")}
    sig.update({n: "i32" for n in ("inner", "R", "sxo", "sxi", "sdo", "sdr", "sgo", "n_iblk")})
    sig.update({"scale": "fp64", "inv_n": "fp64"})
    compile_(s._var_bw_kernel, sig, dict(STD=True, GM=True, ACC=tl.float32, I64=False, INTERP=False, sxr=1, sdi=1,
                                         sgi=1, BLOCK_R=1024, BLOCK_I=4), 8)
    sig = {n: "*bf16" for n in ("g_ptr", "a_ptr", "b_ptr", "da_ptr", "db_ptr")}
    sig.update({n: "i32" for n in ("inner", "R", "sao", "sai", "sbo", "sbi", "sdo", "sdr", "sgo", "n_iblk")})
    sig.update({"eps": "fp64"})
    compile_(dd._cos_bw_kernel, sig, dict(ACC=tl.float32, I64=False, INTERP=False, sar=1, sbr=1, sdi=1, sgi=1,
                                          BLOCK_R=1024, BLOCK_I=4), 8)
    for pk in (1, 2, 3, 4):
        sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "o_ptr": "*fp32", "tiles_ptr": "*i32", "p": "fp64"}
        sig.update({n: "i32" for n in ("P", "NR", "M", "sab", "sap", "sbb", "sbr", "sob", "sop", "n_jblk")})
        compile_(dd._dist_kernel, sig, dict(PK=pk, PDIST=pk == 2, ACC=tl.float32, INTERP=False, sam=1, sbm=1, sor=1,
                                            BI=dd._BI, BJ=dd._BJ, BK=dd._BK), 8, vec=False, max_regs=255)
        sig = {"g_ptr": "*fp32", "d_ptr": "*fp32", "a_ptr": "*fp32", "b_ptr": "*fp32", "o_ptr": "*fp32", "p": "fp64"}
        sig.update({n: "i32" for n in ("P", "NR", "M", "sab", "sap", "sbb", "sbr", "sgb", "sgi", "sdb", "sdi",
                                        "sob", "sop")})
        compile_(dd._dist_bw_kernel, sig, dict(PK=pk, LT1=False, LT2=False, PDIST=False, ACC=tl.float32,
                                               INTERP=False, sam=1, sbm=1, sgj=1, sdj=1, som=1, BI=dd._BW_BI,
                                               BJ=dd._BW_BJ, BK=dd._BW_BK), 4, vec=False, max_regs=255)
    print("ok")
""")


@needs_sm90
def test_kernels_compile_for_sm90_without_spills():
    run_sm90_script(_COMPILE_CHECK, timeout=900)


@pytest.fixture
def flat_moments(monkeypatch):
    """The flat var paths on small problems: column loads of 64 elements, up to 8 splits, folds of 4 partials, rows
    of 64 elements a program."""
    from baracuda.backends.triton.reduction import reduce as tri
    from baracuda.backends.triton.reduction import stats_flat

    monkeypatch.setattr(tri, "_SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(stats_flat, "_FLAT_LOAD", 64)
    monkeypatch.setattr(stats_flat, "_FLAT_SPLITS", 8)
    monkeypatch.setattr(stats_flat, "_FLAT_FOLD", 4)
    monkeypatch.setattr(stats_flat, "_FLAT_ROWS", 64)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims,kind", [((203, 16), (0,), "flatcol"), ((50, 4, 8), (0,), "flatcol"),
                                             ((3, 7, 32), (0, 1), "flatcol"), ((37, 16), (1,), "flatrow"),
                                             ((5, 6, 4), (2,), "flatrow"), ((9, 2, 8), (1, 2), "flatrow")])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
def test_flat_narrow_moments(flat_moments, shape, dims, kind, dt):
    """var with corrections 0 and 2.5, std_mean with 1 (the kernels are shared: the correction is a scalar of
    the finish, std the square root of var, the *_mean forms a second output) on the flat paths (narrow columns:
    shifted sums per split merged with Chan's formula; short rows: two passes over the registers), on data centred
    at 100 (the shift keeps the moments accurate): against torch in float64, 2 ulps of the output dtype (f32: 1e-5,
    the shifted sums' rounding), and the same bits twice.  (Interpreted: each run is seconds, so the cases are the
    distinct kernel paths, not every op x correction pair.)"""
    from baracuda.testing import forced_plan

    g = torch.Generator().manual_seed(3)
    x = (torch.randn(shape, generator=g) * 2 + 100).to(dt)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}[dt]
    for op, corr in (("var", 0.0), ("var", 2.5), ("std_mean", 1.0)):
        desc = bc.Descriptor.like(op, x, dims=dims, correction=corr)
        assert kind in forced_plan(desc, DEVICE, Backend.TRITON).sku.route
        got = _run(op, x, backend=Backend.TRITON, dims=dims, correction=corr)
        want = getattr(torch, op)(x.double(), dims, correction=corr)
        for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert a.dtype == dt and a.shape == b.shape
            torch.testing.assert_close(a.double(), b, rtol=2 * tol, atol=0)
        if op == "std_mean":
            again = _run(op, x, backend=Backend.TRITON, dims=dims, correction=corr)
            for a, b in zip(got, again):
                assert torch.equal(a, b)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims", [((40, 200), (0,)), ((3, 9, 130), (0, 1)), ((6, 1500), (0,))])
def test_wide_column_moments(flat_moments, monkeypatch, shape, dims):
    """var / std_mean over the leading dims of rows wider than 64 (the reduction family's column tiles, several
    splits and column blocks, a ragged last block; [6, 1500]: one split, the results written by the first stage):
    against torch in float64, data centred at 100."""
    from baracuda.backends.triton.reduction import reduce as tri
    from baracuda.testing import forced_plan

    monkeypatch.setattr(tri, "_MIN_CHUNK", 4)
    monkeypatch.setattr(tri, "_TARGET_PROGRAMS", 16)
    g = torch.Generator().manual_seed(5)
    for dt, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2 ** -7)):
        x = (torch.randn(shape, generator=g) * 2 + 100).to(dt)
        for op in ("var", "std_mean"):
            desc = bc.Descriptor.like(op, x, dims=dims, correction=1.0)
            assert "widecol_split" in forced_plan(desc, DEVICE, Backend.TRITON).sku.route
            got = _run(op, x, backend=Backend.TRITON, dims=dims, correction=1.0)
            want = getattr(torch, op)(x.double(), dims, correction=1.0)
            for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert a.dtype == dt and a.shape == b.shape
                torch.testing.assert_close(a.double(), b, rtol=2 * tol, atol=0)
