"""Attention family: rotary embedding (rope.py), RoPE tables and ALiBi slopes (positions.py), split-KV decoding
and paged attention (decode.py), the cascade merge (merge.py), KV-cache appends (append.py)."""
from . import append, decode, merge, positions, rope  # noqa: F401
