"""The Triton families' shared kernel library.  Families import from here and from their own package only.

launch    low-overhead relaunch of a compiled kernel (Launcher, BoundLaunch, shared)
strided   collapsed (shape, strides) views, flat index -> strided offset, flat program blocks, broadcast strides
geometry  the (outer, R, inner) view of a tensor along one dim (outer_r_inner, view3, lanes_view)
config    SM count and the test overrides behind each family's ``forced(...)``
interp    the interpreter shim: ``loop`` (every runtime-trip-count loop) and ``f64_arg``
math      libdevice on the GPU, float64 NumPy under the interpreter; sigmoid/softplus/digamma/exp_acc/log_acc
scalars   f64 Python floats as (f32 hi, f32 lo) kernel arguments
dtypes    accumulator dtypes of the statistical kernels
coop      cooperative single-read kernels: publish/wait between co-resident programs, occupancy
binding   bind wrappers (contiguous outputs, run from bind)
register  register_triton: how a family registers an implementation (Triton defaults)
"""
