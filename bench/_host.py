"""What the host-cost scripts share (bench/host_proxy.py, mode_host_profile.py, patch_host_profile.py)."""
from __future__ import annotations

import dataclasses


def stub_kernels() -> None:
    """Every baracuda plan's kernel replaced by nothing (outputs still allocated, no launch): a timing is then the
    framework's own Python cost per call, on the CPU too."""
    from baracuda._core import plan as P

    orig = P.Plan.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        if not self._skip:
            self._np = False
            self._fast = None
            self._run = lambda desc, xs, outs, ws: None
    P.Plan.__init__ = init


def host_bound(models, name: str) -> None:
    """``models.MODELS[name]`` at a size whose kernels take microseconds (hidden 256, 4 heads, seq 64, batch 1): a
    step's wall time is then its host time."""
    spec = models.MODELS[name]
    small = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "vocab_size": 1024}
    if spec.kwargs.get("num_key_value_heads") is not None:
        small["num_key_value_heads"] = min(spec.kwargs["num_key_value_heads"], 4)
    models.MODELS[name] = dataclasses.replace(spec, kwargs={**spec.kwargs, **small}, seq=64, batch=1)


def per_call(fn, n: int, warm: int = 5, rounds: int = 3, sync=None) -> float:
    """Seconds per call of ``fn``: ``warm`` calls, then the best of ``rounds`` rounds of ``n`` calls in a row, each
    round ending with ``sync`` (default: torch.cuda.synchronize), so a round's time is the host's queueing time when
    the GPU keeps up."""
    import time

    if sync is None:
        import torch

        sync = torch.cuda.synchronize
    for _ in range(warm):
        fn()
    sync()
    best = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best.append((time.perf_counter() - t0) / n)
    return min(best)
