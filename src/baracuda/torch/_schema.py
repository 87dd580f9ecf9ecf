"""The custom ops' schema strings: a descriptor's attributes and operand signature as strings.

``baracuda::op(str name, str attrs, Tensor[] xs)`` and ``baracuda::op_backward(str name, str attrs, str sig, ...)``
carry them (``_library.py``); the eager path (``_call.py``) makes them only when a call goes through a custom op.
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
# (it cannot trace json); DTypes (ours or torch's) become ("__dtype__", "bf16"); non-finite floats (repr 'inf' /
# 'nan' are not literals: vector_norm's ord=inf, cdist's p=inf) become ("__float__", "inf").
_DT_TAG = "__dtype__"
_FL_TAG = "__float__"


def _enc(v):
    if isinstance(v, DType):
        return (_DT_TAG, v.short)
    if isinstance(v, (tuple, list)):
        return tuple(_enc(x) for x in v)
    if isinstance(v, torch.dtype):     # by torch's name: no lookup keyed by a dtype object while Dynamo traces
        return (_DT_TAG, dtype_named(str(v)[6:]).short)
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return (_FL_TAG, repr(v))
    return v


def _dec(v):
    if isinstance(v, tuple):
        if len(v) == 2 and v[0] == _DT_TAG:
            return dtype_named(v[1])
        if len(v) == 2 and v[0] == _FL_TAG:
            return float(v[1])
        return tuple(_dec(x) for x in v)
    return v


def plain_attr(v):
    """An attribute value as a descriptor keeps it, the same as after the schema's round trip: torch dtypes as
    DType, sequences as tuples."""
    return _dec(_enc(v))


def encode_attrs(attrs: dict) -> str:
    return repr(tuple((k, _enc(attrs[k])) for k in sorted(attrs)))


# (the schema's strings are parsed once per distinct string: a compiled graph calls with the same few)
@functools.lru_cache(maxsize=1024)
def decode_attrs(s: str) -> dict:
    return {k: _dec(v) for k, v in ast.literal_eval(s)}


def sig_string(desc: Descriptor) -> str:
    return json.dumps([[list(t.shape), t.dtype.short] for t in desc.inputs], separators=(",", ":"))


@functools.lru_cache(maxsize=1024)
def parse_sig(sig: str) -> tuple:
    return tuple((tuple(s), as_dtype(d)) for s, d in json.loads(sig))


