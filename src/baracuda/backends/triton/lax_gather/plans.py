"""lax_gather / lax_scatter plans: the host side of kernels.py's space map.

Gather: one launch, values moved as same-width integers (bit-exact for every dtype), the fill value's bits in a
1-element tensor made once per plan and device.  Scatter: out = operand (one copy), then one launch: replace
stores the updates' bits; add runs atomics in an accumulator (``out`` itself when its dtype is the accumulator's:
f32 / f64 / int64, else the workspace: f32 for the half types, int64 for the narrow integers and bool); mul / min /
max run compare-and-swap loops on the workspace accumulator's bits (numel + 1 words: the last is the loops' dummy).

Precision: gather, min / max and integer add / mul are exact; float add / mul depend on the order the atomics land
in and replace with duplicate targets keeps whichever store lands last: deterministic=False, unless
``unique_indices=True`` promises distinct targets (JAX: the result is undefined when the promise is broken).
"""
from __future__ import annotations

import torch

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.lax_gather import fill_of, index_map_of
from .._lib.register import register_triton
from ..indexing.kernels import int_view
from ..indexing.scatter import acc_dtype
from .kernels import ADD, GATHER, MAX, MAX_K, MIN, MUL, REPLACE, launch_lax_map, space_geometry

_EXACT = PrecisionGuarantee(MathPrecision.EXACT, DType.f64, True, True)
_MODE = {"replace": REPLACE, "add": ADD, "mul": MUL, "min": MIN, "max": MAX}


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _contig_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _supports(desc):
    """More than six index-vector components, or more than six space dims that neither operand lets merge:
    refused (no model shape needs them)."""
    im = index_map_of(desc)
    if len(im.index_map) > MAX_K:
        return f"an index vector of {len(im.index_map)} components (the kernel takes at most {MAX_K})"
    if len(im.space) <= 6:
        return None
    x, idx = desc.inputs[:2]
    geo = space_geometry(im, _contig_strides(im.space), _contig_strides(idx.shape)[:-1], _contig_strides(x.shape))
    return None if geo is not None else f"{len(im.space)}-d space: more than six dims do not collapse"


class _Consts:
    """Small per-plan tensors (the fill bits), made once per device."""

    def __init__(self):
        self.cache = {}

    def get(self, key, make):
        t = self.cache.get(key)
        if t is None:
            t = self.cache[key] = make()
        return t


def _bind_gather(desc, pref=None):
    im = index_map_of(desc)
    fill = fill_of(desc.dtype, desc.attr("fill_value"))
    consts = _Consts()

    def fill_bits(device):
        t = torch.full((1,), fill, dtype=desc.dtype.torch, device=device)
        return int_view(t)

    def run(desc_, inputs, outputs, ws):
        x, idx = inputs
        out = outputs[0]
        f = consts.get(("fill", x.device), lambda: fill_bits(x.device)) if not im.clip else None
        launch_lax_map(GATHER, im, int_view(out), idx, int_view(x), fill=f)
    return run


def _acc_bytes(desc) -> int:
    n = _numel(desc.inputs[0].shape)
    return -(-acc_dtype(desc.dtype).itemsize * (n + 1) // 8) * 8


def _needs_acc(desc) -> bool:
    comb = desc.attr("combiner")
    return comb in ("mul", "min", "max") or (comb == "add" and acc_dtype(desc.dtype) != desc.dtype.torch)


def _workspace(desc):
    return _acc_bytes(desc) if _needs_acc(desc) else 0


def _scatter_precision(desc, pref=None):
    comb, dt = desc.attr("combiner"), desc.dtype
    exact = comb in ("replace", "min", "max") or not dt.is_floating
    stable = (comb in ("min", "max") or not dt.is_floating or desc.attr("unique_indices")) and \
        (comb != "replace" or desc.attr("unique_indices"))
    acc = DType.f64 if dt == DType.f64 else DType.f32 if dt.is_floating else DType.i64
    math_ = MathPrecision.EXACT if exact else (MathPrecision.F64 if dt == DType.f64 else MathPrecision.F32)
    return PrecisionGuarantee(math_, acc, bit_stable=stable, deterministic=stable)


def _bind_scatter(desc, pref=None):
    im = index_map_of(desc)
    comb = desc.attr("combiner")
    mode = _MODE[comb]
    acc_t = acc_dtype(desc.dtype)
    is_float = desc.dtype.is_floating
    shape = tuple(desc.inputs[0].shape)
    n = _numel(shape)

    def run(desc_, inputs, outputs, ws):
        x, idx, u = inputs
        out = outputs[0]
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        if not _needs_acc(desc):
            res.copy_(x)
            if comb == "replace":
                launch_lax_map(REPLACE, im, int_view(u), idx, int_view(res))
            else:
                launch_lax_map(ADD, im, u, idx, res)
        else:
            words = ws.reshape(-1)[:_acc_bytes(desc)].view(acc_t)
            cas = comb != "add"
            acc = words[:n + 1 if cas else n]
            acc[n:].zero_()                 # the CAS loops' dummy word
            a = acc[:n].view(shape)
            a.copy_(x)
            uu = u.view(torch.uint8) if u.dtype == torch.bool else u
            if cas:
                launch_lax_map(mode, im, uu, idx, int_view(acc)[:n].view(shape), typed=acc, dummy=n,
                               is_float=is_float)
            else:
                launch_lax_map(ADD, im, uu, idx, a)
            res.copy_(a if res.dtype != torch.bool else a != 0)
        if res is not out:
            out.copy_(res)
    return run


def _run_gather(desc, inputs, outputs, ws):
    _bind_gather(desc)(desc, inputs, outputs, ws)


def _run_scatter(desc, inputs, outputs, ws):
    _bind_scatter(desc)(desc, inputs, outputs, ws)


register_triton("lax_gather", _run_gather, bind=_bind_gather, workspace=lambda d: 0,
                precision=lambda d, p=None: _EXACT, supports=_supports, route="triton:lax_gather:space-map")
register_triton("lax_scatter", _run_scatter, bind=_bind_scatter, workspace=_workspace, precision=_scatter_precision,
                supports=_supports,
                route=lambda d, p=None: f"triton:lax_scatter:{d.attr('combiner')}-"
                f"{'store' if d.attr('combiner') == 'replace' else 'atomic' if d.attr('combiner') == 'add' else 'cas'}")
