"""lu_unpack on the GPU, any size: the permutation of each matrix from its pivots (one program per matrix, the
interchanges applied in order to a register vector), then P, L and U written tile by tile from LU and the permutation
(P[i, j] = 1 where row i of A is row j of L U: perm[j] == i).  Complex matrices run the same kernel on their real
and imaginary planes (strided real views), the unit entries (P's ones, L's diagonal) written on the real plane
only."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .._lib.geometry import cdiv
from .._lib.interp import loop

_BI = _BJ = 32


@triton.jit
def _perm_kernel(piv_ptr, perm_ptr, m, k, spb, M: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, M)
    perm = r
    for i in loop(0, k):
        p = tl.load(piv_ptr + b * spb + i) - 1
        pi = tl.sum(tl.where(r == i, perm, 0), axis=0)
        pp = tl.sum(tl.where(r == p, perm, 0), axis=0)
        perm = tl.where(r == i, pp, tl.where(r == p, pi, perm))
    tl.store(perm_ptr + b * M + r, perm, mask=r < m)


@triton.jit
def _unpack_kernel(lu_ptr, perm_ptr, p_ptr, l_ptr, u_ptr, m, n, k, M: tl.constexpr,
                   sab, sar, sac, spb, spr, spc, slb, slr, slc, sub, sur, suc, ONE: tl.constexpr, BI: tl.constexpr,
                   BJ: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    i = (tl.program_id(1) * BI + tl.arange(0, BI))[:, None]
    j = (tl.program_id(2) * BJ + tl.arange(0, BJ))[None, :]
    lu = tl.load(lu_ptr + b * sab + i * sar + j * sac, mask=(i < m) & (j < n), other=0.0)
    perm = tl.load(perm_ptr + b * M + j, mask=j < m, other=-1)
    tl.store(p_ptr + b * spb + i * spr + j * spc, tl.where(perm == i, ONE, 0.0).to(lu.dtype), mask=(i < m) & (j < m))
    low = tl.where(j < i, lu, tl.where(j == i, ONE, 0.0).to(lu.dtype))
    tl.store(l_ptr + b * slb + i * slr + j * slc, low, mask=(i < m) & (j < k))
    tl.store(u_ptr + b * sub + i * sur + j * suc, tl.where(j >= i, lu, 0.0), mask=(i < k) & (j < n))


def unpack_into(lu, piv, P, L, U):
    """P, L, U (B, ., .) from lu (B, m, n) and int32 pivots (B, k)."""
    nb, m, n = lu.shape
    k = min(m, n)
    if nb == 0 or m == 0:
        return
    M = max(2, triton.next_power_of_2(m))
    perm = torch.empty((nb, M), dtype=torch.int32, device=lu.device)
    _perm_kernel[(nb,)](piv, perm, m, k, piv.stride(0),  # (rows of unit stride)
                         M=M, num_warps=4 if M <= 1024 else 8)
    grid = (nb, cdiv(m, _BI), cdiv(max(m, n), _BJ))
    planes = [(lu, P, L, U, 1.0)]
    if lu.is_complex():     # (real plane with the unit entries, imaginary plane with zeros there)
        parts = [torch.view_as_real(t) for t in (lu, P, L, U)]
        planes = [tuple(t[..., c] for t in parts) + (1.0 if c == 0 else 0.0,) for c in (0, 1)]
    for a, p_, l_, u_, one in planes:
        _unpack_kernel[grid](a, perm, p_, l_, u_, m, n, k, M, *a.stride(), *p_.stride(), *l_.stride(), *u_.stride(),
                             ONE=one, BI=_BI, BJ=_BJ, num_warps=4)


def run_lu_unpack(desc, inputs, outputs, ws):
    lu, piv = inputs
    m, n = lu.shape[-2:]
    nb = math.prod(lu.shape[:-2])
    flat = [lu.reshape((nb, m, n)), piv.reshape(nb, min(m, n)).contiguous()] + [o.reshape((nb,) + o.shape[-2:])
                                                                                 for o in outputs]
    unpack_into(*flat)
