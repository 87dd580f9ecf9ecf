"""torch's current stream on a device as the raw ``cudaStream_t`` value the NVIDIA libraries' bindings take."""
from __future__ import annotations

__all__ = ["raw_stream"]


def raw_stream(device_index: int) -> int:
    """torch's current stream on ``device_index``: ``torch._C._cuda_getCurrentRawStream`` where torch has it (no
    ``torch.cuda.Stream`` object built per call: ~5 us less on the H100 host), else through that object."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device_index) if raw is not None else torch.cuda.current_stream(device_index).cuda_stream
