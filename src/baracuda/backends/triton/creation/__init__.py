"""Creation family: constant fills, ranges (arange / linspace / logspace) and eye."""
from . import kernels  # noqa: F401
