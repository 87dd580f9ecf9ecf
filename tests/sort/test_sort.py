"""Sort-family checks the generic suite does not make: torch's order (stable ties, NaN largest, -0.0 == +0.0,
descending stability) on every dtype, the long-row path (block sort + merge passes), the chunked topk, the radix-select topk
and the threshold-filter topk (with its per-row fallback to the select) forced at small sizes, topk's large-k path,
sort_backward's out-of-range index error, gradients through the saved indices against torch.autograd, and the
drop-ins."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda._core.errors import InvalidProblemError  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda._core.dtypes import as_dtype  # noqa: E402
from baracuda.backends.triton.sort import rows  # noqa: E402
from baracuda.backends.triton.sort.rows import forced  # noqa: E402
from baracuda.testing import backends_for, forced_plan  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, grad_pair, needs_sm90, run_sm90_script, run_on as _run  # noqa: E402

BACKENDS = backends_for("sort", DEVICE)
TRITON = [b for b in BACKENDS if b == Backend.TRITON]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int8,
          torch.uint8]
# register sort (rows <= nmax), and the block sort + merge path (the long rows' default) with blocks of 4 and merge
# tiles of 8 (the radix path, forced: test_radix_path_*)
PATHS = {"registers": {}, "merge": {"nmax": 4, "tile": 8, "radix": False}}


def _data(dt, shape, g):
    """Small integers (many ties) with NaN, +-inf and both zeros in the float dtypes."""
    x = torch.randint(-4, 5, shape, generator=g).to(torch.float64)
    if dt.is_floating_point:
        flat = x.view(-1)
        n = flat.numel()
        for j, v in zip(torch.randperm(n, generator=g)[:6].tolist(),
                        [float("nan"), -0.0, 0.0, float("inf"), float("-inf"), float("nan")]):
            flat[j] = v
    elif dt == torch.uint8:
        x = x.abs()
    return x.to(dt)


def _same(got, want):
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_sort_is_torchs_stable_sort(backend, path, dt):
    if backend != Backend.TRITON and path != "registers":
        pytest.skip("the forced path is Triton's")
    g = torch.Generator().manual_seed(1)
    with forced(**PATHS[path]):
        for shape, dim in [((3, 37), 1), ((5, 3, 6), 0), ((1, 17), -1), ((2, 1), 1)]:
            x = _data(dt, shape, g)
            for desc in (False, True):
                v, i = _run("sort", x, backend=backend, dim=dim, descending=desc)
                tv, ti = torch.sort(x, dim=dim, descending=desc, stable=True)
                _same(i, ti)
                _same(v, tv)
                # -0.0 and +0.0 are one key: the stable order keeps their input order, and the values keep their sign
                if dt.is_floating_point:
                    assert torch.equal(torch.signbit(v), torch.signbit(tv))
                if shape == (3, 37):     # (argsort runs sort's kernels: one shape, both orders)
                    _same(_run("argsort", x, backend=backend, dim=dim, descending=desc), ti)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bool_and_msort(backend):
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 2, (4, 19), generator=g).bool()
    v, i = _run("sort", x, backend=backend, descending=True)
    tv, ti = torch.sort(x, descending=True, stable=True)
    _same(i, ti)
    assert torch.equal(v, tv)
    y = _data(torch.float32, (9, 4), g)
    v, i = _run("msort", y, backend=backend)
    _same(v, torch.msort(y))


@pytest.mark.parametrize("backend", TRITON, ids=str)
def test_long_row_merge_path_many_passes(backend):
    """A row of 1000 with blocks of 8: 7 merge passes (the last one writing the outputs), one unpaired tail run."""
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-50, 50, (2, 1000), generator=g).float()
    x[0, 17] = float("nan")
    with forced(nmax=8, tile=64, radix=False):
        for desc in (False, True):
            v, i = _run("sort", x, backend=backend, descending=desc)
            tv, ti = torch.sort(x, descending=desc, stable=True)
            _same(i, ti)
            _same(v, tv)
        # a 64-bit dtype: (key, index) pairs through the same passes
        xd = x.double()
        _same(_run("sort", xd, backend=backend)[1], torch.sort(xd, stable=True)[1])


def test_cube_order_puts_register_bits_first_and_lanes_first_inverts():
    """cube_order (network bits low to high: register bits, lane bits, warp bits) on 8192 keys loaded as 4-element
    vectors by 8 warps, identity below one layout repetition; lanes_first's inverse undoes its permutation."""
    from baracuda.backends.triton.sort.network import cube_order, lanes_first
    order = cube_order.fn(13, 2, 3).value
    assert order == [3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2, 11, 12]     # cube axis a holds network bit 12 - a
    assert cube_order.fn(9, 2, 3).value == list(range(9))
    perm, inv, ax = lanes_first.fn(13, 10, 11).value
    assert sorted(perm) == list(range(13)) and [perm[i] for i in inv] == list(range(13))
    assert perm[ax] == 13 - 1 - 11
    assert perm[8:] == [3, 4, 5, 6, 7]          # lane bits (network 5-9: axes 3-7) innermost


@pytest.mark.parametrize("lv", [0, 1, -1])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_register_network_permutations_are_torchs_stable_sort(lv, dt):
    """The register network with its cube permuted (forced(lv=...): the load-vector bits cube_order assumes) and
    its cross-warp exchanges through tl.gather: one-row tiles (the permutation's scope) of 128 / 512 / 1024 at 4
    warps reach past one layout repetition (7 / 8 bits), so both run; any permutation must give torch's stable sort,
    ascending and descending (lv = 0 ascending, 1 descending, -1 both: the direction only flips each compare, the
    permutation is the same; each direction of a dtype takes the interpreter ~4 s); -1: no permutation.
    Integer-valued data gives ties."""
    g = torch.Generator().manual_seed(5)
    for r, n in ((1, 128), (1, 300), (3, 1000)):
        x = (torch.randn(r, n, generator=g) * 6).round().to(dt)
        for desc in (False, True) if lv == -1 else (lv == 1,):
            with forced(lv=lv):
                v, i = _run("sort", x, dim=-1, descending=desc, stable=True)
            tv, ti = torch.sort(x, dim=-1, descending=desc, stable=True)
            _same(v, tv)
            _same(i, ti)


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16, torch.int16, torch.uint8], ids=str)
def test_int32_carriers_give_the_int64_networks_results(dt):
    """Keys of <= 16 bits go through the network as int32 carriers (network.to_carrier) in rows below 2^16: the
    sort (ascending / descending: NaN payloads, +-inf, -0.0, ties by position, padded rows) and the chunked /
    selecting topk paths give torch's results and the int64 network's (forced(fc=False)) bit for bit.  Rows of 130
    (padded to 256); bool takes uint8's unsigned 8-bit keys."""
    g = torch.Generator().manual_seed(11)
    x = torch.stack([_wide(dt, 130, g) for _ in range(2)])
    for desc in (False, True):
        got = {}
        for fc in (True, False):
            with forced(fc=fc):
                got[fc] = (_run("sort", x, dim=-1, descending=desc, stable=True),
                           _run("topk", x, k=7, dim=-1, largest=desc, sorted=True))
        tv, ti = torch.sort(x, dim=-1, descending=desc, stable=True)
        _same(got[True][0][1], ti)
        _same(got[True][0][0], tv)
        for a, b in zip(got[True], got[False]):
            _same(a[0], b[0])
            _same(a[1], b[1])


# the LSD radix path forced at small sizes: a register limit of 4 and blocks of 16 positions (the interpreter runs the
# block's bitonic ranking slowly: few blocks keep these tests at a few seconds)
RADIX = dict(radix=True, nmax=4, radix_block=16)


def _wide(dt, n, g):
    """A row whose keys differ in every 8-bit digit (each radix pass decides some order), with ties; floats: random
    magnitudes over many binades of both signs, NaN (two payloads), +-inf and -0.0 beside +0.0."""
    if dt == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if not dt.is_floating_point:
        info = torch.iinfo(dt)
        x = torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dt)
        x[n // 2:n // 2 + 3] = x[1]
        return x
    x = torch.randn(n, generator=g, dtype=torch.float64) * torch.exp2(torch.randint(-20, 20, (n,), generator=g))
    x = x.to(dt)
    x[n // 2:n // 2 + 3] = x[1]
    x[2], x[5], x[7], x[9] = -0.0, 0.0, float("inf"), float("-inf")
    x[3] = float("nan")
    bits = {torch.float64: torch.int64, torch.float32: torch.int32}.get(dt, torch.int16)
    x.view(bits)[4] = x[3:4].view(bits)[0] | 1            # another NaN payload, kept bit for bit
    return x


@pytest.mark.parametrize("dt", DTYPES + [torch.int16, torch.bool], ids=str)
def test_radix_path_is_torchs_stable_sort(dt):
    """The LSD radix path (one pass per 8-bit digit: 1 for bool / 8-bit keys, 2 for 16-bit, 4 for 32-bit, 8 for
    64-bit) on a row of 48 in three blocks of 16: small integers (ties) then wide values: torch's stable indices and
    bit-identical values (NaN payloads, -0.0 beside +0.0 in input order), ascending sort and descending argsort; the
    route names the passes."""
    g = torch.Generator().manual_seed(12)
    x = torch.cat([_data(dt, (24,), g) if dt != torch.bool else _wide(dt, 24, g), _wide(dt, 24, g)])[None]
    with forced(**RADIX):
        plan = forced_plan(bc.Descriptor.like("sort", x), DEVICE, Backend.TRITON)
        assert f"block16+radix{x.element_size()}x8bit" in str(plan.sku), plan.sku
        v, i = _run("sort", x)
        tv, ti = torch.sort(x, stable=True)
        _same(i, ti)
        bits = {8: torch.int64, 4: torch.int32, 2: torch.int16}.get(x.element_size())
        assert torch.equal(v.view(bits), tv.view(bits)) if bits else torch.equal(v, tv)
        _same(_run("argsort", x, descending=True), torch.sort(x, descending=True, stable=True)[1])


@pytest.mark.parametrize("n, force, dts, rows", [
    (1, dict(nmax=0, radix_block=1), (torch.float32, torch.bfloat16), 3),
    (2, dict(nmax=0, radix_block=2), (torch.float32, torch.bfloat16), 3),
    (37, dict(nmax=16, radix_block=16), (torch.bfloat16,), 3),
    (300, dict(nmax=64, radix_block=64), (torch.bfloat16,), 1),
    (4097, dict(nmax=512, radix_block=128), (torch.int8,), 1)], ids=lambda v: str(v) if isinstance(v, int) else "")
def test_radix_path_row_lengths(n, force, dts, rows):
    """Rows of 1 and 2 (a register limit of 0: every row is long; f32 and bf16), 37 (three rows) and 300 in three and
    five blocks, ascending and descending; 4097 int8 keys in 33 blocks of 128 (the last of one position)."""
    g = torch.Generator().manual_seed(13)
    x = torch.stack([_wide(torch.float32, n, g) if n > 9 else torch.randn(n, generator=g) for _ in range(rows)])
    with forced(radix=True, **force):
        for dt in dts:
            xd = x.to(dt) if dt.is_floating_point else torch.randint(-128, 128, x.shape, generator=g).to(dt)
            for desc in (False, True) if n < 4097 else (True,):
                v, i = _run("sort", xd, descending=desc)
                tv, ti = torch.sort(xd, descending=desc, stable=True)
                _same(i, ti)
                _same(v, tv)


def test_radix_path_zero_rows_and_empty_rows():
    with forced(radix=True, nmax=0):
        for shape in ((0, 50), (3, 0)):
            x = torch.randn(shape)
            v, i = _run("sort", x, descending=True)
            assert v.shape == shape and i.shape == shape


def test_radix_path_first_k_entries_and_workspace():
    """topk past kmax runs the full sort and keeps the first k entries of each row (the last pass writes only
    those); the workspace: the count tables + (value, int32 position) ping-pong buffers, one for 16-bit keys, none
    for 8-bit keys (their one pass reads x and writes the outputs)."""
    g = torch.Generator().manual_seed(14)
    x = torch.stack([_wide(torch.float32, 45, g), _data(torch.float32, (45,), g)])
    with forced(**RADIX, kmax=4, select=False, filter=False):
        for k, largest in ((7, True), (20, False)):
            v, i = _run("topk", x, k=k, largest=largest)
            tv, ti = torch.sort(x, descending=largest, stable=True)
            _same(i, ti[:, :k])
            _same(v, tv[:, :k])
    with forced(radix=True, nmax=8192, radix_block=4096):
        for dt, buffers in ((torch.float32, 2), (torch.bfloat16, 1), (torch.int8, 0), (torch.float64, 2)):
            plan = forced_plan(bc.Descriptor.like("sort", torch.zeros(3, 20000, dtype=dt)), DEVICE, Backend.TRITON)
            tables = 3 * 256 * 5 * 4 + 3 * 256 * 4              # counts of 5 blocks a row, totals
            def aligned(b):
                return -(-b // 256) * 256
            want = tables + buffers * (aligned(dt.itemsize * 60000) + aligned(4 * 60000))
            assert plan.workspace_size == want, (dt, plan.workspace_size, want)


# topk's paths at small sizes: the chunked bitonic walk (chunks of 8, and k above kmax=4 through the full sort), the
# radix select (chunks of 8 positions: a row of 45 is six chunks, one partial; keys of <= 32 bits), and the threshold
# filter (8 chunks of ~6 positions, 16 survivor slots: the rows of many ties overflow into the select, others not)
TOPK_PATHS = {"chunked": dict(chunk=8, kmax=4, nmax=16, tile=8, select=False, radix=False),
              "select": dict(select=True, select_chunk=8),
              "filter": dict(filter=True, filter_chunks=8, filter_cap=16, select_chunk=8)}


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("path", list(TOPK_PATHS))
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.int16,
                                torch.int8, torch.uint8], ids=str)
def test_topk_nan_largest_ties_lowest_index(backend, path, dt):
    """topk keeps the first k entries of torch's stable sort on every path: NaN largest, ties at the k-th key by
    lowest position, every 8-bit digit pass of the select."""
    if backend != Backend.TRITON and path != "chunked":
        pytest.skip("the forced path is Triton's")
    if path == "filter" and dt not in (torch.float32, torch.bfloat16, torch.int16, torch.uint8):
        pytest.skip("the filter takes keys of <= 32 bits; the other dtypes: test_topk_threshold_filter_is_exact...")
    g = torch.Generator().manual_seed(4)
    x = _data(dt, (3, 45), g)
    if dt.is_floating_point:      # wide values too (every digit of the key matters), and ties
        x[1] = (torch.randn(45, generator=g) * 1e3).to(dt)
        x[1, 5:9] = x[1, 30]
    with forced(**TOPK_PATHS[path]):
        # (k = 1, a power of two, others, the whole row; each order with small and large k: the interpreter runs
        # each call for about half a second, so not every k x order pair)
        for k, largest in ((1, True), (1, False), (3, True), (4, False), (7, False), (16, True), (45, False)):
            v, i = _run("topk", x, backend=backend, k=k, largest=largest)
            tv, ti = torch.sort(x, descending=largest, stable=True)
            _same(i, ti[:, :k])
            _same(v, tv[:, :k])


def _filter_rows(dt, n, g):
    """Rows for the threshold filter: wide random values (few survivors), a constant row and a row of small integers
    (ties: overflow once the row is longer than the cap), ascending and descending rows (one survivor per chunk:
    no overflow), random values with NaN, +-0.0 and +-inf."""
    wide = torch.randn(n, generator=g) * 1e3 if dt.is_floating_point else torch.randint(-2000, 2000, (n,), generator=g)
    special = torch.randn(n, generator=g).double() * 10
    for j, s in zip(torch.randperm(n, generator=g)[:6].tolist(), [float("nan"), -0.0, 0.0, float("inf"),
                                                                  float("-inf"), float("nan")]):
        special[j] = s
    x = torch.stack([wide, torch.full((n,), 3.0), torch.randint(-2, 3, (n,), generator=g).double(),
                     torch.arange(n).double(), -torch.arange(n).double(), special])
    if dt == torch.uint8:
        x = x.abs()
    elif not dt.is_floating_point:
        x = x.nan_to_num(0, 99, -99)
    if dt in (torch.int8, torch.uint8):
        x = x.remainder(100)
    return x.to(dt)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int8, torch.uint8],
                         ids=str)
def test_topk_threshold_filter_is_exact_with_and_without_its_fallback(dt):
    """The threshold filter (forced: 64 chunks, a cap of 2 next_pow2(k) survivors, at least 16) on rows of 1 / 45 / 700
    gives torch.topk's values and the stable sort's first k indices (the select path's, checked directly on one case);
    the long rows of ties overflow in the same call as the rows the filter finishes."""
    g = torch.Generator().manual_seed(7)
    cases = {1: ((1, True), (1, False)), 45: ((1, False), (7, True), (45, False)),
             700: ((1, True), (20, True), (20, False), (100, False))}
    for n, kl in cases.items():
        x = _filter_rows(dt, n, g)
        for k, largest in kl:
            with forced(filter=True, filter_chunks=64, filter_cap=max(2 * rows.next_power_of_2(k), 16)):
                v, i = _run("topk", x, k=k, largest=largest)
            tv, ti = torch.sort(x, descending=largest, stable=True)
            _same(i, ti[:, :k])
            _same(v, tv[:, :k])
            _same(v, torch.topk(x, k, largest=largest).values)
            if n == 700 and k == 20:
                with forced(filter=False, select=True):
                    _same(i, _run("topk", x, k=k, largest=largest)[1])


def test_topk_threshold_filter_flags_only_rows_past_the_cap(monkeypatch):
    """White box, one call: the filter alone (select stubbed out) writes exactly the rows it did not flag; the gated
    select alone (filter stubbed to set the flags) writes exactly the flagged rows; both together are exact.  The
    constant row and the row of ties overflow at the chunks (every chunk's best is the threshold), the last row
    (its 22 best values in one chunk of the 32) at the survivors."""
    g = torch.Generator().manual_seed(8)
    x = _filter_rows(torch.float32, 700, g)
    last = torch.randn(700, generator=g)
    last[::32] = 100.0 + torch.arange(22.0)
    x = torch.cat([x, last[None]])
    R, n, k = x.shape[0], x.shape[1], 5
    kw = dict(filter=True, filter_chunks=32, filter_cap=16, filter_gather=64)    # pass 2: steps of 64 lanes
    want_v, want_i = (t[:, :k] for t in torch.sort(x, descending=True, stable=True))
    with forced(**kw):
        M, C = rows.filter_shape(n, k)
        assert (M, C) == (32, 16)

        def call():     # (on the test device: the kernels launch for real on a GPU)
            ws = torch.zeros(rows.topk_ws_bytes(R, n, k, as_dtype(x.dtype)), dtype=torch.uint8, device=TDEV)
            v = torch.full((R, k), -5.0, device=TDEV)
            i = torch.full((R, k), -1, dtype=torch.int64, device=TDEV)
            rows.topk_rows(x.to(TDEV), v, i, k, True, ws)
            return v.cpu(), i.cpu(), rows._filter_bufs(ws, R, C)[1].cpu()

        with monkeypatch.context() as mp:
            no_launch = type("NoLaunch", (), {"__getitem__": lambda s, grid: lambda *a, **kw: None})()
            mp.setattr(rows, "_select_kernel", no_launch)
            v, i, flags = call()
        assert flags.tolist() == [0, 1, 1, 0, 0, 0, 1]
        done = flags == 0
        _same(v[done], want_v[done])
        _same(i[done], want_i[done])
        assert (i[~done] == -1).all()
        with monkeypatch.context() as mp:
            pattern = torch.tensor([1, 0, 1, 0, 0, 1, 0], device=TDEV)
            mp.setattr(rows, "threshold_filter", lambda xb, vb, ii, buf, fl, *a, **kw: fl.copy_(pattern))
            v, i, flags = call()
        picked = flags == 1
        _same(i[picked], want_i[picked])
        assert (i[~picked] == -1).all()
        v, i, flags = call()
        _same(v, want_v)
        _same(i, want_i)


def test_topk_routes_and_workspace():
    """Long rows of 16- and 32-bit keys take the threshold filter by default (a workspace of C int32 slots + one flag
    per row); 8-bit keys and 64-bit keys keep the radix select / chunked path; zero rows and k = 0 still run."""
    def plan(x, k):
        p = forced_plan(bc.Descriptor.like("topk", x, k=k), DEVICE, Backend.TRITON)
        assert not isinstance(p, str), p
        return p
    for dt in (torch.bfloat16, torch.float32, torch.int16):
        p = plan(torch.zeros(3, 4096, dtype=dt), 8)
        assert "threshold-filter" in str(p.sku), p.sku
        assert p.workspace_size == 3 * 256 * 4 + 256      # 3 rows x 256 int32 slots + 3 flags (aligned to 256 B)
    assert "radix-select" in str(plan(torch.zeros(3, 4096, dtype=torch.int8), 8).sku)
    assert "threshold-filter" not in str(plan(torch.zeros(3, 4096, dtype=torch.float64), 8).sku)
    assert "threshold-filter" not in str(plan(torch.zeros(3, 100), 8).sku)
    with forced(filter=False):
        assert "radix-select" in str(plan(torch.zeros(3, 4096), 8).sku)
    with forced(filter=True):
        for shape, k in (((0, 50), 3), ((4, 50), 0)):
            x = torch.randn(shape)
            v, i = _run("topk", x, k=k)
            assert v.shape == (shape[0], k) and i.shape == (shape[0], k)


def test_topk_values_match_torch_topk():
    """Without ties the indices are unique: they equal torch.topk's (which picks any tied position)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 100, generator=g)
    for k in (1, 10, 100):
        for largest in (True, False):
            ours, ref = bt.topk(x, k, largest=largest), torch.topk(x, k, largest=largest)
            _same(ours.values, ref.values)
            _same(ours.indices, ref.indices)


@pytest.mark.parametrize("op", ["sort", "topk", "msort"])
def test_gradients_through_the_saved_indices(op):
    g = torch.Generator().manual_seed(6)
    x = torch.randperm(60, generator=g).double().reshape(5, 12) / 7.0
    if op == "sort":
        grad_pair(lambda t: bt.sort(t, dim=0, descending=True)[0], lambda t: torch.sort(t, dim=0, descending=True)[0], x)
    elif op == "topk":
        grad_pair(lambda t: bt.topk(t, 4, dim=1)[0], lambda t: torch.topk(t, 4, dim=1)[0], x)
    else:
        grad_pair(bt.msort, torch.msort, x)


@pytest.mark.parametrize("backend", backends_for("sort_backward", DEVICE), ids=str)
def test_sort_backward_out_of_range_index_raises_and_writes_nothing_outside(backend):
    g = torch.randn(3, 4)
    idx = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [0, 9, 2, 1]])
    with pytest.raises(InvalidProblemError, match=r"sort_backward: argument 'indices'.*got 9"):
        _run("sort_backward", g, idx, backend=backend, dim=1, size=4)
        bc.check_errors()       # (on the GPU the value check is deferred by default)
    ok = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]])
    out = _run("sort_backward", g, ok, backend=backend, dim=1, size=6)
    _same(out, torch.zeros(3, 6).scatter(1, ok, g))


def test_dropins_return_torch_types():
    x = torch.randn(3, 5)
    assert isinstance(bt.sort(x), torch.return_types.sort)
    assert isinstance(bt.topk(x, 2), torch.return_types.topk)
    assert isinstance(bt.argsort(x, descending=True), torch.Tensor)
    assert isinstance(bt.msort(x), torch.Tensor)
    _same(bt.sort(x, stable=True, dim=0).indices, torch.sort(x, stable=True, dim=0).indices)


@needs_sm90
def test_workload_kernels_compile_for_sm90_without_spills():
    """The bench workloads' configurations (rows of 8192 f32 / 4096 f64 in registers, the radix path on f32 (the
    default) and f64 (4096-position blocks at 8 warps: 114-128 registers); not the block + merge path (64-bit keys'
    default, f32 when forced: its 8192-key blocks take 24-56 B of stack, f64's 4096-pair blocks 40 B; not bench
    workloads), topk's threshold filter and its
    gated radix select (bf16 rows of 32768, k = 1024 / 8: 125 / 63 registers), the order statistics' pick) compile
    for sm_90 with no stack (no spills) -- except topk's filter at bf16 k = 1024 (8192 chunks a row), which keeps
    8 B (16 B before its pass 2 took 4096 lanes a step) and measured faster than the spill-free 4096 chunks (1.375
    vs 1.551 ms, session 16 run F): at most 16."""
    run_sm90_script('''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda.backends.triton.sort.rows import forced
from baracuda.testing.sm90 import offline_launches, resources
cases = [("sort", torch.zeros(2, 8192), {}), ("sort", torch.zeros(2, 4096, dtype=torch.float64), {}),
         ("sort", torch.zeros(1, 20000), {}), ("sort", torch.zeros(1, 20000, dtype=torch.float64), {"radix": True}),
         ("topk", torch.zeros(2, 32768, dtype=torch.bfloat16), {"k": 1024}),
         ("topk", torch.zeros(2, 32768, dtype=torch.bfloat16), {"k": 8}), ("median", torch.zeros(2, 8192), {"dim": 1})]
for op, x, a in cases:
    force = {"radix": a.pop("radix")} if "radix" in a else {}
    d = bc.Descriptor.like(op, x, **a)
    impl = [i for i in implementations(op) if "triton" in str(i.backend).lower()][0]
    outs = [torch.empty(t.shape, dtype=t.dtype.torch) for t in d.outputs]
    with forced(**force):
        ws = torch.empty(max(impl.workspace(d), 8), dtype=torch.uint8)
        with offline_launches() as launches:
            impl.run(d, [x], outs, ws)
    for ln in launches:
        regs, stack = resources(ln.compiled)
        print(op, tuple(x.shape), ln.name, regs, stack, flush=True)
        allowed = 16 if op == "topk" and a.get("k") == 1024 and "filter" in ln.name else 0
        assert stack <= allowed, (op, ln.name, regs, stack)
print("ok")
''')
