"""``baracuda.torch.record()``: every baracuda op run inside the block, with its plan, time and error."""
from __future__ import annotations

import contextlib

from ._call import RECORDERS

__all__ = ["record"]


@contextlib.contextmanager
def record(check: bool = True):
    """Record every baracuda op that runs inside the block: kind (fw/bw), descriptor, SKU(s), time in ms
    (device-synchronized), and with ``check`` the max error against the float64 reference backend."""
    log: list[dict] = []
    RECORDERS.append((log, check))
    try:
        yield log
    finally:
        RECORDERS.pop()
