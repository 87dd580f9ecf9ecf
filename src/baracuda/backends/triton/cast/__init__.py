"""Cast family: dtype conversion (strided, any rank) and the affine cast."""
from . import cast  # noqa: F401
