"""Backward rules compose ops by name (``ctx.op("mul", ...)``): every name must be declared (``OpSpec.uses``, the
rule module's ``declare_rule_ops``) so that a missing op fails at ``import baracuda`` (``check_op_references``,
run by the loader), and the declarations cannot drift from the rules: each differentiable spec's rule is traced on
its samples with a recording context, and every name it used must be declared."""
from __future__ import annotations

import time

import numpy as np
import pytest

import baracuda as bc
from baracuda._core import derive as derive_mod
from baracuda._core.plan import ALL_NEEDED
from baracuda._core import spec as spec_mod
from baracuda._core.spec import Descriptor, TensorSpec
from baracuda._core.derive import declared_ops
from baracuda.testing import draw_samples


class RecordingCtx:
    """The trace-mode backward context (shapes only), recording every op name the rule runs."""

    trace = True
    needs = ALL_NEEDED

    def __init__(self):
        self.used: set[str] = set()

    @staticmethod
    def spec_of(x) -> TensorSpec:
        return x

    def op(self, name, *xs, **attrs):
        self.used.add(name)
        outs = Descriptor(name, tuple(xs), tuple(sorted(attrs.items()))).outputs
        return outs[0] if len(outs) == 1 else outs

    def shape(self, x):
        return tuple(x.shape)

    def reshape(self, x, shape):
        return TensorSpec(tuple(shape), x.dtype)

    def expand(self, x, shape):
        return TensorSpec(tuple(shape), x.dtype)

    def reduce_to(self, g, shape):
        if tuple(g.shape) != tuple(shape):
            self.used.add("sum")
        return TensorSpec(tuple(shape), g.dtype)


def traced_ops(spec, max_samples: int | None = 1) -> set[str]:
    """The op names ``spec``'s backward rule uses on its first ``max_samples`` samples (f64, or c128)."""
    used: set[str] = set()
    samples = [s for s in draw_samples(spec) if s.grad]   # the gradient-checked samples (as tests/generic)
    for sample in samples[:max_samples]:
        dt = bc.DType.f64 if bc.DType.f64 in spec.dtypes else spec.dtypes[0]
        ins = tuple(TensorSpec(np.shape(x), dt if np.asarray(x).dtype.kind in "fc" else bc.as_dtype(np.asarray(x).dtype))
                    for x in sample.inputs)
        try:
            desc = Descriptor(spec.name, ins, tuple(sorted(sample.attrs.items())))
        except (bc.UnsupportedError, ValueError, TypeError):
            continue
        ctx = RecordingCtx()
        names = bc.BackwardPlan._spec_for.__get__(type("P", (), {"desc": desc})())
        saved = {n: names(n) for n in spec_mod.saved_names(desc)}
        spec.grad(ctx, desc, tuple(desc.outputs), saved)
        used |= ctx.used
    return used


DIFF = [s for s in bc.all_specs() if s.grad is not None]


@pytest.mark.parametrize("spec", DIFF, ids=lambda s: s.name)
def test_backward_rule_uses_only_declared_ops(spec):
    undeclared = traced_ops(spec) - declared_ops(spec)
    assert not undeclared, f"{spec.name}: its backward rule uses {sorted(undeclared)} without declaring them"


def test_a_missing_op_fails_the_load_check(monkeypatch):
    s = bc.get_spec("softmax")
    monkeypatch.setattr(s, "uses", s.uses + ("sofmtax_backward",))
    with pytest.raises(ValueError, match=r"softmax: uses unknown op 'sofmtax_backward'"):
        derive_mod.check_op_references()


def test_a_missing_fused_grad_fails_the_load_check(monkeypatch):
    s = bc.get_spec("cross_entropy")
    monkeypatch.setattr(s, "fused_grad", "cross_entropy_with_grd")
    with pytest.raises(ValueError, match=r"cross_entropy: fused_grad names unknown op 'cross_entropy_with_grd'"):
        derive_mod.check_op_references()


def test_a_misdeclared_rule_module_fails_the_load_check(monkeypatch):
    monkeypatch.setitem(derive_mod._RULE_OPS, "baracuda.ops.elementwise",
                        derive_mod._RULE_OPS["baracuda.ops.elementwise"] | {"mull"})
    with pytest.raises(ValueError, match=r": the backward rules of baracuda.ops.elementwise declare unknown op 'mull'"):
        derive_mod.check_op_references()


def test_the_load_check_is_cheap():
    derive_mod.check_op_references()
    t = time.perf_counter()
    for _ in range(20):
        derive_mod.check_op_references()
    per = (time.perf_counter() - t) / 20
    assert per < 5e-3, f"check_op_references took {per * 1e3:.2f} ms"
