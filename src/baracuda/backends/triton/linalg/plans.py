"""Triton plans of the linalg solve family for batches of small matrices (n <= 64, f32 / f64): the host side of
small.py's and warp.py's kernels (warp.py: f32 with n <= 32 on a GPU, ``_warp``), and lu_unpack (any size).

Batch dims broadcast by views (``broadcast_to`` then a flat batch: a copy only where the batch strides do not flatten);
transposed reads are swapped strides.  Priority: above cuSOLVER for n <= 64 (one program per matrix against one
library call or a batched call per matrix group), below it beyond (the registration refuses n > 64).
"""
from __future__ import annotations

import math

import torch
import triton

from ...._core.dtypes import DType
from ....ops.linalg_factor import check_info
from ....ops.linalg_solve import is_vector_rhs
from .._lib.geometry import cdiv
from .._lib.interp import INTERPRETING
from .._lib.register import register_triton
from .small import _chol_kernel, _lu_kernel, _solve_kernel
from .unpack import run_lu_unpack, unpack_into

try:   # the one-warp kernels are Gluon (explicit layouts): compiled only, Triton >= 3.5
    from . import warp as _W
except ImportError:   # pragma: no cover - depends on the Triton build
    _W = None

MAX_N = 64
WARP_N = 32
WARP_BK = 16         # right-hand-side columns an lu_solve warp program carries (<= 128 registers)
WARP_FUSED_K = 8     # solve fuses the LU and the solve up to this many right-hand sides (16 spills at 168 registers);
                     # more take the LU kernel and then lu_solve's, rather than an LU per column block
_REAL = frozenset({DType.f32, DType.f64})
_NOTE = "complex matrices: the cuSOLVER backend (the register kernels are real)"


def _tile(n: int) -> tuple[int, int]:
    """(N, num_warps): the register tile and the warps per program.  Up to 32x32, one warp (32 registers of the tile
    per thread at 32x32): every per-step reduction stays in warp shuffles, no barrier.  Swept on the H100 (session 8
    run H, 65536 x 32x32 f32, 1 / 2 / 4 warps): lu_factor 1.93 / 2.47 / 3.03 ms, solve 2.80 / 3.80 / 10.4, inv
    1.72 / 2.32 / 4.63, cholesky 1.02 / 1.07 / 1.25 (run G, before the no-row-move kernels: 1 warp was best there
    too).  64x64 in 8 warps (not swept)."""
    N = max(2, triton.next_power_of_2(max(n, 1)))
    return N, (1 if N <= 32 else 8)


def _flat(t, batch, core):
    """``t`` broadcast to batch + core, viewed as (B, *core)."""
    return t.broadcast_to(tuple(batch) + tuple(core)).reshape((math.prod(batch),) + tuple(core))


def _small(desc, square=True):
    a = desc.inputs[1] if desc.op == "cholesky_solve" else desc.inputs[0]
    m, n = a.shape[-2:]
    if square and m != n:
        return f"square matrices only (given {m}x{n}): cuSOLVER takes rectangular ones"
    if max(m, n) > MAX_N:
        return f"n = {max(m, n)} > {MAX_N}: the register kernels hold the whole matrix; cuSOLVER above"
    return None


def _prio(desc, dev):
    return 20.0 if dev.type == "cuda" else -200.0


_LU_OPS = frozenset({"lu", "lu_factor", "lu_factor_ex"})


def _warp(desc) -> bool:
    """Whether warp.py's one-warp kernels run ``desc``: f32, n <= 32, pivoting, compiled (Gluon has no interpreter:
    under TRITON_INTERPRET small.py's kernels run the same ops)."""
    if _W is None or INTERPRETING or desc.dtype != DType.f32:
        return False
    return desc.inputs[0].shape[-1] <= WARP_N and (desc.op not in _LU_OPS or desc.attr("pivot"))


def _prio_pivoted(desc, dev):
    """The partial-pivoting ops (LU and what is built on it: solve, det): warp.py's one-warp kernels where they apply
    (f32, n <= 32) rank above cuSOLVER / cuBLAS; small.py's register kernels below them.  On the H200
    (bench/results/2026-11-29-h200/session20, 65536 x 32x32 f32, ms): lu_factor warp 0.369 / small 1.810 / cuBLAS
    getrfBatched 1.403 / torch 0.897; solve 0.456 / 2.685 / 2.117 / 1.736; det 0.251 / 1.661 / 1.188 / 0.797.  (The
    Cholesky and Gauss-Jordan inverse kernels of small.py beat the libraries even there: they keep _prio.)"""
    if dev.type != "cuda":
        return -200.0
    return 20.0 if _warp(desc) else 5.0


def _route(small, warp):
    return lambda desc, pref: warp if _warp(desc) else small


def _register(op, bind, route, supports=_small, priority=_prio):
    register_triton(op, bind=bind, route=route, supports=supports, dtypes=_REAL, dtypes_note=_NOTE, priority=priority)


def _mat(t, batch, n_rows, n_cols, transpose=False):
    v = _flat(t, batch, (n_rows, n_cols))
    s = v.stride()
    return v, (s[0], s[2], s[1]) if transpose else tuple(s)


# -- cholesky --------------------------------------------------------------------------------------------------------
def _bind_chol(desc, pref):
    ex = desc.op == "cholesky_ex"
    up = desc.attr("upper")
    n = desc.inputs[0].shape[-1]
    batch = desc.inputs[0].shape[:-2]
    N, warps = _tile(n)
    warp = _warp(desc)

    def run(d, inputs, outputs, ws):
        a, out = inputs[0], outputs[0]
        av, sa = _mat(a, batch, n, n, up)      # upper: A^T's lower triangle is A's upper
        lv, sl = _mat(out, batch, n, n, up)    # ... and U = L^T is stored through the same transpose
        info = outputs[1] if ex else torch.zeros(batch, dtype=torch.int32, device=a.device)
        if av.shape[0] and warp:
            _W._chol_warp_kernel[(av.shape[0],)](av, lv, info, n, *sa, *sl, num_warps=1)
        elif av.shape[0]:
            _chol_kernel[(av.shape[0],)](av, lv, info, n, *sa, *sl, HAS_INFO=True, N=N, num_warps=warps)
        if not ex:
            check_info(d.op, "chol", info, pref)
    return run


# -- LU and determinants ---------------------------------------------------------------------------------------------
_DET_OUT = {"det": 1, "slogdet": 2, "logdet": 3}


def _launch_lu(av, sa, out, piv, info, o2, so, sp, n, tile, mode=0, pivot=True, warp=False):
    """small.py's or warp.py's LU kernel on the (B, n, n) matrices ``av`` (strides ``sa``): mode 0 writes the packed
    LU into ``out`` (strides ``so``), 1-based pivots (row stride ``sp``) and info; 1 / 2 / 3 write det, (sign, log|det|)
    into ``out`` / ``o2``, logdet.  ``tile``: the bind's ``_tile(n)``; ``warp``: the bind's ``_warp(desc)``."""
    nb = av.shape[0]
    if not nb:
        return
    if warp:
        _W._lu_warp_kernel[(nb,)](av, out, piv, info, o2, n, *sa, *so, sp, OUT=mode, num_warps=1)
    else:
        N, warps = tile
        _lu_kernel[(nb,)](av, out, piv, info, o2, n, *sa, *so, sp, PIVOT=pivot, OUT=mode, HAS_INFO=mode == 0, N=N,
                          num_warps=warps)


def _lu_into(av, sa, lu, piv, info, n, tile, pivot=True, warp=False):
    """The packed LU of the (B, n, n) matrices ``av`` (strides ``sa``) into ``lu`` / ``piv`` (1-based) / ``info``."""
    _launch_lu(av, sa, lu, piv, info, lu, lu.stride(), piv.stride(0), n, tile, 0, pivot, warp)


def _bind_lu(desc, pref):
    a = desc.inputs[0]
    n = a.shape[-1]
    batch = a.shape[:-2]
    N, warps = _tile(n)
    op = desc.op
    mode = _DET_OUT.get(op, 0)
    pivot = desc.attr("pivot") if mode == 0 else True
    warp = _warp(desc)

    def run(d, inputs, outputs, ws):
        x = inputs[0]
        av, sa = _mat(x, batch, n, n)
        nb = av.shape[0]
        if mode:
            o1 = outputs[0].reshape(-1)
            o2 = outputs[1].reshape(-1) if op == "slogdet" else o1
            _launch_lu(av, sa, o1, o1, o1, o2, (1, 0, 0), 0, n, (N, warps), mode, True, warp)
            return
        unpack = op == "lu"
        lu = torch.empty_like(av) if unpack else outputs[0].reshape(av.shape)
        piv = torch.empty((nb, n), dtype=torch.int32, device=x.device) if unpack else outputs[1].reshape(nb, n)
        info = outputs[2].reshape(-1) if op == "lu_factor_ex" else torch.zeros(nb, dtype=torch.int32, device=x.device)
        _lu_into(av, sa, lu, piv, info, n, (N, warps), pivot, warp)
        if unpack:
            unpack_into(lu, piv, *(o.reshape((nb,) + o.shape[-2:]) for o in outputs))
        elif op == "lu_factor":
            check_info(op, "lu", info, pref)
    return run


# -- solves ------------------------------------------------------------------------------------------------------------
def _rhs_view(t, batch, n, left, vector):
    """A right-hand side (or solution) as (B, n, k) with the strides of op's left form (right: the transpose)."""
    if vector:
        t = t.unsqueeze(-1)
    rows, cols = t.shape[-2:]
    if left:
        return _mat(t, batch, rows, cols) + (cols,)
    return _mat(t, batch, rows, cols, True) + (rows,)


def _launch_lu_solve_warp(lu, sl, piv, sp, b, sb, x, sx, n, k, nb, adj):
    """warp.py's lu_solve: A X = B (``adj``: A^T X = B) from the packed LU (strides ``sl``) and 1-based pivots."""
    bk = min(max(1, triton.next_power_of_2(max(k, 1))), WARP_BK)
    if adj:
        sl = (sl[0], sl[2], sl[1])
    if nb and k:
        _W._lu_solve_warp_kernel[(nb, cdiv(k, bk))](lu, piv, b, x, n, k, *sl, sp, *sb, *sx, ADJ=adj, BK=bk,
                                                    num_warps=1)


def _launch_solve(a, sa, piv, sp, b, sb, x, sx, info, n, k, nb, **cx):
    N, warps = _tile(n)
    bk = min(max(2, triton.next_power_of_2(max(k, 1))), N, 32 if N >= 64 else 64)
    if nb and k:
        _solve_kernel[(nb, cdiv(k, bk))](a, piv, b, x, info, n, k, *sa, sp, *sb, *sx, N=N, BK=bk,
                                         num_warps=warps, **cx)


_CX = dict(LOWER=True, UNIT=False, ADJ=False, EYE=False, HAS_INFO=False)


def _bind_solve(desc, pref):
    """solve / solve_ex (FACT 0), solve_triangular (2), cholesky_solve (1), lu_solve (3)."""
    op = desc.op
    if op == "cholesky_solve":
        bspec, aspec = desc.inputs
    elif op == "lu_solve":
        aspec, _, bspec = desc.inputs
    else:
        aspec, bspec = desc.inputs
    n = aspec.shape[-1]
    left = desc.attr("left") if op != "cholesky_solve" else True
    vector = op in ("solve", "solve_ex") and is_vector_rhs(aspec, bspec)
    xs = desc.outputs[0]
    batch = xs.shape[:-1] if vector else xs.shape[:-2]
    cx = dict(_CX)
    trans_a = not left
    tile = _tile(n)
    warp = op in ("solve", "solve_ex", "lu_solve") and _warp(desc)   # (the ops warp.py has a kernel for)
    if op in ("solve", "solve_ex"):
        cx.update(FACT=0, HAS_INFO=True)
    elif op == "solve_triangular":
        cx.update(FACT=2, LOWER=desc.attr("upper") != left, UNIT=desc.attr("unitriangular"))
    elif op == "cholesky_solve":
        cx.update(FACT=1)
        trans_a = desc.attr("upper")   # U^H U = (U^T)(U^T)^T: the lower factor U^T (real)
    else:
        cx.update(FACT=3, ADJ=desc.attr("adjoint") != (not left))   # X A = B is A^T X^T = B^T: the packed LU
        trans_a = False                                              # is read as it is, the kernel transposes

    def run(d, inputs, outputs, ws):
        if op == "cholesky_solve":
            b, a = inputs
        elif op == "lu_solve":
            a, piv, b = inputs
        else:
            a, b = inputs
        bv, sb, k = _rhs_view(b, batch, n, left, vector)
        xv, sx, _ = _rhs_view(outputs[0], batch, n, left, vector)
        if op in ("solve", "solve_ex"):
            # the LU factors and pivots are outputs too (the backward's lu_solve reads them): factor into them,
            # then solve from them as lu_solve does (X A = B is A^T X^T = B^T: the packed LU read transposed)
            lu_o, piv_o = outputs[-2], outputs[-1]
            nbat = math.prod(batch)
            lu = lu_o.view((nbat, n, n)) if lu_o.is_contiguous() else torch.empty(
                (nbat, n, n), dtype=lu_o.dtype, device=lu_o.device)
            piv = piv_o.view((nbat, n)) if piv_o.is_contiguous() else torch.empty(
                (nbat, n), dtype=piv_o.dtype, device=piv_o.device)
            av, sa = _mat(a, batch, n, n)
            nb = av.shape[0]
            info = torch.zeros(nb, dtype=torch.int32, device=a.device)
            if warp and left and 0 < k <= WARP_FUSED_K:   # one kernel: the LU with B's rows eliminated alongside
                if nb:
                    _W._solve_warp_kernel[(nb, 1)](av, bv, xv, lu, piv, info, n, k, *sa, *sb, *sx, *lu.stride(), n,
                                                   BK=triton.next_power_of_2(k), num_warps=1)
            elif warp:
                _lu_into(av, sa, lu, piv, info, n, tile, warp=True)
                _launch_lu_solve_warp(lu, tuple(lu.stride()), piv, n, bv, sb, xv, sx, n, k, nb, not left)
            else:
                _lu_into(av, sa, lu, piv, info, n, tile)
                _launch_solve(lu, tuple(lu.stride()), piv, n, bv, sb, xv, sx, info, n, k, nb,
                              **dict(cx, FACT=3, HAS_INFO=False, ADJ=not left))
            for o, t in ((lu_o, lu), (piv_o, piv)):
                if not o.is_contiguous():
                    o.copy_(t.view(o.shape))
        else:
            av, sa = _mat(a, batch, n, n, trans_a)
            pv = _flat(piv, batch, (n,)).contiguous() if op == "lu_solve" else av   # (the kernel reads rows of n)
            sp = n if op == "lu_solve" else 0
            nb = av.shape[0]
            info = torch.zeros(nb, dtype=torch.int32, device=a.device) if cx["HAS_INFO"] else av
            if warp and op == "lu_solve":
                _launch_lu_solve_warp(av, sa, pv, sp, bv, sb, xv, sx, n, k, nb, cx["ADJ"])
            else:
                _launch_solve(av, sa, pv, sp, bv, sb, xv, sx, info, n, k, nb, **cx)
        if cx["HAS_INFO"]:
            info = _info_of_a(info, batch, aspec.shape[:-2])
            if op == "solve_ex":
                outputs[1].copy_(info)
            else:
                check_info(op, "solve", info, pref)
    return run


def _info_of_a(info, batch, a_batch):
    """solve's info is on A's batch: the entry of each A (every broadcast copy of it holds the same) as a view."""
    full = info.reshape(batch)
    lead = len(batch) - len(a_batch)
    idx = (0,) * lead + tuple(slice(0, 1) if s == 1 else slice(None) for s in a_batch)
    return full[idx].reshape(a_batch)


def _bind_inv(desc, pref):
    """inv / inv_ex (FACT 0 on the identity), cholesky_inverse (FACT 1 on the identity)."""
    op = desc.op
    a = desc.inputs[0]
    n = a.shape[-1]
    batch = a.shape[:-2]
    chol = op == "cholesky_inverse"
    cx = dict(_CX, EYE=True, FACT=1 if chol else 0, HAS_INFO=not chol)
    warp = not chol and _warp(desc)
    tile = _tile(n)

    def run(d, inputs, outputs, ws):
        av, sa = _mat(inputs[0], batch, n, n, chol and desc.attr("upper"))
        xv, sx = _mat(outputs[0], batch, n, n)
        nb = av.shape[0]
        info = (outputs[1].reshape(-1) if op == "inv_ex" else torch.zeros(nb, dtype=torch.int32, device=av.device))
        if n == 0:
            info.zero_()   # (no launch for empty matrices: their info is 0)
        if warp:   # the LU, then lu_solve on the identity (a broadcast view: never materialized)
            lu = torch.empty((nb, n, n), dtype=av.dtype, device=av.device)
            piv = torch.empty((nb, n), dtype=torch.int32, device=av.device)
            _lu_into(av, sa, lu, piv, info, n, tile, warp=True)
            eye = torch.eye(n, dtype=av.dtype, device=av.device).expand(nb, n, n)
            _launch_lu_solve_warp(lu, tuple(lu.stride()), piv, n, eye, tuple(eye.stride()), xv, sx, n, n, nb, False)
        else:
            _launch_solve(av, sa, av, 0, av, (0, 0, 0), xv, sx, info, n, n, nb, **cx)
        if op == "inv":
            check_info(op, "inv", info, pref)
    return run


for _op in ("cholesky", "cholesky_ex"):
    _register(_op, _bind_chol, _route("triton:chol_small", "triton:chol_warp"))
for _op in ("lu_factor", "lu_factor_ex"):
    _register(_op, _bind_lu, _route("triton:lu_small", "triton:lu_warp"), priority=_prio_pivoted)
for _op in ("det", "slogdet", "logdet"):
    _register(_op, _bind_lu, _route("triton:lu_small", "triton:lu_warp(det)"), priority=_prio_pivoted)
_register("lu", _bind_lu, _route("triton:lu_small+unpack", "triton:lu_warp+unpack"), priority=_prio_pivoted)
for _op in ("solve", "solve_ex"):
    _register(_op, _bind_solve, _route(f"triton:solve_small({_op})", f"triton:solve_warp({_op})"),
              priority=_prio_pivoted)
for _op in ("solve_triangular", "cholesky_solve"):
    _register(_op, _bind_solve, f"triton:solve_small({_op})")
_register("lu_solve", _bind_solve, _route("triton:solve_small(lu_solve)", "triton:lu_solve_warp"))
for _op in ("inv", "inv_ex"):
    _register(_op, _bind_inv, _route(f"triton:solve_small({_op}, identity)", "triton:lu_warp+lu_solve_warp(identity)"))
_register("cholesky_inverse", _bind_inv, "triton:solve_small(cholesky_inverse, identity)")
register_triton("lu_unpack", run_lu_unpack, route="triton:lu_unpack", priority=_prio)   # (complex: two planes)
