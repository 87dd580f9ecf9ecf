"""Layout family: index-mapped data movement (move.py's kernels), the ops described as index maps
(index_maps.py) and repeat_interleave with a repeats tensor (repeat_interleave.py)."""
from . import index_maps, move, repeat_interleave  # noqa: F401
