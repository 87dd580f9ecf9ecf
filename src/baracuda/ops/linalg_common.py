"""What the linear-algebra families share (``linalg_*.py``): the operand checks of batched matrices and torch's
error for a singular / non-positive-definite input.

Every linalg op reads its matrices as the last two dims of an operand (``(*batch, m, n)``), batch dims broadcasting
between operands the way torch.linalg's do (``solve(A, B)``: A's and B's batch dims broadcast).  Dtypes: f32, f64,
c64, c128 (torch.linalg's; half precision is refused by torch's CUDA kernels and here alike).
"""
from __future__ import annotations

from .._core.dtypes import DType
from .._core.errors import BaracudaError, DTypeMismatchError, InvalidProblemError
from ._common import broadcast_shapes

__all__ = ["LINALG_DTYPES", "LinAlgError", "matrix", "square", "batch_of", "same_dtype", "broadcast_batch"]

LINALG_DTYPES = (DType.f32, DType.f64, DType.c64, DType.c128)


class LinAlgError(BaracudaError, RuntimeError):
    """A matrix outside an op's domain found while computing (singular for ``solve``/``inv``, not positive-definite
    for ``cholesky``): torch raises ``torch.linalg.LinAlgError`` (a RuntimeError) with the batch element and the
    failing minor; so does this, naming the op."""

    def __init__(self, op: str, what: str):
        self.op = op
        super().__init__(f"{op}: {what}")


def matrix(op: str, name: str, t, min_rank: int = 2) -> tuple[int, int]:
    """(m, n) of ``t``'s last two dims; an error naming ``op`` and ``name`` when ``t`` has fewer than ``min_rank``
    dims."""
    if len(t.shape) < min_rank:
        raise InvalidProblemError(op, name, f"a tensor of at least {min_rank} dims (*batch, m, n)",
                                  f"shape {tuple(t.shape)}")
    return tuple(t.shape[-2:])


def square(op: str, name: str, t) -> int:
    """n of ``t``'s square (*batch, n, n) matrices; an error when they are not square."""
    m, n = matrix(op, name, t)
    if m != n:
        raise InvalidProblemError(op, name, "square matrices (*batch, n, n)", f"shape {tuple(t.shape)}")
    return n


def batch_of(t, core: int = 2) -> tuple[int, ...]:
    """The batch dims of ``t`` (all but its last ``core``)."""
    return tuple(t.shape[:len(t.shape) - core])


def same_dtype(op: str, first, **others) -> None:
    """Every operand in ``others`` (name -> TensorSpec) has ``first``'s dtype (torch.linalg does not promote)."""
    for name, t in others.items():
        if t.dtype != first.dtype:
            raise DTypeMismatchError(op, name, str(first.dtype), str(t.dtype))


def broadcast_batch(op: str, names, *ts, core=(2, 2)) -> tuple[int, ...]:
    """The broadcast batch shape of ``ts`` whose last ``core[i]`` dims are the matrix (or vector) dims."""
    return broadcast_shapes(op, names, [batch_of(t, c) for t, c in zip(ts, core)])
