"""Host cost of the general (FastKernel) launch paths on the GPU: a cat's piece copies and a broadcast elementwise
launch, with each FastKernel's cache state and cProfile's view.  python bench/launch_diag.py OUT.json"""
import cProfile, gc, io, json, pstats, sys, time
import torch
import baracuda.torch as bt
from baracuda.backends.triton._lib.launch import FastKernel


def us(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return round((time.perf_counter() - t0) / n * 1e6, 2)


d = dict(device="cuda", dtype=torch.bfloat16)
a, b = torch.randn(1, 4, 64, 32, **d), torch.randn(1, 4, 64, 32, **d)
x, y = torch.randn(64, 256, **d), torch.randn(1, 256, **d)
res = {"cat": us(lambda: bt.cat([a, b], -1)), "torch_cat": us(lambda: torch.cat([a, b], -1)),
       "mul_bcast": us(lambda: bt.mul(x, y)), "torch_mul_bcast": us(lambda: torch.mul(x, y)),
       "neg_strided": us(lambda: bt.neg(x.t())), "torch_neg_strided": us(lambda: torch.neg(x.t()))}
res["fast_kernels"] = [{"name": getattr(o.jit, "__name__", str(o.jit)), "cache": len(o.cache), "broken": o.broken}
                       for o in gc.get_objects() if isinstance(o, FastKernel) and (o.cache or o.broken)]
pr = cProfile.Profile()
pr.enable()
for _ in range(300):
    bt.cat([a, b], -1)
    bt.mul(x, y)
torch.cuda.synchronize()
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
res["profile"] = s.getvalue()
q = torch.randn(1, 4, 64, 64, **d)
sd = bt.nn.functional.scaled_dot_product_attention
res["sdpa"] = us(lambda: sd(q, q, q, is_causal=True))
res["torch_sdpa"] = us(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True))
pr = cProfile.Profile()
pr.enable()
for _ in range(100):
    sd(q, q, q, is_causal=True)
torch.cuda.synchronize()
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
res["profile_sdpa"] = s.getvalue()
print(json.dumps({k: v for k, v in res.items() if not k.startswith("profile")}, indent=1))
print(res["profile_sdpa"][:5000])
print(res["profile"][:6000])
json.dump(res, open(sys.argv[1], "w"), indent=1)
