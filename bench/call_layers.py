"""Host time of one cuDNN convolution call, layer by layer (GPU): the drop-in, the bound call (``_call.bound``'s
launcher), the backend's execute (cudnn_graph.execute) and the lowered graph's own execute alone; torch's conv2d beside
them.  bf16 channels-last, no grad: the host's time (the GPU keeps up).  Shapes: [2, 64, 14, 14] * [64, 64, 3, 3],
or with ``--resnet`` ResNet-50's at batch 8 (1x1, 3x3, strided, the 7x7 stem).
    python bench/call_layers.py OUT.json [--resnet]"""
from __future__ import annotations

import json
import sys

import torch

from _host import per_call


def main(argv=None) -> int:
    from baracuda.torch import _call

    argv = list(argv or sys.argv[1:])
    resnet = "--resnet" in argv
    argv = [a for a in argv if a != "--resnet"]
    out = (argv or ["call_layers.json"])[0]
    torch.set_grad_enabled(False)
    shapes = ([(8, 64, 56, 56, 64, 1, 1, 0), (8, 64, 56, 56, 64, 3, 1, 1), (8, 256, 56, 56, 128, 1, 1, 0),
               (8, 128, 56, 56, 128, 3, 2, 1), (8, 3, 224, 224, 64, 7, 2, 3), (8, 512, 7, 7, 2048, 1, 1, 0)]
              if resnet else [(2, 64, 14, 14, 64, 3, 1, 1)])
    res = {"device": torch.cuda.get_device_name(), "shapes": {}}
    for sh in shapes:
        res["shapes"][str(sh)] = one(sh)
    res["bound"] = str(_call.cache_info())
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


def one(sh) -> dict:
    import baracuda.torch as bt
    from baracuda.backends.nvidia import cudnn_conv as C
    from baracuda.backends.nvidia import cudnn_graph as G

    n, c, h, w_, k, r, st, pad = sh
    cl = torch.channels_last
    x = torch.randn(n, c, h, w_, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    w = torch.randn(k, c, r, r, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    kw = dict(stride=st, padding=pad)
    rows = {"torch conv2d": per_call(lambda: torch.nn.functional.conv2d(x, w, **kw), 500)}
    rows["baracuda drop-in"] = per_call(lambda: bt.nn.functional.conv2d(x, w, **kw), 500)
    with bt.mode():
        rows["under bt.mode()"] = per_call(lambda: torch.nn.functional.conv2d(x, w, **kw), 500)
    # the bound call the drop-in reaches (its operands as the drop-in hands them: NHWC views)
    ent = [e for e in C._CACHE.graphs.items()]
    built = ent[-1][1]
    y = bt.nn.functional.conv2d(x, w, **kw)
    from baracuda.backends.nvidia.cudnn_conv import _I, _R, _W
    t = {_I: x, _R: y, _W: w}
    rows["cudnn_graph.execute"] = per_call(lambda: G.execute(built, t, None, 0, w), 500)
    fn, cpp = built.raw
    h = G.stream_handle(0)
    pack = {u: v.data_ptr() for u, v in t.items()}
    ws = torch.empty(max(built.workspace, 1), dtype=torch.uint8, device="cuda")
    args = (pack, ws.data_ptr(), h.backend_handle, None, None, None) if cpp is None else \
        (pack, ws.data_ptr(), cpp, h.backend_handle, None, None, None)
    rows["lowered graph execute alone"] = per_call(lambda: fn(*args), 500)
    rows["torch.empty(out)"] = per_call(lambda: torch.empty_like(y), 500)
    rows["movedim x2"] = per_call(lambda: x.movedim(1, -1).movedim(-1, 1), 500)
    us = {k_: v * 1e6 for k_, v in rows.items()}
    print(sh, "  ".join(f"{k_}: {v:.1f}" for k_, v in us.items()), flush=True)
    return us


if __name__ == "__main__":
    sys.exit(main())
