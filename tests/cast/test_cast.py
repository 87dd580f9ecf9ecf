"""Cast family beyond the generic tests: bit-exact agreement with torch on every fp8 byte, on rounding
ties and boundaries, complex rules, the drop-in's warning, backward, int4 round trips."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.ops.cast import torch_e4m3fn_saturated
from baracuda.testing import forced_plan, test_device

BACKENDS = [Backend.REFERENCE, Backend.TRITON]
DEVICE = test_device()   # cuda on a GPU machine (plans then take CUDA tensors), else cpu (interpreter)
DEV = "cuda" if DEVICE.type == "cuda" else "cpu"


def _run(backend, x, dtype, op="to_dtype", **attrs):
    """Plan and run on the test device; ``x`` is moved there, the result comes back on it."""
    x = x.to(DEV)
    d = bc.Descriptor.like(op, x, dtype=dtype, **attrs) if dtype is not None else bc.Descriptor.like(op, x, **attrs)
    p = forced_plan(d, DEVICE, backend)
    assert not isinstance(p, str), p
    out = p.run(x)
    assert out.device.type == DEV
    return out


def _torch_to(x, dt):
    """torch's own cast, on the same device as the plan (torch's CUDA and CPU casts are separate kernels)."""
    return x.to(DEV).to(dt)


def _same_bits(a: torch.Tensor, b: torch.Tensor):
    assert a.dtype == b.dtype and a.shape == b.shape
    a, b = a.cpu(), b.cpu()
    ia = a.view(torch.uint8 if a.element_size() == 1 else {2: torch.int16, 4: torch.int32}[a.element_size()])
    ib = b.view(ia.dtype)
    fa, fb = a.float(), b.float()
    both_nan = torch.isnan(fa) & torch.isnan(fb)
    bad = (ia != ib) & ~both_nan
    assert not bad.any(), f"{int(bad.sum())} differ: got {a[bad][:8].float()} want {b[bad][:8].float()}"


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_fp8_decode_every_byte(backend, dt):
    x = torch.arange(256, dtype=torch.uint8).view(dt)
    got = _run(backend, x, "f32").cpu()
    want = x.to(DEV).float().cpu()
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))
    assert torch.equal(torch.signbit(got[~torch.isnan(got)]), torch.signbit(want[~torch.isnan(want)]))


def _boundary_values(dt):
    # every fp8 value, every midpoint between neighbours (ties), and one ulp of f32 either side of it
    v = torch.arange(256, dtype=torch.uint8).view(dt).float()
    v = v[torch.isfinite(v)].unique()
    mids = (v[1:] + v[:-1]) / 2
    near = torch.cat([mids, torch.nextafter(mids, torch.full_like(mids, np.inf)),
                      torch.nextafter(mids, torch.full_like(mids, -np.inf))])
    extra = torch.tensor([np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30, -0.0, 464.0, 465.0, 61440.0, 7e4, 2 ** -10])
    return torch.cat([v, near, extra, torch.randn(2000) * 100, torch.randn(500) * 1e-3])


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_fp8_encode_matches_torch(backend, dt):
    # e4m3fn overflow and +-inf saturate to +-448 (torch >= 2.13).  torch 2.11 gave NaN there instead: a
    # change of torch itself between versions, on CPU and CUDA alike, not a device difference.
    # torch_e4m3fn_saturated maps such a result onto the saturating rule; every other byte is torch's.
    x = _boundary_values(dt)
    _same_bits(_run(backend, x, bc.as_dtype(dt)), torch_e4m3fn_saturated(x.to(DEV), _torch_to(x, dt)))
    xb = x.to(torch.bfloat16)   # bf16 source: the common activation -> fp8 path
    _same_bits(_run(backend, xb, bc.as_dtype(dt)), torch_e4m3fn_saturated(xb.to(DEV), _torch_to(xb, dt)))
    if dt == torch.float8_e4m3fn:   # the saturating rule itself, independent of the torch version
        big = torch.tensor([np.inf, -np.inf, 1e30, -465.0, 480.0, 464.0, np.nan])
        got = _run(backend, big, "f8e4m3").cpu().float()
        assert torch.equal(got[:6], torch.tensor([448.0, -448.0, 448.0, -448.0, 448.0, 448.0])), got
        assert torch.isnan(got[6])


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bf16_f16_round_to_nearest_even(backend):
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (4096,), generator=g, dtype=torch.int64).to(torch.int32)
    bits[:256] = (bits[:256] & ~0xFFFF) | 0x8000      # exact bf16 ties
    x = bits.view(torch.float32)
    for dt in (torch.bfloat16, torch.float16):
        _same_bits(_run(backend, x, bc.as_dtype(dt)), _torch_to(x, dt))
    d = torch.tensor([1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -11 + 2 ** -40], dtype=torch.float64)  # double rounding
    _same_bits(_run(backend, d, "bf16"), _torch_to(d, torch.bfloat16))
    _same_bits(_run(backend, d, "f16"), _torch_to(d, torch.float16))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_complex_rules(backend):
    z = torch.tensor([1.5 - 2j, 0j, 3j, -0.25 + 0j], dtype=torch.complex64, device=DEV)
    assert torch.equal(_run(backend, z, "f32"), z.real)
    assert torch.equal(_run(backend, z, "bool"), z.to(torch.bool))
    assert torch.equal(_run(backend, z, "c128"), z.to(torch.complex128))
    r = torch.tensor([1.0, -2.5, float("inf")], device=DEV)
    assert torch.equal(_run(backend, r, "c64"), r.to(torch.complex64))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_float_to_int_truncates_and_wraps_like_torch(backend):
    x = torch.tensor([-1.7, -300.5, 300.7, 2.9, -0.5, 127.9])
    for dt in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool):
        got = _run(backend, x, bc.as_dtype(dt))
        # the documented rule for every input: truncate toward zero through int64, then wrap (int -> int
        # casts are defined in C++, so torch on the CPU computes the wrap exactly)
        assert torch.equal(got.cpu(), x.to(torch.int64).to(dt) if dt != torch.bool else x.to(dt)), dt
        # torch on the same device: everywhere for u8/bool (torch itself goes through int64 for u8), and
        # for signed targets only where the value fits -- outside it torch's float -> int8/int16 is a C++
        # static_cast (undefined behaviour: x86 wraps, CUDA's cvt saturates), unspecified here too.
        fits = torch.ones_like(x, dtype=torch.bool)
        if dt not in (torch.uint8, torch.bool):
            fits = (x.trunc() >= torch.iinfo(dt).min) & (x.trunc() <= torch.iinfo(dt).max)
        assert torch.equal(got.cpu()[fits], _torch_to(x, dt).cpu()[fits]), dt
    i = torch.tensor([-129, 255, 256, 2 ** 40 + 3], dtype=torch.int64)
    for dt in (torch.uint8, torch.int8, torch.int32, torch.float32, torch.bfloat16):
        _same = torch.equal(_run(backend, i, bc.as_dtype(dt)).float(), _torch_to(i, dt).float())
        assert _same, dt


def test_dropin_warns_on_complex_to_real_like_torch():
    spec = bc.get_spec("to_dtype")
    z = torch.ones(3, dtype=torch.complex64)
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        inputs, attrs = spec.dropin(z, torch.float32)
    assert attrs["dtype"] == bc.DType.f32
    with pytest.raises(TypeError, match="only the Tensor.to\\(dtype\\) overload"):
        spec.dropin(z, "cuda")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_backward_casts_grad_back(backend):
    x = torch.randn(5, dtype=torch.bfloat16)
    d = bc.Descriptor.like("to_dtype", x, dtype="f32")
    bw = bc.BackwardPlan.select(d, "cpu", bc.PlanPreference(prefer=(backend,)))
    g = torch.randn(5)
    (gx,) = bw.run(g)
    assert gx.dtype == torch.bfloat16 and torch.equal(gx, g.to(torch.bfloat16))
    di = bc.Descriptor.like("to_dtype", torch.zeros(3, dtype=torch.int32), dtype="f32")
    assert bc.BackwardPlan.select(di, "cpu").run(torch.ones(3)) == (None,)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("signed", [True, False])
def test_int4_round_trip_and_layout(backend, signed):
    lo, hi = (-8, 8) if signed else (0, 16)
    x = torch.randint(lo, hi, (3, 10), dtype=torch.int8, device=DEV)
    p = _run(backend, x, None, op="pack_int4", signed=signed)
    assert p.dtype == torch.uint8 and p.shape == (3, 5)
    assert int(p[0, 0]) == (int(x[0, 0]) & 0xF) | ((int(x[0, 1]) & 0xF) << 4)   # low nibble = even index
    back = _run(backend, p, "i8", op="unpack_int4", signed=signed)
    assert torch.equal(back, x)
    f = _run(backend, p, "bf16", op="unpack_int4", signed=signed)
    assert torch.equal(f, x.to(torch.bfloat16))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_transposed_and_complex_strided_inputs(backend):
    x = torch.randn(6, 4, device=DEV).t()         # non-contiguous
    assert torch.equal(_run(backend, x, "bf16"), x.to(torch.bfloat16))
    z = torch.randn(4, 6, dtype=torch.complex128, device=DEV)[:, ::2]
    assert torch.equal(_run(backend, z, "c64"), z.to(torch.complex64))
