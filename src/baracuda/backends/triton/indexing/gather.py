"""gather / take / take_along_dim / one_hot plans: the host side of kernels.py's index map (MODE gather) and
one_hot kernel.  Values move as same-width integers (bit-exact for every dtype: NaN payloads, -0.0, bool)."""
from __future__ import annotations

import torch

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.indexing import tad_shapes
from .._lib.register import register_triton
from .kernels import GATHER, index_geometry, int_view, launch_index_map, launch_one_hot, raise_index_flag

_EXACT = PrecisionGuarantee(MathPrecision.EXACT, DType.f64, True, True)


def flag_of(ws) -> torch.Tensor:
    """The int64 flag word at the start of the workspace, zeroed (one tiny fill per call)."""
    f = ws.reshape(-1)[:8].view(torch.int64)
    f.zero_()
    return f


def _as1(t):
    return t.reshape(1) if t.dim() == 0 else t


def _problem(desc, x, idx):
    """(input view, index view, dim, size, wrap, what, arg): the gather each op is, on views of its operands
    (take and dim=None flatten the input: a view when it is contiguous, else one copy)."""
    op = desc.op
    if op == "take" or (op == "take_along_dim" and desc.attr("dim") is None):
        xf = x.reshape(-1)
        return xf, idx, None, xf.numel(), op == "take", f"an input of {xf.numel()} elements", \
            "index" if op == "take" else "indices"
    dim = desc.attr("dim")
    x1, i1 = _as1(x), _as1(idx)
    if op == "take_along_dim":
        bx, bj = tad_shapes(op, x1, i1, dim)
        x1, i1 = x1.expand(bx), i1.expand(bj)
    return x1, i1, dim, x1.shape[dim], op == "take_along_dim", f"dimension {dim} of size {x1.shape[dim]}", \
        "indices" if op == "take_along_dim" else "index"


def _bind(desc, pref=None):
    def run(desc_, inputs, outputs, ws):
        x, idx = inputs
        out = outputs[0]
        flag = flag_of(ws)
        xv, iv, dim, size, wrap, what, arg = _problem(desc, x, idx)
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        rv = res.view(iv.shape)
        if dim is None:   # flat: the index's own space, the input's one stride as the multiplier
            tst, ds = (0,) * iv.dim(), xv.stride(0)
        else:
            tst, ds = tuple(0 if d == dim else s for d, s in enumerate(xv.stride())), xv.stride(dim)
        launch_index_map(GATHER, int_view(rv), iv, int_view(xv), flag, dim=dim, ds=ds, size=size, wrap=wrap,
                         shape=iv.shape, idx_strides=iv.stride(), val_strides=rv.stride(), tgt_strides=tst)
        if res is not out:
            out.copy_(res)
        if iv.numel():
            raise_index_flag(desc.op, arg, flag, size, wrap, what, pref)
    return run


def _supports(desc):
    """More than six dims that neither the index nor the input lets merge: refused (no such model shape)."""
    shape = desc.inputs[1].shape or (1,)
    if len(shape) <= 6:
        return None
    strides = [1] * len(shape)
    geo = index_geometry(shape, desc.attr_dict.get("dim"), strides, strides, strides)
    return None if geo is not None else f"{len(shape)}-d index: more than six dims do not collapse"


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


for _op in ("gather", "take", "take_along_dim"):
    register_triton(_op, _run, bind=_bind, workspace=lambda d: 8, precision=lambda d, p=None: _EXACT,
                    supports=_supports, route=f"triton:{_op}:index-map")


def _bind_one_hot(desc, pref=None):
    c = desc.attr("num_classes")

    def run(desc_, inputs, outputs, ws):
        t, out = inputs[0], outputs[0]
        flag = flag_of(ws)
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        launch_one_hot(t, res, flag, c)
        if res is not out:
            out.copy_(res)
        if t.numel():
            raise_index_flag("one_hot", "tensor", flag, c, False, f"num_classes={c}", pref)
    return run


register_triton("one_hot", lambda d, i, o, w: _bind_one_hot(d)(d, i, o, w), bind=_bind_one_hot,
                workspace=lambda d: 8, precision=lambda d, p=None: _EXACT, route="triton:one_hot")
