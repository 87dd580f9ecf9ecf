"""Host time of a drop-in call with a Python-number operand (16-element tensors: the kernels cost a launch):
bt.mul(x, 0.5), x * 0.5 and 1 - x under bt.mode(), with and without autograd, against torch, best of rounds.
    python bench/scalar_host.py [OUT.json] [--proxy]      (PYTHONPATH picks the tree measured)
--proxy: on the CPU with every baracuda kernel stubbed out (bench/_host.stub_kernels): the framework's own Python
cost, where no GPU is at hand."""
import json
import sys

import torch

from _host import per_call, stub_kernels

proxy = "--proxy" in sys.argv
if proxy:
    stub_kernels()
import baracuda.torch as bt  # noqa: E402

dev = "cpu" if proxy else "cuda"
sync = (lambda: None) if proxy else None
x = torch.randn(16, device=dev)
xg = torch.randn(16, device=dev, requires_grad=True)
res = {"device": "cpu (kernels stubbed)" if proxy else torch.cuda.get_device_name(), "tree": bt.__file__}
cases = {"mul(x, 0.5)": lambda t: torch.mul(t, 0.5), "x * 0.5": lambda t: t * 0.5, "1 - x": lambda t: 1 - t}
for name, fn in cases.items():
    for grad, t in (("", x), (" grad", xg)):
        res[f"torch {name}{grad}"] = per_call(lambda: fn(t), 2000, sync=sync) * 1e6
        with bt.mode():
            res[f"mode {name}{grad}"] = per_call(lambda: fn(t), 2000, sync=sync) * 1e6
res["bt.mul(x, 0.5)"] = per_call(lambda: bt.mul(x, 0.5), 2000, sync=sync) * 1e6
for k, v in res.items():
    print(f"{k:28s} {v:.1f}" if isinstance(v, float) else f"{k:28s} {v}")
out = [a for a in sys.argv[1:] if not a.startswith("--")]
if out:
    json.dump(res, open(out[0], "w"), indent=1)
