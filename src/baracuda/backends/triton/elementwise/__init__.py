"""Elementwise family: one template (template.py) over scalar bodies (math_bodies, activations, numeric_bodies,
complex).  ``launch`` (run the template with any jit body) is public: reduction and cast reuse it, as does
the cuBLAS epilogue."""
from . import template
from .template import launch

__all__ = ["launch", "template"]
