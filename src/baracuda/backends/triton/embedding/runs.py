"""Host side shared by the embedding and segment plans: the workspace layout, the two ways of summing token rows
into table rows (atomic / sorted runs, see kernels.py), the route choice and its precision, the flag check."""
from __future__ import annotations

import torch

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import INTERPRETING
from . import kernels as K

BT, BD, BQ = 32, 128, 1024


def tiles(d: int, cap: int, elems: int = 4096) -> tuple[int, int]:
    """(BT rows, BD columns) of a [rows, d] tile: BD the power of two covering d up to ``cap`` (wide rows: long
    contiguous runs, few programs), BT filling ``elems`` elements (a 16 KB bf16 tile for the row copies)."""
    bd = min(max(next_power_of_2(max(d, 1)), 16), cap)
    return max(1, min(64, elems // bd)), bd


def ct(dt: DType):
    """The compute dtype: f64 for f64, f32 otherwise."""
    return K.tl.float64 if dt == DType.f64 else K.tl.float32


class Workspace:
    """Named int64 / float slices of one byte buffer, 8-byte aligned, laid out once per descriptor."""

    def __init__(self):
        self.parts: dict = {}
        self.size = 0

    def add(self, name: str, n: int, itemsize: int = 8) -> "Workspace":
        self.parts[name] = (self.size, n, itemsize)
        self.size += (n * itemsize + 7) // 8 * 8
        return self

    def view(self, ws, name: str, dtype):
        off, n, size = self.parts[name]
        return ws.reshape(-1)[off:off + n * size].view(dtype)


def atomic_route(desc, pref, floating_out: DType, freq: bool = False, presorted: bool = False) -> bool:
    """Float atomics sum straight into an f32 / f64 output; everything else (half outputs, which would need an f32
    copy of the whole table; scale_grad_by_freq, which needs the id counts the sort gives; presorted ids; a
    required determinism) takes the sorted runs."""
    det = pref is not None and pref.require_deterministic
    return floating_out in (DType.f32, DType.f64) and not (freq or presorted or det)


def precision(desc, atomic: bool) -> PrecisionGuarantee:
    f64 = desc.dtype == DType.f64 or any(t.dtype == DType.f64 for t in desc.outputs)
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              bit_stable=not atomic, deterministic=not atomic)


def sort_runs(ids, nseg: int, ws, lay: Workspace, presorted: bool = False):
    """(perm or None, offsets [nseg + 1] int64) of the flattened ids: runs[s] = [offsets[s], offsets[s + 1]) of
    the sorted order.  The sort is torch.sort(stable=True) into the workspace (equal ids keep token order, so the
    folds are in token order); ids outside [0, nseg) sort outside every run (dropped)."""
    n = ids.numel()
    offs = lay.view(ws, "offs", torch.int64)
    if presorted:
        keys, perm = ids, None
    else:
        keys = lay.view(ws, "keys", torch.int64)
        perm = lay.view(ws, "perm", torch.int64)
        torch.sort(ids.to(torch.int64), stable=True, out=(keys, perm))
    K._lower_bound[(cdiv(nseg + 1, BQ),)](keys, offs, n, nseg + 1, max(n, 1).bit_length() + 1, BQ=BQ)
    return perm, offs


def runs_layout(n: int, nseg: int, lay: Workspace | None = None) -> Workspace:
    lay = lay or Workspace()
    return lay.add("keys", n).add("perm", n).add("offs", nseg + 1)


def fold(src, out, perm, offs, mode: int, *, srow=None, wt=None, ref=None, mean=False, pad=None, ident=0.0):
    """out[s] = fold of src's rows over run s (kernels._seg_reduce); src is [M, D] with any strides."""
    s, d = out.shape[0], out.shape[1] if out.dim() > 1 else 1
    if s == 0 or d == 0:
        return
    bd = tiles(d, 1024)[1]   # 128256 x 4096 rows: 4 programs a row, 2 KB written each
    k = K._seg_reduce[(s, cdiv(d, bd))]
    k(src, perm if perm is not None else offs, offs, srow if srow is not None else offs,
      wt if wt is not None else offs, ref if ref is not None else out, out, d, src.stride(0), src.stride(1),
      -1 if pad is None else pad, ident,
      MODE=mode, HAS_PERM=perm is not None, HAS_SROW=srow is not None, HAS_WT=wt is not None, MEAN=mean,
      CT=ct(DType.f64 if out.dtype == torch.float64 else DType.f32), BD=bd, num_warps=4)


def scatter(src, ids, out, *, srow=None, wt=None, pad=None):
    """out (zeroed here, f32 / f64) [ids[t]] += src[srow[t]] (* wt[t]) by atomics."""
    out.zero_()
    n, (s, d) = ids.numel(), out.shape
    if n == 0 or d == 0:
        return
    bt, bd = tiles(d, 128)
    K._scatter_add[(cdiv(n, bt), cdiv(d, bd))](
        src, ids, srow if srow is not None else ids, wt if wt is not None else src, out, n, s, d, src.stride(0),
        src.stride(1), -1 if pad is None else pad, HAS_SROW=srow is not None, HAS_WT=wt is not None,
        CT=ct(DType.f64 if out.dtype == torch.float64 else DType.f32), BT=bt, BD=bd, num_warps=4)


def check_ids(op: str, arg: str, ids, limit: int, flag, pref) -> None:
    """Flag out-of-range ids on the device (kernels._check_ids) and raise through _core/checks.py."""
    if ids.numel():
        K._check_ids[(cdiv(ids.numel(), 1024),)](ids, flag, ids.numel(), limit, BT=1024)
    raise_flag(op, arg, flag, limit, pref)


def raise_flag(op: str, arg: str, flag, limit: int, pref) -> None:
    from ....ops.embedding import bad_index_error

    flagged(flag, pref, lambda v: bad_index_error(op, arg, v - 1 if v > 0 else v, limit))


def rows2d(x, d: int):
    """A [M, d] view (a copy only where the leading dims do not collapse)."""
    return x.reshape(-1, d) if d else x.reshape(-1, 0)


def as_storage(x):
    """bool tensors as uint8 (Triton has no bool pointer load / store of torch's layout)."""
    return x.view(torch.uint8) if x.dtype == torch.bool else x


INTERP = INTERPRETING
