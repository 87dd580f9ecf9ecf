"""Offline sm_90 compile of the LLM-sampling kernels beside the samplers (no GPU: Triton's CUDA backend and bundled
ptxas), with the plans' own host code: apply_penalties at its widest history (8192 int32 keys sorted in registers,
16 warps) and speculative_sampling over 128256-token rows (bf16, the draft-probs form, and the greedy form with
the device-side state).  No kernel spills."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

I = torch.int32
ids = torch.zeros(64, 4, dtype=torch.int64)
cases = [("apply_penalties", [torch.empty(64, 128256), torch.zeros(64, 8192, dtype=I), torch.zeros(64, dtype=I),
                              torch.zeros(64, dtype=I), torch.empty(64), torch.empty(()), torch.empty(64)], {}),
         ("speculative_sampling", [ids, torch.empty(64, 4, 128256, dtype=torch.bfloat16),
                                   torch.empty(64, 5, 128256, dtype=torch.bfloat16)], {"seed": 3}),
         ("speculative_sampling_greedy", [ids, torch.empty(64, 5, 128256), torch.zeros(2, dtype=torch.int64)], {})]
for op, xs, attrs in cases:
    desc = bc.Descriptor.like(op, *xs, **attrs)
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
    with offline_launches() as launches:
        impl.bind(desc)(desc, xs, outs, None)
    assert len(launches) == 1, (op, launches)
    regs, stack = launches[0].resources()
    print(op, "warps", launches[0].num_warps, "regs", regs, "stack", stack, flush=True)
    assert stack == 0, (op, "spills", stack)
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_sampling_kernels_compile_for_sm90_without_spills():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
