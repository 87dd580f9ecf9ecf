"""Shape helpers shared by the op families (pure Python: no NumPy, no torch)."""
from __future__ import annotations

from .._core.errors import InvalidProblemError
from .._core.spec import norm_axes, norm_axis  # noqa: F401  (re-exported: the families import them here)

ODD_SHAPES = ((), (7,), (3, 5), (2, 3, 4, 5), (33, 65), (0, 4))


def broadcast_shapes(op: str, arg_names, shapes) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for name, s in zip(arg_names, shapes):
        for i, d in enumerate(s):
            if d < 0:
                raise InvalidProblemError(op, name, "non-negative dimensions", s)
            j = rank - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                raise InvalidProblemError(op, name, f"a shape broadcastable with {tuple(shapes[0])}", tuple(s))
    return tuple(out)


def float_operand(x, dtype):
    """A drop-in's tensor ``x`` as torch converts it before a float-only op: an integer or bool tensor becomes
    ``dtype`` (a torch dtype: softmax's ``dtype=``, logsumexp's default dtype) first, in one cast (no kernel of the
    op reads integers); a floating or complex tensor, or any tensor when ``dtype`` is None, is returned as is."""
    if dtype is None or x.dtype.is_floating_point or x.dtype.is_complex:
        return x
    return x.to(dtype)


def check_nonneg(op: str, names, shapes):
    for n, s in zip(names, shapes):
        if any(d < 0 for d in s):
            raise InvalidProblemError(op, n, "non-negative dimensions", s)
