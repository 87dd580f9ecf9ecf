"""One launch of each of the sort family's register-network kernels for Nsight Compute (issue #17): the 8192-key
row sort of [8192, 8192] f32 and topk k = 1024 of [8192, 32768] bf16.  Each op runs twice (the first compiles);
profile the second:  ncu --launch-skip 1 --launch-count 1 -k regex:_rows_kernel python bench/sort_ncu.py sort"""
import sys

import torch

import baracuda as bc


def main(which):
    torch.manual_seed(0)
    if which == "sort":
        x = torch.randn(8192, 8192, device="cuda")
        desc = bc.Descriptor.like("sort", x, dim=-1, descending=False, stable=True)
    else:
        x = torch.randn(8192, 32768, device="cuda", dtype=torch.bfloat16)
        desc = bc.Descriptor.like("topk", x, k=1024, dim=-1, largest=True, sorted=True)
    p = bc.Plan.select(desc, "cuda")
    for _ in range(2):
        p.run(x)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
