"""Embedding and segment families: embedding / embedding_backward, embedding_bag (+ backward), JAX's segment_*
(+ segment_backward); kernels.py holds every kernel, runs.py the host pieces the plans share."""
from . import embedding  # noqa: F401
from . import segment  # noqa: F401
from . import bag  # noqa: F401
