"""Scan family: cumsum/cumprod/cummax/cummin/logcumsumexp and their backward ops."""
from . import scan  # noqa: F401
