"""Cooperative (single-read) kernels' shared pieces: programs of one row publish partials and wait for their
siblings, so the grid must be persistent and co-resident (see softmax/coop.py for the scheme; loss/ce_coop.py
uses the same protocol for cross-entropy).  GPU only: the interpreter runs programs one after another."""
from __future__ import annotations

import functools

import triton
import triton.language as tl


@triton.jit
def safe_max(m):
    """A running max with -inf (nothing finite seen yet) as 0, so exp(x - m) never makes -inf - -inf = NaN."""
    return tl.where(m == float("-inf"), 0.0, m)


@triton.jit
def publish(cnt_ptr, row):
    """Count this chunk's partials (already stored) as published for ``row``."""
    tl.debug_barrier()   # every thread's partial stores are issued before the release below
    tl.atomic_add(cnt_ptr + row, 1, sem="release")


@triton.jit
def wait(cnt_ptr, row, NSPLIT):
    """Spin until every chunk of ``row`` has published (acquire: their partials are visible after)."""
    n = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    while n < NSPLIT:
        n = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    tl.debug_barrier()


@triton.jit
def chunk(w, NSPLIT, R, CHUNK: tl.constexpr, I64: tl.constexpr):
    """Work item ``w`` as (row, the CHUNK column indices of its chunk) for rows split into NSPLIT chunks."""
    row = w // NSPLIT
    if I64:
        row = row.to(tl.int64)
    c = (w - row * NSPLIT) * CHUNK + tl.arange(0, CHUNK)
    return row, c


@functools.lru_cache(maxsize=None)
def per_sm(n_regs: int, warps: int, shared: int) -> int:
    """Programs of this kernel one SM holds at once (sm_80/sm_90: 64K registers, 2048 threads, 227 KB smem)."""
    by_regs = 65536 // max(1, ((n_regs + 7) // 8 * 8) * 32 * warps)
    by_threads = 2048 // (32 * warps)
    by_smem = (227 * 1024) // shared if shared else by_threads
    return max(1, min(by_regs, by_threads, by_smem, 4))
