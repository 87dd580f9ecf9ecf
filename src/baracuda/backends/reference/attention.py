"""NumPy float64 bodies of the attention family."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.attention import take_rows
from . import register_reference


def rope_rows(desc, c, s, pos):
    """The tables' rows of each token: (c, s) unchanged without positions, else rows ``pos`` (an error for a
    position outside [0, P): never a wrapped negative index or an IndexError)."""
    if not desc.attr("has_positions"):
        return c, s
    P = c.shape[-2]
    pos = np.asarray(pos).astype(np.int64)
    bad = (pos < 0) | (pos >= P)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidProblemError(desc.op, "positions", f"positions in [0, {P}) (the tables' rows)",
                                  f"positions[{', '.join(map(str, at))}] = {int(pos[at])}")
    return take_rows(c, pos, np.arange), take_rows(s, pos, np.arange)


def _rope(desc, x, c, s, pos=None):
    """Rotate the pairs of the first R dims of every row of x by the tables' angle at the row's position."""
    R = desc.attr("rotary_dim")
    half = R // 2
    c, s = rope_rows(desc, c, s, pos)
    if desc.attr("inverse"):
        s = -s
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
