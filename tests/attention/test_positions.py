"""rope_tables and alibi_slopes: values against formulas written here from the papers and HF transformers' rope init
semantics (transformers is not installed in this environment, so its ROPE_INIT_FUNCTIONS cannot be called: each
scaling is re-derived below per frequency, in float64, in a different form from the op's vectorized host code),
for published configurations (Llama-3.1 8B's llama3 scaling, Qwen2's YaRN, DeepSeek-V3's YaRN with mscale, Phi-3's
LongRoPE, dynamic NTK below and above the original context) at positions up to 131072; the f32 error bound where
an f32 angle fails; rope over rope_tables' cache with positions end to end; ALiBi slopes against the paper's
recursive definition."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda.ops.attention_pos import DEEPSEEK_YARN, LLAMA31, QWEN2_YARN, phi3_longrope  # noqa: E402
from baracuda.testing import backends_for  # noqa: E402
from baracuda.testing.checks import DEVICE, run_on  # noqa: E402

BACKENDS = backends_for("rope_tables", DEVICE)
# f32 tables: the bound of the spec's tolerance (ops/attention_pos.py: _table_tol): f64 angle and reduction, the
# reduced angle rounded to f32 (1.2e-7 rad), f32 cos / sin (1 ulp), the attention factor (<= 1.4 here)
F32_ATOL, F32_RTOL = 4e-7, 2 ** -22
# f64 tables: the angle position * inv_freq is one f64 product in both (~|theta| 2^-53 ~ 1.5e-11 at 1.3e5 rad);
# the kernel's reduction adds the rounding of rint(.) * 2 pi (~ the same): 1e-10 leaves a factor of 3
F64_ATOL = 1e-10


# -- the formulas, per frequency i of dim = R (theta_i = base^(-2i / R)) ------------------------------------------
def _theta(R, base):
    return [base ** (-2 * i / R) for i in range(R // 2)]


def _llama3(R, base, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings, **_):
    """Llama 3.1 (Meta's apply_scaling): keep high frequencies, divide low ones by factor, blend in between by
    the number of turns the frequency makes over the original context."""
    out = []
    for th in _theta(R, base):
        wavelen = 2 * math.pi / th
        if wavelen < original_max_position_embeddings / high_freq_factor:
            out.append(th)
        elif wavelen > original_max_position_embeddings / low_freq_factor:
            out.append(th / factor)
        else:
            w = (original_max_position_embeddings / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(w * th + (1 - w) * th / factor)
    return out, 1.0


def _yarn(R, base, factor, original_max_position_embeddings, beta_fast=32.0, beta_slow=1.0, mscale=None,
          mscale_all_dim=None, attention_factor=None, truncate=True, **_):
    """YaRN's NTK-by-parts as the reference implementation (jquesnelle/yarn, HF) does it: the dim d where a
    frequency turns r times over the original context solves L / (2 pi base^(2d/R)) = r; between the dims of
    beta_fast and beta_slow turns (rounded outward) the blend weight ramps linearly in d."""
    L = original_max_position_embeddings

    def dim_for_turns(r):
        return R / 2 * math.log(L / (2 * math.pi * r)) / math.log(base)

    a, b = dim_for_turns(beta_fast), dim_for_turns(beta_slow)
    if truncate:
        a, b = math.floor(a), math.ceil(b)
    a, b = max(a, 0), min(b, R - 1)
    b = b + 0.001 if a == b else b
    out = []
    for i, th in enumerate(_theta(R, base)):
        interp = min(max((i - a) / (b - a), 0.0), 1.0)   # 0: extrapolate (keep), 1: interpolate (/ factor)
        out.append(th * (1 - interp) + th / factor * interp)

    def m(s, k):
        return 1.0 if s <= 1 else 0.1 * k * math.log(s) + 1

    if attention_factor is None:
        attention_factor = m(factor, mscale) / m(factor, mscale_all_dim) if mscale and mscale_all_dim else m(factor, 1)
    return out, attention_factor


def _dynamic(R, base, factor, max_position_embeddings, seq_len=None, **_):
    L = max(seq_len or 0, max_position_embeddings)
    b = base * ((factor * L / max_position_embeddings) - (factor - 1)) ** (R / (R - 2))
    return _theta(R, b), 1.0


def _longrope(R, base=10000.0, original_max_position_embeddings=4096, max_position_embeddings=131072,
              seq_len=None, long_factor=(), short_factor=(), **_):
    ext = long_factor if seq_len is not None and seq_len > original_max_position_embeddings else short_factor
    s = max_position_embeddings / original_max_position_embeddings
    return [th / e for th, e in zip(_theta(R, base), ext)], \
        math.sqrt(1 + math.log(s) / math.log(original_max_position_embeddings))


def _want(attrs, pos):
    """cos, sin float64 [..., R/2] of the formula for attrs at integer positions pos (a torch int tensor)."""
    a = dict(attrs)
    R, base, sc = a.pop("rotary_dim"), a.pop("base", 10000.0), a.pop("scaling", "default")
    inv, att = {"default": lambda **k: (_theta(R, base), 1.0), "llama3": _llama3, "yarn": _yarn,
                "dynamic": _dynamic, "longrope": _longrope,
                "linear": lambda factor, **k: ([t / factor for t in _theta(R, base)], 1.0)}[sc](R=R, base=base, **a)
    ang = pos.double()[..., None] * torch.tensor(inv, dtype=torch.float64)
    return att * torch.cos(ang), att * torch.sin(ang)


def _positions(seed, n=48, hi=131072):
    """Positions over a 128k context: the ends (0, 131071, 131072), and random ones."""
    g = torch.Generator().manual_seed(seed)
    return torch.cat((torch.tensor([0, 1, 8191, 8192, 32768, 131071, 131072]), torch.randint(0, hi + 1, (n,),
                                                                                              generator=g)))


_RNG = np.random.default_rng(0)
CONFIGS = {
    "llama3.1-8b": LLAMA31,
    "qwen2-yarn": QWEN2_YARN,
    "deepseek-v3-yarn": DEEPSEEK_YARN,
    "yarn-no-truncate-attn": dict(rotary_dim=64, scaling="yarn", factor=8.0, original_max_position_embeddings=2048,
                                  truncate=False, beta_fast=16.0, beta_slow=2.0, attention_factor=1.25),
    "phi3-longrope-short": phi3_longrope(_RNG, 4096),
    "phi3-longrope-long": phi3_longrope(_RNG, 131072),
    "dynamic-below": dict(rotary_dim=128, scaling="dynamic", factor=4.0, max_position_embeddings=4096, seq_len=2000),
    "dynamic-above": dict(rotary_dim=128, scaling="dynamic", factor=4.0, max_position_embeddings=4096,
                          seq_len=131073),
    "linear": dict(rotary_dim=96, base=10000.0, scaling="linear", factor=4.0),
    "default": dict(rotary_dim=128, base=500000.0),
}


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_tables_match_the_scaling_formulas_up_to_position_131072(backend, name):
    attrs = CONFIGS[name]
    pos = _positions(list(CONFIGS).index(name))
    wc, ws = _want(attrs, pos)
    c, s = run_on("rope_tables", pos, backend=backend, **attrs)
    assert c.dtype == torch.float32 and c.shape == (len(pos), attrs["rotary_dim"] // 2)
    for got, want in ((c, wc), (s, ws)):
        torch.testing.assert_close(got.double(), want, rtol=F32_RTOL, atol=F32_ATOL)
    c64, s64 = run_on("rope_tables", pos.int(), backend=backend, dtype="f64", **attrs)
    for got, want in ((c64, wc), (s64, ws)):
        torch.testing.assert_close(got, want, rtol=0, atol=F64_ATOL)


def test_scalings_keep_the_papers_invariants():
    """Properties stated in the papers, on the op's float64 tables: Llama 3.1 keeps the frequencies of wavelength
    under 8192 / 4 and divides those over 8192 by 8; YaRN keeps the frequencies turning more than beta_fast times in
    the original context and interpolates those turning less than beta_slow; dynamic NTK below its context is the
    default table; LongRoPE with all factors 1 is the default table scaled by its attention factor."""
    pos = torch.arange(1, 2)   # position 1: the table is cos / sin of inv_freq itself
    inv0 = torch.tensor(_theta(128, 500000.0), dtype=torch.float64)

    def inv_of(**attrs):
        c, s = run_on("rope_tables", pos, backend=bc.Backend.REFERENCE, dtype="f64", **attrs)
        return torch.atan2(s, c)[0], torch.hypot(s, c)[0]   # the angle at position 1 and the attention factor

    inv, att = inv_of(**LLAMA31)
    wl = 2 * math.pi / inv0
    torch.testing.assert_close(inv[wl < 2048], inv0[wl < 2048], rtol=1e-14, atol=0)
    torch.testing.assert_close(inv[wl > 8192], inv0[wl > 8192] / 8, rtol=1e-14, atol=0)
    assert (wl < 2048).any() and (wl > 8192).any() and ((wl >= 2048) & (wl <= 8192)).any()
    torch.testing.assert_close(att, torch.ones_like(att), rtol=1e-15, atol=0)

    inv, att = inv_of(**QWEN2_YARN)
    inv0 = torch.tensor(_theta(128, 1e6), dtype=torch.float64)
    turns = 32768 * inv0 / (2 * math.pi)
    torch.testing.assert_close(inv[turns > 64], inv0[turns > 64], rtol=1e-14, atol=0)        # beyond the rounding
    torch.testing.assert_close(inv[turns < 0.5], inv0[turns < 0.5] / 4, rtol=1e-14, atol=0)
    torch.testing.assert_close(att, torch.full_like(att, 0.1 * math.log(4) + 1), rtol=1e-14, atol=0)

    dyn = dict(rotary_dim=64, scaling="dynamic", factor=2.0, max_position_embeddings=4096)
    for L in (None, 100, 4096):
        inv, _ = inv_of(seq_len=L, **dyn)
        torch.testing.assert_close(inv, torch.tensor(_theta(64, 10000.0), dtype=torch.float64), rtol=1e-14, atol=0)
    inv, _ = inv_of(seq_len=8192, **dyn)
    assert (inv[1:] < torch.tensor(_theta(64, 10000.0), dtype=torch.float64)[1:]).all()   # a larger base

    lr = dict(rotary_dim=8, scaling="longrope", original_max_position_embeddings=4096, factor=32.0,
              long_factor=(1.0,) * 4, short_factor=(1.0,) * 4)
    inv, att = inv_of(**lr)
    torch.testing.assert_close(inv, torch.tensor(_theta(8, 10000.0), dtype=torch.float64), rtol=1e-14, atol=0)
    torch.testing.assert_close(att, torch.full_like(att, math.sqrt(1 + math.log(32) / math.log(4096))),
                               rtol=1e-14, atol=0)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_f32_tables_stay_accurate_where_an_f32_angle_does_not(backend):
    """At positions near 131072 an angle formed in f32 (HF computes inv_freq @ positions in f32) is off by up to
    |theta| 2^-24 ~ 8e-3 rad; the op's f64 angle and reduction keep the f32 tables within 4e-7."""
    pos = torch.arange(131072 - 40, 131072 + 1)
    attrs = dict(rotary_dim=64, base=10000.0)
    wc, _ = _want(attrs, pos)
    inv32 = torch.tensor(_theta(64, 10000.0), dtype=torch.float32)
    f32_angle = torch.cos(pos.float()[:, None] * inv32).double()
    assert (f32_angle - wc).abs().max() > 1e-3
    c, _ = run_on("rope_tables", pos, backend=backend, **attrs)
    assert (c.double() - wc).abs().max() <= F32_ATOL


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_positions_of_any_shape_and_strides(backend):
    """[B, S] and [B, S, 2]-column positions (strided, read in place), 0-d, negative positions (rotations the other
    way: cos even, sin odd), zero-size."""
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(-4096, 4096, (3, 5, 2), generator=g)
    attrs = dict(rotary_dim=12, scaling="linear", factor=2.0)
    for pos in (ids[..., 0], ids[..., 1].t(), torch.tensor(77), ids[:, :0, 0]):
        c, s = run_on("rope_tables", pos, backend=backend, **attrs)
        wc, ws = _want(attrs, pos)
        assert c.shape == tuple(pos.shape) + (6,)
        torch.testing.assert_close(c.double(), wc, rtol=F32_RTOL, atol=F32_ATOL)
        torch.testing.assert_close(s.double(), ws, rtol=F32_RTOL, atol=F32_ATOL)
    c, s = run_on("rope_tables", -ids[..., 0], backend=backend, **attrs)
    c2, s2 = run_on("rope_tables", ids[..., 0], backend=backend, **attrs)
    torch.testing.assert_close(c, c2, rtol=0, atol=2 * F32_ATOL)
    torch.testing.assert_close(s, -s2, rtol=0, atol=2 * F32_ATOL)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_rope_over_a_rope_tables_cache_with_positions_is_hf_apply_rotary(backend):
    """A decode step as serving code runs it: a Llama-3.1 table cache built once by rope_tables, then rope of q at
    each sequence's own position (positions [B, 1] near 100k), against HF's apply_rotary_pos_emb in float64
    (rotate_half with cos / sin of the formula, concatenated to the head dim)."""
    B, H, D = 3, 4, 32
    attrs = dict(LLAMA31, rotary_dim=D)
    start = 100000
    cache_pos = torch.arange(start, start + 64)
    cos, sin = run_on("rope_tables", cache_pos, backend=backend, dtype="f64", **attrs)
    g = torch.Generator().manual_seed(5)
    q = torch.randn(B, 1, H, D, generator=g, dtype=torch.float64)
    rows = torch.tensor([[3], [63], [0]])
    got = run_on("rope", q, cos, sin, rows, backend=backend, has_positions=True)
    wc, ws = _want(attrs, cache_pos[rows])                       # [B, 1, D/2]
    wc, ws = torch.cat((wc, wc), -1)[:, :, None], torch.cat((ws, ws), -1)[:, :, None]
    rot = torch.cat((-q[..., D // 2:], q[..., : D // 2]), -1)
    torch.testing.assert_close(got, q * wc + rot * ws, rtol=1e-9, atol=1e-9)


def test_tables_are_not_differentiable():
    for desc in (bc.Descriptor.make("rope_tables", ((5,), "i64"), rotary_dim=8),
                 bc.Descriptor.make("alibi_slopes", n_heads=8)):
        assert not desc.spec.is_differentiable
        with pytest.raises(bc.UnsupportedError, match=r"has no backward \(not differentiable\)"):
            bc.BackwardPlan.select(desc, "cpu")


def test_unused_scaling_parameters_are_errors_not_ignored():
    for sc, extra in (("default", {"factor": 2.0}), ("linear", {"factor": 2.0, "beta_fast": 8.0}),
                      ("llama3", dict(LLAMA31, rotary_dim=8, seq_len=10)),
                      ("yarn", dict(QWEN2_YARN, long_factor=(1.0,) * 4))):
        attrs = dict(extra, scaling=sc, rotary_dim=8)
        with pytest.raises(bc.InvalidProblemError, match=rf"rope_tables: argument '\w+': expected None for "
                                                         rf"scaling='{sc}'"):
            bc.Descriptor.make("rope_tables", ((5,), "i64"), **attrs)


# -- ALiBi ----------------------------------------------------------------------------------------------------
def _press_slopes(n):
    """The ALiBi paper's reference definition (Press et al., get_slopes): a geometric sequence starting at and
    with ratio 2^(-8/n) for a power of two n; otherwise that of the closest lower power of two followed by every
    other slope of the next one."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if n == 0:
        return []
    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + _press_slopes(2 * c)[0::2][: n - c]


@pytest.mark.parametrize("backend", backends_for("alibi_slopes", DEVICE), ids=str)
def test_alibi_slopes_are_the_papers(backend):
    for n in (1, 2, 3, 5, 8, 12, 16, 20, 24, 40, 64, 71, 96, 100, 128, 0):
        got = run_on("alibi_slopes", backend=backend, n_heads=n)
        assert got.dtype == torch.float32 and got.shape == (n,)
        want = torch.tensor(_press_slopes(n), dtype=torch.float64)
        # the paper's product of powers is exact to a few f64 ulps; ours is rounded once to f32
        torch.testing.assert_close(got.double(), want, rtol=2 ** -24, atol=0)
        assert torch.equal(got, want.float())   # correctly rounded
    s8 = run_on("alibi_slopes", backend=backend, n_heads=8)
    assert s8.tolist() == [2.0 ** -k for k in range(1, 9)]
