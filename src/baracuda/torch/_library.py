"""Two generic torch.library custom ops carry every baracuda op into PyTorch:

    baracuda::op(str name, str attrs, Tensor[] xs) -> Tensor[]
    baracuda::op_backward(str name, str attrs, str sig, Tensor?[] args) -> Tensor[]

``attrs`` is the descriptor's attributes as canonical JSON, ``sig`` the forward operands' shapes and dtypes.
Each has a fake (meta) implementation computed from the op's shape rule, so torch.compile(fullgraph=True)
traces models that call baracuda ops without graph breaks; autograd is registered once, generically, from
each spec's backward rule (through BackwardPlan), so every differentiable op is differentiable in torch.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import json
import threading

import torch

from .._core.device import Device
from .._core.dtypes import DType, as_dtype
from .._core.options import DEFAULT_PREFERENCE, PlanPreference
from .._core.plan import BackwardPlan, plan_for
from .._core.errors import UnsupportedError
from .._core.spec import Descriptor, TensorSpec, get_spec, saved_names

_lib = torch.library.Library("baracuda", "DEF")
_lib.define("op(str name, str attrs, Tensor[] xs) -> Tensor[]")
_lib.define("op_backward(str name, str attrs, str sig, Tensor?[] args) -> Tensor[]")

_PREF = [DEFAULT_PREFERENCE]


def get_preference() -> PlanPreference:
    return _PREF[-1]


@contextlib.contextmanager
def preference(pref: PlanPreference):
    """Run baracuda.torch ops under ``pref`` (e.g. force a backend, allow TF32) inside the ``with`` block."""
    _PREF.append(pref)
    try:
        yield pref
    finally:
        _PREF.pop()


# -- attribute encoding ------------------------------------------------------------------------
# attrs travel as a Python literal (repr) so that Dynamo can constant-fold the encoding while tracing
# (it cannot trace json); DTypes (ours or torch's) become ("__dtype__", "bf16"); non-finite floats (repr 'inf' /
# 'nan' are not literals: vector_norm's ord=inf, cdist's p=inf) become ("__float__", "inf").
_DT_TAG = "__dtype__"
_FL_TAG = "__float__"


def _enc(v):
    if isinstance(v, DType):
        return (_DT_TAG, v.short)
    if isinstance(v, (tuple, list)):
        return tuple(_enc(x) for x in v)
    if isinstance(v, torch.dtype):
        return (_DT_TAG, as_dtype(v).short)
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return (_FL_TAG, repr(v))
    return v


def _dec(v):
    if isinstance(v, tuple):
        if len(v) == 2 and v[0] == _DT_TAG:
            return as_dtype(v[1])
        if len(v) == 2 and v[0] == _FL_TAG:
            return float(v[1])
        return tuple(_dec(x) for x in v)
    return v


def encode_attrs(attrs: dict) -> str:
    return repr(tuple((k, _enc(attrs[k])) for k in sorted(attrs)))


@functools.lru_cache(maxsize=4096)
def decode_attrs(s: str) -> tuple:
    return tuple((k, _dec(v)) for k, v in ast.literal_eval(s))


@functools.lru_cache(maxsize=8192)
def _descriptor(name: str, attrs: str, sig: tuple) -> Descriptor:
    return Descriptor(name, tuple(TensorSpec(s, d) for s, d in sig), decode_attrs(attrs))


def _sig(xs) -> tuple:
    return tuple((tuple(x.shape), as_dtype(x.dtype)) for x in xs)


def _device_of(xs) -> Device:
    for x in xs:
        if x is not None and x.device.type == "cuda":
            return Device("cuda", x.device.index or 0)
    return Device("cpu")


# -- recording (for the demo and debugging; off the hot path unless a recorder is active) --------
_RECORDERS: list = []


@contextlib.contextmanager
def record(check: bool = True):
    """Record every baracuda op that runs inside the block: kind (fw/bw), descriptor, SKU(s), time in ms
    (device-synchronized), and with ``check`` the max error against the float64 reference backend."""
    log: list[dict] = []
    _RECORDERS.append((log, check))
    try:
        yield log
    finally:
        _RECORDERS.pop()


def _timed(fn, device: Device):
    import time

    if device.type == "cuda":
        torch.cuda.synchronize(device.index)
    t0 = time.perf_counter()
    res = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device.index)
    return res, (time.perf_counter() - t0) * 1e3


def _max_err(got, want) -> float:
    import numpy as np

    from ..testing import to_f64

    g, w = to_f64(got), np.asarray(want, dtype=np.float64)
    if g.size == 0:
        return 0.0
    scale = max(float(np.nanmax(np.abs(w))), 1e-30)
    return float(np.nanmax(np.abs(g - w))) / scale


def _record_fw(desc, plan, xs, run):
    log, check = _RECORDERS[-1]
    out, ms = _timed(run, plan.device)
    err = None
    if check:
        from ..testing import reference_f64

        ref = reference_f64(desc, [x.detach().cpu() for x in xs])
        outs = out if isinstance(out, tuple) else (out,)
        err = max(_max_err(o.detach().cpu(), r) for o, r in zip(outs, ref)) if outs else 0.0
    log.append({"kind": "fw", "op": desc.op, "desc": str(desc), "sku": str(plan.sku), "ms": ms, "rel_err": err})
    return out


# -- inside a kernel: torch calls made by baracuda's own plumbing are not the user's ----------------
_INSIDE = threading.local()


def inside_baracuda() -> bool:
    """True while a baracuda op or backward op runs (``baracuda.torch.mode`` then leaves torch calls alone)."""
    return getattr(_INSIDE, "depth", 0) > 0


def _inside(fn):
    @functools.wraps(fn)
    def wrapped(*args):
        _INSIDE.depth = getattr(_INSIDE, "depth", 0) + 1
        try:
            return fn(*args)
        finally:
            _INSIDE.depth -= 1
    return wrapped


# -- forward -----------------------------------------------------------------------------------
def _op_impl(name: str, attrs: str, xs):
    return _op_run(_descriptor(name, attrs, _sig(xs)), xs)


@_inside
def _op_run(desc: Descriptor, xs):
    plan = plan_for(desc, _device_of(xs), get_preference())
    if _RECORDERS:
        out = _record_fw(desc, plan, xs, lambda: plan.run(*xs))
    else:
        out = plan.run(*xs)
    outs = list(out) if isinstance(out, tuple) else [out]
    # a custom op must not return an input (aliasing): copy in the rare pass-through case
    return [o.clone() if any(o is x for x in xs) else o for o in outs]


def _op_fake(name: str, attrs: str, xs):
    desc = _descriptor(name, attrs, _sig(xs))
    dev = xs[0].device if xs else torch.device("cpu")
    return [torch.empty(t.shape, dtype=t.dtype.torch, device=dev) for t in desc.outputs]


_lib.impl("op", _op_impl, "CPU")
_lib.impl("op", _op_impl, "CUDA")
torch.library.register_fake("baracuda::op", _op_fake, lib=_lib)


# -- backward ----------------------------------------------------------------------------------
def _sig_str(desc: Descriptor) -> str:
    return json.dumps([[list(t.shape), t.dtype.short] for t in desc.inputs], separators=(",", ":"))


@functools.lru_cache(maxsize=8192)
def _desc_from_sig(name: str, attrs: str, sig: str) -> Descriptor:
    specs = tuple((tuple(s), as_dtype(d)) for s, d in json.loads(sig))
    return _descriptor(name, attrs, specs)


def _bw_impl(name: str, attrs: str, sig: str, args):
    return _bw_run(_desc_from_sig(name, attrs, sig), args)


@_inside
def _bw_run(desc: Descriptor, args):
    n_out = len(desc.outputs)
    grads, saved_list = args[:n_out], args[n_out:]
    bw = _bw_plan(desc, _device_of(args), get_preference())
    saved = dict(zip(bw.saves, saved_list))
    if _RECORDERS:
        res, ms = _timed(lambda: bw.run(*grads, **saved), bw.device)
        _RECORDERS[-1][0].append({"kind": "bw", "op": desc.op, "desc": str(desc),
                                  "sku": "; ".join(str(k) for k in bw.skus), "ms": ms, "rel_err": None})
    else:
        res = bw.run(*grads, **saved)
    dev = next(a for a in args if a is not None).device
    out = []
    for r, t in zip(res, desc.inputs):
        if r is None:
            out.append(torch.empty(0, device=dev))
        else:
            out.append(r.clone() if any(r is a for a in args) else r)
    return out


@functools.lru_cache(maxsize=4096)
def _bw_plan(desc, device, pref) -> BackwardPlan:
    return BackwardPlan(desc, device, pref)


def _bw_fake(name: str, attrs: str, sig: str, args):
    desc = _desc_from_sig(name, attrs, sig)
    dev = next(a for a in args if a is not None).device
    spec = desc.spec
    return [torch.empty(t.shape, dtype=t.dtype.torch, device=dev) if i in spec.differentiable and t.dtype.is_floating
            else torch.empty(0, device=dev) for i, t in enumerate(desc.inputs)]


_lib.impl("op_backward", _bw_impl, "CPU")
_lib.impl("op_backward", _bw_impl, "CUDA")
torch.library.register_fake("baracuda::op_backward", _bw_fake, lib=_lib)


def _setup_context(ctx, inputs, output):
    name, attrs, xs = inputs
    _save(ctx, _descriptor(name, attrs, _sig(xs)), attrs, xs, output)


def _save(ctx, desc: Descriptor, attrs: str, xs, output):
    ctx.bc_desc = desc
    ctx.bc_attrs = attrs
    # an output nobody used gets None, not a zero tensor: backward rules skip its term (e.g. linear_act's
    # saved pre-activation: no zero-fill and no extra add)
    ctx.set_materialize_grads(False)
    spec = desc.spec
    if not spec.is_differentiable:
        ctx.save_for_backward()
        return
    saved = []
    argn = spec.arg_names
    for n in saved_names(desc):
        if n in argn:
            saved.append(xs[argn.index(n)])
        elif n == "out":
            saved.append(output[0])
        else:
            saved.append(output[int(n[3:])])
    ctx.save_for_backward(*saved)


def _backward(ctx, grads, direct=False):
    """``direct``: call the backward kernel without the dispatcher (the eager path, when no graph of the
    backward is being built: create_graph=False and no tracing mode)."""
    desc = ctx.bc_desc
    spec = desc.spec
    if not spec.is_differentiable:
        raise RuntimeError(f"baracuda.{desc.op}: not differentiable")
    if all(g is None for g in grads):
        return None, None, [None] * len(desc.inputs)
    args = list(grads) + list(ctx.saved_tensors)
    if direct:
        res = _bw_run(desc, args)
    else:
        res = torch.ops.baracuda.op_backward(desc.op, ctx.bc_attrs, _sig_str(desc), args)
    out = [r if (i in spec.differentiable and desc.inputs[i].dtype.is_floating) else None for i, r in enumerate(res)]
    return None, None, out


torch.library.register_autograd("baracuda::op", _backward, setup_context=_setup_context, lib=_lib)


@contextlib.contextmanager
def differentiable_only():
    """Inside the block, an op called on tensors that require grad (grad mode on) raises UnsupportedError at
    once unless baracuda differentiates it with respect to them (its backward plan is built, so a rule that
    cannot run for these dtypes refuses here, not in ``backward()``).  ``baracuda.torch.mode`` runs drop-ins
    under it so that torch takes those calls instead."""
    prev = getattr(_INSIDE, "grad_check", False)
    _INSIDE.grad_check = True
    try:
        yield
    finally:
        _INSIDE.grad_check = prev


def _check_differentiable(name: str, attrs: str, xs) -> None:
    wanted = [i for i, x in enumerate(xs) if x.requires_grad]
    if not wanted:
        return
    desc = _descriptor(name, attrs, _sig(xs))
    if not any(t.dtype.is_floating for t in desc.outputs):
        return
    spec = desc.spec
    bad = [i for i in wanted if not spec.is_differentiable or i not in spec.differentiable]
    if bad:
        arg = spec.arg_names[bad[0]] if bad[0] < len(spec.arg_names) else bad[0]
        raise UnsupportedError(name, f"not differentiable with respect to argument '{arg}'")
    _bw_plan(desc, _device_of(xs), get_preference())


# -- the eager fast path -----------------------------------------------------------------------------
# In plain eager code the custom op's dispatch (the dispatcher, torch.library's generic autograd wrapper with its
# pytree flatten / unflatten of the arguments, the redispatch to the CPU/CUDA kernel) costs more host time than
# the op's own plan lookup and launch.  Where nothing but autograd needs to see the op, _Eager runs the same
# forward (_op_run), the same saved tensors (_save) and the same backward (_backward) as a plain
# autograd.Function.  Everything else keeps the custom op: Dynamo tracing (torch.compile), functorch transforms
# (vmap, grad), dispatch modes (FakeTensorMode, make_fx / export tracing), tensor subclasses and meta tensors.
class _Eager(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, attrs, *xs):
        desc = _descriptor(name, attrs, _sig(xs))
        outs = _op_run(desc, xs)
        _save(ctx, desc, attrs, xs, outs)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        direct = not torch.is_grad_enabled() and not torch._C._len_torch_dispatch_stack()
        _, _, res = _backward(ctx, grads, direct)
        return (None, None, *res)


_PLAIN = (torch.Tensor, torch.nn.Parameter)
EAGER_FAST_PATH = [True]   # [False]: every call takes the custom op (bench/host_profile.py's A/B)


def _eager_ok(xs) -> bool:
    if not EAGER_FAST_PATH[0] or torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active() \
            or torch._C._len_torch_dispatch_stack():
        return False
    return all(type(x) in _PLAIN and not x.is_meta for x in xs)


def call(name: str, xs, attrs: dict):
    """Run baracuda op ``name`` on torch tensors: the custom op (autograd + torch.compile aware), or in plain
    eager code the same forward, saved tensors and backward through an autograd.Function (_Eager)."""
    enc = encode_attrs(attrs)
    if getattr(_INSIDE, "grad_check", False) and torch.is_grad_enabled():
        _check_differentiable(name, enc, xs)
    if _eager_ok(xs):
        outs = _Eager.apply(name, enc, *xs)
    else:
        outs = torch.ops.baracuda.op(name, enc, list(xs))
    return outs[0] if len(outs) == 1 else tuple(outs)
