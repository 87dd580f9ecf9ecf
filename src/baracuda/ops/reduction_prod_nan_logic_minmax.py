"""The rest of the reductions, on the rules of ``reduction.py``: prod, nansum, nanmean, any, all, count_nonzero,
aminmax, and max/min (``dim=None``: the value; ``dim=k``: (values, indices), torch.return_types.max/min), with
their fused backward ops ``prod_backward``, ``nansum_backward`` and ``value_select_backward``.

Semantics (torch's):
  * prod: empty = 1; ints/bool -> int64 (wrapping); ``dtype=`` converts first.  Gradient: the product of
    the other elements of the slice -- with no zero ``g * out / x``; with exactly one zero the zero's
    position gets ``g * prod(non-zeros)`` and every other position 0; with two or more zeros 0 everywhere.
    Non-finite values follow the exclusive-product rule torch's dim path computes (a position whose other
    elements hold a zero and an inf/NaN gets NaN).
  * nansum: NaNs count as 0 (an inf - inf is still NaN); empty = 0.  nanmean: nansum / (number of non-NaN),
    all-NaN or empty = NaN; floating inputs only.  Gradients: ``g`` (``g / count``) where x is not NaN, 0 at NaNs.
  * any/all: NaN is true; empty any = False, all = True; bool output (uint8 for uint8 inputs).
    count_nonzero: int64, no keepdim.  None of them is differentiable.
  * aminmax: (amin, amax) in one call, errors on empty reductions; gradients as amin/amax (split among ties).
  * max/min(dim): values and the first index of the extremum (the first NaN if any); the values' gradient
    goes to that index only.  max/min() without dim: the value, gradient split evenly among the elements
    equal to it (NaN results: among the NaNs), torch's evenly_distribute_backward.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from .reduction import (ALL_TYPES, FWD_SHAPE, KEEPDIM, NUM_TYPES, RedDef, _dropin_dims, _norm_dims, _tdims, dims_attr,
                        exact_tol, float_grad, full_dims, fwd_rank, reduced_shape, register_reductions,
                        sum_tol)

__all__ = ["MORE_SPECS"]


# -- torch peers --------------------------------------------------------------------------------
def _all_or(fn, x, dims, keepdim, **kw):
    """torch reductions that take no tuple of dims (prod) or no keepdim without dim: reduce the axes one by one."""
    d = _tdims(dims)
    if d is None or x.dim() == 0:
        r = fn(x, **kw)
        return r.reshape([1] * x.dim()) if keepdim else r
    d = sorted({a % x.dim() for a in d}, reverse=True)
    for k, a in enumerate(d):
        x = fn(x, a, keepdim=True, **({} if k else kw))   # dtype= converts once, at the first step
    return x.reshape([s for i, s in enumerate(x.shape) if i not in d]) if not keepdim else x


def _tkw(dtype):
    return {} if dtype is None else {"dtype": as_dtype(dtype).torch}


def _dt(dtype):
    return None if dtype is None else as_dtype(dtype)


def _peer_prod(x, dims=None, keepdim=False, dtype=None):
    import torch

    return _all_or(torch.prod, x, dims, keepdim, **_tkw(dtype))


def _peer_nan(fn):
    def peer(x, dims=None, keepdim=False, dtype=None):
        import torch

        d = _tdims(dims)
        if d is None or x.dim() == 0:
            r = getattr(torch, fn)(x, **_tkw(dtype))
            return r.reshape([1] * x.dim()) if keepdim else r
        return getattr(torch, fn)(x, dim=d, keepdim=keepdim, **_tkw(dtype))
    return peer


def _peer_logic(fn):
    def peer(x, dims=None, keepdim=False):
        import torch

        d = _tdims(dims)
        if d is None or x.dim() == 0:
            r = getattr(torch, fn)(x)
            return r.reshape([1] * x.dim()) if keepdim else r
        return getattr(torch, fn)(x, dim=tuple(d), keepdim=keepdim)
    return peer


def _peer_count(x, dims=None):
    import torch

    d = _tdims(dims)
    return torch.count_nonzero(x) if d is None or x.dim() == 0 else torch.count_nonzero(x, dim=tuple(d))


def _peer_aminmax(x, dim=None, keepdim=False):
    import torch

    return tuple(torch.aminmax(x, dim=dim, keepdim=keepdim))


def _peer_sel(fn):
    def peer(x, dim=None, keepdim=False):
        import torch

        if dim is None:
            r = getattr(torch, fn)(x)
            return r.reshape([1] * x.dim()) if keepdim else r
        return tuple(getattr(torch, fn)(x, dim, keepdim=keepdim))
    return peer


# -- drop-in adapters (torch's signatures) -------------------------------------------------------
def _dropin_prod(input, dim=None, keepdim=False, *, dtype=None):
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
        raise TypeError(f"baracuda.torch.prod: dim must be an int (torch.prod reduces one dim), got {dim!r}")
    return (input,), {"dims": dim, "keepdim": keepdim, "dtype": _dt(dtype)}


def _dropin_nan(input, dim=None, keepdim=False, *, dtype=None):
    return (input,), {"dims": _dropin_dims(dim), "keepdim": keepdim, "dtype": _dt(dtype)}


def _dropin_logic(input, dim=None, keepdim=False):
    return (input,), {"dims": _dropin_dims(dim), "keepdim": keepdim}


def _dropin_count(input, dim=None):
    return (input,), {"dims": _dropin_dims(dim)}


def _dropin_aminmax(input, *, dim=None, keepdim=False):
    return (input,), {"dim": dim, "keepdim": keepdim}


def _dropin_sel(fn):
    def dropin(input, dim=None, keepdim=False):
        import torch

        if isinstance(dim, torch.Tensor):
            # (baracuda.torch.max routes max(input, other) to the elementwise maximum before this adapter; a tensor
            # here came with more arguments, which torch refuses too)
            raise TypeError(f"{fn}() received an invalid combination of arguments: with a tensor 'other', "
                            f"torch.{fn}(input, other) is the elementwise {fn}imum and takes no dim or keepdim")
        return (input,), {"dim": dim, "keepdim": keepdim}
    return dropin


def _result(kind):
    def result(out):
        import torch

        return out if isinstance(out, torch.Tensor) else getattr(torch.return_types, kind)(out)
    return result


# -- backward rules -------------------------------------------------------------------------------
def _g_prod(ctx, d, grads, s):
    if not float_grad(d, grads):
        return (None,)
    x = d.inputs[0]
    g = grads[0]
    if d.outputs[0].dtype != x.dtype:   # dtype=: the gradient comes back in the input's dtype
        g = ctx.op("to_dtype", g, dtype=x.dtype)
    return (ctx.op("prod_backward", g, s["x"], dims=d.attr("dims"), keepdim=d.attr("keepdim")),)


def _g_nan(mean):
    def rule(ctx, d, grads, s):
        if not float_grad(d, grads):
            return (None,)
        x = d.inputs[0]
        g = grads[0]
        if d.outputs[0].dtype != x.dtype:
            g = ctx.op("to_dtype", g, dtype=x.dtype)
        return (ctx.op("nansum_backward", g, s["x"], dims=d.attr("dims"), keepdim=d.attr("keepdim"), mean=mean),)
    return rule


def _g_aminmax(ctx, d, grads, s):
    if not d.inputs[0].dtype.is_floating:
        return (None,)
    kw = {"dims": d.attr("dim"), "keepdim": d.attr("keepdim")}
    parts = [ctx.op("amax_backward", g, s["x"], s[f"out{j}"], **kw) for j, g in enumerate(grads) if g is not None]
    if not parts:
        return (None,)
    return (parts[0] if len(parts) == 1 else ctx.op("add", parts[0], parts[1]),)


def _g_sel(ctx, d, grads, s):
    x = d.inputs[0]
    if not x.dtype.is_floating or grads[0] is None:
        return (None,)
    if d.attr("dim") is None:
        return (ctx.op("amax_backward", grads[0], s["x"], s["out"] if "out" in s else s["out0"], dims=None,
                       keepdim=d.attr("keepdim"), nan=True),)
    return (ctx.op("value_select_backward", grads[0], s["out1"], shape=x.shape, dim=d.attr("dim"),
                   keepdim=d.attr("keepdim")),)


# -- samples ----------------------------------------------------------------------------------------
_CASES = [((7,), None), ((3, 5), 1), ((3, 5), 0), ((33, 65), -1), ((33, 65), 0), ((2, 3, 4, 5), (0, 2)),
          ((2, 3, 4, 5), (1, 2)), ((), None), ((4, 1, 3), 1), ((0, 4), 0), ((0, 4), 1)]


def _prod_samples(name):
    def samples(rng):
        for i, (shape, dims) in enumerate(_CASES):
            # magnitudes in [0.6, 1.4]: a product of 65 stays well inside f16's range
            x = rng.uniform(0.6, 1.4, shape) * rng.choice([-1.0, 1.0], shape)
            if x.ndim == 2 and x.size:
                x[0, 1] = 0.0                               # one zero in a slice
                x[-1, 0] = x[-1, -1] = 0.0                  # two zeros in a slice
            yield Sample((x,), {"dims": dims, "keepdim": i % 3 == 1}, name=f"{shape}-dims{dims}", grad=x.size <= 64)
        yield Sample((rng.uniform(0.5, 1.5, (3, 5)),), {"dims": 1, "dtype": DType.f64}, name="dtype=f64")
        x = rng.uniform(0.5, 1.5, (4, 6))
        x[1, 2] = 0.0
        yield Sample((x,), {"dims": None}, name="all-one-zero")
    return samples


def _nan_samples(name):
    def samples(rng):
        # gradient checks: isolated NaNs (an all-NaN slice has a NaN result, so finite differences are NaN)
        for shape, dims in [((3, 5), 1), ((4, 3), 0)]:
            x = rng.standard_normal(shape)
            x[1, 2] = x[2, 0] = np.nan
            yield Sample((x,), {"dims": dims}, name=f"{shape}-dims{dims}-isolated-nan")
        for i, (shape, dims) in enumerate(_CASES):
            x = rng.standard_normal(shape)
            if x.ndim == 2 and x.size:
                x[0, :] = np.nan                            # an all-NaN slice
                x[-1, 0] = np.nan
            yield Sample((x,), {"dims": dims, "keepdim": i % 3 == 1}, name=f"{shape}-dims{dims}", grad=x.ndim != 2)
        yield Sample((rng.standard_normal((3, 5)),), {"dims": 1, "dtype": DType.f64}, name="dtype=f64")
    return samples


def _logic_samples(name):
    def samples(rng):
        for i, (shape, dims) in enumerate(_CASES + [((2, 3, 4, 5), None)]):
            x = rng.choice([0.0, 1.5, -1.0, 0.25], size=shape, p=[0.3, 0.3, 0.3, 0.1])
            if x.ndim == 2 and x.size:
                x[:, 0] = 1.0                               # a slice with no zero along dim 0
                x[0, :] = 2.0                               # and one along dim 1
                x[-1, -1] = np.nan                          # NaN is non-zero
            attrs = {"dims": dims} if name == "count_nonzero" else {"dims": dims, "keepdim": i % 3 == 1}
            yield Sample((x,), attrs, name=f"{shape}-dims{dims}")
    return samples


def _sel_samples(name):
    def samples(rng):
        # distinct values for the gradient checks (the index-selecting gradient has no derivative at a tie)
        for shape, dim, keep in [((3, 5), 1, False), ((4, 3), 0, True), ((2, 3, 4), None, False)]:
            x = rng.permutation(np.prod(shape)).reshape(shape) * 0.25 - 1.0
            yield Sample((x,), {"dim": dim, "keepdim": keep}, name=f"{shape}-dim{dim}-distinct")
        cases = [((7,), None), ((3, 5), 1), ((3, 5), 0), ((33, 65), -1), ((33, 65), 0), ((2, 3, 4, 5), 2),
                 ((2, 3, 4, 5), None), ((), None), ((), 0), ((0, 4), 1)]
        for i, (shape, dim) in enumerate(cases):
            # small integers: ties (first index / even split) are frequent and exact in every dtype
            x = rng.integers(-3, 4, size=shape).astype(np.float64) + (0.5 if i % 2 else 0.0)
            yield Sample((x,), {"dim": dim, "keepdim": i % 2 == 1}, name=f"{shape}-dim{dim}", grad=False)
    return samples


# -- the fused backward ops ------------------------------------------------------------------------
def _bw_common(op, inputs, names):
    if len(inputs) != len(names):
        raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))


def _check_grad_x(op):
    def check(inputs, attrs):
        _bw_common(op, inputs, ("grad", "x"))
        MORE_SPECS[op].check_dtypes(inputs)
        g, x = inputs
        dims = attrs["dims"] = full_dims(attrs["dims"], len(x.shape))
        keepdim = attrs["keepdim"]
        want = reduced_shape(x.shape, dims, keepdim)
        if g.shape != want:
            raise InvalidProblemError(op, "grad", f"shape {want} (x reduced over {dims})", g.shape)
        if g.dtype != x.dtype:
            raise DTypeMismatchError(op, "grad", str(x.dtype), str(g.dtype))
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


def _check_select_bw(inputs, attrs):
    op = "value_select_backward"
    _bw_common(op, inputs, ("grad", "indices"))
    g, idx = inputs
    if g.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument 'grad' has dtype {g.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")
    if idx.dtype != DType.i64:
        raise DTypeMismatchError(op, "indices", "i64", str(idx.dtype))
    shape, dim, keepdim = attrs["shape"], attrs["dim"], attrs["keepdim"]
    want = reduced_shape(shape, (dim,) if shape else (), keepdim)
    for nm, t in (("grad", g), ("indices", idx)):
        if t.shape != want:
            raise InvalidProblemError(op, nm, f"shape {want} ({shape} reduced over dim {dim})", t.shape)
    return attrs, (TensorSpec(shape, g.dtype),)


def _autograd_peer(fwd):
    """The torch peer of a fused backward op: torch.autograd through the forward peer."""
    def peer(g, x, dims=None, keepdim=False, **kw):
        import torch

        xr = x.detach().clone().requires_grad_()
        y = fwd(xr, dims=dims, keepdim=keepdim)
        return torch.autograd.grad(y, xr, g.reshape(y.shape))[0]
    return peer


def _peer_select_bw(g, idx, shape, dim, keepdim=False):
    import torch

    shape = tuple(shape)
    if not shape:
        return g.clone()
    gk = g if keepdim else g.unsqueeze(dim)
    ik = idx if keepdim else idx.unsqueeze(dim)
    return torch.zeros(shape, dtype=g.dtype).scatter(dim, ik, gk)


def _prod_bw_samples(rng):
    for shape, dims, keepdim in [((3, 5), (1,), False), ((33, 65), (0,), True), ((2, 3, 4, 5), (0, 2), False),
                                 ((7,), None, False), ((0, 4), (1,), False)]:
        x = rng.uniform(0.6, 1.4, shape) * rng.choice([-1.0, 1.0], shape)
        if len(shape) == 2 and x.size:
            x[0, 0] = 0.0
            x[-1, 1] = x[-1, 2] = 0.0
        g = rng.standard_normal(reduced_shape(shape, _norm_dims("prod_backward", dims, len(shape)), keepdim))
        yield Sample((g, x), {"dims": dims, "keepdim": keepdim}, name=f"{shape}-{dims}")


def _nan_bw_samples(rng):
    for i, (shape, dims, keepdim) in enumerate([((3, 5), (1,), False), ((33, 65), (0,), True),
                                                ((2, 3, 4, 5), (0, 2), False), ((7,), None, False),
                                                ((0, 4), (1,), False)]):
        x = rng.standard_normal(shape)
        if len(shape) == 2 and x.size:
            x[0, :] = np.nan
            x[1, 0] = np.nan
        g = rng.standard_normal(reduced_shape(shape, _norm_dims("nansum_backward", dims, len(shape)), keepdim))
        yield Sample((g, x), {"dims": dims, "keepdim": keepdim, "mean": i % 2 == 1}, name=f"{shape}-{dims}")


def _select_bw_samples(rng):
    for shape, dim, keepdim in [((3, 5), 1, False), ((33, 65), 0, True), ((2, 3, 4, 5), 2, False), ((7,), 0, False),
                                ((), 0, False), ((0, 4), 1, False)]:
        red = reduced_shape(shape, (dim % len(shape),) if shape else (), keepdim)
        hi = shape[dim] if shape else 1
        idx = rng.integers(0, max(hi, 1), size=red).astype(np.int64)
        yield Sample((rng.standard_normal(red), idx), {"shape": shape, "dim": dim, "keepdim": keepdim},
                     name=f"{shape}-{dim}")


def _bw_errors(op):
    def errors():
        yield ErrorCase((((4,), "f32"), ((3, 4), "f32")), {"dims": (1,)}, InvalidProblemError,
                        rf"{op}: argument 'grad': expected shape \(3,\)", "bad-grad")
        yield ErrorCase((((3,), "i32"),) * 2, {}, UnsupportedError, r"dtype i32", "int-dtype")
    return errors


def _select_bw_errors():
    yield ErrorCase((((3,), "f32"), ((3,), "i32")), {"shape": (3, 4), "dim": 1}, DTypeMismatchError,
                    r"argument 'indices'", "i32-indices")
    yield ErrorCase((((4,), "f32"), ((4,), "i64")), {"shape": (3, 4), "dim": 1}, InvalidProblemError,
                    r"argument 'grad': expected shape \(3,\)", "bad-grad")


# -- the specs ----------------------------------------------------------------------------------------
def _workloads(name, kind):
    last = ((16384, 4096),)
    if name in ("prod", "nansum", "nanmean"):
        return (Workload(f"{name}-last-[16384,4096]-f32", last, DType.f32, {"dims": (1,)}, backward=True),
                Workload(f"{name}-first-[16384,4096]-bf16", last, DType.bf16, {"dims": (0,)}))
    if kind == "logic":
        return (Workload(f"{name}-last-[16384,4096]-bool", last, DType.bool, {"dims": (1,)}),
                Workload(f"{name}-all-64M-f32", ((64 * 1024 * 1024,),), DType.f32, {"dims": None}))
    if kind == "count":
        return (Workload(f"{name}-last-[16384,4096]-f32", last, DType.f32, {"dims": (1,)}),)
    if kind == "minmax":
        return (Workload(f"{name}-last-[16384,4096]-bf16", last, DType.bf16, {"dim": 1}, backward=True),)
    return (Workload(f"{name}-last-[16384,4096]-bf16", last, DType.bf16, {"dim": 1}, backward=True),
            Workload(f"{name}-first-[16384,4096]-f32", last, DType.f32, {"dim": 0}))


def _prod_tol(dt):
    # a product of n terms carries ~n roundings of the accumulator (f32: 65 x 6e-8 ~ 4e-6 relative)
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 1e-6)}.get(dt) or sum_tol(dt)


_SAVE_XO = ("inputs", "outputs")
register_reductions([
    RedDef("prod", "sum", "torch.prod", "jax.numpy.prod", _peer_prod, _dropin_prod, _g_prod, ("inputs",),
           dtypes=ALL_TYPES, samples=_prod_samples, tol=_prod_tol),
    RedDef("nansum", "sum", "torch.nansum", "jax.numpy.nansum", _peer_nan("nansum"), _dropin_nan, _g_nan(False),
           ("inputs",), dtypes=ALL_TYPES, samples=_nan_samples),
    RedDef("nanmean", "mean", "torch.nanmean", "jax.numpy.nanmean", _peer_nan("nanmean"), _dropin_nan,
           _g_nan(True), ("inputs",), samples=_nan_samples),
    RedDef("any", "logic", "torch.any", "jax.numpy.any", _peer_logic("any"), _dropin_logic, None,
           dtypes=ALL_TYPES, samples=_logic_samples, tol=exact_tol),
    RedDef("all", "logic", "torch.all", "jax.numpy.all", _peer_logic("all"), _dropin_logic, None,
           dtypes=ALL_TYPES, samples=_logic_samples, tol=exact_tol),
    RedDef("count_nonzero", "count", "torch.count_nonzero", "jax.numpy.count_nonzero", _peer_count, _dropin_count,
           None, dtypes=ALL_TYPES, samples=_logic_samples, tol=exact_tol),
    RedDef("aminmax", "minmax", "torch.aminmax", None, _peer_aminmax, _dropin_aminmax, _g_aminmax, _SAVE_XO,
           dtypes=ALL_TYPES, samples=_sel_samples, dropin_result=_result("aminmax")),
    RedDef("max", "sel", "torch.max", "jax.numpy.max", _peer_sel("max"), _dropin_sel("max"), _g_sel, _SAVE_XO,
           dtypes=ALL_TYPES, samples=_sel_samples, dropin_result=_result("max")),
    RedDef("min", "sel", "torch.min", "jax.numpy.min", _peer_sel("min"), _dropin_sel("min"), _g_sel, _SAVE_XO,
           dtypes=ALL_TYPES, samples=_sel_samples, dropin_result=_result("min")),
], _workloads)


def _bw_cost(desc):
    return sum(t.nbytes for t in desc.inputs) + desc.outputs[0].nbytes, 3 * desc.outputs[0].numel


MORE_SPECS: dict[str, OpSpec] = {}
MORE_SPECS["prod_backward"] = register_spec(OpSpec(
    name="prod_backward", family="reduction", arg_names=("grad", "x"), check=_check_grad_x("prod_backward"),
    dtypes=FLOAT_TYPES, attrs=(dims_attr(1), KEEPDIM), torch_peer=_autograd_peer(_peer_prod),
    torch_name="torch autograd rule of prod (prod_safe_zeros_backward)", samples=_prod_bw_samples,
    errors=_bw_errors("prod_backward"), cost=_bw_cost, category="reduction", tol=_prod_tol,
    doc="gradient of prod: grad times the product of the other elements of the slice (zero-safe)",
))
MORE_SPECS["nansum_backward"] = register_spec(OpSpec(
    name="nansum_backward", family="reduction", arg_names=("grad", "x"),
    check=_check_grad_x("nansum_backward"), dtypes=FLOAT_TYPES,
    attrs=(dims_attr(1), KEEPDIM, Attr("mean", "bool", False)),
    torch_peer=lambda g, x, dims=None, keepdim=False, mean=False: _autograd_peer(
        _peer_nan("nanmean" if mean else "nansum"))(g, x, dims, keepdim),
    torch_name="torch autograd rule of nansum / nanmean", samples=_nan_bw_samples,
    errors=_bw_errors("nansum_backward"), cost=_bw_cost, category="reduction",
    doc="gradient of nansum (mean=False) / nanmean (mean=True): grad (/ non-NaN count) where x is not NaN, else 0",
))
MORE_SPECS["value_select_backward"] = register_spec(OpSpec(
    name="value_select_backward", family="reduction", arg_names=("grad", "indices"), check=_check_select_bw,
    dtypes=FLOAT_TYPES, attrs=(FWD_SHAPE, Attr("dim", "axis", rank=fwd_rank), KEEPDIM), torch_peer=_peer_select_bw,
    torch_name="torch autograd rule of max/min(dim) (value_selecting_reduction_backward)",
    samples=_select_bw_samples, errors=_select_bw_errors, category="reduction", tol=exact_tol,
    cost=lambda d: (sum(t.nbytes for t in d.inputs) + d.outputs[0].nbytes, 0),
    doc="gradient of max/min(dim) values: grad scattered to the selected indices, 0 elsewhere",
))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "add", "amax_backward", "nansum_backward", "prod_backward", "value_select_backward")
