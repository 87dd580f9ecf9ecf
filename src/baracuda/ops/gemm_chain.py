"""GEMM forms, part 3: ``multi_dot`` (torch.linalg.multi_dot) and ``bilinear`` (torch.nn.functional.bilinear).

``multi_dot(tensors)``: the product of a chain of matrices (the first may be a 1-D row vector, the last a 1-D column
vector; the output drops those axes, as torch), multiplied in the order that costs the fewest multiply-adds:
``chain_order`` is the classic dynamic program over the chain's dimensions p0..pn (cost of (i..j) = min over the
split s of cost(i..s) + cost(s+1..j) + p_i p_{s+1} p_{j+1}; ties take the leftmost split).  The plans run one GEMM
per internal node of that tree.  Backward: the tree's products are recomputed where a gradient needs them (only the
inputs are saved) and the gradient flows down the tree, two transposed-flag GEMMs per node, skipping every subtree
whose matrices nobody differentiates (``ctx.needs``).

``bilinear(input1, input2, weight, bias=None)``: y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o], with the
leading axes folded to M rows: U = x2 @ W.view(O*I, J)^T ([M, O*I], one GEMM on a free view of W), then y = U.view(M,
O, I) @ x1[..., None] (a batched matrix-vector product, the bias as its beta=1 input).  The intermediate holds
M*O*I elements (torch's own bilinear holds a comparable one).  Backward: dx1 from U again, dW and dx2 from
Z = g (x) x1 per row (a K=1 batched GEMM), each skipped when not needed.
"""
from __future__ import annotations

import functools
import math

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .gemm import GEMM_TYPES, _io_bytes, _n, _no_out, check_operands, float_grads
from .gemm_einsum import ALL_INPUTS, chain_tol
from .layout import Variadic

__all__ = ["chain_dims", "chain_order", "bilinear_dims"]


# -- multi_dot -----------------------------------------------------------------------------------------------------
def chain_dims(shapes) -> tuple[int, ...]:
    """p0..pn: matrix i is [p_i, p_{i+1}] (a 1-D first operand is [1, n], a 1-D last one [n, 1])."""
    first, last = shapes[0], shapes[-1]
    p = [first[0] if len(first) == 2 else 1]
    p += [s[-1] for s in shapes[:-1]]
    p.append(last[1] if len(last) == 2 else 1)
    return tuple(p)


@functools.lru_cache(maxsize=1024)
def chain_order(p: tuple[int, ...]):
    """The cheapest parenthesization of the chain with dimensions ``p``: a leaf is a matrix index, a node a pair."""
    n = len(p) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            best = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + p[i] * p[s + 1] * p[j + 1]
                if best is None or c < best:
                    best, split[i][j] = c, s
            cost[i][j] = best

    def tree(i, j):
        return i if i == j else (tree(i, split[i][j]), tree(split[i][j] + 1, j))
    return tree(0, n - 1)


def leaves(node) -> tuple[int, ...]:
    return (node,) if isinstance(node, int) else leaves(node[0]) + leaves(node[1])


def node_dims(node, p) -> tuple[int, int]:
    ls = leaves(node)
    return p[ls[0]], p[ls[-1] + 1]


def order_text(node) -> str:
    return str(node) if isinstance(node, int) else f"({order_text(node[0])} {order_text(node[1])})"


def _check_multi_dot(inputs, attrs):
    op = "multi_dot"
    n = len(inputs)
    names = [f"tensors[{i}]" for i in range(n)]
    if n < 2:
        raise InvalidProblemError(op, "tensors", "at least 2 tensors", f"{n}")
    check_operands(op, names, inputs)
    shapes = [t.shape for t in inputs]
    for i, s in enumerate(shapes):
        ends = i in (0, n - 1)
        if len(s) != 2 and not (ends and len(s) == 1):
            raise InvalidProblemError(op, names[i], "a 1-D or 2-D tensor" if ends else "a 2-D tensor (only the first "
                                      "and the last may be 1-D)", f"shape {s}")
    for i in range(n - 1):
        k = shapes[i][-1]
        if shapes[i + 1][0] != k:
            raise InvalidProblemError(op, names[i + 1], f"{k} rows (the columns of {names[i]}, shape {shapes[i]})",
                                      f"shape {shapes[i + 1]}")
    out = shapes[0][:1] * (len(shapes[0]) == 2) + shapes[-1][1:] * (len(shapes[-1]) == 2)
    return attrs, (TensorSpec(tuple(out), inputs[0].dtype),)


def _g_multi_dot(ctx, d, grads, s):
    g = grads[0]
    n = len(d.inputs)
    if g is None:
        return (None,) * n
    shapes = [t.shape for t in d.inputs]
    p = chain_dims(shapes)
    mats = [ctx.reshape(s[f"tensors[{i}]"], (p[i], p[i + 1])) for i in range(n)]
    tree = chain_order(p)
    products: dict = {}

    def product(node):
        if isinstance(node, int):
            return mats[node]
        if node not in products:
            products[node] = ctx.op("mm", product(node[0]), product(node[1]))
        return products[node]

    res: list = [None] * n

    def down(node, G):
        if isinstance(node, int):
            res[node] = ctx.reshape(G, shapes[node])
            return
        left, right = node
        if any(ctx.needs[i] for i in leaves(left)):     # d left = G @ right^T
            down(left, ctx.op("mm", G, product(right), trans_b=True))
        if any(ctx.needs[i] for i in leaves(right)):    # d right = left^T @ G
            down(right, ctx.op("mm", product(left), G, trans_a=True))
    down(tree, ctx.reshape(g, (p[0], p[-1])))
    return tuple(res)


def _dropin_multi_dot(tensors, *, out=None):
    _no_out("multi_dot", out)
    return tuple(tensors), {}


_CHAIN_CASES = [((3, 4), (4, 2), (2, 5)), ((4,), (4, 3), (3, 2), (2,)), ((5, 2), (2, 6)), ((2, 8), (8, 2), (2, 8),
                                                                                         (8, 1)),
                ((6,), (6,)), ((20, 3), (3, 20), (20, 4)), ((3, 0), (0, 4), (4, 2)), ((0, 3), (3, 2))]


def _multi_dot_samples(rng):
    for shapes in _CHAIN_CASES:
        yield Sample(_n(rng, *shapes), {}, name="x".join(map(str, shapes)))


def _multi_dot_errors():
    f = "f32"
    yield ErrorCase((((3, 4), f),), {}, InvalidProblemError, r"multi_dot: argument 'tensors': expected at least 2",
                    "one")
    yield ErrorCase((((3, 4), f), ((3, 4), f)), {}, InvalidProblemError, r"argument 'tensors\[1\]': expected 4 rows",
                    "chain")
    yield ErrorCase((((3, 4), f), ((4, 2, 1), f)), {}, InvalidProblemError, r"argument 'tensors\[1\]': expected a "
                    "1-D or 2-D tensor", "last-rank")
    yield ErrorCase((((3, 4), f), ((4,), f), ((4, 2), f)), {}, InvalidProblemError, r"argument 'tensors\[1\]': "
                    "expected a 2-D tensor", "middle-rank")
    yield ErrorCase((((), f), ((3,), f)), {}, InvalidProblemError, r"argument 'tensors\[0\]': expected a 1-D or 2-D",
                    "scalar")
    yield ErrorCase((((3, 4), f), ((4, 2), "f64")), {}, Exception, r"expected dtype f32", "dtype")
    yield ErrorCase((((3, 4), "bool"), ((4, 2), "bool")), {}, UnsupportedError, r"dtype bool", "bool")


def _multi_dot_cost(desc):
    p = chain_dims([t.shape for t in desc.inputs])

    def flops(node):
        if isinstance(node, int):
            return 0
        m, _ = node_dims(node[0], p)
        k, n = node_dims(node[1], p)
        return flops(node[0]) + flops(node[1]) + 2 * m * k * n
    return _io_bytes(desc), flops(chain_order(p))


# -- bilinear ------------------------------------------------------------------------------------------------------
def bilinear_dims(op, inputs) -> tuple[int, int, int, int]:
    """(M, O, I, J): the rows the leading axes fold to, out_features, in1_features, in2_features."""
    names = ("input1", "input2", "weight", "bias")
    x1, x2, w = (t.shape for t in inputs[:3])
    if len(x1) == 0:
        raise InvalidProblemError(op, "input1", "a tensor with at least 1 dimension [..., in1_features]", f"shape {x1}")
    if len(x2) != len(x1) or x2[:-1] != x1[:-1]:
        raise InvalidProblemError(op, "input2", f"the leading dimensions of 'input1' {x1[:-1]} then in2_features",
                                  f"shape {x2}")
    if len(w) != 3 or w[1] != x1[-1] or w[2] != x2[-1]:
        raise InvalidProblemError(op, "weight", f"shape (out_features, {x1[-1]}, {x2[-1]})", f"shape {w}")
    if len(inputs) == 4 and inputs[3].shape != (w[0],):
        raise InvalidProblemError(op, names[3], f"shape ({w[0]},) (out_features)", f"shape {inputs[3].shape}")
    return math.prod(x1[:-1]), w[0], w[1], w[2]


def _check_bilinear(inputs, attrs):
    op = "bilinear"
    names = ("input1", "input2", "weight", "bias")
    check_operands(op, names, inputs, (3, 4))
    m, o, i, j = bilinear_dims(op, inputs)
    return attrs, (TensorSpec(inputs[0].shape[:-1] + (o,), inputs[0].dtype),)


def _g_bilinear(ctx, d, grads, s):
    g = grads[0]
    n_in = len(d.inputs)
    if g is None:
        return (None,) * n_in
    m, o, i, j = bilinear_dims(d.op, d.inputs)
    need = ctx.needs
    x1 = ctx.reshape(s["input1"], (m, i))
    x2 = ctx.reshape(s["input2"], (m, j))
    w2 = ctx.reshape(s["weight"], (o * i, j))
    g2 = ctx.reshape(g, (m, o))
    res = [None] * n_in
    if need[0]:     # dx1[m, i] = sum_o g[m, o] U[m, o, i],  U = x2 @ W.view(O*I, J)^T
        u = ctx.reshape(ctx.op("mm", x2, w2, trans_b=True), (m, o, i))
        res[0] = ctx.reshape(ctx.op("bmm", ctx.reshape(g2, (m, 1, o)), u), d.inputs[0].shape)
    if need[1] or need[2]:    # Z[m, (o, i)] = g[m, o] x1[m, i]
        z = ctx.reshape(ctx.op("bmm", ctx.reshape(g2, (m, o, 1)), ctx.reshape(x1, (m, 1, i))), (m, o * i))
        if need[1]:
            res[1] = ctx.reshape(ctx.op("mm", z, w2), d.inputs[1].shape)
        if need[2]:
            res[2] = ctx.reshape(ctx.op("mm", z, x2, trans_a=True), (o, i, j))
    if n_in == 4 and need[3]:
        res[3] = ctx.reduce_to(g2, (o,))
    return tuple(res)


def _peer_bilinear(x1, x2, w, b=None):
    import torch.nn.functional as F

    return F.bilinear(x1, x2, w, b)


def _dropin_bilinear(input1, input2, weight, bias=None):
    return ((input1, input2, weight) if bias is None else (input1, input2, weight, bias)), {}


# (input1, input2, weight, bias?).  Zero in-features (x1 [3, 0]) are left to tests/gemm_forms: torch 2.13 fails
# there ("cannot reshape tensor of 0 elements into shape [-1, 0]"), the op gives the bias
_BILINEAR_CASES = [((4, 3), (4, 2), (5, 3, 2), True), ((2, 3, 4), (2, 3, 2), (3, 4, 2), False),
                   ((3,), (4,), (2, 3, 4), True), ((9, 6), (9, 5), (7, 6, 5), True), ((0, 3), (0, 2), (4, 3, 2), True),
                   ((3, 2), (3, 2), (0, 2, 2), False)]


def _bilinear_samples(rng):
    for s1, s2, sw, bias in _BILINEAR_CASES:
        shapes = (s1, s2, sw) + (((sw[0],),) if bias else ())
        yield Sample(_n(rng, *shapes), {}, name=f"{s1},{s2},{sw}{'+b' if bias else ''}")


def _bilinear_errors():
    f = "f32"
    yield ErrorCase((((4, 3), f), ((2,), f), ((5, 3, 2), f)), {}, InvalidProblemError, r"bilinear: argument 'input2': "
                    r"expected the leading dimensions", "leading")
    yield ErrorCase((((4, 3), f), ((4, 2), f), ((5, 2, 3), f)), {}, InvalidProblemError, r"argument 'weight': "
                    r"expected shape \(out_features, 3, 2\)", "weight")
    yield ErrorCase((((4, 3), f), ((4, 2), f), ((5, 3, 2), f), ((4,), f)), {}, InvalidProblemError,
                    r"argument 'bias': expected shape \(5,\)", "bias")
    yield ErrorCase((((), f), ((), f), ((5, 1, 1), f)), {}, InvalidProblemError, r"argument 'input1': expected a "
                    "tensor with at least 1 dimension", "scalar")
    yield ErrorCase((((4, 3), f), ((4, 2), "f64"), ((5, 3, 2), f)), {}, Exception, r"expected dtype f32", "dtype")


def _bilinear_cost(desc):
    m, o, i, j = bilinear_dims(desc.op, desc.inputs)
    return _io_bytes(desc), 2 * m * o * i * j + 2 * m * o * i


def _grad_tol(dt: DType):
    return tuple(2 * t for t in chain_tol(dt))


# -- registration ----------------------------------------------------------------------------------------------------
_BF = DType.bf16
SPECS: dict[str, OpSpec] = {}
SPECS["multi_dot"] = register_spec(OpSpec(
    name="multi_dot", family="gemm", arg_names=Variadic("tensors"), check=_check_multi_dot, dtypes=GEMM_TYPES,
    attrs=(), torch_peer=lambda *xs: __import__("torch").linalg.multi_dot(list(xs)),
    torch_name="torch.linalg.multi_dot", dropin=_dropin_multi_dot, jax_name="jax.numpy.linalg.multi_dot",
    grad=float_grads(_g_multi_dot), saves=("inputs",), differentiable=ALL_INPUTS, samples=_multi_dot_samples,
    errors=_multi_dot_errors, tol=chain_tol, grad_tol=_grad_tol,
    workloads=(Workload("multi_dot-[8192,64]x[64,8192]x[8192,64]-bf16", ((8192, 64), (64, 8192), (8192, 64)), _BF,
                        backward=True),),
    cost=_multi_dot_cost, category="gemm",
    doc="torch.linalg.multi_dot: the chain multiplied in its cheapest order (dynamic programming over the shapes)."))
SPECS["bilinear"] = register_spec(OpSpec(
    name="bilinear", family="gemm", arg_names=("input1", "input2", "weight", "bias"), check=_check_bilinear,
    dtypes=GEMM_TYPES, attrs=(), torch_peer=_peer_bilinear, torch_name="torch.nn.functional.bilinear",
    dropin=_dropin_bilinear, grad=float_grads(_g_bilinear), saves=("inputs",), differentiable=(0, 1, 2, 3),
    samples=_bilinear_samples, errors=_bilinear_errors, tol=chain_tol, grad_tol=_grad_tol,
    workloads=(Workload("bilinear-[4096,256]x[4096,256]->256-bf16", ((4096, 256), (4096, 256), (256, 256, 256),
                                                                     (256,)), _BF, backward=True),),
    cost=_bilinear_cost, category="gemm",
    doc="torch.nn.functional.bilinear: y = x1^T W x2 + b per row, as a GEMM and a batched matrix-vector product."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "bmm", "mm")
