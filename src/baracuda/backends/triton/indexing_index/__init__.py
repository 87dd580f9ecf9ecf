"""Indexing along a dim and by masks (issue 17): rows.py (index_select / index_fill / index_add / index_copy /
index_reduce), masked.py (masked_fill, and the block-scan ops: masked_select / masked_scatter / nonzero /
argwhere / nonzero_static)."""
from . import masked, put, reduce_bw, rows  # noqa: F401
