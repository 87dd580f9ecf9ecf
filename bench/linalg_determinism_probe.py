"""Which samples of the cuSOLVER solves give bitwise different results for the same inputs (GPU; issue #19's
generic determinism test): each sample of solve / solve_ex / cholesky_solve / lu_solve (f32 and f64) run 6 times
through the forced cuSOLVER plan; prints the samples whose runs differ, with the largest difference, and cuSOLVER's
deterministic-mode setting of the handle.   python bench/linalg_determinism_probe.py"""
import numpy as np
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.testing import forced_plan, sample_arrays, samples_for, test_device

try:
    from nvmath.bindings import cusolverDn

    from baracuda.backends.nvidia.cusolver_lib import handle
    print("cusolver deterministic mode:", cusolverDn.get_deterministic_mode(handle(0)))
except Exception as e:  # noqa: BLE001
    print("deterministic mode: n/a", type(e).__name__, e)
for op in ("solve", "solve_ex", "cholesky_solve", "lu_solve", "inv"):
    spec = bc.get_spec(op)
    for dt in (bc.DType.f32, bc.DType.f64):
        for s in samples_for(spec, dt):
            arrays, attrs = sample_arrays(spec, s, dt)
            desc = bc.Descriptor.like(op, *arrays, **attrs)
            plan = forced_plan(desc, test_device(), Backend.CUSOLVER)
            if isinstance(plan, str):
                continue
            xs = [torch.as_tensor(np.ascontiguousarray(a)).cuda() for a in arrays]
            outs = []
            for _ in range(6):
                o = plan.run(*xs)
                o = o if isinstance(o, tuple) else (o,)
                outs.append([t.detach().double().cpu() if not t.is_complex() else torch.view_as_real(t).double().cpu()
                             for t in o])
            bad = []
            for k in range(1, 6):
                for a, b in zip(outs[0], outs[k]):
                    if not torch.equal(torch.nan_to_num(a, 1e300), torch.nan_to_num(b, 1e300)):
                        bad.append((k, float((a - b).abs().nan_to_num(0).max())))
            print(op, dt, s.name, "shapes", [a.shape for a in arrays], "DIFFERS" if bad else "same", bad[:3], flush=True)
