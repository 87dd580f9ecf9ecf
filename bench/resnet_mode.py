"""torchvision ResNet train step under eager and ``bt.mode()`` (issue #18's last row; GPU).

    python bench/resnet_mode.py OUT.json [--model resnet18,resnet50] [--batch 64] [--steps 5]

bf16 weights and inputs, channels-last, random init, cross-entropy on random labels: a step = zero_grad, forward,
loss, backward; median of the steps' CUDA-event times after 3 warm-ups.  Reports ms per step, peak memory, the mode's
routing report, and the largest relative difference of the loss and of the first conv's weight gradient vs eager.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from baracuda.bench.timing import median_ms


def _step_fn(model, x, y):
    def step():
        model.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss
    return step


def _cpu_control_ms() -> float:
    """This process's host speed, as a control for step times that are host-bound: the best of 5 timings of a
    fixed loop of Python calls and small CPU tensor ops (no GPU)."""
    a = torch.ones(4)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(20000):
            a.add(i).sum()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def main(argv=None) -> int:
    import torchvision

    import baracuda.torch as bt

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="resnet18,resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "command": "python bench/resnet_mode.py " + " ".join(argv or sys.argv[1:]), "models": {},
           "cpu_control_ms": _cpu_control_ms()}
    for name in args.model.split(","):
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(num_classes=1000).cuda().to(torch.bfloat16)
        model = model.to(memory_format=torch.channels_last).train()
        x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(
            memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (args.batch,), device="cuda")
        step = _step_fn(model, x, y)
        r = {}
        torch.cuda.reset_peak_memory_stats()
        r["eager_ms"] = median_ms(step, reps=args.steps)
        r["eager_peak_GB"] = torch.cuda.max_memory_allocated() / 1e9
        loss_e = step().float().item()
        g_e = next(model.parameters()).grad.float().clone()
        torch.cuda.reset_peak_memory_stats()
        with bt.mode():
            r["mode_ms"] = median_ms(step, reps=args.steps)
            r["mode_peak_GB"] = torch.cuda.max_memory_allocated() / 1e9
            loss_m = step().float().item()
            g_m = next(model.parameters()).grad.float().clone()
        with bt.mode(coverage=True) as rep:
            step()
        r["speed_vs_eager"] = r["eager_ms"] / r["mode_ms"]
        r["loss_rel_diff"] = abs(loss_m - loss_e) / abs(loss_e)
        r["conv1_grad_rel_diff"] = ((g_m - g_e).abs().max() / g_e.abs().max()).item()
        r["report"] = rep.summary()[:3000]
        res["models"][name] = r
        print(name, json.dumps({k: v for k, v in r.items() if k != "report"}), "cpu_control_ms",
              round(res["cpu_control_ms"], 1), flush=True)
        print(r["report"][:1500], flush=True)
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
