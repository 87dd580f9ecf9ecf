"""NumPy float64 bodies of the position encodings (ops/attention_pos.py): RoPE tables and ALiBi slopes."""
from __future__ import annotations

import numpy as np

from ...ops.attention_pos import alibi_exponents, inv_freq_and_scale
from . import register_reference


def _rope_tables(desc, pos):
    """att * cos / sin of every position times every frequency, in float64 (NumPy's cos / sin reduce the angle
    exactly; the angle itself is one float64 product)."""
    inv, att = inv_freq_and_scale(desc.attr_dict)
    theta = np.asarray(pos).astype(np.float64)[..., None] * inv
    return att * np.cos(theta), att * np.sin(theta)


register_reference("rope_tables", _rope_tables)
register_reference("alibi_slopes", lambda desc: np.exp2(alibi_exponents(desc.attr("n_heads"))))
