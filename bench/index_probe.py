"""Issue #17 rows below target, the kernels alone (GPU): index_select's row kernel against the index-map gather
kernel on the same rows (tile sizes forced), scatter_add's atomics with acq_rel against relaxed order, torch eager
beside each, inputs rotated past 2x L2 (bench.timing.time_cuda: CUDA-graph replays).
    python bench/index_probe.py OUT.json"""
import json
import sys

import torch
import triton
import triton.language as tl

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.indexing import kernels as K
from baracuda.backends.triton.indexing_index import rows as R

dev = "cuda"
res = {"device": torch.cuda.get_device_name()}


def t(fns):
    return round(time_cuda(fns, budget_s=0.5).ms * 1e3, 1)   # us


# index_select rows: [65536, 4096] bf16 <- 16384 indices
N, D, Kk = 65536, 4096, 16384
sets = [(torch.randn(N, D, device=dev, dtype=torch.bfloat16), torch.randint(0, N, (Kk,), device=dev))
        for _ in range(2)]
outs = [torch.empty(Kk, D, device=dev, dtype=torch.bfloat16) for _ in sets]
flag = torch.zeros(1, dtype=torch.int64, device=dev)
res["torch_index_select_us"] = t([lambda s=s, o=o: torch.index_select(s[0], 0, s[1], out=o) for s, o in zip(sets, outs)])
for tb in (4096, 8192, 16384, 32768):
    R._TILE_BYTES = tb
    res[f"rows_select_tile{tb}_us"] = t([lambda s=s, o=o: R.apply_rows("select", o, s[0], s[1], None, None, flag,
                                                                     (1, N, D), Kk, False, False)
                                       for s, o in zip(sets, outs)])
R._TILE_BYTES = 16384


def imap(s, o):
    K.launch_index_map(K.GATHER, K.int_view(o), s[1][:, None].expand(Kk, D), K.int_view(s[0]), flag, dim=0, ds=D,
                       size=N, wrap=False, shape=(Kk, D), idx_strides=(1, 0), val_strides=(D, 1), tgt_strides=(0, 1))


res["index_map_gather_us"] = t([lambda s=s, o=o: imap(s, o) for s, o in zip(sets, outs)])
ref = torch.index_select(sets[0][0], 0, sets[0][1])
R.apply_rows("select", outs[0], sets[0][0], sets[0][1], None, None, flag, (1, N, D), Kk, False, False)
res["rows_select_ok"] = bool(torch.equal(outs[0], ref))
imap(sets[0], outs[0])
res["index_map_ok"] = bool(torch.equal(outs[0], ref))
del sets, outs, ref


# scatter_add per element: [65536, 64] f32 <- [16M, 64] random index: acq_rel vs relaxed atomics
@triton.jit
def _sa(out_ptr, idx_ptr, src_ptr, n, W, RELAXED: tl.constexpr, BLOCK: tl.constexpr):
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = e < n
    j = tl.load(idx_ptr + e, mask=m, other=0)
    v = tl.load(src_ptr + e, mask=m, other=0.0)
    o = out_ptr + j * W + e % W
    if RELAXED:
        tl.atomic_add(o, v, mask=m, sem="relaxed")
    else:
        tl.atomic_add(o, v, mask=m)


M, W, T = 1 << 24, 64, 65536
idx = torch.randint(0, T, (M, W), device=dev)
src = torch.randn(M, W, device=dev)
out = torch.zeros(T, W, device=dev)
res["torch_scatter_add_ms"] = t([lambda: out.scatter_add_(0, idx, src)]) / 1e3
for relaxed in (False, True):
    res[f"atomic_{'relaxed' if relaxed else 'acq_rel'}_ms"] = t(
        [lambda: _sa[(triton.cdiv(M * W, 1024),)](out, idx, src, M * W, W, RELAXED=relaxed, BLOCK=1024)]) / 1e3
print(json.dumps(res, indent=1))
json.dump(res, open(sys.argv[1], "w"), indent=1)
