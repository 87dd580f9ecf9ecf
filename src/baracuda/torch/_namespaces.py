"""Publish one drop-in function per op spec that names a torch function and has a ``dropin`` adapter."""
from __future__ import annotations

import functools

from .._core.spec import all_specs
from ._fused import run_if_fused
from ._call import call


def _make(spec, torch_name):
    adapter, name, fused, result = spec.dropin, spec.name, spec.fused_grad is not None, spec.dropin_result

    @functools.wraps(spec.dropin)
    def dropin(*args, **kwargs):
        res = adapter(*args, **kwargs)
        # cross_entropy / linear_cross_entropy under eager autograd: the loss and its gradients from one pass,
        # returned as the drop-in's result (_fused.py)
        if fused:
            out = run_if_fused(spec, res[0], res[1])
            if out is not None:
                return out
        # a creation op's adapter also names the device (no operand carries it): (operands, attrs, finisher, device)
        out = call(name, res[0], res[1]) if len(res) < 4 else call(name, res[0], res[1], res[3])
        if len(res) > 2 and res[2] is not None:   # the adapter's finisher (batch_norm: copy the new running stats
            out = res[2](out)                     # into the buffers; creation: out=, requires_grad, strides)
        return out if result is None else result(out)

    dropin.__name__ = torch_name.rsplit(".", 1)[-1]
    dropin.__qualname__ = dropin.__name__
    dropin.__doc__ = (f"baracuda drop-in for ``{torch_name}`` (op ``{spec.name}``).\n\n"
                      + (spec.doc or ""))
    return dropin


def build(top_ns: dict, submodules: dict) -> dict[str, str]:
    """Set the drop-ins on ``baracuda.torch`` (``top_ns``) and its sub-namespaces; returns torch name -> op."""
    published: dict[str, str] = {}
    for spec in all_specs():
        if spec.dropin is None:
            continue
        for torch_name in ((spec.torch_name,) if spec.torch_name else ()) + tuple(spec.torch_aliases):
            if not torch_name.startswith("torch."):
                continue
            mod_name, fn_name = torch_name.rsplit(".", 1)
            if not fn_name.isidentifier():
                continue
            fn = _make(spec, torch_name)
            if mod_name == "torch":
                top_ns[fn_name] = fn
            elif mod_name in submodules:
                setattr(submodules[mod_name], fn_name, fn)
            else:
                continue
            published[torch_name[len("torch."):]] = spec.name
    return published
