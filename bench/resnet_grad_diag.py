"""Where a torchvision ResNet's gradients under bt.mode() leave eager's (GPU): per-parameter relative differences
(output side first), and each routed op's backward alone on channels-last bf16 tensors.  python bench/resnet_grad_diag.py"""
import torch
import torch.nn.functional as F
import torchvision

import baracuda.torch as bt


def rel(a, b):
    return ((a.float() - b.float()).abs().max() / (b.float().abs().max() + 1e-12)).item()


torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10).cuda().to(torch.bfloat16).to(memory_format=torch.channels_last)
x = torch.randn(8, 3, 64, 64, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
y = torch.randint(0, 10, (8,), device="cuda")


def grads(mode):
    model.zero_grad(set_to_none=True)
    if mode:
        with bt.mode():
            F.cross_entropy(model(x), y).backward()
    else:
        F.cross_entropy(model(x), y).backward()
    return {n: p.grad.float().clone() for n, p in model.named_parameters()}


ge, gm = grads(False), grads(True)
# the float64 truth: the same weights and input in f64 (eager); bf16's errors against it, eager's and the mode's
import copy  # noqa: E402
m64 = copy.deepcopy(model).double()
m64.zero_grad(set_to_none=True)
F.cross_entropy(m64(x.double()), y).backward()
g64 = {n: p.grad.clone() for n, p in m64.named_parameters()}
ratios = []
for n in reversed(list(ge)):
    ee, em = rel(ge[n], g64[n]), rel(gm[n], g64[n])
    ratios.append(em / max(ee, 1e-12))
    print(f"eager {ee:9.2e}  mode {em:9.2e}  mode-vs-eager {rel(gm[n], ge[n]):9.2e}  {n}")
ratios.sort()
print("mode error / eager error vs float64, per parameter: median", f"{ratios[len(ratios) // 2]:.2f}",
      "max", f"{ratios[-1]:.2f}")


def check(name, fn, *shapes, cl=True):
    xs = [torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in shapes]
    if cl:
        xs = [t.to(memory_format=torch.channels_last) if t.dim() == 4 else t for t in xs]
    xs = [t.requires_grad_() for t in xs]
    out = fn(F, *xs)
    g = torch.randn_like(out)
    ref = torch.autograd.grad(out, xs, g)
    with bt.mode():
        o2 = fn(F, *xs)
        got = torch.autograd.grad(o2, xs, g)
    print(name, "fw", f"{rel(o2, out):.2e}", "bw", [f"{rel(a, b):.2e}" for a, b in zip(got, ref)], flush=True)


check("conv1 7x7s2", lambda f, a, w: f.conv2d(a, w, stride=2, padding=3), (8, 3, 64, 64), (64, 3, 7, 7))
check("conv 3x3", lambda f, a, w: f.conv2d(a, w, padding=1), (8, 64, 16, 16), (64, 64, 3, 3))
check("conv 1x1 s2", lambda f, a, w: f.conv2d(a, w, stride=2), (8, 64, 16, 16), (128, 64, 1, 1))
check("batch_norm", lambda f, a, w, b: f.batch_norm(a, None, None, w, b, training=True), (8, 64, 16, 16), (64,), (64,))
check("max_pool 3x3s2", lambda f, a: f.max_pool2d(a, 3, 2, 1), (8, 64, 32, 32))
check("adaptive_avg", lambda f, a: f.adaptive_avg_pool2d(a, 1), (8, 512, 2, 2))
check("relu", lambda f, a: f.relu(a), (8, 64, 16, 16))
check("add", lambda f, a, b: a + b, (8, 64, 16, 16), (8, 64, 16, 16))
