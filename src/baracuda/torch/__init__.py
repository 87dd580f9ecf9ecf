"""``baracuda.torch``: a drop-in namespace mirroring torch.

``baracuda.torch.X`` stands for ``torch.X`` and ``baracuda.torch.nn.functional.Y`` for
``torch.nn.functional.Y`` (likewise ``linalg``, ``fft``, ``special``: modules, so ``import
baracuda.torch.nn.functional as F`` works), with torch's signatures for the arguments we support: an unsupported
argument raises a clear error, never a silent difference.  View and shape functions (``reshape``, ``transpose``,
``split``, ...) are torch's own metadata functions and return torch's views (``_views``); torch's twins of a
drop-in under another name or signature (``torch.softmax``, ``torch.special.logsumexp``) run the same op
(``_aliases``).  ``bt.mode`` is baracuda's routing mode, not ``torch.mode``.  Every other function runs through
baracuda's plans (best backend per device), differentiates through baracuda's backward plans, and is a
torch.library custom op, so ``torch.compile(fullgraph=True)`` traces it.
``with baracuda.torch.mode(): ...`` runs unchanged torch code (functions, Tensor methods, operators) through
these drop-ins, falling through to torch for what they do not cover (see ``_mode``).

>>> import torch, baracuda.torch as bt
>>> x = torch.randn(4, 8, requires_grad=True)
>>> y = bt.nn.functional.gelu(bt.exp(x)).sum()   # doctest: +SKIP
"""
from __future__ import annotations

import functools

from .._core.options import current_preference as get_preference
from .._core.options import preference
from . import _library  # noqa: F401  (registers the baracuda::op / op_backward custom ops)
from . import _aliases, _serving, _views
from . import _composed  # noqa: F401  (fills the compositions: forms of a torch function its op does not take)
from ._call import call
from ._record import record
from ._mode import mode
from ._mode import routes as _mode_routes
from ._patch import (PatchReport, patch, patch_gemma, patch_gemma2, patch_gpt2, patch_llama, patch_mistral,
                     patch_qwen2, unpatch)
from ._namespaces import build as _build
from ._namespaces import make_modules as _make_modules
from ._namespaces import put as _put
from ._namespaces import set_all as _set_all
from ._namespaces import _make as _make_dropin
from .._core.spec import get_spec as _get_spec
from ._overloads import publish as _publish_overloads

# nn, nn.functional, linalg, fft, special: modules registered in sys.modules (import baracuda.torch.linalg works)
_SPACES = _make_modules(__name__, globals())
nn, linalg, fft, special = (_SPACES[""][n] for n in ("nn", "linalg", "fft", "special"))
_PUT = functools.partial(_put, _SPACES)
# torch name (relative to torch: "add", "nn.functional.gelu") -> the baracuda op its drop-in runs
# ("mode" is the routing mode, bt.mode(): torch.mode's drop-in is routed by it, not published at that name)
PUBLISHED: dict[str, str] = _build(_SPACES, _views.OWNED | _aliases.OWNED | {"mode"})
_TORCH_MODE = _make_dropin(_get_spec("mode"), "torch.mode")
# torch name -> the view / shape function (torch's own, or a view-or-copy of baracuda's): _views.py
VIEWS: dict = _views.publish(_PUT, PUBLISHED)   # + joins (hstack, ...) and copies (permute_copy, ...) in PUBLISHED
_aliases.publish(_PUT, PUBLISHED)              # twins (torch.softmax, torch.special.logsumexp, ...) and round
_publish_overloads(globals(), PUBLISHED)       # lerp, clamp/clip, clamp_min/clamp_max: a number or a tensor operand
_serving.publish(_PUT)                         # flash_attn_varlen, attention_decode, PagedAttention (no torch twin)
_set_all(_SPACES, list(PUBLISHED) + list(VIEWS))
_mode_routes()   # (the routing table, ~60 ms, built now: a bt.mode() made inside a compiled function reads it)

__all__ = ["call", "record", "preference", "get_preference", "mode", "patch", "unpatch", "PatchReport",
           "patch_llama", "patch_mistral", "patch_qwen2", "patch_gemma", "patch_gemma2", "patch_gpt2", "nn", "linalg",
           "fft", "special", "PUBLISHED", "VIEWS"] + sorted(n for n in {*PUBLISHED, *VIEWS} if "." not in n)
