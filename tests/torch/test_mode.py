"""baracuda.torch.mode(): unchanged torch code through baracuda's drop-ins, falling through to torch."""
from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing import test_device as _test_device  # noqa: E402
from baracuda.torch._mode import routes  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

DEVICE = "cuda" if _test_device().type == "cuda" else "cpu"
F64 = dict(dtype=torch.float64, device=DEVICE)


class Block(torch.nn.Module):
    """A pre-norm transformer-ish block: RMSNorm, one attention head, GELU MLP, residuals."""

    def __init__(self, d=8, h=16):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.up, self.down = torch.nn.Linear(d, h), torch.nn.Linear(h, d, bias=False)
        self.g = torch.nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x):
        q, k, v = self.qkv(F.rms_norm(x, (x.shape[-1],), self.g)).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1) / 4.0).softmax(-1)
        x = x + att @ v
        x = x + self.down(F.gelu(self.up(F.layer_norm(x, (x.shape[-1],)))))
        return torch.log_softmax(x, dim=-1).sum(dim=1).exp().mean() + (x * x).sum(dim=(1, 2)).mean() / 100


def _grads(model, x):
    model.zero_grad()   # (grads set to None: each run makes new ones)
    x = x.detach().requires_grad_()
    y = model(x)
    y.backward()
    return y.detach(), [x.grad] + [p.grad for p in model.parameters()]


def test_block_forward_backward_matches_torch():
    torch.manual_seed(0)
    model = Block().to(**F64)
    x = torch.randn(2, 5, 8, **F64)
    want_y, want_g = _grads(model, x)
    with bt.mode(coverage=True) as m:
        y, g = _grads(model, x)
    torch.testing.assert_close(y, want_y, rtol=1e-9, atol=1e-10)   # float64 (as test_frontend's autograd test)
    for a, b in zip(g, want_g):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)
    for name in ("torch.nn.functional.linear", "torch.nn.functional.rms_norm", "torch.nn.functional.layer_norm",
                 "torch.nn.functional.gelu", "Tensor.softmax", "Tensor.matmul", "Tensor.add", "Tensor.exp",
                 "torch.log_softmax", "Tensor.sum", "Tensor.mean", "Tensor.mul", "Tensor.div"):
        assert m.routed[name] > 0, (name, m.summary())
    assert "Tensor.transpose" in m.native and "Tensor.chunk" in m.native   # views stay torch's
    assert not m.fell_through, m.summary()


def test_uncovered_op_falls_through_and_is_counted():
    assert torch.special.bessel_j0 not in routes() and torch.Tensor.diff not in routes()   # (the premise: not covered)
    x = torch.randn(4, 6, **F64)
    with bt.mode(coverage=True) as m:
        h = torch.special.bessel_j0(x)
        y = x.diff()
        z = torch.add(x, 1)
    torch.testing.assert_close(h, torch.special.bessel_j0(x))
    torch.testing.assert_close(y, x.diff())
    torch.testing.assert_close(z, x + 1)
    # (torch.special.bessel_j0 is reported under its overridable function's qualified name)
    assert m.fell_through["torch.special.special_bessel_j0"] == 1 and m.fell_through["Tensor.diff"] == 1
    assert m.reasons["torch.special.special_bessel_j0"] == "no baracuda drop-in"
    assert m.routed == {"torch.add": 1}
    assert "torch.special.special_bessel_j0" in m.summary()
    with bt.mode() as m:   # without coverage: unrouted calls are not probed or counted
        torch.special.bessel_j0(x)
        torch.add(x, 1)
    assert not m.fell_through and not m.native and m.routed == {"torch.add": 1}
    assert "coverage=True" in m.summary()


def test_refused_call_falls_through():
    """An argument our drop-in does not take (out=), a dtype no backend runs, a backward baracuda does not
    have for these operands: torch runs the call, with torch's result and gradients."""
    x = torch.randn(3, 4, **F64)
    o = torch.empty(3, 4, **F64)
    s = torch.randn(4, **F64)
    with bt.mode() as m:
        torch.add(x, 1, out=o)
        c = torch.exp(x.to(torch.complex128))
        tg = torch.sign(x).clone().requires_grad_()
        xg = x.clone().requires_grad_()
        # hinge_embedding_loss gives its target no gradient (torch neither): the mode leaves the call to torch
        y = torch.nn.functional.hinge_embedding_loss(xg, tg)
        y.backward()
        y2 = torch.copysign(x, s)   # no grad needed: baracuda runs it
    torch.testing.assert_close(o, x + 1)
    torch.testing.assert_close(c, torch.exp(x.to(torch.complex128)))
    want = x.clone().requires_grad_()
    torch.nn.functional.hinge_embedding_loss(want, tg.detach()).backward()
    torch.testing.assert_close(xg.grad, want.grad)
    assert tg.grad is None
    torch.testing.assert_close(y2, torch.copysign(x, s))
    assert m.fell_through["torch.add"] == 1 and "out" in m.reasons["torch.add"]
    hinge = "torch.nn.functional.hinge_embedding_loss"
    assert m.fell_through[hinge] == 1 and "not differentiable" in m.reasons[hinge]
    assert m.routed["torch.copysign"] == 1


def test_conversions_copies_and_factories_are_native_not_gaps():
    """What every model runs to move data around (HF Llama's ``hidden.to(float32)``, T5's ``.float()``, BERT's
    ``mask.to(dtype)``, attention's ``.contiguous()``, Bart's ``new_zeros`` + ``clone``) makes new storage without
    computing anything: the coverage report classifies it as native, not as a gap in baracuda."""
    x = torch.randn(4, 6, **F64)
    with bt.mode(strict=True) as m:   # strict: any call classified as a gap raises
        got = [x.to(torch.float32), x.float(), x.half(), x.double(), x.to(dtype=torch.int64), x.type(torch.float32),
               x.t().contiguous(), x.clone(), x.new_ones(3), x.new_zeros((2, 2)), x.new_full((2,), 1.5),
               x.new_empty(2), x.new_tensor([1.0, 2.0]), x.int(), x.bool(), x.cpu(), x.type_as(x.float())]
    assert all(isinstance(t, torch.Tensor) for t in got) and torch.equal(got[6], x.t().contiguous())
    assert not m.fell_through and not m.routed
    for name in ("Tensor.to", "Tensor.float", "Tensor.contiguous", "Tensor.clone", "Tensor.new_ones"):
        assert m.native[name] >= 1, (name, m.native)


def test_strict_raises_naming_the_op():
    x = torch.randn(4, 6, **F64)
    o = torch.empty_like(x)
    with bt.mode(strict=True) as m:
        y = torch.tanh(x) + x.sum(1, keepdim=True)    # covered: fine under strict
        x.t()                                          # a view: torch's, not a gap
        with pytest.raises(bc.UnsupportedError, match=r"torch\.special\.special_bessel_j0: not run by baracuda"):
            torch.special.bessel_j0(x)
        with pytest.raises(bc.UnsupportedError, match=r"torch\.add: .*'out'"):
            torch.add(x, 1, out=o)
        torch.zeros_like(x)                                # a factory: not a gap
    torch.testing.assert_close(y, torch.tanh(x) + x.sum(1, keepdim=True))
    assert m.routed["torch.tanh"] == 1 and not m.fell_through


def test_reflected_operators_swap_operands():
    x = torch.rand(3, 4, **F64) + 0.5
    with bt.mode() as m:
        got = [2 - x, x.__rsub__(2), 3 / x, 2 ** x, 5 + x, 2 * x, 7 % x, 9 // x]
    want = [2 - x, x.__rsub__(2), 3 / x, 2 ** x, 5 + x, 2 * x, 7 % x, 9 // x]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for name in ("Tensor.__rsub__", "Tensor.__rtruediv__", "Tensor.__rpow__", "Tensor.__rmod__",
                 "Tensor.__rfloordiv__"):
        assert m.routed[name] >= 1, m.summary()
    assert m.routed["Tensor.__rsub__"] == 2


def test_in_place_methods_and_operators():
    x = torch.randn(3, 4, **F64)
    y = torch.randn(4, **F64)
    a, b = x.clone(), x.clone()
    with bt.mode() as m:
        ra = a.exp_()
        a += y
        a.mul_(2).clamp_(min=0.5)
        a -= 1
    b.exp_()
    b += y
    b.mul_(2).clamp_(min=0.5)
    b -= 1
    assert ra is a
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert {"Tensor.exp_", "Tensor.add_", "Tensor.mul_", "Tensor.clamp_", "Tensor.sub_"} <= set(m.routed)


def test_counters_are_left_to_torch_and_native():
    """A one-element integer (or bool) tensor updated in place is a counter (BatchNorm's num_batches_tracked):
    torch's own kernel keeps it, reported as native; a float one, or an integer tensor of more elements, is routed."""
    bn = torch.nn.BatchNorm2d(3).train()
    x = torch.randn(2, 3, 4, 4, **F64).float()
    step, ints, one = torch.zeros((), dtype=torch.int64), torch.arange(4), torch.zeros(1)
    with bt.mode(coverage=True) as m:
        bn(x)
        step += 1
        step.add_(2)
        ints += 1
        one.add_(1)
    assert int(bn.num_batches_tracked) == 1 and int(step) == 3 and ints.tolist() == [1, 2, 3, 4] and one.item() == 1
    # (torch dispatches ``t += 1`` as Tensor.add_): ints and one routed; num_batches_tracked and step's two native
    assert m.routed["Tensor.add_"] == 2 and not m.fell_through, m.summary()
    assert m.native["Tensor.add_"] == 3, dict(m.native)


def test_in_place_rules_and_autograd():
    w = torch.randn(3, 4, **F64, requires_grad=True)
    y = torch.randn(4, **F64)
    grads = []
    for use_mode in (True, False):
        w.grad = None
        with bt.mode() if use_mode else contextlib.nullcontext():
            h = w * 1.5
            h.add_(y)         # in place on a tensor that requires grad (not a leaf)
            h.exp_()          # ours runs on a copy of h (exp may save its input), then writes h
            (h * h).sum().backward()
        grads.append(w.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)
    with bt.mode():   # torch's errors, from torch: a leaf that requires grad, a wider result, a broadcast
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            w.exp_()
        with pytest.raises(RuntimeError, match="can't be cast"):
            torch.arange(3, device=DEVICE).add_(1.5)
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            torch.zeros(3, 1, **F64).add_(torch.ones(3, 4, **F64))


def _aten_counts(fn):
    """aten op -> calls made while ``fn()`` runs (the kernels a step launches, torch's own included)."""
    import collections

    from torch.utils._python_dispatch import TorchDispatchMode

    counts = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            counts[str(func)] += 1
            return func(*args, **(kwargs or {}))
    with Count():
        fn()
    return counts


def test_in_place_writes_copy_only_what_the_backward_saves():
    """An in-place call computes out of place and writes the result over its operand; the operand is copied only
    where the call saves it for backward (mul_ here), not for += / relu_ (a residual block's), and the backward
    passes the gradient straight to the result (no zeros for the overwritten value, no CopySlices)."""
    w = torch.randn(2, 3, 4, 4, **F64, requires_grad=True)
    r = torch.randn(2, 3, 4, 4, **F64, requires_grad=True)
    s = torch.randn(4, **F64, requires_grad=True)

    def step(through_view):
        h = w * 1.5
        h += r                      # saves nothing
        h.relu_()                   # saves its output
        k = h * 2.0
        k.mul_(s)                   # saves both operands: k's old value is copied
        if through_view:
            k[0, 1] += s            # in place on a view (torch's copy_ and its base's CopySlices)
        return (k * k).sum()

    for through_view in (False, True):
        results = []
        for use_mode in (True, False):
            for t in (w, r, s):
                t.grad = None
            with bt.mode() if use_mode else contextlib.nullcontext():
                loss = step(through_view)
                counts = _aten_counts(loss.backward)
            results.append(([t.grad.clone() for t in (w, r, s)], counts))
        (got, counts), (want, _) = results
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)
        if not through_view:   # the backward: baracuda's plans and the engine's sums, no copies / clones / fills
            assert not [k for k in counts if k.split(".")[1] in ("copy_", "clone", "zeros_like", "new_zeros")], counts
    with bt.mode():
        h = w * 1.5
        fw = _aten_counts(lambda: (h.add_(r), h.relu_()))
    assert fw["aten.clone.default"] == 0 and fw["aten.copy_.default"] == 2, fw


@pytest.mark.parametrize("channels_last", [False, True])
def test_in_place_pointwise_written_by_the_kernel(channels_last, monkeypatch):
    """Where a GPU backend runs the op (Triton here), an in-place pointwise call (``+=``, ``relu_``, ``mul_``,
    ``sigmoid_``) is written over its operand by the kernel itself: no result buffer copied back, no clone, for
    contiguous and channels-last operands; values, gradients, the returned object, the version counter and torch's
    saved-tensor check as in torch."""
    from baracuda._core.sku import Backend
    from baracuda.testing.checks import plan_or_skip

    fmt = torch.channels_last if channels_last else torch.contiguous_format
    w = torch.randn(2, 3, 4, 5, **F64, requires_grad=True)
    r = torch.randn(2, 3, 4, 5, **F64).contiguous(memory_format=fmt).requires_grad_()
    plan_or_skip("relu", w.detach())
    pref = bc.PlanPreference(prefer=(Backend.TRITON,))

    def triton():
        return bc.preference(pref)
    from baracuda.torch import _call

    writes = []
    write_into = _call.Bound.write_into
    monkeypatch.setattr(_call.Bound, "write_into",
                        lambda b, xs, out: writes.append(out.shape) or write_into(b, xs, out))
    copies = []
    monkeypatch.setattr(_call, "_owned", lambda outs, xs: copies.append(len(outs)) or outs)

    def step():
        h = (w * 1.5).contiguous(memory_format=fmt)
        del writes[:], copies[:]
        outs = [h.add_(r), F.relu(h, inplace=True)]
        counts = (len(writes), len(copies))
        same = all(o is h for o in outs)
        g = h * 2.0
        g.mul_(3.0)
        g.sigmoid_()        # saves its output: g itself, written in place
        loss = (g * h).sum()
        loss.backward()
        return h.detach().clone(), counts, same

    results = []
    for use_mode in (True, False):
        w.grad = r.grad = None
        with triton(), (bt.mode() if use_mode else contextlib.nullcontext()):
            results.append((*step(), w.grad.clone(), r.grad.clone()))
    (h, counts, same, gw, gr), (h_e, _, same_e, gw_e, gr_e) = results
    assert same and same_e
    for a, b in ((h, h_e), (gw, gw_e), (gr, gr_e)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert h.is_contiguous(memory_format=fmt)
    assert counts == (2, 0), counts     # two kernels wrote h; no result tensor was made (and copied back)
    with triton(), bt.mode():
        x = torch.randn(5, 6, **F64)
        v = x._version
        y = x.add_(1.0).exp_()
        assert y is x and x._version >= v + 2           # (no grad: the version counter still moves)
        a, b = torch.randn(4, **F64, requires_grad=True), torch.randn(4, **F64)
        c = a * b                                        # saves b
        b.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            c.sum().backward()
        z = torch.randn(6, **F64)
        want = z.clone()
        want[1:] += want[:-1].clone()
        z[1:] += z[:-1].clone()                          # (a view written: fine without a gradient)
        torch.testing.assert_close(z, want, rtol=0, atol=0)


def test_batch_norm_output_is_not_a_view():
    """y = F.batch_norm(...) is the op's own tensor: a later y += residual must not turn into a write through a
    view (whose backward rebuilds the base: a zero fill, a copy and a clone per step)."""
    x = torch.randn(2, 3, 4, 4, **F64)
    with bt.mode():
        y = F.batch_norm(x, torch.zeros(3, **F64), torch.ones(3, **F64), training=True)
    assert y._base is None and y.shape == x.shape


def test_inplace_flag_of_functional_activations():
    """F.relu(x, inplace=True) (torchvision's ResNet, by keyword or position) is relu_: baracuda computes it and
    writes x, with the in-place autograd rules -- it fell through to torch as an unsupported argument before."""
    w = torch.randn(3, 5, **F64, requires_grad=True)
    results = []
    for use_mode in (True, False):
        w.grad = None
        with bt.mode() if use_mode else contextlib.nullcontext() as m:
            h = w * 1.5
            r = F.relu(h, inplace=True)
            g = h * 2
            F.leaky_relu(g, 0.1, True)          # (positional flag)
            (g * g + F.hardtanh(h, -0.5, 0.5, inplace=False)).sum().backward()
        results.append((r is h, g.detach().clone(), w.grad.clone(), m))
    (same, h_got, g_got, m), (same_want, h_want, g_want, _) = results
    assert same and same_want
    torch.testing.assert_close(h_got, h_want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-12)
    assert m.routed["torch.nn.functional.relu"] == 1 and m.routed["torch.nn.functional.leaky_relu"] == 1
    assert not m.fell_through, m.summary()
    with bt.mode(), pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.relu(w, inplace=True)    # torch's error, from torch


def test_methods_with_their_own_argument_order():
    x = torch.randn(3, 5, **F64)
    c = x > 0
    with bt.mode() as m:
        got = [x.where(c, -x), x.softmax(-1), x.softmax(0, torch.float32), x.log_softmax(dim=1),
               torch.softmax(x, 1), x.lerp(-x, 0.25), x.clamp(max=0.1), x.flip(0, 1), x.flip(1), x.tile(2)]
    want = [x.where(c, -x), x.softmax(-1), x.softmax(0, torch.float32), x.log_softmax(dim=1),
            torch.softmax(x, 1), x.lerp(-x, 0.25), x.clamp(max=0.1), x.flip(0, 1), x.flip(1), x.tile(2)]
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert m.routed["Tensor.where"] == 1 and m.routed["Tensor.softmax"] == 2 and m.routed["torch.softmax"] == 1
    assert m.routed["Tensor.flip"] == 2 and m.routed["Tensor.tile"] == 1 and not m.fell_through, m.summary()


def test_no_recursion_and_backward_internals_not_counted():
    """The drop-ins and backward plans call torch themselves: those calls are not routed again."""
    x = torch.randn(4, 8, **F64, requires_grad=True)
    with bt.mode(coverage=True) as m:
        y = F.gelu(torch.tanh(x)).sum()
        y.backward()
    # (the backward runs under the mode where torch can skip one hop: its implicit upstream is baracuda's ones_like)
    from baracuda.torch._mode import _SKIP_ONE_HOP

    ones = {"torch.ones_like": 1} if _SKIP_ONE_HOP is not None else {}
    assert m.routed == {"torch.tanh": 1, "torch.nn.functional.gelu": 1, "Tensor.sum": 1, **ones}, m.summary()
    assert not m.fell_through and dict(m.native) == {"Tensor.backward": 1}
    xr = x.detach().clone().requires_grad_()
    F.gelu(torch.tanh(xr)).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-10, atol=1e-12)
    with bt.mode() as m:
        (g,) = torch.autograd.grad(torch.tanh(x).sum(), x)
    torch.testing.assert_close(g, 1 - torch.tanh(x.detach()) ** 2, rtol=1e-10, atol=1e-12)
    assert m.routed == {"torch.tanh": 1, "Tensor.sum": 1, **ones} and not m.fell_through, m.summary()


def test_routes_come_from_the_op_database():
    table = routes()
    assert table[torch.add].fn is bt.add and table[torch.Tensor.add].fn is bt.add
    assert table[torch.nn.functional.rms_norm].fn is bt.nn.functional.rms_norm
    assert table[torch.Tensor.exp_].inplace and table[torch.Tensor.__rsub__].swap
    assert table[torch.lerp].fn is bt.lerp and table[torch.clip].fn is bt.clip
    dropins = {id(_resolve(bt, n)) for n in bt.PUBLISHED}
    # every route runs a published drop-in, but x[key] / x[key] = v with tensor indices: the compositions of
    # torch/_indexing.py (a torch view, then advanced_index / index_put)
    from baracuda.torch import _indexing

    assert table[torch.Tensor.__getitem__].fn is _indexing.getitem
    assert all(id(r.fn) in dropins for r in table.values()
               if r.name not in ("Tensor.__getitem__", "Tensor.__setitem__", "torch.mode", "Tensor.mode"))
    for view in (torch.transpose, torch.Tensor.transpose, torch.narrow, torch.Tensor.diagonal, torch.movedim):
        assert view not in table   # views stay torch's
    assert "transpose" not in bt.PUBLISHED and bt.transpose is torch.transpose   # (the mirror's view is torch's)


def _resolve(root, dotted):
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


def _method_cases():
    from baracuda.testing import draw_samples

    for name in sorted(n for n in bt.PUBLISHED if "." not in n):
        route = routes().get(getattr(torch.Tensor, name, None))
        if route is None:
            continue
        spec = bc.get_spec(bt.PUBLISHED[name])
        dt = bc.DType.f64 if bc.DType.f64 in spec.dtypes else spec.dtypes[0]
        samples = [s for s in draw_samples(spec) if not s.attrs][:2]
        if samples:
            yield pytest.param(name, dt, samples, id=name)


def _run(fn):
    try:
        return fn(), None
    except Exception as e:   # noqa: BLE001  (compared below: the same exception type as torch's)
        return None, type(e)


@pytest.mark.parametrize("name,dt,samples", list(_method_cases()))
def test_methods_and_in_place_forms_match_torch(name, dt, samples):
    """Every routed Tensor method, and its in-place form, on the op's own samples: torch's result (or error)."""
    import numpy as np

    from baracuda.testing import cast

    for sample in samples:
        xs = [torch.tensor(cast(x, dt) if np.asarray(x).dtype.kind == "f" else np.asarray(x), device=DEVICE)
              for x in sample.inputs]
        for suffix in ("", "_"):
            if not hasattr(torch.Tensor, name + suffix):
                continue
            a, b = xs[0].clone(), xs[0].clone()
            want, want_err = _run(lambda: getattr(a, name + suffix)(*xs[1:]))
            with bt.mode() as m:
                got, got_err = _run(lambda: getattr(b, name + suffix)(*xs[1:]))
            assert got_err == want_err, (name + suffix, m.reasons)
            if want_err is None:
                want = want if isinstance(want, tuple) else (want,)
                got = got if isinstance(got, tuple) else (got,)
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype and g.shape == w.shape
                    torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-7, equal_nan=True)
                torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7, equal_nan=True)   # in place: self
                assert sum(m.routed.values()) + sum(m.fell_through.values()) >= 1


def test_torch_mode_is_routed_though_its_name_is_the_routing_mode():
    """``baracuda.torch.mode`` is this routing mode, so the `mode` op's drop-in is not published at that name; the
    mode routes torch.mode / Tensor.mode to it: torch's return type, values, and an index holding the value."""
    assert isinstance(bt.mode(), TorchFunctionMode)
    x = torch.randint(0, 4, (5, 7), generator=torch.Generator().manual_seed(0)).to(torch.float64)
    with bt.mode(coverage=True) as m:
        a = torch.mode(x, 1)
        b = x.mode(dim=0, keepdim=True)
    assert isinstance(a, torch.return_types.mode)
    assert torch.equal(a.values, torch.mode(x, 1).values) and torch.equal(b.values, x.mode(0, True).values)
    assert torch.equal(x.gather(1, a.indices[:, None])[:, 0], a.values)
    assert m.routed == {"torch.mode": 1, "Tensor.mode": 1} and not m.fell_through, m.summary()


def test_activation_checkpointing_recomputes_through_the_mode():
    """torch.utils.checkpoint (non-reentrant) recomputes the forward inside the backward: the mode stays on there
    (its handler is off inside its own calls), so the recomputation saves what the forward saved and the gradients
    are eager's (torch refused before: another count of saved tensors)."""
    from torch.utils.checkpoint import checkpoint

    from baracuda.torch._mode import _SKIP_ONE_HOP

    if _SKIP_ONE_HOP is None:
        pytest.skip("torch without _skip_one_hop_torch_function: the backward runs without the mode")
    w = torch.randn(3, 4, **F64, requires_grad=True)
    s = torch.randn(4, **F64, requires_grad=True)

    def f(w):
        h = w * 1.5
        h += s
        h.mul_(s)
        torch.relu_(h)
        return (h * h).sum()

    grads = []
    for use_mode in (True, False):
        w.grad = s.grad = None
        with bt.mode() if use_mode else contextlib.nullcontext():
            checkpoint(f, w, use_reentrant=False).backward()
        grads.append((w.grad.clone(), s.grad.clone()))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
