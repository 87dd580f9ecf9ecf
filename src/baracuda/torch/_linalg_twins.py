"""torch's linear-algebra functions with other signatures or results than the linalg drop-ins they run
(``_aliases.publish`` calls ``publish`` here):

  torch.svd(input, some=True, compute_uv=True)   linalg.svd(full_matrices=not some), returning V (= Vh^H, a view) in
      torch.return_types.svd; compute_uv=False: linalg.svdvals with zero-filled U (m, m) and V (n, n), as torch
  torch.qr(input, some=True)                      linalg.qr(mode='reduced' if some else 'complete'), return_types.qr
  torch.linalg.norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None)   vector_norm or matrix_norm by
      torch's rule: dim a 2-tuple, or dim=None with ord given and a 2-d A -> matrix_norm (ord 'fro' when None);
      otherwise vector_norm (ord 2 when None; dim=None with ord=None flattens any A)
  torch.cross(input, other, dim=None, *, out=None)   linalg.cross; dim=None: the first dim of size 3 of the
      broadcast shape (torch's deprecated default)
  torch.pinverse(input, rcond=1e-15)              linalg.pinv(rtol=rcond)
  torch.det / torch.slogdet / torch.inverse(input)  linalg.det / slogdet / inv (torch's names: ``input``, not ``A``)
  torch.cholesky(input, upper=False)              linalg.cholesky(upper=upper)
  torch.lu(A, pivot=True, get_infos=False)        linalg.lu_factor_ex: (LU, pivots) or (LU, pivots, infos)
  torch.lu_solve(input, LU_data, LU_pivots)       linalg.lu_solve(LU_data, LU_pivots, input)
  torch.linalg.tensorinv(input, ind=2)            linalg.inv of input as a (prod(shape[:ind]), prod(shape[ind:]))
      matrix, shaped shape[ind:] + shape[:ind] (torch's composition; gradients through inv's backward)
  torch.linalg.tensorsolve(input, other, dims=None)   linalg.solve of input (dims moved last) as a square matrix
      against other flattened, shaped input.shape[other.ndim:]
"""
from __future__ import annotations

import math

import torch

from .._core.errors import ArgumentTypeError, InvalidProblemError, UnsupportedError
from .._core.spec import get_spec
from .._core.tensors import given
from ._namespaces import _make

__all__ = ["OWNED", "publish"]

OWNED = frozenset({"svd", "qr", "linalg.norm", "cross", "pinverse", "det", "slogdet", "inverse", "cholesky", "lu",
                   "lu_solve", "linalg.tensorinv", "linalg.tensorsolve"})


def _no_out(op, out):
    if out is not None:
        raise UnsupportedError(op, "argument 'out' (the drop-in returns new tensors)")


def _tensor(op, arg, x):
    if not isinstance(x, torch.Tensor):
        raise ArgumentTypeError(op, arg, "a tensor", given(x))


def publish(put, published: dict) -> None:
    """Set the twins on the mirror (``put(key, fn)``) and record them in ``published``."""
    linalg_svd, svdvals, linalg_qr, vector_norm, matrix_norm, linalg_cross, linalg_pinv = (
        _make(get_spec(op), "torch.linalg." + op)
        for op in ("svd", "svdvals", "qr", "vector_norm", "matrix_norm", "cross", "pinv"))

    def svd(input, some=True, compute_uv=True, *, out=None):
        """baracuda drop-in for ``torch.svd`` (op ``svd`` / ``svdvals``): V, not Vh; baracuda's gauge."""
        _no_out("svd", out)
        if not compute_uv:
            m, n = input.shape[-2:]
            s = svdvals(input)
            zeros = lambda k: torch.zeros(input.shape[:-2] + (k, k), dtype=input.dtype, device=input.device)  # noqa: E731
            return torch.return_types.svd((zeros(m), s, zeros(n)))
        u, s, vh = linalg_svd(input, full_matrices=not some)
        return torch.return_types.svd((u, s, vh.mH))

    def qr(input, some=True, *, out=None):
        """baracuda drop-in for ``torch.qr`` (op ``qr``): some=False is mode='complete'."""
        _no_out("qr", out)
        q, r = linalg_qr(input, mode="reduced" if some else "complete")
        return torch.return_types.qr((q, r))

    def norm(input, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
        """baracuda drop-in for ``torch.linalg.norm``: ops ``vector_norm`` / ``matrix_norm`` by torch's rule."""
        _no_out("norm", out)
        A = input
        if isinstance(dim, int):
            dim = (dim,)
        if dim is not None and len(dim) == 2 or dim is None and ord is not None and A.dim() == 2:
            if dtype is not None:
                A = A.to(dtype)
            return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else tuple(dim), keepdim)
        if dim is None and ord is not None and A.dim() != 1:
            raise InvalidProblemError("norm", "A", "a 1-d or 2-d input when ord is given and dim is None", f"shape {tuple(A.shape)}")
        if isinstance(ord, str):
            raise InvalidProblemError("norm", "ord", "a number for a vector norm", repr(ord))
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)

    def cross(input, other, dim=None, *, out=None):
        """baracuda drop-in for ``torch.cross`` (op ``cross``): dim=None is the first dim of size 3."""
        _no_out("cross", out)
        if dim is None:
            shape = torch.broadcast_shapes(input.shape, other.shape)
            dim = next((i for i, s in enumerate(shape) if s == 3), None)
            if dim is None:
                raise InvalidProblemError("cross", "dim", "a dim of size 3 (none given and none found)", f"shape {tuple(shape)}")
        return linalg_cross(input, other, dim=dim)

    def pinverse(input, rcond=1e-15):
        """baracuda drop-in for ``torch.pinverse`` (op ``pinv``, rtol=rcond)."""
        return linalg_pinv(input, rtol=rcond)

    linalg_det, linalg_slogdet, linalg_inv, linalg_cholesky, lu_factor_ex, linalg_lu_solve = (
        _make(get_spec(op), "torch.linalg." + op)
        for op in ("det", "slogdet", "inv", "cholesky", "lu_factor_ex", "lu_solve"))

    def det(input):
        """baracuda drop-in for ``torch.det`` (op ``det``)."""
        return linalg_det(input)

    def slogdet(input, *, out=None):
        """baracuda drop-in for ``torch.slogdet`` (op ``slogdet``)."""
        _no_out("slogdet", out)
        sign, logabsdet = linalg_slogdet(input)
        return torch.return_types.slogdet((sign, logabsdet))

    def inverse(input, *, out=None):
        """baracuda drop-in for ``torch.inverse`` (op ``inv``)."""
        _no_out("inverse", out)
        return linalg_inv(input)

    def cholesky(input, upper=False, *, out=None):
        """baracuda drop-in for ``torch.cholesky`` (op ``cholesky``)."""
        _no_out("cholesky", out)
        return linalg_cholesky(input, upper=upper)

    def lu(*args, **kwargs):
        """baracuda drop-in for ``torch.lu(A, pivot=True, get_infos=False, out=None)`` (op ``lu_factor_ex``):
        (LU, pivots[, infos]); torch's own signature is (*args, **kwargs) (its boolean dispatch), so is this."""
        names = ("A", "pivot", "get_infos", "out")
        if len(args) > len(names) or any(k not in names for k in kwargs):
            raise TypeError(f"lu() takes (A, pivot=True, get_infos=False, out=None), got {len(args)} positional "
                            f"arguments and {sorted(kwargs)}")
        a = dict(zip(names, args), **kwargs)
        _no_out("lu", a.get("out"))
        get_infos = a.get("get_infos", False)
        LU, piv, info = lu_factor_ex(a["A"], pivot=a.get("pivot", True))
        return torch.return_types._lu_with_info((LU, piv, info)) if get_infos else (LU, piv)

    def lu_solve(input, LU_data, LU_pivots, *, out=None):
        """baracuda drop-in for ``torch.lu_solve`` (op ``lu_solve``): the right-hand side first."""
        _no_out("lu_solve", out)
        return linalg_lu_solve(LU_data, LU_pivots, input)

    linalg_solve = _make(get_spec("solve"), "torch.linalg.solve")

    def tensorinv(input, ind=2, *, out=None):
        """baracuda drop-in for ``torch.linalg.tensorinv`` (op ``inv``): ``input`` as the square matrix of its first
        ``ind`` dims by the rest, inverted, shaped ``input.shape[ind:] + input.shape[:ind]``."""
        op, A = "tensorinv", input
        _no_out(op, out)
        _tensor(op, "input", A)
        if isinstance(ind, bool) or not isinstance(ind, int):
            raise ArgumentTypeError(op, "ind", "an int", given(ind))
        if not 0 < ind <= A.dim():
            raise InvalidProblemError(op, "ind", f"an int in [1, {A.dim()}] (input has {A.dim()} dims)", ind)
        front, back = tuple(A.shape[:ind]), tuple(A.shape[ind:])
        n = math.prod(back)
        if math.prod(front) != n:
            raise InvalidProblemError(op, "input", "prod(shape[ind:]) == prod(shape[:ind]) (a square matrix)",
                                      f"shape {tuple(A.shape)} with ind={ind}: {n} != {math.prod(front)}")
        return linalg_inv(A.reshape(n, n)).reshape(back + front)

    def tensorsolve(input, other, dims=None, *, out=None):
        """baracuda drop-in for ``torch.linalg.tensorsolve`` (op ``solve``): X with ``tensordot(input, X, X.ndim) ==
        other``; ``dims``' dims of ``input`` moved last first; ``input`` as the square matrix other.numel() x
        prod(input.shape[other.ndim:])."""
        op, A, B = "tensorsolve", input, other
        _no_out(op, out)
        _tensor(op, "input", A)
        _tensor(op, "other", B)
        if dims is not None:
            dims = tuple(dims)
            A = A.movedim(dims, tuple(range(A.dim() - len(dims), A.dim())))
        k = B.dim()
        if k > A.dim():
            raise InvalidProblemError(op, "other", f"at most input's number of dims ({A.dim()})", f"{k} dims")
        shape = tuple(A.shape[k:])
        n = math.prod(shape)
        if n != B.numel() or A.numel() != n * n:
            raise InvalidProblemError(op, "input", "prod(input.shape[other.ndim:]) == other.numel() == "
                                      "prod(input.shape[:other.ndim]) (a square system)",
                                      f"input of shape {tuple(A.shape)}, other of shape {tuple(B.shape)}")
        return linalg_solve(A.reshape(n, n), B.reshape(-1)).reshape(shape)

    norm.__name__ = norm.__qualname__ = "norm"
    for key, fn, op in (("svd", svd, "svd"), ("qr", qr, "qr"), ("linalg.norm", norm, "matrix_norm"),
                        ("cross", cross, "cross"), ("pinverse", pinverse, "pinv"), ("det", det, "det"),
                        ("slogdet", slogdet, "slogdet"), ("inverse", inverse, "inv"),
                        ("cholesky", cholesky, "cholesky"), ("lu", lu, "lu_factor_ex"),
                        ("lu_solve", lu_solve, "lu_solve"), ("linalg.tensorinv", tensorinv, "inv"),
                        ("linalg.tensorsolve", tensorsolve, "solve")):
        put(key, fn)
        published[key] = op
