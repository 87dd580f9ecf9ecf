"""Host time of a cuDNN-graph call (GPU): a convolution forward, and forward + backward, through the backend's direct
execute (cudnn_graph._raw_execute) against the frontend's public execute, beside torch's own cuDNN call.  Small
operands (the GPU keeps up: a call's time is the host's), bf16 channels-last.
    python bench/cudnn_host.py OUT.json"""
from __future__ import annotations

import json
import sys

import torch

from _host import per_call


def main(argv=None) -> int:
    import baracuda as bc
    import baracuda.torch as bt
    from baracuda._core.sku import Backend
    from baracuda.backends.nvidia import cudnn_graph as G

    out = (argv or sys.argv[1:] or ["cudnn_host.json"])[0]
    cl = torch.channels_last
    x = torch.randn(2, 64, 14, 14, device="cuda", dtype=torch.bfloat16).to(memory_format=cl).requires_grad_()
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=cl).requires_grad_()
    F, BF = torch.nn.functional, bt.nn.functional

    def fw(f):
        def go():
            with torch.no_grad():
                f.conv2d(x, w, padding=1)
        return go

    def fwbw(f):
        def go():
            f.conv2d(x, w, padding=1).sum().backward()
        return go

    res = {"device": torch.cuda.get_device_name(), "us_per_call": {}}
    pref = bc.PlanPreference(prefer=(Backend.CUDNN,))
    for name, make in (("forward", fw), ("forward+backward", fwbw)):
        row = {"torch": per_call(make(F), 300) * 1e6}
        with bc.preference(pref):
            for raw in (True, False):
                G.RAW[0] = raw
                row["baracuda direct" if raw else "baracuda public execute"] = per_call(make(BF), 300) * 1e6
        G.RAW[0] = True
        res["us_per_call"][name] = row
        print(name, {k: round(v, 1) for k, v in row.items()})
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
