"""cuDNN's fused flash attention (forward and backward) for ``sdpa`` / ``sdpa_backward``, through NVIDIA's
``nvidia-cudnn-frontend`` Python package (module ``cudnn``; written against frontend 1.32.0 and libcudnn 9).

Route.  One cuDNN graph per problem: ``pygraph.sdpa`` (generate_stats=True: the op's lse is cuDNN's natural-log
"stats", max + ln(sum exp) of the scaled, biased scores) or ``pygraph.sdpa_backward`` (dQ, dK, dV from q, k, v, o,
dO, stats), built (validate -> build_operation_graph -> create_execution_plans([A, FALLBACK]) -> check_support ->
build_plans, ``graph.build``) once per key and executed with a per-(thread, device) cuDNN handle bound to torch's
current stream.  Building costs ~0.4 s per shape: the graphs are cached per process (``GraphKey``: op, dtype, every
dim, the strides of every operand, scale, the diagonal band, the bias's dims / strides, the device's compute
capability), the canonical (contiguous) one built when the plan binds, any other strides on the first call that
brings them.  Persisting: the frontend serializes a built plan (``graph.serialize(as_bytes=True)``, supported for
cuDNN's runtime-compiled engines, which the fused SDPA kernels are) and ``deserialize(handle, blob)`` restores it
on an identical GPU with the same libcudnn; setting ``BARACUDA_CUDNN_PLAN_DIR`` to a directory stores every built
graph there (file name: a hash of the key, the GPU's name, libcudnn's and the frontend's versions) and loads it in
later processes instead of building.  A blob that fails to load is rebuilt and rewritten.

Semantics mapped (q / k / v are given to cuDNN as [B, H, S, D] dims with the tensors' own strides, so "bshd" is the
same graph with permuted strides: no copies unless a stride breaks cuDNN's alignment rules, see ``_ready``):
* scale -> attn_scale; GQA / MQA: Hkv heads in k / v dims (cuDNN maps query head h to h // (Hq // Hkv), as the op).
* causal / window -> cuDNN's diagonal band: alignment TOP_LEFT (causal "top_left", or Sq == Sk) else BOTTOM_RIGHT
  (diagonal at j = i + Sk - Sq, the op's off), right bound = window_right (0 for causal, min with window_right),
  left bound = window_left + 1 (cuDNN masks keys at or before i - left_bound; the op allows j >= i - window_left).
* a float mask of q's dtype -> cuDNN's additive bias [B|1, Hq|1, Sq, Sk] (used in place when its strides are
  cuDNN's kind, else materialized: a mask broadcast over query rows or keys is expanded to [.., Sq, Sk]); a bool
  mask -> the bias where(mask, 0, -inf) in q's dtype (exact: adding 0 or -inf is what excluding does), one
  materializing pass over [B|1, Hq|1, Sq, Sk].  A mask can exclude a whole row (with the band too), which the op
  defines as out = 0, lse = -inf; cuDNN's result there is not specified, so the forward zeroes those rows after
  the call (the rows are found from the bias and the band, not from cuDNN's output: NaN inputs keep NaN), and the
  backward gives cuDNN lse = +inf for a row the forward marked -inf, so exp(s - lse) = 0 there: no NaN reaches dK
  / dV and the row's dQ is 0, the op's gradient (cudnn-frontend issue 262: with lse = -inf the backward makes NaN).
Refused (``supports``, each with its reason): dropout, softcap, ALiBi, block masks, grad_lse, f32 / f64 inputs,
head dims cuDNN's Hopper kernels reject, an f32 mask, no keys, a causal / window band leaving a row without keys,
and the band cases cuDNN itself rejects (its rules as the frontend's _sdpa_validate.py states them): a bottom-right
band with a right bound (causal "bottom_right", or a window_right with Sq != Sk) when Sq > Sk or with a mask, a
window_left when Sq > Sk, and the backward of Sq = Sk = 1.
Arch: SM90 only (the head-dim limits of cuDNN's Ampere / Ada / Blackwell backward kernels differ, and SM90 is what
this is tested on).

Precision: QK^T and PV on tensor cores in the input type with f32 accumulation, the softmax in f32, P rounded to
the input type before PV (the flash attention recipe, like the Triton kernels).  The forward is deterministic; the
backward accumulates dQ with float atomics (cuDNN's fast algorithm, what torch's cuDNN SDPA runs: deterministic=False
in the plan's precision) unless PlanPreference(require_deterministic=True) (or ``DETERMINISTIC_BWD``) selects
use_deterministic_algorithm (dQ without atomics, slower); bit_stable=False: cuDNN's heuristics pick the engine per
library version and GPU.

Host path per call: a stride tuple per operand (the graph key), a dict lookup, the handle's stream check
(``cudnn.set_stream`` is skipped by the frontend when unchanged), ``graph.execute`` in the frontend's ordered form
(cudnn_graph.py, shared with the convolution backend).
Temporaries (a bool mask's bias, the row fix-up, the backward's lse with +inf) are torch allocations: a plan with a
mask allocates inside ``run`` (still capturable by torch's CUDA graphs, which pool allocations).

Unverified (written against the frontend's documentation and its Python sources; no GPU here): every GPU step
(build, execute, the stream binding, serialization round trip), cuDNN's acceptance of BOTTOM_RIGHT with only a
left bound and of a bias with stride-0 batch / head dims, and the +inf lse trick of the backward.
tests/attention/test_sdpa_cudnn.py checks all of it on a GPU with the frontend installed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Arch, Backend, MathPrecision, PrecisionGuarantee
from .cudnn_graph import PLAN_DIR_ENV, Built, GraphCache, execute
from .cudnn_graph import compute_capability as _cc
from .cudnn_graph import current_device as _current_device

__all__ = ["PRIORITY", "DETERMINISTIC_BWD", "PLAN_DIR_ENV", "Problem", "problem", "band", "supports", "GraphKey",
           "graph_key", "cache_info"]

# The plan's rank among the sdpa backends (the Triton kernels register 10 on CUDA): below Triton until the lead's
# above the Triton kernels (10): on the H100 cuDNN was faster on every bf16 shape of the table, forward and
# backward (bench/results/2026-11-27-h100/attention.md); Triton serves what cuDNN refuses.  One number to flip.
PRIORITY = 20.0
# True: sdpa_backward always built with use_deterministic_algorithm (dQ without float atomics); False: only under
# PlanPreference(require_deterministic=True)
DETERMINISTIC_BWD = False
_CACHE_SIZE = 256          # built graphs kept per process (each holds its compiled plan)

# uids of the graph tensors (fixed, so a deserialized plan's variant pack needs no tensor objects)
_Q, _K, _V, _O, _STATS, _BIAS, _DO, _DQ, _DK, _DV = range(1, 11)

_OPS = ("sdpa", "sdpa_backward")
_MAX_D = 256


# -- the problem (pure: no GPU, no frontend) ----------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """What a cuDNN graph of ``desc`` depends on besides strides."""

    op: str
    dtype: DType
    layout: str
    B: int
    Hq: int
    Hkv: int
    Sq: int
    Sk: int
    D: int
    Dv: int
    scale: float
    causal: str
    window_left: int | None
    window_right: int | None
    mask: object            # None, or the mask's TensorSpec
    softcap: float
    dropout_p: float
    has_alibi: bool
    block_size: int | None
    has_grad_lse: bool
    deterministic: bool = True   # the backward's dQ without float atomics (PlanPreference.require_deterministic)


def problem(desc, pref=None) -> Problem:
    from ...ops.attention_sdpa import sdpa_dims

    a = desc.attr
    layout = a("layout")
    lead = 1 if desc.op == "sdpa_backward" else 0          # sdpa_backward: grad_out first
    q, k, v = (t.shape for t in desc.inputs[lead:lead + 3])
    B, Hq, Hkv, Sq, Sk, D, Dv = sdpa_dims(layout, q, k, v)
    extra = lead + 3 + 2 * lead                             # the backward's out and lse follow v
    mask = desc.inputs[extra] if a("has_mask") else None
    scale = a("scale")
    return Problem(desc.op, desc.inputs[lead].dtype, layout, B, Hq, Hkv, Sq, Sk, D, Dv,
                   float(scale) if scale is not None else 1.0 / math.sqrt(D), a("causal"), a("window_left"),
                   a("window_right"), mask, float(a("softcap")), float(a("dropout_p")), bool(a("has_alibi")),
                   a("block_size"), bool(desc.attr_dict.get("has_grad_lse", False)),
                   desc.op != "sdpa_backward" or _deterministic_bwd(pref))


def _deterministic_bwd(pref) -> bool:
    """The backward's algorithm: cuDNN's deterministic one (dQ reduced without atomics, slower) when the preference
    requires determinism or DETERMINISTIC_BWD forces it, else its faster atomic dQ accumulation."""
    return DETERMINISTIC_BWD or (pref is not None and pref.require_deterministic)


def band(p: Problem) -> tuple[str | None, int | None, int | None]:
    """(diagonal alignment "top_left" | "bottom_right" | None, left bound, right bound) of cuDNN's diagonal band for
    the op's causal / window attributes (None: no band / that side unbounded)."""
    wl, wr = p.window_left, p.window_right
    if p.causal != "none":
        wr = 0 if wr is None else min(wr, 0)
    if wl is None and wr is None:
        return None, None, None
    align = "top_left" if p.causal == "top_left" or p.Sq == p.Sk else "bottom_right"
    return align, (None if wl is None else wl + 1), wr


def _band_empty_rows(p: Problem) -> str | None:
    """The query rows the causal / window band leaves without any key, described; None when every row has one."""
    align, left, right = band(p)
    if align is None:
        return None
    off = 0 if align == "top_left" else p.Sk - p.Sq
    top = 0 if right is None else max(0, min(p.Sq, -(off + right)))    # rows i with i + off + right < 0
    # rows i with i + off - (left - 1) > Sk - 1
    bottom = 0 if left is None else max(0, min(p.Sq, p.Sq - (p.Sk + left - 1 - off)))
    if top or bottom:
        return (f"the {p.causal} causal / window band (Sq={p.Sq}, Sk={p.Sk}, window_left={p.window_left}, "
                f"window_right={p.window_right}) leaves {top + bottom} query row(s) without any key; the op defines "
                "them as out = 0, lse = -inf, cuDNN's kernels leave them unspecified (NaN in the backward: "
                "cudnn-frontend issue 262)")
    return None


_HALF = (DType.f16, DType.bf16)
# (not built: cuDNN's FP8 graph takes descale and scale tensors for q, k, v, s, o, dO, dP and returns amax / FP8 out;
# the op's contract is bf16 / f16 out with no output quantization, served by the Triton kernels)
_FP8_WHY = ("FP8 q / k / v: cuDNN's FP8 SDPA has its own scaling contract (descale / scale tensors per tensor, FP8 "
            "output, amax outputs; per-head descales not expressible), not the op's dequantize-then-attend with a "
            "bf16 / f16 output")


def supports(desc) -> str | None:
    """None, or the exact reason cuDNN (or the op's semantics through cuDNN) cannot serve ``desc``."""
    p = problem(desc)
    if p.dtype == DType.f8e4m3:
        return _FP8_WHY
    if p.dtype not in _HALF:
        return (f"cuDNN's SDPA computes f16 / bf16 inputs only, not {p.dtype} (the f32 in this backend's dtypes is "
                "the lse operand's and a mask's)")
    if p.dropout_p > 0:
        return ("dropout: cuDNN draws its keep mask from its own Philox stream, not the op's tl.rand(seed, offset + "
                "((b * Hq + h) * Sq + i) * Sk + j), so its kept set would differ from the reference's and from a "
                "backward run by another backend")
    if p.softcap > 0:
        return ("softcap: cuDNN has no logit-softcap attribute (only a score_mod pointwise callback with its own "
                "score_mod_bprop, not built here)")
    if p.has_alibi:
        return ("ALiBi: cuDNN's use_alibi_mask derives the slopes from the head count (no slopes operand) and needs a "
                "causal band; the op takes the slopes as data")
    if p.block_size is not None:
        return ("block_mask: cuDNN's block mask is a bit-packed uint8 tensor of fixed 128 x 128 tiles, UNIFIED "
                "implementation and forward only; the op's is bool blocks of block_size")
    if p.has_grad_lse:
        return "grad_lse: cuDNN's sdpa_backward has no input for the lse output's gradient"
    if p.D % 8 or p.Dv % 8:
        return f"cuDNN needs head dims that are multiples of 8 for f16 / bf16 (D={p.D}, Dv={p.Dv})"
    if max(p.D, p.Dv) > _MAX_D:
        return f"cuDNN's SM90 kernels take head dims up to {_MAX_D} (D={p.D}, Dv={p.Dv})"
    if p.D != p.Dv and (p.D, p.Dv) != (192, 128):
        return f"cuDNN needs D == Dv except D=192, Dv=128 (D={p.D}, Dv={p.Dv})"
    if p.Sk == 0:
        return "no keys (Sk = 0): every row is out = 0, lse = -inf, which cuDNN does not produce"
    if p.mask is not None and p.mask.dtype not in (DType.bool, p.dtype):
        return (f"a {p.mask.dtype} mask with {p.dtype} q: cuDNN adds a bias in q's dtype, and rounding the mask to it "
                "would change the scores")
    why = _band_empty_rows(p)
    if why:
        return why
    return _cudnn_band_rules(p)


def _cudnn_band_rules(p: Problem) -> str | None:
    """cuDNN's own limits on the diagonal band (the frontend's _sdpa_validate.py states them as the C++ checks)."""
    align, left, right = band(p)
    if align == "bottom_right" and right is not None:
        if p.Sq > p.Sk:
            return (f"cuDNN's bottom-right band (the {p.causal} causal / window_right diagonal at j = i + Sk - Sq) does "
                    f"not support Sq > Sk (Sq={p.Sq}, Sk={p.Sk})")
        if p.mask is not None:
            return ("cuDNN's bottom-right band (diagonal at j = i + Sk - Sq, Sq != Sk) is only supported without a "
                    "bias, and a mask reaches cuDNN as its bias")
    if left is not None and p.Sq > p.Sk:
        return f"cuDNN's sliding window (window_left) needs Sq <= Sk (Sq={p.Sq}, Sk={p.Sk})"
    if p.op == "sdpa_backward" and p.Sq == 1 and p.Sk == 1:
        return "cuDNN's backward does not support Sq = Sk = 1"
    return None


# -- the graph key -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphKey:
    """Everything a built cuDNN graph depends on: ``problem`` fields that reach cuDNN and each operand's strides."""

    op: str
    dtype: DType
    dims: tuple              # (B, Hq, Hkv, Sq, Sk, D, Dv)
    scale: float
    band: tuple              # band(p)
    bias_dims: tuple | None  # (mb, mh, Sq, Sk)
    strides: tuple           # per graph tensor, in _uids(op, has_bias) order, [B, H, S, D]-ordered strides
    deterministic: bool
    cc: tuple                # the device's compute capability


def _uids(op: str, has_bias: bool) -> tuple:
    ins = (_Q, _K, _V) if op == "sdpa" else (_Q, _K, _V, _O, _DO, _STATS)
    outs = (_O, _STATS) if op == "sdpa" else (_DQ, _DK, _DV)
    return ins + ((_BIAS,) if has_bias else ()) + outs


def graph_key(p: Problem, strides: tuple, bias_dims: tuple | None, cc: tuple = (9, 0)) -> GraphKey:
    return GraphKey(p.op, p.dtype, (p.B, p.Hq, p.Hkv, p.Sq, p.Sk, p.D, p.Dv), p.scale, band(p), bias_dims,
                    tuple(tuple(int(s) for s in t) for t in strides),
                    p.deterministic, tuple(cc))


def _bias_dims(p: Problem) -> tuple | None:
    """(mb, mh, Sq, Sk): the mask's batch / head extents (1 or full, torch's broadcasting) and the full score plane."""
    if p.mask is None:
        return None
    shape = (1,) * (4 - len(p.mask.shape)) + tuple(p.mask.shape)
    return (shape[0], shape[1], p.Sq, p.Sk)


def _contig_strides(dims) -> tuple:
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _bhsd(p: Problem, shape_bhsd, layout=None) -> tuple:
    """[B, H, S, D]-ordered strides of a contiguous tensor in ``layout`` (default p's) with [B, H, S, D] dims."""
    B, H, S, D = shape_bhsd
    if (layout or p.layout) == "bhsd":
        return _contig_strides((B, H, S, D))
    sb, ss, sh, sd = _contig_strides((B, S, H, D))
    return (sb, sh, ss, sd)


def canonical_strides(p: Problem) -> tuple:
    """The strides of every graph tensor when the operands are contiguous (the graph built at bind time)."""
    q, k = (p.B, p.Hq, p.Sq, p.D), (p.B, p.Hkv, p.Sk, p.D)
    v, o = (p.B, p.Hkv, p.Sk, p.Dv), (p.B, p.Hq, p.Sq, p.Dv)
    stats = _contig_strides((p.B, p.Hq, p.Sq)) + (1,)
    ins = (_bhsd(p, q), _bhsd(p, k), _bhsd(p, v))
    if p.op == "sdpa_backward":
        ins += (_bhsd(p, o), _bhsd(p, o), stats)
    bd = _bias_dims(p)
    bias = (_contig_strides(bd),) if bd is not None else ()
    outs = (_bhsd(p, o), stats) if p.op == "sdpa" else (_bhsd(p, q), _bhsd(p, k), _bhsd(p, v))
    return ins + bias + outs


# -- building (GPU): the shared graph cache, handles and execute (cudnn_graph.py) -------------------------------
def _graph_dims(key: GraphKey) -> dict:
    B, Hq, Hkv, Sq, Sk, D, Dv = key.dims
    dims = {_Q: (B, Hq, Sq, D), _K: (B, Hkv, Sk, D), _V: (B, Hkv, Sk, Dv), _O: (B, Hq, Sq, Dv),
            _DO: (B, Hq, Sq, Dv), _STATS: (B, Hq, Sq, 1), _DQ: (B, Hq, Sq, D), _DK: (B, Hkv, Sk, D),
            _DV: (B, Hkv, Sk, Dv)}
    if key.bias_dims is not None:
        dims[_BIAS] = key.bias_dims
    return dims


def make_graph(key: GraphKey, handle=None):
    """The frontend graph of ``key`` (tensors with fixed uids, the sdpa / sdpa_backward node, outputs declared),
    not built."""
    import cudnn

    io = cudnn.data_type.HALF if key.dtype == DType.f16 else cudnn.data_type.BFLOAT16
    f32 = cudnn.data_type.FLOAT
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
    dims = _graph_dims(key)
    uids = _uids(key.op, key.bias_dims is not None)
    stride = dict(zip(uids, key.strides))
    names = {_Q: "q", _K: "k", _V: "v", _O: "o", _DO: "dO", _STATS: "stats", _BIAS: "bias"}

    def inp(uid):
        return g.tensor(dim=list(dims[uid]), stride=list(stride[uid]), data_type=f32 if uid == _STATS else io,
                        name=names[uid], uid=uid)

    align, left, right = key.band
    kw = {"attn_scale": key.scale}
    if align is not None:
        kw["diagonal_alignment"] = (cudnn.diagonal_alignment.TOP_LEFT if align == "top_left"
                                    else cudnn.diagonal_alignment.BOTTOM_RIGHT)
        if left is not None:
            kw["diagonal_band_left_bound"] = left
        if right is not None:
            kw["diagonal_band_right_bound"] = right
    if key.bias_dims is not None:
        kw["bias"] = inp(_BIAS)
    q, k, v = inp(_Q), inp(_K), inp(_V)
    if key.op == "sdpa":
        outs = g.sdpa(q=q, k=k, v=v, generate_stats=True, name="sdpa", **kw)
        out_uids = (_O, _STATS)
    else:
        outs = g.sdpa_backward(q=q, k=k, v=v, o=inp(_O), dO=inp(_DO), stats=inp(_STATS),
                               use_deterministic_algorithm=key.deterministic, name="sdpa_backward", **kw)
        out_uids = (_DQ, _DK, _DV)
    for t, uid in zip(outs, out_uids):
        t.set_output(True).set_dim(list(dims[uid])).set_stride(list(stride[uid])).set_uid(uid)
        t.set_data_type(f32 if uid == _STATS else io)
    return g


_CACHE = GraphCache("sdpa", make_graph, _CACHE_SIZE)
_GRAPHS = _CACHE.graphs
cache_info = _CACHE.info


def _built(key: GraphKey, device_index: int) -> Built:
    """The built graph of ``key`` on ``device_index`` (process cache, then the plan directory, then a build)."""
    return _CACHE.get(key, device_index, key.op)


# -- operands -----------------------------------------------------------------------------------------------------
def _aligned(t) -> bool:
    """cuDNN reads ``t`` in place: unit stride on the last dim, the others (of dims > 1) multiples of 8 elements
    (16 bytes of f16 / bf16: the TMA rule), a 16-byte aligned pointer."""
    st = t.stride()
    return st[-1] == 1 and t.data_ptr() % 16 == 0 and \
        all(s % 8 == 0 or n == 1 for s, n in zip(st[:-1], t.shape[:-1]))


def _ready(t):
    """``t``, or a copy cuDNN can read (slower, never wrong: torch's .contiguous())."""
    return t if _aligned(t) else t.contiguous()


def _bhsd_view(t, layout: str):
    """The [B, H, S, D] view of a "bshd" tensor (no copy)."""
    return t if layout == "bhsd" else t.permute(0, 2, 1, 3)


def _padded_empty(dims, dtype, device):
    """An empty [.., Sk] tensor whose row stride is Sk rounded up to 8 elements (cuDNN's 16-byte stride rule)."""
    import torch

    *lead, sk = dims
    return torch.empty((*lead, -(-sk // 8) * 8), dtype=dtype, device=device)[..., :sk]


def bias_strides(bias_dims: tuple) -> tuple:
    """The strides of the bias this backend materializes (rows padded to 8 elements)."""
    mb, mh, sq, sk = bias_dims
    return _contig_strides((mb, mh, sq, -(-sk // 8) * 8))


def _bias(mask, p: Problem, dims: tuple, dtype):
    """The additive bias cuDNN reads for ``mask``: a float mask of q's dtype in place where it already spans
    [.., Sq, Sk] with cuDNN's strides, else materialized; a bool mask as where(mask, 0, -inf) (one pass)."""
    import torch

    m = mask[(None,) * (4 - mask.dim())]
    if mask.dtype != torch.bool and tuple(m.shape) == dims and _aligned(m):
        return m
    out = _padded_empty(dims, dtype, mask.device)
    e = m.expand(dims)
    if mask.dtype == torch.bool:
        torch.where(e, torch.zeros((), dtype=dtype, device=mask.device),
                    torch.full((), float("-inf"), dtype=dtype, device=mask.device), out=out)
    else:
        out.copy_(e)
    return out


_GEOM: dict = {}


def _band_keep(p: Problem, device):
    """[Sq, Sk] bool: the keys the causal / window band allows each query row (None: no band), kept per shape."""
    align, left, right = band(p)
    if align is None:
        return None
    key = (p.Sq, p.Sk, align, left, right, str(device))
    keep = _GEOM.get(key)
    if keep is None:
        import torch

        off = 0 if align == "top_left" else p.Sk - p.Sq
        i = torch.arange(p.Sq, device=device)[:, None] + off
        j = torch.arange(p.Sk, device=device)[None, :]
        keep = torch.ones((p.Sq, p.Sk), dtype=torch.bool, device=device)
        if left is not None:
            keep &= j > i - left
        if right is not None:
            keep &= j <= i + right
        if len(_GEOM) > 64:
            _GEOM.clear()
        _GEOM[key] = keep
    return keep


def _empty_rows(bias, p: Problem):
    """[mb, mh, Sq] bool: the query rows the mask (with the band) leaves without any key.  A NaN in the mask
    keeps its row (NaN != -inf): the reference's NaN stays."""
    import torch

    keep = bias != float("-inf")
    band_keep = _band_keep(p, bias.device)
    if band_keep is not None:
        keep &= band_keep
    return torch.logical_not(keep.any(-1))


# -- the bound runs -----------------------------------------------------------------------------------------------
def _execute(p: Problem, tensors: dict, bias_dims, device_index: int, ws):
    """Find (or build) the graph of these operands' strides and run it on torch's current stream."""
    uids = _uids(p.op, bias_dims is not None)
    key = graph_key(p, tuple(tensors[u].stride() for u in uids), bias_dims, _cc(device_index))
    execute(_built(key, device_index), tensors, ws, device_index, tensors[_Q])


def _outputs(views):
    """(the tensors cuDNN writes, the copies back to do after): an output view cuDNN cannot write in place gets a
    contiguous stand-in."""
    write, back = [], []
    for v in views:
        if _aligned(v) or v.dim() == 4 and v.shape[-1] == 1 and v.is_contiguous():
            write.append(v)
        else:
            t = v.contiguous()
            write.append(t)
            back.append((v, t))
    return write, back


def _bind(desc, pref=None):
    p = problem(desc, pref)
    bias_dims = _bias_dims(p)
    lay = p.layout
    dev = _current_device()
    # the canonical graph (contiguous operands): its build is paid here, at plan time
    _built(graph_key(p, _canonical_with_bias(p), bias_dims, _cc(dev)), dev)

    if p.op == "sdpa":
        def run(d, inputs, outputs, ws):
            q = inputs[0]
            di = q.get_device()
            out, lse = outputs
            o4, s4 = _bhsd_view(out, lay), lse.unsqueeze(-1)
            (o_w, s_w), back = _outputs((o4, s4))
            t = {_Q: _ready(_bhsd_view(q, lay)), _K: _ready(_bhsd_view(inputs[1], lay)),
                 _V: _ready(_bhsd_view(inputs[2], lay)), _O: o_w, _STATS: s_w}
            if bias_dims is not None:
                t[_BIAS] = _bias(inputs[3], p, bias_dims, q.dtype)
            _execute(p, t, bias_dims, di, ws)
            for v, tmp in back:
                v.copy_(tmp)
            if bias_dims is not None:      # rows the mask leaves without a key: out = 0, lse = -inf (the op's)
                empty = _empty_rows(t[_BIAS], p)
                lse.masked_fill_(empty, float("-inf"))
                o4.masked_fill_(empty.unsqueeze(-1), 0.0)
        return run

    def run(d, inputs, outputs, ws):
        g, q, k, v, out, lse = inputs[:6]
        di = q.get_device()
        views = tuple(_bhsd_view(x, lay) for x in outputs)
        writes, back = _outputs(views)
        if bias_dims is not None:          # a row the forward left without keys: lse = +inf makes its P exactly 0
            lse = _neginf_to_inf(lse)
        t = {_Q: _ready(_bhsd_view(q, lay)), _K: _ready(_bhsd_view(k, lay)), _V: _ready(_bhsd_view(v, lay)),
             _O: _ready(_bhsd_view(out, lay)), _DO: _ready(_bhsd_view(g, lay)), _STATS: lse.contiguous().unsqueeze(-1),
             _DQ: writes[0], _DK: writes[1], _DV: writes[2]}
        if bias_dims is not None:
            t[_BIAS] = _bias(inputs[6], p, bias_dims, q.dtype)
        _execute(p, t, bias_dims, di, ws)
        for view, tmp in back:
            view.copy_(tmp)
    return run


def _neginf_to_inf(lse):
    """lse with -inf replaced by +inf (a new tensor)."""
    import torch

    return torch.where(lse == float("-inf"), torch.full((), float("inf"), dtype=lse.dtype, device=lse.device), lse)


def _canonical_with_bias(p: Problem) -> tuple:
    """canonical_strides with the materialized bias's padded strides."""
    st = list(canonical_strides(p))
    bd = _bias_dims(p)
    if bd is not None:
        st[_uids(p.op, True).index(_BIAS)] = bias_strides(bd)
    return tuple(st)


def _workspace(desc) -> int:
    """cuDNN's workspace bytes for the canonical graph (built here if the plan has not bound yet)."""
    if supports(desc) is not None:
        return 0
    p = problem(desc)
    dev = _current_device()
    return _built(graph_key(p, _canonical_with_bias(p), _bias_dims(p), _cc(dev)), dev).workspace


def _precision(desc, pref=None) -> PrecisionGuarantee:
    math_ = MathPrecision.BF16 if desc.dtype == DType.bf16 else MathPrecision.F16
    return PrecisionGuarantee(math_, DType.f32, bit_stable=False, deterministic=problem(desc, pref).deterministic)


def _route(desc, pref=None) -> str:
    p = problem(desc, pref)
    r = "cudnn:sdpa_fprop(flash)" if p.op == "sdpa" else \
        f"cudnn:sdpa_bprop(flash, {'deterministic' if p.deterministic else 'atomic dQ'})"
    align, left, right = band(p)
    if align is not None:
        r += f"+band({align}, left={left}, right={right})"
    if p.mask is not None:
        r += "+bias(where(mask, 0, -inf))" if p.mask.dtype == DType.bool else "+bias(mask)"
    return r


def _run_default(desc, inputs, outputs, ws):
    """Impl.run for callers that bypass Plan."""
    _bind(desc, None)(desc, inputs, outputs, ws)


_DTYPES_NOTE = ("cuDNN's SDPA computes f16 / bf16 q / k / v (f32 and f64 run on the Triton and reference backends; "
                "f8e4m3 on Triton: " + _FP8_WHY + ")")

for _op in _OPS:
    register(Impl(op=_op, backend=Backend.CUDNN, run=_run_default, bind=_bind, precision=_precision,
                  dtypes=frozenset({DType.f16, DType.bf16}), dtypes_note=_DTYPES_NOTE,
                  devices=frozenset({"cuda"}), archs=frozenset({Arch.SM90}), supports=supports,
                  priority=lambda desc, dev: PRIORITY, route=_route, workspace=_workspace,
                  layout=lambda desc: desc.attr("layout"), array_api="torch"))
