"""split_f64: how a Python float reaches an f64 Triton kernel (backends/triton/_lib/scalars.py); CPU only."""


def test_split_f64_rounds_as_torch_and_rebuilds_the_value():
    """split_f64's hi is torch's f32 conversion of the value (round to nearest even, subnormals, signed zero,
    overflow to inf) and hi + lo is the value to ~48 bits; non-finite values pass as (value, 0)."""
    import math

    import torch

    from baracuda.backends.triton._lib.scalars import split_f64

    for v in (1e-5, 0.1, -0.1, 1 / 3, 1e-40, -0.0, 0.0, 3.4028235e38, 1e39, -1e39, 2.0 ** -149, 123456789.123,
              float("inf"), float("-inf")):
        hi, lo = split_f64(v)
        want = float(torch.tensor(v, dtype=torch.float64).to(torch.float32))
        assert hi == want and math.copysign(1.0, hi) == math.copysign(1.0, want), (v, hi, want)
        if math.isfinite(hi):
            assert abs((hi + lo) - v) <= abs(v) * 2.0 ** -48, (v, hi, lo)
        else:
            assert lo == 0.0
    hi, lo = split_f64(float("nan"))
    assert math.isnan(hi) and lo == 0.0
