"""Typed op attributes: ``Attr`` declares one attribute of an op (kind, default, domain); ``OpSpec.attrs`` lists
them and every Descriptor's attributes are validated and normalized against them, in one place, before the op's
shape rule runs (``_AttrTable``, built once per spec)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .dtypes import DType
from .errors import ArgumentTypeError, InvalidProblemError

__all__ = ["Attr", "REQUIRED", "ATTR_KINDS", "norm_axis", "norm_axes"]


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

        def bad(op, v, error=InvalidProblemError):
            return error(op, label, attr.describe(), str(v) if isinstance(v, DType) else repr(v))

        def bad_type(op, v):
            """A value of the wrong Python type (a str for an int, a float for an axis): a TypeError too."""
            return bad(op, v, ArgumentTypeError)

        def ints(op, v):
            if type(v) is tuple and all(type(a) is int for a in v):    # the common case, already normalized
                return v
            if _is_int(v):
                return (int(v),)
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                raise bad_type(op, v)
            v = tuple(v)
            if not all(_is_int(a) for a in v):
                raise bad_type(op, v)
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
                    raise bad_type(op, v)
                return int(v)
        elif kind in ("float", "number"):
            as_float = kind == "float"

            def check(op, v, inputs, attrs):
                if type(v) is float:
                    return v
                if not isinstance(v, _REAL_T) or isinstance(v, _BOOL_T):
                    raise bad_type(op, v)
                return float(v) if as_float or isinstance(v, np.floating) else int(v) if isinstance(v, np.integer) \
                    else v
        elif kind == "bool":
            def check(op, v, inputs, attrs):
                if not isinstance(v, _BOOL_T):
                    raise bad_type(op, v)
                return bool(v)
        elif kind == "str":
            def check(op, v, inputs, attrs):
                if not isinstance(v, str):
                    raise bad_type(op, v)
                return v
        elif kind == "axis":
            def check(op, v, inputs, attrs):
                if not _is_int(v):
                    raise bad_type(op, v)
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
                    raise bad_type(op, v) from None
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
