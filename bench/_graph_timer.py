"""The GPU timers the kernel probes share (bench/reduce_sweep.py, narrow_col_probe.py, var_narrow_probe.py,
sort_ab.py, ce_bw_sweep.py, image_ab.py, depthwise_ab.py)."""
from __future__ import annotations

import torch


def timed(fn, n=24):
    """GPU us per call of ``fn(i)``: ``n`` calls captured in one CUDA graph, replayed (the launches' host cost out of
    the timing: a loop of plain calls is host-bound at these sizes, ~150 us a split reduction's two launches on the
    H100 host); the median of 7 replays."""
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / n * 1e3)
    return sorted(ts)[3]


def event_us(fn, n=10, warm=1):
    """us per call of ``fn()`` between two CUDA events around ``n`` calls, without a graph (calls that size outputs on
    the host, like unique, are not capturable; the host's gaps are in the time)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n * 1e3


def gpu_ms(fn):
    """(ms per call of ``fn()``, how): "graph" -- ``timed``'s CUDA-graph replays -- where the calls capture, else
    "events" -- baracuda.bench.timing.median_ms, per-call events (the host's gaps before each launch in the time)."""
    try:
        return timed(lambda i: fn()) / 1e3, "graph"
    except Exception:       # noqa: BLE001  (not capturable)
        torch.cuda.synchronize()
        from baracuda.bench.timing import median_ms

        return median_ms(fn, reps=25), "events"


def wall_ms(fn, reps=3, best=False):
    """Wall ms of one synchronized call of ``fn()`` after a warm-up: the median of ``reps`` (``best``: the minimum),
    for calls long enough (a 4096^2 factorization) that the host and the sync are noise, or that sync themselves."""
    import time

    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return round(min(ts) if best else sorted(ts)[len(ts) // 2], 3)
