"""Drop-in arguments baracuda does not support raise a clear NotImplementedError naming the op and the argument."""
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402


def test_cat_and_stack_out_refused():
    x = torch.randn(2, 3)
    with pytest.raises(NotImplementedError, match="baracuda cat drop-in: out= is not supported"):
        bt.cat([x, x], 0, out=torch.empty(4, 3))
    with pytest.raises(NotImplementedError, match="baracuda stack drop-in: out= is not supported"):
        bt.stack([x, x], 0, out=torch.empty(2, 2, 3))


def test_to_dtype_memory_format_refused():
    with pytest.raises(NotImplementedError, match="memory_format=torch.channels_last is not supported"):
        bc.get_spec("to_dtype").dropin(torch.randn(1, 2, 3, 4), torch.float16, memory_format=torch.channels_last)


def test_contiguous_memory_format_refused():
    with pytest.raises(NotImplementedError, match="only torch.contiguous_format"):
        bc.get_spec("contiguous").dropin(torch.randn(2, 3), memory_format=torch.channels_last)

