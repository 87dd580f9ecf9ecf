"""GEMM forms beyond the generic spec tests: torch's rules for beta / alpha (beta = 0 ignores NaN and inf in input, bool
scalars), refused dtypes and out= falling through under bt.mode(), the einsum grammar (ellipsis, implicit output,
diagonals, broadcasting, the sublist and list forms), tensordot's dims forms, multi_dot's chain order, gradients vs
torch.autograd beyond the generic suite's three samples, ctx.needs, the cuBLAS plans' logic on CPU tensors (the
same torch entry points and the same contraction schedules as on the GPU), routes and costs, and GPT-2's Conv1D
projection (torch.addmm) routed by bt.mode()."""
from __future__ import annotations

import numpy as np
import pytest

import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing import assert_close, draw_samples, noncontig, reference_f64, test_device

torch = pytest.importorskip("torch")
import baracuda.torch as bt  # noqa: E402

DEV = test_device()
TDEV = "cuda" if DEV.type == "cuda" else "cpu"
ADD_FORMS = ("addmm", "addmv", "addr", "baddbmm", "addbmm")
CUBLAS_OPS = ADD_FORMS + ("mv", "dot", "vdot", "einsum", "tensordot", "inner", "outer", "multi_dot", "bilinear")


def _t(*shape, dtype=torch.float64, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype).to(TDEV).requires_grad_(requires_grad)


def _close(got, want, rtol=1e-12, atol=1e-12):
    torch.testing.assert_close(got.detach().cpu().double(), want.detach().cpu().double(), rtol=rtol, atol=atol)


# -- beta / alpha -------------------------------------------------------------------------------------------------
def _add_operands(op, seed=0):
    shapes = {"addmm": ((3, 4), (3, 5), (5, 4)), "addmv": ((3,), (3, 5), (5,)), "addr": ((3, 4), (3,), (4,)),
              "baddbmm": ((2, 3, 4), (2, 3, 5), (2, 5, 4)), "addbmm": ((3, 4), (2, 3, 5), (2, 5, 4))}[op]
    return [_t(*s, seed=seed + i) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("op", ADD_FORMS)
def test_beta_zero_ignores_nan_and_inf_in_input(op):
    inp, a, b = _add_operands(op)
    inp = inp.clone()
    flat = inp.view(-1)
    flat[0], flat[-1] = float("nan"), float("inf")
    want = getattr(torch, op)(inp, a, b, beta=0, alpha=1.5)
    assert torch.isfinite(want).all()
    got = getattr(bt, op)(inp, a, b, beta=0, alpha=1.5)
    _close(got, want)
    desc = bc.Descriptor.like(op, inp.cpu(), a.cpu(), b.cpu(), beta=0.0, alpha=1.5)
    ref = bc.Plan.select(desc, "cpu", bc.PlanPreference(prefer=(Backend.REFERENCE,))).run(inp.cpu(), a.cpu(), b.cpu())
    assert np.isfinite(ref).all()
    # a NaN in input with beta != 0 propagates (IEEE), as in torch
    assert torch.isnan(getattr(bt, op)(inp, a, b, beta=0.5)).any()


@pytest.mark.parametrize("op", ADD_FORMS)
def test_bool_beta_alpha_and_input_gradient_at_beta_zero(op):
    inp, a, b = _add_operands(op, seed=3)
    for beta, alpha in [(True, False), (False, True), (True, True)]:
        if op == "addr":     # torch.addr refuses a bool beta / alpha unless the tensors are bool
            with pytest.raises(RuntimeError, match="Boolean beta"):
                torch.addr(inp, a, b, beta=beta, alpha=alpha)
            with pytest.raises(bc.InvalidProblemError, match="a bool only for bool tensors"):
                bt.addr(inp, a, b, beta=beta, alpha=alpha)
            continue
        _close(getattr(bt, op)(inp, a, b, beta=beta, alpha=alpha), getattr(torch, op)(inp, a, b, beta=beta, alpha=alpha))
    xs = [x.clone().requires_grad_() for x in (inp, a, b)]
    ys = [x.clone().requires_grad_() for x in (inp, a, b)]
    g = torch.randn(getattr(torch, op)(inp, a, b).shape, dtype=torch.float64, device=TDEV)
    (getattr(bt, op)(*xs, beta=0, alpha=-2) * g).sum().backward()
    (getattr(torch, op)(*ys, beta=0, alpha=-2) * g).sum().backward()
    assert (xs[0].grad == 0).all()
    for x, y in zip(xs, ys):
        _close(x.grad, y.grad)


@pytest.mark.parametrize("op", ADD_FORMS)
def test_refusals_fall_through_under_mode(op):
    inp, a, b = _add_operands(op, seed=5)
    with pytest.raises(bc.UnsupportedError, match="complex"):
        getattr(bt, op)(inp, a, b, beta=1j)
    out = torch.empty(getattr(torch, op)(inp, a, b).shape, dtype=torch.float64, device=TDEV)
    with pytest.raises(bc.UnsupportedError, match="out="):
        getattr(bt, op)(inp, a, b, out=out)
    with bt.mode() as m:
        getattr(torch, op)(inp, a, b, beta=0.5, out=out)
        got = getattr(torch, op)(inp, a, b, beta=0.5)
    _close(out, getattr(torch, op)(inp, a, b, beta=0.5))
    _close(got, out)
    assert m.routed == {f"torch.{op}": 1} and m.fell_through == {f"torch.{op}": 1}, m.summary()


@pytest.mark.parametrize("op", ADD_FORMS)
def test_methods_and_in_place_forms(op):
    inp, a, b = _add_operands(op, seed=7)
    full = getattr(torch, op)(inp, a, b)                     # input at the product's shape, for the in-place form
    base = torch.randn(full.shape, dtype=torch.float64, device=TDEV)
    want = getattr(base.clone(), op + "_")(a, b, beta=0.5, alpha=2)
    target = base.clone()
    with bt.mode(strict=True) as m:
        got_method = getattr(inp, op)(a, b, alpha=-1)
        got_inplace = getattr(target, op + "_")(a, b, beta=0.5, alpha=2)
    assert got_inplace is target
    _close(got_method, getattr(inp, op)(a, b, alpha=-1))
    _close(got_inplace, want)
    assert m.routed == {f"Tensor.{op}": 1, f"Tensor.{op}_": 1}, m.summary()


def test_alpha_zero_is_ieee():
    """alpha = 0: 0 * inf = nan (the reference); torch's CPU kernels differ among themselves here (documented)."""
    inp, a, b = _add_operands("baddbmm")
    a = a.clone()
    a[0, 0, 0] = float("inf")
    desc = bc.Descriptor.like("baddbmm", inp.cpu(), a.cpu(), b.cpu(), alpha=0.0)
    ref = bc.Plan.select(desc, "cpu").run(inp.cpu(), a.cpu(), b.cpu())
    assert np.isnan(ref[0, 0]).all() and np.isfinite(ref[1]).all()


# -- vector products ----------------------------------------------------------------------------------------------
def test_vdot_is_dot_for_real_and_refuses_complex():
    x, y = _t(7, seed=1), _t(7, seed=2)
    _close(bt.vdot(x, y), torch.vdot(x, y))
    _close(bt.dot(x, y), torch.dot(x, y))
    z = torch.randn(7, dtype=torch.complex128)
    with pytest.raises(bc.UnsupportedError, match="dtype c128"):
        bt.vdot(z, z)
    with bt.mode() as m:
        got = torch.vdot(z, z)
    assert torch.equal(got, torch.vdot(z, z)) and m.fell_through == {"torch.vdot": 1}


def test_outer_alias_ger_and_inner_scalars():
    x, y = _t(4, seed=1), _t(3, seed=2)
    assert bt.ger is not None and "ger" in bt.PUBLISHED
    _close(bt.ger(x, y), torch.outer(x, y))
    s = _t(seed=3).reshape(())
    _close(bt.inner(s, _t(2, 3, seed=4)), torch.inner(s, _t(2, 3, seed=4)))
    with bt.mode(strict=True) as m:
        got = [torch.ger(x, y), x.outer(y)]
    for r in got:
        _close(r, torch.outer(x, y))
    assert m.routed == {"torch.ger": 1, "Tensor.outer": 1}, m.summary()


# -- einsum -------------------------------------------------------------------------------------------------------
_EQUATIONS = [
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]), ("b...,b...->...", [(3, 2, 4), (3, 2, 4)]),
    ("i...->...", [(2, 3, 4)]), ("...ba,a", [(2, 3, 4), (4,)]), ("...,...", [(2, 3), (3,)]),
    ("bB", [(2, 3)]), ("Bb", [(2, 3)]), ("ii", [(4, 4)]), ("iij->ji", [(3, 3, 2)]), ("iii->i", [(3, 3, 3)]),
    ("ii,i->i", [(3, 3), (3,)]), ("ij,ij->ij", [(1, 3), (2, 3)]), ("ij,kj->ik", [(3, 4), (5, 1)]),
    ("ij,kj->ik", [(3, 1), (5, 4)]), ("ij,ij->i", [(3, 1), (1, 4)]), ("ij,jk->", [(2, 3), (3, 4)]),
    ("ab,cd->", [(2, 3), (4, 2)]), ("i j , j k", [(3, 4), (4, 2)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 1)]), ("a,b,c->abc", [(2,), (3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("i,->i", [(4,), ()]),
]


@pytest.mark.parametrize("eq,shapes", _EQUATIONS, ids=[f"{e}{s}" for e, s in _EQUATIONS])
def test_einsum_grammar_values_and_gradients(eq, shapes):
    xs = [_t(*s, seed=i, requires_grad=True) for i, s in enumerate(shapes)]
    ys = [x.detach().clone().requires_grad_() for x in xs]
    got, want = bt.einsum(eq, *xs), torch.einsum(eq, *ys)
    assert got.shape == want.shape and got.dtype == want.dtype
    _close(got, want)
    g = torch.randn(want.shape, dtype=torch.float64, device=TDEV)
    (got * g).sum().backward()
    (want * g).sum().backward()
    for x, y in zip(xs, ys):
        _close(x.grad, y.grad)


def test_einsum_call_forms():
    a, b = _t(3, 4, seed=1), _t(4, 5, seed=2)
    want = torch.einsum("ij,jk->ik", a, b)
    _close(bt.einsum("ij,jk->ik", [a, b]), want)            # the operands as one list
    _close(bt.einsum(a, [0, 1], b, [1, 2], [0, 2]), want)   # sublist form, explicit output
    _close(bt.einsum(a, [0, 1], b, [1, 2]), want)           # sublist form, implicit output
    x = _t(2, 3, 4, seed=3)
    _close(bt.einsum(x, [Ellipsis, 1], _t(4, seed=4), [1], [Ellipsis]), torch.einsum("...j,j->...", x, _t(4, seed=4)))
    with pytest.raises(bc.InvalidProblemError, match=r"subscripts in \[0, 52\)"):
        bt.einsum(a, [0, 60])
    with bt.mode(strict=True) as m:
        got = [torch.einsum("ij,jk->ik", a, b), torch.einsum("ij,jk->ik", [a, b]), torch.einsum(a, [0, 1], b, [1, 2])]
    for r in got:
        _close(r, want)
    assert m.routed == {"torch.einsum": 3}, m.summary()


def test_einsum_refuses_what_torch_refuses_with_torchs_exception_types():
    """The operands before the equation (op_db's sample order), a non-tensor operand in the list or the varargs, no
    operand: torch raises TypeError / ValueError before any work; so does the drop-in (not the custom op's schema
    error), and bt.mode() hands none of them to torch silently."""
    t = _t(3, seed=1)
    for args, exc in [(([t], "i->"), TypeError), (("i,i", t, 3), TypeError), (("i,i", [t, 3]), TypeError),
                      (("i,i", [t], [t]), TypeError), ((t,), ValueError), (("i",), ValueError)]:
        with pytest.raises(exc):
            torch.einsum(*args)
        with pytest.raises(exc, match="einsum"):
            bt.einsum(*args)
    _close(bt.einsum("i->", (t,)), torch.einsum("i->", t))   # a tuple of operands, as torch


def test_einsum_canonical_equation_and_result_is_fresh():
    d = bc.Descriptor.make("einsum", ((2, 1, 3, 4), "f32"), ((5, 4, 2), "f32"), equation="...ij , ...jk")
    assert d.attr("equation") == "ABij,Bjk->ABik" and d.outputs[0].shape == (2, 5, 3, 2)
    assert bc.Descriptor.make("einsum", ((2, 3), "f32"), equation="bB").attr("equation") == "bB->Bb"
    a = _t(3, 4)
    same = bt.einsum("ij->ij", a)          # torch returns the operand itself here; the drop-in a fresh tensor
    assert same.data_ptr() != a.data_ptr() and torch.equal(same, a)


# -- tensordot ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dims", [2, 0, ([2, 1], [2, 0]), [[2], [1]], ((-1,), (1,)), "tensor-int", "tensor-pair"])
def test_tensordot_dims_forms(dims):
    a, b = _t(3, 4, 5, seed=1, requires_grad=True), _t(4, 5, 5, seed=2, requires_grad=True)
    if dims == "tensor-int":
        dims = torch.tensor(2)
    elif dims == "tensor-pair":
        dims = torch.tensor([[1, 2], [0, 1]])
    a2, b2 = (x.detach().clone().requires_grad_() for x in (a, b))
    got, want = bt.tensordot(a, b, dims=dims), torch.tensordot(a2, b2, dims=dims)
    _close(got, want)
    g = torch.randn(want.shape, dtype=torch.float64, device=TDEV)
    (got * g).sum().backward()
    (want * g).sum().backward()
    _close(a.grad, a2.grad)
    _close(b.grad, b2.grad)


def test_tensordot_under_mode_and_refusals():
    a, b = _t(3, 4, seed=1), _t(4, 5, seed=2)
    with bt.mode(strict=True) as m:
        got = torch.tensordot(a, b, dims=1)
    _close(got, torch.tensordot(a, b, dims=1))
    assert m.routed == {"torch.tensordot": 1}, m.summary()
    for bad in ((1, 0), 1.5, -1):
        with pytest.raises(bc.InvalidProblemError, match="dims"):
            bt.tensordot(a, b, dims=bad)


# -- multi_dot ----------------------------------------------------------------------------------------------------
def test_chain_order_is_the_cheapest():
    from baracuda.ops.gemm_chain import chain_order

    assert chain_order((10, 100, 5, 50)) == ((0, 1), 2)          # 5000 + 2500 vs 25000 + 50000
    assert chain_order((50, 5, 100, 10)) == (0, (1, 2))
    assert chain_order((30, 35, 15, 5, 10, 20, 25)) == ((0, (1, 2)), ((3, 4), 5))   # CLRS 15.2's chain
    assert chain_order((4, 1)) == 0


def test_multi_dot_route_values_gradients_and_needs():
    shapes = [(6,), (6, 2), (2, 7), (7, 3), (3,)]
    xs = [_t(*s, seed=i, requires_grad=True) for i, s in enumerate(shapes)]
    ys = [x.detach().clone().requires_grad_() for x in xs]
    got, want = bt.linalg.multi_dot(xs), torch.linalg.multi_dot(ys)
    assert got.shape == want.shape == ()
    _close(got, want)
    got.backward()
    want.backward()
    for x, y in zip(xs, ys):
        _close(x.grad, y.grad)
    desc = bc.Descriptor.like("multi_dot", *[x.detach().cpu() for x in xs])
    impl = next(i for i in implementations("multi_dot") if i.backend == Backend.CUBLAS)
    assert impl.route_of(desc, bc.PlanPreference()).startswith("multi_dot[order ")
    # only the last matrix differentiated: the gradient flows down one path of the tree
    full = bc.BackwardPlan(desc, bc.Device("cpu"), bc.PlanPreference())
    one = bc.BackwardPlan(desc, bc.Device("cpu"), bc.PlanPreference(), needs=(False,) * 4 + (True,))
    assert len(one.skus) < len(full.skus)
    with bt.mode(strict=True) as m:
        got = torch.linalg.multi_dot([x.detach() for x in xs])
    _close(got, want)
    assert m.routed == {"torch.linalg.multi_dot": 1}, m.summary()


# -- bilinear, kron -----------------------------------------------------------------------------------------------
def test_bilinear_under_mode_and_zero_in_features():
    x1, x2, w, b = _t(2, 3, 4, seed=1), _t(2, 3, 5, seed=2), _t(6, 4, 5, seed=3), _t(6, seed=4)
    with bt.mode(strict=True) as m:
        y = torch.nn.functional.bilinear(x1, x2, w, b)
        y2 = torch.bilinear(x1, x2, w, None)
    _close(y, torch.nn.functional.bilinear(x1, x2, w, b))
    _close(y2, torch.nn.functional.bilinear(x1, x2, w))
    assert torch.bilinear is torch.nn.functional.bilinear      # one function object: one route
    assert m.routed == {"torch.nn.functional.bilinear": 2}, m.summary()
    # in1_features = 0: torch 2.13 fails ("cannot reshape tensor of 0 elements"); the sum of no terms is 0: the bias
    got = bt.nn.functional.bilinear(_t(3, 0), _t(3, 2), _t(4, 0, 2), b[:4])
    _close(got, b[:4].expand(3, 4))


def test_kron_ranks_and_route():
    for sa, sb in [((2, 3), (4, 5)), ((2, 1, 3), (2, 2)), ((3,), (2, 2, 2)), ((2, 2, 2), (3, 2, 2))]:
        a, b = _t(*sa, seed=1), _t(*sb, seed=2)
        _close(bt.kron(a, b), torch.kron(a, b))
    impl = next(i for i in implementations("kron") if i.backend == Backend.TRITON)
    wide = bc.Descriptor.make("kron", ((2, 2, 2), "f32"), ((3, 2, 2), "f32"))
    assert "operands expanded first" in impl.route_of(wide, bc.PlanPreference())
    assert "expanded" not in impl.route_of(bc.Descriptor.make("kron", ((2, 3), "f32"), ((4, 5), "f32")),
                                           bc.PlanPreference())


# -- the cuBLAS plans' logic on CPU tensors -----------------------------------------------------------------------
def _cublas_cases():
    for op in CUBLAS_OPS:
        for dt in ("f64", "f32", "bf16"):
            yield pytest.param(op, dt, id=f"{op}-{dt}")


@pytest.mark.skipif(DEV.type == "cuda", reason="on a GPU tests/generic runs these plans on CUDA tensors")
@pytest.mark.parametrize("op,dt", list(_cublas_cases()))
def test_cublas_plan_logic_on_cpu_tensors(op, dt):
    """The cuBLAS plans' bound runs (out= and produce) on CPU tensors: the same torch entry points, views and
    contraction schedules, contiguous and strided operands, vs the float64 reference with the op's tolerance."""
    spec = bc.get_spec(op)
    impl = next(i for i in implementations(op) if i.backend == Backend.CUBLAS)
    dtype = bc.as_dtype(dt)
    rtol, atol = spec.tol(dtype)
    for sample in draw_samples(spec):
        xs = [torch.from_numpy(np.asarray(x)).to(dtype.torch) for x in sample.inputs]
        desc = bc.Descriptor.like(op, *xs, **sample.attrs)
        ref = reference_f64(desc, [x.double().numpy() for x in xs])[0]
        run = impl.bind(desc, bc.PlanPreference())
        for layout in ("contig", "noncontig"):
            ins = [noncontig(x) for x in xs] if layout == "noncontig" else xs
            out = noncontig(torch.full(desc.outputs[0].shape, float("nan"), dtype=dtype.torch))
            run(desc, ins, [out], None)
            assert_close(out, ref, rtol, atol, f"{op}[{sample.name}] {dt} {layout} out=")
            (made,) = run.produce(ins)
            assert made.is_contiguous() and tuple(made.shape) == desc.outputs[0].shape
            assert_close(made, ref, rtol, atol, f"{op}[{sample.name}] {dt} {layout} produce")
            assert all(made.data_ptr() != x.data_ptr() for x in ins if x.numel())


def test_routes_name_what_runs():
    pref = bc.PlanPreference()

    def route(op, *shapes, **attrs):
        desc = bc.Descriptor.make(op, *[(s, "bf16") for s in shapes], **attrs)
        return next(i for i in implementations(op) if i.backend == Backend.CUBLAS).route_of(desc, pref)

    gpt2 = route("addmm", (2304,), (8192, 768), (768, 2304))
    assert gpt2 == "torch.addmm->cublasLt(bias epilogue)"
    assert "input copied into out, beta=0.5" in route("addmm", (2304,), (64, 768), (768, 2304), beta=0.5)
    assert "beta=0: input not read" in route("addmm", (64, 2304), (64, 768), (768, 2304), beta=0.0)
    assert route("addr", (4, 5), (4,), (5,)).startswith("torch.addmm(vec1[:, None], vec2[None, :])->cublas(K=1)")
    assert "K=B*k" in route("addbmm", (3, 4), (2, 3, 5), (2, 5, 4))
    assert route("einsum", (3, 4), (4, 5), equation="ij,jk").endswith("torch.mm[3x4x5]->cublas")
    assert "bmm[2x3x4x5]" in route("einsum", (2, 3, 4), (2, 4, 5), equation="bij,bjk->bik")
    assert "no GEMM" in route("einsum", (4, 4), equation="ii->i")
    assert "torch.mm[4x1x5]" in route("outer", (4,), (5,))
    hadamard = route("einsum", (3, 4), (3, 4), equation="ij,ij->ij")
    assert hadamard.startswith("einsum[ij,ij->ij]: no GEMM: ") and "torch.mul[12x1x1]" in hadamard
    f32 = bc.Descriptor.make("einsum", ((3, 4), "f32"), ((4, 5), "f32"), equation="ij,jk")
    impl = next(i for i in implementations("einsum") if i.backend == Backend.CUBLAS)
    assert impl.route_of(f32, bc.PlanPreference(allow_reduced_precision=True)).endswith("[tf32]")


def test_cost_models():
    d = bc.Descriptor.make("addmm", ((2304,), "bf16"), ((8192, 768), "bf16"), ((768, 2304), "bf16"))
    assert d.spec.bytes_flops(d)[1] == 2 * 8192 * 768 * 2304
    d = bc.Descriptor.make("addbmm", ((3, 4), "f32"), ((2, 3, 5), "f32"), ((2, 5, 4), "f32"))
    assert d.spec.bytes_flops(d)[1] == 2 * 3 * 4 * 5 * 2
    d = bc.Descriptor.make("einsum", ((8, 2, 16, 4), "bf16"), ((8, 2, 32, 4), "bf16"), equation="bhqd,bhkd->bhqk")
    assert d.spec.bytes_flops(d)[1] == 2 * 16 * 16 * 32 * 4
    d = bc.Descriptor.make("multi_dot", ((10, 100), "f32"), ((100, 5), "f32"), ((5, 50), "f32"))
    assert d.spec.bytes_flops(d)[1] == 2 * (10 * 100 * 5 + 10 * 5 * 50)


# -- ctx.needs: a frozen weight costs no GEMM ---------------------------------------------------------------------
def test_addmm_backward_skips_unwanted_gemms():
    desc = bc.Descriptor.make("addmm", ((6,), "f64"), ((4, 5), "f64"), ((5, 6), "f64"))

    def ops(needs):
        return sorted(s.op for s in bc.BackwardPlan(desc, bc.Device("cpu"), bc.PlanPreference(), needs=needs).skus)

    assert ops(None) == ["mm", "mm", "sum"]
    assert ops((False, True, False)) == ["mm"]            # frozen weight and bias: only dx
    assert ops((True, False, False)) == ["sum"]
    alpha = bc.Descriptor.make("addmm", ((4, 6), "f64"), ((4, 5), "f64"), ((5, 6), "f64"), alpha=2.0, beta=0.5)
    assert sorted(s.op for s in bc.BackwardPlan.select(alpha, "cpu").skus) == ["mm", "mm", "mul_scalar", "mul_scalar"]


# -- GPT-2's Conv1D projection under bt.mode() --------------------------------------------------------------------
class _Conv1D(torch.nn.Module):
    """HF transformers' GPT-2 Conv1D: a linear layer with the weight stored transposed [nx, nf]."""

    def __init__(self, nf, nx, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.nn.Parameter(torch.randn(nx, nf, generator=g, dtype=torch.float64) * 0.1)
        self.bias = torch.nn.Parameter(torch.randn(nf, generator=g, dtype=torch.float64) * 0.1)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(-1),)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class _TinyMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc, self.c_proj = _Conv1D(32, 8, 1), _Conv1D(8, 32, 2)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x), approximate="tanh"))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gpt2_conv1d_addmm_routes_under_mode(dtype):
    model = _TinyMLP().to(TDEV, dtype)
    ref = _TinyMLP().to(TDEV, dtype)
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(9)).to(TDEV, dtype)
    with bt.mode(strict=True) as m:
        y = model(x)
        loss = (y * y).sum()
        loss.backward()
    assert m.routed["torch.addmm"] == 2 and not m.fell_through, m.summary()
    y_ref = ref(x)
    (y_ref * y_ref).sum().backward()
    tol = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-5)}[dtype]
    _close(y, y_ref, *tol)
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        _close(p.grad, q.grad, *tol)


def test_frozen_conv1d_weight_under_mode():
    """LoRA-style: the weight frozen, gradients for x and the bias only (the weight's GEMM is skipped)."""
    layer = _Conv1D(6, 4, 3).to(TDEV)
    layer.weight.requires_grad_(False)
    x = _t(3, 4, seed=5, requires_grad=True)
    with bt.mode(strict=True):
        layer(x).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    b2 = layer.bias.detach().clone().requires_grad_()
    torch.addmm(b2, x2, layer.weight).sum().backward()
    _close(x.grad, x2.grad)
    _close(layer.bias.grad, b2.grad)
    assert layer.weight.grad is None


def test_variadic_names_operands():
    from baracuda.ops.layout import Variadic

    v = Variadic("operands")
    assert "operands[3]" in v and "operands" in v and "tensors[0]" not in v and "operands[x]" not in v
    assert v.index("operands[3]") == 3 and v[2] == "operands[2]"
