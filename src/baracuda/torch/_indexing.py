"""``x[key]`` and ``x[key] = value`` with advanced (tensor / list) indices under ``bt.mode()``: torch's indexing
semantics composed of a torch view and one baracuda op.

torch applies an index key in two steps, and so does this module:
1. the basic part -- ints (select), slices, None (a new axis), Ellipsis -- is a view of ``x`` (torch's own, no
   copy); each advanced entry is kept as full slices over the dims it consumes (a bool mask k of them);
2. the advanced entries (int64 / int32 tensors, lists, bool / uint8 masks -> their nonzero() coordinates) index
   their dims of that view, broadcast together to B.  Where the indexed dims are adjacent the result's B dims
   stand in their place, else in front (torch's and NumPy's rule; ints do not count: they were selects).
The view is permuted so the indexed dims lead, and ``advanced_index`` (gather) / ``index_put`` (scatter, with
``accumulate=False``: the last write wins) run on it.  A result whose B dims are not in front is made contiguous
(torch's indexing returns contiguous tensors).  ``__setitem__`` writes the new values into the view in place
(``copy_``: autograd sees torch's own in-place copy into a view).

Keys without an advanced entry are torch's (a view): the mode does not route them.  Out-of-range indices are the
ops' named errors; bool masks of the wrong shape are torch's IndexError.
"""
from __future__ import annotations

import contextlib

import torch

from .._core.errors import UnsupportedError
from ..ops.indexing_index import mask_indices
from ._call import STATE, call

__all__ = ["has_advanced", "getitem", "setitem"]


@contextlib.contextmanager
def _native():
    """torch calls made here are torch's own (the mode leaves them alone)."""
    STATE.depth += 1
    try:
        yield
    finally:
        STATE.depth -= 1


def _entries(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _is_advanced(e) -> bool:
    return isinstance(e, torch.Tensor) or (isinstance(e, (list, tuple)) and not isinstance(e, torch.Size))


def has_advanced(key) -> bool:
    """Whether an index key has a tensor / sequence entry (``x[idx]``), i.e. computes rather than views.  A 0-d
    integer tensor is a select in torch (a view): not advanced."""
    for e in _entries(key):
        if isinstance(e, torch.Tensor):
            if e.dim() > 0 or e.dtype in (torch.bool, torch.uint8):
                return True
        elif _is_advanced(e):
            return True
    return False


def _plan(x, key):
    """(view, indices, positions): the basic part applied to ``x``, the advanced indices (int tensors, masks
    expanded) and the view dims they index."""
    ents = []
    for e in _entries(key):             # sequences -> tensors, once
        if isinstance(e, (list, tuple)):
            e = torch.as_tensor(e, device=x.device)
            if e.dtype not in (torch.bool, torch.uint8, torch.int64, torch.int32):
                e = e.to(torch.int64)
        ents.append(e)
    n_ell = sum(e is Ellipsis for e in ents)
    if n_ell > 1:
        raise UnsupportedError("Tensor.__getitem__", "an index can only have a single ellipsis")
    if n_ell:
        consumed = sum(e.dim() if isinstance(e, torch.Tensor) and e.dtype in (torch.bool, torch.uint8) else 1
                       for e in ents if e is not None and e is not Ellipsis)
        i = next(k for k, e in enumerate(ents) if e is Ellipsis)
        ents[i:i + 1] = [slice(None)] * max(x.dim() - consumed, 0)
    basic, adv, pos = [], [], []
    d = 0                   # the view dim the next entry lands on
    for e in ents:
        if isinstance(e, torch.Tensor) and (e.dim() > 0 or e.dtype in (torch.bool, torch.uint8)):
            if e.device != x.device and e.dim() > 0 and not (e.device.type == "cpu" and x.is_cuda):
                raise UnsupportedError("Tensor.__getitem__", f"an index on {e.device} for a tensor on {x.device}")
            e = e.to(x.device)
            if e.dtype in (torch.bool, torch.uint8):
                basic.extend([slice(None)] * e.dim())
                for j, t in enumerate(mask_indices((e,))):
                    adv.append(t)
                    pos.append(d + j)
                d += e.dim()
            else:
                if e.is_floating_point() or e.is_complex():
                    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
                basic.append(slice(None))
                adv.append(e)
                pos.append(d)
                d += 1
        elif e is None:
            basic.append(None)
            d += 1
        elif isinstance(e, slice):
            basic.append(e)
            d += 1
        else:                   # an int (or a 0-d tensor): a select, no dim
            basic.append(e)
    with _native():
        view = x[tuple(basic)]
    return view, adv, pos


def _leading(view, pos):
    """The view with the indexed dims first (in order), and whether the result's B dims stay in place."""
    rest = [i for i in range(view.dim()) if i not in pos]
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    with _native():
        return view.permute(pos + rest), adjacent


def getitem(x, key):
    view, adv, pos = _plan(x, key)
    lead, adjacent = _leading(view, pos)
    res = call("advanced_index", [lead, *adv], {})
    p = pos[0]
    if not adjacent or p == 0:
        return res
    nb = res.dim() - (view.dim() - len(pos))        # the broadcast index dims B
    order = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, res.dim()))
    with _native():
        return res.permute(order).contiguous()


def setitem(x, key, value):
    view, adv, pos = _plan(x, key)
    lead, adjacent = _leading(view, pos)
    nb = torch.broadcast_shapes(*(t.shape for t in adv))
    rest = tuple(lead.shape[len(pos):])
    p = pos[0]
    with _native():
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value, dtype=x.dtype, device=x.device)
        value = value.to(device=x.device, dtype=x.dtype)
        if adjacent and p > 0:              # values laid out as the result: rest[:p] + B + rest[p:]
            full = rest[:p] + tuple(nb) + rest[p:]
            v = value.expand(full)
            k = len(nb)
            value = v.permute(list(range(p, p + k)) + list(range(p)) + list(range(p + k, len(full))))
    new = call("index_put", [lead, value.expand(tuple(nb) + rest) if value.dim() <= len(nb) + len(rest) else value,
                             *adv], {"accumulate": False})
    with _native():
        lead.copy_(new)
    return None
