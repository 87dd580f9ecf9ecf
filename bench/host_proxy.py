"""CPU proxy of the GPU host path: every baracuda plan's kernel replaced by nothing (outputs allocated, no launch),
so a timing is the framework's own Python cost per call (GPU-free; compare torch CPU on tiny tensors, whose
kernels cost about a CUDA launch).  python bench/host_proxy.py [--profile]"""
import cProfile, pstats, statistics, sys, time
import torch
from _host import stub_kernels

stub_kernels()
import baracuda.torch as bt  # noqa: E402
from baracuda.bench import models as M  # noqa: E402


def t(fn, n=2000, rounds=5):
    for _ in range(50):
        fn()
    rs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        rs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(rs)


torch.manual_seed(0)
a = torch.randn(16, 16, requires_grad=True)
b = torch.randn(16, 16, requires_grad=True)
up = torch.ones(16, 16)
res = {}
for name, f in [("mul", lambda x, y: x * y), ("add", lambda x, y: x + y)]:
    res[f"torch {name} fwd+bwd"] = t(lambda: torch.autograd.backward(f(a, b), up))
    def m():
        with bt.mode():
            torch.autograd.backward(f(a, b), up)
    res[f"mode {name} fwd+bwd"] = t(m)
    res[f"torch {name} fwd"] = t(lambda: f(a, b))
    mm = bt.mode()
    mm.__enter__()
    res[f"mode {name} fwd"] = t(lambda: f(a, b))
    mm.__exit__(None, None, None)
model, ids, spec, cfg = M.build("llama", tiny=True, layers=None, device="cpu", dtype=torch.float32)


def step():
    model.zero_grad(set_to_none=True)
    model(input_ids=ids, labels=ids).loss.backward()


res["llama tiny eager step"] = t(step, 20) / 1e3
with bt.mode() as mo:
    res["llama tiny mode step"] = t(step, 20) / 1e3
print({k: round(v, 2) for k, v in res.items()})
if "--profile" in sys.argv:
    with bt.mode():
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(50):
            step()
        pr.disable()
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(40)
