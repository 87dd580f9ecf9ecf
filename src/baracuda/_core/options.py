"""PlanPreference: what the caller wants from selection. Every field is read by ``registry.select``."""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

from .checks import mode_of
from .sku import Backend

__all__ = ["PlanPreference", "current_preference", "preference"]


def _backends(xs) -> tuple[Backend, ...]:
    return tuple(x if isinstance(x, Backend) else Backend(str(x)) for x in (xs or ()))


@dataclass(frozen=True)
class PlanPreference:
    """Selection preferences.

    prefer: backends tried first, in this order (others follow in heuristic order).
    forbid: backends never chosen.
    require_deterministic: refuse implementations whose precision says ``deterministic=False``.
    allow_reduced_precision: allow TF32 for f32 matrix products (and similar reduced-precision math).
    max_workspace_bytes: refuse implementations that need more workspace than this.
    autotune: on a GPU, time every eligible implementation once per descriptor and keep the fastest.
    check_values: how ops that detect bad values on the device (class indices out of range, a BCE input outside
        [0, 1], a negative variance) report them (``_core/checks.py``).  "deferred" (default): the device flag
        is copied back behind the kernels without a host synchronization and the error
        (``InvalidProblemError``, naming the op) is raised by a later ``Plan.run`` once the copy has landed, or
        by ``baracuda.check_errors()``; the bad rows' results are NaN meanwhile (torch's CUDA kernels report such
        input asynchronously too, with a device assert).  "sync" (or True): the call itself raises, at the cost
        of one host synchronization per call.  "off" (or False): never read.  No kernel reads out of bounds in
        any mode; under CUDA-graph capture nothing is read.  (The NumPy reference backend checks on the host, where
        it costs nothing, and raises at the call in every mode.)
    """

    prefer: tuple[Backend, ...] = ()
    forbid: tuple[Backend, ...] = ()
    require_deterministic: bool = False
    allow_reduced_precision: bool = False
    max_workspace_bytes: int | None = None
    autotune: bool = False
    check_values: str = "deferred"

    def __post_init__(self):
        object.__setattr__(self, "prefer", _backends(self.prefer))
        object.__setattr__(self, "forbid", _backends(self.forbid))
        object.__setattr__(self, "check_values", mode_of(self.check_values))
        if self.max_workspace_bytes is not None and self.max_workspace_bytes < 0:
            raise ValueError(f"PlanPreference: max_workspace_bytes must be >= 0, got {self.max_workspace_bytes}")
        clash = set(self.prefer) & set(self.forbid)
        if clash:
            raise ValueError(f"PlanPreference: backends both preferred and forbidden: {sorted(map(str, clash))}")
        object.__setattr__(self, "_hash", hash((self.prefer, self.forbid, self.require_deterministic,
                                                self.allow_reduced_precision, self.max_workspace_bytes,
                                                self.autotune, self.check_values)))

    def __hash__(self) -> int:
        # a preference is part of every call key (torch/_call.py): hashed once, not field by field per call
        return self._hash


DEFAULT_PREFERENCE = PlanPreference()


# The preference in effect: a context variable, so a ``with preference(...)`` block changes the plans of its own
# thread (and asyncio task) only.
_CURRENT: contextvars.ContextVar[PlanPreference] = contextvars.ContextVar("baracuda_preference",
                                                                         default=DEFAULT_PREFERENCE)
current_preference = _CURRENT.get


@contextlib.contextmanager
def preference(pref: PlanPreference):
    """Select plans under ``pref`` inside the ``with`` block (this thread / task only): ``Plan.select`` without a
    ``pref`` argument and every ``baracuda.torch`` call read it.

    >>> import baracuda as bc
    >>> with bc.preference(bc.PlanPreference(allow_reduced_precision=True)):
    ...     bc.current_preference().allow_reduced_precision
    True
    """
    if not isinstance(pref, PlanPreference):
        raise TypeError(f"preference: expected a PlanPreference, got {type(pref).__name__}")
    token = _CURRENT.set(pref)
    try:
        yield pref
    finally:
        _CURRENT.reset(token)
