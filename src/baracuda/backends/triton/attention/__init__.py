"""Attention family: FlashAttention forward / backward for sdpa and sdpa_varlen (flash_fwd.py, flash_bwd.py, the
shared score / mask code _flash.py, registration sdpa.py), rotary embedding (rope.py), RoPE tables and ALiBi slopes
(positions.py), split-KV decoding and paged attention (decode.py), the cascade merge (merge.py), KV-cache appends
(append.py)."""
from . import append, decode, merge, positions, rope, sdpa  # noqa: F401
