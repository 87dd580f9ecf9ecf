"""Attention family: rotary position embedding (rope.py)."""
from . import rope  # noqa: F401
