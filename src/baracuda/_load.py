"""The one loader: imports every op family (their specs register) and every backend (their implementations
register).  ``baracuda/__init__.py`` runs it last, once the core names exist; the core itself never imports
``ops`` or ``backends`` (``get_spec`` / ``all_specs`` / ``implementations`` only read the tables filled here).

Any ``import baracuda.<module>`` imports the package first, so the tables are full before user code runs.
"""
from __future__ import annotations

from . import ops  # noqa: F401  (each family module registers its OpSpecs)
from . import backends  # noqa: F401  (each backend registers its implementations)
from ._core import autotune  # noqa: F401  (registers the autotuner with the registry)
from ._core.derive import check_op_references

check_op_references()   # a backward rule naming a missing op fails here, at import (~0.2 ms)
