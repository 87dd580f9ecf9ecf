"""Issue #18's pooling rows in both layouts: max / avg pool 3x3 s2 p1 on the ResNet stem [64, 64, 112, 112], adaptive
average 28 -> 7 and the global head 7 -> 1, bf16, NCHW and channels-last; forward and backward, each against torch
eager and torch.compile of the same aten call, all in this process; CUDA-graph replays (bench/_graph_timer.timed).
GB/s by the bench's bytes model: forward x + y (+ the int64 indices of max), backward grad (+ indices) + dx; the
result checked against torch's.      python bench/pool_ab.py OUT.json"""
import json
import sys

import torch

import baracuda as bc

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import timed  # noqa: E402

A = torch.ops.aten
rows = []
DEV = "cuda" if torch.cuda.is_available() else "cpu"
if DEV == "cpu":        # (a smoke run of the script itself: tiny shapes, the interpreter, no timing)
    torch.compile = lambda f, **k: f

    def timed(fn):
        fn(0)
        return 1.0


def row(**r):
    rows.append(r)
    print(f"{r['case']:38s} {r['dir']} {r['layout']} eager {r['eager']:7.1f} compile {r['compile']:7.1f} ours "
          f"{r['ours']:7.1f} us {r['GBps']:6.0f} GB/s x{r['x_eager']:.2f} / x{r['x_compile']:.2f} err {r['relerr']:.1e} "
          f"{r['route']}", flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1] + "l", "a") as f:     # OUT.jsonl, row by row (a run cut short keeps its rows)
            f.write(json.dumps(r) + "\n")


def plan_fn(op, xs, **attrs):
    p = bc.Plan.select(bc.Descriptor.like(op, *xs, **attrs), DEV)
    fmt = torch.channels_last if xs[-1].dim() == 4 and not xs[-1].is_contiguous() else torch.contiguous_format
    outs = [torch.empty(o.shape, dtype=o.dtype.torch, device=DEV).to(memory_format=fmt)
            for o in p.desc.outputs]
    ws = torch.empty(max(p.workspace_size, 1), dtype=torch.uint8, device=DEV)
    return p.sku.route, (lambda i: p.run(*xs, out=outs, workspace=ws)), outs


def case(name, x, fw_torch, bw_torch, op, attrs, bw_op, bw_attrs, indices):
    y_t = fw_torch(x)
    y_ref = y_t[0] if isinstance(y_t, tuple) else y_t
    g = torch.randn_like(y_ref)
    xs_bw = [g, x] + ([y_t[1]] if indices else [])
    nb = x.element_size()
    fw_bytes = (x.numel() + y_ref.numel()) * nb + (8 * y_ref.numel() if indices else 0)
    bw_bytes = (g.numel() + x.numel()) * nb + (8 * g.numel() if indices else 0)
    # (dynamic=False: the cases share the lambdas' code objects, and a dynamic recompile of adaptive pooling fails)
    comp_fw, comp_bw = torch.compile(fw_torch, dynamic=False), torch.compile(bw_torch, dynamic=False)
    for dirn, nbytes, ours, peers, want in (
            ("fw", fw_bytes, plan_fn(op, [x], **attrs), (("eager", fw_torch), ("compile", comp_fw)), y_ref),
            ("bw", bw_bytes, plan_fn(bw_op, xs_bw, **bw_attrs),
             (("eager", lambda x_: bw_torch(*xs_bw)), ("compile", lambda x_: comp_bw(*xs_bw))), bw_torch(*xs_bw))):
        r = {"case": name, "dir": dirn, "layout": "nhwc" if not x.is_contiguous() else "nchw"}
        for peer, fn in peers:
            r[peer] = timed(lambda i: fn(x))
        route, fn, outs = ours
        r["ours"] = timed(fn)
        err = (outs[0].float() - want.float()).abs().max().item() / max(want.float().abs().max().item(), 1e-30)
        r.update(route=route, relerr=err, GBps=nbytes / r["ours"] / 1e3, x_eager=r["eager"] / r["ours"],
                 x_compile=r["compile"] / r["ours"])
        row(**r)


def main():
    torch.manual_seed(0)
    small = DEV == "cpu"
    for fmt in (torch.contiguous_format, torch.channels_last):
        stem = torch.randn(*((2, 8, 16, 16) if small else (64, 64, 112, 112)), device=DEV, dtype=torch.bfloat16).to(memory_format=fmt)
        w = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
        case("max_pool2d-stem-k3s2p1", stem, lambda x: A.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1]),
             lambda g, x, i: A.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, i),
             "max_pool2d", w, "max_pool_backward", dict(w, nd=2, dilation=(1, 1)), True)
        case("avg_pool2d-stem-k3s2p1", stem, lambda x: A.avg_pool2d(x, [3, 3], [2, 2], [1, 1]),
             lambda g, x: A.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], False, True, None),
             "avg_pool2d", w, "avg_pool_backward", dict(w, nd=2), False)
        for shape, o in (((2, 8, 28, 28), 7), ((2, 16, 7, 7), 1)) if small else (((64, 512, 28, 28), 7),
                                                                                ((64, 2048, 7, 7), 1)):
            x = torch.randn(*shape, device=DEV, dtype=torch.bfloat16).to(memory_format=fmt)
            case(f"adaptive_avg_pool2d-{list(shape)}to{o}", x, lambda x: A._adaptive_avg_pool2d(x, [o, o]),
                 lambda g, x: A._adaptive_avg_pool2d_backward(g, x), "adaptive_avg_pool2d",
                 dict(output_size=(o, o)), "avg_pool_backward", dict(nd=2, window="adaptive"), False)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if DEV == "cuda" else "cpu", "torch": torch.__version__, "rows": rows}, f, indent=1)


main()
