"""The three Triton copy paths of layout_copy.move() (tiled rows, tiled transpose, per-element gather), each
forced by shape, against torch: the generic samples are too small to reach the tiled kernels."""
from __future__ import annotations

import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.testing import forced_plan, test_device

DEVICE = test_device()
DEV = "cuda" if DEVICE.type == "cuda" else "cpu"


def _run(op, *xs, **attrs):
    p = forced_plan(bc.Descriptor.like(op, *xs, **attrs), DEVICE, Backend.TRITON)
    assert not isinstance(p, str), p
    return p.run(*xs)


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEV).to(dtype)


CASES = [
    # (op, shape, attrs, torch function): last dims >= 16 reach the tiled kernels
    ("permute", (3, 20, 33), {"dims": (0, 2, 1)}, lambda x: x.permute(0, 2, 1)),          # transpose tile
    ("permute", (2, 17, 3, 40), {"dims": (2, 0, 3, 1)}, lambda x: x.permute(2, 0, 3, 1)),  # transpose, batch
    ("permute", (4, 18, 5, 24), {"dims": (0, 2, 1, 3)}, lambda x: x.permute(0, 2, 1, 3)),  # rows (last kept)
    ("transpose", (40, 36), {"dim0": 0, "dim1": 1}, lambda x: x.t()),
    ("rot90", (2, 20, 24), {"k": 1, "dims": (1, 2)}, lambda x: x.rot90(1, (1, 2))),      # transpose, TP = -1
    ("rot90", (2, 20, 24), {"k": 2, "dims": (1, 2)}, lambda x: x.rot90(2, (1, 2))),      # rows, flipped cols
    ("flip", (5, 6, 40), {"dims": (0, 1)}, lambda x: x.flip(0, 1)),                       # rows, identity cols
    ("flip", (3, 40), {"dims": (1,)}, lambda x: x.flip(1)),
    ("flip", (3 * 8192,), {"dims": (0,)}, lambda x: x.flip(0)),                           # split long run
    ("roll", (4, 5, 33), {"shifts": (2, -1), "dims": (0, 1)}, lambda x: x.roll((2, -1), (0, 1))),
    ("roll", (4, 33), {"shifts": 5, "dims": 1}, lambda x: x.roll(5, 1)),
    ("repeat", (3, 2, 20), {"repeats": (2, 3, 1)}, lambda x: x.repeat(2, 3, 1)),
    ("repeat", (3, 20), {"repeats": (2, 1, 2)}, lambda x: x.repeat(2, 1, 2)),
    ("repeat_interleave", (3, 4, 20), {"repeats": 3, "dim": 1}, lambda x: x.repeat_interleave(3, 1)),
    ("repeat_interleave", (3, 20), {"repeats": 2, "dim": 1}, lambda x: x.repeat_interleave(2, 1)),
    ("pad", (2, 5, 7, 24), {"pad": (0, 0, 2, 3, 1, 1)}, lambda x: torch.nn.functional.pad(x, (0, 0, 2, 3, 1, 1))),
    ("pad", (2, 5, 30), {"pad": (3, 2, 1, 1), "mode": "reflect"},
     lambda x: torch.nn.functional.pad(x, (3, 2, 1, 1), mode="reflect")),
    ("pad", (1, 5, 6, 20), {"pad": (2, 2, 3, 3), "mode": "replicate"},
     lambda x: torch.nn.functional.pad(x, (2, 2, 3, 3), mode="replicate")),
    ("pad", (1, 5, 6, 20), {"pad": (2, 2, 3, 3), "mode": "circular"},
     lambda x: torch.nn.functional.pad(x, (2, 2, 3, 3), mode="circular")),
    ("pad", (3, 40), {"pad": (-2, 5, 1, 0), "value": 2.5},
     lambda x: torch.nn.functional.pad(x, (-2, 5, 1, 0), value=2.5)),
    ("triu", (2, 20, 36), {"diagonal": 3}, lambda x: x.triu(3)),
    ("tril", (20, 36), {"diagonal": -2}, lambda x: x.tril(-2)),
    ("slice", (4, 6, 40), {"dim": 1, "start": 1, "end": 5}, lambda x: x[:, 1:5]),
    ("contiguous", (40, 24), {}, lambda x: x),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8], ids=str)
@pytest.mark.parametrize("op,shape,attrs,fn", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_tiled_paths_match_torch(op, shape, attrs, fn, dtype):
    x = _x(*shape, dtype=dtype) if dtype != torch.uint8 else torch.randint(0, 255, shape, device=DEV, dtype=dtype)
    want = fn(x)
    got = _run(op, x, **attrs)
    assert got.shape == want.shape and torch.equal(got, want), op
    xs = torch.empty(shape[:-1] + (2 * shape[-1],), device=DEV, dtype=dtype)[..., ::2]   # strided source
    xs.copy_(x)
    assert torch.equal(_run(op, xs, **attrs), want), f"{op} strided"


def test_transposed_contiguous_and_cat_of_views():
    x = _x(3, 24, 40)
    xt = x.transpose(1, 2)
    assert torch.equal(_run("contiguous", xt), xt.contiguous())
    assert torch.equal(_run("cat", xt, xt, dim=1), torch.cat([xt, xt], 1))
    assert torch.equal(_run("stack", xt, xt, dim=3), torch.stack([xt, xt], 3))


@pytest.mark.parametrize("force", [{"i64": True}, {"path": "gather"}, {"path": "gather", "i64": True}], ids=str)
@pytest.mark.parametrize("idx", [0, 2, 5, 8, 9, 11, 14, 16, 19, 20], ids=lambda i: CASES[i][0] + str(i))
def test_forced_int64_and_gather_paths(idx, force):
    from baracuda.backends.triton.layout.move import forced

    op, shape, attrs, fn = CASES[idx]
    x = _x(*shape, dtype=torch.bfloat16)
    with forced(**force):
        assert torch.equal(_run(op, x, **attrs), fn(x)), (op, force)


def test_forced_int64_repeat_interleave_tensor():
    from baracuda.backends.triton.layout.move import forced

    x, r = _x(4, 20), torch.tensor([2, 0, 1, 3], device=DEV)
    want = torch.repeat_interleave(x, r, 0)
    with forced(i64=True):
        assert torch.equal(_run("repeat_interleave", x, r, dim=0, output_size=6), want)
        g = torch.randn_like(want)
        got = _run("repeat_interleave_backward", g, r, dim=0, shape=(4, 20))
        xr = x.clone().requires_grad_()
        torch.testing.assert_close(got, torch.autograd.grad(torch.repeat_interleave(xr, r, 0), xr, g)[0])
