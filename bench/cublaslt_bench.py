"""cuBLASLt through nvmath-python's bindings (backends/nvidia/cublaslt.py) against the torch route (cuBLAS / cuBLASLt
through torch.mm / addmm / _addmm_activation, + a Triton pass where torch has no epilogue) and torch eager, for
linear / linear_act forward (H100, bf16): GPU ms (median of CUDA-event-timed calls) and host us per call (time to
queue 200 calls).   python bench/cublaslt_bench.py OUT.json"""
from __future__ import annotations

import json
import sys
import time

import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.bench.timing import median_ms
from mode_host_ops import queue_us


def host_us(fn, n=200):
    return queue_us(fn, False, n)


CASES = [  # (name, M, K, N, bias, activation, save_preact)
    ("linear 8192x4096->4096 +b", 8192, 4096, 4096, True, None, None),
    ("linear 8192x4096->14336", 8192, 4096, 14336, False, None, None),
    ("gelu_tanh 8192x4096->16384 +b +preact", 8192, 4096, 16384, True, "gelu_tanh", True),
    ("gelu_tanh 8192x4096->16384 +b", 8192, 4096, 16384, True, "gelu_tanh", False),
    ("relu 8192x4096->16384 +b", 8192, 4096, 16384, True, "relu", False),
    ("linear 64x4096->4096 +b (host)", 64, 4096, 4096, True, None, None),
]


def main(out):
    F = torch.nn.functional
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "command": "python bench/cublaslt_bench.py " + out, "rows": []}
    g = torch.Generator(device="cuda").manual_seed(0)
    for name, M, K, N, bias, act, save in CASES:
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) / K ** 0.5
        b = torch.randn(N, device="cuda", dtype=torch.bfloat16, generator=g) if bias else None
        xs = [x, w] + ([b] if bias else [])
        op = "linear" if act is None else "linear_act"
        attrs = {} if act is None else {"activation": act, "save_preact": save}
        desc = bc.Descriptor.like(op, *xs, **attrs)
        row = {"case": name}
        for tag, pref in (("torch_route", bc.PlanPreference()), ("cublaslt", bc.PlanPreference(
                prefer=(Backend.CUBLASLT,)))):
            plan = bc.Plan.select(desc, "cuda", pref)
            row[f"{tag}_sku"] = str(plan.sku)
            row[f"{tag}_ms"] = median_ms(lambda: plan.run(*xs), reps=20)
            row[f"{tag}_host_us"] = host_us(lambda: plan.run(*xs))
        if act is None:
            eager = lambda: F.linear(x, w, b)  # noqa: E731
        else:
            eager = lambda: (F.gelu(F.linear(x, w, b), approximate="tanh") if act == "gelu_tanh"  # noqa: E731
                             else F.relu(F.linear(x, w, b)))
        row["eager_ms"] = median_ms(eager, reps=20)
        row["eager_host_us"] = host_us(eager)
        ref = bc.Plan.select(desc, "cuda", bc.PlanPreference()).run(*xs)
        got = bc.Plan.select(desc, "cuda", bc.PlanPreference(prefer=(Backend.CUBLASLT,))).run(*xs)
        ref, got = (ref if isinstance(ref, tuple) else (ref,)), (got if isinstance(got, tuple) else (got,))
        row["max_rel_diff_vs_torch_route"] = max(((a.float() - c.float()).abs().max() / c.float().abs().max()).item()
                                                 for a, c in zip(got, ref))
        res["rows"].append(row)
        print(f"{name:40s} route {row['torch_route_ms']:7.3f} ms {row['torch_route_host_us']:6.1f} us | "
              f"lt {row['cublaslt_ms']:7.3f} ms {row['cublaslt_host_us']:6.1f} us | eager {row['eager_ms']:7.3f} ms "
              f"{row['eager_host_us']:6.1f} us | diff {row['max_rel_diff_vs_torch_route']:.1e}", flush=True)
    json.dump(res, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
