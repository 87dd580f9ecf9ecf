"""Which backend runs the demo block's attention backward, and why the others refuse (GPU): the demo's q / k / v
(views of one QKV projection), forward + backward through baracuda.torch, every sdpa / sdpa_backward plan selection
explained.   python bench/sdpa_bw_explain.py [--dim 2048 --heads 16 --seq 2048 --batch 4]"""
import argparse

import torch

import baracuda.torch as bt
from baracuda._core import plan as P
from baracuda._core.registry import explain

ap = argparse.ArgumentParser()
ap.add_argument("--dim", type=int, default=2048)
ap.add_argument("--heads", type=int, default=16)
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--batch", type=int, default=4)
a = ap.parse_args()
B, S, D, H = a.batch, a.seq, a.dim, a.heads
seen = set()
orig = P.Plan.select.__func__


def select(cls, desc, device=None, pref=None):
    if desc.op.startswith("sdpa") and str(desc) not in seen:
        seen.add(str(desc))
        print(str(desc)[:400])
        print(explain(desc, P.as_device(device) if device is not None else P.as_device("cuda"),
                      pref or P.current_preference()))
    return orig(cls, desc, device, pref)


P.Plan.select = classmethod(select)
qkv = torch.randn(B * S, 3 * D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
q, k, v = (t.reshape(B, S, H, D // H).transpose(1, 2) for t in qkv.split(D, dim=-1))
o = bt.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
o.transpose(1, 2).reshape(B * S, D).float().pow(2).sum().backward()
torch.cuda.synchronize()
print("done")
