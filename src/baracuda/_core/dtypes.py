"""The dtype vocabulary: one closed enum, mapped to NumPy, torch and DLPack.

Half types (bf16, fp8) map to NumPy through ``ml_dtypes``.  Packed sub-byte types (s4/u4) have no
NumPy or torch scalar type: they are stored two to a byte (low nibble = even index) in a ``uint8``
container, which is what ``storage`` names.
"""
from __future__ import annotations

import enum
from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["DType", "as_dtype", "dtype_named", "result_type", "FLOAT_TYPES", "HALF_TYPES"]


class DType(enum.Enum):
    # value: (short name, bits, kind, numpy storage dtype, torch attribute name or None, DLPack (code, bits))
    f64 = ("f64", 64, "f", np.dtype(np.float64), "float64", (2, 64))
    f32 = ("f32", 32, "f", np.dtype(np.float32), "float32", (2, 32))
    f16 = ("f16", 16, "f", np.dtype(np.float16), "float16", (2, 16))
    bf16 = ("bf16", 16, "f", np.dtype(ml_dtypes.bfloat16), "bfloat16", (4, 16))
    f8e4m3 = ("f8e4m3", 8, "f", np.dtype(ml_dtypes.float8_e4m3fn), "float8_e4m3fn", (8, 8))
    f8e5m2 = ("f8e5m2", 8, "f", np.dtype(ml_dtypes.float8_e5m2), "float8_e5m2", (9, 8))
    i64 = ("i64", 64, "i", np.dtype(np.int64), "int64", (0, 64))
    i32 = ("i32", 32, "i", np.dtype(np.int32), "int32", (0, 32))
    i16 = ("i16", 16, "i", np.dtype(np.int16), "int16", (0, 16))
    i8 = ("i8", 8, "i", np.dtype(np.int8), "int8", (0, 8))
    u8 = ("u8", 8, "u", np.dtype(np.uint8), "uint8", (1, 8))
    u32 = ("u32", 32, "u", np.dtype(np.uint32), "uint32", (1, 32))
    bool = ("bool", 8, "b", np.dtype(np.bool_), "bool", (6, 8))
    c64 = ("c64", 64, "c", np.dtype(np.complex64), "complex64", (5, 64))
    c128 = ("c128", 128, "c", np.dtype(np.complex128), "complex128", (5, 128))
    s4 = ("s4", 4, "i", np.dtype(np.uint8), None, None)
    u4 = ("u4", 4, "u", np.dtype(np.uint8), None, None)

    # -- properties: plain attributes, set once per member (they are read on every call's path) ----------------
    def __init__(self, short: str, bits: int, kind: str, *_):
        self.short = short
        self.bits = bits
        self.itemsize = max(1, bits // 8)    # bytes per element (packed types report 1: the container holds two)
        self.kind = kind
        self.is_floating = kind == "f"
        self.is_complex = kind == "c"
        self.is_integer = kind in "iu"
        self.is_packed = bits < 8

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype of one element (the byte container for packed types)."""
        return self.value[3]

    @property
    def torch(self):
        import torch

        name = self.value[4]
        if name is None or not hasattr(torch, name):
            raise TypeError(f"dtype {self.short}: torch has no dtype for it")
        return getattr(torch, name)

    @property
    def dlpack(self) -> tuple[int, int]:
        if self.value[5] is None:
            raise TypeError(f"dtype {self.short}: DLPack has no code for packed sub-byte types")
        return self.value[5]

    @property
    def compute(self) -> "DType":
        """The dtype kernels compute in: f16/bf16/fp8 compute in f32 (the seeds' contract)."""
        if self in (DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2):
            return DType.f32
        return self

    def __str__(self) -> str:
        return self.short

    def __repr__(self) -> str:
        return f"DType.{self.name}"


FLOAT_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16)
HALF_TYPES = (DType.f16, DType.bf16)

_ALIASES: dict[str, DType] = {}
for _d in DType:
    _ALIASES[_d.short] = _d
    _ALIASES[_d.name] = _d
    if _d.value[4]:
        _ALIASES[_d.value[4]] = _d
_ALIASES.update({
    "float": DType.f32, "double": DType.f64, "half": DType.f16, "int": DType.i64, "long": DType.i64,
    "bfloat16": DType.bf16, "float8_e4m3": DType.f8e4m3, "complex": DType.c64,
})
_BY_NUMPY = {d.numpy: d for d in DType if not d.is_packed}
_BY_DLPACK = {d.dlpack: d for d in DType if d.value[5] is not None}


# torch dtypes, names and other objects already converted (a handful per process): one dict lookup per call.
# NumPy dtype objects are never keys here (they go to _BY_NUMPY): Dynamo (torch 2.11) cannot hash a NumPy dtype,
# and a traced lookup in this dict (a drop-in's dtype=) must not meet one among the keys.
_SEEN: dict = {}


def as_dtype(x: Any) -> DType:
    """Turn a DType, a name ('bf16', 'float32'), a NumPy dtype or a torch dtype into a DType."""
    if isinstance(x, DType):
        return x
    if isinstance(x, np.dtype):
        d = _BY_NUMPY.get(x)
        if d is not None:
            return d
        return _convert(x)
    try:
        return _SEEN[x]
    except (KeyError, TypeError):   # TypeError: unhashable
        pass
    d = _convert(x)
    if len(_SEEN) < 256:
        try:
            _SEEN[x] = d
        except TypeError:
            pass
    return d


def dtype_named(name: str) -> DType:
    """The DType of one of its names (ours 'bf16', its enum name, torch's 'bfloat16', 'float', 'long', ...): a lookup
    in a dict keyed by strings only, so safe inside a Dynamo-traced function (``str(torch_dtype)[6:]`` is torch's
    name)."""
    d = _ALIASES.get(name)
    if d is None:
        raise TypeError(f"dtype: unknown dtype name {name!r}; expected one of {sorted(d.short for d in DType)}")
    return d


def _convert(x: Any) -> DType:
    if isinstance(x, str):
        return dtype_named(x)
    mod = type(x).__module__
    if mod.startswith("torch"):
        return _convert(str(x).replace("torch.", ""))
    if x in (float,):
        return DType.f64
    if x in (int,):
        return DType.i64
    if x in (bool,):
        return DType.bool
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(f"dtype: cannot interpret {x!r} as a dtype") from None
    d = _BY_NUMPY.get(npd)
    if d is None:
        raise TypeError(f"dtype: NumPy dtype {npd} has no baracuda equivalent")
    return d


def from_dlpack_code(code: int, bits: int) -> DType:
    d = _BY_DLPACK.get((code, bits))
    if d is None:
        raise TypeError(f"dtype: DLPack type (code={code}, bits={bits}) has no baracuda equivalent")
    return d


# torch's promotion lattice: category first (bool < int < float < complex), then width within it.
_CAT = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_FLOAT_RANK = {DType.f8e4m3: 0, DType.f8e5m2: 0, DType.f16: 1, DType.bf16: 1, DType.f32: 2, DType.f64: 3}


def _promote_pair(a: DType, b: DType) -> DType:
    if a == b:
        return a
    ca, cb = _CAT[a.kind], _CAT[b.kind]
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if hi.is_complex and lo in (DType.f64,):
            return DType.c128
        return hi
    if a.is_floating:
        ra, rb = _FLOAT_RANK[a], _FLOAT_RANK[b]
        if ra == rb:  # f16 + bf16 -> f32, like torch
            return DType.f32
        return a if ra > rb else b
    if a.is_complex:
        return a if a.bits > b.bits else b
    # integers: signed/unsigned of mixed width, as torch: u8 + i8 -> i16
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if s.bits > u.bits:
        return s
    for cand in (DType.i16, DType.i32, DType.i64):
        if cand.bits > u.bits:
            return cand
    return DType.i64


def result_type(*dtypes: DType) -> DType:
    """torch.result_type over tensors of the same priority (all dimensioned)."""
    if not dtypes:
        raise ValueError("result_type: needs at least one dtype")
    out = dtypes[0]
    for d in dtypes[1:]:
        out = _promote_pair(out, d)
    return out
