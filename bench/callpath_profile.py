"""cProfile of the drop-in call path on tiny CUDA tensors (where the host time goes, per frame).

    python bench/callpath_profile.py [--calls 1000] [--top 14] [--ops add,sum]

For each op of ``baracuda bench --host`` (16-element inputs): the drop-in forward under no_grad, forward +
backward, and the call routed by bt.mode(); prints the top functions by own time for each.
"""
import argparse

import torch

import baracuda.torch as bt
from baracuda.bench.host import _cases
from host_profile import profile_text   # (bench/, the script's own folder)


def prof(name, fn, calls, top):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    text = profile_text(fn, calls, (("tottime", top),))
    print(f"==== {name} ({calls} calls)\n" + text[text.index("ncalls"):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--ops", default="")
    a = ap.parse_args()
    want = set(filter(None, a.ops.split(",")))
    for op, (theirs, ours, make) in _cases(torch, bt, "16", torch.device("cuda")).items():
        if want and op not in want:
            continue
        xs, xg = make(False), make(True)

        def fwd():
            with torch.no_grad():
                ours(*xs)

        def step():
            out = ours(*xg)
            torch.autograd.backward(out, torch.ones_like(out) if out.dim() else None)

        prof(f"{op} fwd", fwd, a.calls, a.top)
        prof(f"{op} fwd+bwd", step, a.calls // 2, a.top)


if __name__ == "__main__":
    main()
