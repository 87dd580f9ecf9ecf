"""Accumulating atomics: relaxed memory order.

``tl.atomic_add`` defaults to acq_rel (PTX ``atom.global.gpu.acq_rel``): every add orders the thread's earlier and
later memory accesses around it.  A scatter / histogram / gradient accumulation needs only the add itself to be
atomic: nothing in the kernel reads the target back, and the kernel's end orders every write before the next
launch.  Relaxed order (``atom.global.gpu.relaxed``, what CUDA's ``atomicAdd`` is) lets the memory system pipeline
them.  Handshakes between programs (``coop.py``'s publish / wait) keep their release / acquire.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def red_add(ptr, v, mask):
    """``*ptr += v`` atomically where ``mask`` (relaxed; the old value is not returned)."""
    tl.atomic_add(ptr, v, mask=mask, sem="relaxed")

