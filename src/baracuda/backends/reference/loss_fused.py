"""NumPy float64 bodies of the fused forward + gradient ops (ops/loss_fused.py): cross_entropy's own reference
bodies composed, so the fused op is checked against exactly what cross_entropy and its backward promise."""
from __future__ import annotations

import numpy as np

from ..._core.spec import Descriptor
from ...ops.loss_fused import CE_WITH_GRAD
from . import register_reference
from .loss import BODIES


def _ce_with_grad(desc, g, *xs):
    fw = Descriptor("cross_entropy", desc.inputs[1:], desc.attrs)
    bw = Descriptor("cross_entropy_backward", (desc.inputs[0], fw.outputs[1]) + desc.inputs[1:], desc.attrs)
    loss, lse = BODIES["cross_entropy"](fw, *xs)
    return loss, BODIES["cross_entropy_backward"](bw, g, lse, *xs)


def _grad_scale(desc, x, g, h=None):
    f = np.asarray(g) if h is None else np.asarray(g) / np.asarray(h)
    return np.asarray(x) * f


register_reference(CE_WITH_GRAD, _ce_with_grad)
register_reference("grad_scale", _grad_scale)
