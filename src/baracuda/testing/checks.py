"""Helpers shared by the per-family tests (tests/<family>/) that compare with torch: one backend's plan on the
test device, results back on the CPU, comparisons, gradients against torch.autograd, forcing the two-stage
reduction path, and the offline sm_90 compile scripts (run in a fresh interpreter, see sm90.py)."""
from __future__ import annotations

import numpy as np

from .._core.sku import Backend
from .._core.spec import Descriptor
from . import forced_plan, test_device

__all__ = ["DEVICE", "TDEV", "on_device", "plan_or_skip", "loss_pair", "run_on", "assert_same", "grad_pair", "class_targets",
           "force_reduction_split", "needs_sm90", "run_sm90_script", "compile_sm90"]

DEVICE = test_device()
TDEV = "cuda" if DEVICE.type == "cuda" else "cpu"


def on_device(x):
    """x on the test device (unchanged when the tests run on the CPU)."""
    return x.to("cuda") if DEVICE.type == "cuda" else x


def plan_or_skip(op: str, *xs, backend: Backend = Backend.TRITON, **attrs):
    """The plan of exactly ``backend`` for ``op`` on xs; the test is skipped when that backend refuses."""
    import pytest

    p = forced_plan(Descriptor.like(op, *xs, **attrs), DEVICE, backend)
    if isinstance(p, str):
        pytest.skip(p)
    return p


def loss_pair(op: str, ins, gout, backend: Backend = Backend.TRITON, plans=None, **attrs):
    """A loss op and its fused backward through the Plan API on the device operands ``ins``: (loss, dx) for the
    upstream ``gout`` (a CPU tensor, cast to the input's dtype and the loss's shape).  cross_entropy returns
    (loss, lse) and its backward takes that lse after ``grad``; ``plans``: a list the two plans are appended to
    (route checks)."""
    out = plan_or_skip(op, *ins, backend=backend, **attrs)
    res = out.run(*ins)
    loss, lead = (res[0], [res[1]]) if op == "cross_entropy" else (res, [])
    g = on_device(gout.to(ins[0].dtype).reshape(loss.shape))
    bw = plan_or_skip(f"{op}_backward", g, *lead, *ins, backend=backend, **attrs)
    if plans is not None:
        plans += [out, bw]
    return loss, bw.run(g, *lead, *ins)


def run_on(op: str, *xs, backend: Backend = Backend.TRITON, **attrs):
    """op run by exactly ``backend`` (which must accept it) on xs moved to the test device; the result on the CPU
    (a tuple for multi-output ops)."""
    import torch

    plan = forced_plan(Descriptor.like(op, *xs, **attrs), DEVICE, backend)
    assert not isinstance(plan, str), plan
    out = plan.run(*[x.to(TDEV) for x in xs])

    def cpu(o):
        return o.cpu() if isinstance(o, torch.Tensor) else torch.as_tensor(np.asarray(o))

    return tuple(cpu(o) for o in out) if isinstance(out, tuple) else cpu(out)


def assert_same(got, want, rtol: float = 0.0, atol: float = 0.0):
    """got (cast to want's dtype) equals want within rtol / atol; NaN exactly where want is NaN."""
    import torch

    torch.testing.assert_close(got.to(want.dtype), want, rtol=rtol, atol=atol, equal_nan=True)


def grad_pair(fn_ours, fn_torch, *xs, equal_nan: bool = False):
    """fn_ours and fn_torch (one output or a tuple) agree on xs, and so do the gradients w.r.t. xs for random
    output gradients (rtol = atol = 1e-9: float64 inputs).  Where torch leaves no gradient (identically 0) ours
    must be 0.  equal_nan: NaN outputs compare equal."""
    import torch

    a = [x.clone().requires_grad_() for x in xs]
    b = [x.clone().requires_grad_() for x in xs]
    ya, yb = fn_ours(*a), fn_torch(*b)
    ya = ya if isinstance(ya, tuple) else (ya,)
    yb = yb if isinstance(yb, tuple) else (yb,)
    for p, q in zip(ya, yb):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-9, equal_nan=equal_nan)
    gs = [torch.randn_like(q) for q in yb]
    sum((p * g).sum() for p, g in zip(ya, gs)).backward()
    sum((q * g).sum() for q, g in zip(yb, gs)).backward()
    for p, q in zip(a, b):
        want = q.grad if q.grad is not None else torch.zeros_like(q)
        torch.testing.assert_close(p.grad, want, rtol=1e-9, atol=1e-9)


def class_targets(g, shape, c: int, ignore: int = -100, frac: float = 0.25):
    """Class indices in [0, c) of the given shape (an int: 1-D), about ``frac`` of them set to ``ignore``."""
    import torch

    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    t = torch.randint(0, c, shape, generator=g)
    t[torch.rand(shape, generator=g) < frac] = ignore
    return t


def force_reduction_split(monkeypatch):
    """Make the Triton reductions take the two-stage (split) path on small problems: splits of >= 8 elements,
    up to 16 programs."""
    from ..backends.triton.reduction import reduce as tri

    monkeypatch.setattr(tri, "_MIN_CHUNK", 8)
    monkeypatch.setattr(tri, "_SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(tri, "_TARGET_PROGRAMS", 16)


def _sm90_missing() -> str | None:
    from .sm90 import unavailable

    return unavailable()


def needs_sm90(fn):
    """Skip the test where the offline sm_90 toolchain (Triton's CUDA backend, bundled ptxas / cuobjdump) is
    missing."""
    import pytest

    why = _sm90_missing()
    return pytest.mark.skipif(why is not None, reason=why or "")(fn)


def run_sm90_script(code: str, timeout: float = 600):
    """Run an offline-compile script in a fresh interpreter without TRITON_INTERPRET; it must exit 0 with "ok" as
    its last line of output."""
    from .sm90 import failure_report, run_isolated

    r = run_isolated(code, timeout)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), failure_report(r)


def compile_sm90(kernel, sig: dict, constexprs: dict, num_warps: int, div=()) -> dict:
    """Compile ``kernel`` for sm_90 offline (no GPU): ``sig`` types the runtime arguments, ``constexprs`` fixes the
    constant ones, ``div`` names the arguments that get the divisibility-by-16 hint (what the launcher infers for
    aligned pointers and strides / lengths that are multiples of 16).  Returns the compiled kernel, its registers
    and local-memory bytes per thread (spills), the cuobjdump resource line and the SASS."""
    import os
    import re
    import subprocess
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    full = dict(sig, **{n: "constexpr" for n in constexprs})
    attrs = {(kernel.arg_names.index(n),): [["tt.divisibility", 16]] for n in div}
    c = triton.compile(ASTSource(fn=getattr(kernel, "jit", kernel), signature=full, constexprs=constexprs, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps))
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    path = os.path.join(tempfile.mkdtemp(), "k.cubin")
    with open(path, "wb") as f:
        f.write(c.asm["cubin"])
    res = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True).stdout
    sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True).stdout
    regs, local = (int(re.search(key + r":(\d+)", res).group(1)) for key in ("REG", "LOCAL"))
    return {"compiled": c, "regs": regs, "local": local, "res": res, "sass": sass}
