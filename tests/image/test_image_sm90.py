"""Offline sm_90 compile of interpolate's and grid_sample's kernels (no GPU: Triton's CUDA backend and bundled ptxas)
for issue #18's benchmark shapes, through the plans' own host code: no kernel spills; the interpolate rows of <= 64
taps take the tile kernel (the per-element kernel keeps 3-d and wide windows)."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

B, F32 = torch.bfloat16, torch.float32
IM = [((8, 64, 128, 128), (256, 256), "bilinear", False), ((8, 64, 128, 128), (64, 64), "bilinear", False),
      ((8, 64, 128, 128), (256, 256), "bicubic", False), ((8, 64, 128, 128), (64, 64), "bicubic", False),
      ((64, 3, 224, 224), (448, 448), "bicubic", False), ((64, 3, 224, 224), (112, 112), "bilinear", True),
      ((8, 64, 128, 128), (256, 256), "nearest", False)]
cases = []
for shape, size, mode, aa in IM:
    a = dict(size=size, mode=mode, align_corners=False, scales=None, antialias=aa)
    cases.append(("interpolate", [torch.empty(shape, dtype=B)], a, False, "_tile2_kernel"))
    cases.append(("interpolate_backward", [torch.empty(shape[:2] + size, dtype=B)], dict(a, input_size=shape), False,
                  "_tile2_kernel"))
a = dict(size=(256, 256), mode="bilinear", align_corners=False, scales=None, antialias=False)
cases.append(("interpolate", [torch.empty(8, 64, 128, 128, dtype=B).to(memory_format=torch.channels_last)], a, True,
              "_tile2_kernel"))
cases.append(("interpolate", [torch.empty(2, 8, 16, 16, 16, dtype=B)], dict(a, size=(32, 32, 32), mode="trilinear"),
              False, "_sep_kernel"))
for mode, pad, dt in [("bilinear", "zeros", B), ("bicubic", "zeros", B), ("bilinear", "reflection", F32)]:
    x, g = torch.empty(8, 64, 128, 128, dtype=dt), torch.empty(8, 128, 128, 2, dtype=dt)
    a = dict(mode=mode, padding_mode=pad, align_corners=False)
    cases.append(("grid_sample", [x, g], a, False, "_gs_kernel"))
    cases.append(("grid_sample_backward", [torch.empty(8, 64, 128, 128, dtype=dt), x, g], a, False, "_gs_kernel"))
for op, xs, attrs, cl, want in cases:
    desc = bc.Descriptor.like(op, *xs, **attrs)
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    run = impl.bind(desc) if impl.bind else impl.run
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
    if cl:
        outs = [o.to(memory_format=torch.channels_last) for o in outs]
    ws = torch.empty(max(1, impl.workspace(desc) if impl.workspace else 0), dtype=torch.uint8)
    with offline_launches() as launches:
        run(desc, xs, outs, ws)
    assert [k.name for k in launches] == [want], (op, attrs, [k.name for k in launches])
    k = launches[0]
    regs, stack = k.resources()
    print(op, attrs.get("mode"), {n: v for n, v in k.constexprs.items() if n.isupper()}, "regs", regs, "stack", stack,
          flush=True)
    assert stack == 0, (op, attrs, "spills", stack)
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_image_kernels_compile_for_sm90_without_spills():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
