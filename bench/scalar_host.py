"""Host time of a drop-in call with a Python-number operand (GPU; 16-element tensors: the kernels cost a launch):
bt.mul(x, 0.5), x * 0.5 and 1 - x under bt.mode(), with and without autograd, against torch, best of rounds.
    python bench/scalar_host.py [OUT.json]      (PYTHONPATH picks the tree measured)"""
import json
import sys

import torch

import baracuda.torch as bt
from _host import per_call

x = torch.randn(16, device="cuda")
xg = torch.randn(16, device="cuda", requires_grad=True)
res = {"device": torch.cuda.get_device_name(), "tree": bt.__file__}
cases = {"mul(x, 0.5)": lambda t: torch.mul(t, 0.5), "x * 0.5": lambda t: t * 0.5, "1 - x": lambda t: 1 - t}
for name, fn in cases.items():
    for grad, t in (("", x), (" grad", xg)):
        res[f"torch {name}{grad}"] = per_call(lambda: fn(t), 2000) * 1e6
        with bt.mode():
            res[f"mode {name}{grad}"] = per_call(lambda: fn(t), 2000) * 1e6
res["bt.mul(x, 0.5)"] = per_call(lambda: bt.mul(x, 0.5), 2000) * 1e6
for k, v in res.items():
    print(f"{k:28s} {v:.1f}" if isinstance(v, float) else f"{k:28s} {v}")
if len(sys.argv) > 1:
    json.dump(res, open(sys.argv[1], "w"), indent=1)
