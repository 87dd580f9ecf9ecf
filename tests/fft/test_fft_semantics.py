"""torch.fft / stft / istft semantics the generic suite does not express: dtype promotion and refusals of the drop-ins,
the Hermitian-weighted gradients of the c2r forms (imaginary DC / Nyquist parts, even and odd n, cut and padded
inputs), the window gradients of stft / istft, stft's return_complex rules, istft's NOLA error, the round trip."""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402


def test_integer_and_bool_inputs_promote_to_the_default_float_as_torch():
    x = torch.arange(7)
    for name in ("fft", "rfft", "ihfft", "hfft"):
        ours, theirs = getattr(bt.fft, name)(x), getattr(torch.fft, name)(x)
        assert ours.dtype == theirs.dtype
        torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(bt.fft.fft2(torch.ones(3, 4, dtype=torch.bool)),
                               torch.fft.fft2(torch.ones(3, 4, dtype=torch.bool)))


def test_half_and_out_are_refused_with_reasons():
    with pytest.raises(NotImplementedError, match=r"fft: argument 'input' has dtype f16.*no complex32"):
        bt.fft.fft(torch.randn(8, dtype=torch.float16))
    with pytest.raises(NotImplementedError, match="out= is not supported"):
        bt.fft.rfft(torch.randn(8), out=torch.empty(5, dtype=torch.complex64))
    with pytest.raises(NotImplementedError, match="takes a real input"):
        bt.fft.rfft(torch.randn(8, dtype=torch.complex64))


@pytest.mark.parametrize("name,n", [("irfft", 8), ("irfft", 7), ("irfft", 4), ("irfft", 12), ("hfft", 9),
                                    ("irfftn", None)])
def test_c2r_gradients_weight_the_bins_with_a_twin(name, n):
    # random imaginary parts at DC and Nyquist (ignored by the forward: their gradient is real there), n even / odd,
    # the input cut (n = 4 from 5 bins) and zero-padded (n = 12); torch's fft_c2r_backward is the peer
    x = torch.randn(3, 5, dtype=torch.complex128, requires_grad=True)
    kw = {} if n is None else {"n": n}
    g = torch.randn_like(getattr(torch.fft, name)(x, **kw))
    ours = torch.autograd.grad(getattr(bt.fft, name)(x, **kw), x, g)[0]
    theirs = torch.autograd.grad(getattr(torch.fft, name)(x, **kw), x, g)[0]
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_stft_window_and_signal_gradients_match_torch():
    x = torch.randn(2, 30, dtype=torch.float64, requires_grad=True)
    w = torch.rand(7, dtype=torch.float64, requires_grad=True)
    kw = dict(n_fft=8, hop_length=3, win_length=7, window=w, normalized=True, return_complex=True)
    g = torch.randn_like(torch.stft(x, **kw))
    ours = torch.autograd.grad(bt.stft(x, **kw), (x, w), g)
    theirs = torch.autograd.grad(torch.stft(x, **kw), (x, w), g)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)


def test_istft_window_and_spectrum_gradients_match_torch():
    spec = torch.stft(torch.randn(2, 24, dtype=torch.float64), 8, 2, return_complex=True).requires_grad_()
    w = (0.5 + torch.rand(6, dtype=torch.float64)).requires_grad_()
    kw = dict(n_fft=8, hop_length=2, win_length=6, window=w, length=20)
    g = torch.randn_like(torch.istft(spec, **kw))
    ours = torch.autograd.grad(bt.istft(spec, **kw), (spec, w), g)
    theirs = torch.autograd.grad(torch.istft(spec, **kw), (spec, w), g)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_stft_return_complex_rules_follow_torch_2_13():
    x = torch.randn(40)
    with pytest.raises(RuntimeError, match="requires the return_complex parameter"):
        bt.stft(x, 8)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        real = bt.stft(x, 8, return_complex=False)
    assert any("deprecated" in str(r.message) for r in rec)
    torch.testing.assert_close(real, torch.view_as_real(torch.stft(x, 8, return_complex=True)))


def test_istft_inverts_stft_and_refuses_a_window_without_overlap():
    x = torch.randn(2, 50, dtype=torch.float64)
    w = torch.hann_window(16, dtype=torch.float64)
    spec = bt.stft(x, 16, 4, window=w, return_complex=True)
    torch.testing.assert_close(bt.istft(spec, 16, 4, window=w, length=50), x, rtol=1e-12, atol=1e-12)
    with pytest.raises(bc.InvalidProblemError, match="NOLA"):     # no centre padding: samples 0, 1 have no window
        bt.istft(torch.stft(x, 8, 4, center=False, return_complex=True), 8, 4, win_length=4, center=False)
    with pytest.raises(NotImplementedError, match="return_complex=True"):
        bt.istft(spec, 16, 4, window=w, return_complex=True)
