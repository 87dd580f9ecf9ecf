"""Compositions: the forms of a torch function that its op does not take, run as other baracuda drop-ins.

A spec's drop-in adapter returns None for such a form (``_namespaces._make`` then calls ``COMPOSITIONS[op]``, which
this module fills, with the adapter's own arguments); the forms the op takes never come here, so their path is
unchanged.

- ``instance_norm`` with running statistics (``track_running_stats``), torch's own composition: with the input
  statistics, ``batch_norm`` in training mode over the (1, N*C, *) view of x (each instance a channel) with the
  affine parameters and the running statistics repeated N times; the op's updated per-instance running statistics
  are averaged over N into the caller's buffers (in place, outside autograd, as torch; the variance update uses
  the unbiased per-instance variance).  ``use_input_stats=False`` is ``batch_norm``'s eval mode on x as it is (the
  running statistics normalize every instance alike).
- ``linear_cross_entropy`` beyond the fused op (a K-dim ``linear_weight`` (C, d_1..d_K, H), class probabilities,
  reduction='none', class weights): torch's reference, ``linear`` then ``cross_entropy`` on the logits reshaped
  to (N, C, d_1..d_K) (the dims after the class dim act as cross_entropy's spatial dims).
- ``norm`` with ``p='nuc'``: ``matrix_norm(ord='nuc')`` over the given dims (all of a 2-D input's when None).
- ``scaled_dot_product_attention`` with a float ``attn_mask`` that requires a gradient (a learned bias: torch's
  math path differentiates it, the fused kernels do not): the materialized scores q k^T * scale + mask, softmax
  (a fully -inf row gives 0, torch's safe softmax), torch's dropout, times v; GQA repeats the kv heads.
"""
from __future__ import annotations

import math

import torch

from .._core.errors import ArgumentTypeError, InvalidProblemError, UnsupportedError
from .._core.spec import get_spec
from ..ops.norm_group import affine_operands
from ._call import call
from ._namespaces import COMPOSITIONS, _make

# the drop-ins the compositions run (the ones baracuda.torch publishes under these names)
_repeat = _make(get_spec("repeat"), "torch.Tensor.repeat")
_mean = _make(get_spec("mean"), "torch.mean")
_linear = _make(get_spec("linear"), "torch.nn.functional.linear")
_cross_entropy = _make(get_spec("cross_entropy"), "torch.nn.functional.cross_entropy")
_matmul = _make(get_spec("matmul"), "torch.matmul")
_softmax = _make(get_spec("softmax"), "torch.nn.functional.softmax")
_repeat_interleave = _make(get_spec("repeat_interleave"), "torch.repeat_interleave")


def _instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                   momentum=0.1, eps=1e-5):
    op = "instance_norm"
    if (running_mean is None) != (running_var is None):
        raise InvalidProblemError(op, "running_var", "both running statistics or neither",
                                  "only running_mean" if running_var is None else "only running_var")
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise ArgumentTypeError(op, "momentum", "a float", type(momentum).__name__)
    attrs = {"momentum": float(momentum), "eps": eps}
    if not use_input_stats:
        if running_mean is None:
            raise InvalidProblemError(op, "running_mean", "running statistics when use_input_stats=False", None)
        ins = (input,) + affine_operands(input, weight, bias, need_bias=True) + (running_mean, running_var)
        return call("batch_norm", ins, dict(attrs, training=False))[0]
    n, c = input.shape[:2]
    if input.numel() == 0:
        # torch's batch_norm leaves the (repeated) running statistics of an empty input alone, and their average
        # over N is then the old values for N > 0, the mean of nothing (NaN) for N = 0
        if n == 0:
            with torch.no_grad():
                running_mean.fill_(math.nan)
                running_var.fill_(math.nan)
        return call(op, (input,) + affine_operands(input, weight, bias), {"eps": eps})[0]
    def per_instance(t):
        return None if t is None else _repeat(t, n)

    xr = input.reshape(1, n * c, *input.shape[2:])
    ins = ((xr,) + affine_operands(xr, per_instance(weight), per_instance(bias), need_bias=True)
           + (per_instance(running_mean), per_instance(running_var)))
    y, _, _, new_mean, new_var = call("batch_norm", ins, dict(attrs, training=True))
    with torch.no_grad():
        running_mean.copy_(_mean(new_mean.reshape(n, c), 0))
        running_var.copy_(_mean(new_var.reshape(n, c), 0))
    return y.reshape(input.shape)


def _linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                          ignore_index=None, label_smoothing=0.0, options=None, softcap=None, z_loss=0.0):
    op = "linear_cross_entropy"
    if softcap is not None or z_loss:
        raise UnsupportedError(op, "softcap / z_loss (baracuda's extensions) need the fused form: a 2-D "
                               "linear_weight, class-index targets, reduction 'mean' or 'sum', no class weight")
    # torch's own checks (torch.nn.functional.linear_cross_entropy), before the shapes reach linear
    if input.dim() not in (1, 2):
        raise InvalidProblemError(op, "input", "a 1-D or 2-D tensor ((in_features) or (N, in_features))",
                                  tuple(input.shape))
    if linear_weight.dim() < 2:
        raise InvalidProblemError(op, "linear_weight", "at least 2 dimensions (C, d_1..d_K, in_features)",
                                  tuple(linear_weight.shape))
    h, num_classes, out_features = input.shape[-1], linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_weight.shape[-1] != h:
        raise InvalidProblemError(op, "linear_weight", f"last dimension {h} (the in_features of input)",
                                  tuple(linear_weight.shape))
    classes = (num_classes,) + out_features
    if linear_bias is not None and tuple(linear_bias.shape) != classes:
        raise InvalidProblemError(op, "linear_bias", f"shape {classes}", tuple(linear_bias.shape))
    if out_features and input.dim() == 1:
        raise InvalidProblemError(op, "input", f"a batched (N, {h}) input for the K-dim linear_weight "
                                  f"{tuple(linear_weight.shape)}", tuple(input.shape))
    logits_shape = tuple(input.shape[:-1]) + classes
    if tuple(target.shape) == logits_shape and ignore_index is not None:   # (torch's test for probabilities)
        raise InvalidProblemError(op, "ignore_index", "None when target holds class probabilities", ignore_index)
    if out_features:    # one GEMM over the C * d_1..d_K flattened classes
        linear_weight = linear_weight.reshape(-1, h)
        linear_bias = None if linear_bias is None else linear_bias.reshape(-1)
    logits = _linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return _cross_entropy(logits, target, weight=weight, reduction=reduction,
                          ignore_index=-100 if ignore_index is None else ignore_index,
                          label_smoothing=label_smoothing)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    # (the adapter sends only a float mask requiring a gradient here: no is_causal, the operands already checked)
    hq, hk = (query.shape[-3] if query.dim() > 2 else 1), (key.shape[-3] if key.dim() > 2 else 1)
    if enable_gqa and hk not in (1, hq):
        key, value = _repeat_interleave(key, hq // hk, -3), _repeat_interleave(value, hq // hk, -3)
    s = _matmul(query, key.transpose(-2, -1)) * (1 / math.sqrt(query.shape[-1]) if scale is None else scale)
    p = _softmax(s + attn_mask, -1)
    p = torch.where(torch.isnan(p), 0.0, p)            # rows with every score -inf: 0, as torch's safe softmax
    if dropout_p > 0:
        p = torch.nn.functional.dropout(p, dropout_p)
    return _matmul(p, value)


# op -> its composition, called with the arguments of the op's drop-in adapter (the op's torch signature)
def _norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm(p='nuc'): linalg's matrix_norm over ``dim`` (all of a 2-D input's dims when None; torch's own
    rule, whose error for another rank is matrix_norm's)."""
    _matrix_norm = _make(get_spec("matrix_norm"), "torch.linalg.matrix_norm")
    dims = tuple(range(input.dim())) if dim is None else tuple(dim)
    return _matrix_norm(input, "nuc", dims, keepdim, dtype=dtype)


COMPOSITIONS.update(norm=_norm, instance_norm=_instance_norm, linear_cross_entropy=_linear_cross_entropy, sdpa=_sdpa)

__all__: list[str] = []
