"""Image family: resample.py (interpolate and its gather-form backward through per-dim tap tables),
grid.py (grid_sample forward / backward, affine_grid forward / backward), shuffle.py (pixel / channel shuffles as
strided copies through the layout family's copy_into)."""
from . import grid, resample, shuffle  # noqa: F401
