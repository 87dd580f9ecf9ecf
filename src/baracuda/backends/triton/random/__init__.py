"""Random family: the Philox stream's element-wise ops (stream.py), randperm and multinomial (sampling.py),
top-k / top-p / min-p sampling (top_k_top_p.py), logit penalties (penalties.py), speculative-decoding
acceptance (speculative.py)."""
from . import stream  # noqa: F401
from . import sampling  # noqa: F401
from . import top_k_top_p  # noqa: F401
from . import penalties  # noqa: F401
from . import speculative  # noqa: F401
