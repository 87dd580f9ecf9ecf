"""Region-of-interest pooling (issue 18, torchvision.ops): roi_align and roi_pool, with their fused backward ops.

rois: (K, 5) rows (batch index, x1, y1, x2, y2) in the input's dtype (torchvision's Tensor[K, 5] form; its list of
per-image Tensor[L, 4] boxes is converted by the drop-in, ``baracuda.torch.vision``).  The batch index is truncated
toward zero (C's int cast, as torchvision); a roi whose index falls outside [0, N) pools nothing: its output rows
are 0 and it takes no gradient (torchvision reads out of bounds there).

roi_align(input (N, C, H, W), rois; output_size, spatial_scale=1, sampling_ratio=-1, aligned=False) -> (K, C, PH, PW)
    torchvision's algorithm: offset = 0.5 if aligned else 0; the roi is (x1, y1, x2, y2) * spatial_scale - offset,
    its size clamped to >= 1 unless aligned; bin (ph, pw) averages a grid of gh x gw bilinear samples at
    y = y1' + ph bh + (iy + 1/2) bh / gh (likewise x), gh = sampling_ratio if > 0 else ceil(roi_height / PH) (the
    adaptive rule, for -1 and 0 alike; one per roi), divided by max(gh gw, 1).  A sample with y < -1, y > H,
    x < -1 or x > W reads 0; otherwise y, x clamp to >= 0 and the last row / column repeats past H - 1 / W - 1.
roi_pool(input, rois; output_size, spatial_scale=1) -> (out (K, C, PH, PW), argmax int64)
    the roi is round(coord * spatial_scale) (half away from zero), size max(end - start + 1, 1); bin (ph, pw)
    covers rows floor(ph h / PH) .. ceil((ph + 1) h / PH) (exact integer arithmetic: torchvision computes the bin
    edges in the input's float type, whose rounding can move an edge that lands on an integer) offset by the start
    and clipped to the input; out = the maximum (first in row-major order on ties, NaN never wins, values
    <= -FLT_MAX never win: torchvision's ``v > maxval`` from -FLT_MAX), argmax its flat h W + w (-1 and out = 0 for
    an empty bin).  The drop-in returns out only (torchvision's); argmax feeds the backward.
roi_align_backward(grad, rois; input_size, ...) -> dx: the adjoint (each sample's bilinear weights times grad / count
    added into dx); roi_pool_backward(grad, rois, argmax; input_size) -> dx[n, c, argmax] += grad.  Overlapping rois
    add into the same input elements: the Triton kernels add atomically (deterministic=False, as torchvision's
    CUDA kernels).  Boxes take no gradient (torchvision's).
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import (REQUIRED, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec,
                          set_bench_inputs)
from ._common import check_nonneg

__all__ = ["ROI_OPS", "roi_geometry"]

ROI_OPS = ("roi_align", "roi_pool")


def _pair(op, v, inputs, attrs):
    """torchvision's _pair: one int for both output dims or two, each >= 1."""
    v = tuple(v) * 2 if len(v) == 1 else tuple(v)
    if len(v) != 2 or any(e < 1 for e in v):
        raise InvalidProblemError(op, "output_size", "a positive int or a pair of positive ints", v)
    return v


_OUT = Attr("output_size", "ints", REQUIRED, normalize=_pair, expected="a positive int or a pair of positive ints")
_SCALE = Attr("spatial_scale", "float", 1.0)
_ALIGN_ATTRS = (_OUT, _SCALE, Attr("sampling_ratio", "int", -1), Attr("aligned", "bool", False))
_POOL_ATTRS = (_OUT, _SCALE)
_INPUT_SIZE = Attr("input_size", "shape", REQUIRED)


def roi_geometry(desc) -> tuple[tuple, int, tuple]:
    """((N, C, H, W) of the pooled input, K rois, (PH, PW)) of any roi op or its backward."""
    shape = desc.attr("input_size") if "backward" in desc.op else desc.inputs[0].shape
    rois = desc.inputs[1]
    return tuple(shape), rois.shape[0], desc.attr("output_size")


def _check_input(op, x, name="input"):
    if x.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument '{name}' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")
    check_nonneg(op, (name,), (x.shape,))
    if len(x.shape) != 4:
        raise InvalidProblemError(op, name, "a 4-d tensor (N, C, H, W)", x.shape)


def _check_rois(op, rois, dtype):
    if len(rois.shape) != 2 or rois.shape[1] != 5:
        raise InvalidProblemError(op, "rois", "a (K, 5) tensor of (batch index, x1, y1, x2, y2) rows", rois.shape)
    if rois.dtype != dtype:
        raise DTypeMismatchError(op, "rois", f"{dtype} (the input's dtype, as torchvision)", str(rois.dtype))


def _operands(op, inputs, names):
    if len(inputs) != len(names):
        raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))
    return inputs


def _check(op):
    def check(inputs, attrs):
        x, rois = _operands(op, inputs, ("input", "rois"))
        _check_input(op, x)
        _check_rois(op, rois, x.dtype)
        shape = (rois.shape[0], x.shape[1]) + attrs["output_size"]
        outs = (TensorSpec(shape, x.dtype),)
        return attrs, outs + ((TensorSpec(shape, DType.i64),) if op == "roi_pool" else ())
    return check


def _check_bw(op):
    names = ("grad", "rois", "argmax") if op == "roi_pool_backward" else ("grad", "rois")

    def check(inputs, attrs):
        ins = _operands(op, inputs, names)
        g, rois = ins[:2]
        size = attrs["input_size"]
        if len(size) != 4 or 0 in size[1:]:
            raise InvalidProblemError(op, "input_size", "the forward input's shape (N, C, H, W), C, H, W > 0", size)
        _check_input(op, g, "grad")
        _check_rois(op, rois, g.dtype)
        want = (rois.shape[0], size[1]) + attrs["output_size"]
        if g.shape != want:
            raise InvalidProblemError(op, "grad", f"the forward output's shape {want}", g.shape)
        if len(ins) == 3 and (ins[2].shape != want or ins[2].dtype != DType.i64):
            raise InvalidProblemError(op, "argmax", f"an int64 tensor of shape {want} (roi_pool's second output)",
                                      f"{ins[2].dtype}{list(ins[2].shape)}")
        return attrs, (TensorSpec(tuple(size), g.dtype),)
    return check


def _check_fw_input_size(op):
    """The forward input's C, H, W must be non-empty (torchvision divides by and indexes them)."""
    base = _check(op)

    def check(inputs, attrs):
        attrs, outs = base(inputs, attrs)
        if 0 in inputs[0].shape[1:]:
            raise InvalidProblemError(op, "input", "non-empty channel and spatial sizes (only N may be 0)",
                                      inputs[0].shape)
        return attrs, outs
    return check


# -- backward rules ------------------------------------------------------------------------------------------------
def _g_align(ctx, d, grads, s):
    if grads[0] is None:
        return (None, None)
    return (ctx.op("roi_align_backward", grads[0], s["rois"], input_size=d.inputs[0].shape, **d.attr_dict), None)


def _g_pool(ctx, d, grads, s):
    if grads[0] is None:
        return (None, None)
    return (ctx.op("roi_pool_backward", grads[0], s["rois"], s["out1"], input_size=d.inputs[0].shape,
                   **d.attr_dict), None)


# -- samples, errors, workloads ------------------------------------------------------------------------------------
def random_rois(rng, k, n, h, w, scale=1.0, spread=1.0):
    """K rows (batch index, x1, y1, x2, y2): boxes in input coordinates / scale, some reaching past the borders,
    some inverted (x2 < x1: torchvision clamps their size), one batch index out of range when n allows a test of it."""
    b = rng.integers(0, n, k).astype(float)
    x1 = rng.uniform(-1.5, w * spread - 1, k)
    y1 = rng.uniform(-1.5, h * spread - 1, k)
    x2 = x1 + rng.uniform(-0.5, w * 0.9, k)
    y2 = y1 + rng.uniform(-0.5, h * 0.9, k)
    return np.stack([b, x1 / scale, y1 / scale, x2 / scale, y2 / scale], axis=1)


_ALIGN_CASES = [   # (input shape, K, attrs); the first one is the gradient sample (finite differences in f64)
    ((2, 2, 5, 6), 3, {"output_size": (2, 3), "spatial_scale": 1.0, "sampling_ratio": 2, "aligned": False}),
    ((1, 3, 6, 5), 3, {"output_size": 2, "spatial_scale": 0.5, "sampling_ratio": -1, "aligned": True}),
    ((2, 2, 4, 7), 2, {"output_size": (3, 2), "spatial_scale": 2.0, "sampling_ratio": 0, "aligned": False}),
]
_POOL_CASES = [
    ((2, 2, 6, 5), 3, {"output_size": (2, 3), "spatial_scale": 1.0}),
    ((1, 3, 7, 6), 2, {"output_size": 3, "spatial_scale": 0.5}),
]


def _fw_samples(op):
    cases = _ALIGN_CASES if op == "roi_align" else _POOL_CASES

    def samples(rng):
        for i, (shape, k, attrs) in enumerate(cases):
            n, _, h, w = shape
            rois = random_rois(rng, k, n, h, w, attrs["spatial_scale"])
            if i == 1:
                rois[0, 0] = n + 0.5       # a batch index out of range: zero rows
            yield Sample((rng.standard_normal(shape), rois), dict(attrs), name=f"{shape}k{k}-{i}", grad=i == 0)
        yield Sample((rng.standard_normal((0, 2, 4, 4)), random_rois(rng, 2, 1, 4, 4)), dict(cases[0][2]),
                     name="empty-batch", grad=False)
    return samples


def _bw_samples(op):
    def samples(rng):
        fwd = op.replace("_backward", "")
        for s in _fw_samples(fwd)(rng):
            x, rois = s.inputs
            attrs = dict(s.attrs)
            ph, pw = (attrs["output_size"],) * 2 if isinstance(attrs["output_size"], int) else attrs["output_size"]
            out = (rois.shape[0], x.shape[1], ph, pw)
            ins = (rng.standard_normal(out), rois)
            if fwd == "roi_pool":   # any flat index of the plane, and -1 (an empty bin)
                ins += (rng.integers(-1, x.shape[2] * x.shape[3], out).astype(np.int64),)
            yield Sample(ins, dict(attrs, input_size=x.shape), name=s.name, grad=False)
    return samples


def _errors(op):
    def errors():
        f = "f32"
        x, r = ((2, 3, 8, 8), f), ((4, 5), f)
        a = {"output_size": 2}
        bw = op.endswith("backward")
        if bw:
            a["input_size"] = (2, 3, 8, 8)
            x = ((4, 3, 2, 2), f)
        extra = (((4, 3, 2, 2), "i64"),) if op == "roi_pool_backward" else ()
        yield ErrorCase((x, ((4, 4), f)) + extra, a, InvalidProblemError, rf"{op}: argument 'rois': expected a \(K, 5\)",
                        "rois-shape")
        yield ErrorCase((x, ((4, 5), "f64")) + extra, a, DTypeMismatchError, rf"{op}: argument 'rois': expected dtype f32",
                        "rois-dtype")
        yield ErrorCase((x, r) + extra, dict(a, output_size=(0, 2)), InvalidProblemError,
                        rf"{op}: argument 'output_size'", "output-size")
        yield ErrorCase((x, r) + extra, dict(a, output_size=(2, 2, 2)), InvalidProblemError,
                        rf"{op}: argument 'output_size'", "output-size-len")
        if bw:
            yield ErrorCase((((4, 3, 3, 2), f), r) + extra, a, InvalidProblemError, rf"{op}: argument 'grad': expected "
                            "the forward output's shape", "grad-shape")
        else:
            yield ErrorCase((((3, 8, 8), f), r), a, InvalidProblemError, rf"{op}: argument 'input': expected a 4-d",
                            "rank")
            yield ErrorCase((((2, 3, 8, 8), "i64"), ((4, 5), "i64")), a, UnsupportedError, r"dtype i64", "int")
    return errors


def _tol(dt):
    # roi_align: an average of <= gh gw samples of 4 bilinear taps each (weights summing to <= 1), accumulated in f32
    # (f64 for f64), one rounding of the output; roi_pool's outputs are input values (exact).  The backward adds at
    # most K gh gw weighted terms per input element in f32 (atomically: any order).
    return {DType.f64: (1e-10, 1e-12), DType.f32: (1e-5, 1e-5), DType.f16: (2e-3, 2e-3),
            DType.bf16: (1.6e-2, 1e-2)}.get(dt, (0.0, 0.0))


def _cost(desc):
    """The outputs read K C PH PW bins' samples (4 taps each for roi_align) and are written once."""
    (n, c, h, w), k, (ph, pw) = roi_geometry(desc)
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    return nbytes, k * c * ph * pw * 8


# Mask R-CNN's box head on a ResNet-50-FPN level: 512 rois of 256 channels pooled to 7 x 7 from a 200 x 272 map
# (batch 2); the mask head's 14 x 14
_FEAT = (2, 256, 200, 272)
_WL = {
    "roi_align": (Workload("roi_align-maskrcnn-box-[2,256,200,272]-k512-7x7-s2-bf16", (_FEAT, (512, 5)), DType.bf16,
                           {"output_size": 7, "spatial_scale": 0.25, "sampling_ratio": 2, "aligned": True},
                           backward=True),
                  Workload("roi_align-maskrcnn-mask-[2,256,200,272]-k128-14x14-adaptive-f32", (_FEAT, (128, 5)),
                           DType.f32, {"output_size": 14, "spatial_scale": 0.25, "sampling_ratio": -1,
                                       "aligned": True}, backward=True)),
    "roi_pool": (Workload("roi_pool-fastrcnn-[2,256,200,272]-k512-7x7-bf16", (_FEAT, (512, 5)), DType.bf16,
                          {"output_size": 7, "spatial_scale": 0.25}, backward=True),),
}


def _boxes_operand(op, input, boxes):
    """torchvision's boxes: a Tensor[K, 5] or a list of Tensor[L, 4] (one per image) -> the (K, 5) rois."""
    import torch

    if isinstance(boxes, torch.Tensor):
        return boxes
    if not isinstance(boxes, (list, tuple)) or not all(isinstance(b, torch.Tensor) for b in boxes):
        raise InvalidProblemError(op, "boxes", "a Tensor[K, 5] or a list of Tensor[L, 4]", type(boxes).__name__)
    for b in boxes:
        if b.dim() != 2 or b.shape[1] != 4:
            raise InvalidProblemError(op, "boxes", "a list of Tensor[L, 4] (one per image)", tuple(b.shape))
    if not boxes:
        return input.new_zeros((0, 5))
    ids = torch.cat([torch.full((b.shape[0], 1), i, dtype=b.dtype, device=b.device) for i, b in enumerate(boxes)])
    return torch.cat([ids, torch.cat(list(boxes))], dim=1)


def _dropin_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    return (input, _boxes_operand("roi_align", input, boxes)), {
        "output_size": output_size, "spatial_scale": spatial_scale, "sampling_ratio": sampling_ratio,
        "aligned": aligned}


def _dropin_pool(input, boxes, output_size, spatial_scale=1.0):
    return (input, _boxes_operand("roi_pool", input, boxes)), {"output_size": output_size,
                                                               "spatial_scale": spatial_scale}, lambda out: out[0]


_SPECS: dict[str, OpSpec] = {}


def _reg(**kw):
    _SPECS[kw["name"]] = register_spec(OpSpec(family="image", category="image", tol=_tol, cost=_cost, **kw))


_reg(name="roi_align", arg_names=("input", "rois"), check=_check_fw_input_size("roi_align"), dtypes=FLOAT_TYPES,
     attrs=_ALIGN_ATTRS, torch_name="torchvision.ops.roi_align", dropin=_dropin_align, grad=_g_align,
     saves=("rois",), differentiable=(0,), samples=_fw_samples("roi_align"), errors=_errors("roi_align"),
     grad_tol=_tol, workloads=_WL["roi_align"],
     doc="torchvision.ops.roi_align: bilinear samples averaged per bin of each roi (aligned, sampling_ratio with "
         "the adaptive rule, spatial_scale).")
_reg(name="roi_pool", arg_names=("input", "rois"), check=_check_fw_input_size("roi_pool"), dtypes=FLOAT_TYPES,
     attrs=_POOL_ATTRS, torch_name="torchvision.ops.roi_pool", dropin=_dropin_pool, grad=_g_pool,
     saves=("rois", "out1"), differentiable=(0,), samples=_fw_samples("roi_pool"), errors=_errors("roi_pool"),
     grad_tol=_tol, workloads=_WL["roi_pool"],
     doc="torchvision.ops.roi_pool -> (out, argmax int64): the maximum of each quantized bin of each roi.")
_reg(name="roi_align_backward", arg_names=("grad", "rois"), check=_check_bw("roi_align_backward"),
     dtypes=FLOAT_TYPES, attrs=_ALIGN_ATTRS + (_INPUT_SIZE,), samples=_bw_samples("roi_align_backward"),
     errors=_errors("roi_align_backward"),
     workloads=tuple(Workload(w.name.replace("roi_align", "roi_align_backward", 1),
                              ((w.shapes[1][0], w.shapes[0][1], w.attrs["output_size"], w.attrs["output_size"]),
                               w.shapes[1]), w.dtype, dict(w.attrs, input_size=w.shapes[0])) for w in _WL["roi_align"]),
     doc="roi_align's adjoint: each bin's bilinear sample weights times grad / count added into dx (atomics on the "
         "GPU).")
_reg(name="roi_pool_backward", arg_names=("grad", "rois", "argmax"), check=_check_bw("roi_pool_backward"),
     dtypes=FLOAT_TYPES, attrs=_POOL_ATTRS + (_INPUT_SIZE,), samples=_bw_samples("roi_pool_backward"),
     errors=_errors("roi_pool_backward"),
     workloads=(Workload("roi_pool_backward-fastrcnn-[2,256,200,272]-k512-7x7-bf16", ((512, 256, 7, 7), (512, 5),
                                  ((512, 256, 7, 7), DType.i64)), DType.bf16,
                         {"output_size": 7, "spatial_scale": 0.25, "input_size": _FEAT}),),
     doc="roi_pool's backward: dx[n, c, argmax] += grad for every bin with a maximum (atomics on the GPU).")


def _bench_inputs(desc, device, gen):
    """Valid rois (random boxes of the feature map, batch indices in range) and argmax indices in the plane; the
    other operands standard normal."""
    import torch

    (n, c, h, w), k, _ = roi_geometry(desc)
    rng = np.random.default_rng(int(torch.randint(0, 2 ** 31, (1,), generator=gen, device=gen.device)))
    scale = desc.attr("spatial_scale")
    ins = []
    for i, t in enumerate(desc.inputs):
        if i == 1:
            a = random_rois(rng, k, n, h, w, scale, spread=1.0)
        elif t.dtype == DType.i64:
            a = rng.integers(0, h * w, t.shape)
        else:
            a = rng.standard_normal(t.shape)
        ins.append(torch.from_numpy(a).to(device=device, dtype=t.dtype.torch))
    return ins


for _op in _SPECS:
    set_bench_inputs(_op, _bench_inputs)

declare_rule_ops(__name__, "roi_align_backward", "roi_pool_backward")
