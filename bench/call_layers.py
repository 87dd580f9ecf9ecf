"""Host time of one cuDNN convolution call, layer by layer (GPU): the drop-in, the bound call (``_call.bound``'s
launcher), the backend's execute (cudnn_graph.execute) and the lowered graph's own execute alone; torch's conv2d beside
them.  bf16 channels-last [2, 64, 14, 14] * [64, 64, 3, 3], no grad: the host's time (the GPU keeps up).
    python bench/call_layers.py OUT.json"""
from __future__ import annotations

import json
import sys

import torch

from _host import per_call


def main(argv=None) -> int:
    import baracuda.torch as bt
    from baracuda.backends.nvidia import cudnn_conv as C
    from baracuda.backends.nvidia import cudnn_graph as G
    from baracuda.torch import _call

    out = (argv or sys.argv[1:] or ["call_layers.json"])[0]
    cl = torch.channels_last
    x = torch.randn(2, 64, 14, 14, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    torch.set_grad_enabled(False)
    rows = {"torch conv2d": per_call(lambda: torch.nn.functional.conv2d(x, w, padding=1), 500)}
    rows["baracuda drop-in"] = per_call(lambda: bt.nn.functional.conv2d(x, w, padding=1), 500)
    with bt.mode():
        rows["under bt.mode()"] = per_call(lambda: torch.nn.functional.conv2d(x, w, padding=1), 500)
    # the bound call the drop-in reaches (its operands as the drop-in hands them: NHWC views)
    ent = [e for e in C._CACHE.graphs.items()]
    built = ent[-1][1]
    y = bt.nn.functional.conv2d(x, w, padding=1)
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
    res = {"device": torch.cuda.get_device_name(), "us_per_call": {k: v * 1e6 for k, v in rows.items()},
           "bound": str(_call.cache_info())}
    for k, v in res["us_per_call"].items():
        print(f"{k:32s} {v:8.1f} us")
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
