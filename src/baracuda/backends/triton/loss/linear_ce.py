"""Fused linear cross-entropy on the GPU: token chunks, cuBLAS GEMMs (torch.mm) and one fused Triton CE kernel.

Per chunk of tokens (`chunks()`: ~N / 5 rows in whole 256-row tiles; the workspace holds one chunk's logits):
  1. logits_c = x_c @ W^T (+ b)                                  torch.addmm / torch.mm (cuBLAS, f32 accumulate)
  2. the chunk's CE, in place over its logits (dlogits overwrite them):
     * no softcap / z-loss (GPU, rows of >= 2 8192-class chunks): loss_ce_coop's single-read kernel — each row
       read once into registers across co-resident programs, its loss and gradient written from them (1 HBM read
       + 1 write of the chunk's logits; 6 chunks of 8192 x 128256 bf16: 2.24 ms on the H100, 0.37 ms a chunk);
     * otherwise _lce_chunk: per row, pass 1 the online (max, sum exp) of the softcapped logits (+ the smoothing
       sum), the row loss -> workspace; pass 2 re-reads the row (an L2 hit: persistent grid, as loss.py) and
       writes dlogits = (p (1 + 2 z lse) - y') * du/dl * scale.
  3. dx_c = dlogits @ W          (torch.mm into the dx output rows)
  4. dW  += dlogits^T @ x_c      (torch.addmm in place: cuBLAS computes each chunk's product and the
     accumulation alpha*AB + beta*C in f32 and rounds once per chunk to W's dtype; a full f32 [V, H] accumulator
     would cost V*H*4 bytes (2.1 GB at 128256 x 4096) and break the memory budget, so with bf16 weights dW sees
     n_chunks (~5) roundings, ~sqrt(5) * 2^-9 relative)
  5. db  += column sums of dlogits (f32 accumulator of V words)
Then a one-program fold of the row losses (deterministic; mean divides by the kept-row count computed up front).
Three GEMMs of 2 N V H flops each: 8192 x 4096 x 128256 bf16 = 25.8 TFLOP, ~35-40 ms at ~700 TFLOP/s; the CE
kernel moves ~2 x 2.1 GB over all chunks (~1.4 ms), so the GEMMs dominate.
Out-of-range targets: clamped + flagged as in loss.py (NaN row loss); reported after the chunks (_core/checks.py).
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from .._lib.math import exp as _exp_acc
from .._lib.register import register_triton
from .._lib.config import overrides
from . import ce_coop as _long
from .._lib.interp import INTERPRETING, loop
from ...nvidia.cublas import _allow, cublas_precision, flag_switch
from .ce_kernels import _check_flag, _denom, _fold, _lg, _num_sms, _ws_view
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

_FORCE, forced = overrides("""Force ``chunk`` / ``tile`` / ``rows`` / ``programs`` (tests: several chunks and tiles under the interpreter), ``balance=False`` (uniform chunks).""")


def choose(n: int, v: int, itemsize: int, h: int | None = None):
    """(chunk, TILE, ROWS, warps, programs).  chunk: a fifth of the tokens, in whole 256-row GEMM tiles (at least
    one tile), never over 1 GiB of logits.  (It used to grow to 256 MiB of logits on small vocabularies, for fewer
    dW passes: the HF Llama 4L/2048 step measured 0.27 GB of peak memory in that chunk, above Liger's, for ~1.5 %
    of step time.)  Peak memory is dW + dx + one chunk of logits; eager's is ~3 x the full logits, so a fifth
    keeps the peak under a quarter of eager's even where dW is large (8192 x 4096 x 128256 bf16: 1.05 GB dW +
    0.39 GB chunk (1536 tokens) = 24% of eager's 6.3 GB; a quarter of the tokens measured 26%).  Fewer, larger chunks make
    larger GEMMs and fewer read-modify-write passes over dW (each chunk's dW += dl^T x re-reads dW): on the
    H100 41.6 / 39.9 / 39.3 ms at N/8, N/4, N/2 tokens per chunk (torch.compile 38.8).  TILE/ROWS as
    loss.choose.

    With the hidden size ``h`` the chunk's logits also stay within max(x, dW / 4) bytes (x: the hidden states, dW:
    the weight's gradient): where the vocabulary is small next to the tokens (the HF Llama 4L/2048 step: 8192 tokens,
    V = 32000, H = 2048) a fifth of the tokens is 1536 rows = 98 MB of logits at the step's peak, 50 MB above
    Liger's peak; 512 rows (33.6 MB, x's size) put it under.  dW / 4 keeps the extra dW read-modify-write passes
    (one per chunk) cheap where dW is large (the 8B stack: 1.05 GB dW, its fifth of 4096 tokens unchanged)."""
    row = max(v * itemsize, 1)
    fifth = max(256, n // 5 // 256 * 256)    # whole 256-row GEMM tiles (1664 rows measured 8% slower than 2048)
    if h is not None:
        cap = max(n * h * itemsize, v * h * itemsize // 4) // row
        fifth = min(fifth, max(256, cap // 256 * 256))
    chunk = _FORCE.get("chunk", max(1, min(n, fifth, (1 << 30) // row)))
    tile = _FORCE.get("tile", min(next_power_of_2(max(v, 1)), 8192 if v >= 65536 else 4096))
    rows = _FORCE.get("rows", max(1, min(2048 // tile, next_power_of_2(max(chunk, 1)))))
    elems = tile * rows
    warps = 4 if elems <= 2048 else 8 if elems <= 4096 else 16
    progs = _FORCE.get("programs", max(_num_sms(), min(8 * _num_sms(), (24 << 20) // max(v * itemsize * rows, 1))))
    return chunk, tile, rows, warps, progs


def chunks(n: int, chunk: int) -> list[tuple[int, int]]:
    """(start, rows) of the token chunks: cdiv(n, chunk) chunks of nearly equal size in whole 256-row GEMM tiles
    (none larger than ``chunk``), instead of full chunks and a small remainder whose GEMMs run below peak (8192
    tokens in 1536-row chunks: 4 x 1280 + 2 x 1536 instead of 5 x 1536 + 512).  Uniform chunks where that does
    not divide (fewer than 256 rows a chunk, a chunk that is not whole tiles) or under ``forced(balance=False)``."""
    step = max(chunk, 1)
    k = -(-n // step)
    units, rest = divmod(n, 256)
    if k <= 1 or units < k or chunk % 256 or not _FORCE.get("balance", True):
        return [(s, min(step, n - s)) for s in range(0, n, step)]
    q, r = divmod(units, k)
    sizes = [(q + (i >= k - r)) * 256 for i in range(k)]
    sizes[0] += rest
    if max(sizes) > chunk:
        return [(s, min(step, n - s)) for s in range(0, n, step)]
    starts = [sum(sizes[:i]) for i in range(k)]
    return list(zip(starts, sizes))


@triton.jit
def _ex(x, F64: tl.constexpr):
    if F64:
        return _exp_acc(x)
    else:
        return tl.exp(x)


@triton.jit
def _cap(l, cap, CAP: tl.constexpr, F64: tl.constexpr):
    # softcap: cap * tanh(l / cap), tanh(y) = 1 - 2 / (exp(2y) + 1) (saturates cleanly: exp -> inf gives 1)
    if CAP:
        return cap * (1.0 - 2.0 / (_ex(2.0 * l / cap, F64) + 1.0))
    else:
        return l


@triton.jit
def _chunk_block(l_ptr, t_ptr, ws_ptr, prm_ptr, blk, n_rows, row0, N, V, sl, stn, IGNORE, CAP: tl.constexpr,
                 SMOOTH: tl.constexpr, Z: tl.constexpr, MEAN: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr,
                 TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    eps = tl.load(prm_ptr).to(CT)
    cap = tl.load(prm_ptr + 1).to(CT)
    z = tl.load(prm_ptr + 2).to(CT)
    r = blk * ROWS + tl.arange(0, ROWS)
    rmask = r < n_rows
    t = tl.load(t_ptr + (row0 + r) * stn, mask=rmask, other=IGNORE).to(tl.int64)
    valid = rmask & (t != IGNORE)
    bad = valid & ((t < 0) | (t >= V))
    keep = valid & (t >= 0) & (t < V)
    tc = tl.where(keep, t, 0)
    r64 = r.to(tl.int64)
    # pass 1: online max / sum of exp / smoothing sum a = sum_c (m - u_c) (relative to the running max, loss.py)
    m = tl.full([ROWS], float("-inf"), CT)
    s = tl.zeros([ROWS], CT)
    a = tl.zeros([ROWS], CT)
    cnt = tl.zeros([ROWS], CT)
    for off in loop(0, V, TILE):
        m, s, a, cnt = _p1(l_ptr, r64, rmask, off, V, sl, cap, m, s, a, cnt, CAP, SMOOTH, F64, TILE)
    ls = _lg(s, F64)
    m = tl.where(m == float("-inf"), 0.0, m)
    lse = m + ls
    ut = _cap(tl.load(l_ptr + r64 * sl + tc, mask=keep, other=0.0).to(CT), cap, CAP, F64)
    loss = (1.0 - eps) * ((m - ut) + ls)
    if SMOOTH:
        loss += eps / V * (cnt * ls + a)
    if Z:
        loss += z * lse * lse
    loss = tl.where(keep, loss, 0.0)
    loss = tl.where(bad, float("nan"), loss)
    tl.store(ws_ptr + row0 + r, loss, mask=rmask)
    tl.store(ws_ptr + N + row0 + r, tl.where(keep, 1.0, 0.0).to(CT), mask=rmask)
    tl.store(ws_ptr + 2 * N + r * 0, tl.full([ROWS], 1.0, CT), mask=bad)
    # scale: 1 / (kept rows) for the mean (the pre-pass wrote the count at ws[2N + 1]), 1 for the sum
    if MEAN:
        sc = tl.where(keep, 1.0 / tl.load(ws_ptr + 2 * N + 1 + r * 0), 0.0)
    else:
        sc = tl.where(keep, 1.0, 0.0).to(CT)
    inv = 1.0 / s
    zf = 1.0 + 2.0 * z * lse
    for off in loop(0, V, TILE):
        _p2(l_ptr, r64, rmask, off, V, sl, tc, m, inv, zf, sc, eps, cap, CAP, SMOOTH, F64, TILE)


@triton.jit
def _p1(l_ptr, r, rmask, off, V, sl, cap, m, s, a, cnt, CAP: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr,
        TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    c = off + tl.arange(0, TILE)
    mask = rmask[:, None] & (c < V)[None, :]
    u = _cap(tl.load(l_ptr + r[:, None] * sl + c[None, :], mask=mask, other=0.0).to(CT), cap, CAP, F64)
    u = tl.where(mask, u, float("-inf"))
    m_new = tl.maximum(m, tl.max(u, 1))
    ms = tl.where(m_new == float("-inf"), 0.0, m_new)
    s = s * _ex(m - ms, F64) + tl.sum(_ex(u - ms[:, None], F64), 1)
    if SMOOTH:
        shift = tl.where(m == float("-inf"), 0.0, ms - m)
        a = a + cnt * shift + tl.sum(tl.where(mask, ms[:, None] - u, 0.0), 1)
        cnt += tl.sum(mask.to(CT), 1)
    return m_new, s, a, cnt


@triton.jit
def _p2(l_ptr, r, rmask, off, V, sl, tc, m, inv, zf, sc, eps, cap, CAP: tl.constexpr, SMOOTH: tl.constexpr,
        F64: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    c = off + tl.arange(0, TILE)
    mask = rmask[:, None] & (c < V)[None, :]
    ptr = l_ptr + r[:, None] * sl + c[None, :]
    u = _cap(tl.load(ptr, mask=mask, other=0.0).to(CT), cap, CAP, F64)
    d = _ex(u - m[:, None], F64) * inv[:, None] * zf[:, None]
    d -= tl.where(c[None, :] == tc[:, None], 1.0 - eps, 0.0)
    if SMOOTH:
        d -= eps / V
    if CAP:
        q = u / cap
        d = d * (1.0 - q * q)
    tl.store(ptr, (d * sc[:, None]).to(l_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def _lce_chunk(l_ptr, t_ptr, ws_ptr, prm_ptr, n_rows, row0, N, V, sl, stn, IGNORE, CAP: tl.constexpr,
               SMOOTH: tl.constexpr, Z: tl.constexpr, MEAN: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr,
               TILE: tl.constexpr):
    nblk = tl.cdiv(n_rows, ROWS)
    for blk in loop(tl.program_id(0), nblk, tl.num_programs(0)):
        _chunk_block(l_ptr, t_ptr, ws_ptr, prm_ptr, blk, n_rows, row0, N, V, sl, stn, IGNORE, CAP, SMOOTH, Z, MEAN,
                     F64, ROWS, TILE)


# -- host side ------------------------------------------------------------------------------------
def _coop(desc) -> bool:
    """The chunk's CE through loss_ce_coop's single-read kernel (GPU; no softcap or z-loss, rows of at least two
    8192-class chunks): each row is read once into registers and its gradient written over it, instead of
    _lce_chunk's two passes."""
    a = desc.attr_dict
    return (_FORCE.get("coop", not INTERPRETING) and a["softcap"] is None and not a["z_loss"]
            and _long.eligible(desc.inputs[1].shape[0]))


def _layout(desc):
    n = desc.inputs[0].shape[0]
    v = desc.inputs[1].shape[0]
    s = desc.inputs[0].dtype.itemsize
    f64 = desc.inputs[0].dtype.itemsize == 8
    rows = max((c for _, c in chunks(n, choose(n, v, s, desc.inputs[0].shape[1])[0])), default=0)
    # row losses, kept flags, bad-target flag, kept count (+ the coop kernel's partials and row counters)
    words = 2 * n + 2 + (4 + _long.workspace_words(rows, v, loss=True) if _coop(desc) else 0)
    head = (words * (8 if f64 else 4) + 255) // 256 * 256
    return head, rows * v * s, f64


def _workspace(desc) -> int:
    head, logits, _ = _layout(desc)
    return head + logits


def _bind(desc, pref=None):
    n, h = desc.inputs[0].shape
    v = desc.inputs[1].shape[0]
    has_b = len(desc.inputs) == 4
    a = desc.attr_dict
    cap, eps, z = a["softcap"], a["label_smoothing"], a["z_loss"]
    mean = a["reduction"] == "mean"
    ignore = a["ignore_index"]
    head, _, f64 = _layout(desc)
    chunk, tile, rows, warps, progs = choose(n, v, desc.inputs[0].dtype.itemsize, h)
    ct = torch.float64 if f64 else torch.float32
    params: dict = {}   # device -> [eps, softcap, z, 1, V] in the compute dtype (Python floats would be typed f32)
    coop = _coop(desc)
    part = (2 * n + 2 + 3) // 4 * 4     # the coop kernel's partials, 16-byte aligned
    # torch.mm reads its cuBLAS math flag (TF32 for f32, reduced-precision split-K sums for bf16/f16) at every
    # call: set it from the preference for the chunk loop, as the cuBLAS GEMM plans do (_precision says so)
    flag = flag_switch(desc.dtype, _allow(pref))

    def run(desc_, inputs, outputs, ws):
        prev = flag[0]() if flag is not None else None
        try:
            _chunks(desc_, inputs, outputs, ws)
        finally:
            if prev is not None:
                flag[1](prev)

    def _chunks(desc_, inputs, outputs, ws):
        x, w, t = inputs[:3]
        b = inputs[3] if has_b else None
        loss, dx, dw = outputs[:3]
        wsv = _ws_view(ws[:head], f64)
        buf = ws[head:].view(x.dtype)
        wsv[2 * n:2 * n + 2].zero_()
        prm = params.get(x.device)
        if prm is None:
            prm = params[x.device] = torch.tensor([eps, cap or 1.0, z, 1.0, v], dtype=ct, device=x.device)
        db = torch.zeros(v, dtype=torch.float32 if not f64 else ct, device=x.device) if has_b else None
        if n and mean:
            _denom[(1,)](t, t, wsv[2 * n + 1:], n, v, 1, t.stride(0), 0, ignore, HAS_W=False, PROB=False, ND=False,
                         F64=f64, BLOCK=1024, num_warps=4)
        if n == 0:
            dw.zero_()
        for s0, nc in chunks(n, chunk):
            lg = buf[: nc * v].view(nc, v)
            xc = x[s0:s0 + nc]
            if has_b:
                torch.addmm(b, xc, w.t(), out=lg)
            else:
                torch.mm(xc, w.t(), out=lg)
            if coop:    # row losses to wsv[s0 + i], weights to wsv[n + s0 + i], the flag to wsv[2 n]
                _long.launch(prm[3:4], lg, t[s0:s0 + nc], lg, lg, wsv[part:], wsv[2 * n + 1:], prm[0:1],
                             prm[4:5], nc, v, ignore, False, eps > 0, 2 if mean else 1, f64, loss=wsv[s0:],
                             woff=n, foff=2 * n - s0)
            else:
                grid = (min(cdiv(nc, rows), progs),)
                _lce_chunk[grid](lg, t, wsv, prm, nc, s0, n, v, v, t.stride(0), ignore, CAP=cap is not None,
                                 SMOOTH=eps > 0, Z=z > 0, MEAN=mean, F64=f64, ROWS=rows, TILE=tile,
                                 num_warps=warps)
            _gemm_out(torch.mm, (lg, w), dx[s0:s0 + nc])
            if s0 == 0:
                _gemm_out(torch.mm, (lg.t(), xc), dw)
            else:
                dw.addmm_(lg.t(), xc)
            if has_b:
                db += lg.sum(0, dtype=db.dtype)
        _fold[(1,)](wsv, loss, n, MEAN=mean, F64=f64, BLOCK=1024, num_warps=4)
        if has_b:
            outputs[3].copy_(db)
        if n:
            _check_flag(desc.op, wsv[2 * n], v, ignore, pref)

    return run


def _gemm_out(fn, args, out):
    if out.is_contiguous():
        fn(*args, out=out)
    else:
        out.copy_(fn(*args))


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    (n, h), v = desc.inputs[0].shape, desc.inputs[1].shape[0]
    chunk, tile, rows, _, progs = choose(n, v, desc.inputs[0].dtype.itemsize, h)
    ce = f"coop{_long.CHUNK}x{_long.splits(v)}" if _coop(desc) else f"tile{tile}x{rows}"
    return f"torch.mm+triton:linear_cross_entropy:chunk{chunk}-{ce}"


def _precision(desc, pref=None):
    """The GEMMs' promise (cuBLAS under the plan's math flag: f32 accumulation, TF32 / half-type split-K sums
    only with allow_reduced_precision; not bit-stable across addresses and installs); the CE kernels
    accumulate in f32 (f64 for f64) in a fixed order."""
    return cublas_precision(desc, pref)


register_triton("linear_cross_entropy", _run, route=_route, workspace=_workspace, bind=_bind, precision=_precision)
