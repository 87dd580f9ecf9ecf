"""Offline sm_90 compile of the indexing kernels (no GPU: Triton's CUDA backend and bundled ptxas): every MODE of
the index map (gather, assign, atomic add, mark, count, the prod / amax CAS loops), the deterministic sequential
scatter and one_hot build without register spills and within 96 registers per thread (several programs per SM:
the gathers and atomics are latency-bound), and a gather of whole bf16 rows through an expanded index uses
16-byte loads and stores.  Runs in a subprocess: a compiler abort fails this test instead of killing pytest."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import re, torch, baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches


def compile_(op, xs, pref=bc.PlanPreference(), **attrs):
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    d = bc.Descriptor.like(op, *xs, **attrs)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in d.outputs]
    print("compiling", op, attrs, flush=True)
    with offline_launches() as launches:
        impl.bind(d, pref)(d, xs, outs, torch.empty(impl.workspace(d), dtype=torch.uint8))
    for k in launches:
        regs, stack = k.resources()
        print("   ", k.name, k.constexprs.get("MODE"), "regs", regs, "stack", stack, flush=True)
        assert stack == 0 and regs <= 96, (op, k.name, regs, stack)
    return launches


rows = compile_("gather", [torch.empty(64, 4096, dtype=torch.bfloat16),
                           torch.zeros(16, 1, dtype=torch.int64).expand(16, 4096)], dim=0)
ptx = rows[0].compiled.asm["ptx"]
assert rows[0].constexprs["ROW_INDEX"] and re.search(r"ld\.global(\.nc)?\.v4", ptx) and "st.global.v4" in ptx
compile_("gather", [torch.empty(64, 4096, dtype=torch.bfloat16), torch.zeros(16, 4096, dtype=torch.int32)], dim=0)
x, i, s = torch.empty(64, 64), torch.zeros(256, 64, dtype=torch.int64), torch.empty(256, 64)
compile_("scatter", [x, i, s], dim=0)
compile_("scatter_add", [x, i, s], dim=0)
compile_("put", [x, i.reshape(-1), s.reshape(-1)], accumulate=True)
for r in ("prod", "amax", "amin", "mean"):
    for dt in (torch.bfloat16, torch.float64, torch.int8):
        compile_("scatter_reduce", [x.to(dt), i, s.to(dt)], dim=0, reduce=r, include_self=False)
det = bc.PlanPreference(require_deterministic=True)
for r in ("sum", "prod", "mean"):
    compile_("scatter_reduce", [x.half(), i, s.half()], pref=det, dim=0, reduce=r)
compile_("scatter", [x, i, s], pref=det, dim=0)
compile_("one_hot", [torch.zeros(128, dtype=torch.int64)], num_classes=32000)
print("ok")
'''


def test_indexing_kernels_compile_for_sm90_without_spills():
    why = unavailable()
    if why:
        pytest.skip(why)
    r = run_isolated(_SCRIPT)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
