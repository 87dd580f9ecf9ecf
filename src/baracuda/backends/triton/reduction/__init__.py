"""Reduction family: reduce.py (sum/mean/amax/... over the canonical (outer, R, inner) form), backward.py (their
fused backward kernels), stats.py (var/std/logsumexp/norms: moment states).  Public for the distance family: the
statistical reduction (``run_stats`` and its modes, ``bw_layout``, ``stats_workspace``, ``PNORM_KIND``)."""
from . import backward, reduce, stats  # noqa: F401
from .stats import COS, NORM, PNORM_KIND, bw_layout, run_stats, stats_workspace

__all__ = ["COS", "NORM", "PNORM_KIND", "bw_layout", "run_stats", "stats_workspace"]
