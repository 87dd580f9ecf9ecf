"""Publish one drop-in function per op spec that names a torch function and has a ``dropin`` adapter; the
namespace modules (``baracuda.torch.nn.functional``, ``.linalg``, ...), importable like torch's; the count of
torch's public functions the mirror covers (``baracuda ops``)."""
from __future__ import annotations

import functools
import importlib.machinery
import sys
import types

from .._core.spec import all_specs
from ._fused import run_if_fused
from ..ops._common import Layout
from ._call import call, laid_out

# op -> the composition of other drop-ins that runs the forms of its torch function the op does not take (the
# op's adapter returns None for them); called with the adapter's arguments.  Filled by _composed.py on import.
COMPOSITIONS: dict = {}

# torch module -> the baracuda.torch attribute path that mirrors it ("" : baracuda.torch itself)
NAMESPACES = {"torch": "", "torch.nn": "nn", "torch.nn.functional": "nn.functional", "torch.linalg": "linalg",
              "torch.fft": "fft", "torch.special": "special"}


def _make(spec, torch_name, translate=None):
    """The drop-in for ``torch_name`` running ``spec``: ``translate`` (torch_name's signature -> the positional
    and keyword arguments of ``spec.dropin``, whose signature is the spec's own torch function) when the two
    signatures differ.  An adapter returning None hands the call (its own signature's arguments) to the op's
    composition of other drop-ins (``COMPOSITIONS``, filled by ``_composed.py``: the forms of torch's function
    the op does not take, e.g. instance_norm's running statistics)."""
    name, fused, result, adapter = spec.name, spec.fused_grad is not None, spec.dropin_result, spec.dropin

    @functools.wraps(translate or spec.dropin)
    def dropin(*args, **kwargs):
        if translate is not None:
            args, kwargs = translate(*args, **kwargs)
        res = adapter(*args, **kwargs)
        if res is None:   # a form of the torch function the op does not take: composed of other drop-ins
            return COMPOSITIONS[name](*args, **kwargs)
        # cross_entropy / linear_cross_entropy under eager autograd: the loss and its gradients from one pass,
        # returned as the drop-in's result (_fused.py)
        if fused:
            out = run_if_fused(spec, res[0], res[1])
            if out is not None:
                return out
        fin = res[2] if len(res) > 2 else None
        if type(fin) is Layout:     # operands viewed in the plan's layout (batch_norm of channels-last input)
            out = laid_out(name, res[0], res[1], fin)
            out = out if fin.finish is None else fin.finish(out)
            return out if result is None else result(out)
        # a creation op's adapter also names the device (no operand carries it): (operands, attrs, finisher, device)
        out = call(name, res[0], res[1]) if len(res) < 4 else call(name, res[0], res[1], res[3])
        if len(res) > 2 and res[2] is not None:   # the adapter's finisher (batch_norm: copy the new running stats
            out = res[2](out)                     # into the buffers; creation: out=, requires_grad, strides)
        return out if result is None else result(out)

    # what bt.mode()'s in-place forms run directly (the op and its operands, then written over the first one)
    dropin._bt_op, dropin._bt_adapter = name, (adapter if translate is None and not fused else None)
    dropin.__name__ = torch_name.rsplit(".", 1)[-1]
    dropin.__qualname__ = dropin.__name__
    dropin.__doc__ = (f"baracuda drop-in for ``{torch_name}`` (op ``{spec.name}``).\n\n"
                      + (spec.doc or ""))
    return dropin


def _method_only(fn_name: str) -> bool:
    """A ``torch.Tensor`` method that has no ``torch.X`` function and does not return a view (by its ATen schema:
    ``x.to(x.dtype)`` and ``x.contiguous()`` return ``x`` itself, so a materializing drop-in would differ)."""
    import torch

    from ._mode import _is_view

    return getattr(torch, fn_name, None) is None and hasattr(torch.Tensor, fn_name) and not _is_view(fn_name)


def put(namespaces: dict, key: str, fn, own: bool = True) -> None:
    """Set ``fn`` at ``key`` ("gelu", "nn.functional.gelu") of the mirror (``namespaces``: path -> dict); a function
    of ours (``own``, not one of torch's) is given that module's name, where pickle and help() look for it."""
    path, _, fn_name = key.rpartition(".")
    if own:
        fn.__module__ = namespaces[path]["__name__"]
    namespaces[path][fn_name] = fn


def build(namespaces: dict, owned=frozenset()) -> dict[str, str]:
    """Set the drop-ins on the mirror's namespaces (path -> the module's dict, "" for ``baracuda.torch``) and return
    torch name -> op.  A name in ``owned`` (published by ``_views`` / ``_aliases``: a view, a twin with its own
    signature) is skipped.  A ``torch.Tensor.X`` method without a ``torch.X`` function is published as ``X`` with
    the tensor first (``bt.repeat(x, 2, 1)``), which is also how ``bt.mode()`` routes ``x.repeat(2, 1)``."""
    published: dict[str, str] = {}
    for spec in all_specs():
        if spec.dropin is None:
            continue
        for torch_name in ((spec.torch_name,) if spec.torch_name else ()) + tuple(spec.torch_aliases):
            mod_name, _, fn_name = torch_name.rpartition(".")
            if not fn_name.isidentifier():
                continue
            if mod_name == "torch.Tensor" and _method_only(fn_name):
                key = fn_name
            elif mod_name in NAMESPACES:
                key = torch_name[len("torch."):]
            else:
                continue
            if key in owned:
                continue
            put(namespaces, key, _make(spec, torch_name))
            published[key] = spec.name
    return published


def make_modules(package: str, parent: dict) -> dict:
    """The mirror's sub-namespaces as real modules registered in ``sys.modules`` (``import
    baracuda.torch.nn.functional as F`` works), set as attributes of their parents; returns path -> module dict."""
    spaces = {"": parent}
    for path in sorted(p for p in NAMESPACES.values() if p):
        name = f"{package}.{path}"
        mod = types.ModuleType(name, f"baracuda's mirror of ``torch.{path}``: drop-ins with torch's signatures.")
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        mod.__path__ = []            # a package: its own sub-namespaces import too
        mod.__all__ = []
        sys.modules[name] = mod
        head, _, last = path.rpartition(".")
        spaces[head][last] = mod
        spaces[path] = vars(mod)
    return spaces


def set_all(spaces: dict, keys) -> None:
    """Each sub-namespace's ``__all__``: its published names."""
    for path, ns in spaces.items():
        if path:
            prefix = path + "."
            subs = [p[len(prefix):] for p in spaces if p.startswith(prefix) and "." not in p[len(prefix):]]
            ns["__all__"] = sorted({k[len(prefix):] for k in keys
                                    if k.startswith(prefix) and "." not in k[len(prefix):]} | set(subs))


# -- how much of torch the mirror covers ----------------------------------------------------------------------
def public_functions() -> dict[str, object]:
    """torch's public functions, by name relative to ``torch`` ("softmax", "nn.functional.gelu"): every attribute
    of ``torch``, ``torch.nn.functional``, ``torch.special``, ``torch.linalg`` and ``torch.fft`` whose name does
    not start with ``_`` and which is a function ``torch.overrides.get_testing_overrides()`` knows (the functions
    that take part in ``__torch_function__``: no classes, submodules, dtypes, or utilities such as
    ``torch.is_tensor`` or ``torch.manual_seed``)."""
    from torch.overrides import get_testing_overrides

    known = {id(f) for f in get_testing_overrides()}
    out = {}
    for mod_name in ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"):
        mod = importlib.import_module(mod_name)
        for n in dir(mod):
            obj = getattr(mod, n, None)
            if n.startswith("_") or isinstance(obj, (type, types.ModuleType)) or id(obj) not in known:
                continue
            out[(mod_name + "." + n)[len("torch."):]] = obj
    return out


def mirror_coverage(ours) -> tuple[list[str], list[str]]:
    """(covered, missing): torch's public functions (``public_functions``) that the mirror publishes under the same
    name and those it does not.  ``ours``: the published names, ``baracuda.torch``'s ``PUBLISHED`` and ``VIEWS``
    keys, not merely its attributes (``bt.mode`` is baracuda's routing mode, not ``torch.mode``)."""
    ours = set(ours)
    names = sorted(public_functions())
    return [n for n in names if n in ours], [n for n in names if n not in ours]


MIRRORED = "torch.*, torch.nn.functional.*, torch.special.*, torch.linalg.*, torch.fft.*"
