"""What the specs derive from one another, and what the loader checks once they are all registered:

* ``backward_spec``: a fused backward op's OpSpec from its forward's (the ``grad`` operand checked against the
  forward's output, the saved operands by the forward's own rule, attributes, samples, error cases, workloads);
* op references: every op a backward rule composes by name (``declare_rule_ops``, ``OpSpec.uses``,
  ``fused_grad``) exists; ``check_op_references`` runs when baracuda is imported (``_load.py``).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from .attrs import Attr
from .dtypes import DType, as_dtype
from .errors import BaracudaError, DTypeMismatchError, InvalidProblemError
from .spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, _SPECS

__all__ = ["backward_spec", "renamed_error", "declare_rule_ops", "declared_ops", "check_op_references", "CTX_OPS"]


# -- fused backward ops, derived from their forward spec -------------------------------------------------------
def _shift_attr(a: Attr, k: int) -> Attr:
    """``a`` for an op whose operands are the forward's shifted right by ``k`` (a leading ``grad``): a rank taken
    from input r is taken from input r + k; rank and normalize callables see the forward's operands."""
    ch: dict = {}
    if a.kind in ("axis", "axes"):
        r = a.rank
        ch["rank"] = (lambda inputs, attrs, r=r: r(inputs[k:], attrs)) if callable(r) else r + k
    if a.normalize is not None:
        n = a.normalize
        ch["normalize"] = lambda op, v, inputs, attrs, n=n: n(op, v, inputs[k:], attrs)
    return dataclasses.replace(a, **ch) if ch else a


def renamed_error(e: BaracudaError, old: str, new: str) -> BaracudaError:
    """The forward's error ``e`` as the backward op's own (its message names ``new``)."""
    if getattr(e, "op", None) == old and e.args and str(e.args[0]).startswith(old + ":"):
        e.op = new
        e.args = (new + e.args[0][len(old):],) + e.args[1:]
    return e


def _np_dtype(x) -> DType:
    return as_dtype(np.asarray(x).dtype)


def backward_spec(forward: OpSpec, name: str | None = None, *, saved: tuple[str, ...] | None = None,
                  grads: tuple[int, ...] | None = None, grad_of: int = 0, grad_what: str = "the output's",
                  forward_of: Callable | None = None, outputs: Callable | None = None,
                  saved_values: Callable | None = None, sample_filter: Callable | None = None,
                  lead: tuple[tuple[str, int], ...] = (), lead_values: Callable | None = None, **overrides) -> OpSpec:
    """The fused backward op of ``forward``, derived from its spec: ``name(grad, *saved) -> gradients``.

    saved: the operands after ``grad``: None (the forward's own operands, trailing optional ones as given), or
        names of which ``"out"`` is the forward's output (then ``forward_of(saved, attrs) -> (forward operands,
        forward attrs)`` rebuilds the forward problem for the check, and ``saved_values(inputs, attrs) -> arrays``
        computes the saved tensors of a sample in NumPy).
    check: the forward's own rule on the forward operands (its errors renamed to this op), then ``grad`` against
        the forward's output ``grad_of``: ``InvalidProblemError(op, 'grad', "<grad_what> shape S", given)`` and
        ``DTypeMismatchError(op, 'grad', dtype, given)``.
    outputs: the gradients of the forward inputs ``grads`` (default: ``forward.differentiable``) that are present,
        each the input's shape and dtype, or ``outputs(forward operands, attrs) -> TensorSpecs``.
    attrs: the forward's, ranks shifted past ``grad``.  samples: each forward sample (``sample_filter`` keeps it)
        with a random upstream gradient of the output's shape (N(0, 1), never zeros) and the saved tensors.
    errors: the forward's error cases with a ``grad`` operand in front (their pattern names this op), a grad of
        the wrong shape and one of the wrong dtype.  workloads: the forward's, a grad operand added, forward only.
    lead: (name, j) of forward outputs the backward takes right after ``grad``, before the forward's operands
        (cross_entropy's lse: ``cross_entropy_backward(grad, lse, input, target[, weight])``; in front, so an
        optional trailing forward operand keeps its position), each checked against the forward's output j
        (``InvalidProblemError(op, name, "the forward's <name> shape S", given)``, ``DTypeMismatchError``);
        ``lead_values(inputs, attrs) -> arrays`` computes them for the samples in NumPy.
    Anything else (torch_peer, tol, cost, doc, or samples / errors / workloads themselves) is an override.
    """
    name = name or f"{forward.name}_backward"
    grads = forward.differentiable if grads is None else grads
    from_out = saved is not None and "out" in saved
    k = 1 + len(lead)   # grad and the lead outputs come before the forward's operands

    def problem(ops, attrs):
        return forward_of(ops, attrs) if from_out else (ops, attrs)

    def check(inputs, attrs):
        if not inputs:
            raise InvalidProblemError(name, "inputs", "the upstream gradient 'grad' first", 0)
        if from_out and len(inputs) != k + len(saved):
            raise InvalidProblemError(name, "inputs", f"{1 + len(saved)} operands {('grad',) + tuple(saved)}",
                                      len(inputs))
        g = inputs[0]
        try:
            xs, fattrs = problem(tuple(inputs[k:]), attrs)
            fattrs, outs = forward.check(tuple(xs), dict(fattrs))
        except BaracudaError as e:
            raise renamed_error(e, forward.name, name) from None
        want = outs[grad_of]
        if g.shape != want.shape:
            raise InvalidProblemError(name, "grad", f"{grad_what} shape {want.shape}", g.shape)
        if g.dtype != want.dtype:
            raise DTypeMismatchError(name, "grad", str(want.dtype), str(g.dtype))
        for (lname, j), t in zip(lead, inputs[1:k]):
            if t.shape != outs[j].shape:
                raise InvalidProblemError(name, lname, f"the forward's {lname} shape {outs[j].shape}", t.shape)
            if t.dtype != outs[j].dtype:
                raise DTypeMismatchError(name, lname, str(outs[j].dtype), str(t.dtype))
        res = outputs(xs, fattrs) if outputs is not None else \
            tuple(TensorSpec(xs[i].shape, xs[i].dtype) for i in grads if i < len(xs))
        return (attrs if from_out else fattrs), res

    def forward_out(ins: tuple, attrs: dict) -> tuple:
        """(forward operand specs, their output specs) of a forward problem."""
        a = forward.validate_attrs(ins, attrs)
        return forward.check(ins, a)[1]

    def operands(specs: tuple, outs: tuple, arrays: tuple | None = None, attrs=None) -> tuple:
        if not from_out:
            return tuple(arrays if arrays is not None else specs)
        if arrays is not None:
            return tuple(saved_values(arrays, attrs))
        return tuple(outs[0] if n == "out" else specs[forward.arg_names.index(n)] for n in saved)

    def samples(rng):
        for s in forward.samples(rng):
            if sample_filter is not None and not sample_filter(s):
                continue
            ins = tuple(np.asarray(x) for x in s.inputs)
            outs = forward_out(tuple(TensorSpec(x.shape, _np_dtype(x)) for x in ins), s.attrs)
            g = np.asarray(rng.standard_normal(outs[grad_of].shape))
            led = tuple(lead_values(ins, s.attrs)) if lead else ()
            yield Sample((g,) + led + operands((), outs, ins, s.attrs), dict(s.attrs), name=s.name, grad=False,
                         acc=tuple(range(1, k)))

    def errors():
        for c in forward.errors():
            dt = c.inputs[0][1] if c.inputs else "f32"   # the forward's check raises before the lead operands'
            yield ErrorCase((((), dt),) * k + tuple(c.inputs), c.attrs, c.exc,
                            c.match.replace(f"{forward.name}:", f"{name}:"), f"forward-{c.name}")
        s = next(iter(forward.samples(np.random.default_rng(0))))   # the first sample, its floats in f32
        dts = [_np_dtype(x) for x in s.inputs]
        specs = tuple(TensorSpec(np.shape(x), DType.f32 if d.is_floating else d) for x, d in zip(s.inputs, dts))
        outs = forward_out(specs, s.attrs)
        led = tuple((outs[j].shape, outs[j].dtype) for _, j in lead)
        rest = led + tuple((t.shape, t.dtype) for t in operands(specs, outs))
        o = outs[grad_of]
        yield ErrorCase(((o.shape + (2,), o.dtype),) + rest, dict(s.attrs), InvalidProblemError,
                        r"argument 'grad': expected .*shape", "grad-shape")
        other = DType.f16 if o.dtype != DType.f16 else DType.f32
        yield ErrorCase(((o.shape, other),) + rest, dict(s.attrs), DTypeMismatchError,
                        rf"argument 'grad': expected dtype {o.dtype}", "grad-dtype")
        for i, (lname, j) in enumerate(lead):
            bad = list(rest)
            bad[i] = (outs[j].shape + (2,), outs[j].dtype)
            yield ErrorCase(((o.shape, o.dtype),) + tuple(bad), dict(s.attrs), InvalidProblemError,
                            rf"argument '{lname}': expected the forward's {lname} shape", f"{lname}-shape")

    def workload_specs(w: Workload, hints) -> tuple:
        specs = []
        for e, h in zip(w.shapes, hints):
            if isinstance(e, TensorSpec):
                specs.append(e)
            elif len(e) == 2 and isinstance(e[0], (tuple, list)) and isinstance(e[1], (str, DType)):
                specs.append(TensorSpec(tuple(e[0]), as_dtype(e[1])))
            else:
                specs.append(TensorSpec(tuple(e), h if h is not None and not (h.is_floating or h.is_complex) else w.dtype))
        return tuple(specs)

    def workloads():
        out = []
        for w in forward.workloads:
            specs = workload_specs(w, (None,) * len(w.shapes))
            try:
                outs = forward_out(specs, w.attrs)
            except BaracudaError:   # a bare shape of integers (class targets): the samples' dtypes, as the bench
                hints = next((tuple(_np_dtype(x) for x in s.inputs) for s in forward.samples(np.random.default_rng(0))
                              if len(s.inputs) == len(w.shapes)), (None,) * len(w.shapes))
                specs = workload_specs(w, hints)
                outs = forward_out(specs, w.attrs)
            ops = (outs[grad_of],) + tuple(outs[j] for _, j in lead) + operands(specs, outs)
            wname = name + w.name[len(forward.name):] if w.name.startswith(forward.name) else f"{name}-{w.name}"
            out.append(Workload(wname, tuple((t.shape, t.dtype) for t in ops), w.dtype, dict(w.attrs), False,
                                dict(w.pref)))
        return tuple(out)

    arg_names = ("grad",) + tuple(n for n, _ in lead) + (tuple(saved) if saved is not None else forward.arg_names)
    fields = dict(name=name, family=forward.family, arg_names=arg_names, check=check, dtypes=forward.dtypes,
                  attrs=None if forward.attrs is None else tuple(_shift_attr(a, k) for a in forward.attrs),
                  samples=samples if forward.samples is not None else None,
                  errors=errors if forward.errors is not None else None, tol=forward.tol,
                  category=forward.category, doc=f"fused backward of {forward.name}: the gradients of its "
                  "differentiable inputs from the upstream gradient and the saved tensors, in one kernel.")
    fields.update(overrides)
    spec = OpSpec(derived_from=forward.name, **fields)
    if "workloads" not in overrides and forward.workloads:
        spec.workloads = workloads()
    return spec


# -- op references: every op a backward rule composes by name exists ----------------------------------------
_RULE_OPS: dict[str, frozenset] = {}   # module -> the op names its backward rules use (ctx.op("mul", ...))
CTX_OPS = ("sum",)   # what the backward context itself runs (ctx.reduce_to)


def declare_rule_ops(module: str, *names: str) -> None:
    """Declare the op names the backward rules defined in ``module`` compose (``declare_rule_ops(__name__,
    "mul", "neg")``).  The loader checks them once every family registered; tests/core/test_op_references.py
    traces every rule and checks that it used only declared names."""
    _RULE_OPS[module] = _RULE_OPS.get(module, frozenset()) | frozenset(names)


def declared_ops(spec: OpSpec) -> frozenset:
    """The op names ``spec``'s backward rule may use: its ``uses``, its rule module's declaration, CTX_OPS."""
    mod = getattr(spec.grad, "__module__", None)
    return frozenset(spec.uses) | _RULE_OPS.get(mod, frozenset()) | frozenset(CTX_OPS)


def check_op_references() -> None:
    """Raise ValueError naming each spec whose declared backward ops (``uses``, its rule module's declaration) or
    ``fused_grad`` are not registered ops.  Run once by the loader (about 0.2 ms for 358 specs)."""
    bad = []
    for m, ns in _RULE_OPS.items():
        for n in sorted(x for x in ns if x not in _SPECS):   # the error path only: name the specs of those rules
            specs = [s.name for s in _SPECS.values() if getattr(s.grad, "__module__", None) == m]
            bad.append(f"{', '.join(specs[:6])}{' ...' if len(specs) > 6 else ''}: the backward rules of {m} "
                       f"declare unknown op {n!r}")
    bad += [f"{n!r} (the backward context's own op) is not registered" for n in CTX_OPS if n not in _SPECS]
    for s in _SPECS.values():
        bad += [f"{s.name}: uses unknown op {n!r}" for n in s.uses if n not in _SPECS]
        if s.fused_grad is not None and s.fused_grad not in _SPECS:
            bad.append(f"{s.name}: fused_grad names unknown op {s.fused_grad!r}")
    if bad:
        raise ValueError("backward rules name ops that do not exist:\n  " + "\n  ".join(bad))
