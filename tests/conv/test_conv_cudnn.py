"""The cuDNN convolution backend (backends/nvidia/cudnn_conv.py).

CPU part: the refusals that need no GPU (dtypes, a transposed convolution's bias, zero-size operands), the route text,
the padding arithmetic (cuDNN's floor output formula reproduces the op's output size for every geometry of the op's
samples).  GPU part (skipped without CUDA or the frontend): forward, input gradient and weight gradient through cuDNN
against torch (its cuDNN in float32) for NCHW and channels-last, 1-d / 2-d / 3-d, strided, dilated, grouped and
depthwise, 'same' with an even kernel, transposed with output_padding; the plan is cuDNN's; the graph cache builds a
shape once."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends import cudnn_import_error  # noqa: E402
from baracuda.backends.nvidia import cudnn_conv as C  # noqa: E402
from baracuda.ops.conv import geometry_of  # noqa: E402


def _desc(x, w, dt="bf16", bias=False, **a):
    cout = w[1] * a.get("groups", 1) if a.get("transposed") else w[0]
    ins = [(x, dt), (w, dt)] + ([((cout,), dt)] if bias else [])
    return bc.Descriptor.make("convolution", *ins, **a)


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_refuses_full_precision_dtypes(dt):
    assert "f16 / bf16" in C.supports(_desc((2, 4, 8, 8), (4, 4, 3, 3), dt=dt))


def test_refuses_transposed_bias_and_zero_size():
    assert "transposed" in C.supports(_desc((2, 4, 8, 8), (4, 4, 3, 3), bias=True, transposed=True))
    assert "zero-size" in C.supports(_desc((0, 4, 8, 8), (4, 4, 3, 3)))


@pytest.mark.parametrize("x,w,a", [
    ((1, 2, 9), (3, 2, 3), dict(stride=(2,), padding=(1,))),
    ((1, 2, 10, 7), (3, 2, 2, 3), dict(padding="same", dilation=(3, 1))),
    ((1, 2, 11, 11), (4, 1, 3, 3), dict(stride=(3, 2), padding=(0, 1), groups=2)),
    ((1, 4, 5, 6), (4, 2, 3, 3), dict(stride=(2, 2), padding=(1, 1), transposed=True, output_padding=(1, 0))),
    ((1, 2, 4, 5, 6), (2, 2, 2, 3, 3), dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1))),
])
def test_cudnn_padding_reproduces_the_output_size(x, w, a):
    """cuDNN sizes the response as floor((image + pre + post - span) / stride) + 1: with the backend's pre / post it
    must be the op's response size in every spatial dim."""
    d = _desc(x, w, dt="f32", **a)
    g = geometry_of(d)
    nd2 = C._nd2(g)
    pre, post, stride, dil = C._spatial(g, nd2)
    image, resp, weight = C._dims(g, nd2)
    for i in range(nd2):
        span = dil[i] * (weight[2 + i] - 1) + 1
        assert (image[2 + i] + pre[i] + post[i] - span) // stride[i] + 1 == resp[2 + i]


def test_kept_workspace_reused_per_thread_and_stream_capped_and_dropped():
    """cuDNN workspaces up to _WS_KEEP are kept per (thread, device, stream): reused when large enough, grown when not,
    never kept past the cap (then one per call), per thread, and dropped on request (the next call allocates)."""
    import threading

    from baracuda.backends.nvidia import cudnn_graph as G

    like = torch.empty(1)
    G.drop_kept_workspaces()
    a = G._workspace(1000, 0, 7, like)
    assert a.numel() >= 1000 and G._workspace(500, 0, 7, like) is a
    assert G._workspace(1000, 0, 8, like) is not a               # another stream: its own buffer
    big = G._workspace(a.numel() + 1, 0, 7, like)                # grown
    assert big.numel() > a.numel() and G._workspace(10, 0, 7, like) is big
    past = G._workspace(G._WS_KEEP + 1, 0, 7, like)
    assert past.numel() == G._WS_KEEP + 1 and G._workspace(G._WS_KEEP + 1, 0, 7, like) is not past
    other = []
    t = threading.Thread(target=lambda: other.append(G._workspace(10, 0, 7, like)))
    t.start(), t.join()
    assert other[0] is not big                                   # another thread: its own buffer
    G.drop_kept_workspaces()
    assert G._workspace(10, 0, 7, like) is not big


gpu = pytest.mark.skipif(not torch.cuda.is_available() or cudnn_import_error() is not None,
                         reason="needs CUDA and the cuDNN frontend")

_CASES = [
    ("conv2d", (4, 16, 14, 14), (32, 16, 3, 3), dict(stride=1, padding=1), False),
    ("conv2d", (4, 16, 14, 14), (32, 16, 3, 3), dict(stride=2, padding=1), True),
    ("conv2d", (2, 32, 12, 12), (32, 1, 3, 3), dict(padding=1, groups=32), True),           # depthwise
    ("conv2d", (2, 16, 12, 12), (32, 4, 3, 3), dict(padding=2, dilation=2, groups=4), False),
    ("conv2d", (2, 16, 12, 11), (16, 16, 4, 2), dict(padding="same"), False),                 # even kernel
    ("conv1d", (2, 16, 33), (24, 16, 5), dict(stride=2, padding=2), False),
    ("conv3d", (2, 8, 6, 7, 8), (16, 8, 3, 3, 3), dict(padding=1), False),
    ("conv_transpose2d", (2, 16, 7, 7), (16, 8, 3, 3), dict(stride=2, padding=1, output_padding=1), False),
]


@gpu
@pytest.mark.parametrize("fn,xs,ws,kw,cl", _CASES)
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_cudnn_matches_torch(fn, xs, ws, kw, cl, dt):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(xs, generator=g).to("cuda", dt)
    w = (torch.randn(ws, generator=g) / (ws[1] * max(1, ws[2]) ** 0.5)).to("cuda", dt)
    b = None if fn.startswith("conv_transpose") else torch.randn(ws[0], generator=g).to("cuda", dt)
    if cl:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    x.requires_grad_(), w.requires_grad_()
    pref = bc.PlanPreference(prefer=(Backend.CUDNN,))
    with bc.preference(pref):
        y = getattr(bt.nn.functional, fn)(x, w, b, **kw)
        gy = torch.randn(y.shape, generator=g).to("cuda", dt)
        dx, dw = torch.autograd.grad(y, (x, w), gy)
        ins = [x.detach(), w.detach()] + ([b] if b is not None else [])
        desc = bc.Descriptor.like("convolution", *ins, **_conv_attrs(fn, kw, cl))
        assert bc.Plan.select(desc, bc.Device("cuda", 0), pref).sku.backend == Backend.CUDNN
    xr, wr = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    ref = getattr(torch.nn.functional, fn)(xr, wr, None if b is None else b.float(), **kw)
    rdx, rdw = torch.autograd.grad(ref, (xr, wr), gy.float())
    for got, want in ((y, ref), (dx, rdx), (dw, rdw)):
        scale = want.abs().max().item() + 1e-6
        # bf16 / f16 operands and outputs, f32 accumulation: one rounding of the output plus the inputs' rounding
        # through the sums (relative to the largest magnitude)
        tol = 2 ** -7 if dt == torch.bfloat16 else 2 ** -9
        assert (got.float() - want).abs().max().item() <= 4 * tol * scale, fn


def _conv_attrs(fn, kw, cl):
    tr = fn.startswith("conv_transpose")
    nd = int(fn[-2])
    a = {"stride": kw.get("stride", 1), "padding": kw.get("padding", 0), "dilation": kw.get("dilation", 1),
         "groups": kw.get("groups", 1), "transposed": tr, "output_padding": kw.get("output_padding", 0),
         "channels_last": cl and nd >= 2}
    return {k: ((v,) if isinstance(v, int) and k in ("stride", "padding", "dilation", "output_padding") else v)
            for k, v in a.items()}


@gpu
def test_graph_cache_builds_a_shape_once():
    x = torch.randn(2, 8, 10, 10, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 8, 3, 3, device="cuda", dtype=torch.bfloat16)
    with bc.preference(bc.PlanPreference(prefer=(Backend.CUDNN,))):
        bt.nn.functional.conv2d(x, w, padding=1)
        before = C.cache_info()["built"]
        for _ in range(3):
            bt.nn.functional.conv2d(x.clone(), w, padding=1)
        assert C.cache_info()["built"] == before


@gpu
@pytest.mark.parametrize("fn,xs,ws,kw,cl", _CASES[:3] + _CASES[-1:])
def test_raw_execute_is_the_public_execute(fn, xs, ws, kw, cl):
    """The backend's direct execute (the lowered graph's own, bound to the built plan: cudnn_graph._raw_execute)
    runs the same plan as the frontend's public execute: bit-identical forward and gradients; it is what runs."""
    from baracuda.backends.nvidia import cudnn_graph as G

    g = torch.Generator().manual_seed(1)
    x = torch.randn(xs, generator=g).to("cuda", torch.bfloat16)
    w = torch.randn(ws, generator=g).to("cuda", torch.bfloat16)
    if cl:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    x.requires_grad_(), w.requires_grad_()

    def run():
        y = getattr(bt.nn.functional, fn)(x, w, **kw)
        return (y, *torch.autograd.grad(y, (x, w), torch.ones_like(y)))

    with bc.preference(bc.PlanPreference(prefer=(Backend.CUDNN,))):
        raw = run()
        assert any(b.raw for b in C._CACHE.graphs.values())
        G.RAW[0] = False
        try:
            public = run()
        finally:
            G.RAW[0] = True
    for a, b in zip(raw, public):
        assert torch.equal(a, b), fn
