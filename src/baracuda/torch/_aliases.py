"""Twins: torch functions that compute what a published drop-in computes under another name or signature.

torch exposes many functions twice: ``torch.softmax(input, dim, dtype=None)`` and ``F.softmax(input, dim=None,
_stacklevel=3, dtype=None)``, ``torch.special.logsumexp`` and ``torch.logsumexp``, ``torch.layer_norm`` (with a
``cudnn_enable`` hint) and ``F.layer_norm``, ``torch.kl_div(input, target, reduction=0)`` (torch's integer
reduction: 0 none, 1 mean, 2 sum; torch reduces by ``mean`` for 1, ``sum`` for 2 and not at all for any other
value) and ``F.kl_div(..., reduction='mean')``.  Note the default: the ATen schemas of these losses say
``reduction=Mean``, but torch's Python bindings do not reduce when ``reduction`` is not given
(``torch.kl_div(x, y).shape == x.shape``, torch 2.13); the twins do what torch's Python functions do.

``TWINS`` maps each twin to the published drop-in whose op it runs, with a translator written with the twin's exact
torch signature into that drop-in's signature (None: the signatures are the same). ``tests/torch/test_mirror.py``
finds the twins of every published drop-in in torch's namespaces (same name, or torch's "Alias for" docstring) and
checks each is here or listed as not the same function.

``round`` is here too: the ``round`` op rounds half to even; ``decimals=`` is torch's composition (scale by
``10**decimals``, round, unscale, in ``float32`` for half types, as torch's CPU kernel), run through baracuda's
ops.  Deliberate difference: torch raises for an integer input when ``decimals`` is passed explicitly (even 0),
where baracuda returns the copy ``torch.round(int_tensor)`` returns.

``rrelu`` (F.rrelu and torch.rrelu) is here too: eval mode is the ``rrelu`` op; training mode draws the slopes from
torch's RNG (``_rrelu_noise``: torch's own values on the CPU) and runs ``rrelu_with_noise(x, noise)``.
"""
from __future__ import annotations

import torch

from .._core.dtypes import DType, as_dtype
from .._core.errors import UnsupportedError
from .._core.spec import get_spec
from ..ops.activation import rrelu_bounds
from ..ops.conv import CONV_TWINS
from ..ops.elementwise import scalar_operand
from . import _linalg_twins
from ._call import call
from ._namespaces import _make


def _reduction(r) -> str:
    """torch's integer reduction (``at::Reduction``) as the string of ``torch.nn.functional``'s losses."""
    if type(r) is not int:
        raise TypeError(f"argument 'reduction' must be int, not {type(r).__name__}")
    return {1: "mean", 2: "sum"}.get(r, "none")


def _no_out(op: str, out) -> None:
    if out is not None:   # (the published drop-in takes none either)
        raise UnsupportedError(op, "argument 'out'")


def _dim_dtype(op: str):                                      # torch.softmax, torch.log_softmax
    def translate(input, dim, dtype=None, *, out=None):
        _no_out(op, out)
        return (input, dim), {"dtype": dtype}
    return translate


def _dim_dtype_no_out(input, dim, dtype=None):               # torch.special.softmax
    return (input, dim), {"dtype": dtype}


def _dim_kw_dtype(input, dim, *, dtype=None):                # torch.special.log_softmax
    return (input, dim), {"dtype": dtype}


def _only_input(input):                                      # F.sigmoid, F.tanh, torch.selu (no out=)
    return (input,), {}


def _only_input_out(op: str):                                 # torch.relu (F.relu takes inplace=)
    def translate(input, *, out=None):
        _no_out(op, out)
        return (input,), {}
    return translate


def _orgqr(input, input2, *, out=None):                     # torch.orgqr -> linalg.householder_product
    _no_out("householder_product", out)
    return (input, input2), {}


def _concatenate(tensors, axis=0, *, out=None):
    return (tensors, axis), {"out": out}


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return (input, normalized_shape, weight, bias, eps), {}  # (cudnn_enable: a backend hint of torch's)


def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return (input, num_groups, weight, bias, eps), {}


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return (input, running_mean, running_var, weight, bias, training, momentum, eps), {}


def _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return (input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps), {}


def _celu(input, alpha=1.0, *, out=None):
    _no_out("celu", out)
    return (input, alpha), {}


def _hardshrink(input, lambd=0.5, *, out=None):
    _no_out("hardshrink", out)
    return (input, lambd), {}


def _threshold(input, threshold, value, *, out=None):
    _no_out("threshold", out)
    return (input, threshold, value), {}


def _bce_with_logits(input, target, weight=None, pos_weight=None, reduction=0, *, out=None):
    _no_out("binary_cross_entropy_with_logits", out)
    return (input, target, weight), {"reduction": _reduction(reduction), "pos_weight": pos_weight}


def _cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return (input1, input2, target, margin), {"reduction": _reduction(reduction)}


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    return (log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity), {}


def _hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return (input, target, margin), {"reduction": _reduction(reduction)}


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False, *, out=None):
    _no_out("embedding", out)
    # ATen's order (weight first); a negative padding_idx is "none" there (F.embedding wraps before calling it)
    return (indices, weight), {"padding_idx": None if padding_idx < 0 else padding_idx,
                             "scale_grad_by_freq": scale_grad_by_freq, "sparse": sparse}


def _kl_div(input, target, reduction=0, *, log_target=False):
    return (input, target), {"reduction": _reduction(reduction), "log_target": log_target}


def _margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return (input1, input2, target, margin), {"reduction": _reduction(reduction)}


def _poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return (input, target, log_input, full), {"eps": eps, "reduction": _reduction(reduction)}


def _triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, reduction=0):
    return (anchor, positive, negative, margin, p, eps, swap), {"reduction": _reduction(reduction)}


def _dropout_train(input, p, train):                         # torch.dropout / alpha_dropout / feature_alpha_dropout
    return (input, p, train), {}


def _upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):   # F.upsample (deprecated)
    return (input, size, scale_factor, mode, align_corners), {}


def _upsample_bilinear(input, size=None, scale_factor=None):   # F.upsample_bilinear: align_corners=True
    return (input, size, scale_factor, "bilinear", True), {}


def _upsample_nearest(input, size=None, scale_factor=None):
    return (input, size, scale_factor, "nearest"), {}


def _max_pool_idx(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 return_indices=False):                         # F.max_pool{n}d_with_indices: always (y, indices)
    return (input, kernel_size, stride, padding, dilation, ceil_mode, True), {}


def _torch_max_pool(n: int, indices: bool = False):
    """torch.max_pool{n}d / torch.max_pool1d_with_indices: ATen's defaults (lists, never mutated)."""
    def translate(input, kernel_size, stride=[], padding=[0] * n, dilation=[1] * n, ceil_mode=False):  # noqa: B006
        return (input, kernel_size, stride, padding, dilation, ceil_mode) + ((True,) if indices else ()), {}
    return translate


def _adaptive_idx(input, output_size, return_indices=False):   # F.adaptive_max_pool{n}d_with_indices
    return (input, output_size, True), {}


def _torch_adaptive_max_pool1d(input, output_size):            # torch.adaptive_max_pool1d: (y, indices)
    return (input, output_size, True), {}


def _fractional_idx(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                    _random_samples=None):                     # F.fractional_max_pool{n}d_with_indices
    return (input, kernel_size, output_size, output_ratio, True, _random_samples), {}


_F = "nn.functional."
# torch name (relative to torch) -> (the published drop-in it runs, translator from its torch signature or None)
def _like_kwargs(torch_op, input, generator, dtype, layout, device, pin_memory, memory_format, requires_grad, out):
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{torch_op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    _no_out(torch_op, out)
    if memory_format not in (None, torch.preserve_format, torch.contiguous_format):
        raise UnsupportedError(torch_op, f"memory_format={memory_format} (the result is contiguous)")
    return {"generator": generator, "dtype": input.dtype if dtype is None else dtype, "layout": layout,
            "device": input.device if device is None else device, "pin_memory": bool(pin_memory),
            "requires_grad": requires_grad}


def _random_like(torch_op: str):
    """torch.rand_like / randn_like(input): the input's shape, dtype and device, drawn by torch.rand / randn (the
    result is contiguous: the values are random in any memory order)."""
    def translate(input, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
                  memory_format=None, out=None, requires_grad=False):
        return (tuple(input.shape),) if isinstance(input, torch.Tensor) else (), _like_kwargs(
            torch_op, input, generator, dtype, layout, device, pin_memory, memory_format, requires_grad, out)
    return translate


def _randint_like(input, low, high=None, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
                  memory_format=None, out=None, requires_grad=False):
    """torch.randint_like(input, high) / (input, low, high): torch.randint over the input's shape, dtype, device."""
    kw = _like_kwargs("randint_like", input, generator, dtype, layout, device, pin_memory, memory_format,
                      requires_grad, out)
    low, high = (0, low) if high is None else (low, high)
    return (low, high, tuple(input.shape)), kw


TWINS = {
    "rand_like": ("rand", _random_like("rand_like")), "randn_like": ("randn", _random_like("randn_like")),
    "randint_like": ("randint", _randint_like),
    "softmax": (_F + "softmax", _dim_dtype("softmax")), "log_softmax": (_F + "log_softmax", _dim_dtype("log_softmax")),
    "special.softmax": (_F + "softmax", _dim_dtype_no_out), "special.log_softmax": (_F + "log_softmax", _dim_kw_dtype),
    "special.logsumexp": ("logsumexp", None), "linalg.matmul": ("matmul", None),
    "concat": ("cat", None), "concatenate": ("cat", _concatenate),
    _F + "sigmoid": ("sigmoid", _only_input), _F + "tanh": ("tanh", _only_input),
    "relu": (_F + "relu", _only_input_out("relu")), "selu": (_F + "selu", _only_input),
    "layer_norm": (_F + "layer_norm", _layer_norm), "group_norm": (_F + "group_norm", _group_norm),
    "batch_norm": (_F + "batch_norm", _batch_norm), "instance_norm": (_F + "instance_norm", _instance_norm),
    "rms_norm": (_F + "rms_norm", None),
    "celu": (_F + "celu", _celu), "hardshrink": (_F + "hardshrink", _hardshrink),
    "threshold": (_F + "threshold", _threshold),
    "binary_cross_entropy_with_logits": (_F + "binary_cross_entropy_with_logits", _bce_with_logits),
    "cosine_embedding_loss": (_F + "cosine_embedding_loss", _cosine_embedding_loss),
    "ctc_loss": (_F + "ctc_loss", _ctc_loss), "embedding": (_F + "embedding", _embedding),
    "hinge_embedding_loss": (_F + "hinge_embedding_loss", _hinge_embedding_loss),
    "kl_div": (_F + "kl_div", _kl_div), "margin_ranking_loss": (_F + "margin_ranking_loss", _margin_ranking_loss),
    "poisson_nll_loss": (_F + "poisson_nll_loss", _poisson_nll_loss),
    "triplet_margin_loss": (_F + "triplet_margin_loss", _triplet_margin_loss),
    **{n: (_F + n, _dropout_train) for n in ("dropout", "alpha_dropout", "feature_alpha_dropout")},
    _F + "upsample": (_F + "interpolate", _upsample), _F + "upsample_bilinear": (_F + "interpolate", _upsample_bilinear),
    _F + "upsample_nearest": (_F + "interpolate", _upsample_nearest),
    **CONV_TWINS,   # conv1d/2d/3d, conv_transpose1d/2d/3d (torch. and nn.functional.) -> torch.convolution
    # pooling (ops/pool*.py): the *_with_indices forms return (y, indices)
    **{f"max_pool{n}d": (_F + f"max_pool{n}d", _torch_max_pool(n)) for n in (1, 2, 3)},
    **{_F + f"max_pool{n}d_with_indices": (_F + f"max_pool{n}d", _max_pool_idx) for n in (1, 2, 3)},
    **{_F + f"adaptive_max_pool{n}d_with_indices": (_F + f"adaptive_max_pool{n}d", _adaptive_idx) for n in (1, 2, 3)},
    **{_F + f"fractional_max_pool{n}d_with_indices": (_F + f"fractional_max_pool{n}d", _fractional_idx)
       for n in (2, 3)},
    "max_pool1d_with_indices": (_F + "max_pool1d", _torch_max_pool(1, indices=True)),
    "adaptive_max_pool1d": (_F + "adaptive_max_pool1d", _torch_adaptive_max_pool1d),
    # linear algebra (torch.svd / qr / cross / pinverse / linalg.norm: _linalg_twins.py)
    "matrix_exp": ("linalg.matrix_exp", _only_input), "orgqr": ("linalg.householder_product", _orgqr),
}


# -- round(input, *, decimals=0, out=None) ---------------------------------------------------------------------
def _round_to(x, decimals: int):
    """torch's rounding to ``decimals``: ``nearbyint(x * 10**d) / 10**d`` (d > 0), ``nearbyint(x / 10**-d) * 10**-d``
    (d < 0), with ``10**|d|`` and the arithmetic in the input's compute type (float32 for half types)."""
    if not (x.is_floating_point() and x.dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16)):
        raise UnsupportedError("round", f"decimals={decimals} on a {x.dtype} input (torch has no such kernel either)")
    half = x.dtype in (torch.float16, torch.bfloat16)
    y = call("to_dtype", (x,), {"dtype": DType.f32}) if half else x
    scale = scalar_operand(10.0 ** abs(decimals), y.dtype, y.device)
    first, then = ("mul", "div") if decimals > 0 else ("div", "mul")
    r = call(then, (call("round", (call(first, (y, scale), {}),), {}), scale), {})
    return call("to_dtype", (r,), {"dtype": as_dtype(x.dtype)}) if half else r


def _publish_round(put, published: dict) -> None:
    whole = _make(get_spec("round"), "torch.round")

    def round(input, *, decimals=0, out=None):   # noqa: A001  (torch's name)
        """baracuda drop-in for ``torch.round``: half to even (op ``round``); ``decimals=`` scales by 10**decimals,
        rounds and unscales, through baracuda's ops (torch's formula)."""
        if type(decimals) is not int:
            raise TypeError(f"round(): argument 'decimals' must be int, not {type(decimals).__name__}")
        if decimals == 0:
            return whole(input) if out is None else whole(input, out=out)
        if out is not None:
            raise UnsupportedError("round", "argument 'out' with decimals")
        return _round_to(input, decimals)

    for key in ("round", "special.round"):
        put(key, round)
        published[key] = "round"


# -- rrelu: F.rrelu(input, lower, upper, training, inplace), torch.rrelu(input, lower, upper, training, generator) --
def _rrelu_noise(x, lower: float, upper: float, generator):
    """rrelu's random slopes, drawn from torch's RNG (``generator`` or the default one of x's device) in the compute
    dtype: float64 for float64 x, else float32 with the bounds rounded to float32 first (torch's opmath).  On the
    CPU they follow torch's own stream: one double per element x <= 0, in x's row-major order, by torch's formula
    (torch's CPU kernel draws exactly those), so the result is torch's.  Elsewhere (a GPU, a tracer) one draw per element: the same
    distribution, not torch's CUDA values (its kernel has its own Philox layout)."""
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    lo, hi = (torch.tensor(float(v), dtype=ct).item() for v in (lower, upper))
    if x.device.type == "cpu" and type(x) in (torch.Tensor, torch.nn.Parameter) and not torch.compiler.is_compiling():
        neg = x.detach() <= 0
        # torch's draw: u * (upper - lower) + lower in double, u a uniform double in [0, 1) (uniform_(lo, hi) rounds
        # differently: 1 ulp off in ~20% of the draws)
        u = torch.empty(int(neg.sum()), dtype=torch.float64).uniform_(0.0, 1.0, generator=generator)
        r = u.mul_(hi - lo).add_(lo)
        return torch.ones(x.shape, dtype=ct).masked_scatter_(neg, r.to(ct))
    return torch.empty(x.shape, dtype=ct, device=x.device).uniform_(lo, hi, generator=generator)


def _publish_rrelu(put, published: dict) -> None:
    evalmode = _make(get_spec("rrelu"), "torch.nn.functional.rrelu")

    def run(input, lower, upper, training, generator):
        if not training:
            return evalmode(input, lower, upper, training)
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"rrelu(): argument 'input' must be a Tensor, not {type(input).__name__}")
        for name, v in (("lower", lower), ("upper", upper)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"rrelu(): argument '{name}' must be a number, not {type(v).__name__}")
        rrelu_bounds("rrelu", lower, upper)
        return call("rrelu_with_noise", (input, _rrelu_noise(input, lower, upper, generator)), {})

    def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
        """baracuda drop-in for ``torch.nn.functional.rrelu``: eval mode is the op ``rrelu`` (slope (lower + upper)
        / 2); ``training=True`` draws one slope per element x <= 0 from torch's RNG (on the CPU torch's own values)
        and runs ``rrelu_with_noise(x, noise)``, whose gradient is the drawn slope there."""
        if inplace:
            raise UnsupportedError("rrelu", "argument 'inplace' of the torch signature is not supported")
        return run(input, lower, upper, training, None)

    def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
        return run(input, lower, upper, training, generator)

    rrelu_.__name__ = rrelu_.__qualname__ = "rrelu"
    rrelu_.__doc__ = ("baracuda drop-in for ``torch.rrelu`` (``generator=``: the slopes' random source); see "
                      "``baracuda.torch.nn.functional.rrelu``.")
    for key, fn in ((_F + "rrelu", rrelu), ("rrelu", rrelu_)):
        put(key, fn)
        published[key] = "rrelu"


def _torch_object(key: str):
    obj = torch
    for part in key.split("."):
        obj = getattr(obj, part, None)
    return obj


OWNED = frozenset(TWINS) | {"round", "special.round", _F + "rrelu", "rrelu"} | _linalg_twins.OWNED


def publish(put, published: dict) -> None:
    """Set every twin (and ``round``, ``rrelu``) on the mirror (``put(key, fn)``) and record it in ``published``."""
    made: dict = {}   # torch object -> its drop-in: two names of one object (torch.conv2d is F.conv2d) share it
    for key, (target, translate) in TWINS.items():
        op = published[target]
        # (keyed by the torch object: one translator may serve several functions, _only_input does)
        obj = _torch_object(key)
        fn = made.get(id(obj)) if obj is not None else None
        if fn is None:
            fn = _make(get_spec(op), "torch." + key, translate)
            if obj is not None:
                made[id(obj)] = fn
        put(key, fn)
        published[key] = op
    _publish_round(put, published)
    _publish_rrelu(put, published)
    _linalg_twins.publish(put, published)


__all__ = ["TWINS", "OWNED", "publish"]
