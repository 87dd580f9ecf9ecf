"""batch_norm on [8, 256, 56, 56] bf16 channels-last (a ResNet-50 layer at batch 8; GPU): host us per call of torch,
the drop-in and the mode (with and without autograd), one call's host / total latency, and torch.profiler tables of
ten calls each (the kernels' GPU times: _bn_stats, _bn_finalize, _bn_apply against torch's).
    python bench/bn_host_probe.py"""
import sys, time, torch
sys.path.insert(0, "bench")
from _host import per_call
import baracuda.torch as bt
cl, dt = torch.channels_last, torch.bfloat16
x = torch.randn(8, 256, 56, 56, device="cuda", dtype=dt).to(memory_format=cl)
bn = torch.nn.BatchNorm2d(256).to("cuda", dt).train()
F = torch.nn.functional
w, b, rm, rv = bn.weight, bn.bias, bn.running_mean, bn.running_var
def bnf(): return F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
def btf(): return bt.nn.functional.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
rows = {}
rows["torch F.batch_norm"] = per_call(bnf, 300)
rows["bt drop-in"] = per_call(btf, 300)
with torch.no_grad():
    rows["torch no_grad"] = per_call(bnf, 300)
    rows["bt drop-in no_grad"] = per_call(btf, 300)
with bt.mode():
    rows["mode F.batch_norm"] = per_call(bnf, 300)
    rows["mode module"] = per_call(lambda: bn(x), 300)
for k, v in rows.items(): print(f"{k:24s} {v*1e6:8.1f} us", flush=True)
# single-call latency with sync
def lat(fn, n=50):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
        ts.append((t1 - t0, t2 - t0))
    ts.sort(); m = ts[n // 2]
    return m[0] * 1e6, m[1] * 1e6
print("latency host/total us: torch", lat(bnf), "bt", lat(btf))
act = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
for name, fn in (("torch", bnf), ("bt", btf)):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=act) as prof:
        for _ in range(10): fn()
        torch.cuda.synchronize()
    print("=====", name)
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=60))
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
