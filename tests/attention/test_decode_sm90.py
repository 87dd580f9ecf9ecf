"""Offline sm_90 compile of the decoding kernels at the issue's shapes (no GPU: Triton's CUDA backend and bundled
ptxas): the plans' own host code runs on CPU tensors with launches turned into sm_90 compiles, so each kernel is
built with the launcher's real specialisation -- the paged decode row (bf16, D 128, GQA 32/8, pages of 16, split
into partials + the merge), an FP8 cache, prefill tiles, D 256 / 64, f16 / f32 contiguous decoding with lengths and
every attribute, the appends (in place, FP8 quantizing) and attention_merge.  No kernel may spill (stack 0);
the K/V tiles must be read with 16-byte loads.  Runs in a subprocess: a compiler abort fails this test instead of
killing pytest."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.backends.triton.attention.decode import forced
from baracuda.testing.sm90 import offline_launches

BF, F8, I32 = torch.bfloat16, torch.float8_e4m3fn, torch.int32


def paged(T, B, pages, ps, hq, hkv, d, dt=BF, cdt=BF):
    return (torch.empty(T, hq, d, dtype=dt), torch.zeros(B + 1, dtype=I32), torch.empty(pages, ps, hkv, d, dtype=cdt),
            torch.empty(pages, ps, hkv, d, dtype=cdt), torch.zeros(B + 1, dtype=I32), torch.zeros(pages, dtype=I32),
            torch.zeros(B, dtype=I32))


def decode(B, S, hq, hkv, d, dt, lens=True):
    xs = (torch.empty(B, 1, hq, d, dtype=dt), torch.empty(B, S, hkv, d, dtype=dt), torch.empty(B, S, hkv, d, dtype=dt))
    return xs + (torch.zeros(B, dtype=I32),) if lens else xs


CASES = [("paged decode row", "paged_attention", paged(64, 64, 64 * 16, 16, 32, 8, 128), {}, None),
         ("paged decode fp8", "paged_attention", paged(64, 64, 64 * 16, 16, 32, 8, 128, cdt=F8),
          dict(k_scale=0.5, v_scale=2.0), None),
         ("paged prefill", "paged_attention", paged(4096, 8, 2048, 16, 32, 8, 128), dict(softcap=30.0), None),
         ("paged d256 mqa", "paged_attention", paged(32, 32, 512, 16, 16, 1, 256), {}, None),
         ("decode f16 d64 window", "sdpa_decode", decode(16, 4096, 32, 32, 64, torch.float16),
          dict(has_kv_lens=True, window_left=1024, softcap=50.0), 4),
         ("decode f32", "sdpa_decode", decode(8, 1024, 8, 2, 128, torch.float32, lens=False), {}, 1),
         ("merge bf16", "attention_merge", (torch.empty(2, 512, 32, 128, dtype=BF), torch.empty(2, 512, 32)), {}, None),
         ("kv_append bf16", "kv_append", (torch.empty(64, 2048, 8, 128, dtype=BF), torch.empty(64, 1, 8, 128, dtype=BF),
                                          torch.zeros(64, dtype=I32)), {}, None),
         ("kv_append fp8", "kv_append", (torch.empty(64, 2048, 8, 128, dtype=F8), torch.empty(64, 1, 8, 128, dtype=BF),
                                         torch.zeros(64, dtype=I32)), dict(scale=0.5), None),
         ("paged_kv_append", "paged_kv_append", (torch.empty(1024, 16, 8, 128, dtype=BF), torch.empty(64, 8, 128, dtype=BF),
                                                 torch.zeros(64, dtype=I32), torch.zeros(64, dtype=I32),
                                                 torch.zeros(65, dtype=I32), torch.zeros(1024, dtype=I32)), {}, None)]
for label, op, xs, attrs, splits in CASES:
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    ctx = forced(splits=splits) if splits else forced()
    with ctx:
        desc = bc.Descriptor.like(op, *xs, **attrs)
        outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
        ws = torch.zeros(max(impl.workspace_of(desc), 16), dtype=torch.uint8)
        print("compiling", label, flush=True)
        with offline_launches() as launches:
            impl.bind(desc, bc.PlanPreference(check_values="off"))(desc, xs, outs if op != "kv_append" and
                                                                   op != "paged_kv_append" else [xs[0]], ws)
    for k in launches:
        regs, stack = k.resources()
        print("   ", k.name, "warps", k.num_warps, "regs", regs, "stack", stack, flush=True)
        assert stack == 0, (label, k.name, "spills", stack)
        if k.name == "_attn_kernel" and xs[2].dtype == BF:
            ptx = k.compiled.asm["ptx"]
            assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx or "cp.async" in ptx, (label, "no 16-byte loads")
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_decode_kernels_compile_for_sm90_without_spills():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
