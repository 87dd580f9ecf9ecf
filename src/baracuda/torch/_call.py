"""The one call path of ``baracuda.torch``: call key -> bound call (one bounded LRU cache) -> launch.

A drop-in call is ``call(name, tensors, attrs)``.  Its **call key** is built from plain values once per call: the
op, the attributes with their Python types (``dim=1.0`` must not find the call bound for ``dim=1``), per operand
its shape, dtype and device index, and the preference in effect (a context variable, ``_core/options.py``).  The
key finds, in one ``functools.lru_cache`` of ``CACHE_SIZE`` entries, a :class:`Bound`: the validated descriptor,
the selected plan with its launcher (outputs allocated, the compiled kernel relaunched, no argument checks: the
key vouches for them), the saved-tensor recipe and, built on first use, the backward plan.  A call that no plan
takes (a bad attribute, a dtype no backend runs) is bound too, to its error, so ``bt.mode()`` pays one lookup
for a call it hands back to torch.

Then, in plain eager code:

- no input requires grad (or grad mode is off): ``bound.forward(xs)`` — the launch, nothing else;
- otherwise one ``autograd.Function`` (:class:`_Eager`) whose backward runs the backward plan directly (through
  the ``baracuda::op_backward`` custom op when a graph of the backward is being built: create_graph, a mode).

Dynamo tracing (``torch.compile``), functorch transforms, dispatch modes (FakeTensor, make_fx / export), tensor
subclasses and meta tensors take the two generic custom ops of ``_library.py``, whose real implementations
resolve the same bound calls through the same cache.  Memory strides are not in the key: every plan takes
strided operands (the launcher picks the contiguous kernel per call).
"""
from __future__ import annotations

import functools
import threading

import torch

from .._core.device import Device, check_devices
from .._core.dtypes import as_dtype
from .._core.errors import ArgumentTypeError, BaracudaError, UnsupportedError
from .._core.options import current_preference
from .._core.plan import BackwardPlan, Plan
from .._core.spec import Descriptor, TensorSpec, get_spec, saved_names
from .._core.tensors import given
from ..ops._common import Layout
from ._schema import encode_attrs, plain_attr, sig_string

__all__ = ["call", "bound", "Bound", "Operand", "CACHE_SIZE", "cache_info", "EAGER_FAST_PATH"]

CACHE_SIZE = 4096       # bound calls kept (least recently used dropped first); each holds a plan (~2 KB)


class _State(threading.local):
    # (set per thread in __init__, not read from class defaults: Dynamo guards on the instance's __dict__, and a
    # first write while it traces would fail the guard on the frame that made it)
    def __init__(self):
        self.depth = 0              # > 0 while baracuda's own code runs (bt.mode leaves those torch calls alone)
        self.grad_check = False     # bt.mode: a call it routes must be differentiable where torch's would be


STATE = _State()


class own_calls:
    """``with own_calls():`` the torch calls inside are baracuda's own: for the bodies of baracuda's autograd
    Functions' backward, which bt.mode() runs under it.  They skip torch-function dispatch altogether (a mode's
    handler per torch call -- the launchers' ``empty`` / ``data_ptr`` / ``reshape`` -- cost ~20 us of host time per
    backward node) and are marked as baracuda's own for any handler that still sees them.  Unpack
    ``ctx.saved_tensors`` before entering: unpacking may recompute an activation-checkpointed forward, whose calls
    must be routed as they were the first time."""

    __slots__ = ("_off",)

    def __enter__(self):
        STATE.depth += 1
        self._off = _no_torch_function()
        self._off.__enter__()

    def __exit__(self, *exc):
        self._off.__exit__(*exc)
        STATE.depth -= 1
        return False


_no_torch_function = torch._C.DisableTorchFunction


# -- recording (the demo and debugging; off the hot path unless a recorder is active) -----------------------
# A module-level stack, not a context variable: the backward of a CUDA graph runs on autograd's device threads,
# which see neither the recording thread's context variables nor its thread-locals, and bt.record() logs it too.
RECORDERS: list = []


def _timed(fn, device: Device):
    import time

    if device.type == "cuda":
        torch.cuda.synchronize(device.index)
    t0 = time.perf_counter()
    res = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device.index)
    return res, (time.perf_counter() - t0) * 1e3


def _record_fw(b: "Bound", xs):
    from .._core.oracle import max_rel_err, reference_f64

    log, check = RECORDERS[-1]
    outs, ms = _timed(lambda: b.go(xs), b.plan.device)
    err = None
    if check and not b.desc.spec.values_unspecified:      # (empty: nothing to check)
        ref = reference_f64(b.desc, [x.detach().cpu() for x in xs])
        err = max(max_rel_err(o.detach().cpu(), r) for o, r in zip(outs, ref)) if outs else 0.0
    log.append({"kind": "fw", "op": b.name, "desc": str(b.desc), "sku": str(b.plan.sku), "ms": ms, "rel_err": err})
    return outs


# -- the bound call ---------------------------------------------------------------------------------------------
class Call:
    """What a descriptor alone fixes about a call: the saved-tensor recipe, which inputs get gradients, and the
    custom op's schema strings.  The custom op's autograd (``_library.py``) keeps one of these: under a tracer
    no plan is made."""

    __slots__ = ("name", "desc", "recipe", "diff", "float_out", "n_in", "_enc", "_sig", "gets_grad")

    def __init__(self, desc: Descriptor, enc: str | None = None):
        self.name, self.desc, self.n_in = desc.op, desc, len(desc.inputs)
        spec = desc.spec
        self.diff = frozenset(spec.differentiable) if spec.is_differentiable else frozenset()
        self.float_out = any(t.dtype.is_floating or t.dtype.is_complex for t in desc.outputs)
        names = saved_names(desc) if spec.is_differentiable else []
        argn = spec.arg_names
        self.recipe = tuple((False, argn.index(n)) if n in argn else (True, 0 if n == "out" else int(n[3:]))
                            for n in names)
        self._enc, self._sig = enc, None
        # per input: whether autograd receives its gradient (a differentiable, floating or complex input)
        self.gets_grad = tuple(i in self.diff and (t.dtype.is_floating or t.dtype.is_complex)
                               for i, t in enumerate(desc.inputs))

    def saved(self, xs, outs) -> list:
        return [outs[i] if is_out else xs[i] for is_out, i in self.recipe]

    def input_grads(self, grads, saved_tensors, direct: bool, needs: tuple | None = None) -> list:
        """The gradients autograd receives for the inputs (None where torch has none); ``direct``: run the
        backward plan here (a Bound), else through the ``baracuda::op_backward`` custom op; ``needs``: which
        inputs autograd wants gradients for (the direct path skips the others' work where the rule allows)."""
        if all(g is None for g in grads):
            return [None] * self.n_in
        if not self.diff:
            raise RuntimeError(f"baracuda.{self.name}: not differentiable")
        args = list(grads) + list(saved_tensors)
        if direct:
            res = self.run_backward(args, needs=needs)
        else:
            res = torch.ops.baracuda.op_backward(self.name, self.encoded_attrs(), *self.sig_string(), args)
        return _per_input(res, self.gets_grad)

    def encoded_attrs(self) -> str:
        if self._enc is None:
            self._enc = encode_attrs(self.desc.attr_dict)
        return self._enc

    def sig_string(self) -> tuple:
        if self._sig is None:
            self._sig = sig_string(self.desc)
        return self._sig


class Bound(Call):
    """Everything one call key needs: descriptor, plan, launcher, saved-tensor recipe, backward plan (lazily)."""

    __slots__ = ("plan", "go", "pref", "_bw", "_bw_masked", "_grad_ok", "layout_free", "orders", "_write")

    def __init__(self, name: str, attrs: dict, sig: tuple, pref, device: int = -1):
        if len(sig) > 1:
            _check_devices(name, [_device_name(i) for _, _, i in sig])
        desc = Descriptor(name, tuple(TensorSpec(tuple(s), as_dtype(d)) for s, d, _ in sig),
                          tuple(sorted((k, plain_attr(v)) for k, v in attrs.items())))
        super().__init__(desc)
        devs = {i for _, _, i in sig}
        index = max(devs, default=device)       # (no operands: the call's device, a creation op)
        device = Device("cuda", index) if index >= 0 else Device("cpu")
        plan = Plan.select(desc, device, pref)
        self.plan, self.pref, self._bw, self._bw_masked, self._grad_ok = plan, pref, None, None, set()
        # a pointwise op: the operands' dim order per their strides -> (the permuted call's bound call, Layout)
        self.layout_free, self.orders = name in layout_free_ops(), None
        # operands on one device (checked above): the key vouches for shapes, dtypes and device, so the launcher
        # checks nothing
        self.go = plan.launcher()
        self._write = 0     # (write_into's launcher, made on first use)

    # forward ------------------------------------------------------------------------------------------------
    def forward(self, xs) -> list:
        """The outputs (a list of fresh tensors) of the op on ``xs`` (tensors matching the key)."""
        STATE.depth += 1
        try:
            outs = self.go(xs) if not RECORDERS else _record_fw(self, xs)
        finally:
            STATE.depth -= 1
        return _owned(outs, xs)

    def writes(self) -> bool:
        """Whether ``write_into`` can run: the plan launches its one output into a given buffer (``Plan.writer``)."""
        if self._write == 0:
            self._write = self.plan.writer() if len(self.desc.outputs) == 1 else None
        return self._write is not None

    def write_into(self, xs, out) -> bool:
        """Write the op's one output over ``out`` (a contiguous tensor of the output's shape and dtype), the
        kernel reading ``xs`` (which may include ``out`` itself: elementwise plans read an element before writing
        it); False where the plan cannot (``writes``)."""
        if not self.writes():
            return False
        w = self._write
        STATE.depth += 1
        try:
            w(xs, [out])
        finally:
            STATE.depth -= 1
        return True

    # backward -----------------------------------------------------------------------------------------------
    def backward_plan(self, needs: tuple | None = None) -> BackwardPlan:
        """The backward plan; ``needs`` (per input, whether autograd wants its gradient): one plan per mask, whose
        rule may skip the unwanted gradients' work."""
        if needs is not None and all(needs):
            needs = None
        bw = self._bw if needs is None else self._bw_masked.get(needs) if self._bw_masked else None
        if bw is None:
            bw = BackwardPlan(self.desc, self.plan.device, self.pref, needs)
            if needs is None:
                self._bw = bw
            else:
                if self._bw_masked is None:
                    self._bw_masked = {}
                self._bw_masked[needs] = bw
        return bw

    def run_backward(self, args, as_tensors: bool = False, needs: tuple | None = None) -> list:
        """Input gradients from ``args`` = output gradients + saved tensors (``None`` where an input gets none;
        ``as_tensors``: an empty tensor there instead, and no gradient aliasing an argument -- what the backward
        custom op must return)."""
        n_out = len(self.desc.outputs)
        grads, saved_list = args[:n_out], args[n_out:]
        STATE.depth += 1
        try:
            bw = self.backward_plan(needs)
            # replay: autograd hands the saved tensors back as the forward gave them and gradients of the outputs'
            # shapes, dtypes and device (its engine checks and casts them): BackwardPlan.run's checks would repeat
            if RECORDERS:
                res, ms = _timed(lambda: bw.replay_tape(grads, saved_list), bw.device)
                RECORDERS[-1][0].append({"kind": "bw", "op": self.name, "desc": str(self.desc),
                                         "sku": "; ".join(str(k) for k in bw.skus), "ms": ms, "rel_err": None})
            else:
                res = bw.replay_tape(grads, saved_list)
        finally:
            STATE.depth -= 1
        if not as_tensors:
            # autograd takes a gradient that is an upstream or saved tensor as it is (add's backward hands the
            # upstream to both inputs, as torch's own does)
            return list(res)
        out = []
        for r in res:      # the custom op: tensors only, none an alias of an argument
            if r is None:
                out.append(torch.empty(0, device=_device_of_args(args)))
            else:
                out.append(r.clone() if any(r is a for a in args) else r)
        return out

    def check_grad(self, xs) -> None:
        """Under bt.mode() (STATE.grad_check): refuse now unless every input that requires grad gets its gradient."""
        if not self.float_out:
            return
        mask = tuple([x.requires_grad for x in xs])
        if mask in self._grad_ok:       # (checked before: the answer depends on the mask only)
            return
        if _refuse_undifferentiable(self.name, self.diff, xs):
            self.backward_plan()
        self._grad_ok.add(mask)


def _refuse_undifferentiable(name: str, diff, xs) -> bool:
    """check_grad's rule on the operands: an operand that requires grad and is not in ``diff`` (the op's
    differentiable operands) is refused; returns whether any operand requires grad."""
    wanted = False
    for i, x in enumerate(xs):
        if x.requires_grad:
            if i not in diff:
                raise UnsupportedError(name, f"not differentiable with respect to argument "
                                       f"'{get_spec(name).arg_name(i)}'")
            wanted = True
    return wanted


def _check_differentiable(name: str, xs) -> None:
    """check_grad's rule from the spec alone (no descriptor, no plan: what Dynamo can trace).  An op with no
    gradient at all is let through (its outputs may be integers: argmax of logits that require grad); a backward
    plan that no backend offers is not foreseen here, it raises when the compiled backward runs."""
    spec = get_spec(name)
    if spec.is_differentiable:
        _refuse_undifferentiable(name, frozenset(spec.differentiable), xs)


class _Refused:
    """A call key no plan takes: raises its error again (one lookup, no selection) on every call."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def _owned(outs: list, xs) -> list:
    """``outs`` with any output that is an input (a pass-through plan) copied: callers own what a drop-in
    returns."""
    for j, o in enumerate(outs):
        for x in xs:
            if o is x:
                outs[j] = o.clone()
                break
    return outs


def _cpu_scalars_moved(xs):
    """torch's one exception to "one call, one device": a 0-d CPU tensor beside tensors of another device is a
    scalar, taken to their device (``cuda_x * torch.tensor(2.0)``).  The operands with such scalars moved, or None
    when there is nothing to move (the devices then stand as given, for the device check to judge)."""
    others = {x.device for x in xs if not (x.dim() == 0 and x.device.type == "cpu")}
    if len(others) != 1 or next(iter(others)).type == "cpu" or all(x.device in others for x in xs):
        return None
    (dev,) = others
    return [x if x.device == dev else x.to(dev) for x in xs]


def _device_name(index: int) -> str:
    return "cpu" if index < 0 else f"cuda:{index}"


def _check_devices(name: str, devices) -> None:
    """Every operand of a call on one device (``_core.device.check_devices``, which Plan.run applies too): torch's
    RuntimeError kind, naming the operand off the first one's device.  (A meta tensor beside a CPU one would
    otherwise reach the custom op's fake kernel, which returns uninitialized memory.)"""
    check_devices(name, [get_spec(name).arg_name(i) for i in range(len(devices))], devices)


class Operand:
    """Stands for an operand known only by its shape, dtype and device index (the backward custom op's forward
    operands, the fused path's upstream scalar): what ``bound`` reads of a tensor."""

    __slots__ = ("shape", "dtype", "index")

    def __init__(self, shape, dtype, index: int):
        self.shape, self.dtype, self.index = torch.Size(shape), dtype, index

    def get_device(self) -> int:
        return self.index


def _device_of_args(args) -> torch.device:
    return next(a for a in args if a is not None).device


@functools.lru_cache(maxsize=CACHE_SIZE)
def _bound(name: str, akey: tuple, sig: tuple, pref, device: int = -1):
    try:
        return Bound(name, {k: v for k, v, *_ in akey}, sig, pref, device)
    except (BaracudaError, TypeError, ValueError) as e:
        return _Refused(e)


def _attr_key(attrs: dict) -> tuple:
    """The attributes as a hashable key, each value with its type (1.0 == 1 and True == 1 hash alike)."""
    out = []
    for k, v in attrs.items():
        t = type(v)
        if t is tuple or t is list:
            out.append((k, tuple(v), t, tuple([type(e) for e in v])))
        else:
            out.append((k, v, t))
    return tuple(out)


def bound(name: str, attrs: dict, xs, device: int = -1) -> Bound:
    """The bound call of op ``name`` on tensors ``xs`` with ``attrs`` under the preference in effect (raises the
    call's error where no plan takes it).  ``xs`` may hold stand-ins with ``shape``, ``dtype`` and
    ``get_device()``; ``device``: the device index (-1: the CPU) of a call with no operands."""
    sig = tuple([(x.shape, x.dtype, x.get_device()) for x in xs])
    dev = -1 if xs else device
    try:
        b = _bound(name, _attr_key(attrs), sig, current_preference(), dev)
    except TypeError:       # an unhashable attribute value (a nested list): bound afresh, not cached
        b = _bound.__wrapped__(name, _attr_key(attrs), sig, current_preference(), dev)
    if type(b) is _Refused:
        raise b.error.with_traceback(None)
    return b


def cache_info():
    """The bound-call cache's hits, misses, maxsize and current size (``functools.lru_cache``'s)."""
    return _bound.cache_info()


def cache_clear() -> None:
    _bound.cache_clear()


# -- eager autograd ----------------------------------------------------------------------------------------------
class _Eager(torch.autograd.Function):
    """One bound call under eager autograd.  ``lay``: None, or the :class:`Layout` in which ``xs`` (views of the
    caller's operands) were given to the plan: the outputs go back through it, and the gradients arriving for
    them are taken to the plan's shapes."""

    @staticmethod
    def forward(ctx, b, lay, *xs):
        outs = b.forward(xs)
        ctx.bc, ctx.lay = b, lay
        # an output nobody used gets None, not a zero tensor: backward rules skip its term (e.g. linear_act's
        # saved pre-activation: no zero-fill and no extra add)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*b.saved(xs, outs))
        return tuple(outs) if lay is None else tuple(lay.outs(outs))

    @staticmethod
    def backward(ctx, *grads):
        b = ctx.bc
        # the kernel directly unless a graph of the backward is being built (create_graph, a dispatch mode)
        direct = not _grad_enabled() and not _dispatch_depth()
        if not direct or RECORDERS or not b.diff:
            if ctx.lay is not None:
                grads = ctx.lay.grads(grads)
            return (None, None, *b.input_grads(grads, ctx.saved_tensors, direct, ctx.needs_input_grad[2:]))
        for g in grads:         # (the common case, input_grads' direct path inlined: the backward's host cost)
            if g is not None:
                break
        else:
            return (None,) * (b.n_in + 2)
        bw = b.backward_plan(ctx.needs_input_grad[2:])
        saved = ctx.saved_tensors   # (before own_calls: see its docstring)
        with own_calls():
            if ctx.lay is not None:
                grads = ctx.lay.grads(grads)
            res = bw.replay_tape(grads, saved)
        return (None, None, *_per_input(res, b.gets_grad))


def _per_input(res, gets_grad) -> list:
    """One gradient per input (None where autograd receives none); a rule may leave out trailing operands that
    take no gradient (the random ops' optional ``state``)."""
    out = [r if k else None for r, k in zip(res, gets_grad)]
    if len(out) < len(gets_grad):
        out += [None] * (len(gets_grad) - len(out))
    return out


# Function.apply without its Python prologue (functorch's dead-wrapper unwrapping: call() takes this path only when no
# functorch transform is active, _traced())
_eager_apply = super(torch.autograd.Function, _Eager).apply
_PLAIN = (torch.Tensor, torch.nn.Parameter)
EAGER_FAST_PATH = [True]   # [False]: every call takes the custom op (bench/host_profile.py's A/B)
_is_compiling = torch.compiler.is_compiling
_functorch_active = torch._C._are_functorch_transforms_active
_dispatch_depth = torch._C._len_torch_dispatch_stack
_grad_enabled = torch.is_grad_enabled
_function_mode_on = torch._C._is_torch_function_mode_enabled
_preference = current_preference


def _traced() -> bool:
    """A tracer, a transform or a dispatch mode is active (or the fast path is switched off): the custom op."""
    return not EAGER_FAST_PATH[0] or _is_compiling() or _functorch_active() or _dispatch_depth()


def _plain_tensor(x) -> bool:
    return type(x) in _PLAIN and (x.is_cuda or x.is_cpu)


def _eager_ok(xs) -> bool:
    return not _traced() and all(_plain_tensor(x) for x in xs)


def _through_custom_op(name: str, xs, attrs: dict, device: int = -1):
    for i, x in enumerate(xs):
        if not isinstance(x, torch.Tensor):     # (a drop-in's adapter passes tensors: this is a caller's list, None)
            raise ArgumentTypeError(name, get_spec(name).arg_name(i), "a tensor", given(x))
        if x.device.type not in ("cpu", "cuda", "meta"):
            raise UnsupportedError(name, f"tensors on device {x.device.type} (baracuda runs on cpu and cuda)")
    if len(xs) > 1:
        moved = _cpu_scalars_moved(xs)
        if moved is not None:
            xs = moved
        _check_devices(name, [x.device for x in xs])
    if not xs:      # a creation op: no tensor carries the device, the custom op takes it
        outs = torch.ops.baracuda.create(name, encode_attrs(attrs), torch.device("cuda", device) if device >= 0
                                         else torch.device("cpu"))
        return outs[0] if len(outs) == 1 else tuple(outs)
    if STATE.grad_check and _grad_enabled():
        if _is_compiling():     # (no plan selection while Dynamo traces: it would break the graph)
            _check_differentiable(name, xs)
        else:
            bound(name, attrs, xs).check_grad(xs)
    outs = torch.ops.baracuda.op(name, encode_attrs(attrs), list(xs))
    return outs[0] if len(outs) == 1 else tuple(outs)


def call(name: str, xs, attrs: dict, device: int = -1):
    """Run baracuda op ``name`` on torch tensors ``xs`` with ``attrs``; returns a tensor or a tuple of tensors.
    ``device``: where a call with no operands runs (a creation op; the device index, -1: the CPU), in its key.

    >>> import torch, baracuda.torch as bt
    >>> bt.call("exp", [torch.zeros(2)], {})
    tensor([1., 1.])
    """
    # (one flat function: on a 16-element add this path is what the host pays beyond the launch itself, so the
    # eager checks, the call key and the launch are inlined here; bench/callpath_profile.py)
    if _traced():
        return _through_custom_op(name, xs, attrs, device)
    sig = []
    for x in xs:
        if type(x) not in _PLAIN or not (x.is_cuda or x.is_cpu):     # (_plain_tensor, inlined)
            return _through_custom_op(name, xs, attrs)
        sig.append((x.shape, x.dtype, x.get_device()))
    try:
        b = _bound(name, _attr_key(attrs) if attrs else (), tuple(sig), _preference(), device if not sig else -1)
    except TypeError:       # an unhashable attribute value (a nested list): bound afresh, not cached
        b = bound(name, attrs, xs, device)
    if type(b) is _Refused:
        moved = _cpu_scalars_moved(xs)      # (only on a refusal: the common call pays nothing for torch's rule)
        if moved is not None:
            return call(name, moved, attrs, device)
        raise b.error.with_traceback(None)
    if b.layout_free:
        for x in xs:
            if not x.is_contiguous():   # (channels-last activations: the result keeps their memory order)
                order = _order_of(b, name, xs, attrs)
                if order is not None:
                    return _permuted(order, xs)
                break
    return _run_bound(b, xs, None)


# -- memory order of pointwise results ----------------------------------------------------------------------------
_LAYOUT_FREE: set = set()


def layout_free_ops() -> set:
    """The ops whose result at a position depends only on the operands at that position (elementwise rows of
    broadcast shape, no axis attribute, no operand aligned to a named dim): they may run on their operands in any
    dim order, so a call on channels-last (or otherwise permuted) operands runs on the permuted views and returns
    its result in the operands' memory order, as torch's TensorIterator does."""
    if not _LAYOUT_FREE:
        from ..ops.elementwise import EW_OPS

        _LAYOUT_FREE.update(n for n, e in EW_OPS.items() if e.shape == "broadcast" and e.align is None
                            and not e.internal and not any(a.kind == "axis" for a in e.attrs))
    return _LAYOUT_FREE


def _dense_order(xs) -> tuple | None:
    """The dim order (outermost first) in which every operand of the result's full shape is contiguous, when that is
    not the identity and such an operand is not contiguous (channels-last activations): else None.  Operands of
    lower rank or with broadcast dims follow any order; operands of the full shape in different orders (one
    channels-last, one not) get None (the result is then contiguous, as before)."""
    r = max(x.dim() for x in xs)
    lead = None
    for x in xs:
        if x.dim() == r and not x.is_contiguous():
            lead = x
            break
    if lead is None or r < 2:
        return None
    st = lead.stride()
    perm = tuple(sorted(range(r), key=lambda d: -st[d]))
    shape = lead.shape
    if perm == tuple(range(r)) or torch.broadcast_shapes(*[x.shape for x in xs]) != shape:
        return None
    for x in xs:
        if x.dim() == r and x.shape == shape and not x.permute(perm).is_contiguous():
            return None
    return perm


def permutation(perm: tuple) -> Layout:
    """The Layout of operands given in ``perm``'s dim order (``x.permute(perm)``)."""
    inv = tuple(sorted(range(len(perm)), key=perm.__getitem__))
    return Layout(lambda o: o.permute(inv), lambda g: g.permute(perm), len(perm))


_ORDERS_PER_CALL = 8     # (strides seen per bound call: channels-last, and a few transposed forms at most)


def _order_of(b: Bound, name: str, xs, attrs: dict):
    """(perm, its Layout, the bound call of the permuted operands) for a layout-free call ``b`` on ``xs``, or
    None when the operands share no dense order; remembered per bound call by the operands' strides (the decision
    and the permuted binding cost ~30 us of host time; a hit, one dict lookup)."""
    key = tuple([x.stride() for x in xs])
    orders = b.orders
    if orders is None:
        orders = b.orders = {}
    elif key in orders:
        return orders[key]
    perm = _dense_order(xs)
    order = None if perm is None else (perm, permutation(perm), bound(name, attrs, _permute_all(xs, perm)))
    if len(orders) < _ORDERS_PER_CALL:
        orders[key] = order
    return order


def _permute_all(xs, perm):
    r = len(perm)
    return [x.permute(perm) if x.dim() == r else x.reshape((1,) * (r - x.dim()) + tuple(x.shape)).permute(perm)
            for x in xs]


def _permuted(order, xs):
    """A layout-free call on operands contiguous in ``perm``'s order: the plan of the permuted views."""
    perm, lay, b = order
    return _run_bound(b, _permute_all(xs, perm), lay)


def laid_out(name: str, xs, attrs: dict, lay: Layout):
    """``call`` of op ``name`` on ``xs``, views of the caller's operands in ``lay`` (see ``ops._common.Layout``)."""
    if not _eager_ok(xs):       # a tracer or transform: the custom op on the views, the outputs viewed back
        outs = _through_custom_op(name, xs, attrs)
        outs = lay.outs([outs] if isinstance(outs, torch.Tensor) else list(outs), detach=False)
        return outs[0] if len(outs) == 1 else tuple(outs)
    return _run_bound(bound(name, attrs, xs), xs, lay)


def _run_bound(b: Bound, xs, lay: Layout | None):
    """The bound call on ``xs`` (tensors matching its key): under eager autograd where an input requires grad, else
    the launcher; ``lay``: None, or the Layout the outputs go back through."""
    if b.float_out and _grad_enabled():
        for x in xs:
            if x.requires_grad:
                if STATE.grad_check:
                    b.check_grad(xs)
                outs = _eager_apply(b, lay, *xs)
                return outs[0] if len(outs) == 1 else outs
    if RECORDERS or _function_mode_on():
        outs = b.forward(xs)        # marks baracuda's own torch calls for an active bt.mode(); records
    else:
        outs = _owned(b.go(xs), xs)
    if lay is not None:
        outs = lay.outs(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)


# -- in-place forms of pointwise ops ------------------------------------------------------------------------------
_bump_version = torch.autograd.graph.increment_version


def _shares_memory(x, target) -> bool:
    return x is not target and x.untyped_storage().data_ptr() == target.untyped_storage().data_ptr()


def run_into(name: str, xs, attrs: dict):
    """The in-place form of layout-free (pointwise) op ``name`` on ``xs``, whose first operand is the tensor written:
    the kernel writes the result over ``xs[0]`` directly (no result buffer, no copy), with torch's in-place autograd
    (``mark_dirty``) where a gradient is wanted.  Returns ``xs[0]``, or None where this path does not apply and the
    caller computes out of place, then copies (see ``bt.mode()``'s ``_Route._in_place``): a tracer, a plan that
    cannot write into a given buffer (the NumPy reference backend), a result of another shape or dtype (torch's
    errors come from that path), another operand sharing ``xs[0]``'s memory, operands with no common dense memory
    order, and -- with a gradient wanted -- a view written (its base's history is torch's CopySlices) or a backward
    that reads ``xs[0]``'s overwritten value."""
    if _traced() or RECORDERS:
        return None
    target = xs[0]
    for x in xs:
        if not _plain_tensor(x):
            return None
    try:
        b = bound(name, attrs, xs)
    except (BaracudaError, TypeError, ValueError):     # (the caller's path raises the call's error)
        return None
    if not b.layout_free:
        return None
    o = b.desc.outputs[0]
    if target.shape != o.shape or b.plan._out_tdt is None or b.plan._out_tdt[0] is not target.dtype:
        return None
    for x in xs[1:]:
        if _shares_memory(x, target):
            return None
    fb, perm = b, None
    if not target.is_contiguous():
        order = _order_of(b, name, xs, attrs)
        if order is None:
            return None
        perm, _, fb = order
    grad = b.float_out and _grad_enabled() and any(x.requires_grad for x in xs)
    if not grad:
        if not fb.write_into(xs if perm is None else _permute_all(xs, perm),
                             target if perm is None else target.permute(perm)):
            return None
        _bump_version(target)
        return target
    if target._base is not None or any(not is_out and xs[i] is target for is_out, i in b.recipe):
        return None
    if STATE.grad_check:
        b.check_grad(xs)
    if not fb.writes():
        return None
    return _Into.apply(b, (fb, perm), *xs)


class _Into(torch.autograd.Function):
    """One in-place pointwise call under eager autograd: the kernel of ``fb`` (the bound call of the operands in
    dim order ``perm``, or None: as given) writes over ``xs[0]``; the backward runs ``fb``'s backward plan in the
    same dim order, so channels-last operands get channels-last gradients (views of the plan's contiguous ones)."""

    @staticmethod
    def forward(ctx, b, how, *xs):
        fb, perm = how
        target = xs[0]
        fb.write_into(xs if perm is None else _permute_all(xs, perm),
                      target if perm is None else target.permute(perm))
        ctx.mark_dirty(target)
        ctx.bc, ctx.perm = fb, perm
        ctx.shapes = None if perm is None else [x.shape for x in xs]
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*fb.saved(xs, [target]))
        return target

    @staticmethod
    def backward(ctx, grad):
        b, perm = ctx.bc, ctx.perm
        if grad is None:
            return (None,) * (b.n_in + 2)
        saved = ctx.saved_tensors   # (before own_calls: see its docstring)
        needs = ctx.needs_input_grad[2:]
        if _grad_enabled() or _dispatch_depth() or RECORDERS:   # a graph of the backward: the custom op
            if perm is not None:
                grad, saved = grad.permute(perm), _permute_all(saved, perm)
            res = b.input_grads((grad,), saved, not _grad_enabled() and not _dispatch_depth(), needs)
            return (None, None, *_unpermuted(res, perm, ctx.shapes))
        with own_calls():
            if perm is not None:
                grad, saved = grad.permute(perm), _permute_all(saved, perm)
            res = b.backward_plan(needs).replay_tape((grad,), saved)
            res = _unpermuted([r if k else None for r, k in zip(res, b.gets_grad)], perm, ctx.shapes)
        return (None, None, *res)


def _unpermuted(res, perm, shapes):
    """Gradients computed in dim order ``perm`` (None: as given), viewed back in the operands' own (``shapes``)."""
    if perm is None:
        return res
    inv = tuple(sorted(range(len(perm)), key=perm.__getitem__))
    return [None if r is None else r.permute(inv).reshape(shape) for r, shape in zip(res, shapes)]
