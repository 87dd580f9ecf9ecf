"""Pooling family: one N-d forward kernel for every pooling op, a gather-form backward, max_unpool (kernels.py);
registration and launches (pool.py)."""
from . import pool  # noqa: F401
