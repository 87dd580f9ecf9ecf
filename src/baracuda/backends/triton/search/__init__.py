"""Search, histogram and unique kernels (issue 17): search.py (searchsorted / bucketize / isin), histogram.py
(histc / histogram / bincount), unique.py (unique_consecutive, unique for rows that fit one program, mode).
A global sort (unique of long inputs, a sort-based isin) is the sort family's (backends/triton/sort)."""
from . import histogram, search, unique  # noqa: F401
