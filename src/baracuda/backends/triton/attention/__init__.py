"""Attention family: rotary position embedding (rope.py), RoPE tables and ALiBi slopes (positions.py)."""
from . import positions, rope  # noqa: F401
