"""masked_fill's row kernel on the H100: [4, 32, 4096, 4096] bf16 under a [4, 1, 4096, 4096] mask (the bench
workload), per (block, iters, warps) choice, CUDA events, median of 20 after warm-up, against torch eager and
torch.compile in the same process; GB/s counts x read + out written + the mask read once.
    python bench/masked_fill_sweep.py OUT.json"""
from __future__ import annotations

import itertools
import json
import sys

import torch


def timed(fn, n=20):
    from baracuda.bench.timing import median_ms

    return median_ms(fn, reps=n, warmup=3)


def main() -> int:
    import baracuda as bc
    from baracuda.backends.triton.indexing_index.masked import forced

    x = torch.randn(4, 32, 4096, 4096, device="cuda", dtype=torch.bfloat16)
    mask = torch.rand(4, 1, 4096, 4096, device="cuda") < 0.5
    out = torch.empty_like(x)
    gb = (2 * x.numel() * 2 + mask.numel()) / 1e9
    res = {"device": torch.cuda.get_device_name(), "GB": gb}
    res["torch"] = timed(lambda: x.masked_fill(mask, -1e4))
    comp = torch.compile(lambda a, m: a.masked_fill(m, -1e4))
    res["torch.compile"] = timed(lambda: comp(x, mask))
    plan = bc.Plan.select(bc.Descriptor.like("masked_fill", x, mask, value=-1e4))
    ref = x.masked_fill(mask, -1e4)
    rows = []
    for block, iters, warps in itertools.product((2048, 4096, 8192), (1, 2, 4), (4, 8)):
        if block * iters > 32768 or block // (32 * warps) < 4:
            continue
        with forced(block=block, iters=iters, warps=warps):
            plan.run(x, mask, out=out)
            ok = torch.equal(out, ref)
            ms = timed(lambda: plan.run(x, mask, out=out))
        rows.append({"block": block, "iters": iters, "warps": warps, "ms": ms, "GB/s": gb / ms * 1e3, "ok": ok})
        print(rows[-1], flush=True)
    res["rows"] = sorted(rows, key=lambda r: r["ms"])
    res["default_ms"] = timed(lambda: plan.run(x, mask, out=out))
    print({k: v for k, v in res.items() if k != "rows"}, "best", res["rows"][0])
    json.dump(res, open(sys.argv[1], "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
