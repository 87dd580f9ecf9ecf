"""The custom ops' schema strings: a descriptor's attributes and operand signature as strings.

``baracuda::op(str name, str attrs, Tensor[] xs)`` and ``baracuda::op_backward(str name, str attrs, str sig,
SymInt[] dims, ...)`` carry them (``_library.py``); the eager path (``_call.py``) makes them only when a call goes
through a custom op.  The forward operands' signature is split in two: ``sig``, their ranks and dtypes (a string:
a constant of the graph), and ``dims``, their sizes flattened (SymInts: under torch.compile's dynamic shapes a
size is a symbol, which no string can carry).
"""
from __future__ import annotations

import ast
import functools
import json

import torch

from .._core.dtypes import DType, as_dtype, dtype_named
from .._core.spec import Descriptor

__all__ = ["encode_attrs", "decode_attrs", "plain_attr", "sig_string", "parse_sig"]

# -- attribute encoding ------------------------------------------------------------------------
# attrs travel as a Python literal (repr) so that Dynamo can constant-fold the encoding while tracing
# (it cannot trace json); DTypes (ours or torch's) become ("__dtype__", "bf16"); floats become ("__float__",
# float.hex(v)): exact, non-finite ones included (repr 'inf' / 'nan' are not literals: vector_norm's ord=inf), and
# what Dynamo can evaluate on a float it traces as a symbol (with dynamic=True a float default argument is one;
# repr of it breaks the graph, .hex() specializes it to its value).
_DT_TAG = "__dtype__"
_FL_TAG = "__float__"


def _enc(v):
    if isinstance(v, DType):
        return (_DT_TAG, v.short)
    if isinstance(v, (tuple, list)):
        return tuple(_enc(x) for x in v)
    if isinstance(v, torch.dtype):     # by torch's name: no lookup keyed by a dtype object while Dynamo traces
        return (_DT_TAG, dtype_named(str(v)[6:]).short)
    if isinstance(v, float):
        return (_FL_TAG, v.hex())
    return v


def _dec(v):
    if isinstance(v, tuple):
        if len(v) == 2 and v[0] == _DT_TAG:
            return dtype_named(v[1])
        if len(v) == 2 and v[0] == _FL_TAG:
            return float.fromhex(v[1])
        return tuple(_dec(x) for x in v)
    return v


def plain_attr(v):
    """An attribute value as a descriptor keeps it, the same as after the schema's round trip: torch dtypes as
    DType, sequences as tuples."""
    return _dec(_enc(v))


# The custom ops' schema version, leading every attribute string.  The string is a constant of the compiled forward
# graph, so a change of the ops' signatures (v2: op_backward's sizes as SymInt[]) also changes the key under which
# inductor / AOT autograd cache that graph with its backward: an entry compiled against an older schema is never
# replayed against this one.
_VERSION = "v2:"


def encode_attrs(attrs: dict) -> str:
    return _VERSION + repr(tuple((k, _enc(attrs[k])) for k in sorted(attrs)))


# (the schema's strings are parsed once per distinct string: a compiled graph calls with the same few)
@functools.lru_cache(maxsize=1024)
def decode_attrs(s: str) -> dict:
    if not s.startswith(_VERSION):
        raise ValueError(f"baracuda custom op: attributes {s[:40]!r} are not of schema {_VERSION[:-1]} (a graph "
                         "compiled by another baracuda version: clear torch.compile's caches)")
    return {k: _dec(v) for k, v in ast.literal_eval(s[len(_VERSION):])}


def sig_string(desc: Descriptor) -> tuple:
    """(sig, dims) of the descriptor's operands: ranks and dtypes as a string, the sizes as one flat list."""
    sig = json.dumps([[len(t.shape), t.dtype.short] for t in desc.inputs], separators=(",", ":"))
    return sig, [d for t in desc.inputs for d in t.shape]


@functools.lru_cache(maxsize=1024)
def _kinds(sig: str) -> tuple:
    return tuple((r, as_dtype(d)) for r, d in json.loads(sig))


def parse_sig(sig: str, dims) -> tuple:
    """((shape, DType), ...) of the operands, from ``sig_string``'s pair."""
    out, at = [], 0
    for r, dt in _kinds(sig):
        out.append((tuple(dims[at:at + r]), dt))
        at += r
    if at != len(dims):
        raise ValueError(f"baracuda::op_backward: {len(dims)} sizes for operands of ranks summing to {at}")
    return tuple(out)


