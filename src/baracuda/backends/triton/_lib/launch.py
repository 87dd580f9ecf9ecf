"""Low-overhead relaunch of an already compiled Triton kernel.

``kernel[grid](...)`` re-derives the specialization of every argument (pointer alignment, integer
divisibility, constexpr values) on each call: with the ~30 arguments of the elementwise template that is
most of a small op's host time (the bench measured ~26 us per launch on the H200 host against ~7 us for a
torch eager add).  A plan launches the same kernel with the same integers every time, so ``Launcher``
remembers the compiled kernel per (tensor-alignment pattern, scalar arguments, constexprs) and calls its
launcher directly.  Anything new (first call, another alignment, other integers) goes through Triton's
normal path, which compiles or finds the right variant; so a reused variant is always one Triton itself
would have chosen.  Under TRITON_INTERPRET=1 there is no compiled kernel and every call takes the normal path.
"""
from __future__ import annotations

import torch
from triton import knobs

__all__ = ["Launcher", "BoundLaunch", "shared", "FastKernel", "fast_kernel", "launch_entry", "bind_kernel", "meta"]

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


_RT = knobs.runtime


def _plain_hooks() -> bool:
    """True when no launch hook is installed.  Profilers (e.g. proton) install hooks that want the launch
    metadata only Triton's normal path computes, so with a hook we always take that path.  The direct path
    reads ``.calls`` of Triton 3.6's HookChain objects; another Triton falls back to the normal path."""
    enter, exit_ = _RT.launch_enter_hook, _RT.launch_exit_hook
    return (not getattr(enter, "calls", True)) and (not getattr(exit_, "calls", True))


def launch_entry(kernel) -> tuple:
    """``(c, pre)`` such that ``c(g0, g1, g2, stream, *pre, *args)`` launches the compiled ``kernel`` on ``args``:
    its C launch function when the kernel needs no scratch memory (the launcher's Python ``__call__`` only
    allocates scratch: one frame less per launch), else its launcher."""
    lk = kernel.run
    c = getattr(lk, "launch", None)
    if c is not None and getattr(lk, "global_scratch_size", 1) == 0 and getattr(lk, "profile_scratch_size", 1) == 0:
        return c, (kernel.function, lk.launch_cooperative_grid, lk.launch_pdl, None, None, kernel.packed_metadata,
                   None, None, None)
    return lk, (kernel.function, kernel.packed_metadata, None, None, None)


class Launcher:
    __slots__ = ("fn", "cache", "order", "broken", "tensors", "dev")

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}
        self.order = None       # names of the kernel's parameters, in signature order
        self.broken = False     # set if a direct launch ever fails: then always the normal path
        self.tensors = None     # positions of the tensor arguments (fixed per call site)
        self.dev = None

    def __call__(self, grid, args: tuple, constexprs: dict, **options):
        """Launch ``fn[grid](*args, **constexprs, **options)``; ``args`` are the runtime arguments, in order."""
        key = None
        if not self.broken and self.tensors is not None:
            # dtype and alignment of every pointer (Triton specializes on both; one Launcher may serve plans of
            # several dtypes) + the scalar arguments
            key = (tuple([(args[i].dtype, args[i].data_ptr() & 15 == 0) for i in self.tensors]),
                   tuple([a for a in args if not hasattr(a, "data_ptr")]), tuple(constexprs.values()),
                   tuple(options.values()))
            hit = self.cache.get(key)
            if hit is not None:
                kernel, tail = hit
                try:
                    g0, g1, g2 = (tuple(grid) + (1, 1))[:3]
                    kernel.run(g0, g1, g2, _raw_stream(self.dev), kernel.function, kernel.packed_metadata, None,
                               knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args, *tail)
                    return
                except Exception:  # noqa: BLE001  (private API changed: fall back for good)
                    self.broken = True
        kernel = self.fn[grid](*args, **constexprs, **options)
        if self.broken or _raw_stream is None or kernel is None or not hasattr(kernel, "packed_metadata"):
            return
        if self.tensors is None:
            self.tensors = tuple(i for i, a in enumerate(args) if hasattr(a, "data_ptr"))
            dev = next((args[i].device for i in self.tensors), None)
            self.dev = dev.index if dev is not None and dev.index is not None else torch.cuda.current_device()
            self.order = list(self.fn.arg_names)
            key = (tuple([(args[i].dtype, args[i].data_ptr() & 15 == 0) for i in self.tensors]),
                   tuple([a for a in args if not hasattr(a, "data_ptr")]), tuple(constexprs.values()),
                   tuple(options.values()))
        names = self.order[len(args):]
        if key is not None and set(names) == set(constexprs):  # every trailing parameter is a given constexpr
            self.cache[key] = (kernel, tuple(constexprs[n] for n in names))

    def bind(self, grid, tail: tuple, constexprs: dict, **options) -> "BoundLaunch":
        """A launch whose grid, scalar arguments, constexprs and options are fixed; only the tensors (the
        leading arguments) change per call.  See :class:`BoundLaunch`."""
        return BoundLaunch(self, tuple(grid), tuple(tail), constexprs, options)


class BoundLaunch:
    """``fn[grid](*tensors, *tail, **constexprs, **options)`` for a plan whose integers never change.

    The first call with every pointer 16-byte aligned (what the caching allocator hands out) goes through
    :class:`Launcher` (Triton's normal path: compile or find the variant); later such calls pass the tensors'
    addresses straight to the compiled kernel's C launcher with everything else prepared once.  Host cost
    per call: one ``data_ptr()`` per tensor, one stream query and the C launch (bench/launch_overhead.py).
    Other alignments (views at odd offsets), launch hooks (profilers) and the interpreter take the normal path."""

    __slots__ = ("launcher", "grid", "tail", "constexprs", "options", "hit")

    def __init__(self, launcher: Launcher, grid: tuple, tail: tuple, constexprs: dict, options: dict):
        self.launcher, self.tail, self.constexprs, self.options = launcher, tail, constexprs, options
        self.grid = (grid + (1, 1))[:3]
        self.hit = None   # (run, g0, g1, g2, function, packed_metadata, device, tail incl. constexprs)

    def __call__(self, *tensors):
        hit = self.hit
        if hit is not None:
            ptrs = [t.data_ptr() for t in tensors]
            m = 0
            for p in ptrs:
                m |= p
            if not m & 15:
                c, g0, g1, g2, pre, dev, tail = hit
                try:
                    if not (_RT.launch_enter_hook.calls or _RT.launch_exit_hook.calls):
                        c(g0, g1, g2, _raw_stream(dev), *pre, *ptrs, *tail)
                        return
                except Exception:  # noqa: BLE001  (private API changed: the normal path from now on)
                    self.launcher.broken = True
                    self.hit = None
        L = self.launcher
        L(self.grid, tensors + self.tail, self.constexprs, **self.options)
        if L.broken or any(t.data_ptr() & 15 for t in tensors) or not _plain_hooks():
            return
        key = (tuple([(t.dtype, True) for t in tensors]), self.tail, tuple(self.constexprs.values()), tuple(self.options.values()))
        entry = L.cache.get(key)
        if entry is not None:
            kernel, ctail = entry
            c, pre = launch_entry(kernel)
            self.hit = (c, *self.grid, pre, L.dev, self.tail + ctail)


_SHARED: dict = {}


def shared(fn, device) -> Launcher:
    """The Launcher of ``fn`` on ``device`` for call sites outside a plan's bind (a Launcher launches on the
    stream of one device; its cache keys carry the operands' dtypes, so plans of any dtype may share it)."""
    key = (fn, device.index)
    L = _SHARED.get(key)
    if L is None:
        L = _SHARED[key] = Launcher(fn)
    return L


class FastKernel:
    """A launched ``@triton.jit`` kernel whose ``kernel[grid](*args, **kwargs)`` skips the JIT's per-call binding.

    Triton's ``JITFunction.run`` specializes every argument on every call (~15-25 us for the ~20 arguments of a
    norm or loss kernel on the H100 host).  Here a call's key is built from what that specialization depends on —
    per tensor its dtype and 16-byte alignment, every other argument's value, the constexprs and launch options —
    and a key seen before launches the kernel Triton compiled for it through its C launcher (one ``data_ptr()``
    per tensor, the stream, the launch).  A new key, a callable grid, a launch hook (profilers), the interpreter,
    or any failure of the direct path takes Triton's own path, so a reused variant is always one Triton chose.
    Attribute access (``arg_names``, ``warmup``, ...) reaches the JIT function.

    Use: ``@fast_kernel`` instead of ``@triton.jit`` on kernels that are launched (never on helpers another kernel
    calls), or ``FastKernel(jit_function)``.
    """

    __slots__ = ("jit", "params", "cache", "broken")

    def __init__(self, fn):
        self.jit = fn
        self.params = None
        self.cache: dict = {}
        self.broken = False

    def __getattr__(self, name):
        return getattr(self.jit, name)   # fn, arg_names, warmup, ...: the JIT function's

    def __getitem__(self, grid):
        return _FastCall(self, grid)

    def launch(self, grid, args, kwargs):
        if self.broken or callable(grid) or _raw_stream is None:
            return self.jit[grid](*args, **kwargs)
        tensor_t = torch.Tensor
        parts = []
        cargs = []
        for a in args:
            if isinstance(a, tensor_t):
                p = a.data_ptr()
                cargs.append(p)
                parts.append((a.dtype, not p & 15))
            else:
                cargs.append(a)
                # a float runtime argument is never specialized on its value; ints are (range, divisibility, == 1)
                parts.append(float if type(a) is float else a)
        try:
            key = (tuple(parts), tuple(kwargs.items()))
            hit = self.cache.get(key)
        except TypeError:       # an unhashable argument: Triton's path
            return self.jit[grid](*args, **kwargs)
        if hit is not None and not (_RT.launch_enter_hook.calls or _RT.launch_exit_hook.calls):
            c, pre, tail, dev = hit
            g = tuple(grid) + (1, 1)
            try:
                c(g[0], g[1], g[2], _raw_stream(dev), *pre, *cargs, *tail)
                return None
            except Exception:  # noqa: BLE001  (private API changed: Triton's path from now on)
                self.broken = True
        kernel = self.jit[grid](*args, **kwargs)
        if kernel is None or not hasattr(kernel, "packed_metadata") or not _plain_hooks():
            return kernel
        if self.params is None:
            self.params = list(self.jit.arg_names)
        names = self.params[len(args):]
        if all(n in kwargs for n in names):     # every trailing parameter given by keyword (a constexpr)
            dev = next((a.get_device() for a in args if isinstance(a, tensor_t)), None)
            if dev is None or dev < 0:
                return kernel
            if len(self.cache) >= 1024:     # integer arguments that change every call: stay bounded
                self.cache.clear()
            c, pre = launch_entry(kernel)
            self.cache[key] = (c, pre, tuple(kwargs[n] for n in names), dev)
        return kernel


class _FastCall:
    __slots__ = ("k", "grid")

    def __init__(self, k: FastKernel, grid):
        self.k, self.grid = k, grid

    def __call__(self, *args, **kwargs):
        return self.k.launch(self.grid, args, kwargs)


def fast_kernel(fn=None, **jit):
    """``@fast_kernel`` instead of ``@triton.jit`` on a kernel that is launched (``kernel[grid](...)``): the JIT
    function, relaunched through :class:`FastKernel`.  Never on a ``@triton.jit`` helper that kernels call.
    ``@fast_kernel(do_not_specialize=[...])`` passes ``triton.jit``'s options.  A use: a gather kernel whose store is
    contiguous along one dim when a stride there is 1.  Triton then gives each thread several adjacent outputs (its
    vector width), and their gathered inputs spread each warp's load request over that many more sectors (pooling's
    stride-2 windows, interpolate's taps: 8x, the L1 saturated).  With that stride never specialized, no dim is known
    contiguous and a lane holds one output.  The same function with specialization serves layouts whose gathers are
    contiguous (channels-last), which its divisibility hints vectorize."""
    import triton

    if fn is None:
        return lambda f: FastKernel(triton.jit(f, **jit))
    return FastKernel(triton.jit(fn))


_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})


def bind_kernel(kernel, grid, tail: tuple, **kw) -> BoundLaunch:
    """``kernel[grid](*tensors, *tail, **kw)`` with everything but the leading tensors fixed: a plan's contiguous
    fast path (keywords are the kernel's constexprs and Triton's launch options)."""
    const = {k: v for k, v in kw.items() if k not in _OPTIONS}
    opts = {k: v for k, v in kw.items() if k in _OPTIONS}
    return Launcher(kernel).bind(grid, tuple(tail), const, **opts)


def meta(shape) -> torch.Tensor:
    """A contiguous tensor of ``shape`` on the meta device: a plan's bind computes, once, the views, strides and
    index widths a contiguous call will have (same functions as the general path, no memory)."""
    return torch.empty(tuple(shape), device="meta")
