"""Where the host time of a patched model's train step goes (issue #16: the patched Llama step keeps the GPU idle
~8 ms of its 33 ms on the H100 host, session7 run A).  The model runs at a size whose kernels take microseconds
(hidden 256, seq 64, batch 1; ``--full``: the benchmark's own), so a step's wall time is its host time.
Reported: eager and patched host ms per step, and cProfile's top functions of the patched step.

    python bench/patch_host_profile.py OUT.txt [--model llama] [--device cuda] [--proxy]

``--proxy`` (CPU): every baracuda plan's kernel replaced by nothing, so the patched step's own Python cost shows
without the reference backend's NumPy compute (see bench/host_proxy.py).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys

import torch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="llama")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--proxy", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args(argv)
    from _host import host_bound, per_call, stub_kernels

    if args.proxy:
        stub_kernels()
    import baracuda.torch as bt
    from baracuda.bench import models as M

    if not args.full:
        host_bound(M, args.model)
    dt = torch.bfloat16 if args.device == "cuda" else torch.float32
    model, ids, spec, cfg = M.build(args.model, tiny=False, layers=None, device=args.device, dtype=dt)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()

    def wall():
        return per_call(step, args.steps, 3, 3, sync) * 1e3

    out = io.StringIO()
    print(f"{args.model} {cfg} on {args.device}{' (kernels stubbed)' if args.proxy else ''}", file=out)
    print(f"eager: {wall():.2f} ms/step", file=out)
    rep = bt.patch(model)
    print(f"patch: {wall():.2f} ms/step", file=out)
    print(str(rep)[:1500], file=out)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(10):
        step()
    sync()
    pr.disable()
    for key in ("tottime", "cumulative"):
        pstats.Stats(pr, stream=out).sort_stats(key).print_stats(45)
    open(args.out, "w").write(out.getvalue())
    print(out.getvalue()[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
