"""Attention family, position encodings: RoPE cos / sin tables with the context-extension scalings, ALiBi slopes.

rope_tables(positions, rotary_dim, base=10000.0, scaling="default", <the scaling's parameters>, dtype=f32)
    positions: int32 / int64, any shape [...] (any value: negative positions are rotations too).  Returns
    cos, sin [..., rotary_dim / 2] (f32, or f64 with dtype=f64):
        cos[..., i] = attention_factor * cos(positions[...] * inv_freq[i]),   sin likewise,
    inv_freq and attention_factor as HF transformers' ``ROPE_INIT_FUNCTIONS`` define them for the scaling
    (dim = rotary_dim; e_i = 2i / dim, i < dim / 2):
      default   inv_freq_i = base^-e_i; attention_factor 1.
      linear    inv_freq_i / factor (position interpolation).
      dynamic   NTK-aware: base' = base * (factor * L / max_position_embeddings - (factor - 1))^(dim / (dim - 2))
                with L = max(seq_len, max_position_embeddings) (seq_len None: L = max_position_embeddings, the
                unscaled table); HF's dynamic_rope_update passes L = the largest position + 1 of the call.
      yarn      NTK-by-parts (Peng et al. 2023): per frequency a ramp between interpolation (inv / factor) and
                extrapolation (inv) over the dims whose rotations in original_max_position_embeddings lie between
                beta_fast (32) and beta_slow (1) (floor / ceil of the bounds unless truncate=False);
                attention_factor (if not given) 0.1 ln(factor) + 1, or the DeepSeek form
                mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are given (1 for factor <= 1).
                factor None: max_position_embeddings / original_max_position_embeddings; original None:
                max_position_embeddings.
      llama3    Llama 3.1: wavelengths 2 pi / inv longer than original / low_freq_factor are divided by factor,
                shorter than original / high_freq_factor kept, in between interpolated smoothly.
      longrope  Phi-3: inv_freq_i = base^-e_i / ext_i, ext = long_factor if seq_len > original_max_position_
                embeddings else short_factor (seq_len None: short, HF's table at init);
                attention_factor (if not given) sqrt(1 + ln(factor) / ln(original)) for factor > 1, factor None:
                max_position_embeddings / original_max_position_embeddings.
    Parameters a scaling does not use must be left None (an error otherwise: never silently ignored).  The
    attributes are explicit where HF 4.x derived them from the model config (yarn's factor was overridden by
    max_position_embeddings / original_max_position_embeddings when rope_scaling named the original length; pass
    that ratio as factor to get that table).

    Numerics: inv_freq depends on the attributes alone and is computed on the host in float64
    (``inv_freq_and_scale``); the GPU forms the angle positions * inv_freq and reduces it mod 2 pi in float64, then
    takes cos / sin of the reduced angle in f32 (f64 for dtype=f64).  So the error does not grow with the
    position: <= ~3e-7 absolute at position 131072 and beyond, where an f32 angle (HF's own tables, computed in
    f32) is off by up to |angle| * 2^-24 (8e-3 rad at 131072).

alibi_slopes(n_heads) -> f32 [n_heads]: the ALiBi slopes of Press et al. (BLOOM's / MPT's build_alibi_tensor):
    with M = the largest power of two <= n_heads, head h < M gets 2^(-8 (h + 1) / M) and head M + j gets
    2^(-4 (2 j + 1) / M) (every other slope of the 2M-head sequence).  Exact powers of two rounded once to f32.

Neither op is differentiable: their only operand is integer positions (rope_tables) or none (alibi_slopes); the
scaling parameters are attributes (configuration, not trained).  Models use them as constants; a gradient with
respect to the tables goes to rope's cos / sin, which get none either (see ops/attention.py).

    >>> import numpy as np, baracuda as bc
    >>> pos = np.arange(5, dtype=np.int64)
    >>> plan = bc.Plan.select(bc.Descriptor.like("rope_tables", pos, rotary_dim=8), bc.as_device("cpu"))
    >>> [t.shape for t in plan.run(pos)]
    [(5, 4), (5, 4)]
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from ._common import check_nonneg
from .attention import INDEX_TYPES

__all__ = ["SCALINGS", "inv_freq_and_scale", "alibi_exponents"]

SCALINGS = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")


def _floats(name):
    """long_factor / short_factor: a sequence of positive finite numbers -> a tuple of floats (hashable)."""
    def normalize(op, v, inputs, attrs):
        ok = not isinstance(v, (str, bytes)) and hasattr(v, "__iter__")
        v = tuple(v) if ok else v
        if not ok or not all(isinstance(f, (int, float, np.integer, np.floating))
                             and not isinstance(f, (bool, np.bool_)) and math.isfinite(f) and f > 0 for f in v):
            raise InvalidProblemError(op, name, "a sequence of positive finite numbers", repr(v))
        return tuple(float(f) for f in v)
    return normalize


def _opt(name, kind, doc, **kw):
    return Attr(name, kind, None, optional=True, doc=doc, **kw)


_TABLE_ATTRS = (
    Attr("rotary_dim", "int", gt=0, doc="the rotated dims R (even): the tables have R / 2 columns"),
    Attr("base", "float", 10000.0, gt=0, doc="theta, the RoPE base (HF rope_theta)"),
    Attr("scaling", "str", "default", choices=SCALINGS, doc="HF rope_type"),
    _opt("factor", "float", "the context-extension factor (linear, dynamic, yarn, llama3, longrope)", gt=0),
    _opt("original_max_position_embeddings", "int", "the pretraining context (yarn, llama3, longrope)", gt=0),
    _opt("max_position_embeddings", "int", "the model's context (dynamic: the unscaled length; yarn / longrope: "
         "the default factor's numerator)", gt=0),
    _opt("seq_len", "int", "the current sequence length (dynamic: the NTK base; longrope: long vs short factors)",
         ge=0),
    _opt("low_freq_factor", "float", "llama3 (Llama 3.1: 1)", gt=0),
    _opt("high_freq_factor", "float", "llama3 (Llama 3.1: 4)", gt=0),
    _opt("beta_fast", "float", "yarn (None: 32)", gt=0),
    _opt("beta_slow", "float", "yarn (None: 1)", gt=0),
    _opt("mscale", "float", "yarn (DeepSeek)"),
    _opt("mscale_all_dim", "float", "yarn (DeepSeek)"),
    _opt("attention_factor", "float", "yarn / longrope: the cos / sin scale (None: the paper's formula)", ge=0),
    _opt("truncate", "bool", "yarn: floor / ceil the correction range (None: True)"),
    _opt("long_factor", "any", "longrope: R / 2 positive rescale factors past the original context",
         normalize=_floats("long_factor")),
    _opt("short_factor", "any", "longrope: R / 2 positive rescale factors within it",
         normalize=_floats("short_factor")),
    Attr("dtype", "dtype", DType.f32, choices=(DType.f32, DType.f64), doc="the tables' dtype"),
)
# the scaling parameters each scaling takes (the others must stay None)
_USES = {"default": (), "linear": ("factor",), "dynamic": ("factor", "max_position_embeddings", "seq_len"),
         "yarn": ("factor", "original_max_position_embeddings", "max_position_embeddings", "beta_fast", "beta_slow",
                  "mscale", "mscale_all_dim", "attention_factor", "truncate"),
         "llama3": ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
         "longrope": ("factor", "original_max_position_embeddings", "max_position_embeddings", "seq_len",
                      "attention_factor", "long_factor", "short_factor")}
_REQUIRES = {"linear": ("factor",), "dynamic": ("factor", "max_position_embeddings"),
             "llama3": ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
             "longrope": ("original_max_position_embeddings", "long_factor", "short_factor")}
_PARAMS = tuple(a.name for a in _TABLE_ATTRS[3:-1])


def _check_scaling(op, a):
    sc, R = a["scaling"], a["rotary_dim"]
    for n in _PARAMS:
        if a[n] is not None and n not in _USES[sc]:
            raise InvalidProblemError(op, n, f"None for scaling={sc!r} (it takes "
                                      f"{', '.join(_USES[sc]) or 'no parameters'})", repr(a[n]))
    for n in _REQUIRES.get(sc, ()):
        if a[n] is None:
            raise InvalidProblemError(op, n, f"a value for scaling={sc!r}", "None")
    if sc == "dynamic" and R <= 2:
        raise InvalidProblemError(op, "rotary_dim", "at least 4 for scaling='dynamic' (exponent dim / (dim - 2))", R)
    if sc == "llama3" and a["high_freq_factor"] <= a["low_freq_factor"]:
        raise InvalidProblemError(op, "high_freq_factor", f"more than low_freq_factor={a['low_freq_factor']}",
                                  a["high_freq_factor"])
    if sc == "yarn" and a["factor"] is None and (a["max_position_embeddings"] is None
                                                 or a["original_max_position_embeddings"] is None):
        raise InvalidProblemError(op, "factor", "a value, or both max_position_embeddings and "
                                  "original_max_position_embeddings (factor = their ratio)", "None")
    if sc == "yarn" and a["original_max_position_embeddings"] is None and a["max_position_embeddings"] is None:
        raise InvalidProblemError(op, "original_max_position_embeddings", "a value (or max_position_embeddings)",
                                  "None")
    if sc == "longrope":
        for n in ("long_factor", "short_factor"):
            if len(a[n]) != R // 2:
                raise InvalidProblemError(op, n, f"rotary_dim / 2 = {R // 2} factors", len(a[n]))
        if a["factor"] is None and a["max_position_embeddings"] is None and a["attention_factor"] is None:
            raise InvalidProblemError(op, "factor", "a value, or max_position_embeddings (factor = "
                                      "max_position_embeddings / original_max_position_embeddings), or "
                                      "attention_factor", "None")


def _check_tables(inputs, attrs):
    op = "rope_tables"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (positions)", len(inputs))
    (p,) = inputs
    check_nonneg(op, ("positions",), (p.shape,))
    if p.dtype not in INDEX_TYPES:
        from .._core.errors import UnsupportedError
        raise UnsupportedError(op, f"argument 'positions' has dtype {p.dtype}; the op is defined for i32, i64 "
                                   "(integer positions)")
    R = attrs["rotary_dim"]
    if R % 2:
        raise InvalidProblemError(op, "rotary_dim", "an even number of rotated dims", R)
    _check_scaling(op, attrs)
    out = TensorSpec(tuple(p.shape) + (R // 2,), attrs["dtype"])
    return attrs, (out, out)


def _mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def inv_freq_and_scale(attrs: dict) -> tuple[np.ndarray, float]:
    """(inv_freq float64 [rotary_dim / 2], attention_factor) of a rope_tables descriptor's attributes: the one
    host computation the reference and the GPU kernel share (it depends on the attributes alone)."""
    a = attrs
    sc, R, base = a["scaling"], a["rotary_dim"], a["base"]
    e = np.arange(0, R, 2, dtype=np.float64) / R
    inv = base ** -e
    att = 1.0
    if sc == "linear":
        inv = inv / a["factor"]
    elif sc == "dynamic":
        mx = a["max_position_embeddings"]
        L = mx if a["seq_len"] is None else max(a["seq_len"], mx)
        inv = (base * (a["factor"] * L / mx - (a["factor"] - 1)) ** (R / (R - 2))) ** -e
    elif sc == "yarn":
        orig = a["original_max_position_embeddings"] or a["max_position_embeddings"]
        factor = a["factor"] if a["factor"] is not None else a["max_position_embeddings"] / orig
        att = a["attention_factor"]
        if att is None:
            att = (_mscale(factor, a["mscale"]) / _mscale(factor, a["mscale_all_dim"])
                   if a["mscale"] and a["mscale_all_dim"] else _mscale(factor))

        def dim_of(rot):   # the (fractional) dim index whose frequency turns `rot` times in `orig` positions
            return R * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        lo, hi = dim_of(a["beta_fast"] or 32.0), dim_of(a["beta_slow"] or 1.0)
        if a["truncate"] is not False:
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, R - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(R // 2, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
        inv = inv / factor * ramp + inv * (1 - ramp)
    elif sc == "llama3":
        factor, orig, lf, hf = (a["factor"], a["original_max_position_embeddings"], a["low_freq_factor"],
                                a["high_freq_factor"])
        wl = 2 * math.pi / inv
        smooth = (orig / wl - lf) / (hf - lf)
        inv = np.where(wl > orig / lf, inv / factor,
                       np.where(wl < orig / hf, inv, (1 - smooth) * inv / factor + smooth * inv))
    elif sc == "longrope":
        orig = a["original_max_position_embeddings"]
        long = a["seq_len"] is not None and a["seq_len"] > orig
        inv = inv / np.asarray(a["long_factor"] if long else a["short_factor"], np.float64)
        att = a["attention_factor"]
        if att is None:
            factor = a["factor"] if a["factor"] is not None else a["max_position_embeddings"] / orig
            att = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
    return np.asarray(inv, np.float64), float(att)


def alibi_exponents(n: int) -> np.ndarray:
    """The base-2 exponents of the n ALiBi slopes (float64 [n])."""
    if n == 0:
        return np.zeros(0)
    M = 1 << (n.bit_length() - 1)
    h = np.arange(n, dtype=np.float64)
    return np.where(h < M, -8.0 * (h + 1) / M, -4.0 * (2 * (h - M) + 1) / M)


def _check_alibi(inputs, attrs):
    if inputs:
        raise InvalidProblemError("alibi_slopes", "inputs", "no operands (n_heads is an attribute)", len(inputs))
    return attrs, (TensorSpec((attrs["n_heads"],), DType.f32),)


# -- samples, errors, tolerances, cost, workloads --------------------------------------------------------------
# configurations of published models (the scaling parameters as their config.json's rope_scaling gives them)
LLAMA31 = dict(rotary_dim=128, base=500000.0, scaling="llama3", factor=8.0, low_freq_factor=1.0,
               high_freq_factor=4.0, original_max_position_embeddings=8192)
QWEN2_YARN = dict(rotary_dim=128, base=1000000.0, scaling="yarn", factor=4.0, original_max_position_embeddings=32768)
DEEPSEEK_YARN = dict(rotary_dim=64, base=10000.0, scaling="yarn", factor=40.0, original_max_position_embeddings=4096,
                     beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)


def phi3_longrope(rng, seq_len):
    """Phi-3-mini-128k's shape of config (head dim 96, original 4096, max 131072) with random factors."""
    return dict(rotary_dim=96, scaling="longrope", original_max_position_embeddings=4096,
                max_position_embeddings=131072, seq_len=seq_len,
                long_factor=tuple(np.round(1 + 60 * rng.random(48), 3)),
                short_factor=tuple(np.round(1 + 0.2 * rng.random(48), 3)))


def _table_samples(rng):
    """Positions as float64 integers (the tests cast them to the dtype under test, i32 / i64)."""
    def pos(shape, hi, lo=0):
        return rng.integers(lo, hi, shape).astype(np.float64)

    long = np.concatenate([pos((5,), 131073), [131072.0, 0.0]])
    yield Sample((pos((7,), 64),), {"rotary_dim": 16}, name="default-S7-R16")
    yield Sample((pos((2, 5), 2048, -8),), {"rotary_dim": 10, "base": 500.0}, name="default-B2S5-R10-negative")
    yield Sample((long,), dict(LLAMA31, rotary_dim=32), name="llama3.1-128k")
    yield Sample((long,), dict(QWEN2_YARN, rotary_dim=24), name="qwen2-yarn-128k")
    yield Sample((pos((3, 2, 2), 163840),), dict(DEEPSEEK_YARN, rotary_dim=16), name="deepseek-yarn-3d")
    yield Sample((pos((6,), 8192),), {"rotary_dim": 12, "scaling": "yarn", "factor": 2.0,
                                      "max_position_embeddings": 1024, "truncate": False, "attention_factor": 0.9},
                 name="yarn-no-truncate")
    yield Sample((pos((9,), 4096),), {"rotary_dim": 8, "scaling": "linear", "factor": 4.0}, name="linear")
    for L in (None, 1000, 6000):
        yield Sample((pos((4,), 6000),), {"rotary_dim": 8, "scaling": "dynamic", "factor": 2.0,
                                          "max_position_embeddings": 2048, "seq_len": L}, name=f"dynamic-L{L}")
    for L in (None, 4096, 131072):
        cfg = phi3_longrope(rng, L)
        yield Sample((pos((4,), 131072),), dict(cfg, rotary_dim=8, long_factor=cfg["long_factor"][:4],
                                                short_factor=cfg["short_factor"][:4]), name=f"phi3-longrope-L{L}")
    yield Sample((pos((3,), 100),), {"rotary_dim": 6, "dtype": DType.f64}, name="f64")
    yield Sample((np.zeros((0,)),), {"rotary_dim": 8}, name="empty")
    yield Sample((np.asarray(37.0),), {"rotary_dim": 4, "scaling": "linear", "factor": 2.0}, name="0-d")


def _table_errors():
    from .._core.errors import UnsupportedError

    p = ((5,), "i64")
    yield ErrorCase((((5,), "f32"),), {"rotary_dim": 8}, UnsupportedError,
                    r"rope_tables: argument 'positions' has dtype f32", "float-positions")
    yield ErrorCase((p,), {}, InvalidProblemError, r"rope_tables: .*'rotary_dim'", "no-rotary-dim")
    yield ErrorCase((p,), {"rotary_dim": 7}, InvalidProblemError, r"argument 'rotary_dim': expected an even", "odd")
    yield ErrorCase((p,), {"rotary_dim": 8, "scaling": "ntk"}, InvalidProblemError, r"argument 'scaling'", "scaling")
    yield ErrorCase((p,), {"rotary_dim": 8, "factor": 8.0}, InvalidProblemError,
                    r"argument 'factor': expected None for scaling='default'", "unused-factor")
    yield ErrorCase((p,), {"rotary_dim": 8, "scaling": "linear"}, InvalidProblemError,
                    r"argument 'factor': expected a value for scaling='linear'", "no-factor")
    yield ErrorCase((p,), {"rotary_dim": 8, "scaling": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                           "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}, InvalidProblemError,
                    r"argument 'high_freq_factor': expected more than low_freq_factor=4.0", "llama3-order")
    yield ErrorCase((p,), {"rotary_dim": 2, "scaling": "dynamic", "factor": 2.0, "max_position_embeddings": 8},
                    InvalidProblemError, r"argument 'rotary_dim': expected at least 4", "dynamic-dim")
    yield ErrorCase((p,), {"rotary_dim": 8, "scaling": "yarn"}, InvalidProblemError,
                    r"argument 'factor': expected a value, or both", "yarn-factor")
    yield ErrorCase((p,), {"rotary_dim": 8, "scaling": "longrope", "original_max_position_embeddings": 4,
                           "factor": 2.0, "long_factor": (1.0,) * 3, "short_factor": (1.0,) * 4},
                    InvalidProblemError, r"argument 'long_factor': expected rotary_dim / 2 = 4 factors", "longrope-n")
    yield ErrorCase((p,), {"rotary_dim": 8, "scaling": "longrope", "original_max_position_embeddings": 4,
                           "factor": 2.0, "long_factor": (1.0, -1.0, 1.0, 1.0), "short_factor": (1.0,) * 4},
                    InvalidProblemError, r"argument 'long_factor': expected a sequence of positive", "longrope-sign")
    yield ErrorCase((p,), {"rotary_dim": 8, "dtype": "f16"}, InvalidProblemError, r"argument 'dtype'", "f16")


def _table_tol(dt):
    # dt is the positions' dtype; the f32 tables' bound (f64 ones are far tighter): the angle and its reduction
    # mod 2 pi are float64 (<= 1e-10 rad at |angle| ~ 1e5); the reduced angle rounded to f32 (|r| <= pi: half an
    # ulp, 1.2e-7 rad) moves cos / sin by <= 1.2e-7; f32 cos / sin <= 1 ulp (6e-8); the attention factor
    # (<= ~1.4 for the published configs) scales that to ~2.6e-7, and its product rounds once more (rtol)
    return 2 ** -22, 4e-7


def _table_cost(desc):
    n = desc.outputs[0].numel
    # per table entry: the f64 angle product and its reduction (3 ops), cos and sin (one each), 2 scalings
    return desc.inputs[0].nbytes + 2 * desc.outputs[0].nbytes, 7 * n


def _table_inputs(desc, device, gen):
    """Positions spread over a 128k context (the samples' small ranges would repeat rows)."""
    import torch

    p = desc.inputs[0]
    return [torch.randint(0, 131072, p.shape, generator=gen, device=gen.device).to(p.dtype.torch).to(device)]


register_spec(OpSpec(
    name="rope_tables", family="attention", arg_names=("positions",), check=_check_tables, dtypes=INDEX_TYPES,
    attrs=_TABLE_ATTRS, samples=_table_samples, errors=_table_errors, tol=_table_tol, cost=_table_cost,
    workloads=(Workload("rope_tables-131072-llama3.1", ((131072,),), DType.i64, LLAMA31),
               Workload("rope_tables-8x4096-qwen2-yarn", ((8, 4096),), DType.i64, QWEN2_YARN)),
    category="attention",
    doc="RoPE cos / sin tables [..., rotary_dim / 2] of integer positions with HF transformers' scalings (default, "
        "linear, dynamic NTK, YaRN, Llama 3, LongRoPE) times their attention factor; not differentiable."))
set_bench_inputs("rope_tables", _table_inputs)


def _alibi_samples(rng):
    for n in (1, 2, 5, 8, 12, 16, 20, 40, 64, 96, 0):
        yield Sample((), {"n_heads": n}, name=f"H{n}")


def _alibi_errors():
    yield ErrorCase((), {}, InvalidProblemError, r"alibi_slopes: .*'n_heads'", "missing")
    yield ErrorCase((), {"n_heads": -1}, InvalidProblemError, r"alibi_slopes: argument 'n_heads'", "negative")
    yield ErrorCase((), {"n_heads": 8.0}, InvalidProblemError, r"alibi_slopes: argument 'n_heads'", "float")
    yield ErrorCase((((4,), "f32"),), {"n_heads": 4}, InvalidProblemError,
                    r"alibi_slopes: argument 'inputs': expected no operands", "operand")


register_spec(OpSpec(
    name="alibi_slopes", family="attention", arg_names=(), check=_check_alibi, dtypes=(DType.f32,),
    attrs=(Attr("n_heads", "int", ge=0, doc="the number of (query) heads"),),
    samples=_alibi_samples, errors=_alibi_errors,
    # a power of two computed in f64 (exp2: <= 1 ulp of f64), rounded once to f32: half an f32 ulp (2^-24
    # relative) plus the f64 error's chance of a double rounding: 2^-23
    tol=lambda dt: (2 ** -23, 0.0),
    cost=lambda d: (4 * d.attr("n_heads"), d.attr("n_heads")),
    workloads=(Workload("alibi_slopes-64", (), DType.f32, {"n_heads": 64}),), category="attention",
    doc="ALiBi slopes f32 [n_heads] (Press et al.; non-powers of two take every other slope of the next power); "
        "not differentiable."))
