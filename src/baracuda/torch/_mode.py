"""``baracuda.torch.mode()``: run unchanged torch code through baracuda's drop-ins.

Under the mode, a call to a torch function or Tensor method that baracuda publishes runs baracuda's drop-in;
everything else (and every call a drop-in refuses: an argument it does not take, a dtype or device no backend
runs) runs in torch, unchanged.  The routing table comes from the same op database as the ``baracuda.torch``
namespace (``PUBLISHED``):

- ``torch.X`` / ``torch.nn.functional.X`` / ... -> the drop-in of that name;
- ``Tensor.X`` (the method of a published ``torch.X``, or a Tensor-only method published as ``bt.X``: same
  schema, ``self`` first) and its in-place forms ``Tensor.X_`` / ``torch.X_`` (computed out of place, then
  written into ``self`` with torch's in-place rules); a function's ``inplace=True`` flag (``F.relu(x, inplace=True)``,
  torchvision's ResNet) is its in-place form;
- a method or ``torch.X`` named like a published ``torch.nn.functional.X`` that has no drop-in of its own: its
  positional arguments are named from the ATen schema, then passed by keyword (the Python signatures differ);
- Python operators through their torch meaning (``x + y`` is ``add``, ``2 - x`` is ``__rsub__``: ``sub(2, x)``,
  ``x += y`` is ``add_``), one table for the operator protocol, not per op.

View and shape functions (transpose, permute, narrow, reshape, split, ...: what ``baracuda.torch.VIEWS`` lists,
and any op whose ATen schema returns a view of an input) are not routed: torch runs them natively, as
``baracuda.torch``'s own view functions are torch's (``_views.py``; a view costs no kernel), and code that writes
through a view relies on the aliasing.  Nothing routed returns a copy where torch returns a view or the input
itself (``tests/torch/test_mirror.py`` checks the table).  Twins with another signature (``torch.softmax``,
``torch.kl_div``'s integer reduction) are published drop-ins of their own (``_aliases.py``) and routed as such.
In-place add / sub of a one-element integer or bool tensor (counters: BatchNorm's ``num_batches_tracked += 1``) are
not routed either: torch keeps them in its own one-element kernel (``_counter``); they count as native.

The mode counts what it routed (``routed``) and the routed calls a drop-in handed back (``fell_through``, with
``reasons``); with ``coverage=True`` it also classifies every call it does not route: computing calls baracuda
has no drop-in for (``fell_through``) and the rest (``native``: views, metadata, factories, conversions and copies
(``to``, ``float``, ``contiguous``, ``clone``, ``new_ones``), autograd plumbing).
``strict=True`` raises ``UnsupportedError`` naming the torch function instead of falling through.

>>> import torch, baracuda.torch as bt
>>> with bt.mode() as m:                       # doctest: +SKIP
...     y = (torch.randn(4, 8) * 2).softmax(-1).sum()
>>> m.routed                                   # doctest: +SKIP
Counter({'Tensor.mul': 1, 'Tensor.softmax': 1, 'Tensor.sum': 1})
"""
from __future__ import annotations

import collections
import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode

from .._core.errors import BaracudaError, UnsupportedError
from . import _indexing
from ._call import STATE, layout_free_ops, run_into

# Python's operator protocol: the dunder stem -> the torch function it means.  Binary stems also have the
# reflected ``__r<stem>__`` (operands swapped) and in-place ``__i<stem>__`` forms.
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "div": "div", "floordiv": "floor_divide",
           "mod": "remainder", "pow": "pow", "matmul": "matmul", "and": "bitwise_and", "or": "bitwise_or",
           "xor": "bitwise_xor", "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift"}
_PLAIN = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "neg": "neg", "abs": "abs",
          "invert": "bitwise_not", "pos": "positive"}
# in-place methods that set state rather than compute (a fall-through here is not a coverage gap)
_STATE = frozenset({"requires_grad_", "detach_", "share_memory_", "set_", "resize_", "resize_as_", "fill_",
                    "zero_", "copy_", "normal_", "uniform_", "bernoulli_", "random_", "exponential_", "cauchy_",
                    "log_normal_", "geometric_"})
# conversions and copies: a tensor moved to another dtype / device / layout, or copied as it is -- plumbing that every
# model runs (a computing call reads its inputs; these only move them), not a coverage gap; ``new_*`` factories too
_PLUMBING = frozenset({"to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "char",
                       "byte", "bool", "cfloat", "cdouble", "cpu", "cuda", "contiguous", "clone", "pin_memory"})
_TORCH_MODULES = {"torch._C._nn": "torch.nn.functional", "torch._C._special": "torch.special",
                  "torch._C._linalg": "torch.linalg", "torch._C._fft": "torch.fft", "torch._C._VariableFunctions":
                  "torch", "torch.functional": "torch"}
# ops whose torch in-place form is not the op written into self: Tensor.bernoulli_(p=0.5) fills self with draws of
# probability p (self gives the shape only), where torch.bernoulli(self) draws with self's values as probabilities
_OTHER_IN_PLACE = frozenset({"bernoulli"})
_REFUSED = (BaracudaError, TypeError)   # what a drop-in raises when it does not take the call


def _aten_schemas(name: str):
    try:
        return torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return []


def _is_view(name: str) -> bool:
    """The ATen schema returns an alias of an input that is not an in-place write (a view)."""
    return any(r.alias_info is not None and not r.alias_info.is_write
               for s in _aten_schemas(name) for r in s.returns)


# ATen argument type -> the Python values it takes (types not listed are not checked)
_ATEN_TYPES = {"int": (int,), "SymInt": (int,), "float": (int, float), "bool": (bool,), "str": (str,),
               "number": (bool, int, float), "Scalar": (bool, int, float)}


def _takes(aten_type: str, value) -> bool:
    t = aten_type[len("Optional["):-1] if aten_type.startswith("Optional[") else aten_type
    want = _ATEN_TYPES.get(t)
    return want is None or (isinstance(value, want) and not (isinstance(value, bool) and bool not in want))


def _keyword_names(name: str, torch_fn) -> tuple:
    """Per ATen overload: the names of the positional arguments after the first that ``torch_fn`` (the Python
    function whose drop-in runs) takes by keyword, with compatible defaults (``torch.kl_div``'s int
    ``reduction`` is not ``F.kl_div``'s string one); overloads that do not fit are left out."""
    try:
        params = inspect.signature(torch_fn).parameters
    except (TypeError, ValueError):
        return ()
    out = []
    for s in _aten_schemas(name):
        args = s.arguments[1:]
        pos = tuple(a.name for a in args if not a.kwarg_only)
        fits = all(a.name in params and (params[a.name].default in (None, inspect.Parameter.empty)
                                         or _takes(str(a.type), params[a.name].default)) for a in args)
        if fits and not any(a.name == "out" for a in s.arguments):
            out.append(pos)
    return tuple(sorted(set(out), key=len))


def _self_at(name: str) -> int | None:
    """Where the method's receiver goes in the function's arguments (``x.where(c, y)`` is ``where(c, x, y)``):
    the position of ATen's ``self``, the same in every overload that has one (None: it varies)."""
    at = {[a.name for a in s.arguments].index("self") for s in _aten_schemas(name)
          if any(a.name == "self" for a in s.arguments)}
    return 0 if not at else at.pop() if len(at) == 1 else None


def _sizes_varargs(name: str) -> bool:
    """The method's only positional argument is a list of ints, which Tensor methods also take spread out or as
    one int (``x.flip(0, 1)``, ``x.tile(2)``): the function form wants the list."""
    sigs = [[a for a in s.arguments[1:] if not a.kwarg_only] for s in _aten_schemas(name)
            if s.arguments and s.arguments[0].name == "self" and not any(a.name == "out" for a in s.arguments)]
    return bool(sigs) and all(len(p) == 1 and str(p[0].type) in ("List[int]", "List[SymInt]") for p in sigs)


@dataclass(frozen=True)
class _Route:
    name: str                 # what the user called: "torch.add", "Tensor.__rsub__", "Tensor.exp_"
    fn: Callable              # the baracuda drop-in
    swap: bool = False        # reflected operator: fn(other, self)
    inplace: bool = False     # compute, then write into the first argument
    keywords: tuple = ()      # per overload, positional names after the first argument (see _keyword_names)
    self_at: int = 0          # a method: where its receiver goes among the function's arguments
    pack: bool = False        # a method whose sole int-list argument may come spread out (see _sizes_varargs)
    flag_at: int | None = None   # where torch's ``inplace=`` flag sits (F.relu(x, inplace=True) is relu_(x))
    accept: Callable | None = None   # a call this says False to is not routed (x[1:] is a view, torch's own)
    into: Callable | None = None     # an in-place form written by the kernel itself (None: compute, then copy)

    def run(self, args, kwargs):
        if self.flag_at is not None:
            args, kwargs, flag = _take_flag(args, kwargs, self.flag_at)
            if flag:
                return self._in_place(args, kwargs)
        if self.pack and len(args) >= 2 and all(isinstance(a, int) for a in args[1:]):
            args = (args[0], tuple(args[1:]))
        if self.swap:
            args = (args[1], args[0]) + tuple(args[2:])
        elif self.self_at:
            args = tuple(args[1:self.self_at + 1]) + (args[0],) + tuple(args[self.self_at + 1:])
        if self.keywords:
            args, kwargs = self._named(args, kwargs)
        if not self.inplace:
            return self.fn(*args, **kwargs)
        return self._in_place(args, kwargs)

    def _named(self, args, kwargs):
        rest = args[1:]
        names = next((n for n in self.keywords if len(n) >= len(rest)), None)
        if names is None or not args:
            raise TypeError(f"{self.name}: cannot name {len(rest)} positional argument(s) from the ATen schema")
        named = dict(zip(names, rest))
        if set(named) & set(kwargs):
            raise TypeError(f"{self.name}: argument {sorted(set(named) & set(kwargs))[0]!r} given twice")
        return args[:1], {**kwargs, **named}

    def _in_place(self, args, kwargs):
        target = args[0]
        if not isinstance(target, torch.Tensor):
            raise TypeError(f"{self.name}: the first argument must be a tensor")
        grad = torch.is_grad_enabled() and target.requires_grad
        if grad and target.is_leaf:   # torch raises its own error for this: let it
            raise UnsupportedError(self.name, "in-place on a leaf tensor that requires grad")
        if self.into is not None:
            res = self.into(args, kwargs)
            if res is not None:
                return res
        if grad:
            res = _saving_copies_of(target, self.fn, args, kwargs)
        else:
            res = self.fn(*args, **kwargs)
        if not isinstance(res, torch.Tensor) or res.shape != target.shape:
            raise UnsupportedError(self.name, f"the result's shape {tuple(getattr(res, 'shape', ()))} is not the "
                                   f"in-place operand's {tuple(target.shape)}")
        if not torch.can_cast(res.dtype, target.dtype):
            raise UnsupportedError(self.name, f"result type {res.dtype} can't be cast to {target.dtype}")
        if torch.is_grad_enabled() and (target.requires_grad or res.requires_grad) and target._base is None:
            return _Overwrite.apply(target, res)   # (a view's write keeps torch's copy_: its base's CopySlices)
        return target.copy_(res)


def _written_in_place(fn):
    """For the drop-in ``fn`` of a pointwise op: ``into(args, kwargs)``, its in-place form with the kernel writing
    over ``args[0]`` (``_call.run_into``; None where that does not apply: the caller computes, then copies), or
    None for an op of another kind."""
    op, adapter = getattr(fn, "_bt_op", None), getattr(fn, "_bt_adapter", None)
    if adapter is None or op not in layout_free_ops():
        return None

    def into(args, kwargs):
        res = adapter(*args, **kwargs)
        if res is None or (len(res) > 2 and res[2] is not None) or not res[0] or res[0][0] is not args[0]:
            return None
        return run_into(op, res[0], res[1])
    return into


def _saving_copies_of(target, fn, args, kwargs):
    """``fn(*args, **kwargs)`` for an in-place call on ``target``, whose result is then written over ``target``:
    a tensor the call saves for backward that shares ``target``'s memory is saved as a copy (a saved-tensor pack
    hook), so the write cannot change what the backward reads.  Only what is saved is copied: ``x += y`` and
    ``relu_`` (which save nothing of ``x``, or their output) copy nothing, where cloning the operand up front cost a
    full read + write per call (ResNet's residual adds and in-place ReLUs: 16 of the 108 copies per step of a small
    transformers ResNet under the mode, tests/torch/test_mode.py).  Where other saved-tensor hooks are active
    (activation checkpointing, offloading) or hooks are disabled in the region, the operand is copied up front."""
    if _own_hooks_possible():
        held = target.untyped_storage().data_ptr()

        def pack(t):
            return t.clone() if t.untyped_storage().data_ptr() == held else t

        with torch.autograd.graph.saved_tensors_hooks(pack, _unpacked):
            return fn(*args, **kwargs)
    src = target.clone()
    return fn(*tuple(src if a is target else a for a in args), **{k: src if v is target else v for k, v in kwargs.items()})


def _unpacked(t):
    return t


def _own_hooks_possible() -> bool:
    """No other saved-tensor hooks are active and hooks are not disabled here (a torch without these queries: no)."""
    a = torch._C._autograd
    try:
        return a._top_saved_tensors_default_hooks(False) is None and a._saved_tensors_hooks_is_enabled()
    except (AttributeError, TypeError):
        return False


class _Overwrite(torch.autograd.Function):
    """``target.copy_(res)`` as the in-place write of an op whose value ``res`` already is: the gradient reaches
    ``res`` unchanged and ``target``'s overwritten value gets none.  torch's own copy_ would hand the overwritten
    value a zeros_like gradient that the engine then adds to the one flowing through ``res`` (a fill and an add per
    in-place call in the backward; ResNet's residual ``+=``)."""

    @staticmethod
    def forward(ctx, target, res):
        ctx.dtype = res.dtype
        target.copy_(res)
        ctx.mark_dirty(target)
        return target

    @staticmethod
    def backward(ctx, grad):
        return None, grad if grad is None or grad.dtype == ctx.dtype else grad.to(ctx.dtype)


def _take_flag(args, kwargs, at: int):
    """The call without torch's ``inplace`` argument (by keyword or at position ``at``), and its value; the
    caller's args and kwargs are left as they are (a refused call runs them in torch)."""
    if "inplace" in kwargs:
        kwargs = dict(kwargs)
        return args, kwargs, kwargs.pop("inplace")
    if len(args) > at:
        return tuple(args[:at]) + tuple(args[at + 1:]), kwargs, args[at]
    return args, kwargs, False


def _flag_at(torch_fn) -> int | None:
    """The position of the ``inplace`` parameter in a torch function's signature (None: it has none)."""
    try:
        names = list(inspect.signature(torch_fn).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("inplace") if "inplace" in names else None


def _resolve(root, dotted: str):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# published drop-ins the mode leaves to torch: torch's random factories.  torch's own are already graph-safe and
# traceable, and seeded code under the mode (test data, noise, initialization) keeps torch's values; baracuda's
# stream is another one (docs/parity.md), so routing them would change results for no gain.  bt.rand & co. remain
# for direct calls (and run on a device state under torch.compile and CUDA-graph capture)
NOT_ROUTED = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like"})


def build_routes(ns, published: dict) -> dict:
    """torch function object -> _Route, from the published drop-ins (``ns`` is ``baracuda.torch``)."""
    routes: dict = {}
    tensor_methods = {}

    def add(obj, route: _Route):
        if obj is None or not callable(obj) or isinstance(obj, type):
            return
        for key in (obj, getattr(obj, "__wrapped__", None)):
            if key is not None and key not in routes:
                routes[key] = route

    top = {n for n in published if "." not in n}
    for name in sorted(published):
        if name in NOT_ROUTED:
            continue
        short = name.rsplit(".", 1)[-1]
        fn, tobj = _resolve(ns, name), _resolve(torch, name)   # (tobj None: a Tensor-only method, bt.repeat)
        if fn is None or _is_view(short):
            continue
        flag = _flag_at(tobj) if tobj is not None else None
        add(tobj, _Route("torch." + name, fn, flag_at=flag,
                         into=_written_in_place(fn) if flag is not None else None))
        if name in top:   # torch.X and Tensor.X share the ATen schema: arguments pass as given
            tensor_methods[name] = fn
            at = _self_at(name)
            if at is not None:
                add(getattr(torch.Tensor, name, None), _Route("Tensor." + name, fn, self_at=at,
                                                              pack=_sizes_varargs(name)))
            if at == 0 and name not in _OTHER_IN_PLACE:
                for owner, prefix in ((torch.Tensor, "Tensor."), (torch, "torch.")):
                    add(getattr(owner, name + "_", None), _Route(prefix + name + "_", fn, inplace=True,
                                                                 into=_written_in_place(fn),
                                                                 accept=_not_a_counter if name in _COUNTS else None))
        elif short not in top and tobj is not None:   # F.X: the method / torch.X of that name, arguments named
            kw = _keyword_names(short, tobj)
            if kw:
                for owner, prefix in ((torch.Tensor, "Tensor."), (torch, "torch.")):
                    add(getattr(owner, short, None), _Route(prefix + short, fn, keywords=kw))
    for stem, tname in _BINARY.items():
        fn = tensor_methods.get(tname)
        if fn is not None:
            add(getattr(torch.Tensor, f"__{stem}__", None), _Route(f"Tensor.__{stem}__", fn))
            add(getattr(torch.Tensor, f"__r{stem}__", None), _Route(f"Tensor.__r{stem}__", fn, swap=True))
            add(getattr(torch.Tensor, f"__i{stem}__", None), _Route(f"Tensor.__i{stem}__", fn, inplace=True,
                                                                   into=_written_in_place(fn),
                                                                   accept=_not_a_counter if tname in _COUNTS else None))
    for stem, tname in _PLAIN.items():
        if tname in tensor_methods:
            add(getattr(torch.Tensor, f"__{stem}__", None), _Route(f"Tensor.__{stem}__", tensor_methods[tname]))
    # torch.mode / Tensor.mode: the `mode` op's drop-in, which the mirror cannot publish at its torch name (that
    # name is this routing mode's)
    mode_fn = getattr(ns, "_TORCH_MODE", None)       # (made by baracuda.torch's __init__)
    if mode_fn is not None:
        add(torch.mode, _Route("torch.mode", mode_fn))
        add(torch.Tensor.mode, _Route("Tensor.mode", mode_fn))
    # x[key] / x[key] = v with tensor indices (basic keys are views: torch's)
    add(torch.Tensor.__getitem__, _Route("Tensor.__getitem__", _indexing.getitem, accept=_advanced_key))
    add(torch.Tensor.__setitem__, _Route("Tensor.__setitem__", _indexing.setitem, accept=_advanced_key))
    return routes


def _advanced_key(args, kwargs) -> bool:
    return len(args) >= 2 and not kwargs and _indexing.has_advanced(args[1])


_COUNTS = frozenset({"add", "sub"})     # the in-place forms a counter steps with, and their torch names
_COUNT_NAMES = frozenset([f"{n}_" for n in _COUNTS] + [f"__i{n}__" for n in _COUNTS])


def _counter(args) -> bool:
    """The in-place add / sub updates a one-element integer or bool tensor: a counter (BatchNorm's
    ``num_batches_tracked += 1``, a step count), bookkeeping that torch's own one-element kernel keeps; routed, it
    cost a Triton launch and ~50 us of host time per call on the GPU host (53 a ResNet-50 step), for no GPU work."""
    t = args[0] if args else None
    return isinstance(t, torch.Tensor) and not t.is_floating_point() and not t.is_complex() and t.numel() == 1


def _not_a_counter(args, kwargs) -> bool:
    return not _counter(args)


_ROUTES: list = []


def routes() -> dict:
    """The routing table (built once, on first use)."""
    if not _ROUTES:
        import sys

        pkg = sys.modules[__package__]   # baracuda.torch, fully built by the time a mode is made
        _ROUTES.append(build_routes(pkg, pkg.PUBLISHED))
    return _ROUTES[0]


def _tensors(obj, depth: int = 0):
    """The tensors in a call's arguments: top level, and inside lists/tuples two deep (torch.cat's list)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 2 and isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x, depth + 1)


def _arg_tensors(args, kwargs):
    yield from _tensors(tuple(args))
    yield from _tensors(tuple(kwargs.values()))


_TORCH_FUNCTION_DISABLED = torch._C._disabled_torch_function_impl
# the calls that run a backward: the mode stays on inside them (see mode.__torch_function__)
_BACKWARD_ENTRIES = frozenset({torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad})
# the call without this mode's handler but with the mode on for what it calls (torch >= 2.12; older torch: the
# backward runs without the mode, as before)
_SKIP_ONE_HOP = getattr(torch._C, "_skip_one_hop_torch_function", None)
_PLAIN_TYPES = (torch.Tensor,)


def _not_routable(types) -> str | None:
    for t in types:
        if t is not torch.Tensor and t is not torch.nn.Parameter and \
                getattr(t, "__torch_function__", None) is not _TORCH_FUNCTION_DISABLED:
            return f"tensor subclass {t.__name__} with its own __torch_function__"
    return None


def _display_name(func) -> str:
    name = getattr(func, "__name__", repr(func))
    qual = getattr(func, "__qualname__", "")
    if qual.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + name
    mod = getattr(func, "__module__", None) or "torch"
    return f"{_TORCH_MODULES.get(mod, mod)}.{name}"


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _gap(func, args, kwargs, result) -> str | None:
    """Why a call that fell through is a coverage gap (it computed something from tensors), or None."""
    name = getattr(func, "__name__", "")
    if name in ("__get__", "__set__", "__delete__") or (getattr(func, "__module__", None) or "").startswith(
            "torch.autograd"):
        return None   # attributes; autograd.grad / backward (their gradients come from the routed ops' rules)
    inputs = list(_arg_tensors(args, kwargs))
    if not inputs or name.endswith("_like") or name.startswith("new_") or name in _PLUMBING:
        return None   # factories; conversions and copies
    inplace = (name.endswith("_") and not name.endswith("__")) or (name.startswith("__i") and name[3:-2] in _BINARY)
    if inplace:
        return None if name in _STATE or (name in _COUNT_NAMES and _counter(args)) else \
            "no baracuda drop-in for this in-place op"
    held = {_storage(t) for t in inputs}
    if any(_storage(o) not in held for o in _tensors(result)):
        return "no baracuda drop-in"
    return None


class mode(TorchFunctionMode):
    """Run torch functions and Tensor methods that baracuda publishes through baracuda's drop-ins.

    ``with baracuda.torch.mode() as m: ...`` then read ``m.routed`` (collections.Counter keyed by the torch name
    called), ``m.fell_through`` and ``m.reasons`` (name -> why it fell through), or ``m.summary()``.  A routed call
    costs the drop-in's own call; a call the mode does not route costs one dictionary lookup on top of torch's.
    ``coverage=True`` also classifies every call it does not route (``m.native``: views, metadata, factories;
    ``m.fell_through``: computing calls baracuda has no drop-in for; conversions and copies -- ``to``,
    ``float``, ``contiguous``, ``clone``, ``new_ones`` -- are native), which probes the results' storage: a coverage
    report, not a production setting.  ``strict=True``: a fall-through of a computing call raises
    ``UnsupportedError`` naming it (with coverage, for unrouted calls too).
    Autograd works through the routed calls (they are torch custom ops with baracuda's backward plans).
    """

    def __init__(self, strict: bool = False, coverage: bool = False):
        super().__init__()
        self.strict, self.coverage = strict, coverage or strict   # strict must see the unrouted calls
        self.routed: collections.Counter = collections.Counter()
        self.fell_through: collections.Counter = collections.Counter()
        self.native: collections.Counter = collections.Counter()
        self.reasons: dict[str, str] = {}
        self._routes = routes()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if STATE.depth:      # baracuda's own torch calls (inside a drop-in or a backward plan)
            return func(*args, **kwargs)
        try:
            route = self._routes.get(func)
        except TypeError:   # an unhashable callable
            route = None
        if route is not None and route.accept is not None and not route.accept(args, kwargs):
            route = None
        if route is None:
            if func in _BACKWARD_ENTRIES and _SKIP_ONE_HOP is not None:
                # a mode is off inside its own handler: the backward would run without it, so an activation
                # checkpoint's recomputation (and any hook) would take torch's path, not the one the forward took
                # (torch.utils.checkpoint then refuses: another count of saved tensors).  What autograd's own
                # prologue calls is routed too (the implicit upstream's ones_like), not classified (attribute reads)
                if self.coverage:
                    self.native[_display_name(func)] += 1
                cov, self.coverage = self.coverage, False
                try:
                    with self:
                        return _SKIP_ONE_HOP(func, types, args, kwargs)
                finally:
                    self.coverage = cov
            if not self.coverage:
                return func(*args, **kwargs)
            res = func(*args, **kwargs)
            if getattr(func, "namespace", None) == "baracuda":
                return res
            name = _display_name(func)
            why = _gap(func, args, kwargs, res)
            if why is None:
                self.native[name] += 1
            else:
                self._fall(name, why)
            return res
        # (torch passes no types for its C functions and methods on plain tensors: the common case, no call)
        why = None if not types or types == _PLAIN_TYPES else _not_routable(types)
        if why is None:
            state = STATE
            prev, state.grad_check = state.grad_check, True   # (a refused gradient falls through to torch)
            try:
                res = route.run(args, kwargs)
            except _REFUSED as e:
                why = str(e).splitlines()[0]
            else:
                self.routed[route.name] += 1
                return res
            finally:
                state.grad_check = prev
        self._fall(route.name, why)
        return func(*args, **kwargs)

    def _fall(self, name: str, why: str) -> None:
        if self.strict:
            raise UnsupportedError(name, f"not run by baracuda under baracuda.torch.mode(strict=True): {why}")
        self.fell_through[name] += 1
        self.reasons[name] = why

    def summary(self) -> str:
        lines = [f"routed to baracuda: {sum(self.routed.values())} calls"]
        lines += [f"  {n}: {c}" for n, c in self.routed.most_common()]
        lines.append(f"fell through to torch: {sum(self.fell_through.values())} calls")
        lines += [f"  {n}: {c} ({self.reasons[n]})" for n, c in self.fell_through.most_common()]
        if self.coverage:
            lines.append(f"torch-native (views, metadata, factories): {sum(self.native.values())} calls")
        else:
            lines.append("calls not routed: not classified (baracuda.torch.mode(coverage=True) reports them)")
        return "\n".join(lines)
