"""Random family: a counter-based generator (Philox-4x32-10), distributions and dropout.

The stream.  Every op takes ``seed`` (the Philox key, an int in [0, 2**63)) and ``offset`` (an int >= 0).  The
uint32 word of element ``e`` of the stream is word ``e & 3`` of Philox-4x32-10(key = seed (lo, hi), counter =
(e >> 2) (lo, hi), 0, 0) (Salmon et al. 2011; bit-identical to Triton's ``tl.philox``), and output element ``n``
(row-major index in the logical shape) takes element ``offset + n``: its value is a function of (seed, offset + n)
alone, the same for every block size, grid and backend (the reference backend's NumPy Philox is bit-exact).  One
Philox evaluation serves four consecutive elements on the GPU.  An op consumes ``numel`` elements (a channel
mask: one per channel; multinomial with replacement: rows * num_samples; without: rows * categories;
``consumed(desc)``), so a caller that draws again from the same seed passes ``offset + consumed``, as torch's
Philox offset advances on the host.

CUDA graphs.  Attributes are baked into a plan (and into a captured graph, which then replays the same numbers).
Every op also takes an optional trailing operand ``state``: an int64 tensor [seed, base] on the device
(``new_state``); the kernels read the key and the base from it and draw element ``base + offset + n``.  The host
calls ``advance(state, desc)`` (an in-place add ordered on the state's stream: base += consumed, rounded up to a
multiple of 4 so the four-word blocks stay aligned) between replays, so each replay draws fresh numbers, as
torch's graph-safe generator does; dropout's backward reads the same saved state, so a forward and its backward
in one replay agree.  The drop-ins draw ``seed`` from torch's CPU generator per call (not graph-safe: a
captured drop-in replays its seed; the state operand is the Plan API's graph-safe path).

From a word u: U = (u >> 8) * 2^-24 in [0, 1) (exact in float32); U' = U + 2^-24 in (0, 1] (a log's argument).
uniform(shape, low, high)   low + (high - low) U (a float64 output: U = u * 2^-32).
normal(shape, mean, std)    Box-Muller on the element's pair (words 0, 1 or 2, 3 of its Philox block):
                            r = sqrt(-2 log U'_first), z = r cos(2 pi U_second) (first of the pair) or r sin(...)
                            (the Triton kernel's float32 takes the hardware sin / cos: within ~5e-6 of the
                            reference's float64 values).
exponential(shape, lambd)   -log(U') / lambd.
randint(shape, low, high)   low + floor(u (high - low) / 2^32) (high - low <= 2^32).
bernoulli(x, p)             1 where U < p (p: the attribute, or each element of x), else 0, in x's dtype.
randperm(n)                 the argsort of the n stream words (stable: equal words in index order).
multinomial(x, num_samples, replacement)  with: inverse CDF of each row at U * row sum (element
                            offset + r * num_samples + s); without: the num_samples smallest exponential race keys
                            -log(U'_k) / w_k (element offset + r * K + k), in the order drawn.
dropout & co.               element (or channel) m is kept iff U(offset + m) >= float32(p); kept: x * s + c1,
                            dropped: c0 (dropout: s = 1 / (1 - p), c = 0; alpha_dropout / feature_alpha_dropout:
                            torch's affine, a = ((alpha^2 p + 1)(1 - p))^-1/2, s = a, c1 = alpha a p,
                            c0 = alpha a (p - 1)); the channel masks span the dims torch's feature dropout does.
                            Backward: dropout_backward regenerates the mask from (seed, offset): g * s where kept.

The drop-ins take torch's signatures and draw their stream from torch's generators (``drop_in_stream``), so
``torch.manual_seed`` makes a run reproducible; the values differ from torch's own stream (torch's Philox offsets
and transforms are not reproduced), the distributions are the same.  Eager calls draw ``seed`` from torch's CPU
generator (``draw_seed``, an int: the cheapest call).  Under torch.compile's tracing and under CUDA-graph capture
an int would be baked into the graph (every call or replay would draw the same numbers; dynamo also breaks the
graph at the int), so there the drop-in draws a ``state`` operand instead: [seed, 0] drawn by torch's own
generator on the input's device, an op of the graph, so each call of the compiled function and each replay of
the captured graph draws fresh numbers, and a forward and its backward share them (the backward regenerates the
mask from the saved state).
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.derive import declare_rule_ops
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from . import _factory
from ._common import check_nonneg, no_out

__all__ = ["ALPHA_SELU", "DROPOUT_OPS", "draws", "affine_of", "mask_inner", "multinomial_keys", "randint_range",
           "consumed",
           "stream_check", "has_state", "new_state", "advance", "draw_seed", "graph_safe_draw", "drop_in_stream"]

ALPHA_SELU = 1.7580993408473766      # SELU's scale * alpha: the negative saturation value alpha_dropout keeps
DROPOUT_OPS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
INT_OUT = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
_SEED = Attr("seed", "int", None, optional=True, ge=0, lt=2 ** 63,
             expected="an int in [0, 2**63) (the Philox key; required unless a 'state' operand is given)")
_OFFSET = Attr("offset", "int", 0, ge=0, lt=2 ** 62, expected="an int in [0, 2**62) (the stream's first element)")
_P = Attr("p", "float", 0.5, ge=0.0, le=1.0, expected="a probability in [0, 1]")
_SHAPE = Attr("shape", "shape", REQUIRED)
_DTYPE = Attr("dtype", "dtype", None, optional=True)


# -- facts shared with the backends ----------------------------------------------------------------------------
def affine_of(op: str, p: float) -> tuple:
    """(s, c1, c0): a kept element is x * s + c1, a dropped one c0 (p = 1 drops everything to 0, as torch)."""
    if p >= 1.0:
        return 0.0, 0.0, 0.0
    if "alpha" in op:
        a = 1.0 / math.sqrt((ALPHA_SELU * ALPHA_SELU * p + 1.0) * (1.0 - p))
        return a, ALPHA_SELU * a * p, ALPHA_SELU * a * (p - 1.0)
    return 1.0 / (1.0 - p), 0.0, 0.0


def mask_inner(op: str, shape: tuple) -> int:
    """How many consecutive elements share one mask draw: 1 (element masks), else the product of the dims torch's
    feature dropout spans (dropout1d: the last; dropout2d / feature_alpha_dropout: all after (N, C); dropout3d:
    all after (N, C) of a 5-d input, the unbatched (C, D, H, W) forms: all after C)."""
    if op in ("dropout", "alpha_dropout"):
        return 1
    if op == "dropout1d":
        tail = shape[-1:]
    elif op == "dropout3d" and len(shape) != 5:
        tail = shape[1:]
    else:
        tail = shape[2:]
    return int(np.prod(tail, dtype=np.int64))


def consumed(desc) -> int:
    """How many stream elements the op draws: the next independent call passes offset + consumed(desc)."""
    op = desc.op
    if op in DROPOUT_OPS:
        x = desc.inputs[0]
        return 0 if not draws(desc.attr("training"), desc.attr("p")) else x.numel // max(mask_inner(op, x.shape), 1)
    if op == "randperm":
        return desc.attr("n")
    if op.startswith("speculative_sampling"):     # (ops/random_speculative.py: 2K + 1 elements per row)
        B, K = desc.inputs[0].shape
        return B * (2 * K + 1)
    if op == "multinomial":
        x = desc.inputs[0]
        rows = x.numel // max(x.shape[-1], 1) if x.shape else 1
        return rows * (desc.attr("num_samples") if desc.attr("replacement") else (x.shape[-1] if x.shape else 1))
    return desc.outputs[0].numel


def randint_range(desc) -> tuple:
    """(low, high - low) of a randint descriptor."""
    return desc.attr("low"), desc.attr("high") - desc.attr("low")


def multinomial_keys(w: np.ndarray, u_open: np.ndarray) -> np.ndarray:
    """Exponential race keys -log(U') / w (w = 0: never drawn before a positive weight: +inf)."""
    with np.errstate(divide="ignore"):
        return np.where(w > 0, -np.log(u_open) / np.where(w > 0, w, 1.0), np.inf)


# -- the device-side stream state (CUDA graphs) --------------------------------------------------------------
def stream_check(op: str, n_base: int, check):
    """``check`` of the op's own operands, behind the optional trailing ``state`` operand (an int64 tensor [2]:
    seed, offset base): with it the kernels read the key and the offset base from device memory (attribute
    ``offset`` is added), so a captured CUDA graph draws new numbers when the host advances the state between
    replays; without it ``seed`` is required."""
    def checked(inputs, attrs):
        if len(inputs) not in (n_base, n_base + 1):
            raise InvalidProblemError(op, "inputs", f"{n_base} operand(s), plus an optional 'state'", len(inputs))
        if len(inputs) > n_base:
            st = inputs[n_base]
            if st.shape != (2,) or st.dtype != DType.i64:
                raise InvalidProblemError(op, "state", "an i64 tensor of shape (2,): (seed, offset base)",
                                          f"{st.dtype} {st.shape}")
        elif attrs["seed"] is None:
            raise InvalidProblemError(op, "seed", "an int in [0, 2**63) (or a 'state' operand)", None)
        return check(inputs[:n_base], attrs)
    return checked


def has_state(desc) -> bool:
    return len(desc.inputs) == len(desc.spec.arg_names)


def new_state(seed: int, device=None):
    """A stream state for ``device``: int64 [seed, 0] (torch)."""
    import torch

    return torch.tensor([seed, 0], dtype=torch.int64, device=device)


def advance(state, desc) -> None:
    """Move the state's offset past what ``desc`` draws, rounded up to a multiple of 4 (the kernels' four-word
    blocks stay aligned): an in-place add on the state's device, ordered on its stream — between two replays of a
    captured graph, each replay draws fresh numbers; never between a forward and its backward (the backward
    regenerates the forward's mask from the same state)."""
    n = consumed(desc)
    state[1] += (n + 3) // 4 * 4


# -- the drop-ins' streams (eager, torch.compile, CUDA graphs) ----------------------------------------------------
def draw_seed(generator=None) -> int:
    """A seed for an op's Philox stream from torch's CPU generator (torch.manual_seed reproduces it), or from
    ``generator`` (a torch.Generator: one draw on its device)."""
    import torch

    if generator is None:
        return int(torch.randint(0, 2 ** 62, (), dtype=torch.int64))
    return int(torch.randint(0, 2 ** 62, (), dtype=torch.int64, generator=generator, device=generator.device))


def graph_safe_draw(device) -> bool:
    """Whether a drop-in on ``device`` must draw its stream as a device tensor: while torch.compile traces (an int
    seed would be a constant of the compiled graph) or while the current CUDA stream is being captured (a replay
    would repeat the captured seed)."""
    import torch

    if torch.compiler.is_compiling():
        return True
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def drop_in_stream(op: str, device, generator=None) -> tuple:
    """(extra operands, attributes) of a drop-in's draw on ``device`` (a torch.device): ``((), {"seed": int})``
    eagerly, or ``((state,), {"seed": None})`` where ``graph_safe_draw`` says so, the state [seed, 0] drawn by
    torch's generator of that device, or by ``generator`` (an op of the traced / captured graph; the base 0 keeps
    the kernels' four-word blocks aligned).  A ``generator`` must be on ``device``'s type, as torch requires.  Its
    torch calls skip torch-function modes: ``bt.mode()`` must not route them to baracuda's own random ops."""
    import torch

    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"{op}(): argument 'generator' must be torch.Generator, not {type(generator).__name__}")
        if generator.device.type != device.type:
            from .._core.errors import DeviceMismatchError

            raise DeviceMismatchError(op, "generator", f"a '{device.type}' generator", generator.device.type)
    if not graph_safe_draw(device):
        return (), {"seed": draw_seed(generator)}
    g = {} if generator is None else {"generator": generator}
    with torch._C.DisableTorchFunction():
        st = torch.randint(0, 2 ** 62, (2,), dtype=torch.int64, device=device, **g)
        st[1:].zero_()      # a fill kernel: `st[1] = 0` copies a host scalar, which a CUDA graph capture refuses
    return (st,), {"seed": None}


# -- checks ------------------------------------------------------------------------------------------------------
def _dtype_in(op, dt, allowed):
    if dt not in allowed:
        raise UnsupportedError(op, f"dtype {dt}; the op is defined for {', '.join(map(str, allowed))}")
    return dt


def _check_fill(op):
    def check(inputs, attrs):
        allowed = FLOAT_TYPES + (INT_OUT if op == "randint" else ())
        dt = _dtype_in(op, attrs["dtype"] or (DType.i64 if op == "randint" else DType.f32), allowed)
        if op == "uniform" and not attrs["low"] <= attrs["high"]:
            raise InvalidProblemError(op, "high", f"high >= low = {attrs['low']}", attrs["high"])
        if op == "randint":
            lo, hi = attrs["low"], attrs["high"]
            if hi <= lo:
                raise InvalidProblemError(op, "high", f"high > low = {lo} (an empty range)", hi)
            if hi - lo > 2 ** 32:
                raise UnsupportedError(op, f"a range high - low = {hi - lo} over 2**32 (one 32-bit word per draw)")
        return dict(attrs, dtype=dt), (TensorSpec(attrs["shape"], dt),)
    return check


def _one_float_operand(op, inputs):
    x = inputs[0]
    if x.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"dtype {x.dtype}; the op is defined for {', '.join(map(str, FLOAT_TYPES))}")
    check_nonneg(op, ("input",), (x.shape,))
    return x


def _check_bernoulli(inputs, attrs):
    x = _one_float_operand("bernoulli", inputs)
    return attrs, (TensorSpec(x.shape, x.dtype),)


_MIN_RANK = {"dropout1d": 2, "dropout2d": 2, "feature_alpha_dropout": 2, "dropout3d": 1}


def draws(training: bool, p: float) -> bool:
    """Whether a dropout form draws a mask (training with p > 0); otherwise it is the identity."""
    return bool(training) and p > 0


def _check_dropout(op):
    def check(inputs, attrs):
        name = attrs["variant"] if op == "dropout_backward" else op
        x = inputs[0]
        if draws(attrs["training"], attrs["p"]):     # (not drawing, torch returns any tensor as it is: ints too)
            x = _one_float_operand(op, inputs)
        r = len(x.shape)
        if name == "dropout1d" and r not in (2, 3):
            raise InvalidProblemError(op, "input", "a 2-d (C, L) or 3-d (N, C, L) input (dropout1d)", f"{r}-d")
        if r < _MIN_RANK.get(name, 0) and draws(attrs["training"], attrs["p"]) and x.numel:   # (torch's rule)
            raise InvalidProblemError(op, "input", f"at least {_MIN_RANK[name]} dims (feature dropout)", f"{r}-d")
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


def _check_randperm(inputs, attrs):
    dt = _dtype_in("randperm", attrs["dtype"] or DType.i64, (DType.i64, DType.i32) + FLOAT_TYPES)
    return dict(attrs, dtype=dt), (TensorSpec((attrs["n"],), dt),)


def _check_multinomial(inputs, attrs):
    op = "multinomial"
    x = _one_float_operand(op, inputs)
    if len(x.shape) not in (1, 2):
        raise InvalidProblemError(op, "input", "a 1-d or 2-d tensor of weights", f"{len(x.shape)}-d")
    k, ns = x.shape[-1], attrs["num_samples"]
    if k == 0:
        raise InvalidProblemError(op, "input", "at least one category", x.shape)
    if not attrs["replacement"] and ns > k:
        raise InvalidProblemError(op, "num_samples", f"at most {k} (the categories) without replacement", ns)
    return attrs, (TensorSpec(x.shape[:-1] + (ns,), DType.i64),)


# -- backward --------------------------------------------------------------------------------------------------
def _g_dropout(ctx, d, grads, s):
    if grads[0] is None:        # an integer input (the identity forms): no gradient, as torch
        return (None,)
    a = {k: d.attr(k) for k in ("p", "training", "seed", "offset")}
    return (ctx.op("dropout_backward", grads[0], *([s["state"]] if "state" in s else []), variant=d.op, **a),)


def _g_bernoulli(ctx, d, grads, s):
    return (ctx.op("zeros_like", grads[0]),)      # torch's: a draw is piecewise constant in p


# -- drop-ins ----------------------------------------------------------------------------------------------------
def _dropout_dropin(op):
    def adapter(input, p=0.5, training=True, inplace=False):
        if inplace:
            raise UnsupportedError(op, "argument 'inplace=True' of the torch signature is not supported")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        attrs = {"p": float(p), "training": bool(training)}
        if not training:
            return (input,), dict(attrs, seed=0)
        extra, seed = drop_in_stream(op, input.device)
        return (input,) + extra, dict(attrs, **seed)
    return adapter


def _bernoulli_dropin(input, p=None, *, generator=None, out=None):
    no_out("bernoulli", out)
    if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))):
        raise UnsupportedError("bernoulli", f"a p of type {type(p).__name__} (torch.bernoulli's p is a float)")
    extra, seed = drop_in_stream("bernoulli", input.device, generator)
    return (input,) + extra, {"p": None if p is None else float(p), **seed}


def _multinomial_dropin(input, num_samples, replacement=False, *, generator=None, out=None):
    no_out("multinomial", out)
    extra, seed = drop_in_stream("multinomial", input.device, generator)
    return (input,) + extra, {"num_samples": int(num_samples), "replacement": bool(replacement), **seed}


def _int64():
    import torch

    return torch.int64


def _device_of(index: int):
    import torch

    return torch.device("cuda", index) if index >= 0 else torch.device("cpu")


def _factory_result(op: str, made, generator) -> tuple:
    """A factory drop-in's (operands, attrs, finisher, device) from ``_factory.made``'s, with the stream's draw."""
    ins, attrs, finish, dev = made
    extra, seed = drop_in_stream(op, _device_of(dev), generator)
    return ins + extra, dict(attrs, **seed), finish, dev


def _fill_dropin(op: str, torch_op: str):
    """torch.rand (the uniform fill on [0, 1)) / torch.randn (the standard normal fill)."""
    def factory(*size, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False, **kw):
        shape = _factory.sizes(torch_op, size, kw)
        made = _factory.made(op, {"shape": shape}, dtype, _factory.default_float(), out=out, layout=layout,
                             device=device, pin_memory=pin_memory, requires_grad=requires_grad)
        return _factory_result(torch_op, made, generator)
    factory.__name__ = torch_op
    return factory


def _randint_dropin(*args, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False, **kw):
    """torch.randint(high, size) / randint(low, high, size): int64 unless ``dtype`` says otherwise."""
    op = "randint"
    known = ("low", "high", "size")
    names = ("high", "size") if len(args) + len(set(known) & set(kw)) == 2 and "low" not in kw else known
    bound = _factory.bind(op, names, args, kw, known)
    if "high" not in bound or "size" not in bound:
        raise TypeError(f"{op}() missing required arguments 'high' and 'size'")
    low, high = (_factory.scalar(op, bound.get(k, 0), k) for k in ("low", "high"))
    for k, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{op}(): argument '{k}' must be int, not {type(v).__name__}")
    made = _factory.made(op, {"shape": _factory.sequence(op, bound["size"]), "low": low, "high": high}, dtype,
                         _int64(), out=out, layout=layout, device=device,
                         pin_memory=pin_memory, requires_grad=requires_grad)
    return _factory_result(op, made, generator)


def _randperm_dropin(n, *, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False,
                     requires_grad=False):
    """torch.randperm(n): int64 unless ``dtype`` says otherwise."""
    op = "randperm"
    n = _factory.scalar(op, n, "n")
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{op}(): argument 'n' must be int, not {type(n).__name__}")
    made = _factory.made(op, {"n": n}, dtype, _int64(), out=out, layout=layout,
                         device=device, pin_memory=pin_memory, requires_grad=requires_grad)
    return _factory_result(op, made, generator)


# -- samples, errors, workloads ----------------------------------------------------------------------------------
def _fill_samples(op, extra):
    def samples(rng):
        for i, shape in enumerate(((3, 5), (7,), (), (2, 3, 4), (0, 3), (4099,))):
            yield Sample((), {"shape": shape, "seed": 11 + i, "offset": (0, 4, 3, 1)[i % 4], **extra}, name=f"{shape}")
        for base, off in ((8, 4), (2 ** 40 + 6, 1)):      # the device-side state: (seed, base) + offset
            yield Sample((np.array([2 ** 33 + 5, base], dtype=np.int64),), {"shape": (5, 7), "offset": off, **extra},
                         name=f"state{base % 4}")
    return samples


def _fill_errors(op, extra):
    def errors():
        a = {"shape": (2, 3), "seed": 1, **extra}
        yield ErrorCase((), dict(a, shape=(2, -1)), InvalidProblemError, rf"{op}: argument 'shape'", "negative")
        yield ErrorCase((), dict(a, dtype="c64"), UnsupportedError, rf"{op}: dtype c64", "dtype")
        yield ErrorCase((((2,), "f32"),), a, InvalidProblemError, rf"{op}: argument 'state': expected an i64", "state")
        yield ErrorCase((((2,), "i64"),) * 2, a, InvalidProblemError, rf"{op}: argument 'inputs'", "operands")
        yield ErrorCase((), {k: v for k, v in a.items() if k != "seed"}, InvalidProblemError, r"argument 'seed'",
                        "no-seed")
        yield ErrorCase((), dict(a, offset=-1), InvalidProblemError, r"argument 'offset'", "offset")
    return errors


def _tol(dt):
    # one rounding of an f32 / f64 affine map of an exact U (or log / sin / cos of it: libdevice 1-2 ulp vs the
    # float64 reference) and the output dtype's rounding (half types: 2^-11 / 2^-8 relative)
    return {DType.f64: (1e-12, 1e-12), DType.f32: (2e-6, 2e-6), DType.f16: (1e-3, 1e-3),
            DType.bf16: (8e-3, 8e-3)}.get(dt, (0.0, 0.0))


def _reg(name, check, attrs, dtypes, samples, errors, workloads, doc, **kw):
    base = kw.pop("arg_names", ())
    return register_spec(OpSpec(name=name, family="random", check=stream_check(name, len(base), check),
                                arg_names=base + ("state",), attrs=attrs, dtypes=dtypes, samples=samples,
                                errors=errors, workloads=tuple(workloads), doc=doc, tol=_tol, **kw))


def _out_cost(d):
    return d.outputs[0].nbytes, 0


_FILL = {"uniform": ((Attr("low", "float", 0.0), Attr("high", "float", 1.0)), {"low": -2.0, "high": 3.0},
                     "Uniform [low, high) fill from the Philox stream (torch.rand / Tensor.uniform_)."),
         "normal": ((Attr("mean", "float", 0.0), Attr("std", "float", 1.0, ge=0.0)), {"mean": 1.0, "std": 2.0},
                    "Normal(mean, std) fill by Box-Muller on the stream's word pairs (torch.randn / normal_)."),
         "exponential": ((Attr("lambd", "float", 1.0, gt=0.0),), {"lambd": 2.0},
                         "Exponential(lambd) fill: -log(U') / lambd (Tensor.exponential_)."),
         "randint": ((Attr("low", "int", 0), Attr("high", "int", REQUIRED)), {"low": -3, "high": 10},
                     "Integers uniform in [low, high) (torch.randint; a range up to 2**32).")}
# the fills torch has as factory functions: their drop-ins (torch.rand / randn / randint); exponential is a
# Tensor method only (exponential_)
_FILL_DROPINS = {"uniform": ("torch.rand", _fill_dropin("uniform", "rand")),
                 "normal": ("torch.randn", _fill_dropin("normal", "randn")),
                 "randint": ("torch.randint", _randint_dropin)}
for _op, (_a, _ex, _doc) in _FILL.items():
    _tn, _di = _FILL_DROPINS.get(_op, (None, None))
    _reg(_op, _check_fill(_op), (_SHAPE,) + _a + (_DTYPE, _SEED, _OFFSET),
         FLOAT_TYPES + (INT_OUT if _op == "randint" else ()), _fill_samples(_op, _ex), _fill_errors(_op, _ex),
         [Workload(f"{_op}-64M-f32", (), DType.f32, {"shape": (64 * 2 ** 20,), "dtype": DType.f32, "seed": 7, **_ex})],
         _doc, cost=_out_cost, torch_name=_tn, dropin=_di)


def _x_samples(attrs_of, domain=(-2.0, 2.0), shapes=((3, 5), (7,), (), (2, 3, 4), (0, 3), (4, 6, 3, 2))):
    def samples(rng):
        for i, shape in enumerate(shapes):
            for a in attrs_of(i, len(shape)):
                yield Sample((rng.uniform(*domain, size=shape),), dict(a, seed=5 + i), name=f"{shape}{a}")
        a = attrs_of(1, 2)[0]
        yield Sample((rng.uniform(*domain, size=(4, 6)), np.array([77, 6], dtype=np.int64)), a, name="state")
    return samples


def _x_errors(op, good_shape=(2, 3, 4), extra=None):
    def errors():
        a = {"seed": 1, **(extra or {})}
        yield ErrorCase(((good_shape, "i32"),), a, UnsupportedError, rf"{op}: dtype i32", "int")
        yield ErrorCase(((good_shape, "f32"),) * 2, a, InvalidProblemError, r"argument 'state'", "state")
        yield ErrorCase(((good_shape, "f32"),) * 3, a, InvalidProblemError, r"argument 'inputs'", "three")
        yield ErrorCase(((good_shape, "f32"),), {k: v for k, v in a.items() if k != "seed"}, InvalidProblemError,
                        r"argument 'seed'", "no-seed")
        if op in DROPOUT_OPS or op == "dropout_backward":
            yield ErrorCase(((good_shape, "f32"),), dict(a, p=1.5), InvalidProblemError, r"argument 'p'", "p")
    return errors


_reg("bernoulli", _check_bernoulli, (Attr("p", "float", None, optional=True, ge=0.0, le=1.0), _SEED, _OFFSET),
     FLOAT_TYPES, _x_samples(lambda i, r: ({}, {"p": 0.3}), (0.0, 1.0)), _x_errors("bernoulli"),
     [Workload("bernoulli-16384x4096-bf16", ((16384, 4096),), DType.bf16, {"seed": 7})],
     "1 with probability p (each element of the input, or the attribute p), else 0, in the input's dtype "
     "(torch.bernoulli).", arg_names=("input",), torch_name="torch.bernoulli", dropin=_bernoulli_dropin,
     grad=_g_bernoulli, saves=(), differentiable=(0,),
     cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, 0))


def _dropout_attrs(i, rank):
    return ({"p": (0.5, 0.2, 0.9)[i % 3], "offset": (0, 3, 8)[i % 3]}, {"p": 0.0}, {"p": 1.0},
            {"p": 0.4, "training": False})


_DROP_SHAPES = {"dropout1d": ((3, 5), (2, 3, 7), (0, 4)), "dropout2d": ((3, 5), (2, 3, 4), (2, 3, 4, 5), (0, 2, 3)),
                "dropout3d": ((2, 3, 4, 5), (2, 2, 3, 2, 3), (3, 4))}
_DROP_SHAPES["feature_alpha_dropout"] = _DROP_SHAPES["dropout2d"]
_DROP_DOC = {"dropout": "Element dropout: x / (1 - p) where kept, 0 where dropped (F.dropout).",
             "dropout1d": "Channel dropout over (N, C, L) / (C, L): one draw per channel (F.dropout1d).",
             "dropout2d": "Channel dropout: one draw per (N, C) (F.dropout2d; a 3-d input as (N, C, L), as torch).",
             "dropout3d": "Channel dropout over (N, C, D, H, W) / (C, D, H, W): one draw per channel (F.dropout3d).",
             "alpha_dropout": "Alpha dropout (keeps SELU's mean and variance): a x + alpha a p kept, alpha a (p - 1) "
                              "dropped (F.alpha_dropout).",
             "feature_alpha_dropout": "Alpha dropout with one draw per (N, C) channel (F.feature_alpha_dropout)."}
_DROP_ATTRS = (_P, Attr("training", "bool", True), _SEED, _OFFSET)
_SMALL = ((3, 5), (7,), (), (2, 3, 4), (0, 3), (4, 6, 3, 2), (2, 4099))
for _op in DROPOUT_OPS:
    _shapes = _DROP_SHAPES.get(_op, _SMALL)
    _reg(_op, _check_dropout(_op), _DROP_ATTRS, FLOAT_TYPES + INT_OUT + (DType.bool,),
         _x_samples(_dropout_attrs, shapes=_shapes),
         _x_errors(_op), [Workload(f"{_op}-16384x4096-bf16", ((16384, 4096),), DType.bf16, {"p": 0.1, "seed": 7},
                                   backward=True)] if _op == "dropout" else [],
         _DROP_DOC[_op], arg_names=("input",), torch_name=f"torch.nn.functional.{_op}", dropin=_dropout_dropin(_op),
         grad=_g_dropout,
         saves=("state",), differentiable=(0,), cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, 0))
_reg("dropout_backward", _check_dropout("dropout_backward"),
     (Attr("variant", "str", REQUIRED, choices=DROPOUT_OPS),) + _DROP_ATTRS, FLOAT_TYPES,
     _x_samples(lambda i, r: tuple(dict(a, variant=("dropout", "alpha_dropout", "dropout2d")[i % 3])
                                   for a in _dropout_attrs(i, r)), shapes=((3, 5), (2, 3, 4), (0, 3), (2, 3, 4, 5))),
     _x_errors("dropout_backward", extra={"variant": "dropout"}),
     [Workload("dropout_backward-16384x4096-bf16", ((16384, 4096),), DType.bf16,
               {"variant": "dropout", "p": 0.1, "seed": 7})],
     "Dropout backward: the mask regenerated from (seed, offset), never stored: g * s where kept, 0 elsewhere.",
     arg_names=("grad",),
     cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, 0))


def _randperm_samples(rng):
    for i, n in enumerate((0, 1, 7, 64, 1000)):
        yield Sample((), {"n": n, "seed": 3 + i, "offset": i}, name=f"n{n}")


_reg("randperm", _check_randperm, (Attr("n", "int", REQUIRED, ge=0), _DTYPE, _SEED, _OFFSET),
     (DType.i64, DType.i32) + FLOAT_TYPES, _randperm_samples,
     lambda: iter([ErrorCase((), {"n": -1, "seed": 1}, InvalidProblemError, r"randperm: argument 'n'", "neg"),
                   ErrorCase((), {"n": 4, "seed": 1, "dtype": "u8"}, UnsupportedError, r"dtype u8", "dtype")]),
     [Workload("randperm-16384-i64", (), DType.i64, {"n": 16384, "seed": 7})],
     "A random permutation of 0 .. n - 1: the stable argsort of n stream words (torch.randperm).", cost=_out_cost,
     torch_name="torch.randperm", dropin=_randperm_dropin)


def _multinomial_samples(rng):
    for i, (shape, ns, rep) in enumerate((((5,), 3, False), ((5,), 8, True), ((3, 10), 4, False),
                                          ((3, 10), 6, True), ((2, 70), 69, False), ((4, 1), 1, False))):
        w = rng.uniform(0.0, 1.0, size=shape)
        if len(shape) == 2 and shape[1] > 3:
            w[:, 1] = 0.0       # a zero-weight category is never drawn
        yield Sample((w,), {"num_samples": ns, "replacement": rep, "seed": 9 + i}, name=f"{shape}n{ns}r{rep}")


_reg("multinomial", _check_multinomial,
     (Attr("num_samples", "int", REQUIRED, ge=1), Attr("replacement", "bool", False), _SEED, _OFFSET), FLOAT_TYPES,
     _multinomial_samples, _x_errors("multinomial", (3, 4), {"num_samples": 2}),
     [Workload("multinomial-64x128256-f32", ((64, 128256),), DType.f32, {"num_samples": 1, "seed": 7})],
     "Category indices drawn from each row's weights, with or without replacement (torch.multinomial).",
     arg_names=("input",),
     torch_name="torch.multinomial", dropin=_multinomial_dropin,
     cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, 0))

declare_rule_ops(__name__, "dropout_backward", "zeros_like")
