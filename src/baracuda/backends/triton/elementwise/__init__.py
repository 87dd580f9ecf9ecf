"""Elementwise family: one template (template.py) over scalar bodies (math_bodies, activations, numeric_bodies,
complex).  ``launch`` (run the template with any jit body) and ``bound_broadcast`` (its strided launch bound once) are public: reduction and cast reuse it, as does
the cuBLAS epilogue."""
from . import template
from .template import bound_broadcast, launch

__all__ = ["bound_broadcast", "launch", "template"]
