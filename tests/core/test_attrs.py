"""Typed attributes (``Attr`` on every OpSpec): one validator, when a Descriptor is built, before the op's check.
Wrong Python types are errors (never coerced), unknown names are errors, valid values are normalized."""
from __future__ import annotations

import time

import numpy as np
import pytest

import baracuda as bc
from baracuda._core.spec import REQUIRED, Attr, Descriptor, get_spec

F = ((3, 4), "f32")
X3 = ((2, 3, 4), "f32")
E = bc.InvalidProblemError


def make(op, *ins, **attrs):
    return Descriptor.make(op, *ins, **attrs)


def test_every_spec_declares_its_attributes():
    undeclared = [s.name for s in bc.all_specs() if s.attrs is None]
    assert undeclared == []
    for s in bc.all_specs():
        assert all(isinstance(a, Attr) for a in s.attrs), s.name
        assert s.defaults == {a.name: a.default for a in s.attrs if a.default is not REQUIRED}, s.name


# -- non-integer axes: 1.5, '0', True are errors, across families -------------------------------------------
@pytest.mark.parametrize("op, ins, attr", [
    ("softmax", (F,), "dim"), ("log_softmax_backward", (F, F), "dim"), ("cumsum", (F,), "dim"),
    ("argmax", (F,), "dim"), ("transpose", (F,), "dim0"), ("cat", (F, F), "dim"), ("stack", (F, F), "dim"),
    ("glu", (((3, 4), "f32"),), "dim"), ("normalize", (F,), "dim"), ("cosine_similarity", (F, F), "dim"),
    ("slice", (F,), "dim"), ("diagonal", (F,), "offset"), ("triu", (F,), "diagonal"),
])
@pytest.mark.parametrize("bad", [1.5, "0", True, None])
def test_non_integer_axis_is_an_error(op, ins, attr, bad):
    extra = {"dim": 0} if op == "slice" and attr != "dim" else {}
    if bad is None and get_spec(op).attrs[[a.name for a in get_spec(op).attrs].index(attr)].optional:
        make(op, *ins, **{attr: bad}, **extra)     # None is this attribute's declared default: accepted
        return
    with pytest.raises(E, match=rf"{op}: argument '{attr}': expected"):
        make(op, *ins, **{attr: bad}, **extra)


@pytest.mark.parametrize("op, ins, attr", [("sum", (F,), "dims"), ("var", (F,), "dims"), ("flip", (F,), "dims"),
                                           ("permute", (F,), "dims"), ("roll", (F,), "shifts")])
@pytest.mark.parametrize("bad", [(0, 1.5), ("0",), (True,), 0.5])
def test_non_integer_axes_are_an_error(op, ins, attr, bad):
    kw = {"shifts": 1} if op == "roll" and attr != "shifts" else {}
    with pytest.raises(E, match=r"argument '(dim|dims|shifts)': expected"):
        make(op, *ins, **{attr: bad}, **kw)


# -- a string / bool where a number is expected --------------------------------------------------------------
@pytest.mark.parametrize("op, ins, attr", [
    ("leaky_relu", (F,), "negative_slope"), ("add", (F, F), "alpha"), ("affine", (F,), "a"),
    ("layer_norm", (F,), "eps"), ("group_norm", (((2, 4, 3), "f32"),), "eps"), ("var", (F,), "correction"),
    ("pdist", (F,), "p"), ("cross_entropy", (F, ((3,), "i64")), "label_smoothing"),
    ("smooth_l1_loss", (F, F), "beta"), ("gumbel_softmax", (F,), "tau"), ("fill", (F,), "value"),
    ("clamp", (F,), "min"), ("pow_scalar", (F,), "exponent"),
])
@pytest.mark.parametrize("bad", ["1.5", True])
def test_string_or_bool_for_a_number_is_an_error(op, ins, attr, bad):
    kw = {"normalized_shape": (4,)} if op == "layer_norm" else {"num_groups": 2} if op == "group_norm" else \
        {"seed": 1} if op == "gumbel_softmax" else {}
    if op == "fill" and bad is True:
        make(op, *ins, **{attr: bad}, **kw)          # fill takes bools as 0/1 (torch.fill): accepted
        return
    with pytest.raises(E, match=rf"{op}: argument '{attr}': expected"):
        make(op, *ins, **{attr: bad}, **kw)


@pytest.mark.parametrize("op, ins, attr, bad", [
    ("sum", (F,), "keepdim", 1), ("matmul", (((3, 4), "f32"), ((4, 2), "f32")), "trans_a", 0),
    ("cumsum", (F,), "reverse", "yes"), ("kl_div", (F, F), "log_target", 1),
    ("cross_entropy", (F, ((3,), "i64")), "ignore_index", 1.0), ("cross_entropy", (F, ((3,), "i64")), "ignore_index", True),
    ("group_norm", (((2, 4, 3), "f32"),), "num_groups", 2.0), ("repeat", (F,), "repeats", (2, 1.5)),
])
def test_wrong_python_type_is_never_coerced(op, ins, attr, bad):
    kw = {"dim": 0} if op == "cumsum" else {}
    with pytest.raises(E, match=rf"argument '{attr}': expected"):
        make(op, *ins, **{attr: bad}, **kw)


# -- out-of-range numbers and choices -------------------------------------------------------------------------
@pytest.mark.parametrize("op, ins, attrs, arg", [
    ("cross_entropy", (F, ((3,), "i64")), {"reduction": "avg"}, "reduction"),
    ("mse_loss", (F, F), {"reduction": "batchmean"}, "reduction"),
    ("gelu", (F,), {"approximate": "erf"}, "approximate"),
    ("div", (F, F), {"rounding_mode": "ceil"}, "rounding_mode"),
    ("reduce_to", (F,), {"shape": (1, 4), "mode": "mean"}, "mode"),
    ("cdist_backward", (((3, 3), "f32"), F, F, ((3, 3), "f32")), {"wrt": 2}, "wrt"),
    ("cross_entropy", (F, ((3,), "i64")), {"label_smoothing": 1.5}, "label_smoothing"),
    ("gumbel_softmax", (F,), {"seed": -1}, "seed"), ("gumbel_softmax", (F,), {"seed": 1, "tau": 0.0}, "tau"),
    ("pdist", (F,), {"p": -1.0}, "p"), ("pdist", (F,), {"p": float("nan")}, "p"),
    ("logit", (F,), {"eps": 0.7}, "eps"),       # (normalize takes any real p, as torch)
    ("slice", (F,), {"dim": 0, "step": 0}, "step"), ("local_response_norm", (X3,), {"size": 0}, "size"),
])
def test_out_of_range_or_choice_is_an_error(op, ins, attrs, arg):
    with pytest.raises(E, match=rf"{op}: argument '{arg}': expected"):
        make(op, *ins, **attrs)


def test_choice_error_lists_the_choices():
    with pytest.raises(E, match=r"reduction': expected one of 'none', 'mean', 'sum', got 'avg'"):
        make("nll_loss", F, ((3,), "i64"), reduction="avg")


# -- unknown and missing attributes ----------------------------------------------------------------------------
@pytest.mark.parametrize("op, ins", [("softmax", (F,)), ("sum", (F,)), ("cat", (F, F)), ("layer_norm", (F,)),
                                     ("mse_loss", (F, F)), ("matmul", (F, ((4, 2), "f32")))])
def test_unknown_attribute_names_the_op_and_the_known_ones(op, ins):
    known = sorted(a.name for a in get_spec(op).attrs)
    with pytest.raises(E, match=rf"{op}: argument 'bogus': expected one of the attributes") as ei:
        make(op, *ins, bogus=1)
    assert str(known) in str(ei.value)


def test_unknown_attribute_of_an_op_without_attributes():
    with pytest.raises(E, match=r"exp: argument 'dims': expected no attributes"):
        make("exp", F, dims=1)


@pytest.mark.parametrize("op, ins, attr", [("softmax", (F,), "dim"), ("to_dtype", (F,), "dtype"),
                                           ("layer_norm", (F,), "normalized_shape"), ("permute", (F,), "dims")])
def test_missing_required_attribute(op, ins, attr):
    with pytest.raises(E, match=rf"{op}: argument '{attr}': expected .*got nothing"):
        make(op, *ins)


# -- shapes ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2.5,), (3, 1.0), ("3",), (True, 2), (-1, 4)])
def test_fractional_non_int_or_negative_shapes_are_an_error(shape):
    # a non-int extent is a wrong type (a TypeError as well), a negative one a wrong value
    exc = bc.InvalidProblemError if shape == (-1, 4) else bc.ArgumentTypeError
    with pytest.raises(exc, match=r"exp: argument 'x': expected a shape of non-negative ints"):
        make("exp", (shape, "f32"))


def test_numpy_int_shapes_are_accepted():
    d = make("exp", ((np.int64(3), np.int32(4)), "f32"))
    assert d.inputs[0].shape == (3, 4) and all(type(s) is int for s in d.inputs[0].shape)


@pytest.mark.parametrize("op, ins, attrs", [("layer_norm", (F,), {"normalized_shape": (4.0,)}),
                                            ("broadcast_to", (F,), {"shape": (3, 4.5)}),
                                            ("mean_backward", (((3,), "f32"),), {"shape": (3, -4), "dims": 1})])
def test_shape_attributes_are_ints(op, ins, attrs):
    with pytest.raises(E, match=r"argument '(normalized_shape|shape)': expected"):
        make(op, *ins, **attrs)


# -- valid calls normalize --------------------------------------------------------------------------------------
def test_negative_axis_is_normalized():
    assert make("softmax", X3, dim=-1).attr("dim") == 2
    assert make("cumsum", X3, dim=-2).attr("dim") == 1
    assert make("cat", F, F, dim=-1).attr("dim") == 1
    assert make("stack", F, F, dim=-1).attr("dim") == 2       # an axis of the (rank + 1) output
    assert make("glu", X3, dim=-1).attr("dim") == 2
    assert make("argmax", X3, dim=np.int64(-3)).attr("dim") == 0


def test_axes_are_normalized_sorted_and_distinct():
    assert make("sum", X3, dims=(-1, 0)).attr("dims") == (0, 2)
    assert make("sum", X3, dims=1).attr("dims") == (1,)
    assert make("sum", X3).attr("dims") == (0, 1, 2)          # None: every axis
    assert make("amax", X3, dims=[2, -3]).attr("dims") == (0, 2)
    with pytest.raises(E, match=r"sum: argument 'dim': expected distinct axes"):
        make("sum", X3, dims=(1, -2))
    with pytest.raises(E, match=r"argument 'dim': expected an axis in \[-3, 2\]"):
        make("sum", X3, dims=(3,))


def test_numbers_normalize_to_their_kind():
    assert make("leaky_relu", F, negative_slope=1).attr("negative_slope") == 1.0
    assert type(make("leaky_relu", F, negative_slope=np.float32(0.5)).attr("negative_slope")) is float
    assert type(make("pow_scalar", ((3,), "i32"), exponent=2).attr("exponent")) is int   # "number" keeps ints
    assert make("clamp", F, min=np.int64(1)).attr("min") == 1
    assert make("sum", F, keepdim=np.bool_(True)).attr("keepdim") is True
    assert make("softmax", F, dim=1, dtype="f64").attr("dtype") == bc.DType.f64


def test_defaults_are_filled_in():
    d = make("cross_entropy", F, ((3,), "i64"))
    assert d.attr_dict == {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0}
    assert make("var", F, correction=None).attr("correction") == 1.0     # none_default


def test_equal_calls_make_equal_descriptors():
    assert make("sum", X3, dims=(-1,)) == make("sum", X3, dims=2) == make("sum", X3, dims=[2])
    assert make("leaky_relu", F, negative_slope=1) == make("leaky_relu", F, negative_slope=1.0)


# -- the Attr API itself -----------------------------------------------------------------------------------------
def test_attr_api():
    a = Attr("p", "float", 2.0, ge=0.0)
    assert a.validate("op", 3) == 3.0 and a.describe() == "a real number >= 0"
    with pytest.raises(E, match=r"op: argument 'p': expected a real number >= 0, got -1"):
        a.validate("op", -1)
    ax = Attr("dim", "axis", rank=lambda ins, attrs: 4)
    assert ax.validate("op", -1) == 3
    with pytest.raises(ValueError, match="unknown kind"):
        Attr("x", "complex")
    o = Attr("k", "int", None, optional=True, choices=(1, 2))
    assert o.validate("op", None) is None and o.describe() == "one of 1, 2 or None"


def test_validation_is_cheap():
    """The validator is built once per spec: building a descriptor of a many-attribute op stays fast."""
    args = (F, ((3,), "i64"))
    make("cross_entropy", *args, reduction="sum")
    n, t0 = 2000, time.perf_counter()
    for _ in range(n):
        make("cross_entropy", *args, reduction="sum", ignore_index=-1, label_smoothing=0.1)
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 2e-4, f"{per_call * 1e6:.0f} us per Descriptor"
