"""Shape helpers shared by the op families (pure Python: no NumPy; torch only inside the drop-in helper)."""
from __future__ import annotations

from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import norm_axes, norm_axis  # noqa: F401  (re-exported: the families import them here)

ODD_SHAPES = ((), (7,), (3, 5), (2, 3, 4, 5), (33, 65), (0, 4))


def no_out(op: str, out) -> None:
    """A drop-in's refusal of torch's ``out=`` (an UnsupportedError, a NotImplementedError): the Plan API writes into
    given buffers, ``Plan.run(out=)``."""
    if out is not None:
        raise UnsupportedError(op, "out= is not supported by the drop-in (Plan.run(out=) is)")


def broadcast_shapes(op: str, arg_names, shapes) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for name, s in zip(arg_names, shapes):
        for i, d in enumerate(s):
            if d < 0:
                raise InvalidProblemError(op, name, "non-negative dimensions", s)
            j = rank - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                raise InvalidProblemError(op, name, f"a shape broadcastable with {tuple(shapes[0])}", tuple(s))
    return tuple(out)


def check_nonneg(op: str, names, shapes):
    for n, s in zip(names, shapes):
        if any(d < 0 for d in s):
            raise InvalidProblemError(op, n, "non-negative dimensions", s)


def float_operands(*ts, bools: bool = False, to=None):
    """Drop-in helper: the integer tensors among ``ts`` cast to the floating dtype torch computes them in, before
    an op whose kernels read floats only: ``to`` where the call names it (softmax's ``dtype=``, logsumexp's default
    dtype), else the promoted dtype of the floating tensors among ``ts``, else ``torch.get_default_dtype()`` (losses
    and distances torch accepts integer inputs to: their arithmetic with a float margin / eps / exp promotes).
    Floating, complex and non-tensor arguments are returned as they are, so are bools unless ``bools`` (where
    torch's arithmetic on them is defined: a product, not a difference); the op's own check judges them."""
    import torch

    if to is None:
        floats = [t.dtype for t in ts if isinstance(t, torch.Tensor) and t.is_floating_point()]
        to = floats[0] if floats else torch.get_default_dtype()
        for d in floats[1:]:
            to = torch.promote_types(to, d)

    def cast(t):
        return isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex()) and (
            bools or t.dtype != torch.bool)
    return tuple(t.to(to) if cast(t) else t for t in ts)


def write_out(fn_name: str, result, out, exact_dtype: bool = False, stacklevel: int = 3):
    """torch's ``out=`` contract for a drop-in: the result must cast safely to out's dtype (``exact_dtype``: be
    out's dtype, as torch.diag wants); out is resized to the result's shape (torch warns when a non-empty out is
    resized), written without autograd (torch's out= results have no gradient) and returned."""
    import warnings

    import torch

    from .._core.dtypes import as_dtype

    if exact_dtype and out.dtype != result.dtype:
        raise InvalidProblemError(fn_name.rstrip("()"), "out", f"dtype {as_dtype(result.dtype)} (the result's)",
                                  as_dtype(out.dtype))
    if not torch.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{fn_name}: result type {as_dtype(result.dtype)} can't be cast to the desired output "
                           f"type {as_dtype(out.dtype)}")
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(f"{fn_name}: an output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape {list(result.shape)}",
                          UserWarning, stacklevel=stacklevel)
        out.resize_(result.shape)
    with torch.no_grad():
        out.copy_(result)
    return out


def case_samples(cases, base):
    """A spec's ``samples(rng)`` from a family's ``cases(rng, base)`` rows of (operands, attrs, name, grad)."""
    from .._core.spec import Sample

    def samples(rng):
        for ops, attrs, name, grad in cases(rng, base):
            yield Sample(tuple(ops), attrs, name=name, grad=grad)
    return samples


def suggest_channels_last(t) -> bool:
    """torch's suggest_memory_format: a 4-d / 5-d tensor laid out channels-last (and not also contiguous)."""
    import torch

    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return fmt is not None and t.is_contiguous(memory_format=fmt) and not t.is_contiguous()


class Layout:
    """How a call's operands were viewed for its plan when the caller's are laid out otherwise (channels-last
    activations, for a plan of contiguous operands): ``out(o)`` takes a plan output of ``rank`` dims back to the
    caller's view, ``grad(g)`` takes the caller's gradient of it (``grad_rank`` dims) to the plan's shape (outputs
    of another rank, per-channel statistics, pass as they are).  ``finish(outs)``: the drop-in's own finisher, or
    None.  The outputs handed back are tensors of their own, not views of the plan's (code that writes into one in
    place must not meet view semantics: a CopySlices of the base in its backward)."""

    __slots__ = ("out", "grad", "rank", "grad_rank", "finish")

    def __init__(self, out, grad, rank: int, grad_rank: int | None = None, finish=None):
        self.out, self.grad, self.rank, self.finish = out, grad, rank, finish
        self.grad_rank = rank if grad_rank is None else grad_rank   # (the caller's rank of a transformed output)

    def outs(self, outs, detach: bool = True) -> list:
        r = self.rank
        return [(self.out(o).detach() if detach else self.out(o)) if o.dim() == r else o for o in outs]

    def grads(self, grads) -> tuple:
        r = self.grad_rank
        return tuple([self.grad(g) if g is not None and g.dim() == r else g for g in grads])
