"""im2col / col2im: torch.nn.functional.unfold and fold (sliding local blocks of a batched 2-d image), each the
other's adjoint, so each one's backward is the other op.

``im2col(x, kernel_size, dilation, padding, stride)``: x (N, C, H, W) -> (N, C * kh * kw, L), L = the number of
    window positions (block rows x block columns); row c * kh * kw + (i * kw + j) holds the value each window reads at
    kernel offset (i, j) of channel c, zero where it reads the padding.
``col2im(cols, output_size, kernel_size, dilation, padding, stride)``: (N, C * kh * kw, L) -> (N, C, *output_size):
    every value added into the image position it stands for (overlapping windows sum; padding positions dropped).
The drop-ins take torch's unbatched forms too (a 3-d image, 2-d columns).

>>> import numpy as np, baracuda as bc
>>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
>>> bc.Plan.select(bc.Descriptor.like("im2col", x, kernel_size=2), device="cpu").run(x)[0]
array([[0., 1., 3., 4.],
       [1., 2., 4., 5.],
       [3., 4., 6., 7.],
       [4., 5., 7., 8.]], dtype=float32)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.derive import declare_rule_ops
from .._core.errors import ArgumentTypeError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import check_nonneg
from .conv import spatial_tuple

__all__ = ["FoldGeom", "fold_geometry"]

_WINDOW = (Attr("kernel_size", "ints", expected="positive ints"), Attr("dilation", "ints", (1,)),
           Attr("padding", "ints", (0,)), Attr("stride", "ints", (1,)))
_OUT_SIZE = Attr("output_size", "ints", expected="positive ints (the image's height and width)")


@dataclass(frozen=True)
class FoldGeom:
    n: int
    c: int
    image: tuple        # (H, W)
    blocks: tuple       # window positions per dim
    kernel: tuple
    stride: tuple
    pad: tuple
    dilation: tuple

    @property
    def padded(self) -> tuple:
        return tuple(i + 2 * p for i, p in zip(self.image, self.pad))

    @property
    def k(self) -> int:
        return math.prod(self.kernel)

    @property
    def cols_shape(self) -> tuple:
        return (self.n, self.c * self.k, math.prod(self.blocks))


def _window(op, image, a):
    k = a["kernel_size"] = spatial_tuple(op, "kernel_size", a["kernel_size"], 2, 1)
    d = a["dilation"] = spatial_tuple(op, "dilation", a["dilation"], 2, 1)
    p = a["padding"] = spatial_tuple(op, "padding", a["padding"], 2, 0)
    s = a["stride"] = spatial_tuple(op, "stride", a["stride"], 2, 1)
    blocks = tuple((i + 2 * pi - di * (ki - 1) - 1) // si + 1 for i, pi, di, ki, si in zip(image, p, d, k, s))
    if any(b < 1 for b in blocks):
        raise InvalidProblemError(op, "kernel_size", f"a window {k} (dilation {d}) that fits the padded image "
                                  f"{tuple(i + 2 * pi for i, pi in zip(image, p))} at least once", f"{blocks} blocks")
    return k, d, p, s, blocks


def fold_geometry(desc) -> FoldGeom:
    shape = desc.inputs[0].shape
    return _geometry(desc.op, shape, desc.attr_dict)[0]


def _geometry(op, shape, attrs):
    a = dict(attrs)
    if op == "im2col":
        if len(shape) != 4:
            raise InvalidProblemError(op, "x", "a 4-d tensor (N, C, H, W)", f"shape {shape}")
        n, c, image = shape[0], shape[1], tuple(shape[2:])
        k, d, p, s, blocks = _window(op, image, a)
        return FoldGeom(n, c, image, blocks, k, s, p, d), a
    if len(shape) != 3:
        raise InvalidProblemError(op, "cols", "a 3-d tensor (N, C * prod(kernel_size), L)", f"shape {shape}")
    image = a["output_size"] = spatial_tuple(op, "output_size", a["output_size"], 2, 1)
    k, d, p, s, blocks = _window(op, image, a)
    kk = math.prod(k)
    if shape[1] % kk:
        raise InvalidProblemError(op, "cols", f"a dimension 1 divisible by prod(kernel_size) = {kk}", f"shape {shape}")
    if shape[2] != math.prod(blocks):
        raise InvalidProblemError(op, "cols", f"{math.prod(blocks)} blocks in dimension 2 ({blocks[0]} x {blocks[1]} "
                                  f"windows of output_size {image})", f"shape {shape}")
    return FoldGeom(shape[0], shape[1] // kk, image, blocks, k, s, p, d), a


def _check(op):
    def check(inputs, attrs):
        if len(inputs) != 1:
            raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
        SPECS[op].check_dtypes(inputs)
        check_nonneg(op, (SPECS[op].arg_names[0],), (inputs[0].shape,))
        geom, a = _geometry(op, inputs[0].shape, attrs)
        out = geom.cols_shape if op == "im2col" else (geom.n, geom.c) + geom.image
        return a, (TensorSpec(out, inputs[0].dtype),)
    return check


def _g_im2col(ctx, d, grads, s):
    a = d.attr_dict
    return (ctx.op("col2im", grads[0], output_size=tuple(d.inputs[0].shape[2:]), **a),)


def _g_col2im(ctx, d, grads, s):
    a = dict(d.attr_dict)
    a.pop("output_size")
    return (ctx.op("im2col", grads[0], **a),)


# -- drop-ins (torch's unbatched forms: a batch of one) ----------------------------------------------------------
def _batched(op, t, rank):
    if not hasattr(t, "dim"):
        raise ArgumentTypeError(op, "input", "a Tensor", type(t).__name__)
    if t.dim() == rank - 1:
        return t.unsqueeze(0), lambda out: out.squeeze(0)
    if t.dim() != rank:
        raise InvalidProblemError(op, "input", f"a {rank - 1}-d (unbatched) or {rank}-d (batched) tensor",
                                  f"shape {tuple(t.shape)}")
    return t, None


def _dropin_unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    x, finish = _batched("im2col", input, 4)
    return (x,), {"kernel_size": kernel_size, "dilation": dilation, "padding": padding, "stride": stride}, finish


def _dropin_fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    x, finish = _batched("col2im", input, 3)
    return (x,), {"output_size": output_size, "kernel_size": kernel_size, "dilation": dilation, "padding": padding,
                  "stride": stride}, finish


def _peer_unfold(x, *, kernel_size, dilation, padding, stride):
    import torch.nn.functional as F

    return F.unfold(x, kernel_size, dilation, padding, stride)


def _peer_fold(x, *, output_size, kernel_size, dilation, padding, stride):
    import torch.nn.functional as F

    return F.fold(x, output_size, kernel_size, dilation, padding, stride)


# -- samples, errors, workloads ----------------------------------------------------------------------------------
_CASES = [((1, 2, 4, 5), {"kernel_size": (2, 3)}),
          ((2, 1, 5, 5), {"kernel_size": (3,), "padding": (1,), "stride": (2,)}),
          ((1, 2, 6, 5), {"kernel_size": (2,), "dilation": (2, 1), "padding": (0, 1), "stride": (1, 2)}),
          ((0, 2, 4, 4), {"kernel_size": (2,)})]


def _unfold_samples(rng):
    for i, (shape, a) in enumerate(_CASES):
        yield Sample((rng.standard_normal(shape),), dict(a), name=f"{shape}{a}", grad=i < 2)


def _fold_samples(rng):
    for i, (shape, a) in enumerate(_CASES):
        geom, _ = _geometry("im2col", shape, {"dilation": (1,), "padding": (0,), "stride": (1,), **a})
        yield Sample((rng.standard_normal(geom.cols_shape),), dict(a, output_size=shape[2:]), name=f"{shape}{a}",
                     grad=i < 2)


def _errors(op):
    def errors():
        f = "f32"
        if op == "im2col":
            yield ErrorCase((((2, 3, 4), f),), {"kernel_size": (2,)}, InvalidProblemError,
                            r"im2col: argument 'x': expected a 4-d tensor", "rank")
            yield ErrorCase((((1, 2, 3, 3), f),), {"kernel_size": (4,)}, InvalidProblemError,
                            r"argument 'kernel_size': expected a window", "too-large")
            yield ErrorCase((((1, 2, 3, 3), f),), {"kernel_size": (2,), "padding": (-1,)}, InvalidProblemError,
                            r"argument 'padding': expected non-negative", "negative-padding")
            yield ErrorCase((((1, 2, 3, 3), "i32"),), {"kernel_size": (2,)}, UnsupportedError, r"dtype i32", "int")
        else:
            yield ErrorCase((((1, 6, 4), f),), {"kernel_size": (2,), "output_size": (3, 3)}, InvalidProblemError,
                            r"col2im: argument 'cols': expected a dimension 1 divisible by", "channels")
            yield ErrorCase((((1, 8, 5), f),), {"kernel_size": (2,), "output_size": (3, 3)}, InvalidProblemError,
                            r"argument 'cols': expected 4 blocks", "blocks")
            yield ErrorCase((((1, 8, 4), f),), {"kernel_size": (2,), "output_size": (3, 3, 3)}, InvalidProblemError,
                            r"argument 'output_size': expected one int or 2", "output-size")
            yield ErrorCase((((1, 8, 4), f),), {"kernel_size": (2,)}, InvalidProblemError,
                            r"argument 'output_size'", "no-output-size")
    return errors


# Each output is one input value (im2col) or a sum of at most prod(kernel) <= 9 of them (col2im): a rounding or two
_TOL = {DType.f64: (1e-12, 1e-12), DType.f32: (1e-6, 1e-6), DType.f16: (2e-3, 2e-3), DType.bf16: (1.6e-2, 1e-2)}


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), desc.outputs[0].numel


_WL = {
    # a ViT-B/16 patchify (non-overlapping 16x16 windows) and a ResNet-like 3x3 im2col
    "im2col": (Workload("im2col-[64,3,224,224]-k16s16-bf16", ((64, 3, 224, 224),), DType.bf16,
                        {"kernel_size": (16,), "stride": (16,)}, backward=True),
               Workload("im2col-[32,64,56,56]-k3p1-bf16", ((32, 64, 56, 56),), DType.bf16,
                        {"kernel_size": (3,), "padding": (1,)}, backward=True)),
    "col2im": (Workload("col2im-[32,576,3136]->56^2-k3p1-bf16", ((32, 576, 3136),), DType.bf16,
                        {"kernel_size": (3,), "padding": (1,), "output_size": (56, 56)}, backward=True),),
}

SPECS: dict[str, OpSpec] = {}
for _op, _arg, _attrs, _tname, _dropin, _peer, _grad, _samples in (
        ("im2col", "x", _WINDOW, "torch.nn.functional.unfold", _dropin_unfold, _peer_unfold, _g_im2col,
         _unfold_samples),
        ("col2im", "cols", (_OUT_SIZE,) + _WINDOW, "torch.nn.functional.fold", _dropin_fold, _peer_fold, _g_col2im,
         _fold_samples)):
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="conv", arg_names=(_arg,), check=_check(_op),
        # im2col copies values: bool too, as torch's unfold (which has no integer kernels on the CPU)
        dtypes=FLOAT_TYPES + ((DType.bool,) if _op == "im2col" else ()), attrs=_attrs,
        torch_peer=_peer, torch_name=_tname, dropin=_dropin, grad=_grad, saves=(), differentiable=(0,),
        samples=_samples, errors=_errors(_op), tol=lambda dt: _TOL.get(dt, (0.0, 0.0)), grad_tol=lambda dt: _TOL[dt],
        workloads=_WL[_op], cost=_cost, category="conv",
        doc=f"{_tname} (sliding local blocks of a batched 2-d image); its backward is "
            f"{'col2im' if _op == 'im2col' else 'im2col'}, its adjoint."))

declare_rule_ops(__name__, "col2im", "im2col")
