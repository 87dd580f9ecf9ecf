"""Pooling (issue 18, item 2): max_pool1d/2d/3d, avg_pool1d/2d/3d and the two fused backward ops every pooling
family shares; the window geometry (pure Python, plus the NumPy window tables the reference and the samples use).

max_pool{n}d(x [N, C, *S] or [C, *S]; kernel_size, stride (default: kernel_size), padding, dilation, ceil_mode)
    -> (y, indices int64).  torch's semantics exactly: windows start at o * stride - padding, step dilation,
    padded positions never win (as -inf); a NaN in a window wins (the last NaN in window order), ties go to the
    first maximum; indices are flat offsets within each (n, c) plane of the input (torch's).  The drop-in returns y,
    or (y, indices) with return_indices=True; F.max_pool{n}d_with_indices and torch.max_pool{n}d are its twins.
avg_pool{n}d(x; kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) -> y.  torch's
    divisor: divisor_override, else the window clipped to the padded input (count_include_pad) or to the input.
max_pool_backward(grad, x, indices; nd, window, kernel_size, stride, padding, dilation) -> dx
    gather form (deterministic, no atomics): each input element sums the gradients of the windows containing it
    whose index names it.  window='sliding' (max_pool) or 'adaptive' (adaptive_max_pool: torch's windows).
avg_pool_backward(grad, x; nd, window, kernel_size, stride, padding, count_include_pad, divisor_override) -> dx
    the adjoint of the window average, gather form; window='adaptive' for adaptive_avg_pool.

One N-d design serves 1/2/3-d: missing spatial dims are size 1; any strides (channels-last is read in place and
the drop-in's output takes the input's memory format, as torch's).  Geometry errors are torch's checks (kernel,
stride, dilation positive; padding at most half the kernel; a computed output size below 1; an empty non-batch
dimension), named by op and argument.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED as REQ, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import check_nonneg

__all__ = ["WINDOW_POOL_OPS", "UNPOOL_OPS", "POOL_BACKWARD_OPS", "MAX_POOL_TYPES", "nd_ints", "pool_out_size", "split_batch", "check_pool_input", "window_table",
           "same_shape", "Window", "window_of", "frac_sample_index", "POOL_SPECS"]

# torch's CUDA max_pool dispatches every real type; avg / adaptive / fractional floats only
# the family's op names, for the backends' registrations: every windowed pooling forward (one body each backend),
# max_unpool, and the two gather-form backward ops
WINDOW_POOL_OPS = tuple(f"{op}{nd}d" for nd in (1, 2, 3) for op in ("max_pool", "avg_pool", "adaptive_avg_pool",
                                                                     "adaptive_max_pool", "lp_pool")) + \
    tuple(f"fractional_max_pool{nd}d" for nd in (2, 3))
UNPOOL_OPS = tuple(f"max_unpool{nd}d" for nd in (1, 2, 3))
POOL_BACKWARD_OPS = ("max_pool_backward", "avg_pool_backward")
MAX_POOL_TYPES = FLOAT_TYPES + (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
# int64 average pooling as torch's CPU computes it (the window's exact sum divided with truncation toward zero); torch's
# CUDA kernels refuse it, and so do the Triton kernels here (the reference backend serves it)
AVG_POOL_TYPES = FLOAT_TYPES + (DType.i64,)
POOL_SPECS: dict[str, OpSpec] = {}


# -- geometry ------------------------------------------------------------------------------------------------
def nd_ints(nd: int, lo: int | None = None, what: str = "int"):
    """An Attr normalizer: an int or a sequence of 1 or ``nd`` ints -> an ``nd``-tuple (torch's _single/_pair/
    _triple), each >= ``lo``."""
    def norm(op, v, inputs, attrs):
        if len(v) == 1:
            v = v * nd
        if len(v) != nd:
            raise InvalidProblemError(op, "(attribute)", f"an int or a tuple of {nd} ints", tuple(v))
        if lo is not None and any(e < lo for e in v):
            raise InvalidProblemError(op, "(attribute)", f"{what}s >= {lo}", tuple(v))
        return tuple(int(e) for e in v)
    return norm


def _ints(name, nd, lo, default=None, what="int", **kw):
    norm = nd_ints(nd, lo, what)

    def named(op, v, inputs, attrs):
        try:
            return norm(op, v, inputs, attrs)
        except InvalidProblemError as e:   # the argument's own name in the message
            raise InvalidProblemError(op, name, str(e).split("expected ", 1)[1].split(", got")[0],
                                      tuple(v)) from None
    return Attr(name, "ints", default, normalize=named, **kw)


def pool_out_size(L: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """torch's pooling_output_shape: floor (or ceil) of (L + 2p - d(k-1) - 1) / s + 1; with ceil_mode the last
    window must start inside the input or its left padding."""
    num = L + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil else 0)
    o = num // s + 1
    if ceil and (o - 1) * s >= L + p:
        o -= 1
    return o


def split_batch(shape, nd: int):
    """(N, C, spatial) of a batched (N, C, *S) or unbatched (C, *S) input."""
    if len(shape) == nd + 1:
        return 1, shape[0], tuple(shape[1:])
    return shape[0], shape[1], tuple(shape[2:])


def pool_operands(op: str, inputs, nd: int, dtypes, names=("input",)) -> tuple:
    """A pooling op's operands (as many as ``names``), the first checked as its pooled input (``check_pool_input``)."""
    if len(inputs) != len(names):
        raise InvalidProblemError(op, "inputs", f"{len(names)} operand{'s' if len(names) > 1 else ''} "
                                  f"({', '.join(names)})", len(inputs))
    check_pool_input(op, inputs[0], nd, dtypes)
    return tuple(inputs)


def pool_input(op: str, inputs, nd: int, dtypes) -> TensorSpec:
    """A pooling op's one operand, checked (``check_pool_input``)."""
    return pool_operands(op, inputs, nd, dtypes)[0]


def check_pool_input(op: str, x: TensorSpec, nd: int, dtypes) -> None:
    if x.dtype not in dtypes:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                               f"{', '.join(map(str, dtypes))}")
    check_nonneg(op, ("input",), (x.shape,))
    if len(x.shape) not in (nd + 1, nd + 2):
        raise InvalidProblemError(op, "input", f"a {nd + 1}-d (C, *S) or {nd + 2}-d (N, C, *S) tensor", x.shape)
    if any(s == 0 for s in x.shape[-nd - 1:]):
        raise InvalidProblemError(op, "input", "non-zero channel and spatial sizes (only the batch may be empty)",
                                  x.shape)


def same_shape(op: str, names, ts, shape, dtype=None) -> None:
    from .._core.errors import DTypeMismatchError

    for n, t in zip(names, ts):
        if t.shape != tuple(shape):
            raise InvalidProblemError(op, n, f"shape {tuple(shape)}", t.shape)
        if dtype is not None and t.dtype != dtype:
            raise DTypeMismatchError(op, n, str(dtype), str(t.dtype))


def window_table(kind: str, L: int, O: int, k: int = 1, s: int = 1, p: int = 0, d: int = 1, u=None,
                 f64: bool = True):
    """NumPy window table of one spatial dim: (pos [B, O, K] input positions, valid [B, O, K], incl [B, O] the
    window clipped to the padded input (avg_pool's count_include_pad divisor)); B = 1, or the samples' count for
    kind='fractional' (``u`` [B] in [0, 1): torch's interval sequence, computed in f32 for non-f64 dtypes as torch's
    CUDA kernel)."""
    o = np.arange(O)
    if kind == "sliding":
        start = o * s - p
        pos = start[:, None] + np.arange(k)[None, :] * d
        valid = (pos >= 0) & (pos < L)
        incl = np.minimum(start + k, L + p) - start
        return pos[None], valid[None], incl[None]
    if kind == "adaptive":
        start = (o * L) // O
        end = ((o + 1) * L + O - 1) // O
        K = int((end - start).max()) if O else 1
        pos = start[:, None] + np.arange(K)[None, :]
        valid = np.arange(K)[None, :] < (end - start)[:, None]
        return pos[None], valid[None], (end - start)[None]
    # fractional: start_o = int((o + u) * alpha) - int(u * alpha), the last window ends at L
    ft = np.float64 if f64 else np.float32
    u = np.asarray(u, dtype=ft).reshape(-1, 1)
    alpha = ft(L - k) / ft(max(O - 1, 1))
    start = ((o[None, :].astype(ft) + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    start[:, O - 1:] = L - k
    pos = start[:, :, None] + np.arange(k)[None, None, :]
    return pos, np.ones(pos.shape, bool), np.full(start.shape, k)


class Window(tuple):
    """(nd, kind, kernel, stride, padding, dilation) of a pooling descriptor (any pooling op or its backward):
    kind 'sliding' | 'adaptive' | 'fractional'; the tuples have nd entries (ones where the kind has none)."""

    __slots__ = ()
    nd = property(lambda w: w[0])
    kind = property(lambda w: w[1])
    k = property(lambda w: w[2])
    s = property(lambda w: w[3])
    p = property(lambda w: w[4])
    d = property(lambda w: w[5])


def window_of(desc) -> Window:
    a = desc.attr_dict
    op = desc.op
    nd = a["nd"] if "nd" in a else int(op.split("pool")[1][0])
    kind = a.get("window") or ("adaptive" if op.startswith("adaptive") else
                               "fractional" if op.startswith("fractional") else "sliding")
    def fit(v, fill):   # (a backward op's defaults are 1-tuples)
        v = tuple(v) if v else (fill,)
        return v * nd if len(v) == 1 else v
    k = fit(a.get("kernel_size"), 1)
    return Window((nd, kind, k, fit(a.get("stride"), 0) if a.get("stride") else k, fit(a.get("padding"), 0),
                   fit(a.get("dilation"), 1)))


def frac_sample_index(nd: int, j: int) -> int:
    """Which of a plane's fractional samples drives spatial dim j: torch's 2-d kernels take sample 0 for the width
    and 1 for the height, its 3-d kernels 0, 1, 2 for time, height, width."""
    return nd - 1 - j if nd == 2 else j


# -- max_pool / avg_pool ---------------------------------------------------------------------------------
def _window_attrs(nd, dilation=True):
    a = (_ints("kernel_size", nd, 1, REQ, "positive int"),
         _ints("stride", nd, 1, None, "positive int", optional=True),
         _ints("padding", nd, 0, (0,) * nd, "non-negative int"))
    return a + ((_ints("dilation", nd, 1, (1,) * nd, "positive int"),) if dilation else ())


def regular_out(op, x, nd, attrs, dilation=True):
    """Normalize stride (None / () -> kernel_size) and check torch's geometry; the output spatial sizes."""
    k = attrs["kernel_size"]
    if not attrs.get("stride"):
        attrs["stride"] = k
    s, p = attrs["stride"], attrs.get("padding", (0,) * nd)
    d = attrs["dilation"] if dilation else (1,) * nd
    for kk, pp in zip(k, p):
        if pp > kk // 2:
            raise InvalidProblemError(op, "padding", f"at most half the kernel size {k}", p)
    n, c, sp = split_batch(x.shape, nd)
    out = tuple(pool_out_size(L, kk, ss, pp, dd, attrs["ceil_mode"]) for L, kk, ss, pp, dd in zip(sp, k, s, p, d))
    if any(o < 1 for o in out):
        raise InvalidProblemError(op, "input", f"spatial sizes giving an output of at least 1 (the computed output "
                                  f"size is {out})", x.shape)
    return tuple(x.shape[: len(x.shape) - nd]) + out


def _check_max(nd):
    op = f"max_pool{nd}d"

    def check(inputs, attrs):
        x = pool_input(op, inputs, nd, MAX_POOL_TYPES)
        shape = regular_out(op, x, nd, attrs)
        return attrs, (TensorSpec(shape, x.dtype), TensorSpec(shape, DType.i64))
    return check


def sliding_check(op: str, nd: int, dtypes, nonzero: tuple[str, str]):
    """The shape rule of a sliding-window pooling op without indices (avg_pool, lp_pool): one operand of ``dtypes``,
    the attribute ``nonzero[0]`` not 0 (``nonzero[1]``: what it must be), the output (N, C, *out)."""
    def check(inputs, attrs):
        x = pool_input(op, inputs, nd, dtypes)
        name, what = nonzero
        if attrs[name] == 0:
            raise InvalidProblemError(op, name, what, 0)
        shape = regular_out(op, x, nd, attrs, dilation=False)
        return attrs, (TensorSpec(shape, x.dtype),)
    return check


def _check_avg(nd):
    return sliding_check(f"avg_pool{nd}d", nd, AVG_POOL_TYPES, ("divisor_override", "a non-zero int or None"))


def _g_max(ctx, d, grads, s):
    nd = int(d.op[-2])
    a = d.attr_dict
    if grads[0] is None or not d.dtype.is_floating:     # (an integer input: no gradient)
        return (None,)
    return (ctx.op("max_pool_backward", grads[0], s["input"], s["out1"], nd=nd, window="sliding",
                   kernel_size=a["kernel_size"], stride=a["stride"], padding=a["padding"], dilation=a["dilation"]),)


def _g_avg(ctx, d, grads, s):
    nd = int(d.op[-2])
    a = d.attr_dict
    return (ctx.op("avg_pool_backward", grads[0], s["input"], nd=nd, window="sliding", kernel_size=a["kernel_size"],
                   stride=a["stride"], padding=a["padding"], count_include_pad=a["count_include_pad"],
                   divisor_override=a["divisor_override"]),)


# -- the fused backward ops -----------------------------------------------------------------------------------
_BW_ATTRS = (Attr("nd", "int", REQ, choices=(1, 2, 3)), Attr("window", "str", "sliding", choices=("sliding", "adaptive")),
             Attr("kernel_size", "ints", (1,)), Attr("stride", "ints", (1,)), Attr("padding", "ints", (0,)))


def _check_bw(op):
    def check(inputs, attrs):
        want = 3 if op == "max_pool_backward" else 2
        if len(inputs) != want:
            raise InvalidProblemError(op, "inputs", f"{want} operands (grad, x{', indices' if want == 3 else ''})",
                                      len(inputs))
        g, x = inputs[:2]
        nd = attrs["nd"]
        check_pool_input(op, x, nd, FLOAT_TYPES)
        same_shape(op, ("grad",), (g,), g.shape, x.dtype)
        if len(g.shape) != len(x.shape) or g.shape[:-nd] != x.shape[:-nd] or 0 in g.shape[-nd:]:
            raise InvalidProblemError(op, "grad", f"a tensor with the batch and channels of x {x.shape} and a "
                                      "non-empty output size", g.shape)
        if want == 3:
            same_shape(op, ("indices",), inputs[2:], g.shape, DType.i64)
        if attrs["window"] == "sliding":
            for name in ("kernel_size", "stride", "padding") + (("dilation",) if want == 3 else ()):
                v = attrs[name]
                if len(v) != nd or any(e < (0 if name == "padding" else 1) for e in v):
                    raise InvalidProblemError(op, name, f"{nd} {'non-negative' if name == 'padding' else 'positive'} "
                                              "ints", v)
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


# -- samples, errors, workloads ------------------------------------------------------------------------------
_SHAPES = {1: (2, 3, 9), 2: (2, 3, 6, 7), 3: (1, 2, 5, 4, 6)}
# few, tiny samples (the Triton interpreter runs each on every dtype twice): 2-d gets the edge cases


def _max_samples(nd):
    def samples(rng):
        if nd == 2:
            yield Sample((rng.standard_normal(_SHAPES[2]) * 4,), {"kernel_size": 3, "stride": 2, "padding": 1},
                         name="k3s2p1")
            yield Sample((rng.standard_normal((3, 5, 5)) * 4,), {"kernel_size": 2, "ceil_mode": True},
                         name="unbatched-ceil-edge")
            yield Sample((rng.standard_normal((0, 3, 5, 5)),), {"kernel_size": 2}, name="empty-batch")
        else:
            yield Sample((rng.standard_normal(_SHAPES[nd]) * 4,), {"kernel_size": 2, "stride": (1,) * nd,
                                                                   "padding": 1, "dilation": 2, "ceil_mode": True},
                         name="dil2-ceil-pad")
    return samples


def _avg_samples(nd):
    def samples(rng):
        sh = _SHAPES[nd]
        yield Sample((rng.standard_normal(sh),), {"kernel_size": 3 if nd < 3 else 2, "stride": 2, "padding": 1,
                                                 "ceil_mode": True, "count_include_pad": nd != 2},
                     name="ceil-pad")
        if nd == 2:
            yield Sample((rng.standard_normal(sh[1:]),), {"kernel_size": 3, "stride": 2, "ceil_mode": True,
                                                         "divisor_override": 5}, name="unbatched-divisor")
    return samples


def _bw_samples(op):
    def samples(rng):
        for nd, shape, k, s, p, window in ((2, (2, 3, 6, 5), 3, 2, 1, "sliding"), (3, (1, 2, 4, 3, 5), 2, 1, 0,
                                                                                    "adaptive")):
            n, c, sp = split_batch(shape, nd)
            if window == "sliding":
                outs = tuple(pool_out_size(L, k, s, p, 1, False) for L in sp)
                tabs = [window_table("sliding", L, O, k, s, p, 1) for L, O in zip(sp, outs)]
            else:
                outs = tuple(max(L - 1, 1) for L in sp)
                tabs = [window_table("adaptive", L, O) for L, O in zip(sp, outs)]
            gshape = shape[:-nd] + outs
            a = {"nd": nd, "window": window, "kernel_size": (k,) * nd, "stride": (s,) * nd, "padding": (p,) * nd}
            ins = (rng.standard_normal(gshape), rng.standard_normal(shape))
            if op == "max_pool_backward":
                ins += (random_window_indices(rng, n * c, tabs, sp).reshape(gshape),)
                a["dilation"] = (1,) * nd
            else:
                a["count_include_pad"] = False
            yield Sample(ins, a, name=f"{nd}d-{window}", grad=False)
    return samples


def random_window_indices(rng, planes, tabs, sp):
    """A valid argmax per window (a random in-bounds element of it), flat per plane: [planes, *O]."""
    nd = len(tabs)
    outs = tuple(t[0].shape[1] for t in tabs)
    flat = np.zeros((planes,) + outs, np.int64)
    for j, (pos, valid, _) in enumerate(tabs):
        Bj = pos.shape[0]
        cnt = valid.sum(-1)                                       # [Bj, O]
        first = valid.argmax(-1)
        pick = first + (rng.random((planes, pos.shape[1])) * cnt).astype(np.int64)
        chosen = np.take_along_axis(np.broadcast_to(pos, (planes,) + pos.shape[1:]) if Bj == 1 else pos,
                                    pick[..., None], -1)[..., 0]
        shp = [planes] + [1] * nd
        shp[1 + j] = outs[j]
        flat = flat * sp[j] + chosen.reshape(shp)
    return flat


def errors_for(op, nd, extra=None, padding=True):
    def errors():
        x = ((2, 3) + (6,) * nd, "f32")
        a = {"kernel_size": 2} if extra is None else dict(extra)
        if "kernel_size" in a and padding:
            yield ErrorCase((x,), dict(a, padding=2), InvalidProblemError,
                            rf"{op}: argument 'padding': expected at most half the kernel size", "pad-gt-half")
        if "kernel_size" in a:
            yield ErrorCase((x,), dict(a, kernel_size=0), InvalidProblemError,
                            rf"{op}: argument 'kernel_size': expected positive ints >= 1", "kernel-0")
            yield ErrorCase((x,), dict(a, kernel_size=(2,) * (nd + 1)), InvalidProblemError,
                            rf"{op}: argument 'kernel_size': expected an int or a tuple of {nd} ints", "kernel-len")
            yield ErrorCase((((2, 3) + (1,) * nd, "f32"),), dict(a, kernel_size=3, **({"padding": 0} if padding else {})),
                            InvalidProblemError,
                            rf"{op}: argument 'input': expected spatial sizes giving an output of at least 1",
                            "out-lt-1")
        yield ErrorCase((((6,), "f32"),), a, InvalidProblemError, rf"{op}: argument 'input': expected a {nd + 1}-d",
                        "rank")
        yield ErrorCase((((2, 0) + (4,) * nd, "f32"),), a, InvalidProblemError, r"non-zero channel", "empty-channel")
        yield ErrorCase((((2, 3) + (6,) * nd, "bool"),), a, UnsupportedError, r"dtype bool", "dtype")
    return errors


def _bw_errors(op):
    def errors():
        n = 3 if op == "max_pool_backward" else 2
        a = {"nd": 2, "kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
        if n == 3:
            a["dilation"] = (1, 1)
        g, x, i = ((2, 3, 3, 3), "f32"), ((2, 3, 6, 6), "f32"), ((2, 3, 3, 3), "i64")
        ins = (g, x, i)[:n]
        yield ErrorCase(ins, dict(a, nd=4), InvalidProblemError, rf"{op}: argument 'nd'", "nd")
        yield ErrorCase((((2, 4, 3, 3), "f32"),) + ins[1:], a, InvalidProblemError, rf"{op}: argument 'grad'", "grad")
        if n == 3:
            yield ErrorCase((g, x, ((2, 3, 3, 3), "i32")), a, Exception, r"argument 'indices'", "idx-dtype")
    return errors


def pool_tol(dt):
    # averages of <= 27 values accumulated in f32 (f64 for f64); one rounding of the output dtype
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-6, 2e-6), DType.f16: (2e-3, 2e-3),
            DType.bf16: (1.6e-2, 1e-2)}.get(dt, (0.0, 0.0))


def pool_cost(flops_per_window_elem=1):
    def cost(desc):
        nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
        k = math.prod(desc.attr_dict.get("kernel_size", (1,)))
        return nbytes, desc.outputs[0].numel * k * flops_per_window_elem
    return cost


_STEM = (64, 64, 112, 112)    # ResNet stem after conv1 (channels-last in the lead's bench)
_WL = {
    "max_pool2d": (Workload("max_pool2d-resnet-stem-[64,64,112,112]k3s2p1-bf16", (_STEM,), DType.bf16,
                            {"kernel_size": 3, "stride": 2, "padding": 1}, backward=True),),
    "avg_pool2d": (Workload("avg_pool2d-[64,64,112,112]k3s2p1-bf16", (_STEM,), DType.bf16,
                            {"kernel_size": 3, "stride": 2, "padding": 1}, backward=True),),
    "max_pool1d": (Workload("max_pool1d-[64,256,4096]k3s2p1-bf16", ((64, 256, 4096),), DType.bf16,
                            {"kernel_size": 3, "stride": 2, "padding": 1}),),
    "max_pool3d": (Workload("max_pool3d-[8,64,16,56,56]k3s2p1-bf16", ((8, 64, 16, 56, 56),), DType.bf16,
                            {"kernel_size": 3, "stride": 2, "padding": 1}, backward=True),),
}


# -- drop-ins ---------------------------------------------------------------------------------------------------
def _stride(stride):
    return None if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else stride


def _dropin_max(nd):
    def dropin(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        attrs = {"kernel_size": kernel_size, "stride": _stride(stride), "padding": padding, "dilation": dilation,
                 "ceil_mode": bool(ceil_mode)}
        return (input,), attrs, (tuple if return_indices else (lambda out: out[0]))
    return dropin


def _dropin_avg(nd):
    if nd == 1:
        def dropin(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            return (input,), {"kernel_size": kernel_size, "stride": _stride(stride), "padding": padding,
                              "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)}
        return dropin

    def dropin(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
        return (input,), {"kernel_size": kernel_size, "stride": _stride(stride), "padding": padding,
                          "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad),
                          "divisor_override": divisor_override}
    return dropin


def _peer_max(nd):
    def peer(x, **a):
        import torch.nn.functional as F

        f = getattr(F, f"max_pool{nd}d")
        return f(x, a["kernel_size"], a.get("stride") or None, a.get("padding", 0), a.get("dilation", 1),
                 a.get("ceil_mode", False), return_indices=True)
    return peer


def _peer_avg(nd):
    def peer(x, **a):
        import torch.nn.functional as F

        f = getattr(F, f"avg_pool{nd}d")
        extra = {} if nd == 1 else {"divisor_override": a.get("divisor_override")}
        return f(x, a["kernel_size"], a.get("stride") or None, a.get("padding", 0), a.get("ceil_mode", False),
                 a.get("count_include_pad", True), **extra)
    return peer


def reg(**kw):
    kw.setdefault("family", "pool")
    POOL_SPECS[kw["name"]] = register_spec(OpSpec(**kw))


for _nd in (1, 2, 3):
    reg(name=f"max_pool{_nd}d", arg_names=("input",), check=_check_max(_nd), dtypes=MAX_POOL_TYPES,
        attrs=_window_attrs(_nd) + (Attr("ceil_mode", "bool", False),), torch_peer=_peer_max(_nd),
        torch_name=f"torch.nn.functional.max_pool{_nd}d", dropin=_dropin_max(_nd), grad=_g_max,
        saves=("input", "out1"), differentiable=(0,), samples=_max_samples(_nd),
        errors=errors_for(f"max_pool{_nd}d", _nd), tol=pool_tol, grad_tol=pool_tol, workloads=_WL.get(f"max_pool{_nd}d", ()),
        cost=pool_cost(), doc=f"{_nd}-d max pooling -> (values, indices int64 flat per plane), torch's semantics.")
    reg(name=f"avg_pool{_nd}d", arg_names=("input",), check=_check_avg(_nd), dtypes=AVG_POOL_TYPES,
        attrs=_window_attrs(_nd, dilation=False) + (
            Attr("ceil_mode", "bool", False), Attr("count_include_pad", "bool", True),
            Attr("divisor_override", "int", None, optional=True)),
        torch_peer=_peer_avg(_nd), torch_name=f"torch.nn.functional.avg_pool{_nd}d", dropin=_dropin_avg(_nd),
        grad=_g_avg, saves=("input",), differentiable=(0,), samples=_avg_samples(_nd),
        errors=errors_for(f"avg_pool{_nd}d", _nd), tol=pool_tol, grad_tol=pool_tol,
        workloads=_WL.get(f"avg_pool{_nd}d", ()), cost=pool_cost(),
        doc=f"{_nd}-d average pooling (count_include_pad, divisor_override, ceil_mode as torch).")

reg(name="max_pool_backward", arg_names=("grad", "x", "indices"), check=_check_bw("max_pool_backward"),
    dtypes=FLOAT_TYPES, attrs=_BW_ATTRS + (Attr("dilation", "ints", (1,)),), samples=_bw_samples("max_pool_backward"),
    errors=_bw_errors("max_pool_backward"), tol=pool_tol, cost=pool_cost(),
    doc="max pooling's backward, gather form: each input element sums the gradients of the windows whose index names "
        "it (deterministic; sliding or adaptive windows).")
reg(name="avg_pool_backward", arg_names=("grad", "x"), check=_check_bw("avg_pool_backward"), dtypes=FLOAT_TYPES,
    attrs=_BW_ATTRS + (Attr("count_include_pad", "bool", True), Attr("divisor_override", "int", None, optional=True)),
    samples=_bw_samples("avg_pool_backward"), errors=_bw_errors("avg_pool_backward"), tol=pool_tol, cost=pool_cost(),
    doc="average pooling's backward (the window average's adjoint), gather form; sliding or adaptive windows.")

declare_rule_ops(__name__, "max_pool_backward", "avg_pool_backward")
