"""Single-read softmax / log_softmax (forward and backward) for rows too long for one program (GPU only).

The split path of ``softmax.py`` reads a long row twice (stage 1 statistics, stage 2 re-read + write): three
HBM passes, at most ~2/3 of the copy roofline once the tensor overflows L2 (1024x131072 and 512x262144 bf16
measured 59% on the H200).  Here each program keeps one chunk of a row in registers (8192 elements: 32 per
thread at 8 warps), publishes the chunk's partial statistics, waits until every chunk of its row has
published, folds all partials in a fixed order and writes its chunk from registers: one read + one write,
the floor.  The load of a program's next chunk is issued before it waits, so the wait hides behind it.

Waiting on sibling programs needs them resident at the same time: the grid is persistent (P programs,
at most what the SMs hold at once, computed from the compiled kernel's registers), P is a multiple of the
chunks per row, and work item w = (row, chunk) runs on program w % P in round w // P, so the programs a
chunk waits for are in the same round on other resident programs.  The partials are plain stores; a
per-row counter (zeroed before the launch) is bumped with a release atomic after them and polled with an
acquire atomic before the partials are read back (volatile, past L1).  The counter orders, never sums,
values: every program of a row folds the same partials in the same order, so the result is deterministic
and bit-identical to a rerun.  The interpreter runs programs one after another (a waiting program would
never see its siblings), so under TRITON_INTERPRET=1 the split path is used and these kernels are tested
on the GPU (tests/softmax/test_softmax_long.py).
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from .._lib.config import num_sms
from .._lib.coop import chunk as _chunk
from .._lib.coop import per_sm as _per_sm
from .._lib.coop import publish as _publish
from .._lib.coop import safe_max as _safe
from .._lib.coop import wait as _wait
from .._lib.math import exp_acc as _ex
from .._lib.math import log_acc as _lg
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

CHUNK = 8192      # elements per program: 16 KB bf16 / 32 KB f32 in flight per program, 32 per thread
WARPS = 8
FW_MAXNREG = 64


@triton.jit
def _widen(xr, mask, y_ptr, CT: tl.constexpr, NEG: tl.constexpr):
    x = xr.to(y_ptr.dtype.element_ty).to(CT)   # dtype=: torch casts the input first
    if NEG:
        x = tl.where(mask, -x, x)
    return x


@fast_kernel
def _fw_coop(x_ptr, y_ptr, part_ptr, cnt_ptr, n_rows, R, sxo, sxr, NSPLIT, LOG: tl.constexpr, F64: tl.constexpr,
             NEG: tl.constexpr, CHUNK: tl.constexpr, SP: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    total = n_rows * NSPLIT
    nprog = tl.num_programs(0)
    k = tl.arange(0, SP)
    w0 = tl.program_id(0)
    row, c = _chunk(w0, NSPLIT, R, CHUNK, I64)
    x_next = tl.load(x_ptr + row * sxo + c * sxr, mask=(c < R) & (w0 < total), other=float("-inf"))
    for w in range(w0, total, nprog):
        row, c = _chunk(w, NSPLIT, R, CHUNK, I64)
        mask = c < R
        # the chunk stays in its storage dtype between the two uses (16 registers for 32 bf16 values instead
        # of 32 as f32), which helps the forward fit FW_MAXNREG beside the prefetched chunk
        xr = x_next
        x = _widen(xr, mask, y_ptr, CT, NEG)
        m = tl.max(x, 0)
        tl.store(part_ptr + w, m)
        tl.store(part_ptr + total + w, tl.sum(_ex(x - _safe(m), F64), 0))
        _publish(cnt_ptr, row)
        # the next round's chunk is in flight while this one waits for its siblings (the wait is ~1-2 us:
        # without the prefetch every round paid it, 73-77% of the copy roofline on the H100)
        rn, cn = _chunk(w + nprog, NSPLIT, R, CHUNK, I64)
        x_next = tl.load(x_ptr + rn * sxo + cn * sxr, mask=(cn < R) & (w + nprog < total), other=float("-inf"))
        _wait(cnt_ptr, row, NSPLIT)
        km = k < NSPLIT
        ms = tl.load(part_ptr + row * NSPLIT + k, mask=km, other=float("-inf"), volatile=True)
        ss = tl.load(part_ptr + total + row * NSPLIT + k, mask=km, other=0.0, volatile=True)
        mr = tl.max(ms, 0)
        s = tl.sum(ss * _ex(ms - _safe(mr), F64), 0)
        x = _widen(xr, mask, y_ptr, CT, NEG)
        if LOG:
            y = x - (mr + _lg(s, F64))
        else:   # one reciprocal per row, a multiply per element (an f32 division is ~10 instructions)
            y = _ex(x - _safe(mr), F64) * (1.0 / s)
        tl.store(y_ptr + row * R + c, y.to(y_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def _bw_coop(g_ptr, y_ptr, dx_ptr, part_ptr, cnt_ptr, n_rows, R, sgo, sgr, syo, syr, NSPLIT, LOG: tl.constexpr,
             F64: tl.constexpr, CHUNK: tl.constexpr, SP: tl.constexpr, I64: tl.constexpr):
    # softmax: dx = y * (g - sum(g*y));  log_softmax: dx = g - exp(y) * sum(g)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    total = n_rows * NSPLIT
    nprog = tl.num_programs(0)
    k = tl.arange(0, SP)
    w0 = tl.program_id(0)
    row, c = _chunk(w0, NSPLIT, R, CHUNK, I64)
    mk = (c < R) & (w0 < total)
    g_next = tl.load(g_ptr + row * sgo + c * sgr, mask=mk, other=0.0)
    y_next = tl.load(y_ptr + row * syo + c * syr, mask=mk, other=0.0)
    for w in range(w0, total, nprog):
        row, c = _chunk(w, NSPLIT, R, CHUNK, I64)
        mask = c < R
        g = g_next.to(CT)
        y = y_next.to(CT)
        if LOG:
            tl.store(part_ptr + w, tl.sum(g, 0))
        else:
            tl.store(part_ptr + w, tl.sum(g * y, 0))
        _publish(cnt_ptr, row)
        rn, cn = _chunk(w + nprog, NSPLIT, R, CHUNK, I64)
        mk = (cn < R) & (w + nprog < total)
        g_next = tl.load(g_ptr + rn * sgo + cn * sgr, mask=mk, other=0.0)
        y_next = tl.load(y_ptr + rn * syo + cn * syr, mask=mk, other=0.0)
        _wait(cnt_ptr, row, NSPLIT)
        d = tl.sum(tl.load(part_ptr + row * NSPLIT + k, mask=k < NSPLIT, other=0.0, volatile=True), 0)
        if LOG:
            dx = g - _ex(y, F64) * d
        else:
            dx = y * (g - d)
        tl.store(dx_ptr + row * R + c, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def capacity() -> int:
    """Chunks of one row that are certainly resident together: one program per SM (the kernels use 8 warps
    and < 128 registers per thread, so 2 per SM usually fit; the bound used for the decision stays safe)."""
    return num_sms()


def splits(R: int, chunk: int = CHUNK) -> int:
    return cdiv(R, chunk)


def workspace_bytes(outer: int, R: int, bw: bool, f64: bool, chunk: int = CHUNK) -> int:
    n = outer * splits(R, chunk)
    return (1 if bw else 2) * n * (8 if f64 else 4) + 4 * outer + 16


_PER_SM: dict = {}


def launch(bw: bool, args: tuple, ws: torch.Tensor, outer: int, R: int, f64: bool, kw: dict,
           chunk: int = CHUNK) -> None:
    """Run the forward (args = x, y, strides...) or backward (g, y, dx, strides...) kernel; ``ws`` a byte
    buffer of at least :func:`workspace_bytes`."""
    nsplit = splits(R, chunk)
    wdt = torch.float64 if f64 else torch.float32
    npart = (1 if bw else 2) * outer * nsplit
    esz = 8 if f64 else 4
    flat = ws.reshape(-1)
    part = flat[: npart * esz].view(wdt)
    off = (npart * esz + 15) // 16 * 16
    cnt = flat[off: off + 4 * outer].view(torch.int32)
    cnt.zero_()
    kern = _bw_coop if bw else _fw_coop
    n_t = 3 if bw else 2
    tensors, strides = args[:n_t], args[n_t:]
    full = (*tensors, part, cnt, outer, R, *strides, nsplit)
    const = dict(kw, CHUNK=chunk, SP=next_power_of_2(nsplit))
    # forward (f32/f16/bf16 compute): capped at 64 registers, which it fits without spilling (sm_90: 64 with a
    # 0-byte stack, tests/softmax/test_softmax.py), so 4 programs share an SM instead of 3 (80 uncapped)
    opts = dict(num_warps=WARPS, **({} if (bw or f64) else {"maxnreg": FW_MAXNREG}))
    key = (bw, tuple(sorted(const.items())))
    per_sm = _PER_SM.get(key)
    if per_sm is None:   # compile (or find) the kernel once to read its register and shared-memory use
        compiled = kern.warmup(*full, grid=(1,), **const, **opts)
        compiled._init_handles()
        per_sm = _PER_SM[key] = _per_sm(compiled.n_regs, WARPS, compiled.metadata.shared)
    progs = max(nsplit, (num_sms() * per_sm) // nsplit * nsplit)
    progs = min(progs, cdiv(outer * nsplit, nsplit) * nsplit)
    kern[(progs,)](*full, **const, **opts)
