"""Which ops under ``bt.mode()`` launch through Triton's own (slow, ~100 us) JIT path on every call instead of the
bound / fast launcher: per op of bench/mode_llama_ops.cases(), the number of JITFunction.run calls over 20 warm
calls, and a cProfile of the worst ops.    python bench/slow_launch_probe.py OUT.txt"""
from __future__ import annotations

import cProfile
import io
import pstats
import sys

import torch
from triton.runtime.jit import JITFunction

from mode_llama_ops import cases

counts = {"n": 0, "names": {}}
_orig = JITFunction.run


def counted(self, *a, **k):
    counts["n"] += 1
    nm = getattr(self, "__name__", "?")
    counts["names"][nm] = counts["names"].get(nm, 0) + 1
    return _orig(self, *a, **k)


JITFunction.run = counted


def main() -> int:
    import baracuda.torch as bt

    out = io.StringIO()
    cs = cases()
    slow = []
    for name, fn in cs.items():
        with bt.mode():
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            counts["n"], counts["names"] = 0, {}
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        print(f"{name:20s} JIT-path launches per call {counts['n'] / 20:5.2f} {counts['names']}", file=out)
        if counts["n"]:
            slow.append(name)
    print(out.getvalue(), flush=True)
    for name in slow + ["rotate_half", "sdpa", "pow(2)"]:
        with bt.mode():
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(50):
                cs[name]()
            torch.cuda.synchronize()
            pr.disable()
        print(f"\n===== {name} (50 calls) =====", file=out)
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(22)
    open(sys.argv[1], "w").write(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
