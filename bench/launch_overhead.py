"""Host cost of launching a Triton kernel: Triton's normal path vs baracuda's Launcher (GPU only).

    python bench/launch_overhead.py      # prints us/launch for each, and checks the results agree
"""
import time

import torch
import triton
import triton.language as tl

from baracuda.backends.triton._lib.launch import Launcher


@triton.jit
def _k(out_ptr, a_ptr, b_ptr, c_ptr, n, p0, p1, S1, S2, S3, s0, s1, s2, s3, t0, t1, t2, t3, u0, u1, u2, u3,
       NIN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a + p0 * b, mask=m)


@triton.jit
def _k8(out_ptr, a_ptr, b_ptr, c_ptr, n, p0, p1, p2, NIN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a + p0 * b, mask=m)


def main():
    n = 1024
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    args = (out, a, b, a, n, 1.0, 0.0, 1, 1, 1) + (0,) * 12
    grid = (triton.cdiv(n, 1024),)
    _k[grid](*args, NIN=2, BLOCK=1024)
    torch.cuda.synchronize()
    L = Launcher(_k)
    for _ in range(3):
        L(grid, args, {"NIN": 2, "BLOCK": 1024})
    torch.cuda.synchronize()
    assert torch.equal(out, a + b), "Launcher result differs"
    assert L.cache and not L.broken, "Launcher never took the direct path"
    res = {}
    L8 = Launcher(_k8)
    for _ in range(3):
        L8(grid, (out, a, b, a, n, 1.0, 0.0, 0.0), {"NIN": 2, "BLOCK": 1024})
    k8 = next(iter(L8.cache.values()))[0]
    args8 = (out, a, b, a, n, 1.0, 0.0, 0.0)
    shape = torch.Size([n])
    kernel = next(iter(L.cache.values()))[0]
    stream = torch.cuda.current_stream().cuda_stream
    tail = (2, 1024)

    def raw():  # the floor: the compiled kernel's own launcher, nothing else
        kernel.run(grid[0], 1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None, *args, *tail)

    bound = Launcher(_k).bind(grid, args[4:], {"NIN": 2, "BLOCK": 1024})
    for _ in range(3):
        bound(*args[:4])
    assert bound.hit, "BoundLaunch never took the direct path"
    import baracuda as bc
    from baracuda._core.options import PlanPreference
    plan = bc.Plan.select(bc.Descriptor.make("add", ((n,), "f32"), ((n,), "f32")), "cuda",
                          PlanPreference(prefer=("triton",)))
    torch.testing.assert_close(plan.run(a, b), a + b)
    for name, fn in [("triton kernel[grid]", lambda: _k[grid](*args, NIN=2, BLOCK=1024)),
                     ("baracuda Launcher", lambda: L(grid, args, {"NIN": 2, "BLOCK": 1024})),
                     ("baracuda BoundLaunch", lambda: bound(*args[:4])),
                     ("plan.run (add 1024)", lambda: plan.run(a, b)),
                     ("torch.add (alloc)", lambda: torch.add(a, b)),
                     ("compiled kernel.run", raw),
                     ("compiled kernel.run 8 args", lambda: k8.run(grid[0], 1, 1, stream, k8.function,
                                                                   k8.packed_metadata, None, None, None, *args8, 2, 1024)),
                     ("torch.empty", lambda: torch.empty(n, device="cuda")),
                     ("torch.empty(Size, dtype, device)", lambda: torch.empty(shape, dtype=torch.float32, device=a.device)),
                     ("torch.empty_like", lambda: torch.empty_like(a)),
                     ("x.new_empty", lambda: a.new_empty(shape)),
                     ("raw stream query", lambda: torch._C._cuda_getCurrentRawStream(0)),
                     ("data_ptr x4", lambda: [t.data_ptr() for t in (out, a, b, a)]),
                     ("torch.add", lambda: torch.add(a, b, out=out))]:
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5000):
            fn()
        torch.cuda.synchronize()
        res[name] = (time.perf_counter() - t0) / 5000 * 1e6
    for k, v in res.items():
        print(f"{k:34s} {v:6.1f} us/launch")


if __name__ == "__main__":
    main()
