"""Bespoke Triton GEMM: one tiled kernel for matmul / mm / bmm / linear / linear_act.

``_gemm_kernel`` computes C[b] = act(A[b] @ B[b] + bias) for A [*, M, K], B [*, K, N] given by element
strides (any layout: row-major, transposed views, sliced rows, broadcast batch with stride 0), with
constexpr epilogue switches (bias, activation, a second store of the pre-activation) and f32
accumulation (f64 for f64).  The batch rides on grid axis 0 together with the tiles (up to 2 collapsed
batch axes with their own strides), so broadcast batches are never materialized.

Why these choices, with numbers (H100 SXM: 989 TFLOP/s dense bf16, 3.35 TB/s HBM, 50 MB L2, 132 SMs,
228 KB shared memory per SM):
* a 128x256x64 bf16 tile does 2*128*256*64 = 4.2 MFLOP per (128+256)*64*2 = 48 KB loaded: 85 FLOP/B
  from L2/shared memory, and 3 stages take 144 KB of shared memory; 8 warps = 2 warpgroups for wgmma.
* grouped ("swizzled") program order: GROUP_M=8 row tiles share their B column tiles while they are in
  L2, so a 8192^3 bf16 problem reads each operand from HBM ~once per 8 tile rows instead of once per row.
* the M/N tails are handled by wrapping row/column indices (``% M``): loads need no mask along M/N and stay
  vectorized; the duplicated rows are discarded by the masked store.  Contiguity hints are given only when
  the dimension is a multiple of the tile (no wrap, so the hint is true).
* K tails use a masked load (EVEN_K=False); offsets switch to int64 when an operand spans >= 2^31 elements;
  batch offsets are always computed in int64 (one scalar multiply per program).
* f32: ``input_precision="tf32"`` only when PlanPreference.allow_reduced_precision, else "ieee" (exact f32
  FMAs: no tensor cores, ~10x slower on H100 - cuBLAS SGEMM is preferred then, see priorities).
* tile choice (``choose_config``): a shallow-K config (K <= 128: store-bound, 2 CTAs per SM) else the size
  class with the best (tile fill x wave quantization x per-SM tile throughput), so an N = 128 problem does
  not run in 256-wide tiles that compute every column twice.
* transposed operands (trans_a / trans_b, the backward's dA = dC @ B^T and dB = A^T @ dC, linear's W^T) get
  the same pipeline as row-major ones: 16-byte cp.async loads along the unit stride into 128-byte-swizzled
  shared memory that wgmma reads directly (the "transposed" NVMMA layout), checked offline for sm_90 in
  tests/gemm for all four layouts.
* integers (i64, i32, i16, i8, u8; torch's CUDA matmuls have none): ``INT`` replaces ``tl.dot`` by a broadcast
  multiply and a sum over BK in int64 on CUDA cores (tensor-core integer MMA is int8 x int8 -> int32 only, and
  int64 products must wrap mod 2^64 like torch's CPU kernels); the store narrows mod 2^bits.  Small tiles (the
  [BM, BK, BN] product lives in registers): a correctness path, not a fast one.
* host cost: a plan binds the config once, and the launch arguments (collapsed batch strides, the batch
  fold, int64 and hint switches) once per stride signature of its arguments (``_Memo``); a call then costs a
  dictionary lookup plus Triton's own launch.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.gemm import GEMM_OPS, epilogue_tag, gemm_dims, layout_tag, linear_dims
from .._lib.register import register_triton
from .._lib.interp import INTERPRETING, loop
from ...._core.device import triton_interpreting
from .._lib.geometry import cdiv

_SQRT1_2 = tl.constexpr(0.7071067811865476)
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)

# -- epilogue activations: (x, p0, p1) -> value, so that the elementwise ``launch`` template can run them too.
# They run on a 128x256 f32 accumulator (128 values per thread), so they are written for few live registers:
# sigmoid via the hardware exp2 (tl.exp: ~2 ulp in f32, far below the bf16/f16 output rounding and the
# f32 tolerance) and gelu_tanh as x * sigmoid(2u), which equals 0.5x(1 + tanh(u)) without the cancellation
# of 1 + tanh(u) for negative u and without a libdevice tanh call.
@triton.jit
def _sigmoid(z):
    return 1.0 / (1.0 + tl.exp(-z))


@triton.jit
def act_none(x, p0, p1):
    return x


@triton.jit
def act_relu(x, p0, p1):
    return tl.where(x > 0, x, tl.zeros_like(x))


@triton.jit
def act_gelu(x, p0, p1):
    return 0.5 * x * (1.0 + tl.erf(x * _SQRT1_2))


@triton.jit
def act_gelu_tanh(x, p0, p1):
    return x * _sigmoid((2.0 * _SQRT_2_OVER_PI) * (x + 0.044715 * x * x * x))


@triton.jit
def act_silu(x, p0, p1):
    return x * _sigmoid(x)


ACT_FN = {"none": act_none, "relu": act_relu, "gelu": act_gelu, "gelu_tanh": act_gelu_tanh, "silu": act_silu}


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, p_ptr,
                 M, N, K, NB1, TILES,
                 sa0, sa1, sam, sak,
                 sb0, sb1, sbk, sbn,
                 sc0, sc1, scm, scn,
                 spm, spn, s_bias,
                 ACT: tl.constexpr, HAS_BIAS: tl.constexpr, SAVE_PRE: tl.constexpr,
                 PREC: tl.constexpr, ACC: tl.constexpr, INT: tl.constexpr, EVEN_K: tl.constexpr,
                 HINT_M: tl.constexpr, HINT_N: tl.constexpr, I64: tl.constexpr, DOT_F32: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    bid = pid // TILES
    tile = pid % TILES
    # grouped order within one matrix: GROUP_M tile rows sweep the tile columns together (L2 reuse of B)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    width = GROUP_M * num_pid_n
    first_m = (tile // width) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % width) % group_rows
    pid_n = (tile % width) // group_rows

    b0 = (bid // NB1).to(tl.int64)
    b1 = (bid % NB1).to(tl.int64)
    a_ptr += b0 * sa0 + b1 * sa1
    b_ptr += b0 * sb0 + b1 * sb1
    c_ptr += b0 * sc0 + b1 * sc1

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    if I64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
    ram = rm % M
    rbn = rn % N
    if HINT_M:
        ram = tl.max_contiguous(tl.multiple_of(ram, BM), BM)
    if HINT_N:
        rbn = tl.max_contiguous(tl.multiple_of(rbn, BN), BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + ram[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rbn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=ACC)
    for kt in loop(0, tl.cdiv(K, BK)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - kt * BK
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if INT:       # exact wrapping int64 multiply-adds (see the module docstring)
            acc += tl.sum(a.to(tl.int64)[:, :, None] * b.to(tl.int64)[None, :, :], axis=1)
        else:
            if DOT_F32:   # interpreter only: its dot multiplies bf16 bit patterns as integers (exact upcast)
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=ACC)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk

    if HAS_BIAS:
        bias = tl.load(bias_ptr + rn * s_bias, mask=rn < N, other=0.0)
        acc = acc + bias.to(ACC)[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SAVE_PRE:
        tl.store(p_ptr + rm[:, None] * spm + rn[None, :] * spn, acc.to(p_ptr.dtype.element_ty), mask=mask)
    y = ACT(acc, 0.0, 0.0)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, y.to(c_ptr.dtype.element_ty), mask=mask)


# -- configuration table -----------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmConfig:
    bm: int
    bn: int
    bk: int
    group_m: int
    warps: int
    stages: int


# (math class, size class) -> config.  Shared memory per stage: (bm + bn) * bk * itemsize; an SM has 228 KB
# of shared memory and 64K registers, so "CTAs per SM" below is min(228 KB / smem, 64K / (regs * threads)),
# with the register counts ptxas reports for sm_90 (tests/gemm compiles them offline).
CONFIGS: dict[tuple[str, str], GemmConfig] = {
    # bf16/f16 (wgmma): 48 KB/stage x 3 = 144 KB, 206 regs x 256 threads: 1 CTA/SM, the highest FLOP/B
    ("half", "large"): GemmConfig(128, 256, 64, 8, 8, 3),
    # 32 KB/stage x 4 = 128 KB, ~125 regs: 1 CTA/SM, deep K pipeline
    ("half", "medium"): GemmConfig(128, 128, 64, 8, 8, 4),
    ("half", "small"): GemmConfig(64, 64, 64, 8, 4, 4),
    # shallow K (K <= 128, e.g. attention-like [32, 2048, 128] @ [32, 128, 2048]): at most 2 K steps, so the
    # op is bound by the C store (2048^2 * 2 B per batch vs 1 MB of operands) and a deep pipeline only costs
    # shared memory.  3 stages of 32 KB = 96 KB and ~110 regs x 256 threads let 2 CTAs share an SM: one
    # CTA's epilogue store overlaps the other's loads and MMAs (the large tile runs 1 CTA/SM: the SM idles
    # its tensor cores during every store, measured 57% of cuBLAS on that bmm).
    ("half", "shallow"): GemmConfig(128, 128, 64, 8, 8, 3),
    # tf32 (wgmma on f32 operands, 2x the bytes of bf16 per element): 32 KB/stage x 3
    ("tf32", "large"): GemmConfig(128, 128, 32, 8, 8, 3),
    ("tf32", "medium"): GemmConfig(128, 64, 32, 8, 4, 4),
    ("tf32", "small"): GemmConfig(64, 64, 32, 8, 4, 3),
    # ieee f32 and f64: CUDA-core FMAs (f64 may use DMMA); register-bound, smaller tiles
    ("ieee", "large"): GemmConfig(128, 128, 16, 8, 8, 3),
    ("ieee", "medium"): GemmConfig(64, 64, 16, 8, 4, 3),
    ("ieee", "small"): GemmConfig(64, 64, 16, 8, 4, 3),
    ("f64", "large"): GemmConfig(64, 64, 16, 8, 4, 3),
    ("f64", "medium"): GemmConfig(64, 64, 16, 8, 4, 3),
    ("f64", "small"): GemmConfig(32, 32, 16, 8, 4, 3),
    # integers: the [32, 8, 32] int64 product is 64 values per thread of 4 warps; one size for every class
    **{("int", size): GemmConfig(32, 32, 8, 8, 4, 2) for size in ("large", "medium", "small")},
}
# Relative per-SM throughput of a size class when every tile is full (larger tiles reuse each loaded byte
# over more MMAs: 128x256 does 85 FLOP per byte loaded, 128x128 64, 64x64 32).
_TILE_EFF = {"large": 1.0, "medium": 0.9, "small": 0.6}
# Under the interpreter (CPU, NumPy) cost grows with the tile size: small tiles, and a group of 2 so that
# the small test shapes still exercise the grouped order, the wrapped M/N tails and the K tail.
INTERPRET_CONFIG = GemmConfig(16, 16, 16, 2, 1, 1)
_MATH_CLASS = {DType.bf16: "half", DType.f16: "half", DType.f64: "f64"}
_SHALLOW_K = 128


@functools.lru_cache(maxsize=None)
def _num_sms() -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return 132


def math_class(dt: DType, allow_tf32: bool) -> str:
    if dt.is_integer:
        return "int"
    return _MATH_CLASS.get(dt, "tf32" if allow_tf32 else "ieee")


def _score(cfg: GemmConfig, size: str, m: int, n: int, nbatch: int, sms: int) -> float:
    """Expected fraction of the machine doing useful work: tile fill along M and N (a 128-wide problem in a
    256-wide tile computes every column twice: the wrapped tail) x wave quantization (the last wave of tiles
    may leave SMs idle) x the size class's per-SM throughput."""
    tm, tn = math.ceil(m / cfg.bm), math.ceil(n / cfg.bn)
    fill = (m / (tm * cfg.bm)) * (n / (tn * cfg.bn))
    waves = tm * tn * nbatch / sms
    return fill * (waves / math.ceil(waves)) * _TILE_EFF[size]


def choose_config(cls: str, m: int, n: int, nbatch: int, k: int, sms: int) -> GemmConfig:
    """The GPU config for math class ``cls`` (shallow K first, else the best-scoring size class)."""
    if k <= _SHALLOW_K and (cls, "shallow") in CONFIGS:
        return CONFIGS[(cls, "shallow")]
    m, n, nbatch = max(m, 1), max(n, 1), max(nbatch, 1)
    best = max(("large", "medium", "small"), key=lambda s: _score(CONFIGS[(cls, s)], s, m, n, nbatch, sms))
    return CONFIGS[(cls, best)]


@functools.lru_cache(maxsize=4096)
def pick_config(dt: DType, allow_tf32: bool, m: int, n: int, nbatch: int, k: int = 1 << 30) -> GemmConfig:
    """The tile config for one problem (cached; plans bind it once)."""
    if triton_interpreting():
        return INTERPRET_CONFIG
    return choose_config(math_class(dt, allow_tf32), m, n, nbatch, k, _num_sms())


# -- launcher ------------------------------------------------------------------------------------------
def _span(shape, strides) -> int:
    return 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides) if d > 0)


def _collapse_batch(batch, strides_list):
    """Drop size-1 batch axes and merge axes that are nested in every operand; returns (sizes, strides_list)."""
    dims = [(s, [st[i] for st in strides_list]) for i, s in enumerate(batch) if s != 1]
    merged: list = []
    for s, sts in dims:
        if merged and all(pst == st * s for pst, st in zip(merged[-1][1], sts)):
            merged[-1] = (merged[-1][0] * s, sts)
        else:
            merged.append((s, sts))
    return [m[0] for m in merged], [[m[1][k] for m in merged] for k in range(len(strides_list))]


def _launcher(A, B, C, cfg: GemmConfig, prec: str, bias=None, act: str = "none", P=None):
    """Everything a launch derives from shapes and strides, done once: returns ``go(a, b, c, bias, p)`` that
    only launches (the tensors passed need only share the data pointers of A, B, C, bias, P: views of them
    such as the un-transposed, un-expanded operands do), or None where launch_gemm's rare paths apply
    (a K stride >= 2^31 / BK, more than 2 batch axes that do not merge)."""
    M, K = A.shape[-2:]
    N = B.shape[-1]
    if cfg.bk * abs(A.stride(-1)) >= 2 ** 31 or cfg.bk * abs(B.stride(-2)) >= 2 ** 31:
        return None
    batch = tuple(C.shape[:-2])
    sizes, (sa, sb, sc) = _collapse_batch(batch, [A.stride()[:-2], B.stride()[:-2], C.stride()[:-2]])
    sam, sak = A.stride()[-2:]
    sbk, sbn = B.stride()[-2:]
    scm, scn = C.stride()[-2:]
    if len(sizes) == 1 and sb[0] == 0 and sa[0] == M * sam and sc[0] == M * scm and P is None:
        # B shared by the whole batch and A, C stacked along the rows: one GEMM with batch*M rows
        M, sizes, sa, sb, sc = M * sizes[0], [], [], [], []
    if len(sizes) > 2:
        return None
    sizes = [1] * (2 - len(sizes)) + sizes
    sa, sb, sc = ([0] * (2 - len(x)) + list(x) for x in (sa, sb, sc))
    tiles = cdiv(M, cfg.bm) * cdiv(N, cfg.bn)
    i64 = max(_span((M, K), (sam, sak)), _span((K, N), (sbk, sbn)), _span((M, N), (scm, scn))) >= 2 ** 31
    dt = A.dtype
    spm, spn = P.stride() if P is not None else (0, 0)
    scalars = (M, N, K, sizes[1], tiles, sa[0], sa[1], sam, sak, sb[0], sb[1], sbk, sbn, sc[0], sc[1], scm, scn,
               spm, spn, bias.stride(0) if bias is not None else 0)
    ints = not (dt.is_floating_point or dt.is_complex)
    consts = dict(ACT=ACT_FN[act], HAS_BIAS=bias is not None, SAVE_PRE=P is not None, PREC=prec,
                  ACC=tl.int64 if ints else tl.float64 if dt == torch.float64 else tl.float32, INT=ints,
                  EVEN_K=K % cfg.bk == 0, HINT_M=M % cfg.bm == 0, HINT_N=N % cfg.bn == 0, I64=i64,
                  DOT_F32=dt == torch.bfloat16 and INTERPRETING,
                  BM=cfg.bm, BN=cfg.bn, BK=cfg.bk, GROUP_M=cfg.group_m, num_warps=cfg.warps, num_stages=cfg.stages)
    kernel = _gemm_kernel[(sizes[0] * sizes[1] * tiles,)]

    def go(a, b, c, bias_t, p):
        kernel(a, b, c, c if bias_t is None else bias_t, c if p is None else p, *scalars, **consts)
    return go


def launch_gemm(A, B, C, cfg: GemmConfig, prec: str, bias=None, act: str = "none", P=None) -> None:
    """C[*batch, M, N] = act(A[*, M, K] @ B[*, K, N] + bias); P (optional, [M, N]) gets the pre-activation.

    A and B are views broadcast to C's batch shape (stride 0 on broadcast axes); C must not overlap itself.
    """
    if C.numel() == 0:
        return
    go = _launcher(A, B, C, cfg, prec, bias, act, P)
    if go is not None:
        go(A, B, C, bias, P)
        return
    if cfg.bk * abs(A.stride(-1)) >= 2 ** 31:   # the per-step pointer increment BK * stride is int32 in the
        A = A.contiguous()                        # kernel: a K stride that large (>= 33M) gets a documented copy
    if cfg.bk * abs(B.stride(-2)) >= 2 ** 31:
        B = B.mT.contiguous().mT
    if C.dim() > 4 and _launcher(A, B, C, cfg, prec, bias, act, P) is None:
        # rare (> 2 batch axes that do not merge): loop over the leading ones on the host
        for idx in itertools.product(*(range(s) for s in C.shape[: C.dim() - 4])):
            launch_gemm(A[idx], B[idx], C[idx], cfg, prec, bias, act, P)
        return
    launch_gemm(A, B, C, cfg, prec, bias, act, P)


class _Memo:
    """Per bound plan: stride signature of the arguments -> launcher (or None: take the general path).
    A plan sees one or two layouts in practice; the bound keeps a pathological caller from growing it."""

    __slots__ = ("d",)
    LIMIT = 16

    def __init__(self):
        self.d = {}

    def get(self, key, build):
        d = self.d
        try:
            return d[key]
        except KeyError:
            if len(d) >= self.LIMIT:
                d.clear()
            v = d[key] = build()
            return v


def _writable(out):
    """``out`` itself when the kernel may store into it directly, else a contiguous scratch tensor (copied back):
    a strided ``out=`` could overlap itself (stride 0), which a parallel store cannot honour."""
    return out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)


def _prec(desc, pref) -> str:
    return "tf32" if (desc.dtype == DType.f32 and pref is not None and pref.allow_reduced_precision) else "ieee"


def _bind_gemm(desc, pref=None):
    ta, tb = desc.attr("trans_a"), desc.attr("trans_b")
    dims = gemm_dims(desc.op, desc.inputs[0].shape, desc.inputs[1].shape, ta, tb)
    prec = _prec(desc, pref)
    cfg = pick_config(desc.dtype, prec == "tf32", dims.m, dims.n, dims.nbatch, dims.k)
    full = dims.batch + (dims.m, dims.n)
    empty = any(t.numel == 0 for t in desc.outputs)
    memo = _Memo()

    def operands(a, b):
        a = a.unsqueeze(0) if a.dim() == 1 else a
        b = b.unsqueeze(1) if b.dim() == 1 else b
        a = a.mT if ta else a
        b = b.mT if tb else b
        return a.expand(dims.batch + (dims.m, dims.k)), b.expand(dims.batch + (dims.k, dims.n))

    def general(a, b, out):
        A, B = operands(a, b)
        target = _writable(out)
        launch_gemm(A, B, target.view(full), cfg, prec)
        if target is not out:
            out.copy_(target)

    def build(a, b, out):
        if empty or not out.is_contiguous():
            return None
        A, B = operands(a, b)
        return _launcher(A, B, out.view(full), cfg, prec)

    def run(desc_, inputs, outputs, ws):
        # hot path: the launch arguments of this stride signature were computed once; the kernel gets the
        # operands themselves (the transposed / expanded views share their data pointers)
        a, b = inputs
        out = outputs[0]
        go = memo.get((a.stride(), b.stride(), out.stride()), lambda: build(a, b, out))
        if go is None:
            general(a, b, out)
        else:
            go(a, b, out, None, None)
    return run


def _bind_linear(desc, pref=None):
    m, k, n = linear_dims(desc.op, desc.inputs)
    act = desc.attr("activation") if desc.op == "linear_act" else "none"
    save = desc.op == "linear_act" and desc.attr("save_preact")
    prec = _prec(desc, pref)
    cfg = pick_config(desc.dtype, prec == "tf32", m, n, 1, k)
    empty = any(t.numel == 0 for t in desc.outputs)
    memo = _Memo()

    def general(x, w, bias, outputs):
        x2 = x.reshape(m, k)   # a view when x's leading axes fold (any contiguous-rows x); else a copy
        targets = [_writable(o) for o in outputs]
        P = targets[1].view(m, n) if save else None
        launch_gemm(x2, w.mT, targets[0].view(m, n), cfg, prec, bias=bias, act=act, P=P)
        for t, o in zip(targets, outputs):
            if t is not o:
                o.copy_(t)

    def build(x, w, bias, outputs):
        if empty or not all(o.is_contiguous() for o in outputs):
            return None
        x2 = x.reshape(m, k)
        if x2.data_ptr() != x.data_ptr():   # reshape copied (rows that do not fold): general path
            return None
        return _launcher(x2, w.mT, outputs[0].view(m, n), cfg, prec, bias, act,
                         outputs[1].view(m, n) if save else None)

    def run(desc_, inputs, outputs, ws):
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) == 3 else None
        y = outputs[0]
        p = outputs[1] if save else None
        key = (x.stride(), w.stride(), y.stride(), None if p is None else p.stride(),
               None if bias is None else bias.stride())
        go = memo.get(key, lambda: build(x, w, bias, outputs))
        if go is None:
            general(x, w, bias, outputs)
        else:
            go(x, w, y, bias, p)
    return run


def _run_default(bind):
    """Impl.run for callers that bypass Plan (no preference): the strict precision."""
    def run(desc, inputs, outputs, ws):
        bind(desc, None)(desc, inputs, outputs, ws)
    return run


def gemm_precision(desc, pref=None) -> PrecisionGuarantee:
    """One tiled kernel, no split-K, no atomics: deterministic and bit-stable for a fixed descriptor."""
    dt = desc.dtype
    if dt.is_integer:
        return PrecisionGuarantee(MathPrecision.INT, DType.i64, True, True)
    if dt == DType.f64:
        return PrecisionGuarantee(MathPrecision.F64, DType.f64, True, True)
    if dt == DType.f32:
        tf32 = pref is not None and pref.allow_reduced_precision
        return PrecisionGuarantee(MathPrecision.TF32 if tf32 else MathPrecision.F32, DType.f32, True, True)
    return PrecisionGuarantee(MathPrecision.BF16 if dt == DType.bf16 else MathPrecision.F16, DType.f32, True, True)


# Priorities (cuBLAS registers 50 on CUDA): Triton comes after cuBLAS for every GEMM, the fused epilogues
# included.  Measured on H200 (bf16, 8192x4096 -> 4096 with bias): silu fused here 0.550 ms vs cuBLASLt bias
# GEMM + a separate Triton silu pass 0.397 ms (that pass moves 2 * 64 MB, ~25 us; the GEMM itself is where
# the pointer-based Triton kernel loses ~20% to cuBLAS on this layout).  Fusion pays only once this kernel
# reaches cuBLAS's GEMM speed; PlanPreference(prefer=(Backend.TRITON,)) or autotune still pick it.


def _priority(desc, dev) -> float:
    if dev.type != "cuda":
        return -200.0   # the interpreter is a correctness tool, never a CPU default
    return 10.0


def _route(desc, pref):
    cfg = pick_config(desc.dtype, _prec(desc, pref) == "tf32", *_mn_batch(desc))
    math = "int64" if desc.dtype.is_integer else _prec(desc, pref)
    tag = f"triton:gemm[{cfg.bm}x{cfg.bn}x{cfg.bk},w{cfg.warps},s{cfg.stages},{math}"
    if desc.op == "linear_act":
        tag += f",epilogue=bias+{desc.attr('activation')}" if len(desc.inputs) == 3 else \
            f",epilogue={desc.attr('activation')}"
    elif desc.op == "linear" and len(desc.inputs) == 3:
        tag += ",epilogue=bias"
    return tag + "]"


def _mn_batch(desc):
    """(M, N, batch, K) of the problem, as pick_config takes them."""
    if desc.op in GEMM_OPS:
        d = gemm_dims(desc.op, desc.inputs[0].shape, desc.inputs[1].shape, desc.attr("trans_a"), desc.attr("trans_b"))
        return d.m, d.n, d.nbatch, d.k
    m, k, n = linear_dims(desc.op, desc.inputs)
    return m, n, 1, k


def _supports(desc):
    m, n, nb, k = _mn_batch(desc)
    cfg = pick_config(desc.dtype, desc.dtype == DType.f32, m, n, nb, k)
    if nb * cdiv(max(m, 1), cfg.bm) * cdiv(max(n, 1), cfg.bn) >= 2 ** 31:
        return "more than 2^31 output tiles (grid axis 0 limit)"
    return None


for _op, _bind in [(o, _bind_gemm) for o in GEMM_OPS] + [("linear", _bind_linear), ("linear_act", _bind_linear)]:
    register_triton(_op, _run_default(_bind), bind=_bind, precision=gemm_precision, priority=_priority,
                    route=_route, supports=_supports, layout=layout_tag, epilogue=epilogue_tag)
