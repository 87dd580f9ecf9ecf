"""Attention family: rotary position embedding (rope.py); FlashAttention forward / backward kernels (flash_fwd.py,
flash_bwd.py, their shared score and mask logic in _flash.py) registered for sdpa / sdpa_varlen and their backwards
(sdpa.py)."""
from . import rope, sdpa  # noqa: F401
