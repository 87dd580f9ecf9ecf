"""Views and shape functions of the mirror: torch's own metadata functions, and the joins and copies built on them.

A view costs no kernel and no memory traffic: only its shape, strides and offset change.  So the mirror's view
functions are **torch's own functions** (``bt.transpose is torch.transpose``): torch's signatures, argument checks,
errors and autograd, and the result aliases the input exactly where torch's does (``out._base is x``).  Tensor-only
views (``view``, ``expand``, ...) are published with the tensor first (``bt.view(x, 2, 3)`` is ``x.view(2, 3)``).

Four kinds, one table each:

- ``VIEW_FUNCTIONS``: the view, or the input itself, every time (``transpose``, ``narrow`` with a 0-d tensor
  ``start``, ``squeeze`` with a tuple of dims, ``atleast_2d``, ...).  Where an op spec also publishes the name as a
  materializing op (``permute``, ``transpose``/``swapaxes``/``swapdims``, ``movedim``/``moveaxis``, ``narrow`` =
  op ``slice``, ``diagonal``, ``broadcast_to``, ``real``/``imag``/``conj``), the view wins: ``_namespaces.build``
  skips the names these tables own, and the op stays for the Plan API (and publishes its ``torch.X_copy``).
- ``RESHAPING``: a view where torch's is one (or the input itself), else a copy, which runs through baracuda's
  ``contiguous`` plan (and its backward) where torch would run its own copy (``reshape``, ``flatten``, ``ravel``,
  ``reshape_as``, ``contiguous``).
- ``JOINS``: ``hstack``/``vstack``/``row_stack``/``dstack``/``column_stack``: torch's views of the inputs
  (``atleast_Nd``, a column reshape) joined by baracuda's ``cat`` op (its plans and backward).
- ``COPIES``: torch's ``X_copy`` functions (``permute_copy``, ``narrow_copy``, ...): torch's view ``X``
  materialized by baracuda's ``contiguous`` op (row-major, as torch's copies are).

Under ``bt.mode()`` view and reshaping functions are not routed: torch runs them natively (they are torch's own,
and code that writes through a view relies on the aliasing); joins and copies are routed like any drop-in.
"""
from __future__ import annotations

import torch

from .._core.errors import UnsupportedError
from .._core.spec import get_spec
from ._call import _traced, call
from ._namespaces import _make

# torch name (relative to ``torch``) -> the object torch implements it with; the last five are Tensor methods with no
# ``torch.X`` function, published as ``bt.X`` (``mT``/``mH``/``T`` are attributes, not functions: not mirrored).
VIEW_FUNCTIONS = {n: getattr(torch, n) for n in (
    "adjoint", "as_strided", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "broadcast_to", "chunk",
    "conj", "detach", "diagonal", "dsplit", "hsplit", "imag", "meshgrid", "moveaxis", "movedim", "narrow", "permute",
    "positive", "real", "select", "split", "split_with_sizes", "squeeze", "swapaxes", "swapdims", "t",
    "tensor_split", "transpose", "unbind", "unflatten", "unsqueeze", "view_as_complex", "view_as_real", "vsplit")}
VIEW_FUNCTIONS.update({n: getattr(torch.Tensor, n) for n in ("view", "view_as", "expand", "expand_as", "unfold")})
VIEW_FUNCTIONS["linalg.diagonal"] = torch.linalg.diagonal


def _view_or_copy(fn, name: str):
    """torch's ``fn`` where its result is a view of the input or the input itself; otherwise (torch would copy)
    baracuda's contiguous copy shaped like torch's result: not a view (``_base`` None) where torch's is not, a view
    of the copy where torch's is a view of its own temporary copy (``ravel``: ``contiguous().view(-1)``)."""
    def dropin(input, *args, **kwargs):
        if not isinstance(input, torch.Tensor) or input.is_contiguous() or _traced():
            return fn(input, *args, **kwargs)   # (a contiguous input always reshapes to a view)
        probe = torch.empty_strided(input.shape, input.stride(), dtype=input.dtype, device="meta")
        res = fn(probe, *args, **kwargs)        # torch's own argument checks, and its choice
        if res is probe or res._base is probe:
            return fn(input, *args, **kwargs)
        copy = call("contiguous", (input,), {})
        return copy.view(res.shape) if res._base is not None else torch.ops.aten._unsafe_view(copy, res.shape)

    dropin.__name__ = dropin.__qualname__ = name.rsplit(".", 1)[-1]
    dropin.__doc__ = (f"baracuda drop-in for ``torch.{name}``: torch's view where it returns one, else a copy by "
                      f"baracuda's ``contiguous`` op.\n\n{fn.__doc__ or ''}")
    return dropin


def _contiguous(self, memory_format=torch.contiguous_format):
    """``Tensor.contiguous``: ``self`` when it already is (torch's rule), else baracuda's row-major copy."""
    if self.is_contiguous(memory_format=memory_format) or _traced():
        return self.contiguous(memory_format=memory_format)
    if memory_format is not torch.contiguous_format:
        raise UnsupportedError("contiguous", f"memory_format={memory_format} (baracuda's copy is row-major)")
    return call("contiguous", (self,), {})


RESHAPING = {"reshape": _view_or_copy(torch.reshape, "reshape"), "flatten": _view_or_copy(torch.flatten, "flatten"),
             "ravel": _view_or_copy(torch.ravel, "ravel"),
             "reshape_as": _view_or_copy(torch.Tensor.reshape_as, "Tensor.reshape_as"), "contiguous": _contiguous}


# -- joins: views of the inputs, one cat ---------------------------------------------------------------------
def _tensor_list(name: str, tensors):
    """torch's checks of a ``Tensor[] tensors`` argument (its messages)."""
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in tensors):
        what = type(tensors).__name__ if not isinstance(tensors, (list, tuple)) else \
            f"{type(tensors).__name__} of {', '.join(type(t).__name__ for t in tensors)}"
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not {what}")
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


def _hstack(tensors, *, out=None):
    ts = torch.atleast_1d(*_tensor_list("hstack", tensors))
    ts = ts if isinstance(ts, (tuple, list)) else (ts,)
    return (ts, 0 if ts[0].dim() == 1 else 1), {"out": out}


def _stack_at(name: str, atleast, dim: int):
    def join(tensors, *, out=None):
        ts = atleast(*_tensor_list(name, tensors))
        return ((ts if isinstance(ts, (tuple, list)) else (ts,)), dim), {"out": out}
    join.__name__ = join.__qualname__ = name
    return join


def _column_stack(tensors, *, out=None):
    ts = [t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in _tensor_list("column_stack", tensors)]
    return (ts, 1), {"out": out}


# torch name -> (op, signature translator into the op's drop-in: torch.cat(tensors, dim=0, *, out=None))
JOINS = {"hstack": ("cat", _hstack), "vstack": ("cat", _stack_at("vstack", torch.atleast_2d, 0)),
         "row_stack": ("cat", _stack_at("row_stack", torch.atleast_2d, 0)),
         "dstack": ("cat", _stack_at("dstack", torch.atleast_3d, 2)), "column_stack": ("cat", _column_stack)}


# -- copies: torch's X_copy = baracuda's contiguous copy of torch's view X --------------------------------------
def _copy_of(view, name: str):
    def translate(*args, out=None, **kwargs):
        if out is not None:
            raise UnsupportedError("contiguous", f"argument 'out' of torch.{name}")
        return (view(*args, **kwargs),), {}
    translate.__name__ = translate.__qualname__ = name
    translate.__doc__ = f"torch.{name}: torch's view materialized row-major by baracuda's contiguous op."
    return translate


_COPY_VIEWS = {
    "alias_copy": lambda input: input,
    "as_strided_copy": torch.as_strided, "detach_copy": torch.detach, "diagonal_copy": torch.diagonal,
    "expand_copy": lambda input, size, *, implicit=False: input.expand(size, implicit=implicit),
    "narrow_copy": torch.narrow, "permute_copy": torch.permute, "select_copy": torch.select,
    "slice_copy": lambda input, dim=0, start=None, end=None, step=1: torch.ops.aten.slice(input, dim, start, end, step),
    "squeeze_copy": torch.squeeze, "t_copy": torch.t, "transpose_copy": torch.transpose,
    "unfold_copy": lambda input, dimension, size, step: input.unfold(dimension, size, step),
    "unsqueeze_copy": torch.unsqueeze, "view_as_real_copy": torch.view_as_real,
    "view_copy": lambda input, size: input.view(size),
}
COPIES = {n: ("contiguous", _copy_of(v, n)) for n, v in _COPY_VIEWS.items()}

OWNED = frozenset(VIEW_FUNCTIONS) | frozenset(RESHAPING) | frozenset(JOINS) | frozenset(COPIES)


def publish(put, published: dict) -> dict:
    """Set the views, reshaping functions, joins and copies on the mirror (``put(key, fn)``); the joins and copies
    go into ``published`` (torch name -> op); returns the views (torch name -> function)."""
    views = {**VIEW_FUNCTIONS, **RESHAPING}
    for key, fn in views.items():
        put(key, fn, own=key in RESHAPING)
    for table in (JOINS, COPIES):
        for key, (op, translate) in table.items():
            put(key, _make(get_spec(op), "torch." + key, translate))
            published[key] = op
    return views


__all__ = ["VIEW_FUNCTIONS", "RESHAPING", "JOINS", "COPIES", "OWNED", "publish"]
