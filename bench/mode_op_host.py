"""Host us per call of the ops a ResNet step routes (GPU, ResNet-50 shapes at batch 8, bf16, channels-last): torch,
the drop-in, under ``bt.mode()``; without and with autograd (the forward only: the GPU keeps up).
    python bench/mode_op_host.py OUT.json"""
from __future__ import annotations

import json
import sys

import torch

from _host import per_call


def main(argv=None) -> int:
    import baracuda.torch as bt

    out = (list(argv or sys.argv[1:]) or ["mode_op_host.json"])[0]
    cl, dt = torch.channels_last, torch.bfloat16
    x = torch.randn(8, 256, 56, 56, device="cuda", dtype=dt).to(memory_format=cl)
    xg = x.clone().requires_grad_(True)
    bn = torch.nn.BatchNorm2d(256).to("cuda", dt).train()
    conv = torch.nn.Conv2d(256, 64, 1, bias=False).to("cuda", dt).to(memory_format=cl)
    F = torch.nn.functional
    cases = {"batch_norm": lambda t: bn(t), "conv1x1": lambda t: conv(t), "relu": lambda t: F.relu(t),
             "add": lambda t: t + t, "mul_scalar": lambda t: t * 0.5}
    res = {"device": torch.cuda.get_device_name(), "us": {}}
    for name, fn in cases.items():
        row = {}
        for grad, t in (("nograd", x), ("grad", xg)):
            row[f"torch {grad}"] = per_call(lambda: fn(t), 300) * 1e6
            with bt.mode():
                row[f"mode {grad}"] = per_call(lambda: fn(t), 300) * 1e6
        res["us"][name] = row
        print(f"{name:12s}", "  ".join(f"{k}: {v:.1f}" for k, v in row.items()), flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
