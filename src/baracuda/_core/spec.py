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

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .dtypes import DType, as_dtype
from .errors import BaracudaError, DTypeMismatchError, InvalidProblemError, UnsupportedError

__all__ = ["TensorSpec", "Descriptor", "OpSpec", "Sample", "ErrorCase", "Workload", "register_spec",
           "get_spec", "all_specs", "default_tol", "Attr", "REQUIRED", "norm_axis", "norm_axes",
           "set_bench_inputs", "backward_spec", "renamed_error", "declare_rule_ops", "declared_ops",
           "check_op_references"]


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


# -- typed attributes ------------------------------------------------------------------------------
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()   # an Attr default: the attribute must be given

_INT_T = (int, np.integer)
_BOOL_T = (bool, np.bool_)
_REAL_T = (int, float, np.integer, np.floating)
ATTR_KINDS = ("int", "float", "number", "bool", "str", "axis", "axes", "ints", "shape", "dtype", "any")
_KIND_TEXT = {"int": "an int", "float": "a real number", "number": "a real number", "bool": "a bool",
              "str": "a string", "axis": "an int", "axes": "None, an int or a tuple of ints",
              "ints": "a tuple of ints", "shape": "a tuple of non-negative ints", "dtype": "a dtype", "any": "a value"}


def norm_axis(op: str, arg: str, axis: int, rank: int) -> int:
    """``axis`` in [-rank, rank) -> [0, rank); a 0-d tensor takes 0 and -1 (torch)."""
    r = max(rank, 1)
    if not -r <= axis < r:
        raise InvalidProblemError(op, arg, f"an axis in [{-r}, {r - 1}]", axis)
    return axis % r


def norm_axes(op: str, arg: str, axes, rank: int) -> tuple[int, ...]:
    """None -> all axes; int or sequence -> sorted unique non-negative axes (duplicates are an error)."""
    if axes is None or axes == ():
        return tuple(range(rank))
    if isinstance(axes, int):
        axes = (axes,)
    out = [norm_axis(op, arg, int(a), rank) for a in axes]
    if len(set(out)) != len(out):
        raise InvalidProblemError(op, arg, "distinct axes", tuple(axes))
    return tuple(sorted(out))


def _is_int(v) -> bool:
    return type(v) is int or (isinstance(v, _INT_T) and not isinstance(v, _BOOL_T))


@dataclass(frozen=True)
class Attr:
    """One declared attribute of an op: its kind, default and domain.  ``OpSpec.attrs`` lists them; every
    Descriptor's attributes are validated and normalized against them before the spec's ``check`` runs, which
    then receives every declared attribute (defaults filled in).

    kind: one of ``ATTR_KINDS``:
      int     an int (NumPy ints accepted; bool, float and str are errors, never coerced)
      float   a real number (int or float; not bool or str), stored as float
      number  a real number kept as given (an int stays an int: clamp's bounds, pow_scalar's exponent)
      bool    True / False (NumPy bool accepted; 0 / 1 are errors)
      str     a string (``choices``: the allowed ones)
      axis    an int, normalized to [0, rank) against ``rank`` (a 0-d tensor takes 0 and -1)
      axes    None, an int or a sequence of ints, normalized against ``rank``, distinct; sorted, or in the
              given order with ``ordered=True`` (a permutation); None and () mean every axis (``optional``
              keeps None instead)
      ints    a sequence of ints of any sign -> tuple (an int alone -> a 1-tuple)
      shape   a sequence of non-negative ints -> tuple (an int alone -> a 1-tuple)
      dtype   a DType, a name ('bf16'), a NumPy or torch dtype -> DType (``choices``: the allowed ones)
      any     not checked by kind (``normalize`` may check)
    default: ``REQUIRED`` (must be given) or the value used when it is not given (trusted as declared;
      axis / axes defaults are normalized against the rank like given values).
    optional: None is accepted (and kept) besides the kind.
    none_default: None is accepted and means the default (torch signatures whose default is None).
    choices: the allowed values (str, dtype, any kind).
    ge / gt / le / lt: a range of numbers (int, float, number kinds).
    rank: axis / axes: the index of the input whose rank bounds them (default 0; a missing input leaves the
      axis un-normalized for the check's operand-count error), or ``f(inputs, attrs) -> rank`` (``attrs``:
      the attributes declared before this one, already normalized).
    label: the argument name in error messages (default: ``name``).
    expected: the "expected ..." text of this attribute's errors (default: from the kind, range, choices).
    normalize: ``f(op, value, inputs, attrs) -> value`` after the kind's checks (value is not None).
    """

    name: str
    kind: str = "any"
    default: Any = REQUIRED
    optional: bool = False
    none_default: bool = False
    choices: tuple | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    rank: int | Callable = 0
    ordered: bool = False
    label: str | None = None
    expected: str | None = None
    normalize: Callable | None = None
    doc: str = ""

    def __post_init__(self):
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"Attr {self.name!r}: unknown kind {self.kind!r} (one of {ATTR_KINDS})")
        object.__setattr__(self, "_validate", self._compile())

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def needs_inputs(self) -> bool:
        """Whether the default must be validated per call (rank-dependent kinds)."""
        return (self.kind in ("axis", "axes") and not self.required
                and not (self.default is None and (self.optional or self.kind == "axis")))

    def describe(self) -> str:
        """The 'expected ...' text: the kind, the range, the choices, 'or None'."""
        if self.expected:
            return self.expected
        if self.choices is not None:
            text = "one of " + ", ".join(repr(c) if isinstance(c, str) else str(c) for c in self.choices)
        else:
            text = _KIND_TEXT[self.kind]
            bounds = [f"{op} {v:g}" for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
                      if v is not None]
            if bounds:
                text += " " + " and ".join(bounds)
        return text + (" or None" if self.optional or self.none_default else "")

    def validate(self, op: str, value, inputs: tuple = (), attrs: dict | None = None):
        """The normalized value; raises InvalidProblemError(op, label, expected, given)."""
        return self._validate(op, value, inputs, {} if attrs is None else attrs)

    # -- the validator, built once per Attr ----------------------------------------------------------
    def _compile(self):  # noqa: C901  (one small closure per kind)
        label, kind, optional, choices, normalize = self.label or self.name, self.kind, self.optional, \
            self.choices, self.normalize
        none_default, default = self.none_default, self.default
        lo = (self.ge, False) if self.ge is not None else (self.gt, True) if self.gt is not None else None
        hi = (self.le, False) if self.le is not None else (self.lt, True) if self.lt is not None else None
        attr = self

        def bad(op, v):
            return InvalidProblemError(op, label, attr.describe(), str(v) if isinstance(v, DType) else repr(v))

        def ints(op, v):
            if type(v) is tuple and all(type(a) is int for a in v):    # the common case, already normalized
                return v
            if _is_int(v):
                return (int(v),)
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                raise bad(op, v)
            v = tuple(v)
            if not all(_is_int(a) for a in v):
                raise bad(op, v)
            return tuple(int(a) for a in v)

        def rank_of(inputs, attrs):
            r = attr.rank
            if callable(r):
                return r(inputs, attrs)
            return len(inputs[r].shape) if r < len(inputs) else None

        if kind == "int":
            def check(op, v, inputs, attrs):
                if type(v) is int:
                    return v
                if not _is_int(v):
                    raise bad(op, v)
                return int(v)
        elif kind in ("float", "number"):
            as_float = kind == "float"

            def check(op, v, inputs, attrs):
                if type(v) is float:
                    return v
                if not isinstance(v, _REAL_T) or isinstance(v, _BOOL_T):
                    raise bad(op, v)
                return float(v) if as_float or isinstance(v, np.floating) else int(v) if isinstance(v, np.integer) \
                    else v
        elif kind == "bool":
            def check(op, v, inputs, attrs):
                if not isinstance(v, _BOOL_T):
                    raise bad(op, v)
                return bool(v)
        elif kind == "str":
            def check(op, v, inputs, attrs):
                if not isinstance(v, str):
                    raise bad(op, v)
                return v
        elif kind == "axis":
            def check(op, v, inputs, attrs):
                if not _is_int(v):
                    raise bad(op, v)
                r = rank_of(inputs, attrs)
                return int(v) if r is None else norm_axis(op, label, int(v), r)
        elif kind == "axes":
            ordered = self.ordered

            def check(op, v, inputs, attrs):
                seq = () if v is None else ints(op, v)
                r = rank_of(inputs, attrs)
                if r is None:
                    return seq
                if not seq:
                    return tuple(range(r))
                out = [norm_axis(op, label, a, r) for a in seq]
                if len(set(out)) != len(out):
                    raise InvalidProblemError(op, label, "distinct axes", seq)
                return tuple(out) if ordered else tuple(sorted(out))
        elif kind == "ints":
            def check(op, v, inputs, attrs):
                return ints(op, v)
        elif kind == "shape":
            def check(op, v, inputs, attrs):
                s = ints(op, v)
                if any(d < 0 for d in s):
                    raise bad(op, s)
                return s
        elif kind == "dtype":
            from .dtypes import as_dtype as _as_dtype

            def check(op, v, inputs, attrs):
                try:
                    return _as_dtype(v)
                except (TypeError, ValueError, KeyError):
                    raise bad(op, v) from None
        else:
            def check(op, v, inputs, attrs):
                return v

        def validate(op, v, inputs, attrs):
            if v is None:
                if optional:
                    return None
                if none_default:
                    return default
            v = check(op, v, inputs, attrs)
            if choices is not None and v not in choices:
                raise bad(op, v)
            if lo is not None and not (v > lo[0] or (not lo[1] and v == lo[0])):    # NaN is out of any range
                raise bad(op, v)
            if hi is not None and not (v < hi[0] or (not hi[1] and v == hi[0])):
                raise bad(op, v)
            if normalize is not None:
                v = normalize(op, v, inputs, attrs)
            return v
        return validate


class _AttrTable:
    """An OpSpec's attribute validator, built once: declared names, defaults, the per-call checks."""

    __slots__ = ("op", "attrs", "by_name", "defaults", "required", "dynamic", "names")

    def __init__(self, op: str, attrs: tuple):
        self.op = op
        self.attrs = attrs
        self.by_name = {a.name: a for a in attrs}
        if len(self.by_name) != len(attrs):
            raise ValueError(f"{op}: an attribute is declared twice")
        self.defaults = {a.name: a.default for a in attrs if not a.required}
        self.required = tuple(a.name for a in attrs if a.required)
        self.dynamic = tuple(a for a in attrs if a.needs_inputs)
        self.names = sorted(self.by_name)

    def __call__(self, inputs: tuple, given) -> dict:
        if not given and not self.required and not self.dynamic:
            return dict(self.defaults)
        op, by_name = self.op, self.by_name
        out: dict = {}
        for k in given:
            if k not in by_name:
                raise InvalidProblemError(op, k, f"one of the attributes {self.names}" if self.names else
                                          "no attributes (the op takes none)", "an unknown attribute")
        for a in self.attrs:      # declaration order: a rank may depend on an earlier attribute
            n = a.name
            if n in given:
                out[n] = a._validate(op, given[n], inputs, out)
            elif a.required:
                raise InvalidProblemError(op, a.label or n, a.describe(), "nothing")
            elif a.needs_inputs:
                out[n] = a._validate(op, a.default, inputs, out)
            else:
                out[n] = a.default
        return out


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
        """inputs: TensorSpec, or (shape, dtype) pairs."""
        ins = []
        for i, x in enumerate(inputs):
            if isinstance(x, TensorSpec):
                ins.append(x)
            else:
                try:
                    shape, dt = x
                    shape = tuple(shape)
                except (TypeError, ValueError):
                    raise InvalidProblemError(op, f"input {i}", "a (shape, dtype) pair or TensorSpec", repr(x)) from None
                if not all(_is_int(s) and s >= 0 for s in shape):
                    raise InvalidProblemError(op, f"input {i}", "a shape of non-negative ints", repr(shape))
                ins.append(TensorSpec(tuple(int(s) for s in shape), as_dtype(dt)))
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
    # raise a clear error here (never be ignored).
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
    # an op computing this op's (scalar) output AND the gradient of its differentiable inputs in one pass
    # (cross_entropy -> cross_entropy_with_grad): the torch drop-in runs it under eager autograd and scales the
    # saved gradient in place in the backward.  If the fused op's first argument is named "grad" it takes the
    # upstream gradient (this op's operands follow): the drop-in passes the upstream its previous backward saw,
    # so a step whose upstream repeats needs no scaling pass; otherwise it computes for a unit upstream (no
    # pass when the upstream is 1)
    fused_grad: str | None = None
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

    @property
    def is_differentiable(self) -> bool:
        return self.grad is not None and bool(self.differentiable)

    def check_dtypes(self, inputs: tuple) -> None:
        for i, t in enumerate(inputs):
            if t.dtype not in self.dtypes:
                raise UnsupportedError(
                    self.name, f"argument '{self.arg_names[i] if i < len(self.arg_names) else i}' has dtype "
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
                  saved_values: Callable | None = None, sample_filter: Callable | None = None, **overrides) -> OpSpec:
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
    Anything else (torch_peer, tol, cost, doc, or samples / errors / workloads themselves) is an override.
    """
    name = name or f"{forward.name}_backward"
    grads = forward.differentiable if grads is None else grads
    from_out = saved is not None and "out" in saved

    def problem(ops, attrs):
        return forward_of(ops, attrs) if from_out else (ops, attrs)

    def check(inputs, attrs):
        if not inputs:
            raise InvalidProblemError(name, "inputs", "the upstream gradient 'grad' first", 0)
        if from_out and len(inputs) != 1 + len(saved):
            raise InvalidProblemError(name, "inputs", f"{1 + len(saved)} operands {('grad',) + tuple(saved)}",
                                      len(inputs))
        g = inputs[0]
        try:
            xs, fattrs = problem(tuple(inputs[1:]), attrs)
            fattrs, outs = forward.check(tuple(xs), dict(fattrs))
        except BaracudaError as e:
            raise renamed_error(e, forward.name, name) from None
        want = outs[grad_of]
        if g.shape != want.shape:
            raise InvalidProblemError(name, "grad", f"{grad_what} shape {want.shape}", g.shape)
        if g.dtype != want.dtype:
            raise DTypeMismatchError(name, "grad", str(want.dtype), str(g.dtype))
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
            yield Sample((g,) + operands((), outs, ins, s.attrs), dict(s.attrs), name=s.name, grad=False)

    def errors():
        for c in forward.errors():
            lead = c.inputs[0][1] if c.inputs else "f32"
            yield ErrorCase((((), lead),) + tuple(c.inputs), c.attrs, c.exc,
                            c.match.replace(f"{forward.name}:", f"{name}:"), f"forward-{c.name}")
        s = next(iter(forward.samples(np.random.default_rng(0))))   # the first sample, its floats in f32
        dts = [_np_dtype(x) for x in s.inputs]
        specs = tuple(TensorSpec(np.shape(x), DType.f32 if d.is_floating else d) for x, d in zip(s.inputs, dts))
        outs = forward_out(specs, s.attrs)
        rest = tuple((t.shape, t.dtype) for t in operands(specs, outs))
        o = outs[grad_of]
        yield ErrorCase(((o.shape + (2,), o.dtype),) + rest, dict(s.attrs), InvalidProblemError,
                        r"argument 'grad': expected .*shape", "grad-shape")
        other = DType.f16 if o.dtype != DType.f16 else DType.f32
        yield ErrorCase(((o.shape, other),) + rest, dict(s.attrs), DTypeMismatchError,
                        rf"argument 'grad': expected dtype {o.dtype}", "grad-dtype")

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
            ops = (outs[grad_of],) + operands(specs, outs)
            wname = name + w.name[len(forward.name):] if w.name.startswith(forward.name) else f"{name}-{w.name}"
            out.append(Workload(wname, tuple((t.shape, t.dtype) for t in ops), w.dtype, dict(w.attrs), False,
                                dict(w.pref)))
        return tuple(out)

    arg_names = ("grad",) + (tuple(saved) if saved is not None else forward.arg_names)
    fields = dict(name=name, family=forward.family, arg_names=arg_names, check=check, dtypes=forward.dtypes,
                  attrs=None if forward.attrs is None else tuple(_shift_attr(a, 1) for a in forward.attrs),
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
