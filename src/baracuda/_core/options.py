"""PlanPreference: what the caller wants from selection. Every field is read by ``registry.select``."""
from __future__ import annotations

from dataclasses import dataclass, field

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
    check_values: ops that detect bad values on the device (class indices out of range, a BCE input outside
        [0, 1], a negative variance) read that flag back and raise ``InvalidProblemError``: one host
        synchronization per call.  False skips the read-back: no synchronization (the host keeps queueing work,
        as torch's CUDA kernels with their asynchronous device asserts), and a bad row's loss is NaN.  Either
        way no kernel reads out of bounds.  Under CUDA-graph capture the read-back is always skipped.
    """

    prefer: tuple[Backend, ...] = ()
    forbid: tuple[Backend, ...] = ()
    require_deterministic: bool = False
    allow_reduced_precision: bool = False
    max_workspace_bytes: int | None = None
    autotune: bool = False
    check_values: bool = True

    def __post_init__(self):
        object.__setattr__(self, "prefer", _backends(self.prefer))
        object.__setattr__(self, "forbid", _backends(self.forbid))
        if self.max_workspace_bytes is not None and self.max_workspace_bytes < 0:
            raise ValueError(f"PlanPreference: max_workspace_bytes must be >= 0, got {self.max_workspace_bytes}")
        clash = set(self.prefer) & set(self.forbid)
        if clash:
            raise ValueError(f"PlanPreference: backends both preferred and forbidden: {sorted(map(str, clash))}")


DEFAULT_PREFERENCE = PlanPreference()
