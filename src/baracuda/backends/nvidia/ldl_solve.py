"""``ldl_solve`` on the GPU: A X = B from ldl_factor's (LD, pivots), every matrix of the batch at once.

A = P1 L1 P2 L2 ... D ... (LAPACK's lower Bunch-Kaufman form, as sytrf writes it and ldl_factor returns it): each
block of D is 1x1 (pivot > 0: rows k and pivot - 1 interchanged) or 2x2 (both pivots negative: rows k + 1 and
-pivot - 1 interchanged).  The solve is LAPACK's sytrs order of operations, vectorized over the batch:
    forward  (k = 0 .. n-1):  interchange, eliminate below the block with L's block columns, divide by the block
                              of D (a 2x2 block by the scaled Cramer form sytrs uses);
    backward (k = n-1 .. 0):  subtract L^T (L^H) times the rows below, interchange back.
Matrices whose blocks differ take the same n steps, each step masked per matrix (a 1x1 step, the first or the
second row of a 2x2 block), so the batch costs n steps of a few batched torch kernels: O(B n^2 k) work, no host
reads, no per-matrix library calls (cuSOLVER's Xsytrs solves one matrix per call).  hermitian=True: D's diagonal
is real and the backward sweep uses L^H.
"""
from __future__ import annotations

import math

import torch

from ..._core.registry import Impl, register
from ..._core.sku import Backend
from ...ops.linalg_common import LINALG_DTYPES
from .spectral_backward import bind_guarded, default_run, gemm_precision

__all__ = ["ldl_solve"]


def _swap_rows(x, rows, k, other, mask):
    """Rows k and other[b] of each matrix b interchanged where mask[b]."""
    xk, xo = x[:, k], x[rows, other]
    x[rows, other] = torch.where(mask[:, None], xk, xo)
    x[:, k] = torch.where(mask[:, None], xo, xk)


def ldl_solve(ld, piv, b, hermitian: bool = False):
    """X of A X = B for each (n, n) factor of ``ld`` (B, n, n), pivots ``piv`` (B, n) and right sides ``b`` (B, n, k)."""
    nb, n = ld.shape[0], ld.shape[-1]
    x = b.clone()
    if nb == 0 or n == 0 or x.shape[-1] == 0:
        return x
    rows = torch.arange(nb, device=ld.device)
    p = piv.to(torch.int64)
    diag = ld.diagonal(dim1=-2, dim2=-1)
    if hermitian and ld.is_complex():
        diag = diag.real.to(ld.dtype)
    second = torch.zeros(nb, dtype=torch.bool, device=ld.device)    # row k closes a 2x2 block opened at k - 1
    starts1, starts2, seconds, swaps = [], [], [], []
    for k in range(n):        # -- forward: L D Y = P B ---------------------------------------------------------
        s1 = ~second & (p[:, k] > 0)
        s2 = ~second & (p[:, k] < 0) if k + 1 < n else torch.zeros_like(second)
        kp = torch.where(s1, p[:, k] - 1, torch.where(s2, -p[:, k] - 1, k))
        starts1.append(s1)
        starts2.append(s2)
        seconds.append(second)
        swaps.append(kp)
        _swap_rows(x, rows, k, kp, s1)
        if k + 1 < n:
            _swap_rows(x, rows, k + 1, kp, s2)
        xk = x[:, k]
        if k + 1 < n:
            # rows below the block: - L[:, k] x_k (1x1 blocks and 2x2 blocks), - L[:, k+1] x_{k+1} (2x2 only)
            below = ld[:, k + 1:, k, None] * xk[:, None, :]
            x[:, k + 1:] -= torch.where(s1[:, None, None], below, 0)
            if k + 2 < n:
                below2 = below[:, 1:] + ld[:, k + 2:, k + 1, None] * x[:, k + 1, None, :]
                x[:, k + 2:] -= torch.where(s2[:, None, None], below2, 0)
        x[:, k] = torch.where(s1[:, None], xk / diag[:, k, None], xk)
        if k + 1 < n:   # the 2x2 block [[d11, conj?(c)], [c, d22]] (c = LD[k+1, k]), sytrs' scaled Cramer form
            c = ld[:, k + 1, k]
            c = torch.where(s2, c, 1)
            cc = c.conj() if hermitian else c
            a1 = diag[:, k] / cc
            a2 = diag[:, k + 1] / c
            den = a1 * a2 - 1
            b1 = x[:, k] / cc[:, None]
            b2 = x[:, k + 1] / c[:, None]
            y1 = (a2[:, None] * b1 - b2) / den[:, None]
            y2 = (a1[:, None] * b2 - b1) / den[:, None]
            m = s2[:, None]
            x[:, k] = torch.where(m, y1, x[:, k])
            x[:, k + 1] = torch.where(m, y2, x[:, k + 1])
        second = s2
    lt = ld.conj() if hermitian else ld
    for k in range(n - 1, -1, -1):   # -- backward: L^T X = Y (L^H), interchanges undone --------------------------
        s1, sec = starts1[k], seconds[k]
        if k + 1 < n:
            tail = x[:, k + 1:]
            upd_k = (lt[:, k + 1:, k, None] * tail).sum(1)
            x[:, k] = torch.where((s1 | sec)[:, None], x[:, k] - upd_k, x[:, k])
            if k >= 1:
                upd_k1 = (lt[:, k + 1:, k - 1, None] * tail).sum(1)
                x[:, k - 1] = torch.where(sec[:, None], x[:, k - 1] - upd_k1, x[:, k - 1])
        # the interchange of a 1x1 block at k, or of a 2x2 block's second row k (its start k - 1 holds the pivot)
        kp = torch.where(s1, swaps[k], swaps[k - 1] if k >= 1 else swaps[k])
        _swap_rows(x, rows, k, kp, s1 | sec)
    return x


def _run(desc, inputs, outputs, ws=None):
    ld, piv, b = inputs
    out = outputs[0]
    n, k = ld.shape[-1], b.shape[-1]
    batch = out.shape[:-2]
    nb = math.prod(batch)
    ldb = ld.expand(batch + (n, n)).reshape(nb, n, n)
    pb = piv.expand(batch + (n,)).reshape(nb, n)
    bb = b.expand(batch + (n, k)).reshape(nb, n, k)
    out.copy_(ldl_solve(ldb, pb, bb, desc.attr("hermitian")).reshape(out.shape))


register(Impl(op="ldl_solve", backend=Backend.CUBLAS, run=default_run(bind_guarded(_run)), bind=bind_guarded(_run),
              precision=gemm_precision, devices=frozenset({"cuda"}), dtypes=frozenset(LINALG_DTYPES),
              priority=lambda desc, dev: 20.0, route="torch: batched Bunch-Kaufman sweeps (sytrs' steps, n per call)",
              array_api="torch"))
