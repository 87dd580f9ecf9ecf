"""Op specs and descriptors.

An ``OpSpec`` is the single source of truth for one op: its signature, shape/dtype rule, torch peer,
backward rule, sample and error inputs, tolerances, benchmark workloads and cost model.  The generic
tests, the coverage matrix and the benchmark suite are all generated from the specs.

A ``Descriptor`` is pure data (op name, operand shapes and dtypes, attributes), validated at
construction: first the attributes against the spec's declared ``attrs`` (``Attr``: kind, default, range,
choices -- one validator per spec, built once), then the spec's shape rule, which also fixes the output shapes
and dtypes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .attrs import REQUIRED, Attr, _AttrTable, _is_int, norm_axes, norm_axis  # noqa: F401  (re-exported)
from .dtypes import DType, as_dtype
from .errors import ArgumentTypeError, InvalidProblemError, UnsupportedError

__all__ = ["TensorSpec", "Descriptor", "OpSpec", "Sample", "ErrorCase", "Workload", "register_spec",
           "get_spec", "all_specs", "default_tol", "Attr", "REQUIRED", "norm_axis", "norm_axes",
           "set_bench_inputs"]


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: DType

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass(frozen=True)
class Descriptor:
    """What to compute: ``op``, operand ``inputs`` (TensorSpec each) and ``attrs``.

    Build one with :meth:`make` (``Descriptor.make("softmax", ((4096, 512), "bf16"), dim=-1)``) or
    :meth:`like` (from arrays).  Construction validates through the op's spec and fills ``outputs``.
    """

    op: str
    inputs: tuple[TensorSpec, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    outputs: tuple[TensorSpec, ...] = field(default=(), compare=False, hash=False)

    def __post_init__(self):
        spec = get_spec(self.op)
        table = spec._attr_table
        attrs = dict(self.attrs) if table is None else table(self.inputs, dict(self.attrs))
        attrs, outputs = spec.check(self.inputs, attrs)
        object.__setattr__(self, "attrs", tuple(sorted((k, _freeze(v)) for k, v in attrs.items())))
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "_attr_map", dict(self.attrs))

    @classmethod
    def make(cls, op: str, *inputs, **attrs) -> "Descriptor":
        """inputs: TensorSpec, or (shape, dtype) pairs.  A malformed one raises ArgumentTypeError (a TypeError and
        an InvalidProblemError) naming the op and the operand."""
        spec = get_spec(op)
        ins = []
        for i, x in enumerate(inputs):
            if isinstance(x, TensorSpec):
                ins.append(x)
                continue
            arg = spec.arg_name(i)
            try:
                shape, dt = x
                shape = tuple(shape)
            except (TypeError, ValueError):
                raise ArgumentTypeError(op, arg, "a (shape, dtype) pair or TensorSpec", repr(x)) from None
            if not all(_is_int(s) for s in shape):
                raise ArgumentTypeError(op, arg, "a shape of non-negative ints", repr(shape))
            if not all(s >= 0 for s in shape):
                raise InvalidProblemError(op, arg, "a shape of non-negative ints", repr(shape))
            try:
                dt = as_dtype(dt)
            except (TypeError, ValueError, KeyError):
                raise ArgumentTypeError(op, arg, "a dtype (a NumPy or torch dtype, or one of "
                                        f"{', '.join(sorted(d.short for d in DType))})", repr(dt)) from None
            ins.append(TensorSpec(tuple(int(s) for s in shape), dt))
        return cls(op, tuple(ins), tuple(sorted(attrs.items())))

    @classmethod
    def like(cls, op: str, *arrays, **attrs) -> "Descriptor":
        from .tensors import shape_dtype_device

        specs = []
        for a in arrays:
            shape, dt, _ = shape_dtype_device(a)
            specs.append(TensorSpec(tuple(shape), dt))
        return cls(op, tuple(specs), tuple(sorted(attrs.items())))

    @property
    def spec(self) -> "OpSpec":
        return get_spec(self.op)

    @property
    def dtype(self) -> DType:
        """The dtype the SKU is keyed on: the first input's (the output's for ops without inputs)."""
        if self.inputs:
            return self.inputs[0].dtype
        return self.outputs[0].dtype

    def attr(self, name: str):
        return self._attr_map[name]

    @property
    def attr_dict(self) -> dict:
        return dict(self._attr_map)

    def __str__(self) -> str:
        a = ", ".join(f"{k}={v}" for k, v in self.attrs)
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"{self.op}({ins}{', ' + a if a else ''}) -> {outs}"


@dataclass
class Sample:
    """One sample input: arrays (float64 NumPy, cast by the test to the dtype under test) and attrs."""

    inputs: tuple
    attrs: dict = field(default_factory=dict)
    name: str = ""
    grad: bool = True   # whether the gradient check uses this sample (keep finite-difference cases small)
    # operands cast to the accumulation dtype of the dtype under test (f64 for f64, else f32) instead of that
    # dtype: a fused backward's saved statistics (cross_entropy_backward's lse)
    acc: tuple[int, ...] = ()


@dataclass
class ErrorCase:
    """Inputs (shape, dtype) pairs and attrs that must raise ``exc`` with a message matching ``match``."""

    inputs: tuple
    attrs: dict
    exc: type
    match: str
    name: str = ""


@dataclass
class Workload:
    """A benchmark problem: input shapes, dtype, attrs, and whether backward is timed too.

    shapes: one entry per input, a shape (the input takes ``dtype``, or the samples' integer dtype where the
    samples hold integers, e.g. class targets) or a (shape, dtype) pair.
    pref: PlanPreference keyword arguments for this workload (e.g. {"allow_reduced_precision": True} for a
    TF32 row); the PyTorch peers then run with the matching torch math flags, so the comparison is like for like.
    """

    name: str
    shapes: tuple
    dtype: DType
    attrs: dict = field(default_factory=dict)
    backward: bool = False
    pref: dict = field(default_factory=dict)


Tol = tuple[float, float]
_DEFAULT_TOL: dict[DType, Tol] = {
    # rtol, atol. f32: a few ulps of accumulated rounding; f16/bf16: inputs and outputs are rounded to
    # 11 / 8 significant bits (2^-11 ~ 5e-4, 2^-8 ~ 4e-3), so 1e-2 leaves room for one extra rounding.
    DType.f64: (1e-10, 1e-12),
    DType.f32: (1e-5, 1e-6),
    DType.f16: (1e-2, 1e-3),
    DType.bf16: (1.6e-2, 1e-2),
    DType.f8e4m3: (1.3e-1, 1e-1),
    DType.f8e5m2: (2.6e-1, 1e-1),
}


def default_tol(dt: DType) -> Tol:
    return _DEFAULT_TOL.get(dt, (0.0, 0.0))


@dataclass
class OpSpec:
    """Everything the library and its tests know about one op.

    check(inputs, attrs) -> (normalized attrs, output TensorSpecs): the shape/dtype rule; raises
        InvalidProblemError / DTypeMismatchError with the op and argument named.
    torch_peer(*tensors, **attrs): the semantic peer in PyTorch (None where torch has no such op).
    grad(ctx, grads, inputs, outputs, attrs) -> tuple of input grads (None where not needed):
        composed from other baracuda ops through ``ctx``; ``saves`` names which of "inputs"/"outputs"
        the backward plan keeps.
    """

    name: str
    family: str
    arg_names: tuple[str, ...]
    check: Callable[[tuple, dict], tuple[dict, Sequence[TensorSpec]]]
    dtypes: tuple[DType, ...]
    defaults: dict = field(default_factory=dict)
    torch_peer: Callable | None = None
    torch_name: str | None = None      # e.g. "torch.nn.functional.gelu" (documentation + coverage)
    # dropin(*args, **kwargs) with exactly torch_name's signature -> (inputs tuple of tensors, attrs dict).
    # baracuda.torch publishes one drop-in function per spec that has it; unsupported torch arguments must
    # raise a clear error here (never be ignored).  None instead: a form of the torch function this op does not take,
    # which baracuda.torch composes of other drop-ins (torch/_composed.py, keyed by the op's name).
    dropin: Callable | None = None
    # dropin_result(out) -> what the torch function returns, e.g. torch.return_types.max(out) for (values, indices).
    dropin_result: Callable | None = None
    torch_aliases: tuple[str, ...] = ()  # more torch names with the same signature (torch.softmax for F.softmax)
    jax_name: str | None = None
    grad: Callable | None = None
    # what the backward plan keeps: "inputs" / "outputs" / argument names / "out", "out1"...; or a function of
    # the descriptor returning those (reduce_to keeps x only for its max/min/prod modes)
    saves: tuple[str, ...] | Callable = ("inputs",)
    differentiable: tuple[int, ...] = ()  # indices of inputs that receive gradients
    # trailing outputs that carry no gradient: factors the op hands its backward (solve's LU and pivots), which the
    # drop-ins do not return; the generic tests give them no upstream gradient (their values are still checked)
    saved_outputs: int = 0
    # False where the backward follows torch's convention rather than the derivative (ctc_loss adds
    # exp(log_probs) * scale: the gradient of the logits under a log_softmax): finite differences of the forward
    # cannot check it, torch.autograd does
    grad_is_derivative: bool = True
    # an op computing this op's (scalar) output AND the gradient of its differentiable inputs in one pass
    # (cross_entropy -> cross_entropy_with_grad): the torch drop-in runs it under eager autograd and scales the
    # saved gradient in place in the backward.  If the fused op's first argument is named "grad" it takes the
    # upstream gradient (this op's operands follow): the drop-in passes the upstream its previous backward saw,
    # so a step whose upstream repeats needs no scaling pass; otherwise it computes for a unit upstream (no
    # pass when the upstream is 1)
    fused_grad: str | None = None
    # the inputs whose gradients the fused op returns, in order (None: every differentiable input); a call where
    # another input requires grad (cross_entropy's probability target) takes the ordinary forward / backward
    fused_grad_inputs: tuple[int, ...] | None = None
    samples: Callable[[np.random.Generator], Iterable[Sample]] | None = None
    errors: Callable[[], Iterable[ErrorCase]] | None = None
    tol: Callable[[DType], Tol] = default_tol
    grad_tol: Callable[[DType], Tol] | None = None
    workloads: tuple[Workload, ...] = ()
    cost: Callable[["Descriptor"], tuple[int, int]] | None = None   # (bytes moved, flops)
    category: str | None = None
    doc: str = ""
    # the declared attributes (``Attr``), validated in one place when a Descriptor is built, before ``check``
    # (which then receives every declared attribute, defaults filled in); None: undeclared (``check`` alone
    # validates; only for specs defined outside the library)
    attrs: tuple[Attr, ...] | None = None
    # the benchmark's inputs where the samples' value domains cannot describe valid ones (class indices in
    # range, the saved tensors of a fused backward): fn(desc, torch_device, torch_generator) -> list of tensors.
    # Set with ``set_bench_inputs``; baracuda.bench reads it (the ops never import the bench).
    inputs: Callable | None = None
    # the forward op this fused backward op was derived from (``backward_spec``), None for a declared spec
    derived_from: str | None = None
    # op names the backward rule composes that are data (a table row's backward op, a derived spec's name); the
    # literal names of a module's rules are declared with ``declare_rule_ops``; both are checked at import
    uses: tuple[str, ...] = ()
    # the index of the input whose memory format (channels_last / channels_last_3d) the plan's torch outputs of the
    # same rank follow (torch's suggest_memory_format rule for conv / pool / interpolate); None: contiguous outputs
    out_format_of: int | None = None
    # the output's values are unspecified (empty / empty_like: uninitialized memory, torch.empty's contract): only
    # shapes, dtypes and devices are compared by the tests
    values_unspecified: bool = False
    # the torch function a user calls for the same work when the bench should time it instead of torch_peer: one
    # whose values cannot match the op's (another random stream: torch's sort-based top-p sampling), or one faster
    # than torch_peer with another tie rule (torch.topk beside the stable sort's prefix).  The tests never compare
    # with it; the bench times it as the peer and, when torch_peer is set, takes the reference values from that
    bench_peer: Callable | None = None

    def __post_init__(self):
        if self.category is None:
            self.category = self.family
        self._attr_table = None
        if self.attrs is not None:
            self.attrs = tuple(self.attrs)
            self._attr_table = _AttrTable(self.name, self.attrs)
            self.defaults = dict(self._attr_table.defaults)

    def validate_attrs(self, inputs: tuple, attrs: dict) -> dict:
        """The declared attributes of a call, validated and normalized (defaults filled in)."""
        return dict(attrs) if self._attr_table is None else self._attr_table(tuple(inputs), attrs)

    def arg_name(self, i: int) -> str:
        """The name of operand ``i`` in error messages (``input 3`` past the declared names; a variadic op's
        ``arg_names`` names every position: ``tensors[3]``)."""
        try:
            return self.arg_names[i]
        except IndexError:
            return f"input {i}"

    @property
    def is_differentiable(self) -> bool:
        return self.grad is not None and bool(self.differentiable)

    def check_dtypes(self, inputs: tuple) -> None:
        for i, t in enumerate(inputs):
            if t.dtype not in self.dtypes:
                raise UnsupportedError(
                    self.name, f"argument '{self.arg_name(i)}' has dtype "
                    f"{t.dtype}; the op is defined for {', '.join(map(str, self.dtypes))}")

    def bytes_flops(self, desc: Descriptor) -> tuple[int, int]:
        if self.cost is not None:
            return self.cost(desc)
        nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
        return nbytes, sum(t.numel for t in desc.outputs)


_SPECS: dict[str, OpSpec] = {}
_PENDING_INPUTS: dict[str, Callable] = {}   # set_bench_inputs before the spec was registered


def register_spec(spec: OpSpec) -> OpSpec:
    if spec.name in _SPECS:
        raise ValueError(f"op spec {spec.name!r} registered twice")
    if spec.inputs is None and spec.name in _PENDING_INPUTS:
        spec.inputs = _PENDING_INPUTS.pop(spec.name)
    _SPECS[spec.name] = spec
    return spec


def set_bench_inputs(op: str, fn: Callable) -> None:
    """Declare ``op``'s benchmark input maker (``OpSpec.inputs``), before or after the spec is registered."""
    if op in _SPECS:
        _SPECS[op].inputs = fn
    else:
        _PENDING_INPUTS[op] = fn


def get_spec(name: str) -> OpSpec:
    """The registered spec of ``name`` (the families register at ``import baracuda``: see baracuda/_load.py)."""
    try:
        return _SPECS[name]
    except KeyError:
        raise UnsupportedError(name, f"unknown op {name!r}; known ops: {len(_SPECS)} (see `baracuda ops`)") from None


def all_specs() -> list[OpSpec]:
    return list(_SPECS.values())


def saved_names(desc: "Descriptor") -> list[str]:
    """The names of the tensors a backward plan of ``desc`` keeps: input argument names and ``out`` / ``outN``
    (an optional trailing operand this descriptor does not have is not saved)."""
    spec = desc.spec
    saves = spec.saves(desc) if callable(spec.saves) else spec.saves
    n_in = len(desc.inputs)
    outs = ["out"] if len(desc.outputs) == 1 else [f"out{j}" for j in range(len(desc.outputs))]
    names: list[str] = []
    for s in saves:
        if s == "inputs":
            names += list(spec.arg_names[:n_in])
        elif s == "outputs":
            names += outs
        elif s not in spec.arg_names or spec.arg_names.index(s) < n_in:
            names.append(s)
    return names
