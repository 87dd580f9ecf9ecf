"""Shared by the Triton families' configuration choosers: the SM count and test overrides.

Each family's ``choose()`` picks tiles/grids from the problem; tests force other choices cheaply (e.g. a
multi-tile or split path on a tiny row under the interpreter) through that family's ``forced(...)``.
"""
from __future__ import annotations

import contextlib
import functools

import torch


@functools.lru_cache(maxsize=None)
def num_sms() -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return 132  # H100/H200; on the CPU only the interpreter's heuristics read it


@functools.lru_cache(maxsize=None)
def has_tma() -> bool:
    """Whether kernels may address global memory through TMA tensor descriptors: sm_90+ (Hopper's tensor memory
    accelerator), or the interpreter (which emulates descriptor loads, so the CPU tests run the same path)."""
    from .interp import INTERPRETING

    if INTERPRETING:
        return True
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def overrides(doc: str):
    """A family's (overrides dict, forced context manager): ``with forced(tile=16): ...`` sets entries in the
    dict for the duration of the block; ``choose()`` reads them with ``_FORCE.get(name, default)``."""
    table: dict = {}

    @contextlib.contextmanager
    def forced(**kw):
        old = dict(table)
        table.update(kw)
        try:
            yield
        finally:
            table.clear()
            table.update(old)

    forced.__doc__ = doc
    return table, forced
