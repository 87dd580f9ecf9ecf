"""Image ops beyond the generic suite: interpolate's size / scale_factor / recompute_scale_factor rules and every
mode x align_corners against torch through the drop-in, channels-last in and out, gradients against torch
autograd, the drop-ins' errors, zero-size batches, nn.Upsample under bt.mode(), grid_sample's atomic backward
under require_deterministic."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import baracuda as bc
import baracuda.torch as bt
import baracuda.torch.nn.functional as F
from baracuda._core.device import triton_interpreting
from baracuda._core.sku import Backend
from baracuda.ops.image import interp_matrix
from baracuda.testing import assert_close

TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))
needs_interp = pytest.mark.skipif(not triton_interpreting(), reason="Triton on the CPU runs under TRITON_INTERPRET=1")


def _gen():
    return torch.Generator().manual_seed(0)


# -- interpolate's arguments against torch (the f64 reference: cheap, so every combination) ---------------------------
_MODES = [("nearest", 3), ("nearest", 4), ("nearest", 5), ("nearest-exact", 4), ("linear", 3), ("bilinear", 4),
          ("bicubic", 4), ("trilinear", 5), ("area", 3), ("area", 4)]


@pytest.mark.parametrize("mode,rank", _MODES)
def test_every_mode_and_align_corners_and_scale_rule_match_torch(mode, rank):
    g = _gen()
    x = torch.randn((2, 3) + (5, 7, 6)[:rank - 2], generator=g, dtype=torch.float64)
    aligns = (None,) if mode in ("nearest", "nearest-exact", "area") else (False, True)
    calls = [dict(size=(4, 9, 3)[:rank - 2]), dict(size=8), dict(scale_factor=1.7), dict(scale_factor=0.6),
             dict(scale_factor=(2.0, 0.5, 1.3)[:rank - 2]), dict(scale_factor=1.7, recompute_scale_factor=True),
             dict(scale_factor=0.45, recompute_scale_factor=False)]
    with bt.preference(REF):
        for ac in aligns:
            for kw in calls:
                want = TF.interpolate(x, mode=mode, align_corners=ac, **kw)
                got = F.interpolate(x, mode=mode, align_corners=ac, **kw)
                assert got.shape == want.shape, (kw, ac)
                assert_close(got, want.numpy(), 1e-12, 1e-12, f"{mode} ac={ac} {kw}")


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_matches_torch_down_and_up(mode):
    x = torch.randn(1, 2, 13, 11, generator=_gen(), dtype=torch.float64)
    with bt.preference(REF):
        for kw in (dict(size=(4, 3)), dict(scale_factor=0.3), dict(size=(20, 7)), dict(size=(5, 16))):
            for ac in (False, True):
                want = TF.interpolate(x, mode=mode, antialias=True, align_corners=ac, **kw)
                assert_close(F.interpolate(x, mode=mode, antialias=True, align_corners=ac, **kw), want.numpy(),
                             1e-12, 1e-12, f"{mode} aa {kw} ac={ac}")


def test_matrices_rows_are_partitions_of_unity():
    # every interpolating row sums to 1 (a constant image stays constant); bicubic's clamped border taps included
    for mode in ("linear", "bicubic", "area", "nearest", "nearest-exact"):
        for aa in ((False, True) if mode == "bicubic" else (False,)):
            for n_in, n_out in ((5, 11), (11, 5), (1, 4), (4, 1), (7, 7)):
                m = interp_matrix(n_in, n_out, mode, False, None, aa)
                np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12, err_msg=f"{mode} {n_in}->{n_out}")


def test_nearest_u8_is_exact_and_keeps_its_dtype():
    x = torch.randint(0, 256, (2, 3, 5, 7), dtype=torch.uint8, generator=_gen())
    want = TF.interpolate(x, scale_factor=(1.6, 0.7), mode="nearest")
    for pref in (REF,) + ((TRITON,) if triton_interpreting() else ()):
        with bt.preference(pref):
            got = F.interpolate(x, scale_factor=(1.6, 0.7), mode="nearest")
        assert got.dtype == torch.uint8 and torch.equal(got, want)


# -- the Triton kernels: channels-last in place, output format, backward vs torch -------------------------------------
@needs_interp
@pytest.mark.parametrize("mode,shape", [("bilinear", (2, 3, 5, 4)), ("bicubic", (1, 4, 4, 5)),
                                        ("trilinear", (1, 3, 3, 4, 2)), ("nearest", (1, 3, 4, 3))])
def test_channels_last_input_is_read_in_place_and_output_follows(mode, shape):
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = torch.randn(shape, generator=_gen()).to(memory_format=fmt)
    size = tuple(2 * s - 1 for s in shape[2:])
    want = TF.interpolate(x, size=size, mode=mode)
    with bt.preference(TRITON):
        got = F.interpolate(x, size=size, mode=mode)
    assert got.is_contiguous(memory_format=fmt) and not got.is_contiguous(), got.stride()
    assert_close(got, want.numpy(), 2e-5, 2e-5, f"{mode} channels-last")
    with bt.preference(TRITON):     # a strided (sliced) input: read with its strides
        xs = torch.randn((shape[0], shape[1]) + tuple(2 * s for s in shape[2:]), generator=_gen())
        v = xs[(slice(None), slice(None)) + (slice(None, None, 2),) * (len(shape) - 2)]
        assert_close(F.interpolate(v, size=size, mode=mode), TF.interpolate(v, size=size, mode=mode).numpy(),
                     2e-5, 2e-5, f"{mode} strided")


@needs_interp
@pytest.mark.parametrize("dt,tol", [(torch.float64, 1e-10), (torch.bfloat16, 3e-2)])
def test_interpolate_backward_gathers_the_adjoint(dt, tol):
    # the gather-form backward (transposed tap tables) vs torch autograd; bf16: one rounding of inputs and outputs
    g = _gen()
    for mode, shape, kw in [("bilinear", (1, 2, 5, 6), dict(size=(9, 4))),
                            ("bicubic", (1, 2, 9, 8), dict(size=(3, 4), antialias=True)),
                            ("area", (1, 2, 7), dict(size=(3,))), ("nearest-exact", (1, 1, 3, 4, 2),
                                                                    dict(scale_factor=1.5))]:
        x = torch.randn(shape, generator=g).to(dt)
        xt, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        yt = TF.interpolate(xt.double() if dt != torch.float64 else xt, mode=mode, **kw)
        gy = torch.randn(yt.shape, generator=g).to(dt)
        yt.backward(gy.to(yt.dtype))
        with bt.preference(TRITON):
            yb = F.interpolate(xb, mode=mode, **kw)
        yb.backward(gy)
        assert_close(xb.grad, xt.grad.double().numpy(), tol, tol, f"{mode} {dt} dx")


def _grid_sample_vs_torch(cases, g, memory_format=None):
    """grid_sample on the Triton route against torch's autograd in float64: output, dx and dgrid, each case
    (mode, padding, align_corners, x shape, grid shape); x in ``memory_format(ndim)`` when given."""
    for mode, pad, ac, xs, gs in cases:
        x = torch.randn(xs, generator=g, dtype=torch.float64)
        if memory_format is not None:
            x = x.to(memory_format=memory_format(len(xs)))
        grid = torch.rand(gs, generator=g, dtype=torch.float64) * 2.4 - 1.2
        ts = [t.clone().requires_grad_() for t in (x, grid)]
        bs = [t.clone().requires_grad_() for t in (x, grid)]
        yt = TF.grid_sample(*ts, mode=mode, padding_mode=pad, align_corners=ac)
        gy = torch.randn(yt.shape, generator=g, dtype=torch.float64)
        yt.backward(gy)
        with bt.preference(TRITON):
            yb = F.grid_sample(*bs, mode=mode, padding_mode=pad, align_corners=ac)
            yb.backward(gy)
        assert_close(yb, yt.detach().numpy(), 1e-10, 1e-10, f"grid_sample {mode} {pad} y")
        for a, b, n in zip(bs, ts, ("input", "grid")):
            assert_close(a.grad, b.grad.numpy(), 1e-10, 1e-10, f"grid_sample {mode} {pad} d{n} {memory_format}")


@needs_interp
def test_grid_sample_grads_match_torch_autograd():
    _grid_sample_vs_torch([("bilinear", "reflection", False, (1, 3, 4, 5), (1, 3, 2, 2)),
                           ("bicubic", "border", True, (1, 2, 5, 4), (1, 2, 3, 2)),
                           ("bilinear", "zeros", True, (1, 2, 3, 4, 3), (1, 2, 2, 2, 3))], _gen())


@needs_interp
@pytest.mark.parametrize("cl", [False, True])
def test_grid_sample_through_the_channels_last_copy_matches_torch(cl):
    # C >= 8 and more points x taps than x has positions: the kernel reads a channels-last copy of an NCHW x (the
    # workspace) and accumulates dx channels-last; a channels-last x is read in place
    fmt = (lambda nd: torch.channels_last if nd == 4 else torch.channels_last_3d) if cl else None
    _grid_sample_vs_torch([("bilinear", "zeros", False, (2, 9, 5, 6), (2, 4, 7, 2)),
                           ("bicubic", "reflection", True, (1, 8, 4, 5), (1, 6, 5, 2)),
                           ("nearest", "border", False, (1, 8, 3, 4), (1, 5, 5, 2)),
                           ("bilinear", "reflection", False, (1, 8, 3, 4, 3), (1, 2, 3, 4, 3))], _gen(), fmt)


@needs_interp
def test_grid_sample_bf16_accumulates_dx_in_f32():
    g = _gen()
    x = torch.randn(2, 16, 6, 7, generator=g)
    grid = torch.rand(2, 5, 6, 2, generator=g) * 2.2 - 1.1
    gy = torch.randn(2, 16, 5, 6, generator=g)
    xt, gt = x.double().requires_grad_(), grid.double().requires_grad_()
    TF.grid_sample(xt, gt, align_corners=False).backward(gy.double())
    xb, gb = x.bfloat16().requires_grad_(), grid.bfloat16().requires_grad_()
    with bt.preference(TRITON):
        F.grid_sample(xb, gb, align_corners=False).backward(gy.bfloat16())
    assert xb.grad.dtype == torch.bfloat16
    assert_close(xb.grad.double(), xt.grad.numpy(), 5e-2, 5e-2, "bf16 dx")


@needs_interp
@pytest.mark.parametrize("mode,shape,size", [("bilinear", (3, 5, 7, 9), (13, 300)),       # 2 column blocks + tail
                                             ("bicubic", (2, 3, 9, 8), (4, 21)),
                                             ("nearest", (3, 7, 5, 4), (9, 10)),
                                             ("linear", (3, 5, 9), (20,))])
def test_interpolate_tile_kernel_tails_strides_and_layouts(mode, shape, size):
    # the 1-d / 2-d tile kernel: tail planes and columns, a strided (non-mergeable planes) input, channels-last,
    # forward and the gather backward, against torch in f64
    g = _gen()
    base = torch.randn(shape[:1] + (shape[1] * 2,) + shape[2:], generator=g, dtype=torch.float64)
    views = [base[:, : shape[1]].contiguous(), base[:, ::2]]
    if len(shape) == 4:
        views.append(views[0].to(memory_format=torch.channels_last))
    ac = None if mode == "nearest" else False
    for x in views:
        xt, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        yt = TF.interpolate(xt, size=size, mode=mode, align_corners=ac)
        gy = torch.randn(yt.shape, generator=g, dtype=torch.float64)
        yt.backward(gy)
        with bt.preference(TRITON):
            yb = F.interpolate(xb, size=size, mode=mode, align_corners=ac)
            yb.backward(gy)
        assert_close(yb, yt.detach().numpy(), 1e-10, 1e-10, f"{mode} {tuple(x.stride())} y")
        assert_close(xb.grad, xt.grad.numpy(), 1e-10, 1e-10, f"{mode} {tuple(x.stride())} dx")


@needs_interp
def test_grid_sample_backward_is_atomic_and_refused_when_determinism_is_required():
    d = bc.Descriptor.make("grid_sample_backward", ((1, 2, 3, 3), "f32"), ((1, 2, 3, 3), "f32"),
                           ((1, 3, 3, 2), "f32"))
    p = bc.Plan.select(d, "cpu", TRITON)
    assert p.sku.backend == Backend.TRITON and not p.precision.deterministic
    p2 = bc.Plan.select(d, "cpu", bc.PlanPreference(prefer=(Backend.TRITON,), require_deterministic=True))
    assert p2.sku.backend == Backend.REFERENCE     # the reference's ordered scatter takes it


@needs_interp
def test_affine_grid_then_grid_sample_trains_theta():
    g = _gen()
    theta = (torch.eye(2, 3, dtype=torch.float64) + 0.1 * torch.randn(2, 2, 3, generator=g, dtype=torch.float64))
    x = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    tt, tb = theta.clone().requires_grad_(), theta.clone().requires_grad_()
    TF.grid_sample(x, TF.affine_grid(tt, (2, 3, 4, 6), align_corners=False), align_corners=False).sum().backward()
    with bt.preference(TRITON):
        F.grid_sample(x, F.affine_grid(tb, (2, 3, 4, 6), align_corners=False), align_corners=False).sum().backward()
    assert_close(tb.grad, tt.grad.numpy(), 1e-10, 1e-10, "dtheta through affine_grid")


@needs_interp
def test_shuffles_of_channels_last_and_batched_inputs_are_exact():
    x = torch.randn(2, 8, 4, 6, generator=_gen()).to(memory_format=torch.channels_last)
    x5 = torch.randn(3, 2, 8, 2, 4, generator=_gen())[:, 1]     # batch strides that do not merge with C
    with bt.preference(TRITON):
        for fn, arg in (("pixel_shuffle", 2), ("pixel_unshuffle", 2), ("channel_shuffle", 4)):
            for t in (x, x5):
                got = getattr(F, fn)(t, arg)
                want = getattr(TF, fn)(t, arg)
                assert torch.equal(got, want), fn
        assert F.pixel_shuffle(x, 2).is_contiguous(memory_format=torch.channels_last)


# -- the drop-ins' errors, empty batches, module forms -------------------------------------------------------------
def test_dropin_errors_name_op_and_argument():
    x = torch.randn(1, 2, 4, 4)
    cases = [(lambda: F.interpolate(x, size=3, scale_factor=2.0), r"interpolate: argument 'size': expected only one "
              "of size or scale_factor"),
             (lambda: F.interpolate(x), r"argument 'size': expected either size or scale_factor"),
             (lambda: F.interpolate(x, scale_factor=2.0, align_corners=True), r"argument 'align_corners'"),
             (lambda: F.interpolate(x, size=(3,)), r"argument 'size': expected 2 output sizes"),
             (lambda: F.interpolate(x, size=3, mode="trilinear"), r"argument 'x': expected a 5-d tensor"),
             (lambda: F.interpolate(torch.randn(4, 4), size=3), r"argument 'x': expected a 3-d, 4-d or 5-d"),
             (lambda: F.interpolate(x, size=3, recompute_scale_factor=True), r"argument 'recompute_scale_factor'"),
             (lambda: F.interpolate(x, size=3, mode="area", antialias=True), r"argument 'antialias'"),
             (lambda: F.grid_sample(x, torch.randn(1, 3, 3, 3)), r"grid_sample: argument 'grid'"),
             (lambda: F.affine_grid(torch.randn(1, 2, 3), (1, 1, 4)), r"affine_grid: argument 'size'"),
             (lambda: F.pixel_shuffle(torch.randn(1, 6, 2, 2), 2), r"pixel_shuffle: argument 'input'"),
             (lambda: F.channel_shuffle(torch.randn(1, 5, 2), 2), r"channel_shuffle: argument 'groups'")]
    for fn, match in cases:
        with pytest.raises(bc.InvalidProblemError, match=match):
            fn()


def test_zero_size_batch():
    x = torch.randn(0, 3, 4, 5)
    assert F.interpolate(x, scale_factor=2.0, mode="bicubic").shape == (0, 3, 8, 10)
    assert F.grid_sample(x, torch.randn(0, 2, 2, 2), align_corners=False).shape == (0, 3, 2, 2)
    y = F.interpolate(x.requires_grad_(), size=(3, 3), mode="bilinear")
    y.sum().backward()
    assert x.grad.shape == x.shape


def test_nn_upsample_routes_under_mode():
    m = torch.nn.Sequential(torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                            torch.nn.PixelShuffle(2))
    x = torch.randn(1, 4, 3, 5, generator=_gen())
    want = m(x)
    with bt.mode() as md:
        got = m(x)
    fn = "torch.nn.functional."
    assert md.routed[fn + "interpolate"] == 1 and md.routed[fn + "pixel_shuffle"] == 1, (dict(md.routed), md.reasons)
    assert_close(got, want.detach().numpy(), 1e-5, 1e-5, "nn.Upsample + PixelShuffle")
    assert_close(F.upsample_bilinear(x, scale_factor=2), TF.interpolate(x, scale_factor=2, mode="bilinear",
                                                                         align_corners=True).numpy(), 1e-5, 1e-5,
                 "upsample_bilinear (align_corners=True)")
