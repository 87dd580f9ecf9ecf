"""A/B of the cuDNN workspace kept per (thread, stream) (cudnn_graph._WS_KEEP) on a torchvision ResNet-50 train step
under ``bt.mode()`` (GPU), in one process: the caps alternate, each measured on the same model and inputs (median step
of CUDA-event timings) with its peak memory; eager once for reference.
    python bench/ws_keep_ab.py OUT.json [--batch 256] [--rounds 3]"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from baracuda.bench.timing import median_ms


def main(argv=None) -> int:
    import torchvision

    import baracuda.torch as bt
    from baracuda.backends.nvidia import cudnn_graph as G

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    cl = torch.channels_last
    m = torchvision.models.resnet50(num_classes=1000).cuda().to(torch.bfloat16).to(memory_format=cl).train()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    y = torch.randint(0, 1000, (a.batch,), device="cuda")

    def step():
        m.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(m(x), y).backward()

    res = {"device": torch.cuda.get_device_name(), "batch": a.batch, "eager_ms": median_ms(step, reps=5), "rows": []}
    for r in range(a.rounds):
        for cap in (32 << 20, 256 << 20, 0):
            G._WS_KEEP = cap
            G.drop_kept_workspaces()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            with bt.mode():
                ms = median_ms(step, reps=5)
            row = {"round": r, "keep_MB": cap >> 20, "mode_ms": ms, "peak_GB": torch.cuda.max_memory_allocated() / 1e9}
            res["rows"].append(row)
            print(row, flush=True)
    print("eager", res["eager_ms"])
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
