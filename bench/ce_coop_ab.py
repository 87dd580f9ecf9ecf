"""A/B of the single-read cross-entropy kernel (loss_ce_coop): the round-by-round kernel (_ce_bw_coop) against the
software-pipelined one (_ce_coop_pipe), at register caps that give 2-4 programs per SM.  GPU only.

    python bench/ce_coop_ab.py [--json OUT] [--rounds 15]
Shapes: the fused linear CE chunk (1280 and 1536 x 128256 bf16, gradient written over the logits, loss per row)
and cross_entropy's backward at 4096 x 128256 (separate dx).  Each variant is checked against torch (f32 loss
and gradient of the same bf16 logits) before it is timed; times are medians over interleaved rounds of 3
back-to-back launches; GB/s counts one read and one write of the logits.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

from baracuda.backends.triton import loss_ce_coop as K

VARIANTS = {"8192/8w r80": dict(pipe=False, maxnreg=80),
            "4096/4w r80 cap8": dict(pipe=False, maxnreg=80, chunk=4096, warps=4, cap=8),
            "4096/4w r72 cap8": dict(pipe=False, maxnreg=72, chunk=4096, warps=4, cap=8),
            "4096/8w r64 cap8": dict(pipe=False, maxnreg=64, chunk=4096, warps=8, cap=8),
            "4096/8w r80 cap8": dict(pipe=False, maxnreg=80, chunk=4096, warps=8, cap=8),
            "8192/8w r64 cap4": dict(pipe=False, maxnreg=64, cap=4),
            "2048/4w r64 cap8": dict(pipe=False, maxnreg=64, chunk=2048, warps=4, cap=8)}


def setup(r, c, inplace, force):
    g = torch.Generator(device="cuda").manual_seed(r)
    x = (torch.randn(r, c, device="cuda", generator=g) * 2).bfloat16()
    t = torch.randint(0, c, (r,), device="cuda", generator=g)
    with K.forced(**force):
        ws = torch.empty(K.workspace_words(r, c, loss=True) + 8, device="cuda")
    one = torch.ones(1, device="cuda")
    den = torch.tensor([float(r)], device="cuda")
    eps = torch.zeros(1, device="cuda")
    wsum = torch.tensor([float(c)], device="cuda")
    loss = torch.empty(2 * r + 2, device="cuda")
    dx = x if inplace else torch.empty_like(x)

    def call(xx):
        K.launch(one, xx, t, xx, xx if inplace else dx, ws, den, eps, wsum, r, c, -100, False, False, 2, False,
                 loss=loss, woff=r, foff=2 * r)
    return x, t, dx, loss, call


def check(r, c, force):
    x, t, dx, loss, call = setup(r, c, False, force)
    with K.forced(**force):
        call(x)
    torch.cuda.synchronize()
    xf = x.float().requires_grad_()
    ref = F.cross_entropy(xf, t, reduction="none")
    (ref.sum() / r).backward()
    e_loss = ((loss[:r] - ref.detach()).abs().max() / ref.abs().max()).item()
    e_dx = ((dx.float() - xf.grad).abs().max() / xf.grad.abs().max()).item()
    return e_loss, e_dx


def time3(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "shapes": {}}
    for r, c, inplace in ((1280, 128256, True), (1536, 128256, True), (4096, 128256, False)):
        key = f"{r}x{c}{' in place' if inplace else ''}"
        row = {name: {"rel_err": check(r, c, v)} for name, v in VARIANTS.items()}
        fns = {}
        for name, force in VARIANTS.items():
            x, t, dx, loss, call = setup(r, c, inplace, force)

            def fn(force=force, call=call, x=x):
                with K.forced(**force):
                    call(x)
            fn()
            fns[name] = fn
        times = {n: [] for n in fns}
        for _ in range(a.rounds):
            for n, fn in fns.items():
                times[n].append(time3(fn))
        for n, ts in times.items():
            ts = sorted(ts)
            ms = ts[len(ts) // 2]
            row[n].update(ms=ms, ms_min=ts[0], ms_max=ts[-1], TBps=2 * r * c * 2 / ms / 1e9)
            print(f"{key:22s} {n:18s} {ms:.4f} ms ({ts[0]:.4f}-{ts[-1]:.4f}) {row[n]['TBps']:.2f} TB/s "
                  f"err loss {row[n]['rel_err'][0]:.1e} dx {row[n]['rel_err'][1]:.1e}")
        res["shapes"][key] = row
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
