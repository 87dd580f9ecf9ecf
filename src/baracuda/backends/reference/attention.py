"""NumPy float64 bodies of the attention family."""
from __future__ import annotations

import numpy as np

from . import register_reference


def _rope(desc, x, c, s):
    """Rotate the pairs of the first R dims of every row of x by the tables' angle at the row's position."""
    R = desc.attr("rotary_dim")
    half = R // 2
    # tables [S, R/2] / [B|1, S, R/2] -> broadcast against x's [B, S, H, R/2] (bshd) or [B, H, S, R/2] (bhsd)
    if desc.attr("layout") == "bshd":
        c, s = c[..., :, None, :], s[..., :, None, :]
    elif c.ndim == 3:
        c, s = c[:, None], s[:, None]
    y = x.copy()
    if desc.attr("interleaved"):
        a, b = x[..., 0:R:2], x[..., 1:R:2]
        y[..., 0:R:2], y[..., 1:R:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., :half], x[..., half:R]
        y[..., :half], y[..., half:R] = a * c - b * s, b * c + a * s
    return y


register_reference("rope", _rope)
