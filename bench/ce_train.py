"""Cross-entropy training step (forward + backward) through the baracuda drop-in vs eager F.cross_entropy and
torch.compile of it, in one run (GPU only).  The drop-in takes its fused path here (cross_entropy_with_grad:
loss and gradient from one read of the logits; the backward scales the saved gradient in place, a no-op for
an upstream gradient of 1), so this is the number behind issue 4's "FW+BW >= 3x eager".  Measured under each
PlanPreference.check_values mode: the default 'deferred' (the bad-target flag is copied back behind the kernels
and checked at a later call), 'sync' (read back after each call: one host synchronization per step) and 'off'.

    python bench/ce_train.py [--json OUT] [--rows 4096 --classes 128256 --dtype bf16]
Timing, two ways: CUDA events around each step with a sync after it (x.grad reset to None before it), warm-up,
median of --reps (counts the host time before the first kernel of a step: the GPU idles meanwhile); and
"back_to_back": --reps steps queued between two events, as a training loop runs them.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt


def step(fn, x, t, upstream):
    x.grad = None
    loss = fn(x, t)
    (loss if upstream == 1.0 else loss * upstream).backward()
    return loss


def measure(fn, x, t, reps, upstream=1.0):
    for _ in range(3):
        step(fn, x, t, upstream)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step(fn, x, t, upstream)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def measure_stream(fn, x, t, reps, upstream=1.0):
    """Steady state, as a training loop runs: reps steps queued back to back between two events (the host
    prepares step i+1 while the GPU runs step i), time per step."""
    for _ in range(3):
        step(fn, x, t, upstream)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        step(fn, x, t, upstream)
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--classes", type=int, default=128256)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--profile", action="store_true", help="also print the GPU kernels of one step of each")
    a = ap.parse_args()
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(a.rows, a.classes, device="cuda", generator=g).to(dt).requires_grad_()
    t = torch.randint(0, a.classes, (a.rows,), device="cuda", generator=g)
    eager = F.cross_entropy
    compiled = torch.compile(F.cross_entropy)
    ours = bt.nn.functional.cross_entropy

    def with_values_check(mode):
        """The drop-in under PlanPreference(check_values=mode): 'sync' reads the bad-target flag back after each
        call (one host synchronization per step), 'off' never reads it (the default 'deferred' copies it back
        behind the kernels and checks it at a later call: no synchronization)."""
        pref = bc.PlanPreference(check_values=mode)

        def fn(x, t):
            with bt.preference(pref):
                return ours(x, t)
        return fn
    peers = (("eager", eager), ("compile", compiled), ("baracuda", ours),
             ("baracuda_check_values_sync", with_values_check("sync")),
             ("baracuda_check_values_off", with_values_check("off")))
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "problem": f"cross_entropy {a.rows}x{a.classes} {a.dtype}, forward + backward"}
    # correctness of the timed path against eager, first
    x.grad = None
    l0 = step(eager, x, t, 1.0)
    g0 = x.grad.float()
    x.grad = None
    l1 = step(ours, x, t, 1.0)
    res["max_abs_err_loss"] = float((l0.float() - l1.float()).abs())
    res["max_rel_err_grad"] = float((x.grad.float() - g0).abs().max() / g0.abs().max())
    bytes_min = 2 * x.numel() * x.element_size()
    for up in (1.0, 0.5):
        key = "" if up == 1.0 else "_upstream0.5"
        r = {name: measure(fn, x, t, a.reps, up) for name, fn in peers}
        for name, fn in peers:
            r[f"{name}_back_to_back"] = measure_stream(fn, x, t, a.reps, up)
        for k in ("baracuda", "baracuda_check_values_sync", "baracuda_check_values_off"):
            r[f"{k}_back_to_back_speedup_vs_eager"] = r["eager_back_to_back"] / r[f"{k}_back_to_back"]
            r[f"{k}_speedup_vs_eager"] = r["eager"] / r[k]
            r[f"{k}_speedup_vs_compile"] = r["compile"] / r[k]
            r[f"{k}_TBps_at_floor_bytes"] = bytes_min / (r[k] * 1e-3) / 1e12
        res["ms" + key] = r
    if a.profile:
        for name, fn in peers[:1] + peers[2:]:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                step(fn, x, t, 1.0)
                torch.cuda.synchronize()
            print(f"-- kernels of one {name} step")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
    bc.check_errors()      # (the deferred value checks of every timed call: none may have failed)
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
