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
from baracuda._core.sku import Backend, MathPrecision
from baracuda.testing import assert_close, cast, draw_samples, forced_plan, noncontig, reference_f64, test_device

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
        # addr / outer of integers and bools: torch.addr / torch.outer (elementwise on CUDA; cuBLAS has no integers)
        for dt in ("f64", "f32", "bf16") + (("i64", "u8", "bool") if op in ("addr", "outer") else ()):
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
    ints = not dtype.is_floating
    for sample in draw_samples(spec):
        xs = [torch.from_numpy(cast(np.asarray(x) * 40, dtype)) if ints else torch.from_numpy(np.asarray(x)).to(
            dtype.torch) for x in sample.inputs]
        desc = bc.Descriptor.like(op, *xs, **sample.attrs)
        ref = reference_f64(desc, [x.numpy() if ints else x.double().numpy() for x in xs])[0]
        run = impl.bind(desc, bc.PlanPreference())
        for layout in ("contig", "noncontig"):
            ins = [noncontig(x) for x in xs] if layout == "noncontig" else xs
            out = noncontig(torch.full(desc.outputs[0].shape, 1 if ints else float("nan"), dtype=dtype.torch))
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


# -- integer operands ---------------------------------------------------------------------------------------------
INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
# op -> (torch function, operand shapes, keyword arguments): every GEMM form with integer operands
_INT_CASES = {
    "mm": (torch.mm, ((5, 7), (7, 3)), {}),
    "bmm": (torch.bmm, ((2, 5, 7), (2, 7, 3)), {}),
    "matmul": (torch.matmul, ((2, 1, 5, 7), (3, 7, 4)), {}),
    "linear": (torch.nn.functional.linear, ((2, 3, 7), (4, 7), (4,)), {}),
    "addmm": (torch.addmm, ((3,), (5, 7), (7, 3)), {"beta": 3, "alpha": -2}),
    "addmv": (torch.addmv, ((5,), (5, 7), (7,)), {"beta": -1, "alpha": 2}),
    "addr": (torch.addr, ((5, 4), (5,), (4,)), {"beta": 2, "alpha": 3}),
    "baddbmm": (torch.baddbmm, ((2, 5, 3), (2, 5, 7), (2, 7, 3)), {"alpha": 2}),
    "addbmm": (torch.addbmm, ((5, 3), (2, 5, 7), (2, 7, 3)), {"beta": 2}),
    "mv": (torch.mv, ((5, 7), (7,)), {}),
    "dot": (torch.dot, ((9,), (9,)), {}),
    "vdot": (torch.vdot, ((9,), (9,)), {}),
    "outer": (torch.outer, ((5,), (4,)), {}),
    "inner": (torch.inner, ((2, 3, 7), (4, 7)), {}),
    "tensordot": (torch.tensordot, ((3, 4, 5), (4, 5, 2)), {"dims": 2}),
    "kron": (torch.kron, ((2, 3), (3, 2)), {}),
    "multi_dot": (lambda *xs: torch.linalg.multi_dot(list(xs)), ((3, 5), (5, 2), (2, 6)), {}),
    "bilinear": (torch.nn.functional.bilinear, ((4, 3), (4, 2), (5, 3, 2), (5,)), {}),
    "einsum": (lambda *xs: torch.einsum("bij,bjk->bik", *xs), ((2, 3, 4), (2, 4, 5)), {}),
    "trace": (torch.trace, ((5, 4),), {}),
}


def _ints(shape, dtype, seed, full=True):
    """Random integers over the dtype's whole range (``full``: int64 values up to 2^62, whose products wrap), or
    small ones (|x| < 50); never all zeros."""
    g = torch.Generator().manual_seed(seed)
    info = torch.iinfo(dtype)
    lo, hi = (info.min, info.max) if full else (max(info.min, -49), min(info.max, 50))
    if dtype == torch.int64 and full:
        lo, hi = -2 ** 62, 2 ** 62
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def _wrap(v: int, dtype) -> int:
    """A Python int reduced to ``dtype``'s two's-complement range (wrapping arithmetic)."""
    bits = torch.iinfo(dtype).bits
    v %= 2 ** bits
    return v - 2 ** bits if (dtype != torch.uint8 and v >= 2 ** (bits - 1)) else v


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("op", list(_INT_CASES))
def test_integer_gemm_forms_are_exact_and_wrap_like_torch(op, dtype):
    """Every GEMM form on integers over the dtype's whole range (int64 products past 2^63 wrap): the drop-in equals
    torch's CPU result bit for bit, dtype included (trace: int64), contiguous and strided."""
    fn, shapes, kw = _INT_CASES[op]
    xs = [_ints(s, dtype, seed=7 * i + len(op)) for i, s in enumerate(shapes)]
    want = fn(*xs, **kw)
    for layout in ("contig", "noncontig"):
        ins = [noncontig(x) for x in xs] if layout == "noncontig" else xs
        got = (getattr(bt, op) if op not in ("multi_dot", "einsum", "linear", "bilinear") else
               {"multi_dot": lambda *a: bt.linalg.multi_dot(list(a)), "einsum": lambda *a: bt.einsum("bij,bjk->bik", *a),
                "linear": bt.nn.functional.linear, "bilinear": bt.nn.functional.bilinear}[op])(*ins, **kw)
        assert got.dtype == want.dtype and torch.equal(got, want), (op, dtype, layout)


def test_int64_products_past_2_53_are_exact():
    """No float64 round trip: dot and mm of int64 values near 2^40 (products ~2^80) against Python's exact integers
    reduced mod 2^64, and against torch."""
    x, y = _ints((7,), torch.int64, 1), _ints((7,), torch.int64, 2)
    x, y = x % 2 ** 41 + 2 ** 40, y % 2 ** 41 - 2 ** 40
    exact = _wrap(sum(int(a) * int(b) for a, b in zip(x.tolist(), y.tolist())), torch.int64)
    assert bt.dot(x, y).item() == exact == torch.dot(x, y).item()
    a, b = x.view(1, 7), y.view(7, 1) + 3
    exact = _wrap(sum(int(p) * int(q) for p, q in zip(a.flatten().tolist(), b.flatten().tolist())), torch.int64)
    assert bt.mm(a, b).item() == exact and float(exact) != float(a.double() @ b.double())   # f64 would differ


@pytest.mark.parametrize("op", ["mm", "bmm", "matmul", "linear", "kron", "trace"])
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: str(d)[6:])
def test_triton_integer_kernels(op, dtype):
    """The Triton integer paths (int64 multiply-adds in the GEMM kernel, kron's int64 product, trace's int64 sum):
    exact vs torch's CPU result, on the test device (the interpreter on the CPU), strided operands and the M/N/K
    tails of the tile included."""
    fn, shapes, kw = _INT_CASES[op]
    if op in ("mm", "linear"):       # bigger than one 16/32-wide tile, with tails
        shapes = ((37, 21), (21, 35)) if op == "mm" else ((37, 21), (35, 21), (35,))
    xs = [_ints(s, dtype, seed=i + 11) for i, s in enumerate(shapes)]
    want = fn(*xs, **kw)
    for layout in ("contig", "noncontig"):
        ins = [noncontig(x) for x in xs] if layout == "noncontig" else xs
        desc = bc.Descriptor.like(op, *ins)
        plan = forced_plan(desc, DEV, Backend.TRITON)
        assert not isinstance(plan, str), plan
        assert plan.sku.precision.math == MathPrecision.INT or op != "mm"
        got = torch.as_tensor(plan.run(*[x.to(TDEV) for x in ins])).cpu()
        assert got.dtype == want.dtype and torch.equal(got, want), (op, dtype, layout)


def test_integer_beta_alpha_convert_as_torch():
    """beta / alpha with integer tensors: a float truncates toward zero (torch's cast), a value the dtype cannot hold
    (NaN, 1e30, 256 for uint8) raises, uint8 takes negative ints down to -255 (they wrap); torch.addr refuses any
    float there and a bool unless the tensors are bool.  Both sides raise or both agree exactly."""
    cases = [("addmm", torch.int64, {"alpha": 2.9}), ("addmm", torch.int64, {"alpha": -2.9, "beta": 0.7}),
             ("addmv", torch.int32, {"beta": float("nan")}), ("baddbmm", torch.int64, {"alpha": 1e30}),
             ("addbmm", torch.uint8, {"alpha": -2}), ("addbmm", torch.uint8, {"alpha": -255}),
             ("addmm", torch.uint8, {"alpha": -256}), ("addmm", torch.uint8, {"alpha": 256}),
             ("addmm", torch.uint8, {"alpha": -0.5}), ("addmm", torch.int8, {"beta": 127, "alpha": -128}),
             ("addmm", torch.int8, {"beta": 128}), ("addmm", torch.int64, {"alpha": True}),
             ("addr", torch.int64, {"alpha": 2.0}), ("addr", torch.int32, {"beta": True}),
             ("addr", torch.int16, {"beta": -3, "alpha": 5}), ("addr", torch.bool, {"alpha": True, "beta": False}),
             ("addr", torch.bool, {"alpha": 2}), ("addr", torch.bool, {"alpha": 1.0}), ("addr", torch.bool, {})]
    for op, dtype, kw in cases:
        fn, shapes, _ = _INT_CASES[op]
        if dtype == torch.bool:
            xs = [_ints(s, torch.int64, seed=3 + i, full=False) > 0 for i, s in enumerate(shapes)]
        else:
            xs = [_ints(s, dtype, seed=3 + i, full=False) for i, s in enumerate(shapes)]
        try:
            want = fn(*xs, **kw)
        except (RuntimeError, OverflowError):
            with pytest.raises((bc.InvalidProblemError, bc.UnsupportedError)):
                getattr(bt, op)(*xs, **kw)
            continue
        got = getattr(bt, op)(*xs, **kw)
        assert got.dtype == want.dtype and torch.equal(got, want), (op, dtype, kw)


def test_bool_operands_where_torch_takes_them():
    """addr / outer / kron take bool tensors (logical and / or, as torch); the products torch refuses for bool
    (mm, dot, einsum, ...) are refused."""
    a, b = _ints((5,), torch.int64, 1, full=False) > 0, _ints((4,), torch.int64, 2, full=False) > 0
    m = _ints((5, 4), torch.int64, 3, full=False) > 0
    assert torch.equal(bt.addr(m, a, b), torch.addr(m, a, b))
    assert torch.equal(bt.outer(a, b), torch.outer(a, b))
    assert torch.equal(bt.kron(m, m), torch.kron(m, m))
    for fn, args in [("mm", (m, m.T)), ("dot", (a, a)), ("mv", (m, b)), ("inner", (a, a))]:
        with pytest.raises(RuntimeError):
            getattr(torch, fn)(*args)
        with pytest.raises(bc.UnsupportedError, match="dtype bool"):
            getattr(bt, fn)(*args)


def test_integer_gemms_have_no_gradient():
    """torch: an integer tensor cannot require grad; the family's backward rules give no gradient for integer
    operands (they are never asked on the drop-in path, but the Plan API's BackwardPlan could be)."""
    for op, (_, shapes, kw) in _INT_CASES.items():
        spec = bc.get_spec(op)
        if not spec.is_differentiable:
            continue
        attrs = dict(kw) if op not in ("einsum",) else {"equation": "bij,bjk->bik"}
        attrs.pop("dims", None) if op != "tensordot" else None
        desc = bc.Descriptor.make(op, *((s, "i64") for s in shapes), **attrs)
        grads = spec.grad(None, desc, tuple(desc.outputs), {})
        assert all(g is None for g in grads), op
    with pytest.raises(RuntimeError, match="floating point"):
        _ints((2, 2), torch.int64, 0).requires_grad_()


def _random_einsum(rng):
    terms = ["".join(rng.choice(list("abcd"), rng.integers(0, 4))) for _ in range(rng.integers(1, 4))]
    size = {lab: int(rng.choice([1, 2, 3])) for lab in "abcd"}
    out = [lab for lab in dict.fromkeys("".join(terms)) if rng.random() < 0.4]
    eq = ",".join(terms) + ("->" + "".join(out) if rng.random() < 0.8 else "")
    shapes = [tuple(size[lab] if (len(set(t)) < len(t) or rng.random() < 0.8) else 1 for lab in t) for t in terms]
    return eq, shapes


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.int64], ids=lambda d: str(d)[6:])
def test_einsum_integer_result_dtype_and_refusals_follow_torch(dtype):
    """torch.einsum sums a label only one side holds with Tensor.sum, which widens narrow integers to int64, and
    then refuses to contract that with the still narrow side: on 400 random equations (1-3 operands, broadcast
    size-1 axes, diagonals, implicit outputs) the drop-in returns torch's dtype and values, and raises where torch
    raises; where torch widens a narrow product that may have wrapped it refuses (only for narrow integers; int64
    always runs)."""
    rng = np.random.default_rng(0)
    raised = refused = 0
    for _ in range(400):
        eq, shapes = _random_einsum(rng)
        xs = [_ints(s, dtype, seed=k, full=False) for k, s in enumerate(shapes)]
        if xs[0].is_cuda and dtype != torch.int64 and len(xs) >= 2:     # no one torch answer: refused on CUDA
            with pytest.raises(bc.UnsupportedError, match="narrow-integer operands on CUDA"):
                bt.einsum(eq, *xs)
            continue
        try:
            want = torch.einsum(eq, *xs)
        except RuntimeError:
            raised += 1
            with pytest.raises(bc.UnsupportedError, match="torch.einsum raises here"):
                bt.einsum(eq, *xs)
            continue
        try:
            got = bt.einsum(eq, *xs)
        except bc.UnsupportedError as e:
            assert "widens that product" in str(e), (eq, shapes, e)
            refused += 1
            continue
        assert got.dtype == want.dtype and torch.equal(got, want), (eq, shapes)
    if not xs[0].is_cuda:
        assert (raised > 0) == (refused > 0) == (dtype != torch.int64), (raised, refused)


def test_einsum_of_narrow_integers_is_refused_on_cuda():
    """torch's CUDA einsum wrapped a uint8 partial product ('cb,a,->ca') that its CPU kernel computes widened (H100,
    torch 2.11): two or more narrow-integer CUDA operands are refused with the reason; int64 and one operand run."""
    from types import SimpleNamespace as NS

    from baracuda.ops.gemm_einsum import _refuse_narrow_int_on_cuda

    cuda = lambda dt: NS(is_cuda=True, dtype=dt)  # noqa: E731  (the check reads only these two)
    for dt in (torch.uint8, torch.int8, torch.int16, torch.int32):
        with pytest.raises(bc.UnsupportedError, match="narrow-integer operands on CUDA.*int64"):
            _refuse_narrow_int_on_cuda([cuda(dt), cuda(dt)])
        _refuse_narrow_int_on_cuda([cuda(dt)])
        _refuse_narrow_int_on_cuda([NS(is_cuda=False, dtype=dt)] * 2)
    _refuse_narrow_int_on_cuda([cuda(torch.int64)] * 3)


def test_cublas_declines_integers_with_torchs_reason():
    """cuBLAS has no integer GEMM and torch's CUDA matmuls refuse integers: the cuBLAS plans declare the floating
    types and their refusal says why (on a GPU the Triton kernel or nothing runs integer products); addr / outer of
    integers run torch.addr / torch.outer there (elementwise kernels)."""
    from baracuda._core.dtypes import FLOAT_TYPES
    from baracuda._core.registry import refusal

    for op in CUBLAS_OPS + ("mm", "bmm", "matmul", "linear"):
        impl = next(i for i in implementations(op) if i.backend == Backend.CUBLAS)
        if op in ("addr", "outer"):
            assert impl.dtypes is None, op
            continue
        assert impl.dtypes == frozenset(FLOAT_TYPES) and "addmm_cuda" in impl.dtypes_note, op
        if DEV.type == "cuda":
            desc = bc.Descriptor.make(op, *[(s, "i64") for s in _INT_CASES[op][1]], **(
                {"equation": "bij,bjk->bik"} if op == "einsum" else {}))
            assert "torch's CUDA matmuls refuse integers" in refusal(impl, desc, DEV, bc.PlanPreference()), op
