"""CPU proxy of a torchvision ResNet step's host cost under ``bt.mode()`` (every baracuda kernel stubbed:
bench/_host.stub_kernels): a tiny input (batch 2, 32 x 32, channels-last, f32) so torch's own CPU kernels cost
little; eager and mode step times, then the mode's cProfile by own time.
    python bench/resnet_host_proxy.py [--model resnet50] [--profile N] [--sort cumulative] [--lines 40]"""
import argparse
import cProfile
import pstats
import statistics
import time

import torch

from _host import stub_kernels

stub_kernels()
import baracuda.torch as bt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="resnet50")
ap.add_argument("--profile", type=int, default=30)
ap.add_argument("--sort", default="tottime", help="pstats order: tottime, cumulative")
ap.add_argument("--lines", type=int, default=40)
a = ap.parse_args()
torch.manual_seed(0)
cl = torch.channels_last
try:
    import torchvision

    model = getattr(torchvision.models, a.model)(num_classes=10)
except ImportError:     # (no torchvision here: transformers' ResNet-50, the same bottleneck blocks)
    import transformers

    cfg = transformers.ResNetConfig(num_labels=10, layer_type="bottleneck", depths=[3, 4, 6, 3],
                                    hidden_sizes=[256, 512, 1024, 2048], embedding_size=64)
    hf = transformers.ResNetForImageClassification(cfg)
    model = torch.nn.Sequential()
    model.forward = lambda inp: hf(pixel_values=inp).logits
    model.add_module("hf", hf)
model = model.to(memory_format=cl).train()
x = torch.randn(2, 3, 32, 32).to(memory_format=cl)
y = torch.randint(0, 10, (2,))


def step():
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()


def t(n=2, rounds=25):
    for _ in range(3):
        step()
    rs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        rs.append((time.perf_counter() - t0) / n * 1e3)
    return min(rs)     # (the least: the host cost without the noise of a shared machine)


print(f"{a.model} eager step {t(1, 5):.2f} ms")
with bt.mode():
    print(f"{a.model} mode step {t():.2f} ms")
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(a.profile):
            step()
        pr.disable()
if a.profile:
    pstats.Stats(pr).sort_stats(a.sort).print_stats(a.lines)
