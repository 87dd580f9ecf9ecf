"""Host time per call of a split (two-stage) reduction: the bound plan against the unbound path it replaced
(reduce._run), on a 4 MB input whose kernels take microseconds (GPU).  python bench/split_host.py"""
import os
import sys

import torch

import baracuda as bc
from baracuda.backends.triton.reduction import reduce as R

sys.path.insert(0, os.path.dirname(__file__))
from _host import per_call  # noqa: E402


def us(fn):
    return per_call(fn, 400, 20, 5) * 1e6


for shape, dims in (((131072, 16), (0,)), ((2048, 1024), (0,))):
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    desc = bc.Descriptor.like("sum", x, dims=dims)
    p = bc.Plan.select(desc, "cuda")
    out = torch.empty(desc.outputs[0].shape, device="cuda", dtype=torch.bfloat16)
    ws = torch.empty(max(p.workspace_size, 16), device="cuda", dtype=torch.uint8)
    assert torch.allclose(p.run(x).float(), x.float().sum(0), rtol=2e-2, atol=1e-1)
    bound = us(lambda: p.run(x, out=out, workspace=ws))
    unbound = us(lambda: R._run(desc, [x], [out], ws))
    torch_us = us(lambda: torch.sum(x, 0))
    print(f"sum{dims} of bf16 {list(shape)} ({p.sku.route}): plan.run {bound:.1f} us/call, unbound path "
          f"{unbound:.1f}, torch {torch_us:.1f}")
