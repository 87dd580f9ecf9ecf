"""``baracuda.torch.vision``: drop-ins for ``torchvision.ops`` (roi_align, roi_pool, nms, batched_nms) with
torchvision's exact signatures and results.

They are plain functions of this module, not a namespace of the mirror: the mirror's namespaces (``_namespaces.
NAMESPACES``) stand for torch modules, which its coverage count, ``bt.mode()``'s routing table and the mirror tests
resolve by name in torch; torchvision is a separate package (often not installed), and its ops are not torch
functions (``bt.mode()`` does not route them).  Each drop-in is built from its spec's ``torchvision.ops.<name>``
``torch_name`` and ``dropin`` adapter like every other drop-in (``_namespaces._make``: the same call path, autograd
and torch.compile support).

>>> import torch, baracuda.torch.vision as tvo
>>> boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.], [20., 20., 30., 30.]])
>>> tvo.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
tensor([0, 2])
"""
from __future__ import annotations

from .._core.spec import all_specs
from ._namespaces import _make

PREFIX = "torchvision.ops."
# torchvision name -> the baracuda op its drop-in runs
PUBLISHED: dict[str, str] = {}

for _spec in all_specs():
    if _spec.dropin is not None and (_spec.torch_name or "").startswith(PREFIX):
        _name = _spec.torch_name[len(PREFIX):]
        _fn = _make(_spec, _spec.torch_name)
        _fn.__module__ = __name__
        globals()[_name] = _fn
        PUBLISHED[_name] = _spec.name

__all__ = sorted(PUBLISHED) + ["PUBLISHED"]
