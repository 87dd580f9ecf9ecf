"""Normalization family: rms_norm/layer_norm (layer.py), the norms over channels, groups or the batch:
group/instance/batch norm (channel.py), and local_response_norm / normalize (local.py)."""
from . import channel, layer, local  # noqa: F401
