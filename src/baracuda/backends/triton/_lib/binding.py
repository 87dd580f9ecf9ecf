"""Wrappers of a family's ``bind(desc, pref) -> run`` for families that write contiguous outputs only."""
from __future__ import annotations

import torch


def contiguous_outputs(bind):
    """The kernels write contiguous outputs: a strided out= gets a contiguous temporary copied back."""
    def bound(desc, pref=None):
        run = bind(desc, pref)

        def guarded(desc_, inputs, outputs, ws):
            outs = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format)
                    for o in outputs]
            run(desc_, inputs, outs, ws)
            for o, t in zip(outputs, outs):
                if t is not o:
                    o.copy_(t)
        return guarded
    return bound


def run_of(bind):
    """A ``run(desc, inputs, outputs, ws)`` that binds on every call (the registry's plain entry point)."""
    def run(desc, inputs, outputs, ws):
        bind(desc, None)(desc, inputs, outputs, ws)
    return run
