"""Normalization family: rms_norm/layer_norm (layer.py) and the norms over channels, groups or the batch:
group/instance/batch norm, local_response_norm, normalize (channel.py)."""
from . import channel, layer  # noqa: F401
