"""Sort family: sort, argsort, msort, topk, sort_backward (rows.py); kthvalue, median, nanmedian, quantile,
nanquantile, quantile_backward (stats.py)."""
from . import rows  # noqa: F401
from . import stats  # noqa: F401
