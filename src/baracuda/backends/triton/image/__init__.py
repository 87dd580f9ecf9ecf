"""Image family: resample.py (interpolate and its gather-form backward through per-dim tap tables), roi.py
(roi_align / roi_pool and their atomic backwards), nms.py (nms / batched_nms: IoU bitmask + one-program sweep),
grid.py (grid_sample forward / backward, affine_grid forward / backward), shuffle.py (pixel / channel shuffles as
strided copies through the layout family's copy_into)."""
from . import grid, nms, resample, roi, shuffle  # noqa: F401
