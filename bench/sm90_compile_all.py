"""Compile every Triton plan of the given ops (default: all) for sm_90 offline, on a machine with no GPU.

For each op with a Triton implementation, the first spec sample of each declared dtype is bound and launched
under ``baracuda.testing.sm90.offline_launches()`` (host code on CPU tensors; each launch becomes an sm_90
compile), so a GPU-only compile error (a frontend error hidden by the interpreter, an MLIR or ptxas failure)
shows without a GPU.  Run it without TRITON_INTERPRET:

    python bench/sm90_compile_all.py [REGEX]      # prints one line per failure and a count
"""
from __future__ import annotations

import re
import sys

import numpy as np
import torch

import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda._core.spec import all_specs
from baracuda.testing import sample_arrays, samples_for
from baracuda.testing.sm90 import offline_launches


def _tensor(a, t):
    """The sample's values where torch takes the array (host code may read them: lengths, indices), else zeros."""
    try:
        x = torch.from_numpy(np.ascontiguousarray(a))
    except TypeError:       # ml_dtypes arrays (bf16, fp8)
        return torch.zeros(t.shape, dtype=t.dtype.torch)
    return x if x.dtype == t.dtype.torch else torch.zeros(t.shape, dtype=t.dtype.torch)


def main(pattern: str = ".", per_dtype: int = 2) -> int:
    ok = bad = 0
    for spec in all_specs():
        if not re.search(pattern, spec.name):
            continue
        impl = next((i for i in implementations(spec.name) if i.backend == Backend.TRITON), None)
        if impl is None:
            continue
        # the spec's dtypes and those the Triton backend adds (sdpa's f8e4m3: samples the FP8 contract admits)
        extra = sorted((d for d in impl.dtypes or () if d not in spec.dtypes), key=str)
        for dt in (*spec.dtypes, *extra):
            if impl.dtypes is not None and dt not in impl.dtypes:
                continue
            for sample in samples_for(spec, dt)[:per_dtype]:
                arrays, attrs = sample_arrays(spec, sample, dt)
                try:
                    desc = bc.Descriptor.like(spec.name, *arrays, **attrs)
                except Exception:
                    continue
                if impl.supports is not None and impl.supports(desc) is not None:
                    continue
                xs = [_tensor(a, t) for a, t in zip(arrays, desc.inputs)]
                outs = [torch.empty(t.shape, dtype=t.dtype.torch) for t in desc.outputs]
                nws = impl.workspace(desc) if impl.workspace else 0
                ws = torch.empty(nws, dtype=torch.uint8) if nws else None
                try:
                    with offline_launches():
                        run = impl.bind(desc, bc.PlanPreference()) if impl.bind else impl.run
                        run(desc, xs, outs, ws)
                    ok += 1
                except Exception as e:
                    bad += 1
                    msg = str(e).strip().splitlines()
                    print(f"FAIL {spec.name} {dt} [{sample.name}]: {type(e).__name__}: {' | '.join(msg[-3:])[:300]}",
                          flush=True)
    print(f"{ok} compiled, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".", int(sys.argv[2]) if len(sys.argv) > 2 else 2))
