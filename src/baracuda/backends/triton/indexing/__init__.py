"""Indexing family (gather / scatter forms): kernels.py (the tiled index-map kernel, one_hot's, and the public
out-of-range flag helpers ``flag_bad_index`` / ``raise_index_flag``), gather.py (gather, take, take_along_dim,
one_hot plans), scatter.py (scatter, scatter_add, scatter_reduce, put plans)."""
from . import gather, scatter  # noqa: F401
