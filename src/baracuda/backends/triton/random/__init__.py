"""Random family: the Philox stream's element-wise ops (stream.py), randperm and multinomial (sampling.py)."""
from . import stream  # noqa: F401
from . import sampling  # noqa: F401
