"""One case of issue #18's slow rows, run twice (the first compiles), for Nsight Compute on the second run's kernels:
    ncu --launch-skip K --launch-count N -k regex:NAME python bench/family_ncu.py CASE
Cases: interp_bicubic_up / interp_bilinear_up ([8, 64, 128, 128] bf16 -> 256^2, forward), dw_fw / dw_bw (depthwise
3x3 [64, 144, 56, 56] bf16 channels-last, forward / data + weight gradient), dw_fw_torch (torch's own forward of the
same), maxpool_nchw (max_pool2d 3x3 s2 p1 [64, 64, 112, 112] bf16 NCHW)."""
import sys

import torch

import baracuda as bc


def main(which):
    torch.manual_seed(0)
    bf, cl = torch.bfloat16, torch.channels_last
    if which.startswith("interp"):
        x = torch.randn(8, 64, 128, 128, device="cuda", dtype=bf)
        mode = "bicubic" if "bicubic" in which else "bilinear"
        desc = bc.Descriptor.like("interpolate", x, size=(256, 256), mode=mode, align_corners=False)
        args = (x,)
    elif which.startswith("dw"):
        x = torch.randn(64, 144, 56, 56, device="cuda", dtype=bf).to(memory_format=cl)
        w = torch.randn(144, 1, 3, 3, device="cuda", dtype=bf)
        if which == "dw_fw_torch":
            for _ in range(2):
                torch.nn.functional.conv2d(x, w, None, 1, 1, 1, 144)
            torch.cuda.synchronize()
            return
        attrs = dict(stride=(1,), padding=(1,), groups=144, channels_last=True)
        if which == "dw_fw":
            desc, args = bc.Descriptor.like("convolution", x, w, **attrs), (x, w)
        else:
            g = torch.randn(64, 56, 56, 144, device="cuda", dtype=bf)
            desc, args = bc.Descriptor.like("convolution_backward", g, x, w, **attrs), (g, x, w)
    else:
        x = torch.randn(64, 64, 112, 112, device="cuda", dtype=bf)
        desc = bc.Descriptor.like("max_pool2d", x, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
        args = (x,)
    p = bc.Plan.select(desc, "cuda")
    ws = torch.empty(max(p.workspace_size, 1), dtype=torch.uint8, device="cuda")
    for _ in range(2):
        p.run(*args, workspace=ws)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
