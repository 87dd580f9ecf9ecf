"""Two generic torch.library custom ops carry every baracuda op into PyTorch's tracers:

    baracuda::op(str name, str attrs, Tensor[] xs) -> Tensor[]
    baracuda::op_backward(str name, str attrs, str sig, SymInt[] dims, Tensor?[] args) -> Tensor[]
    baracuda::create(str name, str attrs, Device device) -> Tensor[]     (creation ops: no tensor operand)

``attrs`` is the descriptor's attributes as a Python literal, ``sig`` the forward operands' ranks and dtypes and
``dims`` their sizes (SymInts under dynamic shapes: a compiled function called at a second shape traces them).
Each has a fake (meta) implementation computed from the op's shape rule, so torch.compile(fullgraph=True) traces
models that call baracuda ops without graph breaks; autograd is registered once, generically, from each spec's
backward rule (through BackwardPlan), so every differentiable op is differentiable in torch.  Their real
implementations resolve the same bound calls as the eager path (``_call.py``: one cache).  Plain eager code does
not come here at all (``_call.call``).
"""
from __future__ import annotations

import torch

from .._core.dtypes import as_dtype
from .._core.spec import Descriptor, TensorSpec, get_spec
from ._call import Call, Operand, _check_devices, bound
from ._schema import decode_attrs, parse_sig

_lib = torch.library.Library("baracuda", "DEF")
_lib.define("op(str name, str attrs, Tensor[] xs) -> Tensor[]")
_lib.define("op_backward(str name, str attrs, str sig, SymInt[] dims, Tensor?[] args) -> Tensor[]")
_lib.define("create(str name, str attrs, Device device) -> Tensor[]")


def _operands(sig: str, dims, args) -> list:
    dev = next(a for a in args if a is not None)
    index = dev.get_device()
    return [Operand(s, d.torch, index) for s, d in parse_sig(sig, dims)]


# -- forward -----------------------------------------------------------------------------------
def _op_impl(name: str, attrs: str, xs):
    return bound(name, decode_attrs(attrs), xs).forward(xs)


def _descriptor(name: str, attrs: str, xs) -> Descriptor:
    # no plan under a fake mode or a tracer (plans bind kernels and may allocate): the descriptor's rules alone
    return Descriptor(name, tuple(TensorSpec(tuple(x.shape), as_dtype(x.dtype)) for x in xs),
                      tuple(sorted(decode_attrs(attrs).items())))


def _op_fake(name: str, attrs: str, xs):
    if len(xs) > 1:
        _check_devices(name, [x.device for x in xs])
    desc = _descriptor(name, attrs, xs)
    dev = xs[0].device if xs else torch.device("cpu")
    return [torch.empty(t.shape, dtype=t.dtype.torch, device=dev) for t in desc.outputs]


_lib.impl("op", _op_impl, "CPU")
_lib.impl("op", _op_impl, "CUDA")
torch.library.register_fake("baracuda::op", _op_fake, lib=_lib)


# -- creation (no tensor operand: the device is an argument; the dispatcher, with no tensor to read a backend
# from, runs the CompositeExplicitAutograd kernel; fake tensor modes, make_fx and Dynamo run the fake one) --------
def _create_impl(name: str, attrs: str, device: torch.device):
    return bound(name, decode_attrs(attrs), (), device.index if device.type == "cuda" else -1).forward(())


def _create_fake(name: str, attrs: str, device: torch.device):
    return [torch.empty(t.shape, dtype=t.dtype.torch, device=device) for t in _descriptor(name, attrs, ()).outputs]


_lib.impl("create", _create_impl, "CompositeExplicitAutograd")
torch.library.register_fake("baracuda::create", _create_fake, lib=_lib)


# -- backward ----------------------------------------------------------------------------------
def _bw_impl(name: str, attrs: str, sig: str, dims, args):
    res = bound(name, decode_attrs(attrs), _operands(sig, dims, args)).run_backward(args, as_tensors=True)
    # a custom op's outputs may not alias its inputs: a rule's view of a gradient (sum's expanded upstream) is
    # materialized here, for the compiler; eager autograd keeps the view
    storages = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor) and a.numel()}
    return [r.clone(memory_format=torch.contiguous_format)
            if isinstance(r, torch.Tensor) and r.numel() and r.untyped_storage().data_ptr() in storages else r
            for r in res]


def _bw_fake(name: str, attrs: str, sig: str, dims, args):
    # (the gradients take the forward operands' shapes: no descriptor, whose checks would run on symbolic sizes)
    dev = next(a for a in args if a is not None).device
    diff = get_spec(name).differentiable
    return [torch.empty(s, dtype=d.torch, device=dev) if i in diff and (d.is_floating or d.is_complex)
            else torch.empty(0, device=dev) for i, (s, d) in enumerate(parse_sig(sig, dims))]


_lib.impl("op_backward", _bw_impl, "CPU")
_lib.impl("op_backward", _bw_impl, "CUDA")
torch.library.register_fake("baracuda::op_backward", _bw_fake, lib=_lib)


def _setup_context(ctx, inputs, output):
    name, attrs, xs = inputs
    c = ctx.bc = Call(_descriptor(name, attrs, xs), attrs)
    # an output nobody used gets None, not a zero tensor (as on the eager path)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(*c.saved(xs, output))


def _backward(ctx, grads):
    return None, None, ctx.bc.input_grads(grads, ctx.saved_tensors, direct=False)


torch.library.register_autograd("baracuda::op", _backward, setup_context=_setup_context, lib=_lib)
