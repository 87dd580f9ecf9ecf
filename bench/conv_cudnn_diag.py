"""Diagnose the cuDNN convolution plans against torch on small problems (GPU): forward, dgrad and wgrad errors per
layout and per execute form.  python bench/conv_cudnn_diag.py"""
import torch
import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.backends.nvidia import cudnn_graph, cudnn_conv

torch.manual_seed(0)
dev = bc.Device("cuda", 0)
pref = bc.PlanPreference(prefer=(Backend.CUDNN,))
attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1, transposed=False, output_padding=(0, 0))


def rel(a, b):
    return ((a.float() - b.float()).abs().max() / (b.float().abs().max() + 1e-9)).item()


for ordered in (True, False):
    cudnn_graph._ORDERED[0] = ordered
    for cl in (False, True):
        x = torch.randn(2, 8, 6, 6, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(16, 8, 3, 3, device="cuda", dtype=torch.bfloat16) / 8
        if cl:
            x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        a = dict(attrs, channels_last=cl)
        fp = bc.Plan.select(bc.Descriptor.like("convolution", x, w, **a), dev, pref)
        y = fp.run(x, w)
        y = y.movedim(-1, 1) if cl else y
        ref = torch.nn.functional.conv2d(x.float(), w.float(), padding=1)
        g = torch.randn_like(ref).to(torch.bfloat16)
        gs = g.movedim(1, -1).contiguous() if cl else g
        rdx = torch.nn.grad.conv2d_input(x.shape, w.float(), g.float(), padding=1)
        rdw = torch.nn.grad.conv2d_weight(x.float(), w.shape, g.float(), padding=1)
        out = {"fw": rel(y, ref), "sku": str(fp.sku)[:60]}
        for mask in ((True, False), (False, True), (True, True)):
            bp = bc.Plan.select(bc.Descriptor.like("convolution_backward", gs, x, w, **a, output_mask=mask), dev, pref)
            r = bp.run(gs, x, w)
            r = list(r) if isinstance(r, tuple) else [r]
            if mask[0]:
                out[f"dx{mask}"] = rel(r.pop(0), rdx)
            if mask[1]:
                out[f"dw{mask}"] = rel(r.pop(0), rdw)
            out["bw_sku"] = str(bp.sku)[:60]
        print("ordered", ordered, "cl", cl, out, flush=True)
print(cudnn_conv.cache_info())
