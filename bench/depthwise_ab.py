"""Issue #18's depthwise row (3x3 / 7x7 MobileNet / ConvNeXt shapes, FW and BW >= 1.5x torch): per workload, the
forward and the backward (dgrad + wgrad in one call) of torch eager (cuDNN, channels-last inputs), torch.compile of
the same call, baracuda's Triton route forced (the tap-unrolled depthwise kernels) and its cuDNN route forced; each
result checked against torch eager (max |ours - torch| / max |torch|).  GPU only.

    python bench/depthwise_ab.py OUT.json            # the table (one line per workload x pass x route)
    python bench/depthwise_ab.py OUT.json sweep      # the Triton route under tile overrides (forced(bp=, bc=, warps=))
    python bench/depthwise_ab.py OUT.json default    # the table with torch's default cudnn.benchmark = False

Timing: bench/_graph_timer.gpu_ms, 24 calls in a CUDA graph, the median of 7 replays (launch host cost out: the plans'
host path is ~10-30 us, as long as some of these kernels); per-call events where a route does not capture.  (Runs C,
D and F of session 19 used the script's own graph timer, 10 calls replayed 25 times: the same method.)
"""
import json
import sys

import torch
import torch.nn.functional as F

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.backends.triton.conv.depthwise import forced

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import gpu_ms  # noqa: E402

# (N, C, H, kernel, stride, channels_last): src/baracuda/ops/conv.py's depthwise workloads
WORKLOADS = [(64, 144, 56, 3, 1, True), (64, 384, 14, 3, 1, True), (64, 96, 112, 3, 2, True), (64, 96, 56, 7, 1, True),
             (64, 384, 14, 7, 1, True), (32, 384, 28, 7, 1, True), (64, 144, 56, 3, 1, False)]
ROUTES = {"triton": Backend.TRITON, "cudnn": Backend.CUDNN}
# (passes, overrides): bp is the forward tile's positions but the weight gradient's per-row step, so tile sizes are
# swept on the forward / data gradient only
SWEEP = [(("fw", "bw"), dict()), (("fw",), dict(bp=256)), (("fw",), dict(bp=32)), (("fw", "bw"), dict(warps=8)),
         (("fw",), dict(bp=256, warps=8)), (("bw",), dict(warps=2)), (("fw", "bw"), dict(bc=32)),
         (("fw", "bw"), dict(bc=64))]
rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


def median_ms(fn):
    """ms per call of ``fn()`` (bench/_graph_timer.gpu_ms: CUDA-graph replays, per-call events where a route does
    not capture)."""
    return gpu_ms(fn)[0]


def rel_err(got, want):
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def problem(n, c, h, k, s, cl):
    """Inputs in torch's layout (channels-last when cl) and the baracuda attributes of one workload."""
    torch.manual_seed(0)
    fmt = torch.channels_last if cl else torch.contiguous_format
    x = torch.randn(n, c, h, h, device="cuda", dtype=torch.bfloat16).to(memory_format=fmt)
    w = torch.randn(c, 1, k, k, device="cuda", dtype=torch.bfloat16)
    conv = dict(stride=s, padding=k // 2, groups=c)
    y = F.conv2d(x, w, None, **conv)
    g = torch.randn_like(y)
    attrs = dict(stride=(s,), padding=(k // 2,), groups=c, channels_last=cl)
    return x, w, g, conv, attrs


def torch_backward(conv):
    def bw(g, x, w):
        return torch.ops.aten.convolution_backward(g, x, w, None, [conv["stride"]] * 2, [conv["padding"]] * 2, [1, 1],
                                                   False, [0, 0], conv["groups"], [True, True, False])[:2]
    return bw


def ours(op, args, attrs, backend, force):
    """(route, callable, outputs) of baracuda's plan for ``op`` on ``backend``, ``force`` the depthwise overrides."""
    desc = bc.Descriptor.like(op, *args, **attrs)
    with forced(**force):
        p = bc.Plan.select(desc, "cuda", pref=bc.PlanPreference(prefer=(backend,)))
    ws = torch.empty(max(p.workspace_size, 1), dtype=torch.uint8, device="cuda")

    def call():
        with forced(**force):
            return p.run(*args, workspace=ws)
    out = call()
    return p.sku.route, call, out if isinstance(out, tuple) else (out,)


def main(out, sweep, cudnn_benchmark=True):
    torch.backends.cudnn.benchmark = cudnn_benchmark   # (torch's own default is False: the "default" table)
    for n, c, h, k, s, cl in WORKLOADS:
        name = f"depthwise [{n},{c},{h},{h}] k{k}s{s} {'nhwc' if cl else 'nchw'} bf16"
        x, w, g, conv, attrs = problem(n, c, h, k, s, cl)
        fw_t = lambda: F.conv2d(x, w, None, **conv)   # noqa: E731
        bw_t = torch_backward(conv)
        y_ref, (dx_ref, dw_ref) = fw_t(), bw_t(g, x, w)
        # baracuda's channels-last output / grad is (N, *spatial, C) storage
        g_st = g.movedim(1, -1).contiguous() if cl else g
        y_cmp = y_ref.movedim(1, -1) if cl else y_ref
        base = dict(workload=name)
        if not sweep:
            row(**base, pass_="fw", route="torch", ms=median_ms(fw_t))
            row(**base, pass_="bw", route="torch", ms=median_ms(lambda: bw_t(g, x, w)))
            fw_c, bw_c = torch.compile(fw_t), torch.compile(bw_t)
            try:
                row(**base, pass_="fw", route="torch.compile", ms=median_ms(fw_c), err=rel_err(fw_c(), y_ref))
                row(**base, pass_="bw", route="torch.compile", ms=median_ms(lambda: bw_c(g, x, w)))
            except Exception as e:   # a compile failure is a result, not the end of the table
                row(**base, route="torch.compile", error=repr(e)[:300])
        variants = [(r, ("fw", "bw"), {}) for r in ROUTES] if not sweep else [("triton", ps, f) for ps, f in SWEEP]
        for route, passes, force in variants:
            for pass_, op, args in (("fw", "convolution", (x, w)), ("bw", "convolution_backward", (g_st, x, w))):
                if pass_ not in passes:
                    continue
                try:
                    sku, call, got = ours(op, args, attrs, ROUTES[route], force)
                    errs = [rel_err(got[0], y_cmp)] if pass_ == "fw" else [rel_err(got[0], dx_ref),
                                                                            rel_err(got[1], dw_ref)]
                    row(**base, pass_=pass_, route=route, force=force, sku=sku, ms=median_ms(call), err=max(errs))
                except Exception as e:
                    row(**base, pass_=pass_, route=route, force=force, error=repr(e)[:300])
    ratio = {}
    for r in rows:
        if "ms" in r:
            ratio.setdefault((r["workload"], r["pass_"]), {})[r["route"] + str(r.get("force") or "")] = r["ms"]
    for (wl, p), d in ratio.items():
        if "torch" in d and "triton" in d:
            print(f"{wl} {p}: torch / triton = {d['torch'] / d['triton']:.2f}x", flush=True)
    with open(out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "cudnn_benchmark": cudnn_benchmark, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    how = sys.argv[2] if len(sys.argv) > 2 else "table"
    main(sys.argv[1] if len(sys.argv) > 1 else "depthwise_ab.json", how == "sweep", how != "default")
