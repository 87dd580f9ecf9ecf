"""Where the host time of one F.cross_entropy call through baracuda goes (GPU): 64 x 4096 f32 logits, forward only,
cProfile over 300 warm calls (top functions by own and cumulative time).   python bench/ce_host_profile.py"""
import cProfile
import pstats
import time

import torch

import baracuda.torch as bt

x = torch.randn(64, 4096, device="cuda")
t = torch.randint(0, 4096, (64,), device="cuda")
f = bt.nn.functional.cross_entropy
for _ in range(50):
    f(x, t)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(300):
    f(x, t)
torch.cuda.synchronize()
print(f"baracuda: {(time.perf_counter() - t0) / 300 * 1e6:.1f} us per call")
t0 = time.perf_counter()
for _ in range(300):
    torch.nn.functional.cross_entropy(x, t)
torch.cuda.synchronize()
print(f"torch: {(time.perf_counter() - t0) / 300 * 1e6:.1f} us per call")
pr = cProfile.Profile()
pr.enable()
for _ in range(300):
    f(x, t)
torch.cuda.synchronize()
pr.disable()
for key in ("tottime", "cumulative"):
    pstats.Stats(pr).sort_stats(key).print_stats(30)
