"""Issue #17's sort-family rows, the new paths against the old ones and torch in one process (GPU): sort / argsort
of [8192, 8192] and [1, 2^24] f32 (LSD radix passes vs block sort + merge: ``forced(radix=False)``), topk k = 8 / 64
/ 1024 of [8192, 32768] bf16 (threshold filter vs radix select: ``forced(filter=False)``), unique of 16M int64 (on
the sort).  Plans are selected inside the forced block (a path's workspace is sized there); CUDA-graph replays of
one input (GPU time).  python bench/sort_ab.py OUT.json"""
import json
import sys

import torch

import baracuda as bc
from baracuda.backends.triton.sort.rows import forced

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import event_us, timed  # noqa: E402

rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


def plan_us(desc, xs, force, graph):
    with forced(**force):
        p = bc.Plan.select(desc, "cuda")
        ws = torch.empty(max(p.workspace_size, 1), dtype=torch.uint8, device="cuda")
        outs = p.run(*xs, workspace=ws)
        us = timed(lambda i: p.run(*xs, workspace=ws), n=8) if graph else event_us(lambda: p.run(*xs, workspace=ws))
    return p.sku.route, us, outs


def main(out):
    torch.manual_seed(0)
    cases = []
    for shape in ((8192, 8192), (1, 1 << 24)):
        x = torch.randn(shape, device="cuda")
        cases.append(("sort", x, dict(dim=-1, descending=False, stable=True), {"radix": False},
                      lambda x=x: torch.sort(x, dim=-1, stable=True)))
        cases.append(("argsort", x, dict(dim=-1, descending=False, stable=True), {"radix": False},
                      lambda x=x: torch.argsort(x, dim=-1, stable=True)))
    xb = torch.randn(8192, 32768, device="cuda", dtype=torch.bfloat16)
    for k in (8, 64, 1024):
        cases.append(("topk", xb, dict(k=k, dim=-1, largest=True, sorted=True), {"filter": False},
                      lambda k=k: torch.topk(xb, k, dim=-1)))
    xu = torch.randint(0, 1 << 20, (1 << 24,), device="cuda", dtype=torch.int64)
    cases.append(("unique", xu, None, {"radix": False}, lambda: torch.unique(xu, sorted=True)))
    for op, x, attrs, old, peer in cases:
        base = dict(op=op, shape=list(x.shape), dtype=str(x.dtype), attrs=attrs)
        graph = op != "unique"
        row(**base, impl="torch", us=timed(lambda i: peer(), n=8) if graph else event_us(peer))
        if attrs is None:
            desc = bc.Descriptor.like(op, x)
        else:
            desc = bc.Descriptor.like(op, x, **attrs)
        ref = None
        for name, force in (("new", {}), ("old", old)):
            try:
                route, us, outs = plan_us(desc, [x], force, graph)
                outs = outs if isinstance(outs, (list, tuple)) else [outs]
                if ref is None:
                    ref, same = outs, True
                else:
                    same = all(torch.equal(a, b) for a, b in zip(ref, outs))
                row(**base, impl=name, route=route, us=us, same_as_new=same)
            except Exception as e:  # noqa: BLE001
                row(**base, impl=name, error=f"{type(e).__name__}: {str(e)[:200]}")
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
