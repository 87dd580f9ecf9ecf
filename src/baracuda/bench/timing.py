"""Timers, measured ceilings (the roofline) and host overhead.

CUDA timing: one warm-up call (compilation, autotuning, handle creation stay out of the numbers), a
short host-clock estimate, more warm-up, then N calls each bracketed by CUDA events on the current
stream; the median is reported.  N is chosen from a time budget (so one slow workload cannot eat the
run), at least 5 and at most 1000.  When the inputs fit in L2 the caller passes several input sets and
the timer rotates through them, so repeated calls do not measure the cache.

Ceilings are measured in the same run, never taken from a datasheet: device copy bandwidth from a
1 GiB device-to-device copy counting bytes read + written, and the bf16 tensor-core rate from
``torch.mm`` on random 8192x8192 operands (2*8192^3 = 1.1 TFLOP per call).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["Timing", "time_cuda", "median_ms", "time_host", "Ceilings", "measure_ceilings", "host_overhead"]


@dataclass
class Timing:
    ms: float
    reps: int
    spread: float     # (p80 - p20) / median: how noisy this number is
    how: str = "events"   # "graph": GPU time from CUDA-graph replays; "events": per-call events (includes host gaps)


def median_ms(fn: Callable, reps: int = 10, warmup: int = 3) -> float:
    """The median of ``reps`` single calls of ``fn``, each between two CUDA events and synchronized (so a call's
    host time before its launch is inside its time), after ``warmup`` calls: the bench scripts' plain timer."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _summary(times_ms: list[float]) -> Timing:
    times_ms = sorted(times_ms)
    med = statistics.median(times_ms)
    n = len(times_ms)
    p20, p80 = times_ms[int(0.2 * (n - 1))], times_ms[int(0.8 * (n - 1))]
    return Timing(med, n, (p80 - p20) / med if med > 0 else 0.0)


def _counts(est_s: float, budget_s: float, max_reps: int) -> tuple[int, int]:
    est_s = max(est_s, 1e-6)
    n_warm = max(2, min(50, int(0.2 * budget_s / est_s)))
    n_rep = max(5, min(max_reps, int(0.8 * budget_s / est_s)))
    return n_warm, n_rep


def time_cuda(fns: Sequence[Callable], budget_s: float = 0.25, max_reps: int = 1000, graph: bool = True) -> Timing:
    """GPU time (ms) of one call, rotating through ``fns`` (one per input set).

    Per-call events measure the host too whenever the host is slower than the kernel (a 30 us kernel
    behind 40 us of Python launch work reads as 40 us: the GPU ran dry).  So the calls are captured into a
    CUDA graph and the graph's replays are timed (METHOD.md: "for many small launches, capture a graph and
    time its replays"); the same method for baracuda and for the PyTorch peers.  Anything that cannot be
    captured (a host synchronization inside, say) falls back to per-call events, and ``how`` says which;
    ``graph=False`` skips the capture (calls whose library aborts under capture rather than raising).
    """
    t = _time_events(fns, budget_s, max_reps)
    if not graph:           # (the caller knows the calls must not be captured)
        return t
    try:
        return _time_graph(fns, t.ms, budget_s)
    except Exception:  # noqa: BLE001  (not capturable: keep the event timing)
        import torch

        torch.cuda.synchronize()
        return t


def _time_graph(fns: Sequence[Callable], est_ms: float, budget_s: float) -> Timing:
    import torch

    k = len(fns)
    calls = max(k, min(64, int(2.0 / max(est_ms, 1e-3))))       # ~2 ms of work per replay
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                                 # warm-up on the capture stream
        for i in range(k):
            fns[i]()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fns[i % k]()
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    g.replay()
    torch.cuda.synchronize()
    per = max(time.perf_counter() - t0, 1e-6)
    n_rep = max(5, min(200, int(0.6 * budget_s / per)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        starts[i].record()
        g.replay()
        ends[i].record()
    torch.cuda.synchronize()
    t = _summary([s.elapsed_time(e) / calls for s, e in zip(starts, ends)])
    del g
    return Timing(t.ms, t.reps * calls, t.spread, "graph")


def _time_events(fns: Sequence[Callable], budget_s: float, max_reps: int) -> Timing:
    import torch

    k = len(fns)
    fns[0]()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(3):
        fns[i % k]()
    torch.cuda.synchronize()
    n_warm, n_rep = _counts((time.perf_counter() - t0) / 3, budget_s, max_reps)
    for i in range(n_warm):
        fns[i % k]()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        starts[i].record()
        fns[i % k]()
        ends[i].record()
    torch.cuda.synchronize()
    return _summary([s.elapsed_time(e) for s, e in zip(starts, ends)])


def time_host(fns: Sequence[Callable], budget_s: float = 0.02, max_reps: int = 50) -> Timing:
    """Median host-clock time (ms) of one synchronous call (the CPU smoke path: reference/interpreter)."""
    k = len(fns)
    fns[0]()
    t0 = time.perf_counter()
    fns[1 % k]()
    _, n_rep = _counts(time.perf_counter() - t0, budget_s, max_reps)
    n_rep = max(3, min(n_rep, max_reps))
    times = []
    for i in range(n_rep):
        t = time.perf_counter()
        fns[i % k]()
        times.append((time.perf_counter() - t) * 1e3)
    return _summary(times)


@dataclass
class Ceilings:
    copy_gbps: float          # bytes read + written per second, device-to-device copy
    copy_how: str
    flops_tflops: float       # bf16 matrix product rate (the tensor-core ceiling)
    flops_how: str

    def floor_ms(self, nbytes: int, flops: int) -> tuple[float, str]:
        """The roofline floor of a problem: max(bytes / bandwidth, flops / peak) and which term binds."""
        t_mem = nbytes / (self.copy_gbps * 1e9) * 1e3 if self.copy_gbps > 0 else 0.0
        t_flop = flops / (self.flops_tflops * 1e12) * 1e3 if self.flops_tflops > 0 else 0.0
        return (t_mem, "memory") if t_mem >= t_flop else (t_flop, "compute")


def measure_ceilings(cuda: bool) -> Ceilings:
    import torch

    if cuda:
        n = 1 << 29                                  # 2^29 bf16 = 1 GiB per buffer: far beyond L2 (50 MB)
        src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        # per-call events, not a graph: a 1 GiB copy is never host-bound, and a copy captured in a CUDA graph
        # becomes a memcpy node served by the copy engines (measured 2.77 TB/s on the H200 vs 4.25 TB/s
        # for the copy kernel eager runs), which would understate the ceiling
        t = _time_events([lambda: dst.copy_(src)], 0.5, 1000)
        copy = 2 * src.numel() * src.element_size() / (t.ms * 1e-3) / 1e9
        del src, dst
        m = 8192
        a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        t2 = _time_events([lambda: torch.mm(a, b)], 1.0, 1000)
        del a, b
        torch.cuda.empty_cache()
        return Ceilings(copy, "1 GiB bf16 device-to-device copy (read + write bytes), median",
                        2 * m ** 3 / (t2.ms * 1e-3) / 1e12, f"torch.mm bf16 {m}x{m}x{m} on random data, median")
    n = 1 << 23                                      # CPU smoke: 32 MiB f32 copy, f32 512^3 matmul
    src = torch.randn(n)
    dst = torch.empty_like(src)
    t = time_host([lambda: dst.copy_(src)], budget_s=0.05)
    m = 512
    a, b = torch.randn(m, m), torch.randn(m, m)
    t2 = time_host([lambda: torch.mm(a, b)], budget_s=0.05)
    return Ceilings(2 * n * 4 / (t.ms * 1e-3) / 1e9, "32 MiB f32 host copy (read + write bytes), median",
                    2 * m ** 3 / (t2.ms * 1e-3) / 1e12, f"torch.mm f32 {m}^3 on the host, median")


def _overhead_problem(device):
    """The first op (binary differentiable ops first, then by name) that takes 1024-element f32 operands
    elementwise and whose default plan on ``device`` runs on device arrays: what a framework launches most."""
    from .._core.plan import Plan
    from .._core.spec import Descriptor, all_specs
    from ..coverage import is_gpu_impl

    for spec in sorted(all_specs(), key=lambda s: (len(s.arg_names) != 2, not s.is_differentiable, s.name)):
        try:
            desc = Descriptor.make(spec.name, *[((1024,), "f32")] * len(spec.arg_names))
            if [t.shape for t in desc.outputs] != [(1024,)]:
                continue
            plan = Plan.select(desc, device)
        except Exception:  # noqa: BLE001  (not an elementwise-shaped op, or nothing runs it here)
            continue
        if device.type == "cuda" and not is_gpu_impl(plan.impl):
            continue
        return spec, desc, plan
    return None


def host_overhead(device, calls: int = 1000, repeats: int = 7) -> dict:
    """Host cost per call of ``plan.run`` on a tiny problem (1024 f32 elements, so the kernel itself takes
    a few microseconds and the loop measures the Python + launch path): ``repeats`` loops of ``calls`` runs,
    each with one synchronize at the end, no CUDA graph; the median loop (and the fastest, ``*_min_us``).  ``plan_run_us``: ``plan.run(*xs)``; ``plan_run_out_us``: with
    ``out=`` (the general argument-checking path); ``launch_us``: the implementation's run called directly
    (no argument checks: the launch cost itself); ``torch_us``: the torch peer, for comparison."""
    import torch

    found = _overhead_problem(device)
    if found is None:
        return {"error": "no op takes 1024-element f32 operands on this device"}
    spec, desc, plan = found
    tdev = torch.device("cuda", device.index) if device.type == "cuda" else torch.device("cpu")
    xs = [torch.randn(1024, device=tdev) + 2.0 for _ in desc.inputs]
    out = plan.run(*xs)
    natives = [x.cpu().numpy() for x in xs] if plan.impl.array_api == "numpy" else xs
    outs = [out.cpu().numpy() if plan.impl.array_api == "numpy" else out]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    launch = getattr(plan, "_run", plan.impl.run)   # the implementation's run, bound once per plan
    loops = {
        "plan_run_us": lambda: plan.run(*xs),
        "plan_run_out_us": lambda: plan.run(*xs, out=out),
        "launch_us": lambda: launch(desc, natives, outs, None),
    }
    if spec.torch_peer is not None:
        attrs = desc.attr_dict
        loops["torch_us"] = lambda: spec.torch_peer(*xs, **attrs)
    res = {"op": desc.op, "problem": str(desc), "sku": str(plan.sku), "calls": calls, "repeats": repeats}
    samples: dict = {name: [] for name in loops}
    for name, fn in loops.items():
        for _ in range(50):
            fn()
    sync()
    for _ in range(repeats):   # interleaved repeats, median: the host is shared and noisy
        for name, fn in loops.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    for name, v in samples.items():
        res[name] = float(statistics.median(v))
        res[name.replace("_us", "_min_us")] = float(min(v))
    return res
