"""cross_entropy_backward (saved-lse path) on 4096 x 128256 bf16 under forced tile / split choices (GPU)."""
import torch
import baracuda as bc
from baracuda.backends.triton.loss import ce_kernels
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import event_us  # noqa: E402

x = torch.randn(4096, 128256, device="cuda", dtype=torch.bfloat16)
t = torch.randint(0, 128256, (4096,), device="cuda")
loss, lse = bc.Plan.select(bc.Descriptor.like("cross_entropy", x, t), "cuda").run(x, t)
g = torch.ones((), device="cuda", dtype=loss.dtype)
for force in ({}, {"split": 2}, {"split": 4}, {"split": 8}, {"tile": 2048}, {"tile": 2048, "split": 4},
              {"tile": 8192}, {"tile": 1024, "split": 8}):
    with ce_kernels.forced(**force):
        p = bc.Plan.select(bc.Descriptor.like("cross_entropy_backward", g, lse, x, t), "cuda")
        for _ in range(3):
            p.run(g, lse, x, t)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(10):
            p.run(g, lse, x, t)
        b.record()
        torch.cuda.synchronize()
        ms = a.elapsed_time(b) / 10
    print(force, f"{ms:.3f} ms", f"{2 * x.numel() * 2 / ms / 1e6:.0f} GB/s", p.sku.route, flush=True)


def timed(fn, n=10):
    return event_us(fn, n, warm=3) / 1e3     # ms


desc = bc.Descriptor.like("cross_entropy", x, t)
bwp = bc.BackwardPlan.select(desc, "cuda")
print("backward plan saves", bwp.saves, [str(s) for s in bwp.skus])
gb = torch.randn((), device="cuda", dtype=loss.dtype)
print("BackwardPlan.run(g, None)", f"{timed(lambda: bwp.run(gb, None, input=x, target=t, out1=lse)):.3f} ms")
glse = torch.randn_like(lse)
print("BackwardPlan.run(g, g_lse)", f"{timed(lambda: bwp.run(gb, glse, input=x, target=t, out1=lse)):.3f} ms")
