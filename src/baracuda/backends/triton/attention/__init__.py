"""Attention family: rotary embedding (rope.py), split-KV decoding and paged attention (decode.py), the cascade
merge (merge.py), KV-cache appends (append.py)."""
from . import append, decode, merge, rope  # noqa: F401
