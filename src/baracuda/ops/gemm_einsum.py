"""GEMM forms, part 1: contractions over labelled axes -- ``einsum``, ``tensordot``, ``inner``, ``outer`` (alias
``ger``).

One representation serves them all: a :class:`Contraction` names each operand's axes with labels (a label repeated
within an operand is its diagonal), the output's labels, and each label's size (a size-1 axis broadcasts against the
same label elsewhere, as torch.einsum and torch.tensordot allow).  ``einsum`` parses torch's equation grammar into
it (whitespace, ``...`` broadcast dimensions, implicit output: the ellipsis dimensions, then the labels that appear
exactly once, in ASCII order -- upper case before lower case, as torch); ``tensordot`` / ``inner`` / ``outer`` build
it from their shapes and ``dims``.  The descriptor keeps einsum's equation in canonical form (ellipsis expanded to
labels, the output explicit), so the reference, the plans and the backward read one form.

``schedule(c)`` turns a contraction into GEMMs (pure shape logic, shared by the cuBLAS plans and the cost model):
per operand, its diagonals (views), its broadcast size-1 axes dropped, its private labels (in no other operand nor
the output) summed; then the operands are multiplied left to right (as torch does without opt_einsum), each pair
as one batched GEMM: the running product permuted to [batch, left, contracted] and the next operand to [batch,
contracted, right], both folded to 3-D (or 2-D without a batch label), or as a broadcast multiply where a batched
pair contracts nothing; the result is permuted to the output order.

Integer operands (the GEMM family's integers, exact in wrapping arithmetic): torch.einsum sums a label that only
one side still holds with Tensor.sum, which widens an integer narrower than int64 to int64, and then multiplies that
with the other side; so its result is int64 where it summed such a label, and it raises where the widened side meets
a still narrow one in a GEMM ("expected scalar type Int but found Long").  ``torch_int_result`` models those steps
on the shapes, and the shape rule follows it (the dtype, or that refusal).  The values are the exact products mod
2^64 narrowed to the output's width, which are torch's whenever it widens before it multiplies; where it multiplies
narrow operands first and widens that (wrapped) product later (three or more operands), the drop-in refuses rather
than return other numbers (UnsupportedError: bt.mode() hands the call to torch).

Backward (``grad_contraction``): the gradient of operand i is the contraction of the output gradient with every
other operand onto operand i's labels (``einsum`` ops), broadcast along the labels only operand i has (summed in
the forward), summed back to its size-1 broadcast axes, and written onto its diagonals (``diagonal_backward``)
where a label repeats.  ``ctx.needs`` skips the operands nobody differentiates.
"""
from __future__ import annotations

import functools
import math
import numbers
import string
from dataclasses import dataclass

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .gemm import (GEMM_TYPES, _grad_tol, _io_bytes, _n, _no_out, _tol, check_operands, float_grads, pair_dropin,
                   torch_fn)
from .layout import Variadic

__all__ = ["LABELS", "Contraction", "parse_einsum", "contraction_of", "schedule", "Schedule", "grad_contraction",
           "chain_tol", "ALL_INPUTS"]

# torch's label order: sublist label 0-25 is 'A'-'Z', 26-51 is 'a'-'z' (so sorted() of the letters is torch's order)
LABELS = string.ascii_uppercase + string.ascii_lowercase
ALL_INPUTS = tuple(range(1024))     # "every operand" for the variadic ops' differentiable inputs


@dataclass(frozen=True)
class Contraction:
    """out[output] = sum over the other labels of prod_i operand_i[inputs[i]] (sizes: label -> size)."""

    inputs: tuple[str, ...]
    output: str
    sizes: tuple[tuple[str, int], ...]
    shapes: tuple[tuple[int, ...], ...]      # the operands' own shapes (a broadcast axis has size 1 there)

    @property
    def equation(self) -> str:
        return ",".join(self.inputs) + "->" + self.output

    @property
    def out_shape(self) -> tuple[int, ...]:
        s = dict(self.sizes)
        return tuple(s[l] for l in self.output)

    def full_shape(self, i: int) -> tuple[int, ...]:
        """Operand i's shape with its broadcast axes at their label's size."""
        s = dict(self.sizes)
        return tuple(s[l] for l in self.inputs[i])


def make_contraction(op: str, names, inputs, output: str, shapes) -> Contraction:
    """Check the labels against the shapes (a repeated label within an operand: equal sizes; across operands: equal
    or 1) and build the Contraction."""
    sizes: dict[str, int] = {}
    for name, labels, shape in zip(names, inputs, shapes):
        own: dict[str, int] = {}
        for l, s in zip(labels, shape):
            if l in own and own[l] != s:
                raise InvalidProblemError(op, name, f"equal sizes for the repeated subscript {l} (its diagonal)",
                                          f"sizes {own[l]} and {s} (shape {tuple(shape)})")
            own[l] = s
            prev = sizes.get(l)
            if prev is None or prev == 1:
                sizes[l] = s
            elif s != 1 and s != prev:
                raise InvalidProblemError(op, name, f"size {prev} (or 1) for subscript {l}, as in an earlier "
                                          "operand", f"size {s} (shape {tuple(shape)})")
    for l in output:
        if l not in sizes:
            raise InvalidProblemError(op, "equation", "output subscripts that appear in an input",
                                      f"output subscript {l}")
    return Contraction(tuple(inputs), output, tuple(sorted(sizes.items())), tuple(tuple(s) for s in shapes))


# -- einsum's equation grammar -----------------------------------------------------------------------------------
_ELL = "."


def _terms(op: str, text: str, where: str) -> list:
    """Subscripts of one term: letters and at most one '...' (as _ELL)."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c in LABELS:
            out.append(c)
            i += 1
        elif text.startswith("...", i):
            if _ELL in out:
                raise InvalidProblemError(op, "equation", f"at most one ellipsis per {where}", repr(text))
            out.append(_ELL)
            i += 3
        else:
            raise InvalidProblemError(op, "equation", "subscripts in [a-zA-Z], ',', '->' and '...'",
                                      f"{c!r} in {where} {text!r}")
    return out


def parse_einsum(op: str, equation, shapes) -> Contraction:
    """torch.einsum's grammar -> Contraction (ellipsis dimensions get labels the equation does not use)."""
    if not isinstance(equation, str):
        raise InvalidProblemError(op, "equation", "a string", repr(equation))
    eq = "".join(equation.split())
    lhs, arrow, rhs = eq.partition("->")
    if "->" in rhs:
        raise InvalidProblemError(op, "equation", "at most one '->'", repr(equation))
    terms = [_terms(op, t, f"operand {i}") for i, t in enumerate(lhs.split(","))]
    if len(terms) != len(shapes):
        raise InvalidProblemError(op, "operands", f"{len(terms)} operands (the equation's subscripts)",
                                  f"{len(shapes)} operands")
    ell_rank = 0
    for i, (t, s) in enumerate(zip(terms, shapes)):
        named = len([c for c in t if c != _ELL])
        if (_ELL in t and len(s) < named) or (_ELL not in t and len(s) != named):
            raise InvalidProblemError(op, f"operands[{i}]", f"{named}{'+' if _ELL in t else ''} dimensions (its "
                                      f"subscripts {''.join(c if c != _ELL else '...' for c in t)!r})",
                                      f"shape {tuple(s)}")
        if _ELL in t:
            ell_rank = max(ell_rank, len(s) - named)
    free = [c for c in LABELS if c not in eq]
    if ell_rank > len(free):
        raise InvalidProblemError(op, "equation", f"at most {len(LABELS)} distinct dimensions", repr(equation))
    ell = "".join(free[:ell_rank])
    inputs = []
    for t, s in zip(terms, shapes):
        e = len(s) - len([c for c in t if c != _ELL])
        inputs.append("".join(ell[ell_rank - e:] if c == _ELL else c for c in t))
    if arrow:
        out_terms = _terms(op, rhs, "the output")
        out = "".join(ell if c == _ELL else c for c in out_terms)
        for c in out:
            if out.count(c) > 1:
                raise InvalidProblemError(op, "equation", "each output subscript once", f"{c} more than once")
    else:
        letters = "".join(inputs)
        out = ell + "".join(sorted(c for c in set(letters) if c not in ell and letters.count(c) == 1))
    return make_contraction(op, [f"operands[{i}]" for i in range(len(shapes))], inputs, out, shapes)


# -- the GEMM schedule (pure shape logic: the cuBLAS plans run it, the cost model counts it) --------------------
@dataclass(frozen=True)
class Prep:
    """One operand before the products: its diagonals (successive ``x.diagonal(0, d1, d2)``), its broadcast size-1
    axes dropped (``squeeze``), its private labels summed (``sums``); ``labels`` after these steps."""

    diagonals: tuple[tuple[int, int], ...]
    squeeze: tuple[int, ...]
    sums: tuple[int, ...]
    labels: str


@dataclass(frozen=True)
class Pair:
    """The running product X times the next operand Y as one [b, m, k] @ [b, k, n] GEMM (``batched``: a batch label
    exists, else 2-D); X's axes ``pre_sum`` are summed first; ``labels``: the result's (batch, left, right).
    ``elementwise``: batched with nothing contracted (a Hadamard or batched outer product): a broadcast multiply of
    [b, m, 1] and [b, 1, n], not b GEMMs with K = 1 (as small as 1x1x1)."""

    pre_sum: tuple[int, ...]
    perm_x: tuple[int, ...]
    perm_y: tuple[int, ...]
    b: int
    m: int
    k: int
    n: int
    batched: bool
    shape: tuple[int, ...]
    labels: str
    elementwise: bool = False


@dataclass(frozen=True)
class Schedule:
    preps: tuple[Prep, ...]
    pairs: tuple[Pair, ...]
    final_perm: tuple[int, ...]

    @property
    def flops(self) -> int:
        return sum(2 * p.b * p.m * p.k * p.n for p in self.pairs)

    @property
    def fresh(self) -> bool:
        """Whether the result is computed (a GEMM or a sum ran), not a view of an operand."""
        return bool(self.pairs) or any(p.sums for p in self.preps)


def diagonal_steps(labels: str) -> tuple[tuple[tuple[int, int], ...], str]:
    """The successive (dim1, dim2) of ``x.diagonal(0, dim1, dim2)`` that remove repeated labels (each diagonal
    goes last, as torch.diagonal puts it), and the labels left."""
    steps, labels = [], list(labels)
    while True:
        rep = next((l for l in labels if labels.count(l) > 1), None)
        if rep is None:
            return tuple(steps), "".join(labels)
        p = labels.index(rep)
        q = labels.index(rep, p + 1)
        steps.append((p, q))
        labels = [l for i, l in enumerate(labels) if i not in (p, q)] + [rep]


def _prod(labels, size) -> int:
    return math.prod(size[l] for l in labels)


@functools.lru_cache(maxsize=1024)
def schedule(c: Contraction) -> Schedule:
    size = dict(c.sizes)
    staged = []
    for labels, shape in zip(c.inputs, c.shapes):
        diag, labs = diagonal_steps(labels)
        own = {l: s for l, s in zip(labels, shape)}
        squeeze = tuple(i for i, l in enumerate(labs) if own[l] == 1 and size[l] != 1)
        staged.append((diag, squeeze, "".join(l for i, l in enumerate(labs) if i not in squeeze)))
    preps = []
    for i, (diag, squeeze, labs) in enumerate(staged):
        elsewhere = set(c.output).union(*(s[2] for j, s in enumerate(staged) if j != i))
        sums = tuple(k for k, l in enumerate(labs) if l not in elsewhere)
        preps.append(Prep(diag, squeeze, sums, "".join(l for k, l in enumerate(labs) if k not in sums)))
    cur = preps[0].labels
    pairs = []
    for j in range(1, len(preps)):
        y = preps[j].labels
        needed = set(c.output).union(*(p.labels for p in preps[j + 1:]))
        pre = tuple(k for k, l in enumerate(cur) if l not in y and l not in needed)
        x = "".join(l for k, l in enumerate(cur) if k not in pre)
        batch = [l for l in x if l in y and l in needed]
        contract = [l for l in x if l in y and l not in needed]
        left = [l for l in x if l not in y]
        right = [l for l in y if l not in x]
        labels = "".join(batch + left + right)
        pairs.append(Pair(pre, tuple(x.index(l) for l in batch + left + contract),
                          tuple(y.index(l) for l in batch + contract + right), _prod(batch, size), _prod(left, size),
                          _prod(contract, size), _prod(right, size), bool(batch), tuple(size[l] for l in labels),
                          labels, bool(batch) and not contract))
        cur = labels
    return Schedule(tuple(preps), tuple(pairs), tuple(cur.index(l) for l in c.output))


# -- which contraction a descriptor computes ---------------------------------------------------------------------
def _tensordot_contraction(op, a, b, dims, names=("a", "b")) -> Contraction:
    """a's axes dims[0] contracted with b's dims[1]; the output: a's other axes, then b's (in order)."""
    da, db = dims
    la = LABELS[:len(a)]
    free_b = iter(LABELS[len(a):])
    lb = "".join(la[da[db.index(k)]] if k in db else next(free_b) for k in range(len(b)))
    out = "".join(l for k, l in enumerate(la) if k not in da) + "".join(l for k, l in enumerate(lb) if k not in db)
    return make_contraction(op, names, (la, lb), out, (a, b))


def _inner_contraction(op, a, b) -> Contraction:
    """torch.inner: the last axes contracted (equal sizes: no broadcasting); a scalar operand multiplies."""
    if a and b and a[-1] != b[-1]:
        raise InvalidProblemError(op, "other", f"a last dimension of {a[-1]} (the last dimension of 'input')",
                                  f"shape {tuple(b)}")
    dims = ((len(a) - 1,), (len(b) - 1,)) if a and b else ((), ())
    return _tensordot_contraction(op, a, b, dims, ("input", "other"))


@functools.lru_cache(maxsize=4096)
def contraction_of(desc) -> Contraction:
    """The Contraction an einsum / tensordot / inner / outer descriptor computes."""
    shapes = [t.shape for t in desc.inputs]
    if desc.op == "einsum":
        return parse_einsum(desc.op, desc.attr("equation"), shapes)
    if desc.op == "tensordot":
        return _tensordot_contraction(desc.op, *shapes, desc.attr("dims"))
    if desc.op == "inner":
        return _inner_contraction(desc.op, *shapes)
    return make_contraction(desc.op, ("input", "vec2"), ("a", "b"), "ab", shapes)   # outer


def torch_int_result(c: Contraction):
    """torch.einsum's result dtype for integer operands narrower than int64: "same" (theirs), "i64", or why torch
    raises.  Its steps (shapes only; operands left to right, as torch without opt_einsum): one operand: any label
    left out of the output is summed (int64).  Several: a label not in the output is finished by the last operand
    where its size is not 1 (the first operand if none); the first operand's finished labels are summed (size > 1)
    or squeezed; then each next operand i meets the running product: a label i finishes is summed on i's side
    where the product's size is 1 (int64), else contracted; a product that contracts (bmm / dot) needs one dtype,
    an elementwise one promotes.  A narrow product widened later (its wrapped values sign-extended, not the exact
    sums this library computes) is refused too."""
    out = set(c.output)
    own = [dict(zip(labels, shape)) for labels, shape in zip(c.inputs, c.shapes)]
    if len(own) == 1:
        return "i64" if set(own[0]) - out else "same"
    last = {l: max((i for i, o in enumerate(own) if o.get(l, 1) != 1), default=0) for l in dict(c.sizes)}
    wide = any(s != 1 for l, s in own[0].items() if l not in out and last[l] == 0)
    held = {l: s for l, s in own[0].items() if l in out or last[l] > 0}
    narrow_product = False
    for i in range(1, len(own)):
        b = own[i]
        finished = [l for l in b if l not in out and last[l] == i]
        contracted = [l for l in finished if held.get(l, 1) != 1]
        b_wide = len(contracted) < len(finished)       # summed on i's side
        if contracted and wide != b_wide:
            side = f"operand {i}" if b_wide else "the product of the operands before it"
            return (f"torch sums a label of {side} into an int64 tensor, then contracts {''.join(contracted)} with "
                    "the other, still narrow, side and refuses the mixed dtypes (expected scalar type Int but found "
                    "Long); torch.einsum raises here, so does the drop-in")
        if b_wide and narrow_product and not wide:
            return (f"torch multiplies operands 0..{i - 1} in the narrow dtype (wrapping) and widens that product "
                    "to int64 afterwards, where the drop-in's exact sums would differ once it wraps: refused (int64 "
                    "operands run)")
        narrow_product = narrow_product or not (wide or b_wide)
        wide = wide or b_wide
        held = {l: max(held.get(l, 1), b.get(l, 1)) for l in {**held, **b} if l in out or last[l] > i}
    return "i64" if wide else "same"


# -- shape rules -------------------------------------------------------------------------------------------------
def _check_einsum(inputs, attrs):
    names = [f"operands[{i}]" for i in range(len(inputs))]
    check_operands("einsum", names, inputs)
    c = parse_einsum("einsum", attrs["equation"], [t.shape for t in inputs])
    dt = inputs[0].dtype
    if dt.is_integer and dt != DType.i64:
        r = torch_int_result(c)
        if r not in ("same", "i64"):
            raise UnsupportedError("einsum", f"{c.equation} with {dt} operands: {r}")
        dt = DType.i64 if r == "i64" else dt
    return {"equation": c.equation}, (TensorSpec(c.out_shape, dt),)


def _norm_dims(op, dims, inputs, attrs):
    """tensordot's ``dims``: an int N (the last N axes of a with the first N of b) or a pair of axis lists ->
    a pair of tuples of non-negative axes."""
    ra, rb = (len(t.shape) for t in inputs)
    if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
        if dims < 0 or dims > min(ra, rb):
            raise InvalidProblemError(op, "dims", f"an int in [0, {min(ra, rb)}] (at most the smaller rank)", dims)
        return tuple(range(ra - int(dims), ra)), tuple(range(int(dims)))
    if not (isinstance(dims, (tuple, list)) and len(dims) == 2 and all(isinstance(d, (tuple, list)) for d in dims)):
        raise InvalidProblemError(op, "dims", "an int or a pair of lists of axes ([axes of a], [axes of b])",
                                  repr(dims))
    out = []
    for name, d, r in (("dims[0]", dims[0], ra), ("dims[1]", dims[1], rb)):
        if not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) for k in d):
            raise InvalidProblemError(op, name, "a list of ints", repr(d))
        axes = tuple(int(k) % r if -r <= k < r else None for k in d)
        if None in axes:
            raise InvalidProblemError(op, name, f"axes in [{-r}, {r - 1}]", tuple(d))
        if len(set(axes)) != len(axes):
            raise InvalidProblemError(op, name, "distinct axes", tuple(d))
        out.append(axes)
    if len(out[0]) != len(out[1]):
        raise InvalidProblemError(op, "dims", "two lists of the same length", repr(dims))
    return tuple(out)


def _check_tensordot(inputs, attrs):
    check_operands("tensordot", ("a", "b"), inputs, (2,))
    a, b = (t.shape for t in inputs)
    da, db = _norm_dims("tensordot", attrs["dims"], inputs, attrs)
    for ka, kb in zip(da, db):
        if a[ka] != b[kb] and 1 not in (a[ka], b[kb]):
            raise InvalidProblemError("tensordot", "b", f"size {a[ka]} in dim {kb} (contracted with dim {ka} of "
                                      "'a')", f"shape {b}")
    c = _tensordot_contraction("tensordot", a, b, (da, db))
    return {"dims": (da, db)}, (TensorSpec(c.out_shape, inputs[0].dtype),)


def _check_inner(inputs, attrs):
    check_operands("inner", ("input", "other"), inputs, (2,))
    c = _inner_contraction("inner", *(t.shape for t in inputs))
    return attrs, (TensorSpec(c.out_shape, inputs[0].dtype),)


def _check_outer(inputs, attrs):
    check_operands("outer", ("input", "vec2"), inputs, (2,))
    for name, t in zip(("input", "vec2"), inputs):
        if len(t.shape) != 1:
            raise InvalidProblemError("outer", name, "a 1-D tensor", f"shape {t.shape}")
    return attrs, (TensorSpec(inputs[0].shape + inputs[1].shape, inputs[0].dtype),)


# -- backward ----------------------------------------------------------------------------------------------------
def grad_contraction(ctx, c: Contraction, g, saved, needs) -> list:
    """The gradient of every operand of ``c`` (None where ``needs[i]`` is False) from the output gradient ``g``
    and the operands ``saved`` (see the module docstring)."""
    res = []
    for i, labels in enumerate(c.inputs):
        if not needs[i]:
            res.append(None)
            continue
        diag, uniq = diagonal_steps(labels)
        others = [j for j in range(len(c.inputs)) if j != i]
        reach = set(c.output).union(*(c.inputs[j] for j in others))
        kept = "".join(l for l in uniq if l in reach)
        if not others and kept == c.output:
            r = g
        else:
            eq = ",".join([c.output] + [c.inputs[j] for j in others]) + "->" + kept
            r = ctx.op("einsum", g, *[saved[j] for j in others], equation=eq)
        own = dict(zip(labels, c.shapes[i]))
        # back to the operand's own sizes: summed along its broadcast (size-1) axes; repeated along its private labels
        # and along labels whose other occurrences all have size 1 (the gradient is constant there)
        got = dict(zip(kept, tuple(r.shape)))
        r = ctx.reduce_to(r, tuple(1 if own[l] == 1 else got[l] for l in kept))
        full = tuple(own[l] for l in uniq)
        if kept != uniq or any(own[l] != got[l] for l in kept if own[l] != 1):
            r = ctx.reshape(r, tuple(1 if l not in kept or own[l] == 1 else got[l] for l in uniq))
            r = ctx.op("broadcast_to", r, shape=full)
        for k, (d1, d2) in reversed(list(enumerate(diag))):     # undo the diagonals, last one first
            shape = _before_diagonals(labels, diag[:k], own)
            r = ctx.op("diagonal_backward", r, shape=shape, offset=0, dim1=d1, dim2=d2)
        res.append(r)
    return res


def _before_diagonals(labels: str, steps, own) -> tuple[int, ...]:
    """The shape after the first ``len(steps)`` diagonal steps (the input of the next one)."""
    labs = list(labels)
    for p, q in steps:
        labs = [l for k, l in enumerate(labs) if k not in (p, q)] + [labs[p]]
    return tuple(own[l] for l in labs)


def _g_contract(ctx, d, grads, s):
    g = grads[0]
    if g is None:
        return (None,) * len(d.inputs)
    names = d.spec.arg_names
    saved = [s[names[i]] for i in range(len(d.inputs))]
    return tuple(grad_contraction(ctx, contraction_of(d), g, saved, ctx.needs))


# -- torch peers and drop-ins ------------------------------------------------------------------------------------
def _peer_einsum(*xs, equation):
    import torch

    return torch.einsum(equation, *xs)


def _peer_tensordot(a, b, dims):
    import torch

    return torch.tensordot(a, b, dims=(list(dims[0]), list(dims[1])))


def _sublist_equation(args) -> tuple[str, list]:
    """torch.einsum's sublist form (op0, sub0, op1, sub1, ..., [out]) -> (equation, operands)."""
    def term(sub):
        out = []
        for v in sub:
            if v is Ellipsis:
                out.append("...")
            elif isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v < len(LABELS):
                out.append(LABELS[v])
            else:
                raise InvalidProblemError("einsum", "sublist", f"subscripts in [0, {len(LABELS)}) or Ellipsis",
                                          repr(v))
        return "".join(out)
    ops, subs = list(args[0::2]), list(args[1::2])
    eq = ",".join(term(s) for s in subs)
    if len(args) % 2 == 1:        # an output sublist closes the list
        ops, eq = ops[:-1], eq + "->" + term(args[-1])
    return eq, ops


def _dropin_einsum(*args):
    import torch

    if len(args) < 2:       # torch raises ValueError here
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least one "
                         "operand and its subscripts list")
    if isinstance(args[0], torch.Tensor):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if not isinstance(equation, str):
            raise TypeError(f"einsum(): argument 'equation' (position 1) must be str, not {type(equation).__name__} "
                            "(the forms are einsum(equation, *operands), einsum(equation, [operands]) and the "
                            "sublist form einsum(op0, sub0, op1, sub1, ..., [out]))")
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    for i, x in enumerate(operands):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"einsum(): expected a Tensor as operand {i}, got {type(x).__name__}")
    _refuse_narrow_int_on_cuda(operands)
    return tuple(operands), {"equation": equation}


_NARROW_INTS = ("int8", "uint8", "int16", "int32")


def _refuse_narrow_int_on_cuda(operands) -> None:
    """torch's CUDA einsum multiplies narrow-integer operands in another order than its CPU kernel (seen on an
    H100, torch 2.11: 'cb,a,->ca' on uint8 wrapped a partial product the CPU kernel computes widened), so the
    wrapped result of two or more narrow-integer operands has no one torch answer to agree with: refused there
    (int64 operands wrap identically in any order and are computed)."""
    if len(operands) >= 2 and any(x.is_cuda for x in operands) and \
            any(str(x.dtype)[len("torch."):] in _NARROW_INTS for x in operands):
        raise UnsupportedError("einsum", "narrow-integer operands on CUDA (int8/uint8/int16/int32): torch's CUDA "
                               "einsum wraps partial products in an order its CPU kernel does not, so the result "
                               "depends on the device; pass int64 operands (exact in any order)")


def _dims_arg(dims):
    """torch.tensordot's ``dims`` (an int, a pair of lists, or a tensor holding either) as plain Python values."""
    import torch

    if isinstance(dims, torch.Tensor):
        return int(dims.item()) if dims.numel() == 1 else (dims[0].tolist(), dims[1].tolist())
    if isinstance(dims, (tuple, list)):
        return tuple(tuple(d) if isinstance(d, (tuple, list)) else d for d in dims)
    return dims


def _dropin_tensordot(a, b, dims=2, out=None):
    _no_out("tensordot", out)
    return (a, b), {"dims": _dims_arg(dims)}


# -- samples -----------------------------------------------------------------------------------------------------
# (equation, operand shapes): the first three (<= 64 elements each) are the gradient samples of tests/generic:
# a diagonal feeding a product, ellipsis broadcasting, three operands; tests/gemm_forms checks the others' gradients
_EINSUM_CASES = [
    ("iij,jk->ik", ((3, 3, 4), (4, 2))),
    ("...ij,...jk", ((2, 1, 3, 4), (5, 4, 2))),
    ("ijk,jl,lk->i", ((2, 3, 4), (3, 5), (5, 4))),
    ("ij,jk->ik", ((5, 7), (7, 3))),
    ("bij,bjk->bik", ((3, 4, 6), (3, 6, 5))),
    ("bhqd,bhkd->bhqk", ((2, 3, 5, 4), (2, 3, 6, 4))),
    ("ii->i", ((4, 4),)),
    ("ii", ((5, 5),)),
    ("ij->ji", ((3, 5),)),
    ("i,i->", ((6,), (6,))),
    ("i,j->ij", ((4,), (5,))),
    ("ij,ij->ij", ((3, 4), (3, 4))),
    ("ij,ij->", ((1, 4), (3, 4))),
    ("Ba,aC", ((3, 4), (4, 2))),
    ("i,->i", ((4,), ())),
    ("ab,cd->", ((2, 3), (4, 2))),
    ("i j , j k -> k i", ((3, 4), (4, 2))),
    ("ij,jk->ik", ((0, 3), (3, 4))),
    ("ij,jk->ik", ((3, 0), (0, 4))),
]


def _einsum_samples(rng):
    for eq, shapes in _EINSUM_CASES:
        yield Sample(_n(rng, *shapes), {"equation": eq}, name=f"{eq.replace(' ', '')}{list(shapes)}")


# (a shape, b shape, dims)
_TENSORDOT_CASES = [((3, 4, 5), (4, 5, 2), 2), ((3, 4), (4, 5), 1), ((2, 3), (4,), 0),
                    ((3, 5, 4), (4, 2, 5), ((2, 1), (0, 2))), ((3, 1), (4, 2), ((1,), (1,))),
                    ((3, 4, 2), (2, 4), ((-1, -2), (0, 1))), ((0, 4), (4, 3), 1), ((3, 0), (0, 2), 1)]


def _tensordot_samples(rng):
    for sa, sb, dims in _TENSORDOT_CASES:
        yield Sample(_n(rng, sa, sb), {"dims": dims}, name=f"{sa}x{sb}-dims{dims}")


_INNER_CASES = [((3, 5), (4, 5)), ((2, 3, 4), (4,)), ((4,), (4,)), ((), (3, 2)), ((2, 3), ()),
                ((2, 17, 20), (3, 20)), ((0, 4), (3, 4)), ((3, 0), (2, 0))]
_OUTER_CASES = [((5,), (4,)), ((1,), (7,)), ((33,), (20,)), ((0,), (3,))]


def _pair_samples(cases):
    def samples(rng):
        for sa, sb in cases:
            yield Sample(_n(rng, sa, sb), {}, name=f"{sa}x{sb}")
    return samples


# -- errors ------------------------------------------------------------------------------------------------------
def _einsum_errors():
    f = "f32"
    two = (((3, 4), f), ((4, 5), f))
    yield ErrorCase(two, {"equation": "ij,j1->i"}, InvalidProblemError, r"einsum: argument 'equation': expected "
                    r"subscripts in \[a-zA-Z\]", "bad-char")
    yield ErrorCase(two, {"equation": "i.j,jk"}, InvalidProblemError, r"subscripts in \[a-zA-Z\]", "lone-dot")
    yield ErrorCase(two, {"equation": "ij->i"}, InvalidProblemError, r"argument 'operands': expected 1 operands",
                    "operand-count")
    yield ErrorCase(two, {"equation": "ijk,jk"}, InvalidProblemError, r"argument 'operands\[0\]': expected 3 dim",
                    "rank")
    yield ErrorCase(two, {"equation": "ij,jk->iz"}, InvalidProblemError, r"output subscripts that appear in an "
                    r"input", "unknown-output")
    yield ErrorCase(two, {"equation": "ij,jk->ii"}, InvalidProblemError, r"each output subscript once", "repeat-out")
    yield ErrorCase(two, {"equation": "ij,kj->ik"}, InvalidProblemError, r"argument 'operands\[1\]': expected size "
                    r"4 \(or 1\) for subscript j", "size")
    yield ErrorCase((((3, 4), f),), {"equation": "ii->i"}, InvalidProblemError, r"equal sizes for the repeated "
                    "subscript i", "diagonal-size")
    yield ErrorCase(two, {"equation": "ij,jk->ik->i"}, InvalidProblemError, r"at most one '->'", "two-arrows")
    yield ErrorCase((((3, 4), f), ((4, 5), "f16")), {"equation": "ij,jk"}, Exception, r"expected dtype f32",
                    "dtype-mismatch")
    yield ErrorCase((((3, 4), "bool"), ((4, 5), "bool")), {"equation": "ij,jk"}, UnsupportedError,
                    r"dtype bool; the op is defined for", "bool-dtype")
    yield ErrorCase(two, {"equation": 3}, InvalidProblemError, r"argument 'equation': expected a string", "not-str")
    yield ErrorCase(two, {}, InvalidProblemError, r"argument 'equation'", "no-equation")


def _tensordot_errors():
    f = "f32"
    two = (((3, 4), f), ((4, 5), f))
    yield ErrorCase(two, {"dims": 3}, InvalidProblemError, r"tensordot: argument 'dims': expected an int in \[0, 2\]",
                    "dims-too-big")
    yield ErrorCase(two, {"dims": -1}, InvalidProblemError, r"argument 'dims': expected an int in", "negative")
    yield ErrorCase(two, {"dims": ((1,), (1,))}, InvalidProblemError, r"argument 'b': expected size 4 in dim 1",
                    "size")
    yield ErrorCase(two, {"dims": ((1, 0), (0,))}, InvalidProblemError, r"two lists of the same length", "lengths")
    yield ErrorCase(two, {"dims": ((1, 1), (0, 0))}, InvalidProblemError, r"argument 'dims\[0\]': expected distinct",
                    "repeat")
    yield ErrorCase(two, {"dims": ((2,), (0,))}, InvalidProblemError, r"argument 'dims\[0\]': expected axes in",
                    "range")
    yield ErrorCase(two, {"dims": (1, 0)}, InvalidProblemError, r"an int or a pair of lists", "pair-of-ints")
    yield ErrorCase(two, {"dims": 1.0}, InvalidProblemError, r"an int or a pair of lists", "float")
    yield ErrorCase((((3, 4), f), ((4, 5), "bf16")), {"dims": 1}, Exception, r"expected dtype f32", "dtype")


def _inner_errors():
    yield ErrorCase((((3, 5), "f32"), ((4,), "f32")), {}, InvalidProblemError, r"inner: argument 'other': expected "
                    r"a last dimension of 5", "last-dim")
    yield ErrorCase((((3, 1), "f32"), ((4, 5), "f32")), {}, InvalidProblemError, r"a last dimension of 1", "no-bcast")
    yield ErrorCase((((3,), "f32"), ((3,), "f64")), {}, Exception, r"expected dtype f32", "dtype")
    yield ErrorCase((((3,), "bool"), ((3,), "bool")), {}, UnsupportedError, r"dtype bool", "bool")


def _outer_errors():
    yield ErrorCase((((3, 5), "f32"), ((4,), "f32")), {}, InvalidProblemError, r"outer: argument 'input': expected a "
                    r"1-D tensor", "rank")
    yield ErrorCase((((), "f32"), ((4,), "f32")), {}, InvalidProblemError, r"expected a 1-D tensor", "scalar")
    yield ErrorCase((((3,), "f16"), ((3,), "f32")), {}, Exception, r"expected dtype f16", "dtype")


# -- tolerances, cost ----------------------------------------------------------------------------------------------
# A product whose operand is itself a rounded product (three einsum operands, multi_dot, bilinear, a contraction
# with a pre-summed label): the intermediate is rounded to the dtype (u relative per element: 2^-24 f32, 2^-11 f16,
# 2^-8 bf16) before the next GEMM sums K <= 8 such terms, so the output errs by about u * sum_k |t_k||y_k| on top of
# the GEMM's own error: with standard-normal samples sum |t||y| <= ~4x the output's magnitude -> 4u relative, and
# where the output cancels to ~0, up to u * sum|t||y| ~ 8u..16u absolute (K <= 8, |t| up to ~5).
def chain_tol(dt: DType):
    rtol, atol = _tol(dt)
    if dt == DType.f64 or not dt.is_floating:     # integers: exact
        return rtol, atol
    u = {DType.f32: 2.0 ** -24, DType.f16: 2.0 ** -11, DType.bf16: 2.0 ** -8}[dt]
    return rtol + 4 * u, atol + 16 * u


def _grad_chain_tol(dt: DType):
    rtol, atol = chain_tol(dt)
    grtol, gatol = _grad_tol(dt)
    return max(rtol, grtol) * 2, max(atol, gatol) * 2


def _contract_cost(desc):
    c = contraction_of(desc)
    return _io_bytes(desc), schedule(c).flops


# -- workloads -----------------------------------------------------------------------------------------------------
_BF = DType.bf16
_WORKLOADS = {
    "einsum": (Workload("einsum-bhqd,bhkd->bhqk-[8,16,1024,64]-bf16", ((8, 16, 1024, 64), (8, 16, 1024, 64)), _BF,
                        {"equation": "bhqd,bhkd->bhqk"}, backward=True),
               Workload("einsum-bij,jk->bik-[8,1024,4096]x[4096,4096]-bf16", ((8, 1024, 4096), (4096, 4096)), _BF,
                        {"equation": "bij,jk->bik"}, backward=True)),
    "tensordot": (Workload("tensordot-[64,64,1024]x[64,1024,512]-dims2-bf16", ((64, 64, 1024), (64, 1024, 512)), _BF,
                           {"dims": ((1, 2), (0, 1))}, backward=True),),
    "inner": (Workload("inner-[8192,4096]x[4096,4096]-bf16", ((8192, 4096), (4096, 4096)), _BF, backward=True),),
    "outer": (Workload("outer-[16384]x[16384]-f32", ((16384,), (16384,)), DType.f32, backward=True),),
}

SPECS: dict[str, OpSpec] = {}
_COMMON = dict(family="gemm", grad=float_grads(_g_contract), saves=("inputs",), category="gemm",
               cost=_contract_cost)
SPECS["einsum"] = register_spec(OpSpec(
    name="einsum", dtypes=GEMM_TYPES, arg_names=Variadic("operands"), check=_check_einsum,
    attrs=(Attr("equation", "str", doc="torch.einsum's equation; kept in canonical form (ellipsis expanded, "
                                       "explicit output)"),),
    torch_peer=_peer_einsum, torch_name="torch.einsum", dropin=_dropin_einsum, jax_name="jax.numpy.einsum",
    differentiable=ALL_INPUTS, samples=_einsum_samples, errors=_einsum_errors, tol=chain_tol,
    grad_tol=_grad_chain_tol, workloads=_WORKLOADS["einsum"],
    doc="torch.einsum (equation or sublist form, '...' broadcasting, repeated subscripts = diagonals, implicit "
        "output); operands multiplied left to right, each pair as one (batched) GEMM.", **_COMMON))
SPECS["tensordot"] = register_spec(OpSpec(
    name="tensordot", dtypes=GEMM_TYPES, arg_names=("a", "b"), check=_check_tensordot,
    attrs=(Attr("dims", "any", 2, expected="an int or a pair of lists of axes"),),
    torch_peer=_peer_tensordot, torch_name="torch.tensordot", dropin=_dropin_tensordot, jax_name="jax.numpy.tensordot",
    differentiable=(0, 1), samples=_tensordot_samples, errors=_tensordot_errors, tol=_tol, grad_tol=_grad_tol,
    workloads=_WORKLOADS["tensordot"],
    doc="torch.tensordot: dims an int (last N axes of a with the first N of b) or a pair of axis lists.", **_COMMON))
SPECS["inner"] = register_spec(OpSpec(
    name="inner", dtypes=GEMM_TYPES, arg_names=("input", "other"), check=_check_inner, attrs=(),
    torch_peer=torch_fn("inner"),
    torch_name="torch.inner", dropin=pair_dropin("inner", "input", "other"), jax_name="jax.numpy.inner",
    differentiable=(0, 1), samples=_pair_samples(_INNER_CASES), errors=_inner_errors, tol=_tol, grad_tol=_grad_tol,
    workloads=_WORKLOADS["inner"],
    doc="torch.inner: the product over the last axes of both operands (a 0-d operand multiplies).", **_COMMON))
SPECS["outer"] = register_spec(OpSpec(
    name="outer", dtypes=GEMM_TYPES + (DType.bool,), arg_names=("input", "vec2"), check=_check_outer, attrs=(),
    torch_peer=torch_fn("outer"),
    torch_name="torch.outer", torch_aliases=("torch.ger",), dropin=pair_dropin("outer", "input", "vec2"),
    jax_name="jax.numpy.outer", differentiable=(0, 1), samples=_pair_samples(_OUTER_CASES), errors=_outer_errors,
    tol=_tol, grad_tol=_grad_tol, workloads=_WORKLOADS["outer"],
    doc="torch.outer / torch.ger: the outer product of two vectors (a K=1 GEMM).", **_COMMON))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "broadcast_to", "diagonal_backward", "einsum")
