"""Layout family, part 3: diagonals.  diagonal (torch.diagonal, materialized), its backward
diagonal_backward (zeros with the diagonal written: aten.diagonal_backward), diag_embed and diag (1-D ->
matrix, 2-D -> diagonal).  Every one is a strided copy: the diagonal of dims (d1, d2) is the view with
stride s1 + s2 starting at offset*s2 (offset > 0) or -offset*s1."""
from __future__ import annotations

from .._core.errors import InvalidProblemError
from .._core.dtypes import DType
from .._core.spec import Attr, ErrorCase, Sample, TensorSpec, Workload
from ._common import check_nonneg, norm_axis, write_out
from .layout import int_attr, layout_spec

__all__ = ["diag_len", "diagonal_shape"]


def diag_len(n1, n2, offset):
    return max(0, min(n1 - max(0, -offset), n2 - max(0, offset)))


def diagonal_shape(shape, offset, d1, d2):
    rest = tuple(s for i, s in enumerate(shape) if i not in (d1, d2))
    return rest + (diag_len(shape[d1], shape[d2], offset),)


def _dims(op, attrs, rank):
    d1 = norm_axis(op, "dim1", attrs["dim1"], rank)
    d2 = norm_axis(op, "dim2", attrs["dim2"], rank)
    if d1 == d2:
        raise InvalidProblemError(op, "dim2", f"a dim different from dim1 ({d1})", d2)
    return d1, d2


def _diag_attrs(dim1, dim2):
    return (int_attr("offset", 0), int_attr("dim1", dim1), int_attr("dim2", dim2))


def _check_diagonal(inputs, attrs):
    op = "diagonal"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    x = inputs[0]
    check_nonneg(op, ("input",), [x.shape])
    if len(x.shape) < 2:
        raise InvalidProblemError(op, "input", "at least 2 dims", x.shape)
    d1, d2 = _dims(op, attrs, len(x.shape))
    off = attrs.get("offset", 0)
    return {"offset": off, "dim1": d1, "dim2": d2}, (TensorSpec(diagonal_shape(x.shape, off, d1, d2), x.dtype),)


def _check_diagonal_bw(inputs, attrs):
    op = "diagonal_backward"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    shape = attrs["shape"]
    if len(shape) < 2 or any(s < 0 for s in shape):
        raise InvalidProblemError(op, "shape", "at least 2 non-negative dims", shape)
    d1, d2 = _dims("diagonal", attrs, len(shape))
    off = attrs.get("offset", 0)
    want = diagonal_shape(shape, off, d1, d2)
    if inputs[0].shape != want:
        raise InvalidProblemError(op, "grad", f"shape {want}", inputs[0].shape)
    return {"shape": shape, "offset": off, "dim1": d1, "dim2": d2}, (TensorSpec(shape, inputs[0].dtype),)


def _check_diag_embed(inputs, attrs):
    op = "diag_embed"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    x = inputs[0]
    check_nonneg(op, ("input",), [x.shape])
    if not x.shape:
        raise InvalidProblemError(op, "input", "at least 1 dim", x.shape)
    off = attrs.get("offset", 0)
    r = len(x.shape) + 1
    d1, d2 = _dims(op, attrs, r)
    m = x.shape[-1] + abs(off)
    shape, rest = [], iter(x.shape[:-1])
    for i in range(r):
        shape.append(m if i in (d1, d2) else next(rest))
    return {"offset": off, "dim1": d1, "dim2": d2}, (TensorSpec(tuple(shape), x.dtype),)


def _check_diag(inputs, attrs):
    op = "diag"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    x = inputs[0]
    check_nonneg(op, ("input",), [x.shape])
    k = attrs.get("diagonal", 0)
    if len(x.shape) == 1:
        m = x.shape[0] + abs(k)
        return {"diagonal": k}, (TensorSpec((m, m), x.dtype),)
    if len(x.shape) == 2:
        return {"diagonal": k}, (TensorSpec((diag_len(*x.shape, k),), x.dtype),)
    raise InvalidProblemError(op, "input", "a 1-D or 2-D tensor", x.shape)


def _g_diagonal(ctx, d, g, s):
    return (ctx.op("diagonal_backward", g[0], shape=d.inputs[0].shape, **d.attr_dict),)


def _g_diag_embed(ctx, d, g, s):
    return (ctx.op("diagonal", g[0], **d.attr_dict),)


def _g_diag(ctx, d, g, s):
    k = d.attr("diagonal")
    if len(d.inputs[0].shape) == 1:
        return (ctx.op("diagonal", g[0], offset=k, dim1=0, dim2=1),)
    return (ctx.op("diagonal_backward", g[0], shape=d.inputs[0].shape, offset=k, dim1=0, dim2=1),)


def _samples(kind):
    def samples(rng):
        n = rng.standard_normal
        if kind == "diagonal":
            yield Sample((n((3, 4)),), {"offset": 1}, name="off1")
            yield Sample((n((2, 3, 4)),), {"offset": -1, "dim1": 2, "dim2": 0}, name="3d")
            yield Sample((n((3, 2)),), {"offset": 5}, name="empty")
        elif kind == "diagonal_backward":
            yield Sample((n((3,)),), {"shape": (3, 4), "offset": 1}, name="off1")
            yield Sample((n((3, 2)),), {"shape": (2, 3, 4), "offset": -1, "dim1": 2, "dim2": 0}, name="3d")
        elif kind == "diag_embed":
            yield Sample((n((3,)),), {}, name="1d")
            yield Sample((n((2, 3)),), {"offset": 1, "dim1": 0, "dim2": 2}, name="dims")
            yield Sample((n((0, 2)),), {}, name="empty")
        else:
            yield Sample((n((4,)),), {"diagonal": -1}, name="vec")
            yield Sample((n((3, 5)),), {"diagonal": 2}, name="mat")
            yield Sample((n((3, 5)),), {}, name="mat0")
    return samples


def _tp(name):
    def peer(x, **kw):
        import torch

        return getattr(torch, name)(x, **kw).contiguous()
    return peer


def _peer_diag_bw(g, shape, offset, dim1, dim2):
    import torch

    return torch.ops.aten.diagonal_backward(g, shape, offset, dim1, dim2)


layout_spec("diagonal", _check_diagonal, attrs=_diag_attrs(0, 1), arg_names=("input",), torch_name="torch.diagonal", peer=_tp("diagonal"),
            dropin=lambda input, offset=0, dim1=0, dim2=1: ((input,), {"offset": offset, "dim1": dim1, "dim2": dim2}),
            grad=_g_diagonal, samples=_samples("diagonal"),
            errors=lambda: [ErrorCase((((3, 4), "f32"),), {"dim1": 1, "dim2": -1}, InvalidProblemError,
                                      r"diagonal: argument 'dim2': expected a dim different from dim1", "same")],
            workloads=[Workload("diagonal-[64,4096,4096]-bf16", ((64, 4096, 4096),), DType.bf16, {"dim1": 1, "dim2": 2})],
            doc="torch.diagonal, materialized (the diagonal is the last dim of the result).")
layout_spec("diagonal_backward", _check_diagonal_bw,
            attrs=(Attr("shape", "ints", expected="at least 2 non-negative dims"),) + _diag_attrs(0, 1), arg_names=("grad",), peer=_peer_diag_bw,
            samples=_samples("diagonal_backward"),
            errors=lambda: [ErrorCase((((4,), "f32"),), {"shape": (3, 4), "offset": 1}, InvalidProblemError,
                                      r"diagonal_backward: argument 'grad': expected shape \(3,\)", "shape")],
            doc="Zeros of ``shape`` with ``grad`` written on the diagonal (aten.diagonal_backward).")
layout_spec("diag_embed", _check_diag_embed, attrs=_diag_attrs(-2, -1), arg_names=("input",), torch_name="torch.diag_embed", peer=_tp("diag_embed"),
            dropin=lambda input, offset=0, dim1=-2, dim2=-1: ((input,), {"offset": offset, "dim1": dim1, "dim2": dim2}),
            grad=_g_diag_embed, samples=_samples("diag_embed"),
            errors=lambda: [ErrorCase((((), "f32"),), {}, InvalidProblemError, r"diag_embed: argument 'input'", "scalar")],
            workloads=[Workload("diag_embed-[64,4096]-bf16", ((64, 4096),), DType.bf16, {}, backward=True)],
            doc="torch.diag_embed: the last dim of input on the diagonal of dims (dim1, dim2) of the result.")
def _dropin_diag(input, diagonal=0, *, out=None):
    """torch.diag; ``out=``: the result written into ``out`` (of the result's dtype exactly, as torch.diag requires;
    resized to the result's shape, with torch's warning when it had elements) and ``out`` returned, outside autograd
    (torch's out= results have no gradient)."""
    if out is None:
        return (input,), {"diagonal": diagonal}

    def finish(t):
        return write_out("diag", t, out, exact_dtype=True, stacklevel=4)
    return (input,), {"diagonal": diagonal}, finish


layout_spec("diag", _check_diag, attrs=(int_attr("diagonal", 0),), arg_names=("input",), torch_name="torch.diag", peer=_tp("diag"),
            dropin=_dropin_diag, grad=_g_diag, samples=_samples("diag"),
            workloads=[Workload("diag-[16384]->matrix-bf16", ((16384,),), DType.bf16, {}, backward=True)],
            errors=lambda: [ErrorCase((((2, 3, 4), "f32"),), {}, InvalidProblemError, r"diag: argument 'input': expected a 1-D or 2-D", "rank")],
            doc="torch.diag: a vector -> the matrix with it on diagonal k; a matrix -> its diagonal k.")
