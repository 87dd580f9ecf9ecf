"""N-D cross_entropy (segmentation maps: few classes, many positions) through its variants on the GPU: the
nd_small path's defaults and its forced shapes (loss.py nd_small), the row-tile path it replaced, torch eager.

    python bench/ce_nd_ab.py OUT.json
"""
import json, sys, torch, triton
import torch.nn.functional as F
import baracuda as bc
from baracuda.backends.triton.loss import ce_kernels as L
res = {}
for shape, dt in (((16, 19, 512, 512), torch.bfloat16), ((16, 19, 512, 512), torch.float32), ((8, 150, 128, 128), torch.bfloat16)):
    x = torch.randn(*shape, device="cuda").to(dt)
    t = torch.randint(0, shape[1], (shape[0],) + shape[2:], device="cuda")
    g = torch.tensor(1.0, device="cuda", dtype=dt)
    nbytes = x.numel() * x.element_size()
    key = f"{shape}-{str(dt)[6:]}"
    r = {"eager_fw": triton.testing.do_bench(lambda: F.cross_entropy(x, t), return_mode="median")}
    xr = x.clone().requires_grad_()
    lo = F.cross_entropy(xr, t)
    r["eager_bw"] = triton.testing.do_bench(lambda: torch.autograd.grad(lo, xr, retain_graph=True), return_mode="median")
    want = F.cross_entropy(x.float(), t)
    for name, kw in (("default", {}), ("k4", {"nd_k": 4}), ("k8", {"nd_k": 8}), ("bj1024", {"nd_bj": 1024}),
                     ("bj256", {"nd_bj": 256}), ("gather", {"nd_xt_sum": False}), ("old", {"nd_small": False})):
        with L.forced(**kw):
            fw = bc.Plan.select(bc.Descriptor.like("cross_entropy", x, t), "cuda")
            bw = bc.Plan.select(bc.Descriptor.like("cross_entropy_backward", g, x, t), "cuda")
            got = fw.run(x, t)
            err = float((got.float() - want).abs() / want.abs())
            r[name + "_route"] = fw.sku.route.split(":")[-1]
            r[name + "_fw"] = triton.testing.do_bench(lambda: fw.run(x, t), return_mode="median")
            r[name + "_bw"] = triton.testing.do_bench(lambda: bw.run(g, x, t), return_mode="median")
            r[name + "_err"] = err
            r[name + "_fw_TBps"] = nbytes / r[name + "_fw"] / 1e9
            r[name + "_bw_TBps"] = 2 * nbytes / r[name + "_bw"] / 1e9
    res[key] = r
    print(key, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
bc.check_errors()
json.dump(res, open(sys.argv[1], "w"), indent=1)
