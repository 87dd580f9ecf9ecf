"""baracuda: every GPU primitive ML frameworks expect, through one Plan-based API.

>>> import numpy as np, baracuda as bc
>>> x = np.linspace(-1, 1, 5, dtype=np.float32)
>>> plan = bc.Plan.select(bc.Descriptor.make("relu", (x.shape, "f32")), device="cpu")
>>> plan.run(x)
array([0. , 0. , 0. , 0.5, 1. ], dtype=float32)
"""
from ._core.checks import check_errors
from ._core.device import Device, as_device
from ._core.dtypes import DType, as_dtype, result_type
from ._core.errors import (ArgumentTypeError, BaracudaError, BufferTooSmallError, DeviceMismatchError,
                           DTypeMismatchError, InvalidProblemError, UnsupportedError, WorkspaceTooSmallError)
from ._core.options import PlanPreference, current_preference, preference
from ._core.plan import BackwardPlan, Plan, plan_for
from ._core.registry import Explanation
from ._core.sku import Arch, Backend, KernelSku, MathPrecision, PrecisionGuarantee
from ._core.spec import Descriptor, TensorSpec, all_specs, get_spec

__version__ = "0.1.0"


def explain(desc: Descriptor, device=None, pref: PlanPreference | None = None) -> Explanation:
    """Every candidate implementation of ``desc`` on ``device``: chosen, eligible or refused (with why)."""
    from ._core.registry import explain as _explain

    return _explain(desc, as_device(device), pref or current_preference())


__all__ = [
    "ArgumentTypeError", "Arch", "Backend", "BackwardPlan", "BaracudaError", "BufferTooSmallError", "DType", "DTypeMismatchError",
    "DeviceMismatchError", "Descriptor", "Device", "check_errors", "Explanation", "InvalidProblemError", "KernelSku", "MathPrecision", "Plan",
    "PlanPreference", "PrecisionGuarantee", "TensorSpec", "UnsupportedError", "WorkspaceTooSmallError",
    "all_specs", "as_device", "as_dtype", "current_preference", "explain", "get_spec", "plan_for", "preference",
    "result_type",
]

from . import _load  # noqa: E402,F401  (last: registers every op spec and backend implementation)
