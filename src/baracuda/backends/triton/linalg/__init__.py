"""Linear algebra: batched small-matrix factorizations and solves (small.py kernels, plans.py registrations)."""
from . import plans  # noqa: F401
