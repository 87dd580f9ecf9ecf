"""PlanPreference: what the caller wants from selection. Every field is read by ``registry.select``."""
from __future__ import annotations

from dataclasses import dataclass, field

from .checks import mode_of
from .sku import Backend

__all__ = ["PlanPreference"]


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


DEFAULT_PREFERENCE = PlanPreference()
