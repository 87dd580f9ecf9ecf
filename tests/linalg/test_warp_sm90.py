"""Offline sm_90 compile of the one-warp linalg kernels (linalg/warp.py, Gluon) through their plans' own host code:
cholesky (both triangles), inv (LU + lu_solve on the identity), lu_factor, det / slogdet / logdet, solve (left: the
fused kernel up to 8 right-hand sides, LU + lu_solve beyond; right: LU + the adjoint lu_solve), lu_solve (both
adjoints), f32 at n = 32 and at n = 7 (identity padding, n not specialized).  Each plan launches the warp kernels it
names, none spills or uses shared memory (a lane's registers are its row; cholesky transposes its tile through it
once), and f64 / n = 33 keep small.py's kernels."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

def launches_of(op, xs, **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
    with offline_launches() as ls:
        impl.bind(desc, bc.PlanPreference())(desc, xs, outs, None)
    return impl.route(desc, None), ls

bad = []
a, piv = torch.empty(64, 32, 32), torch.empty(64, 32, dtype=torch.int32)
b1, b8, b40 = (torch.empty(64, 32, k) for k in (1, 8, 40))
split = ["_lu_warp_kernel", "_lu_solve_warp_kernel"]
cases = [("lu_factor_ex", [a], {}, ["_lu_warp_kernel"], "triton:lu_warp"),
         ("cholesky_ex", [a], dict(upper=False), ["_chol_warp_kernel"], "triton:chol_warp"),
         ("cholesky", [a], dict(upper=True), ["_chol_warp_kernel"], "triton:chol_warp"),
         ("inv_ex", [a], {}, split, "triton:lu_warp+lu_solve_warp(identity)"),
         ("det", [a], {}, ["_lu_warp_kernel"], "triton:lu_warp(det)"),
         ("slogdet", [a], {}, ["_lu_warp_kernel"], "triton:lu_warp(det)"),
         ("logdet", [a], {}, ["_lu_warp_kernel"], "triton:lu_warp(det)"),
         ("solve", [a, b1], dict(left=True), ["_solve_warp_kernel"], "triton:solve_warp(solve)"),
         ("solve", [a, b8], dict(left=True), ["_solve_warp_kernel"], "triton:solve_warp(solve)"),
         ("solve", [a, b40], dict(left=True), split, "triton:solve_warp(solve)"),
         ("solve", [a, b1.mT.contiguous()], dict(left=False), split, "triton:solve_warp(solve)"),
         ("lu_solve", [a, piv, b40], dict(left=True, adjoint=False), ["_lu_solve_warp_kernel"],
          "triton:lu_solve_warp"),
         ("lu_solve", [a, piv, b1], dict(left=True, adjoint=True), ["_lu_solve_warp_kernel"],
          "triton:lu_solve_warp")]
# n = 7: the identity padding and masks, with n not specialized
a7, b7 = torch.empty(64, 7, 7), torch.empty(64, 7, 3)
cases += [("lu_factor_ex", [a7], {}, ["_lu_warp_kernel"], "triton:lu_warp"),
          ("cholesky_ex", [a7], dict(upper=False), ["_chol_warp_kernel"], "triton:chol_warp"),
          ("solve", [a7, b7], dict(left=True), ["_solve_warp_kernel"], "triton:solve_warp(solve)")]
for op, xs, attrs, names, route in cases:
    got, ls = launches_of(op, xs, **attrs)
    assert got == route, (op, got)
    assert [l.name for l in ls] == names, (op, attrs, [l.name for l in ls])
    for l in ls:
        regs, stack = l.resources()
        smem = l.compiled.metadata.shared
        print(op, xs[0].shape[-1], xs[-1].shape[-1], l.name, l.constexprs, regs, stack, smem, flush=True)
        # (shared memory: only cholesky's one transpose of the tile, 32 x 32 x 4 bytes)
        if stack or smem > (4352 if l.name == "_chol_warp_kernel" else 0) or regs > 168:
            bad.append((op, l.name, regs, stack, smem))
for xs, why in (([torch.empty(8, 32, 32, dtype=torch.float64)], "f64"), ([torch.empty(8, 33, 33)], "n = 33")):
    route, ls = launches_of("lu_factor_ex", xs)
    assert route == "triton:lu_small" and [l.name for l in ls] == ["_lu_kernel"], (why, route, ls)
assert not bad, bad
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_warp_kernels_compile_for_sm90_without_spills():
    r = run_isolated(_SCRIPT)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
