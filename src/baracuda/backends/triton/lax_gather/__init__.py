"""lax_gather / lax_scatter (JAX's general gather / scatter): kernels.py (one space-map kernel for both ops and
every combiner), plans.py (the plans)."""
from . import plans  # noqa: F401
