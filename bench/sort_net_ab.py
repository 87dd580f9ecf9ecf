"""The sort network's code size (issue #17): the unrolled bitonic network (91 rounds of straight-line code for 8192
keys: 21k SASS instructions, 335 KB, far past the instruction caches) against the stages as a runtime loop
(``forced(loop=1)``: direction from a position tensor; ``loop=2``: every round ascending, descending blocks held
complemented), at 8 and 16 warps (run A); then (run B) the hypercube axes permuted so the most exchanged bits sit in
registers (``forced(lv=log2 of the load's vector width)``), over row lengths and dtypes, torch.sort in the same
process; every variant's result compared with the unrolled one.  python bench/sort_net_ab.py OUT.json [xw | fc |
filter | warps | half | table | topk | topk-shapes] (xw: the cross-warp exchange; fc: int32 carriers for keys of
<= 16 bits against the int64 network; filter: topk's threshold filter variants; warps: the row sort at 8 / 16
warps; half: 16-bit rows, default paths; table: issue #17's rows, default paths; topk: the topk rows; topk-shapes:
with k = 1024's chunks and pass-2 lanes)"""
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
    if len(sys.argv) > 1:
        with open(sys.argv[1] + "l", "a") as f:     # OUT.jsonl, row by row (a run cut short keeps its rows)
            f.write(json.dumps(r) + "\n")


def run(desc, x, force, graph):
    with forced(**force):
        p = bc.Plan.select(desc, "cuda")
        ws = torch.empty(max(p.workspace_size, 1), dtype=torch.uint8, device="cuda")
        outs = p.run(x, workspace=ws)
        us = timed(lambda i: p.run(x, workspace=ws), n=4) if graph else event_us(lambda: p.run(x, workspace=ws))
    return p.sku.route, us, outs


def topk_case(dt, k, variants):
    """A case of issue #17's topk row: [8192, 32768] rows of dt, the k largest, sorted; variants: forced options."""
    return ("topk", (8192, 32768), dt, dict(k=k, dim=-1, largest=True, sorted=True), variants)


def main(out):
    torch.manual_seed(0)
    ab = [dict(lv=-1), dict()]      # no permutation, then the default (the permutation by the load's vector)
    cases = [("sort", (8192, 8192), torch.float32, {}, ab), ("sort", (16384, 4096), torch.float32, {}, ab),
             ("sort", (65536, 1024), torch.float32, {}, ab), ("sort", (8192, 8192), torch.bfloat16, {}, ab),
             ("sort", (8192, 8192), torch.int32, {}, ab), ("sort", (8192, 4096), torch.float64, {}, ab),
             ("sort", (1, 1 << 24), torch.float32, {}, [dict(radix=False), dict(), dict(radix_block=8192)]),
             ("sort", (1, 1 << 24), torch.bfloat16, {}, [dict(radix=False), dict()]),
             ("sort", (64, 1 << 18), torch.float32, {}, [dict(radix=False), dict()]),
             ("argsort", (1, 1 << 24), torch.float32, {}, [dict()]),
             ("unique", (1 << 24,), torch.int64, None, [dict(), dict(radix=True)])]
    cases += [topk_case(torch.bfloat16, k, ab) for k in (8, 64, 1024)]
    cases += [topk_case(torch.float32, k, ab) for k in (8, 1024)]
    if len(sys.argv) > 2 and sys.argv[2] == "xw":      # the cross-warp exchange: xor_sum (reduce) vs gather
        xw = [dict(xw=False), dict()]
        cases = [("sort", (8192, 8192), torch.float32, {}, xw), ("sort", (8192, 8192), torch.bfloat16, {}, xw),
                 ("sort", (65536, 1024), torch.float32, {}, xw), ("sort", (8192, 4096), torch.float64, {}, xw),
                 ("sort", (1, 1 << 24), torch.float32, {}, [dict(radix=True, xw=False), dict(radix=True)])]
    if len(sys.argv) > 2 and sys.argv[2] == "fc":      # keys of <= 16 bits: int32 carriers vs the int64 network
        fc = [dict(fc=False), dict()]
        cases = [("sort", (8192, 8192), torch.bfloat16, {}, fc), ("sort", (65536, 1024), torch.bfloat16, {}, fc),
                 ("sort", (8192, 8192), torch.float16, {}, fc), ("sort", (16384, 4096), torch.bfloat16, {}, fc)]
        cases += [topk_case(torch.bfloat16, k, fc) for k in (8, 64, 1024)]
    if len(sys.argv) > 2 and sys.argv[2] == "warps":   # the row sort at 8 vs 16 warps (the carriers' registers)
        w = [dict(), dict(warps=16)]
        cases = [("sort", (8192, 8192), torch.bfloat16, {}, w), ("sort", (8192, 8192), torch.float32, {}, w),
                 ("sort", (16384, 4096), torch.bfloat16, {}, w)]
    if len(sys.argv) > 2 and sys.argv[2] == "filter":  # the threshold filter's shape at large k
        vs = [dict(), dict(filter_gather=4096), dict(filter_warps=16)]
        cases = [topk_case(torch.bfloat16, k, vs) for k in (1024, 256)]
        cases += [topk_case(torch.float32, k, vs[:2]) for k in (1024, 8)]
    if len(sys.argv) > 2 and sys.argv[2] == "half":    # 16-bit keys' rows, default paths only
        cases = [("sort", shape, torch.bfloat16, {}, [dict()]) for shape in ((8192, 8192), (16384, 4096), (65536, 1024))]
        cases += [topk_case(torch.bfloat16, k, [dict()]) for k in (8, 64, 1024)]
    if len(sys.argv) > 2 and sys.argv[2] == "table":   # issue #17's sort / topk rows, default paths only
        cases = [("sort", (8192, 8192), torch.float32, {}, [dict()]),
                 ("sort", (1, 1 << 24), torch.float32, {}, [dict()])]
        cases += [topk_case(torch.bfloat16, k, [dict()]) for k in (8, 64, 1024)]
    if len(sys.argv) > 2 and sys.argv[2] in ("topk", "topk-shapes"):   # topk's rows; k = 1024's shapes (run B)
        k1024 = [dict(), dict(filter_chunks=4096), dict(filter_gather=2048), dict(filter_gather=8192)]
        shapes = sys.argv[2] == "topk-shapes"
        cases = [topk_case(dt, k, k1024 if k == 1024 and shapes else [dict()])
                 for dt in (torch.bfloat16, torch.float16) for k in (8, 64, 256, 512, 1024)]
        cases += [topk_case(torch.float32, k, [dict()]) for k in (8, 256, 512, 1024)]
    peers = dict(sort=lambda x: torch.sort(x, dim=-1, stable=True),
                 argsort=lambda x: torch.argsort(x, dim=-1, stable=True),
                 unique=lambda x: torch.unique(x, sorted=True), topk=None)
    for op, shape, dt, attrs, vs in cases:
        x = torch.randn(shape, device="cuda").to(dt) if dt.is_floating_point else \
            torch.randint(-2 ** 30 if dt == torch.int32 else 0, 2 ** 30 if dt == torch.int32 else 1 << 20, shape,
                          device="cuda", dtype=dt)
        base = dict(op=op, shape=list(shape), dtype=str(dt), attrs=attrs)
        peer = peers[op] or (lambda x: torch.topk(x, attrs["k"], dim=-1))
        graph = op != "unique"
        row(**base, impl="torch", us=timed(lambda i: peer(x), n=4) if graph else event_us(lambda: peer(x)))
        if attrs is None:
            desc = bc.Descriptor.like(op, x)
        else:
            desc = bc.Descriptor.like(op, x, **(attrs or dict(dim=-1, descending=False, stable=True)))
        ref = None
        for force in vs:
            try:
                route, us, outs = run(desc, x, force, graph)
            except Exception as e:  # noqa: BLE001 - recorded
                row(**base, impl="baracuda", force=force, error=repr(e)[:300])
                continue
            same = None
            if ref is None:
                ref = outs
            else:
                outs, ref = (outs if isinstance(outs, tuple) else (outs,)), (ref if isinstance(ref, tuple) else (ref,))
                same = all(torch.equal(a, b) for a, b in zip(outs, ref))
            row(**base, impl="baracuda", force=force, route=route, us=us, same_as_first=same)
            del outs
        del x, ref
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
