"""FFT family helpers on Triton: fftshift / ifftshift (the layout family's roll) and fftfreq / rfftfreq."""
from . import shift_freq  # noqa: F401
