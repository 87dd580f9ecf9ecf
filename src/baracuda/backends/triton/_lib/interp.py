"""The one place where kernels differ under Triton's interpreter (TRITON_INTERPRET=1, how CI checks them).

``loop(start, end, step=1)`` is the loop every kernel writes for a runtime trip count.  On the GPU it is
``tl.range``, which the code generator treats exactly like ``range`` (same scf.for; the induction variable keeps
the divisibility facts that give 16-byte accesses).  Triton 3.6's interpreter cannot take ``range()`` over
runtime ints with NumPy >= 2.4 (scalar kernel arguments are 1-element arrays and ``range`` calls ``int()`` on
them), so under the interpreter ``loop`` is a Python generator with the same semantics whose induction variable
is, like the GPU's, a scalar tensor once a bound is one.

``f64_arg(p, CT, INTERP)``: an f64 kernel argument in the compute dtype; the interpreter hands Python floats over
unconverted (they would become f32), ``tl.full`` keeps them f64.  Kernels take ``INTERP`` as a constexpr
(``INTERPRETING`` at the launch) so the compiled GPU kernel has one code path.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ...._core.device import triton_interpreting

INTERPRETING = triton_interpreting()

if INTERPRETING:
    def loop(start, end=None, step=1):
        if end is None:
            start, end = 0, start
        i = start
        if not isinstance(i, tl.tensor):
            for b in (end, step):
                if isinstance(b, tl.tensor):
                    i = b * 0 + start   # a scalar tensor, like the GPU loop's induction variable
                    break
        while i < end:
            yield i
            i += step
else:
    loop = tl.range


@triton.jit
def f64_arg(p, CT: tl.constexpr, INTERP: tl.constexpr):
    """A f64 kernel argument in the compute dtype (the interpreter passes Python floats unconverted)."""
    if INTERP:
        v = tl.full([], p, tl.float64)
    else:
        v = p
    return v.to(CT)
