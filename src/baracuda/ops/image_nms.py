"""Non-maximum suppression (issue 18, torchvision.ops): nms and batched_nms.

nms(boxes (K, 4) as (x1, y1, x2, y2), scores (K,); iou_threshold) -> (keep int64 (K,), count int64 ())
    torchvision's semantics: boxes in order of decreasing score (a stable sort: equal scores by index, NaN first, as
    torch.sort(descending=True, stable=True) in torchvision's CUDA kernel); each box not yet suppressed is kept and
    suppresses every later box whose IoU with it is > iou_threshold (IoU = intersection / (area_a + area_b -
    intersection), areas (x2 - x1)(y2 - y1), no +1).  keep lists the kept indices in that order, then -1 up to K:
    a fixed output shape, so the op runs without a host read; ``count`` says how many are kept.  The drop-in
    (``baracuda.torch.vision.nms``) returns keep[:count] (reading count on the host, as torchvision's CUDA nms reads
    its mask).
batched_nms(boxes, scores, idxs int64 (K,); iou_threshold) -> (keep, count): suppression only between boxes of the
    same idxs value, the result in decreasing score order over all boxes (torchvision's coordinate-offset trick
    computes exactly this, in exact arithmetic).
Not differentiable (indices).
"""
from __future__ import annotations

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import (REQUIRED, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec,
                          set_bench_inputs)

__all__ = ["NMS_OPS", "random_boxes"]

NMS_OPS = ("nms", "batched_nms")


def _check(op):
    names = ("boxes", "scores", "idxs") if op == "batched_nms" else ("boxes", "scores")

    def check(inputs, attrs):
        if len(inputs) != len(names):
            raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))
        boxes, scores = inputs[:2]
        if boxes.dtype not in FLOAT_TYPES:
            raise UnsupportedError(op, f"argument 'boxes' has dtype {boxes.dtype}; the op is defined for "
                                       f"{', '.join(map(str, FLOAT_TYPES))}")
        if len(boxes.shape) != 2 or boxes.shape[1] != 4:
            raise InvalidProblemError(op, "boxes", "a (K, 4) tensor of (x1, y1, x2, y2) rows", boxes.shape)
        k = boxes.shape[0]
        if scores.shape != (k,):
            raise InvalidProblemError(op, "scores", f"shape ({k},) (one per box)", scores.shape)
        if scores.dtype != boxes.dtype:
            raise DTypeMismatchError(op, "scores", f"{boxes.dtype} (the boxes' dtype, as torchvision)",
                                     str(scores.dtype))
        if len(inputs) == 3:
            idxs = inputs[2]
            if idxs.shape != (k,):
                raise InvalidProblemError(op, "idxs", f"shape ({k},) (one category per box)", idxs.shape)
            if idxs.dtype not in (DType.i64, DType.i32):
                raise DTypeMismatchError(op, "idxs", "i64 or i32 (category indices)", str(idxs.dtype))
        return attrs, (TensorSpec((k,), DType.i64), TensorSpec((), DType.i64))
    return check


def random_boxes(rng, k, size=10.0, dup=True):
    """K boxes (x1, y1, x2, y2) in a size x size frame, overlapping (so some suppress others), a few degenerate
    (zero width), and scores with a tie (two equal scores: the stable order decides)."""
    import numpy as np

    x1 = rng.uniform(0, size * 0.7, k)
    y1 = rng.uniform(0, size * 0.7, k)
    boxes = np.stack([x1, y1, x1 + rng.uniform(0, size * 0.4, k), y1 + rng.uniform(0, size * 0.4, k)], axis=1)
    scores = rng.permutation(k) / max(k, 1) + 0.01
    if dup and k > 3:
        boxes[1] = boxes[0] + 0.05             # a near duplicate of box 0: suppressed at most thresholds
        boxes[2, 2] = boxes[2, 0]              # zero width: IoU 0 with everything
        scores[3] = scores[0]                  # a tie
    return boxes, scores


def _samples(op):
    def samples(rng):
        for k, thr in ((32, 0.4), (1, 0.5), (0, 0.5)):   # (several blocks: tests/image/test_roi.py)
            boxes, scores = random_boxes(rng, k)
            ins = (boxes, scores)
            if op == "batched_nms":
                ins += (rng.integers(0, 3, k),)
            yield Sample(ins, {"iou_threshold": thr}, name=f"k{k}-t{thr}", grad=False)
    return samples


def _errors(op):
    def errors():
        f = "f32"
        extra = (((6,), "i64"),) if op == "batched_nms" else ()
        a = {"iou_threshold": 0.5}
        yield ErrorCase((((6, 5), f), ((6,), f)) + extra, a, InvalidProblemError, rf"{op}: argument 'boxes': expected "
                        r"a \(K, 4\)", "boxes-shape")
        yield ErrorCase((((6, 4), f), ((5,), f)) + extra, a, InvalidProblemError, rf"{op}: argument 'scores': expected "
                        r"shape \(6,\)", "scores-shape")
        yield ErrorCase((((6, 4), f), ((6,), "f64")) + extra, a, DTypeMismatchError, rf"{op}: argument 'scores'",
                        "scores-dtype")
        yield ErrorCase((((6, 4), "i64"), ((6,), "i64")) + extra, a, UnsupportedError, r"dtype i64", "int")
        if op == "batched_nms":
            yield ErrorCase((((6, 4), f), ((6,), f), ((6,), f)), a, DTypeMismatchError, r"argument 'idxs'", "idxs")
    return errors


def _cost(desc):
    """The K^2 / 2 IoU pairs (about 12 flops each) and the K^2 / 64 mask words written and read once."""
    k = desc.inputs[0].shape[0]
    return sum(t.nbytes for t in desc.inputs) + k * k // 8, 6 * k * k


def _dropin(op):
    """torchvision's signature; the result is keep[:count] (count read on the host)."""
    def finish(out):
        return out[0][:int(out[1])]

    if op == "nms":
        def nms(boxes, scores, iou_threshold):
            return (boxes, scores), {"iou_threshold": float(iou_threshold)}, finish
        return nms

    def batched_nms(boxes, scores, idxs, iou_threshold):
        return (boxes, scores, idxs), {"iou_threshold": float(iou_threshold)}, finish
    return batched_nms


def _bench_inputs(desc, device, gen):
    import numpy as np
    import torch

    k = desc.inputs[0].shape[0]
    rng = np.random.default_rng(int(torch.randint(0, 2 ** 31, (1,), generator=gen, device=gen.device)))
    boxes, _ = random_boxes(rng, k, size=9.0, dup=False)     # (inside the samples' value range: tests/core/test_bench)
    boxes, scores = boxes + 0.05, rng.permutation(k) / max(k, 1) * 0.9 + 0.05
    ins = [boxes, scores] + ([rng.integers(0, 80, k)] if len(desc.inputs) == 3 else [])
    return [torch.from_numpy(a).to(device=device, dtype=t.dtype.torch) for a, t in zip(ins, desc.inputs)]


def _tol(dt):
    return (0.0, 0.0)    # indices: exact


_SPECS: dict[str, OpSpec] = {}
for _op in NMS_OPS:
    _bat = _op == "batched_nms"
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="image", category="image", arg_names=("boxes", "scores", "idxs")[:3 if _bat else 2],
        check=_check(_op), dtypes=FLOAT_TYPES, attrs=(Attr("iou_threshold", "float", REQUIRED),),
        torch_name=f"torchvision.ops.{_op}", dropin=_dropin(_op), samples=_samples(_op), errors=_errors(_op), tol=_tol, cost=_cost,
        # detection post-processing: 5000 candidate boxes (a Faster R-CNN RPN's pre-NMS top-k per image)
        workloads=(Workload(f"{_op}-k5000-t0.7-f32", ((5000, 4), (5000,)) + ((((5000,), DType.i64),) if _bat else ()),
                            DType.f32, {"iou_threshold": 0.7}),),
        doc=f"torchvision.ops.{_op} -> (keep int64 [K]: kept indices by decreasing score, then -1; count int64): "
            "IoU > iou_threshold suppresses" + (" within a category" if _bat else "") + "."))
    set_bench_inputs(_op, _bench_inputs)
