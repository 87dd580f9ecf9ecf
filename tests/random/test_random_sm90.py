"""Offline sm_90 compile of the random family's kernels (no GPU: Triton's CUDA backend and bundled ptxas), with the
plans' own host code and launch specialisation: every stream mode on the aligned (four words per Philox) and
per-element paths, f64 and half types, the widest randperm (8192 keys, 16 warps), multinomial and
top_k_top_p_sampling over 128256-category rows; each with the device-side state operand too.  No kernel spills;
the bf16 dropout reads 16 bytes a load."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64, "i64": torch.int64}
FILL = [("uniform", "f32", {}), ("uniform", "f64", {}), ("normal", "bf16", {}), ("normal", "f64", {}),
        ("exponential", "f32", {}), ("randint", "i64", {"high": 1000}), ("randint", "bf16", {"high": 7})]
X = [("dropout", "bf16", (4096, 4096), {}), ("dropout", "f64", (64, 64), {}), ("dropout2d", "f16", (8, 16, 32, 32), {}),
     ("alpha_dropout", "f32", (4096, 1024), {"offset": 3}), ("bernoulli", "f32", (1024, 1024), {}),
     ("bernoulli", "bf16", (1024, 1024), {"p": 0.3}),
     ("dropout_backward", "bf16", (4096, 4096), {"variant": "dropout"}),
     ("multinomial", "f32", (64, 128256), {"num_samples": 1}),
     ("multinomial", "bf16", (64, 128256), {"num_samples": 8, "replacement": True}),
     ("multinomial", "f64", (4, 1000), {"num_samples": 3})]
TOPK = [("f32", 128256), ("bf16", 128256), ("f64", 1000)]
cases = [(op, [], dict(a, shape=(1 << 20,), dtype=DT[dt], seed=2 ** 40 + 3)) for op, dt, a in FILL]
cases += [(op, [torch.empty(shape, dtype=DT[dt])], dict(a, seed=5)) for op, dt, shape, a in X]
cases += [("top_k_top_p_sampling", [torch.empty(64, v, dtype=DT[dt]), torch.empty(64, dtype=torch.int64),
                                     torch.empty(64), torch.empty(64)], {"seed": 3}) for dt, v in TOPK]
cases += [("randperm", [], {"n": 8192, "seed": 7}), ("randperm", [], {"n": 4096, "seed": 7}),
          ("randperm", [], {"n": 100, "seed": 1, "dtype": torch.int32})]
ST = torch.zeros(2, dtype=torch.int64)        # the device-side state operand (HAS_STATE kernels)
cases += [("uniform", [ST], {"shape": (1 << 20,)}), ("dropout", [torch.empty(4096, 4096, dtype=torch.bfloat16), ST],
                                                       {"p": 0.1}),
          ("dropout2d", [torch.empty(8, 16, 32, 32, dtype=torch.float16), ST], {"p": 0.1}),
          ("randperm", [ST], {"n": 4096}), ("multinomial", [torch.empty(64, 128256), ST], {"num_samples": 2}),
          ("top_k_top_p_sampling", [torch.empty(64, 128256), torch.empty(64, dtype=torch.int64), torch.empty(64),
                                    torch.empty(64), ST], {})]
for op, xs, attrs in cases:
    desc = bc.Descriptor.like(op, *xs, **attrs)
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
    with offline_launches() as launches:
        impl.bind(desc)(desc, xs, outs, None)
    assert len(launches) == 1, (op, launches)
    k = launches[0]
    regs, stack = k.resources()
    print(op, {n: v for n, v in k.constexprs.items()}, "warps", k.num_warps, "regs", regs, "stack", stack, flush=True)
    assert stack == 0, (op, attrs, "spills", stack)
    if op in ("dropout", "dropout_backward") and xs[0].dtype == torch.bfloat16:
        ptx = k.compiled.asm["ptx"]
        assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx, (op, "no 16-byte loads")
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_random_kernels_compile_for_sm90_without_spills():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
