"""var over narrow rows / columns (issue #16 item 4: var-first-[1048576,16] 0.34x and var-last-[1048576,16] 0.30x
torch.compile on the H100, session 6) against flat-load candidates (GPU): columns -- each split's shifted sums
(x - K, K = the column's first element) over runs of 1024 contiguous elements, folded per column with Chan's formula;
rows of C <= 64 -- BM rows read as one flat run, the mean then M2 from the registers (two exact passes).  Timed as
the bench rows are (CUDA-graph replays over input copies rotated past 2x L2) beside torch, torch.compile and the
current plan.  The candidates chosen are the library's kernels now (reduction/stats.py), run here at the swept
tiles.  python bench/var_narrow_probe.py OUT.json"""
import json
import sys

import torch

import baracuda as bc

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import timed  # noqa: E402
from baracuda.backends.triton.reduction.stats_flat import _var_cols_fold, _var_cols_kernel, _var_rows_kernel  # noqa: E402


rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


def main(out):
    for (R, C), dt in (((1048576, 16), torch.bfloat16), ((1048576, 16), torch.float32), ((262144, 64), torch.bfloat16)):
        x = torch.randn(R, C, device="cuda", dtype=dt) * 2 + 3
        nbytes = x.numel() * x.element_size()
        xs = [x] + [x.clone() for _ in range(max(0, -(-(160 << 20) // nbytes) - 1))]
        for dim in (0, 1):
            base = dict(shape=[R, C], dtype=str(dt), dim=dim)
            ref = torch.var(x.double(), dim)
            row(**base, impl="torch", us=timed(lambda i: torch.var(xs[i % len(xs)], dim)))
            cf = torch.compile(lambda t: torch.var(t, dim))
            cf(x)
            row(**base, impl="torch.compile", us=timed(lambda i: cf(xs[i % len(xs)])))
            p = bc.Plan.select(bc.Descriptor.like("var", x, dims=(dim,), correction=1.0), "cuda")
            row(**base, impl="baracuda", route=p.sku.route, us=timed(lambda i: p.run(xs[i % len(xs)])))
            if dim == 0:
                v, mu = torch.empty(C, device="cuda", dtype=dt), torch.empty(C, device="cuda", dtype=dt)
                for BE in (1024, 2048):
                    BR = BE // C
                    for S in (512, 1024):
                        rows_per = -(-(-(-R // S)) // BR) * BR
                        S2 = -(-R // rows_per)
                        s1 = torch.empty(C, S2, device="cuda", dtype=torch.float32)
                        s2 = torch.empty(C, S2, device="cuda", dtype=torch.float32)
                        for warps in (4, 8):
                            def fn(i):
                                xi = xs[i % len(xs)]
                                _var_cols_kernel[(S2,)](xi, s1, s2, R, rows_per, S2, C=C, BR=BR, num_warps=warps)
                                _var_cols_fold[(C,)](xi, s1, s2, v, mu, R, C, rows_per, S2, 1.0, BC=1, BS=1024, SQRT=False,
                                                     WRITE1=True, num_warps=4)
                            fn(0)
                            torch.cuda.synchronize()
                            err = ((v.double() - ref).abs() / ref.abs()).max().item()
                            row(**base, impl="probe-cols", BE=BE, S=S2, warps=warps, us=timed(fn), relerr=err)
            else:
                v = torch.empty(R, device="cuda", dtype=dt)
                for BM in (64, 128, 256, 512):
                    if BM * C > 16384:
                        continue
                    for warps in (4, 8):
                        def fn(i):
                            _var_rows_kernel[(-(-R // BM),)](xs[i % len(xs)], v, v, R, 1.0, C=C, BM=BM, SQRT=False,
                                                             WRITE1=False, num_warps=warps)
                        fn(0)
                        torch.cuda.synchronize()
                        err = ((v.double() - ref).abs() / ref.abs()).max().item()
                        row(**base, impl="probe-rows", BM=BM, warps=warps, us=timed(fn), relerr=err)
    json.dump(rows, open(out, "w"), indent=0)


if __name__ == "__main__":
    main(sys.argv[1])
