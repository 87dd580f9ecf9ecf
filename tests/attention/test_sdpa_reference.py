"""sdpa / sdpa_varlen reference (the oracle of the flash kernels): against torch's F.scaled_dot_product_attention
in float64 on the CPU where torch expresses the case (top-left causal, bool / float masks with broadcasting, GQA via
enable_gqa, scale, rows with every key masked), against an independent dense float64 formula written here for
what torch has no argument for (bottom-right causal with Sq != Sk, windows, softcap, alibi, block masks), the
dropout generator against Triton's own tl.rand (a tiny kernel: interpreter or GPU) bit for bit, its statistics, and
the same mask in the forward and the backward; gradients (both outputs, out and lse) against torch.autograd of the
formula and float64 finite differences; varlen against sdpa per sequence, and its cu_seqlens value checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import baracuda as bc  # noqa: E402
from baracuda._core.device import triton_interpreting  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.reference.attention_sdpa import dropout_keep, tl_rand  # noqa: E402
from baracuda.testing import assert_close, finite_difference_grads, forced_plan  # noqa: E402

CPU = bc.as_device("cpu")
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))


def _run(op, *arrays, **attrs):
    """The reference backend's outputs (NumPy) for NumPy operands."""
    desc = bc.Descriptor.like(op, *arrays, **attrs)
    plan = forced_plan(desc, CPU, Backend.REFERENCE)
    assert not isinstance(plan, str), plan
    return plan.run(*arrays)


def _grads(op, arrays, gouts, **attrs):
    """The reference backward plan's input gradients for output gradients ``gouts`` (None: no gradient)."""
    desc = bc.Descriptor.like(op, *arrays, **attrs)
    outs = _run(op, *arrays, **attrs)
    bw = bc.BackwardPlan.select(desc, CPU, REF)
    names = desc.spec.arg_names
    saved = {n: (arrays[names.index(n)] if n in names else outs[int(n[3:])]) for n in bw.saves}
    return bw.run(*gouts, **saved)


# -- the independent dense formula (torch, float64, bhsd) -------------------------------------------------------
def formula(q, k, v, *, scale=None, causal="none", window_left=None, window_right=None, softcap=0.0, slopes=None,
            mask=None, block_mask=None, block_size=None, keep=None, p=0.0):
    """out, lse by the contract's words, one (i, j) condition at a time.  keep: the dropout keep mask [B, Hq, Sq,
    Sk] (bool) for probability p."""
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(D) if scale is None else scale
    kv_head = torch.arange(Hq) // (Hq // Hkv)               # query head h reads kv head h // (Hq / Hkv)
    kh, vh = k[:, kv_head], v[:, kv_head]
    s = scale * torch.einsum("bhid,bhjd->bhij", q, kh)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Sq).view(Sq, 1)
    j = torch.arange(Sk).view(1, Sk)
    if slopes is not None:
        sl = slopes.view(1, Hq, 1, 1) if slopes.dim() == 1 else slopes.view(B, Hq, 1, 1)
        s = s - sl * (i + Sk - Sq - j).abs()
    if mask is not None and mask.dtype != torch.bool:
        s = s + mask
    allowed = torch.ones(B, Hq, Sq, Sk, dtype=torch.bool)
    off = 0 if causal == "top_left" else Sk - Sq
    if causal != "none":
        allowed = allowed & (j <= i + off)
    if window_left is not None:
        allowed = allowed & (j >= i + off - window_left)
    if window_right is not None:
        allowed = allowed & (j <= i + off + window_right)
    if mask is not None and mask.dtype == torch.bool:
        allowed = allowed & mask
    if block_mask is not None:
        allowed = allowed & block_mask[:, :, i // block_size, j // block_size]
    s = s.masked_fill(~allowed, -math.inf)
    lse = torch.logsumexp(s, -1)
    P = torch.exp(s - lse[..., None]).nan_to_num(0.0)          # a row without keys: -inf - -inf -> 0
    if keep is not None:
        P = P * keep / (1 - p)
    return P @ vh, lse


def _qkv(g, B, Hq, Hkv, Sq, Sk, D, Dv):
    return (torch.randn(B, Hq, Sq, D, generator=g, dtype=torch.float64),
            torch.randn(B, Hkv, Sk, D, generator=g, dtype=torch.float64),
            torch.randn(B, Hkv, Sk, Dv, generator=g, dtype=torch.float64))


def _np(*ts):
    return [t.detach().numpy() for t in ts]


# -- against torch's F.scaled_dot_product_attention ---------------------------------------------------------------
TORCH_CASES = [  # (B, Hq, Hkv, Sq, Sk, D, Dv), is_causal, mask (kind, shape), scale
    ((2, 3, 3, 5, 5, 8, 8), False, None, None),
    ((2, 3, 3, 5, 9, 12, 12), True, None, None),          # top-left with Sq < Sk
    ((1, 2, 2, 9, 4, 8, 6), True, None, 0.5),             # top-left with Sq > Sk, Dv != D
    ((2, 8, 2, 6, 7, 20, 20), False, None, None),         # GQA 8/2 (enable_gqa)
    ((2, 4, 1, 6, 6, 12, 8), True, None, 0.3),            # MQA 4/1, causal
    ((2, 4, 2, 5, 6, 8, 8), False, ("bool", (5, 6)), None),
    ((2, 4, 4, 5, 6, 8, 8), False, ("bool", (2, 1, 1, 6)), None),        # key padding, broadcast over H and Sq
    ((2, 4, 4, 5, 6, 8, 8), False, ("float", (2, 4, 5, 6)), 0.7),
    ((1, 2, 2, 4, 6, 8, 8), False, ("float", (1, 6)), None),              # one row of biases for every query
    ((2, 2, 2, 5, 5, 4, 4), False, ("bool-empty-rows", (2, 1, 5, 5)), None),  # rows without keys
]


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("case", TORCH_CASES, ids=lambda c: f"{c[0]}-causal{c[1]}-{c[2] and c[2][0]}")
def test_matches_torch_sdpa_float64(case, layout):
    dims, causal, mask, scale = case
    g = torch.Generator().manual_seed(1)
    q, k, v = _qkv(g, *dims)
    m = None
    if mask is not None:
        kind, shape = mask
        m = torch.randn(shape, generator=g, dtype=torch.float64) if kind == "float" else \
            torch.rand(shape, generator=g) < 0.6
        if kind == "bool-empty-rows":
            m[:, :, 2] = False
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=scale,
                                          enable_gqa=dims[1] != dims[2])
    _, want_lse = formula(q, k, v, scale=scale, causal="top_left" if causal else "none", mask=m)
    ops = [q, k, v] if layout == "bhsd" else [t.transpose(1, 2) for t in (q, k, v)]   # strided bshd views
    ops = _np(*ops) + ([] if m is None else _np(m))
    out, lse = _run("sdpa", *ops, layout=layout, causal="top_left" if causal else "none", scale=scale,
                    has_mask=m is not None)
    out = out if layout == "bhsd" else out.swapaxes(1, 2)
    assert_close(out, want.numpy(), 1e-12, 1e-12, "out vs F.scaled_dot_product_attention")
    assert_close(lse, want_lse.numpy(), 1e-12, 1e-12, "lse vs logsumexp of the scores")
    if mask is not None and mask[0] == "bool-empty-rows":
        assert np.all(out[:, :, 2] == 0) and np.all(lse[:, :, 2] == -np.inf)   # torch's safe softmax: 0, no NaN


# -- against the dense formula: what torch has no argument for -----------------------------------------------------
FORMULA_CASES = [  # dims, attrs, extras (alibi shape, mask (kind, shape), block (size, B|1, H|1))
    ((2, 4, 2, 5, 9, 12, 12), {"causal": "bottom_right"}, {}),
    ((1, 2, 2, 9, 5, 8, 6), {"causal": "bottom_right"}, {}),                    # rows without keys (i < Sq - Sk)
    ((1, 2, 1, 8, 10, 8, 8), {"window_left": 2, "window_right": 1}, {}),
    ((1, 2, 2, 10, 8, 8, 8), {"causal": "top_left", "window_left": 3}, {}),
    ((1, 2, 2, 6, 9, 8, 8), {"causal": "bottom_right", "window_left": 0}, {}),  # each row: its diagonal key only
    ((2, 2, 2, 5, 7, 8, 8), {"softcap": 0.8, "scale": 2.0}, {}),
    ((2, 4, 2, 5, 6, 8, 8), {"causal": "bottom_right"}, {"alibi": (4,)}),
    ((2, 4, 4, 7, 4, 8, 8), {}, {"alibi": (2, 4)}),
    ((2, 2, 1, 7, 8, 8, 8), {}, {"block": (3, 2, 1)}),
    ((1, 4, 2, 6, 6, 20, 12), {"causal": "top_left", "softcap": 1.5}, {"block": (2, 1, 4), "alibi": (4,),
                                                                      "mask": ("float", (1, 1, 6, 6))}),
    ((2, 4, 2, 6, 8, 12, 8), {"causal": "bottom_right", "window_left": 4, "window_right": 0, "softcap": 2.0},
     {"alibi": (2, 4), "mask": ("bool", (2, 1, 6, 8)), "block": (3, 1, 1)}),
]


def _formula_problem(dims, attrs, extras, seed=2):
    """Operands (torch, bhsd) and the formula's keyword arguments of a FORMULA_CASES row."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = _qkv(g, *dims)
    B, Hq, _, Sq, Sk = dims[:5]
    kw, ops, flags = dict(attrs), [], {}
    if "mask" in extras:
        kind, shape = extras["mask"]
        m = torch.randn(shape, generator=g, dtype=torch.float64) if kind == "float" else \
            torch.rand(shape, generator=g) < 0.7
        ops.append(m)
        kw["mask"], flags["has_mask"] = m, True
    if "alibi" in extras:
        sl = torch.rand(extras["alibi"], generator=g, dtype=torch.float64)
        ops.append(sl)
        kw["slopes"], flags["has_alibi"] = sl, True
    if "block" in extras:
        bs, bb, bh = extras["block"]
        bm = torch.rand(bb, bh, -(-Sq // bs), -(-Sk // bs), generator=g) < 0.6
        ops.append(bm)
        kw["block_mask"], kw["block_size"], flags["block_size"] = bm, bs, bs
    return (q, k, v), ops, kw, flags


@pytest.mark.parametrize("case", FORMULA_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c[1].items())
                         + "-" + "-".join(c[2]))
def test_matches_the_dense_formula(case):
    dims, attrs, extras = case
    (q, k, v), ops, kw, flags = _formula_problem(dims, attrs, extras)
    want, want_lse = formula(q, k, v, **kw)
    for layout in ("bhsd", "bshd"):
        qkv = (q, k, v) if layout == "bhsd" else tuple(t.transpose(1, 2) for t in (q, k, v))
        out, lse = _run("sdpa", *_np(*qkv, *ops), layout=layout, **attrs, **flags)
        assert_close(out if layout == "bhsd" else out.swapaxes(1, 2), want.numpy(), 1e-12, 1e-12, f"{layout} out")
        assert_close(lse, want_lse.numpy(), 1e-12, 1e-12, f"{layout} lse")
        assert not np.isnan(out).any()


# -- dropout: Triton's generator, its statistics, one mask for forward and backward --------------------------------
def test_tl_rand_reimplementation_matches_triton_bit_for_bit():
    """tl.rand in a tiny kernel (the Triton interpreter on CPU tensors under TRITON_INTERPRET=1, else compiled on the
    GPU): the seeds' high words, counters past 2**32 (their high word).  (A kernel made for the interpreter by
    setting TRITON_INTERPRET inside a process whose triton.language was jitted without it cannot call tl.rand: the
    switch is read as each @triton.jit function is defined.)"""
    triton = pytest.importorskip("triton")
    tl = pytest.importorskip("triton.language")
    if triton_interpreting():
        dev = "cpu"
    elif torch.cuda.is_available():
        dev = "cuda"
    else:
        pytest.skip("no Triton to run a kernel on: neither TRITON_INTERPRET=1 nor a CUDA device")

    @triton.jit
    def draw(out, seed, base, N: tl.constexpr):
        n = base + tl.arange(0, N).to(tl.int64)
        tl.store(out + tl.arange(0, N), tl.rand(seed, n))

    for seed in (0, 5, 2 ** 40 + 3, 2 ** 63 - 1):
        for base in (0, 2 ** 31 - 7, 2 ** 33 + 5):
            got = torch.empty(256, dtype=torch.float32, device=dev)
            draw[(1,)](got, seed, base, N=256)
            want = tl_rand(seed, base + np.arange(256, dtype=np.int64))
            assert want.dtype == np.float32
            assert np.array_equal(got.cpu().numpy(), want), (seed, base)


def test_dropout_mask_statistics():
    """keep ~ Bernoulli(1 - p) independently: the kept fraction within 5 sigma, uniforms evenly spread over 16
    bins (chi-square well under its 99.9% point), neighbouring counters uncorrelated."""
    n = 1 << 16
    u = tl_rand(123, np.arange(n, dtype=np.int64) + 77).astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    for p in (0.1, 0.5, 0.9):
        kept = dropout_keep(123, np.arange(n, dtype=np.int64) + 77, p).mean()
        assert abs(kept - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n), (p, kept)
    counts = np.histogram(u, bins=16, range=(0, 1))[0]
    chi2 = ((counts - n / 16) ** 2 / (n / 16)).sum()
    assert chi2 < 37.7                                         # chi-square, 15 dof, p = 0.001
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 5 / math.sqrt(n)


def test_dropout_counter_layout_and_unbiased_output():
    """Entry (b, h, i, j) is kept iff tl.rand(seed, offset + ((b Hq + h) Sq + i) Sk + j) >= p (checked entry by
    entry through the output: out with one-hot v columns is P * keep / (1 - p)), and averaged over seeds the dropped
    output approaches the undropped one (E[keep / (1 - p)] = 1)."""
    B, Hq, Hkv, Sq, Sk, D = 2, 2, 1, 3, 4, 4
    g = torch.Generator().manual_seed(3)
    q, k, _ = _qkv(g, B, Hq, Hkv, Sq, Sk, D, D)
    eye = torch.eye(Sk, dtype=torch.float64).expand(B, Hkv, Sk, Sk)   # out = P @ I = the dropped P itself
    p, seed, offset = 0.4, 2 ** 34 + 1, 1000
    out, _ = _run("sdpa", *_np(q, k, eye), dropout_p=p, seed=seed, offset=offset)
    undropped, _ = _run("sdpa", *_np(q, k, eye))
    for b, h, i, j in np.ndindex(B, Hq, Sq, Sk):
        u = tl_rand(seed, np.array([offset + ((b * Hq + h) * Sq + i) * Sk + j]))[0]
        want = undropped[b, h, i, j] / (1 - p) if u >= np.float32(p) else 0.0
        assert out[b, h, i, j] == pytest.approx(want, rel=1e-14, abs=0)
    mean = np.mean([_run("sdpa", *_np(q, k, eye), dropout_p=p, seed=s)[0] for s in range(400)], axis=0)
    # each entry: a mean of 400 draws of P keep / (1 - p), std P sqrt(p / (1 - p) / 400) <= 0.041 P
    assert_close(mean, undropped, 0.21, 1e-12, "mean of dropped outputs")


def test_dropout_backward_uses_the_forwards_mask():
    """Gradients with dropout equal torch.autograd of the formula with the forward's keep mask (regenerated from
    seed / offset, never stored): a backward drawing another mask would differ."""
    dims = (1, 4, 2, 5, 6, 8, 4)
    g = torch.Generator().manual_seed(4)
    q, k, v = (t.requires_grad_() for t in _qkv(g, *dims))
    p, seed, offset = 0.3, 77, 12
    n = offset + np.arange(np.prod((1, 4, 5, 6)), dtype=np.int64).reshape(1, 4, 5, 6)
    keep = torch.from_numpy(dropout_keep(seed, n, p))
    attrs = dict(dropout_p=p, seed=seed, offset=offset, causal="bottom_right")
    out, lse = formula(q, k, v, causal="bottom_right", keep=keep, p=p)
    got_out, got_lse = _run("sdpa", *_np(q, k, v), **attrs)
    assert_close(got_out, out.detach().numpy(), 1e-12, 1e-12, "dropped out")
    go, gl = torch.randn(out.shape, generator=g, dtype=torch.float64), torch.randn(lse.shape, generator=g,
                                                                                   dtype=torch.float64)
    want = torch.autograd.grad((out, lse), (q, k, v), (go, gl))
    got = _grads("sdpa", _np(q, k, v), _np(go, gl), **attrs)
    for n_, a, b in zip("qkv", got, want):
        assert_close(a, b.numpy(), 1e-11, 1e-12, f"d{n_} with dropout")
    other = _grads("sdpa", _np(q, k, v), _np(go, gl), **dict(attrs, seed=seed + 1))
    assert not np.allclose(other[2], got[2]), "another seed must give another mask"


# -- gradients ------------------------------------------------------------------------------------------------
GRAD_CASES = FORMULA_CASES[:1] + FORMULA_CASES[2:4] + FORMULA_CASES[5:] + [
    ((2, 4, 2, 5, 6, 8, 8), {"causal": "top_left", "scale": 0.4}, {"mask": ("bool", (2, 1, 5, 6))}),
    ((1, 4, 1, 3, 5, 12, 20), {}, {"mask": ("float", (5,))}),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c[1].items())
                         + "-" + "-".join(c[2]))
def test_gradients_match_torch_autograd_of_the_formula(case):
    """dq, dk, dv for upstream gradients of both outputs, GQA heads summed per kv head, bshd too."""
    dims, attrs, extras = case
    (q, k, v), ops, kw, flags = _formula_problem(dims, attrs, extras, seed=5)
    for t in (q, k, v):
        t.requires_grad_()
    out, lse = formula(q, k, v, **kw)
    g = torch.Generator().manual_seed(6)
    go = torch.randn(out.shape, generator=g, dtype=torch.float64)
    gl = torch.randn(lse.shape, generator=g, dtype=torch.float64).masked_fill(torch.isinf(lse), 0.0)
    want = torch.autograd.grad((out, lse), (q, k, v), (go, gl))
    got = _grads("sdpa", _np(q, k, v, *ops), _np(go, gl), **attrs, **flags)
    for n, a, b in zip("qkv", got, want):
        assert_close(a, b.numpy(), 1e-11, 1e-12, f"d{n}")
    # bshd: the same numbers transposed
    qkv = [t.detach().transpose(1, 2) for t in (q, k, v)]
    got = _grads("sdpa", _np(*qkv, *ops), [go.transpose(1, 2).numpy(), gl.numpy()], layout="bshd", **attrs, **flags)
    for n, a, b in zip("qkv", got, want):
        assert_close(a.swapaxes(1, 2), b.numpy(), 1e-11, 1e-12, f"bshd d{n}")


@pytest.mark.parametrize("attrs,extras", [({"causal": "bottom_right", "softcap": 1.3}, {"alibi": (2,)}),
                                          ({"window_left": 1, "window_right": 1, "dropout_p": 0.2, "seed": 9},
                                           {"mask": ("float", (1, 2, 3, 4))})])
def test_gradients_match_finite_differences(attrs, extras):
    dims = (1, 2, 1, 3, 4, 4, 3)
    (q, k, v), ops, _, flags = _formula_problem(dims, attrs, extras, seed=8)
    arrays = _np(q, k, v, *ops)
    desc = bc.Descriptor.like("sdpa", *arrays, **attrs, **flags)
    rng = np.random.default_rng(0)
    gouts = [rng.standard_normal(t.shape) for t in desc.outputs]
    want = finite_difference_grads(desc, arrays, gouts)
    got = _grads("sdpa", arrays, gouts, **attrs, **flags)
    for n, a, b in zip("qkv", got, want):
        assert_close(a, b, 1e-6, 1e-7, f"d{n} vs finite differences")


def test_rows_without_keys_give_zero_gradients_and_no_nan():
    dims = (1, 2, 2, 6, 3, 4, 4)                     # bottom-right, Sq > Sk: rows 0..2 see no key
    g = torch.Generator().manual_seed(9)
    q, k, v = _qkv(g, *dims)
    out, lse = _run("sdpa", *_np(q, k, v), causal="bottom_right")
    assert np.all(out[:, :, :3] == 0) and np.all(lse[:, :, :3] == -np.inf) and np.isfinite(lse[:, :, 3:]).all()
    go = np.random.default_rng(1).standard_normal(out.shape)
    dq, dk, dv = _grads("sdpa", _np(q, k, v), [go, None], causal="bottom_right")
    assert np.all(dq[:, :, :3] == 0) and not any(np.isnan(x).any() for x in (dq, dk, dv))


def test_lse_gradient_alone():
    """Only lse's gradient flowing (grad_out None: the rule passes zeros): d lse_i / d s_ij = P_ij."""
    g = torch.Generator().manual_seed(10)
    q, k, v = (t.requires_grad_() for t in _qkv(g, 1, 2, 1, 4, 5, 4, 4))
    _, lse = formula(q, k, v, causal="bottom_right")
    gl = torch.randn(lse.shape, generator=g, dtype=torch.float64)
    want = torch.autograd.grad(lse, (q, k), gl)
    dq, dk, dv = _grads("sdpa", _np(q, k, v), [None, gl.numpy()], causal="bottom_right")
    assert_close(dq, want[0].numpy(), 1e-12, 1e-12, "dq")
    assert_close(dk, want[1].numpy(), 1e-12, 1e-12, "dk")
    assert np.all(dv == 0)


# -- varlen ---------------------------------------------------------------------------------------------------
def _varlen_problem(lq, lk, Hq, Hkv, D, Dv, seed=11):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((sum(lq), Hq, D)), rng.standard_normal((sum(lk), Hkv, D)), \
        rng.standard_normal((sum(lk), Hkv, Dv))
    cu = [np.concatenate(([0], np.cumsum(x))).astype(np.int32) for x in (lq, lk)]
    return q, k, v, cu[0], cu[1]


@pytest.mark.parametrize("attrs,alibi", [({"causal": "bottom_right"}, None), ({"causal": "top_left", "softcap": 1.1},
                                         "B"), ({"window_left": 2, "window_right": 1, "scale": 0.6}, "H")])
def test_varlen_is_sdpa_per_sequence(attrs, alibi):
    lq, lk = (3, 0, 5, 1, 4), (4, 2, 5, 3, 0)
    q, k, v, cq, ck = _varlen_problem(lq, lk, 4, 2, 8, 6)
    Hq = q.shape[1]
    ex = [] if alibi is None else [np.random.default_rng(1).uniform(0.1, 1, (len(lq), Hq) if alibi == "B" else Hq)]
    va = dict(attrs, max_seqlen_q=6, max_seqlen_k=5, has_alibi=alibi is not None)
    out, lse = _run("sdpa_varlen", q, k, v, cq, ck, *ex, **va)
    rng = np.random.default_rng(2)
    go, gl = rng.standard_normal(out.shape), np.where(np.isfinite(lse), rng.standard_normal(lse.shape), 0)
    dq, dk, dv = _grads("sdpa_varlen", [q, k, v, cq, ck, *ex], [go, gl], **va)[:3]
    for b in range(len(lq)):
        rq, rk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        sub = [x[None] for x in (q[rq], k[rk], v[rk])]
        sex = [] if alibi is None else [ex[0][b] if alibi == "B" else ex[0]]
        sa = dict(attrs, layout="bshd", has_alibi=alibi is not None)
        o, l_ = _run("sdpa", *sub, *sex, **sa)
        assert_close(out[rq], o[0], 1e-12, 1e-12, f"seq {b} out")
        assert_close(lse[:, rq], l_[0], 1e-12, 1e-12, f"seq {b} lse")
        if lq[b]:
            g = _grads("sdpa", sub + sex, [go[rq][None], gl[:, rq][None]], **sa)
            assert_close(dq[rq], g[0][0], 1e-11, 1e-12, f"seq {b} dq")
            assert_close(dk[rk], g[1][0], 1e-11, 1e-12, f"seq {b} dk")
            assert_close(dv[rk], g[2][0], 1e-11, 1e-12, f"seq {b} dv")
        else:
            assert np.all(dk[rk] == 0) and np.all(dv[rk] == 0)


def test_varlen_dropout_counters_use_the_max_lengths():
    """Sequence b's counter is offset + ((b Hq + h) max_seqlen_q + i) max_seqlen_k + j (its local i, j)."""
    lq, lk, Hq = (2, 3), (3, 4), 2
    q, k, _, cq, ck = _varlen_problem(lq, lk, Hq, 1, 4, 4)
    Mq, Mk, p, seed, offset = 5, 6, 0.5, 3, 9
    eye = np.zeros((sum(lk), 1, max(lk)))
    for b in range(2):
        eye[ck[b]:ck[b + 1], 0, :lk[b]] = np.eye(lk[b])              # out = the dropped P of each sequence
    attrs = dict(max_seqlen_q=Mq, max_seqlen_k=Mk)
    out, _ = _run("sdpa_varlen", q, k, eye, cq, ck, dropout_p=p, seed=seed, offset=offset, **attrs)
    ref, _ = _run("sdpa_varlen", q, k, eye, cq, ck, **attrs)
    for b in range(2):
        for h, i, j in np.ndindex(Hq, lq[b], lk[b]):
            u = tl_rand(seed, np.array([offset + ((b * Hq + h) * Mq + i) * Mk + j]))[0]
            want = ref[cq[b] + i, h, j] / (1 - p) if u >= np.float32(p) else 0.0
            assert out[cq[b] + i, h, j] == pytest.approx(want, rel=1e-14, abs=0)


@pytest.mark.parametrize("arg,cu,match", [
    ("cu_seqlens_q", [1, 3, 7], r"argument 'cu_seqlens_q': expected offsets starting at 0, got \[1, 3, 7\]"),
    ("cu_seqlens_q", [0, 5, 3], r"argument 'cu_seqlens_q': expected non-decreasing offsets"),
    ("cu_seqlens_q", [0, 3, 6], r"argument 'cu_seqlens_q': expected offsets ending at Tq=7, got \[0, 3, 6\]"),
    ("cu_seqlens_k", [0, 2, 9], r"argument 'cu_seqlens_k': expected sequence lengths <= max_seqlen_k=6, got \[2, 7\]"),
    ("cu_seqlens_k", [0, 4, 8], r"argument 'cu_seqlens_k': expected offsets ending at Tk=9"),
])
def test_varlen_checks_cu_seqlens_values(arg, cu, match):
    q, k, v, cq, ck = _varlen_problem((3, 4), (4, 5), 2, 2, 4, 4)
    cus = {"cu_seqlens_q": cq, "cu_seqlens_k": ck}
    cus[arg] = np.array(cu, dtype=np.int64 if arg == "cu_seqlens_k" else np.int32)
    if arg == "cu_seqlens_k":
        cus["cu_seqlens_k"] = cus["cu_seqlens_k"].astype(np.int32)
    with pytest.raises(bc.InvalidProblemError, match=match):
        _run("sdpa_varlen", q, k, v, cus["cu_seqlens_q"], cus["cu_seqlens_k"], max_seqlen_q=6, max_seqlen_k=6)


def test_descriptor_resolves_scale_and_counts_flops():
    d = bc.Descriptor.make("sdpa", ((1, 2, 8, 16), "bf16"), ((1, 2, 8, 16), "bf16"), ((1, 2, 8, 16), "bf16"),
                           causal="top_left")
    assert d.attr("scale") == 0.25 and d.outputs[1].dtype == bc.DType.f32
    _, flops = d.spec.bytes_flops(d)
    assert flops == 2 * 36 * 2 * (16 + 16)               # 2 heads x 36 allowed pairs (8 * 9 / 2) x 2 (D + Dv)
    dn = bc.Descriptor.make("sdpa", ((1, 2, 8, 16), "bf16"), ((1, 2, 8, 16), "bf16"), ((1, 2, 8, 16), "bf16"))
    assert dn.spec.bytes_flops(dn)[1] == 2 * 64 * 64
