"""Where the host time of a torchvision ResNet train step under ``bt.mode()`` goes (GPU): cProfile over a few
warm steps, the top functions by own time and by cumulative time, and the launches per step by kind.

    python bench/resnet_host_profile.py OUT.txt [--model resnet18] [--batch 32] [--steps 3]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

import torch


def main(argv=None) -> int:
    import torchvision

    import baracuda.torch as bt

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    m = getattr(torchvision.models, args.model)(num_classes=1000).cuda().to(torch.bfloat16)
    m = m.to(memory_format=torch.channels_last).train()
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device="cuda")

    def step():
        m.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(m(x), y).backward()

    out = io.StringIO()

    def step_times(label):
        """The step's time (3 warm-ups, then ``--steps`` in a row) and the host time to queue one step (no sync at
        its end): equal means the host is the bottleneck."""
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        print(f"{label} step: {(time.perf_counter() - t0) / args.steps * 1e3:.1f} ms", file=out)
        t0 = time.perf_counter()
        step()
        print(f"{label}: one step queued in {(time.perf_counter() - t0) * 1e3:.1f} ms (host)", file=out)
        torch.cuda.synchronize()

    step_times("eager")
    with bt.mode() as mode:
        step_times("mode")
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=70),
              file=out)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        pr.disable()
    print(mode.summary()[:3000], file=out)
    for key in ("tottime", "cumulative"):
        st = pstats.Stats(pr, stream=out)
        st.sort_stats(key).print_stats(45)
    open(args.out, "w").write(out.getvalue())
    print(out.getvalue()[:20000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
