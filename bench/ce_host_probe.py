"""Host cost of one small cross_entropy call on the GPU (the host bench's 7-8x row): per call, and a cProfile of
200 calls by own and cumulative time.   python bench/ce_host_probe.py OUT.txt"""
import cProfile
import io
import pstats
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _host import per_call  # noqa: E402

import baracuda.torch as bt  # noqa: E402

x = torch.randn(16, 16, device="cuda", requires_grad=True)
y = torch.randint(0, 16, (16,), device="cuda")
out = io.StringIO()
for name, fn in (("torch", lambda: torch.nn.functional.cross_entropy(x, y)),
                 ("bt", lambda: bt.nn.functional.cross_entropy(x, y)),
                 ("bt no_grad", lambda: bt.nn.functional.cross_entropy(x.detach(), y)),
                 ("bt softmax", lambda: bt.nn.functional.softmax(x, -1))):
    print(f"{name:12s} {per_call(fn, 300) * 1e6:8.1f} us", file=out)
pr = cProfile.Profile()
pr.enable()
for _ in range(200):
    bt.nn.functional.cross_entropy(x, y)
pr.disable()
torch.cuda.synchronize()
for order in ("tottime", "cumulative"):
    pstats.Stats(pr, stream=out).sort_stats(order).print_stats(30)
open(sys.argv[1], "w").write(out.getvalue())
print(out.getvalue()[:6000])
