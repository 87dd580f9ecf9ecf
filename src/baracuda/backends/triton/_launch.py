"""Low-overhead relaunch of an already compiled Triton kernel.

``kernel[grid](...)`` re-derives the specialization of every argument (pointer alignment, integer
divisibility, constexpr values) on each call: with the ~30 arguments of the elementwise template that is
most of a small op's host time (the bench measured ~25 us per launch on the H200 host against ~7 us for a
torch eager add).  A plan launches the same kernel with the same integers every time, so ``Launcher``
remembers the compiled kernel per (integer arguments, pointer-alignment pattern, constexprs) and calls its
launcher directly.  Anything new (first call, another alignment, other integers) goes through Triton's
normal path, which compiles or finds the right variant; so a reused variant is always one Triton itself
would have chosen.  Under TRITON_INTERPRET=1 there is no compiled kernel and every call takes the normal path.
"""
from __future__ import annotations

from triton import knobs

__all__ = ["Launcher"]


class Launcher:
    __slots__ = ("fn", "cache", "order", "broken")

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}
        self.order = None       # names of the kernel's parameters, in signature order
        self.broken = False     # set if a direct launch ever fails: then always the normal path

    def __call__(self, grid, args: tuple, constexprs: dict, **options):
        """Launch ``fn[grid](*args, **constexprs, **options)``; ``args`` are the runtime arguments, in order."""
        key = None
        if not self.broken:
            key = (tuple(a.data_ptr() % 16 == 0 if hasattr(a, "data_ptr") else a for a in args),
                   tuple(constexprs.values()), tuple(options.values()))
            hit = self.cache.get(key)
            if hit is not None:
                kernel, tail = hit
                try:
                    import torch

                    stream = torch.cuda.current_stream().cuda_stream
                    g = (tuple(grid) + (1, 1))[:3]
                    kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata, None,
                               knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args, *tail)
                    return
                except Exception:  # noqa: BLE001  (private API changed: fall back for good)
                    self.broken = True
        kernel = self.fn[grid](*args, **constexprs, **options)
        if key is not None and kernel is not None and hasattr(kernel, "packed_metadata"):
            if self.order is None:
                self.order = list(self.fn.arg_names)
            names = self.order[len(args):]
            if set(names) == set(constexprs):  # every trailing parameter is a given constexpr
                self.cache[key] = (kernel, tuple(constexprs[n] for n in names))
