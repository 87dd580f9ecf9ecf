"""Where the host time of a torchvision ResNet forward under ``bt.mode()`` goes (GPU; issue #18's last row).

A small batch (the GPU keeps up, so a forward's wall time is its host time): eager and mode forward host ms; per
routed op, the host us per call inside the mode's route (wrapped with a timer); then a cProfile of the mode's
forward, by own time and by cumulative time.
    python bench/resnet_mode_host.py OUT.txt [--model resnet50] [--batch 8] [--backward]"""
from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import statistics
import time

import torch


def main(argv=None) -> int:
    import torchvision

    import baracuda.torch as bt
    from baracuda.torch import _mode

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--backward", action="store_true")
    a = ap.parse_args(argv)
    cl = torch.channels_last
    model = getattr(torchvision.models, a.model)().cuda().to(torch.bfloat16).to(memory_format=cl).train()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    y = torch.randint(0, 1000, (a.batch,), device="cuda")

    def step():
        out = model(x)
        if a.backward:
            model.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(out, y).backward()

    def host_ms(n=10):
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            ts.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
        return statistics.median(ts)

    out = io.StringIO()
    eager = host_ms()
    with bt.mode():
        mode = host_ms()
    print(f"{a.model} batch {a.batch} {'fw+bw' if a.backward else 'fw'} host ms: eager {eager:.2f}  mode {mode:.2f}",
          file=out)
    # per routed op: the route's own time
    m = bt.mode()
    tot, cnt = collections.Counter(), collections.Counter()
    for route in {id(r): r for r in m._routes.values()}.values():
        run = route.run

        def timed(args, kwargs, _run=run, _n=route.name):
            t0 = time.perf_counter()
            try:
                return _run(args, kwargs)
            finally:
                tot[_n] += time.perf_counter() - t0
                cnt[_n] += 1
        object.__setattr__(route, "run", timed)     # (a frozen dataclass: the instance attribute shadows run)
    with m:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        tot.clear(), cnt.clear()
        for _ in range(5):
            step()
            torch.cuda.synchronize()
    print(f"{'routed op':45s} {'calls/step':>10s} {'us/call':>8s} {'ms/step':>8s}", file=out)
    for n, t in tot.most_common():
        print(f"{n:45s} {cnt[n] / 5:10.0f} {t / cnt[n] * 1e6:8.1f} {t / 5 * 1e3:8.2f}", file=out)
    with bt.mode():
        step()
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3):
            step()
        pr.disable()
        torch.cuda.synchronize()
    for order in ("tottime", "cumulative"):
        print(f"\n===== cProfile, 3 steps, by {order} =====", file=out)
        pstats.Stats(pr, stream=out).sort_stats(order).print_stats(45)
    open(a.out, "w").write(out.getvalue())
    print(out.getvalue()[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
