"""Arrays in, arrays out: each array type comes back as itself, zero-copy in, with the right values."""
import numpy as np
import pytest

import baracuda as bc
from baracuda.testing import test_device as _test_device

DEV = _test_device()


def _check(x, y, kind):
    out = bc.Plan.select(bc.Descriptor.like("add", x, y), DEV).run(x, y)
    assert type(out).__module__.split(".")[0] == kind, type(out)
    return out


def test_numpy_in_numpy_out():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = bc.Plan.select(bc.Descriptor.like("add", x, x), "cpu").run(x, x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, 2 * x)


def test_numpy_bf16_and_broadcast_stride0():
    import ml_dtypes

    x = np.arange(8, dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = np.broadcast_to(np.float32(1.5).astype(ml_dtypes.bfloat16), (8,))  # stride 0, read-only
    out = bc.Plan.select(bc.Descriptor.like("add", x, b), "cpu").run(x, b)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out.astype(np.float32), np.arange(8) + 1.5)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    x = torch.randn(5, 6, device=DEV.type)
    out = _check(x, x, "torch")
    torch.testing.assert_close(out, 2 * x)


def test_cupy_in_cupy_out():
    cupy = pytest.importorskip("cupy")
    if DEV.type != "cuda":
        pytest.skip("CuPy arrays live on the GPU")
    x = cupy.arange(10, dtype=cupy.float32)
    out = _check(x, x, "cupy")
    assert cupy.allclose(out, 2 * x)


def test_jax_in_jax_out():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(10, dtype=jnp.float32)
    dev = "cuda" if DEV.type == "cuda" and "cuda" in str(x.devices()).lower() else "cpu"
    out = bc.Plan.select(bc.Descriptor.like("add", x, x), dev).run(x, x)
    assert type(out).__module__.split(".")[0] in ("jax", "jaxlib")
    np.testing.assert_allclose(np.asarray(out), 2 * np.arange(10))


def test_dlpack_producer():
    torch = pytest.importorskip("torch")

    class Producer:  # anything with __dlpack__ / __dlpack_device__
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, *a, **k):
            return self.t.__dlpack__(*a, **k)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    t = torch.arange(6, dtype=torch.float32, device=DEV.type)
    out = bc.Plan.select(bc.Descriptor.like("add", Producer(t), Producer(t)), DEV).run(Producer(t), Producer(t))
    torch.testing.assert_close(out, 2 * t)


def test_zero_size():
    x = np.empty((0, 4), np.float32)
    out = bc.Plan.select(bc.Descriptor.like("add", x, x), "cpu").run(x, x)
    assert out.shape == (0, 4)


def test_wrong_device_is_an_error():
    torch = pytest.importorskip("torch")
    if DEV.type != "cuda":
        pytest.skip("needs a GPU to have two devices")
    p = bc.Plan.select(bc.Descriptor.make("add", ((3,), "f32"), ((3,), "f32")), "cuda")
    with pytest.raises(bc.DeviceMismatchError, match="expected an array on cuda"):
        p.run(np.ones(3, np.float32), np.ones(3, np.float32))
