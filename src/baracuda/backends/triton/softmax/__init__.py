"""Softmax family: softmax/log_softmax/softmin (softmax.py; coop.py its single-read GPU path for long rows) and
gumbel_softmax/sparsemax (gumbel_sparsemax.py)."""
from . import coop, gumbel_sparsemax, softmax  # noqa: F401
