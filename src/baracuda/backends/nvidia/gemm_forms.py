"""cuBLAS plans of the GEMM forms, through torch's entry points (precision flags, ``produce`` and the route suffix as
in cublas.py).

* ``addmm`` / ``addmv`` / ``baddbmm``: torch.addmm (cuBLASLt with the bias epilogue when ``input`` is a contiguous
  [N] vector and beta is 1, see ``lt_bias_ok``; else cuBLAS with beta: torch copies ``input`` into the result first,
  or, for beta = 0, does not read it), torch.addmv (gemv), torch.baddbmm (strided batched).
* ``addr``: torch.addmm on the [n, 1] and [1, m] views of the vectors (a K = 1 GEMM: torch's own addr on CUDA is an
  elementwise kernel, not cuBLAS).  Integer and bool vectors: torch.addr itself (that elementwise kernel, exact;
  cuBLAS has no integer GEMM).
* ``addbmm``: sum_b batch1[b] @ batch2[b] is one GEMM over K = B*k: batch1 permuted to [n, B, k] and folded to
  [n, B*k] (a copy), batch2 folded to [B*k, m] (a view when contiguous), then torch.addmm.  One cuBLAS call instead
  of torch's loop of B accumulating GEMMs, summed in f32 throughout (torch rounds half types after every batch).
* ``mv`` / ``dot`` / ``vdot``: torch.mv (gemv), torch.dot / torch.vdot (cuBLAS dot).
* ``outer`` of integer or bool vectors: torch.outer (an elementwise multiply on CUDA, exact).  The other GEMM forms
  take the floating types only here (``INT_NOTE``: torch's CUDA matmuls refuse integers too).
* ``einsum`` / ``tensordot`` / ``inner`` / ``outer``: the contraction's schedule (ops/gemm_einsum.py): views for the
  diagonals and broadcast axes, torch.sum for the labels one operand alone carries, one torch.mm / torch.bmm per
  pair of operands on permuted, folded views (torch's reshape copies an operand only where its grouped axes do not
  fold in memory), the result permuted into the output.  A schedule without a product (one operand: a transpose, a
  diagonal, a sum) or whose products contract nothing in a batch (a Hadamard product: torch.mul on broadcast views,
  not a batch of 1x1x1 GEMMs) runs no cuBLAS call at all: the route says "no GEMM".
* ``multi_dot``: one torch.mm per node of the cheapest parenthesization.
* ``bilinear``: torch.mm(x2, W.view(O*I, J)^T), then torch.baddbmm (bias) / torch.bmm against x1.
"""
from __future__ import annotations

from ...ops.gemm_chain import bilinear_dims, chain_dims, chain_order, order_text
from ...ops.gemm_einsum import contraction_of, schedule
from ...ops.gemm_forms import ADD_FORMS
from ..._core.dtypes import FLOAT_TYPES
from .cublas import lt_bias_ok, register_cublas, tf32_tag, torch_run


# -- add-forms -----------------------------------------------------------------------------------------------------
def _lt_path(desc) -> bool:
    """addmm's cuBLASLt bias epilogue (see cublas.lt_bias_ok): a 1-D input of the product's N, beta = 1."""
    if desc.op != "addmm":
        return False
    inp, a, b = (t.shape for t in desc.inputs)
    return (len(inp) == 1 and inp[0] == b[1] and desc.attr("beta") == 1 and a[0] > 1
            and lt_bias_ok(a[1], b[1], desc.dtype))


def _bind_add_form(desc, pref=None):
    import torch

    op, beta, alpha = desc.op, desc.attr("beta"), desc.attr("alpha")
    if op == "addr" and not desc.dtype.is_floating:
        fn = torch.addr

        def operands(xs):
            return xs
    elif op == "addr":
        fn = torch.addmm

        def operands(xs):
            return xs[0], xs[1].unsqueeze(1), xs[2].unsqueeze(0)
    elif op == "addbmm":
        fn = torch.addmm
        nb, n, k = desc.inputs[1].shape
        m = desc.inputs[2].shape[2]

        def operands(xs):
            return xs[0], xs[1].permute(1, 0, 2).reshape(n, nb * k), xs[2].reshape(nb * k, m)
    else:
        fn = getattr(torch, op)

        def operands(xs):
            return xs
    if beta == 1 and alpha == 1:      # no keywords: torch's argument parsing is part of the host cost
        def produce(xs):
            return [fn(*operands(xs))]
    else:
        def produce(xs):
            return [fn(*operands(xs), beta=beta, alpha=alpha)]

    def call(xs, outs):
        fn(*operands(xs), beta=beta, alpha=alpha, out=outs[0])
    return torch_run(call, produce, desc, pref)


def _add_route(desc, pref):
    op, beta = desc.op, desc.attr("beta")
    if op == "addr" and not desc.dtype.is_floating:
        return f"torch.addr(elementwise, {desc.dtype}; no GEMM)"
    if _lt_path(desc):
        r = "torch.addmm->cublasLt(bias epilogue)"
    else:
        gemm = {"addmm": "torch.addmm->cublas", "addmv": "torch.addmv->cublas(gemv)",
                "addr": "torch.addmm(vec1[:, None], vec2[None, :])->cublas(K=1)",
                "baddbmm": "torch.baddbmm->cublas(strided batched)",
                "addbmm": "batch1 folded to [n, B*k] (a copy) + torch.addmm->cublas(K=B*k)"}[op]
        r = gemm + ("(beta=0: input not read)" if beta == 0 else f"(input copied into out, beta={beta:g})")
    return r + tf32_tag(desc, pref)


def _add_epilogue(desc) -> str:
    beta, alpha = desc.attr("beta"), desc.attr("alpha")
    tag = "bias" if _lt_path(desc) else "identity" if beta == 0 else "input" if beta == 1 else f"{beta:g}*input"
    return tag + (f"+alpha={alpha:g}" if alpha != 1 else "")


# -- mv / dot / vdot -------------------------------------------------------------------------------------------------
def _bind_vec(desc, pref=None):
    import torch

    fn = getattr(torch, desc.op)

    def produce(xs):
        return [fn(xs[0], xs[1])]

    def call(xs, outs):
        fn(xs[0], xs[1], out=outs[0])
    return torch_run(call, produce, desc, pref)


_VEC_ROUTE = {"mv": "torch.mv->cublas(gemv)", "dot": "torch.dot->cublas(dot)",
              "vdot": "torch.vdot->cublas(dot; real operands)"}


# -- contractions ----------------------------------------------------------------------------------------------------
def run_schedule(sch, xs):
    """The contraction ``sch`` (ops/gemm_einsum.schedule) of the torch tensors ``xs``: the result, possibly a
    permuted view (of an operand, where nothing was computed: ``sch.fresh`` is False)."""
    import torch

    ops = []
    for x, p in zip(xs, sch.preps):
        for d1, d2 in p.diagonals:
            x = x.diagonal(0, d1, d2)
        if p.squeeze:
            x = x.squeeze(p.squeeze)
        if p.sums:
            x = x.sum(p.sums)
        ops.append(x)
    cur = ops[0]
    for y, pr in zip(ops[1:], sch.pairs):
        if pr.pre_sum:
            cur = cur.sum(pr.pre_sum)
        a, b = cur.permute(pr.perm_x), y.permute(pr.perm_y)
        if pr.elementwise:
            z = torch.mul(a.reshape(pr.b, pr.m, 1), b.reshape(pr.b, 1, pr.n))
        elif pr.batched:
            z = torch.bmm(a.reshape(pr.b, pr.m, pr.k), b.reshape(pr.b, pr.k, pr.n))
        else:
            z = torch.mm(a.reshape(pr.m, pr.k), b.reshape(pr.k, pr.n))
        cur = z.view(pr.shape)
    return cur.permute(sch.final_perm)


def _bind_contract(desc, pref=None):
    import torch

    if desc.op == "outer" and not desc.dtype.is_floating:
        return _bind_vec(desc, pref)       # torch.outer(a, b): an elementwise multiply, exact for integers / bool
    sch = schedule(contraction_of(desc))
    fresh = sch.fresh

    def produce(xs):
        r = run_schedule(sch, xs)
        return [r.contiguous() if fresh else r.clone(memory_format=torch.contiguous_format)]

    def call(xs, outs):
        outs[0].copy_(run_schedule(sch, xs))
    return torch_run(call, produce, desc, pref)


def _contract_route(desc, pref):
    if desc.op == "outer" and not desc.dtype.is_floating:
        return f"torch.outer(elementwise, {desc.dtype}; no GEMM)"
    c = contraction_of(desc)
    sch = schedule(c)
    parts = []
    if any(p.diagonals or p.squeeze for p in sch.preps):
        parts.append("diagonal/broadcast views")
    if any(p.sums for p in sch.preps) or any(pr.pre_sum for pr in sch.pairs):
        parts.append("torch.sum")
    for pr in sch.pairs:
        parts.append(f"torch.mul[{pr.b}x{pr.m}x{pr.n}](nothing contracted: elementwise)" if pr.elementwise else
                     f"torch.bmm[{pr.b}x{pr.m}x{pr.k}x{pr.n}]->cublas(strided batched)" if pr.batched else
                     f"torch.mm[{pr.m}x{pr.k}x{pr.n}]->cublas")
    if sch.final_perm != tuple(range(len(sch.final_perm))) or not sch.fresh:
        parts.append("copy into the output order")
    gemm = any(not pr.elementwise for pr in sch.pairs)
    head = f"{desc.op}[{c.equation}]: " + ("" if gemm else "no GEMM: ")
    return head + " + ".join(parts) + tf32_tag(desc, pref)


# -- multi_dot ---------------------------------------------------------------------------------------------------------
def _bind_multi_dot(desc, pref=None):
    import torch

    shapes = [t.shape for t in desc.inputs]
    p = chain_dims(shapes)
    tree = chain_order(p)
    out_shape = desc.outputs[0].shape
    mm = torch.mm

    def product(node, xs):
        if isinstance(node, int):
            x = xs[node]
            return x.view(p[node], p[node + 1]) if x.dim() == 1 else x
        return mm(product(node[0], xs), product(node[1], xs))

    def produce(xs):
        return [product(tree, xs).view(out_shape)]

    def call(xs, outs):
        outs[0].copy_(product(tree, xs).view(out_shape))
    return torch_run(call, produce, desc, pref)


def _multi_dot_route(desc, pref):
    tree = chain_order(chain_dims([t.shape for t in desc.inputs]))
    return f"multi_dot[order {order_text(tree)}]: {len(desc.inputs) - 1} x torch.mm->cublas" + tf32_tag(desc, pref)


# -- bilinear ----------------------------------------------------------------------------------------------------------
def _bind_bilinear(desc, pref=None):
    import torch

    m, o, i, j = bilinear_dims(desc.op, desc.inputs)
    out_shape = desc.outputs[0].shape
    bias = len(desc.inputs) == 4

    def compute(xs):
        u = torch.mm(xs[1].reshape(m, j), xs[2].reshape(o * i, j).mT).view(m, o, i)
        v = xs[0].reshape(m, i, 1)
        y = torch.baddbmm(xs[3].view(1, o, 1), u, v) if bias else torch.bmm(u, v)
        return y.view(out_shape)

    def produce(xs):
        return [compute(xs)]

    def call(xs, outs):
        outs[0].copy_(compute(xs))
    return torch_run(call, produce, desc, pref)


def _bilinear_route(desc, pref):
    tail = ("torch.baddbmm(bias)" if len(desc.inputs) == 4 else "torch.bmm") + "->cublas(strided batched)"
    return "bilinear: torch.mm(x2, W.view(O*I, J)^T)->cublas + " + tail + tf32_tag(desc, pref)


# -- registration -------------------------------------------------------------------------------------------------------
for _op in ADD_FORMS:
    register_cublas(_op, _bind_add_form, _add_route, epilogue=_add_epilogue,
                    dtypes=None if _op == "addr" else FLOAT_TYPES)
for _op in _VEC_ROUTE:
    register_cublas(_op, _bind_vec, lambda desc, pref: _VEC_ROUTE[desc.op])
for _op in ("einsum", "tensordot", "inner", "outer"):
    register_cublas(_op, _bind_contract, _contract_route, dtypes=None if _op == "outer" else FLOAT_TYPES)
register_cublas("multi_dot", _bind_multi_dot, _multi_dot_route)
register_cublas("bilinear", _bind_bilinear, _bilinear_route)
