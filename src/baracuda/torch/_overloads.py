"""torch functions whose operands may each be a tensor or a Python number, routed by those kinds to ops.

torch has one name for what baracuda keeps as several ops, split by whether an operand is a tensor:
``torch.lerp(input, end, weight)`` is the ``lerp`` op (a number weight, an attribute) or ``lerp_tensor``
(a tensor weight, an operand); ``torch.clamp(input, min, max)`` is ``clamp`` (number bounds), ``clamp_min`` /
``clamp_max`` (one tensor bound) or ``clamp_tensor`` (two); ``torch.max(input, other)`` is the elementwise
``maximum`` (``torch.min``: ``minimum``) while ``torch.max(input[, dim, keepdim])`` is the ``max`` reduction.
One ``Overload`` row per torch function says which op each combination of kinds goes to; one builder turns the
rows into drop-ins with torch's signature, broadcasting and promotion (a Python number is a 0-d tensor of torch's
weak-scalar dtype), ``out=`` and torch's errors.  The rows replace the spec-published drop-ins of the same names
(those take numbers only); a row with ``otherwise`` passes the calls none of its routes takes (arguments that do
not bind to its parameters, kinds no route has) to that spec-published drop-in (torch.max's reduction forms).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch

from .._core.dtypes import DType, as_dtype
from ..ops._common import write_out
from ..ops.elementwise import scalar_operand, weak_scalar_dtype
from ._call import call


def _kind(v) -> str:
    """An operand's kind: "T" a tensor, "N" a Python number (bool, int or float), "-" None ("?": none of them)."""
    if isinstance(v, torch.Tensor):
        return "T"
    if v is None:
        return "-"
    return "N" if isinstance(v, (bool, int, float)) else "?"


@dataclass(frozen=True)
class Route:
    """``when``: param -> the kinds it may have for this route; ``operands`` become the op's inputs (a number
    operand becomes a weak-scalar 0-d tensor), ``attrs`` its attributes (Python values as given)."""

    op: str
    when: dict
    operands: tuple
    attrs: tuple = ()


@dataclass(frozen=True)
class Overload:
    """One torch function: its parameters (positional order) with defaults, and its routes, tried in order."""

    torch_names: tuple
    params: tuple
    defaults: dict
    routes: tuple
    none_error: str = ""          # torch's RuntimeError when every optional operand is None ("" : none)
    # param -> param: a 0-d tensor there takes that param's dtype (torch treats a 0-d tensor as a scalar: lerp's
    # weight); a dimensioned one must match it already (the op then says so)
    scalar_like: dict = field(default_factory=dict)
    # the calls no route takes go to the drop-in published before under the same name (else: torch's TypeError)
    otherwise: bool = False
    # (vals) -> (vals, finish or None): the call's values rewritten before routing where a bool operand is present
    # (a bool number or tensor; the ops take none), and the step that gives the result torch's dtype; "promote":
    # _promote_bools
    bools: object = None


_LERP = Overload(("torch.lerp",), ("input", "end", "weight"), {}, (
    Route("lerp", {"weight": "N"}, ("input", "end"), ("weight",)),
    Route("lerp_tensor", {"weight": "T"}, ("input", "end", "weight")),
), scalar_like={"weight": "input"}, bools="promote")

_CLAMP = Overload(("torch.clamp", "torch.clip"), ("input", "min", "max"), {"min": None, "max": None}, (
    Route("clamp", {"min": "N-", "max": "N-"}, ("input",), ("min", "max")),
    Route("clamp_min", {"min": "T", "max": "-"}, ("input", "min")),
    Route("clamp_max", {"min": "-", "max": "T"}, ("input", "max")),
    Route("clamp_tensor", {"min": "T", "max": "T"}, ("input", "min", "max")),
), none_error="torch.clamp: At least one of 'min' or 'max' must not be None", bools="promote")

def _is_bool(v) -> bool:
    return type(v) is bool or (isinstance(v, torch.Tensor) and v.dtype == torch.bool)


def _to(t: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    return call("to_dtype", (t,), {"dtype": dt})


def _result_dtype(values) -> torch.dtype:
    """torch's result dtype of the operands (tensors and numbers, None skipped), folded pair by pair with a stand-in
    tensor that keeps the category (dimensioned or 0-d) of what it stands for."""
    vals = [v for v in values if isinstance(v, torch.Tensor)] + [v for v in values
                                                                  if v is not None and not isinstance(v, torch.Tensor)]
    rep = vals[0]
    for v in vals[1:]:
        dim = rep.dim() > 0 or (isinstance(v, torch.Tensor) and v.dim() > 0)
        rep = torch.empty((1,) if dim else (), dtype=torch.result_type(rep, v), device="meta")
    return rep.dtype


def _promote_bools(vals: dict):
    """A call with a bool operand in torch's dtypes (the ops take no bool): where torch's result dtype is not bool, a
    bool number is 1 or 0 and a bool tensor is converted to that dtype first (clamp(b, 0, 1): int64; clamp(x, True):
    x's dtype; lerp(x, y, True): weight 1); an all-bool call is left to the op's error (torch: not implemented for
    bool)."""
    want = _result_dtype(vals.values())
    if want == torch.bool:
        return vals, None
    return {p: int(v) if type(v) is bool else _to(v, want) if isinstance(v, torch.Tensor) and v.dtype == torch.bool
            else v for p, v in vals.items()}, None


def _pow_bools(vals: dict):
    """torch.pow with a bool operand: as _promote_bools (x ** True is x, True ** x is 1 ** x, b ** 2 int64, b ** 2.0
    the default float, x_f32 ** b f32), and a bool tensor to a bool number stays bool (b ** True is b, b ** False
    all True: through int64), which torch computes while it refuses bool ** bool tensors."""
    x, e = vals["input"], vals["exponent"]
    if isinstance(x, torch.Tensor) and x.dtype == torch.bool and type(e) is bool:
        return dict(vals, input=_to(x, torch.int64), exponent=int(e)), (lambda r: _to(r, torch.bool))
    return _promote_bools(vals)


# torch.pow(x, 2): a Python exponent is an attribute of ``pow_scalar`` (no 0-d operand, and its backward needs no
# gradient for an integer exponent); torch.pow(2, x): a number base is a weak-scalar operand of ``pow``
_POW = Overload(("torch.pow",), ("input", "exponent"), {}, (
    Route("pow_scalar", {"input": "T", "exponent": "N"}, ("input",), ("exponent",)),
    Route("pow", {"input": "TN", "exponent": "T"}, ("input", "exponent")),
), bools=_pow_bools)

# torch.max(input, other) / torch.min(input, other): the elementwise maximum / minimum (torch's binary overload);
# max(input), max(input, dim, keepdim) stay the reduction (the spec's drop-in, returning torch.return_types.max)
_SELECT = tuple(Overload((f"torch.{fn}",), ("input", "other"), {}, (
    Route(f"{fn}imum", {"other": "T"}, ("input", "other")),), otherwise=True) for fn in ("max", "min"))

OVERLOADS = (
    _LERP, _CLAMP, _POW, *_SELECT,
    Overload(("torch.clamp_min",), ("input", "min"), {}, (Route("clamp_min", {"min": "TN"}, ("input", "min")),)),
    Overload(("torch.clamp_max",), ("input", "max"), {}, (Route("clamp_max", {"max": "TN"}, ("input", "max")),)),
)


def _operand(v, ref: torch.Tensor, tensor_dtypes, any_dim: bool):
    """A Python number as a 0-d tensor of torch's weak-scalar dtype; a float beside a dimensioned float tensor
    is held in f64 instead (the dimensioned tensors decide the result dtype either way, and the kernel casts the
    value to its compute type as torch does, so the bound is not first rounded to f32: clamp_min(x_f64, 0.1))."""
    if isinstance(v, torch.Tensor):
        return v
    dt = weak_scalar_dtype(v, tensor_dtypes, any_dim)
    if isinstance(v, float) and any_dim and any(t.is_floating for t in tensor_dtypes):
        dt = DType.f64
    return scalar_operand(v, dt.torch, ref.device)


def _make(ov: Overload, torch_name: str, otherwise=None):
    """The drop-in of ``ov`` under ``torch_name``; ``otherwise``: the drop-in that takes the calls no route takes."""
    fn_name = torch_name.rsplit(".", 1)[-1]
    sig = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                               default=ov.defaults.get(p, inspect.Parameter.empty))
                             for p in ov.params] + [inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY,
                                                                      default=None)])

    n_params = len(ov.params)
    # the leading parameters without a default: a positional call gives at least these
    n_required = next((k for k, p in enumerate(ov.params) if p in ov.defaults), n_params)

    # kinds of a full positional call -> (op, operand positions, (attribute, position) pairs), for the calls whose
    # route takes every operand as given (no number made a tensor, no 0-d operand cast): what the path below decides
    # from the kinds alone, without its dictionaries and generators (x.pow(2) under bt.mode(): 16.7 -> 11.2 us of
    # host time on the CPU proxy, bench/host_proxy.py)
    direct: dict = {}

    def dropin(*args, **kwargs):
        if ov.bools is not None and (any(map(_is_bool, args)) or any(map(_is_bool, kwargs.values()))):
            return _with_bools(*args, **kwargs)
        if not kwargs and len(args) == n_params:
            hit = direct.get(tuple([_kind(a) for a in args]))
            if hit is not None:
                op, at, named = hit
                return call(op, tuple([args[i] for i in at]), {p: args[i] for p, i in named})
        if not kwargs and n_required <= len(args) <= n_params:
            # positional arguments only (x.pow(2), torch.clamp(x, 0, 1)): what sig.bind would give, without its
            # ~5 us a call
            vals = dict(zip(ov.params, args))
            for p in ov.params[len(args):]:
                vals[p] = ov.defaults[p]
            out = None
        else:
            b = _bind(args, kwargs)
            if b is None:
                return otherwise(*args, **kwargs)
            vals, out = b
        _need_tensor(vals)
        optional = [p for p in ov.params if p in ov.defaults]
        if ov.none_error and all(vals[p] is None for p in optional):
            raise RuntimeError(ov.none_error)
        return _routed(vals, out, args, kwargs)

    def _bind(args, kwargs):
        """(values, out) of a call bound to the signature; None where the arguments do not bind and ``otherwise``
        takes them (torch's TypeError where nothing does)."""
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            if otherwise is not None:
                return None
            raise TypeError(f"{fn_name}(): {e}") from None
        bound.apply_defaults()
        vals = dict(bound.arguments)
        return vals, vals.pop("out")

    def _need_tensor(vals):
        if not any(isinstance(vals[p], torch.Tensor) for p in ov.params):
            raise TypeError(f"{fn_name}(): argument '{ov.params[0]}' must be a Tensor, not "
                            f"{type(vals[ov.params[0]]).__name__}")

    def _with_bools(*args, **kwargs):
        b = _bind(args, kwargs)
        if b is None:
            return otherwise(*args, **kwargs)
        vals, out = b
        _need_tensor(vals)
        vals, finish = (_promote_bools if ov.bools == "promote" else ov.bools)(vals)
        if finish is None:
            return _routed(vals, out, args, kwargs, memo=False)
        res = finish(_routed(vals, None, args, kwargs, memo=False))
        return res if out is None else write_out(f"{fn_name}()", res, out)

    def _routed(vals, out, args, kwargs, memo=True):
        """The route of the call's values (its positional ``args`` / ``kwargs`` as given: the direct memo's key,
        ``otherwise``'s arguments; ``memo``: the kinds may be remembered)."""
        kinds = {p: _kind(v) for p, v in vals.items()}
        route = next((r for r in ov.routes if all(kinds[p] in ks for p, ks in r.when.items())), None)
        if route is None and otherwise is not None:
            return otherwise(*args, **kwargs)
        if route is None:
            got = ", ".join(f"{p}={type(v).__name__}" for p, v in vals.items())
            raise TypeError(f"{fn_name}() received an invalid combination of arguments - got ({got})")
        for p, like in ov.scalar_like.items():
            v = vals[p]
            if kinds[p] == "T" and v.dim() == 0 and p in route.operands:
                vals[p] = v.to(dtype=vals[like].dtype, device=vals[like].device)
        tensors = [vals[p] for p in route.operands if kinds[p] == "T"]
        tdts = [as_dtype(t.dtype) for t in tensors]
        any_dim = any(t.dim() > 0 for t in tensors)
        ins = tuple(_operand(vals[p], tensors[0], tdts, any_dim) for p in route.operands)
        attrs = {p: vals[p] for p in route.attrs}
        if out is None:
            if memo and not kwargs and len(args) == n_params and all(kinds[p] == "T" for p in route.operands) and \
                    not any(p in route.operands for p in ov.scalar_like):
                pos = {p: i for i, p in enumerate(ov.params)}
                direct[tuple(kinds[p] for p in ov.params)] = (
                    route.op, tuple(pos[p] for p in route.operands), tuple((p, pos[p]) for p in route.attrs))
            return call(route.op, ins, attrs)
        if torch.is_grad_enabled() and any(t.requires_grad for t in ins):
            raise RuntimeError(f"{fn_name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{fn_name}(): argument 'out' must be a Tensor, not {type(out).__name__}")
        return write_out(f"{fn_name}()", call(route.op, ins, attrs), out)

    dropin.__name__ = dropin.__qualname__ = fn_name
    doc = (f"baracuda drop-in for ``{torch_name}``: " + "; ".join(
        f"{', '.join(f'{p} {k}' for p, k in r.when.items())} -> op ``{r.op}``" for r in ov.routes)
        + " (T: a tensor, N: a Python number, -: None)")
    if otherwise is None:
        dropin.__signature__ = sig
        dropin.__doc__ = doc + "."
    else:   # torch's other forms are the earlier drop-in's (its signature: torch.max(input, dim, keepdim))
        dropin.__signature__ = inspect.signature(otherwise)
        dropin.__doc__ = doc + "; any other call: " + (otherwise.__doc__ or "")
    return dropin


def publish(top_ns: dict, published: dict) -> None:
    """Set the overloaded drop-ins on ``baracuda.torch`` (replacing number-only ones) and record them in
    ``published`` (torch name -> the op of the route taken when every operand is a tensor; an ``otherwise`` row keeps
    the earlier drop-in's op: ``max`` stays the reduction's name)."""
    for ov in OVERLOADS:
        for torch_name in ov.torch_names:
            fn_name = torch_name[len("torch."):]
            top_ns[fn_name] = _make(ov, torch_name, top_ns[fn_name] if ov.otherwise else None)
            if not (ov.otherwise and fn_name in published):
                published[fn_name] = ov.routes[-1].op


__all__ = ["OVERLOADS", "Overload", "Route", "publish", "write_out"]
