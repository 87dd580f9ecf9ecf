"""cuDNN convolutions for ``convolution`` / ``convolution_backward`` through NVIDIA's ``nvidia-cudnn-frontend`` graph
API (module ``cudnn``), beside the Triton implicit-GEMM kernels (backends/triton/conv): the plan takes cuDNN where it
builds a graph for the problem, Triton where cuDNN refuses (each refusal says why in ``explain()``).

The op's image / response vocabulary (ops/conv.py) maps onto cuDNN's three convolution nodes one to one, in both
directions:
    corr    (response from image and weight)  -> conv_fprop(image, weight)         conv forward, transposed dgrad
    scatter (image from response and weight)  -> conv_dgrad(loss=response, filter) conv dgrad, transposed forward
    wcorr   (weight from image and response)  -> conv_wgrad(image, loss=response) the weight gradient (both)
Tensors reach cuDNN as their logical (N, C, *spatial) dims with their own strides, so a channels-last input is read
in place (NHWC is cuDNN's native layout) and a channels-last output (the op's ``channels_last``: storage (N, *spatial,
C)) is written in place; 1-d problems get a spatial dim of size 1 (a view).  Groups are cuDNN's own (the weight's
input channels against the image's).  Padding: the low side is the op's; the high side follows from the sizes (the
'same' padding of an even kernel is asymmetric).  The forward's bias is fused as a bias node after conv_fprop; a
transposed convolution's bias (after a dgrad node) is refused here and runs on Triton.

One graph per (product, dtype, dims, strides, padding, stride, dilation, bias, compute capability), cached per
process and optionally persisted (backends/nvidia/cudnn_graph.py, ``BARACUDA_CUDNN_PLAN_DIR``).  The canonical graph
(the op's contiguous / channels-last strides) is built when the plan is selected, so a problem cuDNN refuses is refused
at selection and the next backend serves it; other strides build their graph on first use.

Precision: bf16 / f16 inputs on tensor cores with f32 accumulation (cuDNN's heuristics choose the engine:
bit_stable=False).  Deterministic: engines with the NONDETERMINISTIC numerical note (split-K weight gradients with
atomics) are deselected under PlanPreference(require_deterministic=True).  f32 / f64 are refused (cuDNN's f32 engines
run TF32 tensor cores unless deselected: not wired; Triton serves them).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..._core.dtypes import DType
from ..._core.errors import UnsupportedError
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.conv import geometry_of
from .. import with_produce
from .cudnn_graph import GraphCache, execute
from .cudnn_graph import compute_capability as _cc
from .cudnn_graph import current_device as _current_device

__all__ = ["PRIORITY", "supports", "ConvKey", "cache_info"]

# rank among the convolution backends (the Triton kernels register 10 on CUDA)
PRIORITY = 20.0
_HALF = (DType.f16, DType.bf16)
_I, _R, _W, _B = 1, 2, 3, 4      # uids: image, response, weight, bias


@dataclass(frozen=True)
class ConvKey:
    op: str                  # the baracuda op (for errors)
    kind: str                # "fprop" | "dgrad" | "wgrad"
    dtype: DType
    dims: tuple              # (image, response, weight) dims, 4-d or 5-d
    strides: tuple           # (image, response, weight) strides
    pre: tuple
    post: tuple
    stride: tuple
    dilation: tuple
    bias: bool
    deterministic: bool
    cc: tuple


def _make(key: ConvKey, handle=None):
    import cudnn

    io = cudnn.data_type.HALF if key.dtype == DType.f16 else cudnn.data_type.BFLOAT16
    f32 = cudnn.data_type.FLOAT
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
    (di, dr, dw), (si, sr, sw) = key.dims, key.strides
    geo = dict(pre_padding=list(key.pre), post_padding=list(key.post), stride=list(key.stride),
               dilation=list(key.dilation), compute_data_type=f32)

    def t(uid, dims, strides, name):
        return g.tensor(dim=list(dims), stride=list(strides), data_type=io, name=name, uid=uid)

    if key.kind == "fprop":
        y = g.conv_fprop(image=t(_I, di, si, "image"), weight=t(_W, dw, sw, "weight"), name="conv_fprop", **geo)
        if key.bias:
            y.set_data_type(f32)
            nb = len(dr) - 2
            b = g.tensor(dim=[1, dr[1]] + [1] * nb, stride=[dr[1], 1] + [1] * nb, data_type=io, name="bias", uid=_B)
            y = g.bias(input=y, bias=b, name="bias_add")
        out, dims, strides, uid = y, dr, sr, _R
    elif key.kind == "dgrad":
        out = g.conv_dgrad(loss=t(_R, dr, sr, "response"), filter=t(_W, dw, sw, "weight"), name="conv_dgrad", **geo)
        dims, strides, uid = di, si, _I
    else:
        out = g.conv_wgrad(image=t(_I, di, si, "image"), loss=t(_R, dr, sr, "response"), name="conv_wgrad", **geo)
        dims, strides, uid = dw, sw, _W
    out.set_output(True).set_dim(list(dims)).set_stride(list(strides)).set_uid(uid).set_data_type(io)
    if key.deterministic:
        note = getattr(getattr(cudnn, "numerical_note", None), "NONDETERMINISTIC", None)
        if note is not None:
            g.deselect_numeric_notes([note])
    return g


_CACHE = GraphCache("conv", _make)
cache_info = _CACHE.info


# -- the problem in cuDNN's terms -----------------------------------------------------------------------------
def _spatial(geom, nd2: int):
    """Per spatial dim of the cuDNN problem (2 for 1-d and 2-d problems, 3 for 3-d): the op's 3-padded tuples cut
    to the last ``nd2`` dims (a 1-d problem keeps one leading size-1 dim)."""
    cut = slice(3 - nd2, 3)
    span = tuple(d * (k - 1) + 1 for d, k in zip(geom.dilation, geom.kernel))
    pre = geom.pad
    # the high side: what makes cuDNN's floor((image + pre + post - span) / stride) + 1 the response size; never
    # below the low side (torch pads symmetrically; a floor that drops a partial window needs no more)
    post = tuple(max(lo, (r - 1) * s + sp - i - lo)
                 for lo, r, s, sp, i in zip(pre, geom.resp, geom.stride, span, geom.image))
    return pre[cut], post[cut], geom.stride[cut], geom.dilation[cut]


def _nd2(geom) -> int:
    return 3 if geom.nd == 3 else 2


def _view(t, nd2: int, channels_last_storage: bool = False):
    """``t`` as cuDNN's (N, C, *spatial) view with ``nd2`` spatial dims: a channels-last storage (N, *spatial, C)
    moved to its logical order, a 1-d tensor with a size-1 spatial dim inserted (views, no copies)."""
    if channels_last_storage:
        t = t.movedim(-1, 1)
    while t.dim() < nd2 + 2:
        t = t.unsqueeze(2)
    return t


def _dims(geom, nd2: int):
    g, n = geom.groups, geom.n
    cut = slice(3 - nd2, 3)
    image = (n, g * geom.ci) + geom.image[cut]
    resp = (n, g * geom.cr) + geom.resp[cut]
    weight = (g * geom.cr, geom.ci) + geom.kernel[cut]
    return image, resp, weight


def _contig(dims, channels_last: bool) -> tuple:
    order = [0] + list(range(2, len(dims))) + [1] if channels_last else list(range(len(dims)))
    st, acc = [0] * len(dims), 1
    for ax in reversed(order):
        st[ax] = acc
        acc *= dims[ax]
    return tuple(st)


def _deterministic(pref) -> bool:
    return bool(pref is not None and pref.require_deterministic)


def _key(desc, pref, kind, strides):
    geom = geometry_of(desc)
    nd2 = _nd2(geom)
    pre, post, stride, dil = _spatial(geom, nd2)
    return ConvKey(desc.op, kind, desc.dtype, _dims(geom, nd2), strides, pre, post, stride, dil,
                   kind == "fprop" and desc.op == "convolution" and len(desc.inputs) == 3, _deterministic(pref),
                   _cc(_current_device()))


def _products(desc) -> list:
    """The cuDNN products a call runs: (kind, which output) in order."""
    tr = desc.attr("transposed")
    if desc.op == "convolution":
        return [("dgrad" if tr else "fprop", 0)]
    mask = desc.attr("output_mask")
    out, j = [], 0
    if mask[0]:     # the gradient of x: the response side of a transposed convolution, the image side otherwise
        out.append(("fprop" if tr else "dgrad", j))
        j += 1
    if mask[1]:
        out.append(("wgrad", j))
    return out


def _canonical(desc, kind) -> tuple:
    geom = geometry_of(desc)
    nd2 = _nd2(geom)
    image, resp, weight = _dims(geom, nd2)
    cl = bool(desc.attr("channels_last")) and geom.nd >= 2
    return (_contig(image, cl), _contig(resp, cl), _contig(weight, cl))   # (a channels-last model: weights too)


def supports(desc) -> str | None:
    if desc.dtype not in _HALF:
        return (f"cuDNN convolutions here take f16 / bf16, not {desc.dtype} (its f32 engines use TF32 tensor cores "
                "unless deselected, not wired; Triton serves f32 / f64)")
    if desc.op == "convolution" and desc.attr("transposed") and len(desc.inputs) == 3:
        return "a transposed convolution's bias (a bias node after conv_dgrad is not fused here; Triton serves it)"
    if any(d == 0 for t in desc.inputs for d in t.shape):
        return "a zero-size operand (cuDNN rejects zero dims)"
    for kind, _ in _products(desc):
        try:
            _CACHE.get(_key(desc, None, kind, _canonical(desc, kind)), _current_device(), desc.op)
        except Exception as e:  # noqa: BLE001  (cuDNN's refusal is the reason; Triton serves the problem)
            return str(e).splitlines()[0]
    return None


# -- the bound runs -------------------------------------------------------------------------------------------
_WRITES = {"fprop": _R, "dgrad": _I, "wgrad": _W}     # the operand each product writes


def _entry(desc, pref, kind, strides, dev) -> tuple:
    """(graph key, copy?) of a call's strides: its own graph where cuDNN builds one, else the canonical graph with
    the operands copied to and from the canonical layout (cuDNN refuses some strides the canonical graph's layout
    does not have, e.g. a weight slice whose size-1 dim carries a stride: 'wDesc.getNumElementsWithStride() !=
    wDesc.getNumElementsWithoutStride()'; the problem itself was accepted at selection)."""
    k = _key(desc, pref, kind, strides)
    try:
        _CACHE.get(k, dev, desc.op)
        return k, False
    except UnsupportedError:
        return _key(desc, pref, kind, _canonical(desc, kind)), True


def _restrided(t, strides, fill: bool):
    import torch

    out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
    if fill:
        out.copy_(t)
    return out


def _bind(desc, pref=None):
    geom = geometry_of(desc)
    nd2 = _nd2(geom)
    tr = desc.attr("transposed")
    cl = bool(desc.attr("channels_last")) and geom.nd >= 2
    prods = _products(desc)
    keys: dict = {}

    def run_one(kind, image, resp, weight, bias, dev):
        strides = (image.stride(), resp.stride(), weight.stride())
        entry = keys.get((kind, strides))     # (dgrad and wgrad of contiguous operands have the same strides)
        if entry is None:
            entry = keys[(kind, strides)] = _entry(desc, pref, kind, strides, dev)
        k, copy = entry
        t = {_I: image, _R: resp, _W: weight}
        if copy:    # strides cuDNN refused: the operands in the canonical layout, the written one copied back
            out_uid, given = _WRITES[kind], t[_WRITES[kind]]
            t = {u: _restrided(v, st, u != out_uid) for (u, v), st in zip(t.items(), k.strides)}
        if bias is not None:
            t[_B] = bias
        execute(_CACHE.get(k, dev, desc.op), t, None, dev, weight)
        if copy:
            given.copy_(t[out_uid])

    if desc.op == "convolution":
        (kind, _), = prods

        def run(d, inputs, outputs, ws):
            x, w = _view(inputs[0], nd2), _view(inputs[1], nd2)
            y = _view(outputs[0], nd2, cl)
            bias = inputs[2].contiguous() if len(inputs) == 3 else None   # (cuDNN reads it as a packed [1, C, 1..])
            image, resp = (y, x) if tr else (x, y)
            run_one(kind, image, resp, w, bias, x.get_device())
        return run

    def run(d, inputs, outputs, ws):
        g, x, w = _view(inputs[0], nd2, cl), _view(inputs[1], nd2), _view(inputs[2], nd2)
        for kind, j in prods:
            o = _view(outputs[j], nd2)
            if kind == "wgrad":
                image, resp = (g, x) if tr else (x, g)
                run_one(kind, image, resp, o, None, x.get_device())
            elif kind == "dgrad":           # dx of a convolution: the image side, from the response g
                run_one(kind, o, g, w, None, x.get_device())
            else:                           # dx of a transposed convolution: the response side, from the image g
                run_one(kind, g, o, w, None, x.get_device())
    # a drop-in call's gradients of a channels-last convolution come channels-last, as torch's: cuDNN writes NHWC
    # natively, the layer below reads them in place, and a channels-last weight's gradient needs no copy into the
    # weight's layout in autograd's accumulation (an NCHW one did, per weight per step)
    return with_produce(run, desc, lambda xs: True) if cl else run


def _run_default(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


def _precision(desc, pref=None) -> PrecisionGuarantee:
    math_ = MathPrecision.BF16 if desc.dtype == DType.bf16 else MathPrecision.F16
    return PrecisionGuarantee(math_, DType.f32, bit_stable=False, deterministic=_deterministic(pref))


def _route(desc, pref=None) -> str:
    names = {"fprop": "conv_fprop", "dgrad": "conv_dgrad", "wgrad": "conv_wgrad"}
    r = "cudnn:" + "+".join(names[k] for k, _ in _products(desc))
    if desc.op == "convolution" and len(desc.inputs) == 3:
        r += "+bias"
    return r


_NOTE = "cuDNN convolutions take f16 / bf16 here (f32 and f64 run on Triton: TF32 exclusion not wired)"
for _op in ("convolution", "convolution_backward"):
    register(Impl(op=_op, backend=Backend.CUDNN, run=_run_default, bind=_bind, precision=_precision,
                  dtypes=frozenset(_HALF), dtypes_note=_NOTE, devices=frozenset({"cuda"}), supports=supports,
                  priority=lambda desc, dev: PRIORITY, route=_route, array_api="torch"))
