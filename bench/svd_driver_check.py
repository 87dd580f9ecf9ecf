"""svd of a 4096^2 f32 matrix, ours (gesvdj per matrix since session 20) against torch's default driver (gesvdj) and
its gesvd, wall time of one synchronized call (best of 2 after a warm-up), svdvals likewise, and our reconstruction
error.
    python bench/svd_driver_check.py OUT.json"""
import json
import sys

import torch

import baracuda.torch as bt
from _graph_timer import wall_ms

g = torch.Generator(device="cuda").manual_seed(0)
S = torch.randn(4096, 4096, device="cuda", generator=g)


res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
res["svd_torch_default_ms"] = wall_ms(lambda: torch.linalg.svd(S, full_matrices=False), reps=2, best=True)
res["svd_torch_gesvd_ms"] = wall_ms(lambda: torch.linalg.svd(S, full_matrices=False, driver="gesvd"), reps=2, best=True)
res["svd_ours_ms"] = wall_ms(lambda: bt.linalg.svd(S, full_matrices=False), reps=2, best=True)
res["svdvals_torch_ms"] = wall_ms(lambda: torch.linalg.svdvals(S), reps=2, best=True)
res["svdvals_ours_ms"] = wall_ms(lambda: bt.linalg.svdvals(S), reps=2, best=True)
u, s, vh = bt.linalg.svd(S, full_matrices=False)
res["svd_ours_reconstruction_rel_err"] = ((u * s[None]) @ vh - S).abs().max().item() / S.abs().max().item()
res["svd_ours_vs_torch_singular_values_rel"] = ((s - torch.linalg.svdvals(S)).abs().max() / s.max()).item()
res["x_torch_svd"] = round(res["svd_torch_default_ms"] / res["svd_ours_ms"], 3)
res["x_torch_svdvals"] = round(res["svdvals_torch_ms"] / res["svdvals_ours_ms"], 3)
print(res, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
