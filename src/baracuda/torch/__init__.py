"""``baracuda.torch``: a drop-in namespace mirroring torch.

``baracuda.torch.X`` stands for ``torch.X`` and ``baracuda.torch.nn.functional.Y`` for
``torch.nn.functional.Y`` (likewise ``linalg``, ``fft``, ``special`` as families arrive), with torch's
signatures for the arguments we support: an unsupported argument raises a clear error, never a silent
difference. Every function runs through baracuda's plans (best backend per device), differentiates through
baracuda's backward plans, and is a torch.library custom op, so ``torch.compile(fullgraph=True)`` traces it.
``with baracuda.torch.mode(): ...`` runs unchanged torch code (functions, Tensor methods, operators) through
these drop-ins, falling through to torch for what they do not cover (see ``_mode``).

>>> import torch, baracuda.torch as bt
>>> x = torch.randn(4, 8, requires_grad=True)
>>> y = bt.nn.functional.gelu(bt.exp(x)).sum()   # doctest: +SKIP
"""
from __future__ import annotations

import types

from .._core.options import current_preference as get_preference
from .._core.options import preference
from . import _library  # noqa: F401  (registers the baracuda::op / op_backward custom ops)
from ._call import call
from ._record import record
from ._mode import mode
from ._namespaces import build as _build
from ._overloads import publish as _publish_overloads

nn = types.ModuleType("baracuda.torch.nn")
nn.functional = types.ModuleType("baracuda.torch.nn.functional")
linalg = types.ModuleType("baracuda.torch.linalg")
fft = types.ModuleType("baracuda.torch.fft")
special = types.ModuleType("baracuda.torch.special")

PUBLISHED: dict[str, str] = _build(globals(), {"torch.nn.functional": nn.functional, "torch.nn": nn,
                                               "torch.linalg": linalg, "torch.fft": fft, "torch.special": special})
_publish_overloads(globals(), PUBLISHED)   # lerp, clamp/clip, clamp_min/clamp_max: a number or a tensor operand

__all__ = ["call", "record", "preference", "get_preference", "mode", "nn", "linalg", "fft", "special", "PUBLISHED"] + sorted(
    n for n in PUBLISHED if "." not in n)
