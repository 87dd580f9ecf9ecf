"""NumPy float64 bodies of the fused forward + gradient ops (ops/loss_fused.py): cross_entropy's own reference
bodies composed, so the fused op is checked against exactly what cross_entropy and its backward promise."""
from __future__ import annotations

import numpy as np

from ..._core.spec import Descriptor, TensorSpec
from ...ops.loss_fused import CE_WITH_GRAD
from . import register_reference
from .loss import BODIES


def _ce_with_grad(desc, *xs):
    fw = Descriptor("cross_entropy", desc.inputs, desc.attrs)
    bw = Descriptor("cross_entropy_backward", (TensorSpec((), desc.dtype),) + desc.inputs, desc.attrs)
    return BODIES["cross_entropy"](fw, *xs), BODIES["cross_entropy_backward"](bw, np.asarray(1.0), *xs)


register_reference(CE_WITH_GRAD, _ce_with_grad)
register_reference("grad_scale", lambda desc, x, g: np.asarray(x) * np.asarray(g))
