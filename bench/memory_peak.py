"""What is alive at a train step's peak memory, per variant (GPU; issue #16's memory rows).

    python bench/memory_peak.py OUT.json [--model llama] [--variant eager,patch,liger] [--layers N]

torch's allocator history is recorded over one step (after warm-up steps); the trace is replayed to find the
moment of the highest allocated total, and the blocks alive then are grouped by the first stack frame outside
torch's own modules (the model code, baracuda's plans, Liger's kernels).  Reported per variant: the peak, and the
largest groups (MB, count, frame).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import torch

from baracuda.bench import models as M

_SKIP = ("site-packages/torch/", "<frozen", "/contextlib.py", "/functools.py", "memory_peak.py")


def _frame(frames, depth: int = 3) -> str:
    """The first ``depth`` frames outside torch's own modules, innermost first ('?': none, e.g. the autograd
    engine's thread allocating for a C++ backward)."""
    out = []
    for f in frames:
        name = f.get("filename", "")
        if name.endswith(".py") and not any(s in name for s in _SKIP):
            out.append(f"{name.split('site-packages/')[-1].split('/src/')[-1]}:{f.get('line')} {f.get('name')}")
            if len(out) == depth:
                break
    return " < ".join(out) if out else "?"


def peak_blocks(snapshot, top: int = 25) -> dict:
    events = [e for dev in snapshot["device_traces"] for e in dev]
    live: dict = {}
    total = best = 0
    best_live: dict = {}
    for e in events:
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames", []))
            total += e["size"]
            if total > best:
                best, best_live = total, dict(live)
        elif a in ("free_completed",):
            blk = live.pop(e["addr"], None)
            if blk is not None:
                total -= blk[0]
    groups = collections.defaultdict(lambda: [0, 0])
    for size, frames in best_live.values():
        g = groups[_frame(frames) + f" [{size / 1e6:.1f} MB blocks]" if size > 8e6 else _frame(frames)]
        g[0] += size
        g[1] += 1
    rows = sorted(groups.items(), key=lambda kv: -kv[1][0])[:top]
    return {"traced_peak_MB": round(best / 1e6, 1),
            "top": [{"MB": round(s / 1e6, 1), "count": c, "where": w} for w, (s, c) in rows]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="llama")
    ap.add_argument("--variant", default="eager,patch,liger")
    ap.add_argument("--layers", type=int, default=None)
    args = ap.parse_args(argv)
    model, ids, spec, cfg = M.build(args.model, tiny=False, layers=args.layers, device="cuda", dtype=torch.bfloat16)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "config": cfg,
           "command": "python bench/memory_peak.py " + " ".join(argv or sys.argv[1:]), "variants": {}}
    ctxs = {n: c for n, c, _ in M.VARIANTS}
    for name in args.variant.split(","):
        M._free(model, True)
        try:
            with ctxs[name](model, spec) as m:
                def step():
                    m.zero_grad(set_to_none=True)
                    m(input_ids=ids, labels=ids).loss.backward()
                step()
                step()
                m.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
                step()
                torch.cuda.synchronize()
                snap = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
                r = peak_blocks(snap)
                r["max_allocated_GB"] = round(torch.cuda.max_memory_allocated() / 1e9, 3)
                res["variants"][name] = r
        except Exception as e:  # noqa: BLE001
            res["variants"][name] = {"error": f"{type(e).__name__}: {e}"[:400]}
        print(name, json.dumps(res["variants"][name], indent=1)[:4000], flush=True)
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
