"""scatter_add at issue #17's size ([65536, 64] <- [16M, 64] f32) with two index forms (GPU): one random index per
element (every element its own atomic in torch and in ours) and one index per source row expanded along the row
(``idx[:, None].expand(-1, 64)``: the message-passing form, a stride-0 view torch and we both receive), drop-in
against torch eager and torch.compile, CUDA-graph replays (bench.timing.time_cuda); values checked against torch.
    python bench/scatter_rows.py OUT.json"""
import json
import sys

import torch

import baracuda.torch as bt
from baracuda.bench.timing import time_cuda

dev = "cuda"
M, W, T = 1 << 24, 64, 65536
g = torch.Generator(device=dev).manual_seed(0)
src = torch.randn(M, W, device=dev, generator=g)
x = torch.randn(T, W, device=dev, generator=g)
forms = {"per-element": torch.randint(0, T, (M, W), device=dev, generator=g),
         "rows-expanded": torch.randint(0, T, (M, 1), device=dev, generator=g).expand(M, W)}
compiled = torch.compile(lambda x, i, s: torch.scatter_add(x, 0, i, s))
res = {"device": torch.cuda.get_device_name(), "rows": []}
for form, idx in forms.items():
    ref = torch.scatter_add(x.double(), 0, idx, src.double())
    fns = {"torch": lambda: torch.scatter_add(x, 0, idx, src), "torch.compile": lambda: compiled(x, idx, src),
           "baracuda": lambda: bt.scatter_add(x, 0, idx, src)}
    row = {"form": form}
    for name, fn in fns.items():
        out = fn()
        row[f"{name}_maxerr"] = float((out.double() - ref).abs().max())
        row[f"{name}_ms"] = time_cuda([fn], budget_s=1.0).ms
    row["x_torch"] = row["torch_ms"] / row["baracuda_ms"]
    row["x_compile"] = row["torch.compile_ms"] / row["baracuda_ms"]
    res["rows"].append(row)
    print(json.dumps(row), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
