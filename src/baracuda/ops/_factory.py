"""torch's factory-function arguments, for the creation drop-ins (``ops/creation.py``).

Each drop-in takes its torch function's signature and returns ``(operands, attributes, finisher, device index)``:
no operands (the ``*_like`` forms: the input, never read) and the device the call runs on, which the call path
keys on (``torch/_call.py``).  torch's rules: ``*size`` spread out or as one sequence (ints as ``operator.index``
takes them); ``dtype`` a torch dtype or Python's float / int / bool / complex, else torch's default for the op
(``torch.get_default_dtype()``: zeros, ones, empty, eye, linspace, a float fill value, an arange with a float
bound; its complex counterpart for complex values); ``device`` a str, an int or a torch.device, by default
torch's (``torch.set_default_device``), for ``*_like`` the input's; ``out=`` gives the dtype and device and
receives the result (resized as torch resizes it); ``requires_grad=True`` makes the result a leaf that requires
grad; ``memory_format`` the strides torch gives (``*_like``: the input's for a dense input, ``preserve_format``).
What baracuda does not make (sparse layouts, pinned memory, devices other than cpu / cuda) raises
UnsupportedError, so ``bt.mode()`` runs torch's own function.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .._core.errors import DTypeMismatchError, UnsupportedError

__all__ = ["constant_dropin", "like_dropin", "arange_dropin", "space_dropin", "eye_dropin", "like_strides",
           "contiguous_strides"]

_PY_DTYPES = {float: "float64", int: "int64", bool: "bool", complex: "complex128"}
_COMPLEX_OF = {"float64": "complex128", "float32": "complex64", "float16": "complex32"}


def _torch():
    import torch

    return torch


# -- arguments ---------------------------------------------------------------------------------------------------
def _index(v, op: str, what: str) -> int:
    try:
        return operator.index(v)       # ints, NumPy ints, 0-d integer tensors (as torch)
    except TypeError:
        raise TypeError(f"{op}(): argument '{what}' must be tuple of ints, not {type(v).__name__}") from None


def sizes(op: str, size: tuple, kw: dict) -> tuple:
    """torch's ``*size``: ints spread out, or one list / tuple / torch.Size; or ``size=`` a sequence."""
    extra = set(kw) - {"size"}
    if extra:
        raise TypeError(f"{op}() got an unexpected keyword argument '{sorted(extra)[0]}'")
    if "size" in kw:
        if size:
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        return sequence(op, kw["size"])
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(_index(s, op, "size") for s in size)


def sequence(op: str, size) -> tuple:
    """A size that must be a sequence (torch.full's, ``size=``)."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{op}(): argument 'size' must be tuple of ints, not {type(size).__name__}")
    return tuple(_index(s, op, "size") for s in size)


def scalar(op: str, v, what: str):
    """A Number argument (0-d tensors as their value, as torch's Scalar)."""
    torch = _torch()
    if isinstance(v, torch.Tensor):
        if v.dim() != 0:
            raise TypeError(f"{op}(): argument '{what}' must be Number, not a {v.dim()}-d Tensor")
        return v.item()
    if isinstance(v, (str, bytes)) or v is None:
        raise TypeError(f"{op}(): argument '{what}' must be Number, not {type(v).__name__}")
    if isinstance(v, (np.bool_, np.complexfloating)):   # (torch reads them as real floats: full -> float32)
        raise UnsupportedError(op, f"argument '{what}' is a NumPy {type(v).__name__}; supported: Python numbers, "
                                   "NumPy ints and floats")
    v = v.item() if isinstance(v, np.generic) else v
    # one NaN object: the call key compares attributes by identity first (NaN != NaN), so a fresh float('nan')
    # per call would bind the call afresh every time
    return math.nan if isinstance(v, float) and v != v else v


def dtype_of(op: str, dtype):
    """A torch dtype (or None) from torch's accepted spellings."""
    torch = _torch()
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype in _PY_DTYPES:
        return getattr(torch, _PY_DTYPES[dtype])
    raise TypeError(f"{op}(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}")


def default_float():
    return _torch().get_default_dtype()


def default_complex():
    torch = _torch()
    return getattr(torch, _COMPLEX_OF[str(torch.get_default_dtype()).replace("torch.", "")])


def device_index(op: str, device) -> int:
    """A device argument (str, int, torch.device, None: torch's default device) as an index; -1 is the CPU."""
    torch = _torch()
    if device is None:
        # (torch.get_default_device() returns a non-tensor Dynamo cannot trace: under torch.compile the default
        # device is read off an empty tensor, which the tracer makes on it)
        d = torch.empty(0).device if torch.compiler.is_compiling() else torch.get_default_device()
    else:
        d = device if isinstance(device, torch.device) else torch.device(device)
    if d.type == "cpu":
        return -1
    if d.type == "cuda":
        return d.index if d.index is not None else torch.cuda.current_device()
    raise UnsupportedError(op, f"device {d} (baracuda makes tensors on cpu and cuda)")


def _plain(op: str, layout, pin_memory) -> None:
    torch = _torch()
    if layout is not None and layout != torch.strided:
        raise UnsupportedError(op, f"layout {layout} (baracuda makes torch.strided tensors)")
    if pin_memory:
        raise UnsupportedError(op, "pin_memory=True (baracuda allocates pageable host memory)")


# -- strides -----------------------------------------------------------------------------------------------------
def contiguous_strides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _non_overlapping_and_dense(shape, strides) -> bool:
    """c10's test: the dims of size >= 2, sorted by stride, are laid out one after the other from stride 1 (an
    empty tensor counts as dense: torch keeps its strides)."""
    if 0 in shape:
        return True
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    need = 1
    for d in sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d]):
        if strides[d] != need:
            return False
        need *= shape[d]
    return True


def _dense_strides(shape, strides) -> tuple:
    """torch's ``infer_dense_strides``: dense strides in the input's stride order (a stable insertion sort from the
    last dim, stride 0 ambiguous, equal strides: the smaller size first)."""
    r = len(shape)
    if r <= 1:
        return (1,) * r
    perm = list(range(r - 1, -1, -1))

    def order(a, b):   # >0: a goes after b
        sa, sb = strides[a], strides[b]
        if sa == 0 or sb == 0:
            return 0
        if sa != sb:
            return 1 if sa > sb else -1
        return 1 if shape[a] > shape[b] else 0
    for i in range(1, r):
        d1 = i
        for j in range(1, i + 1):
            d0 = i - j
            c = order(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    out, acc = [0] * r, 1
    for d in perm:
        out[d] = acc
        if shape[d] > 1:
            acc *= shape[d]
    return tuple(out)


def _channels_last(shape) -> tuple:
    """torch's channels_last (rank 4) / channels_last_3d (rank 5) strides: the channels innermost."""
    r = len(shape)
    st = [0] * r
    st[1] = 1
    st[-1] = shape[1]
    for d in range(r - 2, 1, -1):
        st[d] = st[d + 1] * shape[d + 1]
    st[0] = st[2] * shape[2]
    return tuple(st)


def like_strides(op: str, shape, memory_format, x=None):
    """The strides torch gives a new tensor of ``shape`` (``x``: the ``*_like`` input, for ``preserve_format``),
    or None where they are the contiguous ones (what every plan makes)."""
    torch = _torch()
    shape = tuple(shape)
    mf = memory_format
    if mf is None:
        mf = torch.preserve_format if x is not None else torch.contiguous_format
    # (a plan's output allocated like an input keeps that input's strides on size-1 dims, which any strides satisfy:
    # a *_like result with a size-1 dim is restrided to exactly torch's)
    keep = x is not None and 1 in shape
    if mf == torch.contiguous_format:
        return contiguous_strides(shape) if keep else None
    if mf == torch.preserve_format and x is not None:
        st = tuple(x.stride())
        if not _non_overlapping_and_dense(shape, st):
            st = _dense_strides(shape, st)
    elif mf == torch.channels_last and len(shape) == 4 or mf == torch.channels_last_3d and len(shape) == 5:
        st = _channels_last(shape)
    else:
        raise UnsupportedError(op, f"memory_format {mf} for a {len(shape)}-d tensor")
    return None if st == contiguous_strides(shape) and not keep else st


# -- the result ------------------------------------------------------------------------------------------------
def _finisher(strides, out, requires_grad):
    """What the drop-in does to the op's contiguous result: torch's strides (a new tensor over the same storage:
    the values are one constant, or uninitialized), ``out=``, ``requires_grad``."""
    if strides is None and out is None and not requires_grad:
        return None

    def finish(t):
        if strides is not None:
            torch = _torch()
            t = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, t.shape, strides)
        if out is not None:
            if out.shape != t.shape:
                out.resize_(t.shape)
            t = out.copy_(t)
        if requires_grad:
            t.requires_grad_()      # (torch's own error for integer dtypes)
        return t
    return finish


def made(op: str, attrs: dict, dtype, default, *, out=None, layout=None, device=None, pin_memory=False,
         requires_grad=False, strides=None):
    """The adapter's result for a factory call with no operands: the dtype (given, out's, else ``default``: a torch
    dtype, or None for the op's own inference), the device index, the finisher."""
    _plain(op, layout, pin_memory)
    dt = dtype_of(op, dtype)
    if out is not None:
        if dt is not None and dt != out.dtype:
            raise DTypeMismatchError(op, "out", str(dt).replace("torch.", ""), str(out.dtype).replace("torch.", ""))
        dt, device = out.dtype, out.device
    attrs["dtype"] = dt if dt is not None else default
    return (), attrs, _finisher(strides, out, requires_grad), device_index(op, device)


# -- the drop-ins ------------------------------------------------------------------------------------------------
def constant_dropin(op: str):
    """torch.full / zeros / ones / empty."""
    if op == "full":
        def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False,
                 requires_grad=False):
            v = scalar(op, fill_value, "fill_value")
            default = (default_complex() if isinstance(v, complex) else default_float()
                       if isinstance(v, float) else None)       # (bool, int: the op's inference)
            return made(op, {"shape": sequence(op, size), "value": v}, dtype, default, out=out, layout=layout,
                        device=device, pin_memory=pin_memory, requires_grad=requires_grad)
        return full

    def factory(*size, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
                memory_format=None, **kw):
        shape = sizes(op, size, kw)
        if memory_format is not None and op != "empty":
            raise TypeError(f"{op}() got an unexpected keyword argument 'memory_format'")
        return made(op, {"shape": shape}, dtype, default_float(), out=out, layout=layout, device=device,
                    pin_memory=pin_memory, requires_grad=requires_grad,
                    strides=like_strides(op, shape, memory_format))
    factory.__name__ = op
    return factory


def _like(op, input, fill, dtype, layout, device, pin_memory, requires_grad, memory_format):
    torch = _torch()
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    _plain(op, layout, pin_memory)
    attrs = {"dtype": dtype_of(op, dtype)}
    if op == "full_like":
        attrs["value"] = scalar(op, fill, "fill_value")
    x = input.detach() if input.requires_grad else input     # (read for its shape only: no autograd edge)
    if device is not None:
        index = device_index(op, device)
        if index != (input.get_device() if input.device.type in ("cpu", "cuda") else None):
            # another device: an operand of the input's shape and dtype there (one element, expanded)
            x = torch.empty((), dtype=input.dtype, device="cpu" if index < 0 else f"cuda:{index}")
            x = x.expand(input.shape)
    return (x,), attrs, _finisher(like_strides(op, input.shape, memory_format, input), None, requires_grad)


def like_dropin(op: str):
    """torch.zeros_like / ones_like / full_like / empty_like: the input's shape, dtype, device and strides."""
    if op == "full_like":
        def full_like(input, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False,
                      requires_grad=False, memory_format=None):
            return _like(op, input, fill_value, dtype, layout, device, pin_memory, requires_grad, memory_format)
        return full_like

    def like(input, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
             memory_format=None):
        return _like(op, input, None, dtype, layout, device, pin_memory, requires_grad, memory_format)
    like.__name__ = op
    return like


_RANGE = ("start", "end", "step")


def bind(op: str, names: tuple, args: tuple, kw: dict, known: tuple) -> dict:
    """A factory's arguments by name, torch's way: ``args`` bound to ``names`` in order, then ``kw`` (each of
    ``known``, none given twice)."""
    if len(args) > len(names) or set(kw) - set(known):
        raise TypeError(f"{op}() received an invalid combination of arguments")
    bound = dict(zip(names, args))
    for k, v in kw.items():
        if k in bound:
            raise TypeError(f"{op}() got multiple values for argument '{k}'")
        bound[k] = v
    return bound


def arange_dropin(*args, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
                  **kw):
    """torch.arange(end) / arange(start, end, step=1)."""
    op = "arange"
    bound = bind(op, ("end",) if len(args) == 1 and not kw else _RANGE, args, kw, _RANGE)
    if "end" not in bound:
        raise TypeError(f'{op}() missing 1 required positional arguments: "end"')
    vals = {k: scalar(op, bound.get(k, d), k) for k, d in zip(_RANGE, (0, None, 1))}
    integral = all(isinstance(v, int) for v in vals.values())     # (bool too, as torch)
    return made(op, vals, dtype, None if integral else default_float(), out=out, layout=layout, device=device,
                pin_memory=pin_memory, requires_grad=requires_grad)


def space_dropin(op: str):
    """torch.linspace(start, end, steps) / torch.logspace(start, end, steps, base=10.0)."""
    def space(start, end, steps, *base, out=None, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False, **kw):
        if len(base) + len(kw) > (op == "logspace") or set(kw) - {"base"}:
            raise TypeError(f"{op}() received an invalid combination of arguments")
        s, e = scalar(op, start, "start"), scalar(op, end, "end")
        attrs = {"start": s, "end": e, "steps": steps}
        if op == "logspace":
            attrs["base"] = base[0] if base else kw.get("base", 10.0)
        cplx = isinstance(s, complex) or isinstance(e, complex)
        res = made(op, attrs, dtype, default_complex() if cplx else default_float(), out=out, layout=layout,
                   device=device, pin_memory=pin_memory, requires_grad=requires_grad)
        attrs["kernel"] = "cuda" if res[3] >= 0 else "cpu"    # integer results: torch's kernel of that device
        return res
    space.__name__ = op
    return space


def eye_dropin(n, *m, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
               **kw):
    """torch.eye(n) / torch.eye(n, m)."""
    if len(m) + len(kw) > 1 or set(kw) - {"m"}:
        raise TypeError("eye() received an invalid combination of arguments")
    cols = m[0] if m else kw.get("m", n)
    if cols is None:
        raise TypeError("eye() received an invalid combination of arguments - got (int, NoneType)")
    return made("eye", {"n": n, "m": cols}, dtype, default_float(), out=out, layout=layout, device=device,
                pin_memory=pin_memory, requires_grad=requires_grad)
