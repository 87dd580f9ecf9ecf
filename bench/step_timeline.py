"""Where a training step's GPU sits idle, and why (issue #16: the patched Llama step is partly host-bound).

One profiled step (torch.profiler, CPU + CUDA) after warm-up, per variant; from its trace:
  * wall: first launch to last kernel end; busy: the union of kernel intervals; idle = wall - busy;
  * each gap between kernels > 5 us whose next kernel was *launched after* the GPU went idle is host-caused: its
    time is charged to the phase (forward / backward, record_function ranges) and to the next kernel's name;
  * launches per phase.
    python bench/step_timeline.py OUT.json [--model llama] [--variants eager,patch] [--demo]
                                  [--resnet resnet50 --batch 256]
``--demo``: the `baracuda demo` block (baracuda vs plain torch) instead of a HF model; ``--resnet NAME``: a
torchvision ResNet train step (bf16, channels-last, 224^2, batch ``--batch``), eager and under ``bt.mode()``.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

import torch


def analyse(trace_path: str) -> dict:
    ev = json.load(open(trace_path))["traceEvents"]
    kernels = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    launch = {e["args"].get("correlation"): e for e in ev    # runtime (cudaLaunchKernel) and driver (Triton's cuLaunch)
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e}
    phases = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev if e.get("cat") == "user_annotation"
              and e["name"] in ("forward", "backward", "loss")]

    def phase(t):
        for a, b, n in phases:
            if a <= t <= b:
                return n
        return "other"

    busy, end, idle_host, idle_other = 0.0, None, collections.Counter(), 0.0
    span = {}   # phase -> [first kernel start, last kernel end, busy] of the kernels launched in it
    by_kernel = collections.Counter()
    k_total, k_count = collections.Counter(), collections.Counter()     # GPU time per kernel name
    n_launch = collections.Counter()
    first = None
    for k in kernels:
        s, d = k["ts"], k["dur"]
        k_total[k["name"][:90]] += d
        k_count[k["name"][:90]] += 1
        lc = launch.get(k["args"].get("correlation"))
        t_l = lc["ts"] if lc else None
        if t_l is not None:
            n_launch[phase(t_l)] += 1
            sp = span.setdefault(phase(t_l), [s, s + d, 0.0])
            sp[0], sp[1], sp[2] = min(sp[0], s), max(sp[1], s + d), sp[2] + d
            first = t_l if first is None else min(first, t_l)
        if end is not None and s > end + 5:
            gap = s - end
            if t_l is not None and t_l + lc.get("dur", 0) > end:    # launched after the GPU went idle
                idle_host[phase(t_l)] += gap
                by_kernel[k["name"][:80]] += gap
            else:
                idle_other += gap
        busy += max(0.0, s + d - max(s, end if end is not None else s))
        end = max(end or 0.0, s + d)
    wall = (end - first) if kernels else 0.0
    api_ms, api_n = collections.Counter(), collections.Counter()    # runtime / driver calls: a sync or an allocation
    for e in ev:                                                    # shows here as a long call
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            api_ms[e["name"]] += e.get("dur", 0)
            api_n[e["name"]] += 1
    host = {n: (b - a) / 1e3 for a, b, n in phases}
    gpu = {n: {"start_ms": (v[0] - first) / 1e3, "end_ms": (v[1] - first) / 1e3, "kernel_ms": v[2] / 1e3}
           for n, v in span.items()}
    host_end = {n: (b - first) / 1e3 for a, b, n in phases}
    return {"wall_ms": wall / 1e3, "host_phase_ms": host, "host_phase_end_ms": host_end, "gpu_phase": gpu,
            "gpu_busy_ms": busy / 1e3, "idle_host_ms": {k: v / 1e3 for k, v in idle_host.items()},
            "idle_other_ms": idle_other / 1e3, "launches": dict(n_launch),
            "kernels_ms": {f"{n} (x{k_count[n]})": round(v / 1e3, 3) for n, v in k_total.most_common(40)},
            "idle_before_kernel_ms": {k: round(v / 1e3, 3) for k, v in by_kernel.most_common(25)},
            "api_ms": {f"{n} (x{api_n[n]})": round(v / 1e3, 3) for n, v in api_ms.most_common(15)}}


MARKS: list = []


def mark(name):
    """A point of the step: host time now and a CUDA event (when the GPU reaches it)."""
    import time

    e = torch.cuda.Event(enable_timing=True)
    e.record()
    MARKS.append((name, time.perf_counter(), e))


def unprofiled(step, n=10) -> dict:
    """Median over n steps, without the profiler: host ms and GPU ms from the step's start to each mark (a mark
    the GPU reaches just after the host records it means the GPU waited on the host up to there)."""
    import statistics

    rows = []
    for _ in range(n):
        torch.cuda.synchronize()
        MARKS.clear()
        mark("start")
        step()
        mark("end")
        torch.cuda.synchronize()
        t0, e0 = MARKS[0][1], MARKS[0][2]
        rows.append({nm: ((t - t0) * 1e3, e0.elapsed_time(e)) for nm, t, e in MARKS[1:]})
    return {nm: {"host_ms": statistics.median(r[nm][0] for r in rows),
                 "gpu_ms": statistics.median(r[nm][1] for r in rows)}
            for nm in rows[0]}


def profile(step, warm=3):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    marks = unprofiled(step)
    act = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=act) as prof:
        step()
        torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    try:
        return {"marks": marks, **analyse(path)}
    finally:
        os.unlink(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="llama")
    ap.add_argument("--variants", default="eager,patch")
    ap.add_argument("--demo", action="store_true")
    ap.add_argument("--resnet", default=None)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args(argv)
    rf = torch.profiler.record_function
    res = {"device": torch.cuda.get_device_name()}
    if args.resnet:
        import contextlib

        import torchvision

        import baracuda.torch as bt

        torch.manual_seed(0)
        cl = torch.channels_last
        model = getattr(torchvision.models, args.resnet)().cuda().to(torch.bfloat16).to(memory_format=cl).train()
        x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
        y = torch.randint(0, 1000, (args.batch,), device="cuda")
        res["config"] = {"model": args.resnet, "batch": args.batch}
        for name, ctx in (("eager", contextlib.nullcontext), ("mode", bt.mode)):
            def step():
                model.zero_grad(set_to_none=True)
                with rf("forward"):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                mark("forward")
                with rf("backward"):
                    loss.backward()
            with ctx():
                res[name] = profile(step)
            print(name, {k: res[name][k] for k in ("wall_ms", "gpu_busy_ms", "idle_host_ms", "launches")},
                  flush=True)
    elif args.demo:
        import baracuda.torch as bt
        from baracuda import demo

        params, x0 = demo.make_params(torch, 256, 2, 512, 4, "cuda", torch.float32)
        p, x = demo.leaf_copies(params, x0)
        for name, use in (("baracuda", True), ("torch", False)):
            def step():
                with rf("forward"):
                    loss = demo.block(bt if use else torch, x, p, 4, use)
                mark("forward")
                with rf("backward"):
                    loss.backward()
            res[name] = profile(step)
            print(name, res[name], flush=True)
    else:
        from baracuda.bench import models as M

        model, ids, spec, cfg = M.build(args.model, tiny=False, layers=None, device="cuda", dtype=torch.bfloat16)
        res["config"] = cfg
        ctxs = {n: c for n, c, _ in M.VARIANTS}
        for v in args.variants.split(","):
            with ctxs[v](model, spec) as m:
                hook = m.model.norm.register_forward_pre_hook(lambda *a: mark("layers"))
                def step():
                    m.zero_grad(set_to_none=True)
                    with rf("forward"):
                        loss = m(input_ids=ids, labels=ids).loss
                    mark("forward")
                    with rf("backward"):
                        loss.backward()
                res[v] = profile(step)
                hook.remove()
                print(v, res[v], flush=True)
            M._free(model, True)
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
