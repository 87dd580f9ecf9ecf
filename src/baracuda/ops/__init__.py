"""Op families: each module defines its specs (shape/dtype rules, torch peers, backward rules, samples).

Every module in this package is imported here, so adding a family is adding a file.
"""
from .._core.registry import import_submodules

import_submodules(__name__)
