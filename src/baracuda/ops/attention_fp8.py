"""FP8 (e4m3) inputs of the dense sdpa / sdpa_backward (issue 15): the descale operands, the output dtype.

q, k, v may all be f8e4m3 (together: one dtype).  ``has_descale`` (bool) adds three f32 operands after the other
optional ones (and before sdpa_backward's grad_lse): q_descale, k_descale, v_descale, each [1] (per tensor) or one
per head (q_descale [Hq], k_descale / v_descale [Hkv]).  The op attends over the dequantized values
q * q_descale[h], k * k_descale[h_kv], v * v_descale[h_kv] (descale 1 without the operands): every score, mask and
gradient is that of sdpa on those real numbers.  ``out_dtype`` ("bf16" | "f16", None: bf16) is the dtype of out
(and of sdpa_backward's grad_out / out operands and its dq / dk / dv, the gradients of the dequantized values);
lse is f32.  A float mask / ALiBi slopes are f32 or the output dtype.  Both attributes are for FP8 inputs, and
for f64 inputs (out stays f64), so that an FP8 problem's float64 twin -- the reference oracle's -- is valid.
"""
from __future__ import annotations

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError
from .._core.spec import Attr

__all__ = ["F8", "FP8_ATTRS", "DESCALE_NAMES", "descale_names", "compute_dtype", "check_fp8", "fp8_errors"]

F8 = DType.f8e4m3
DESCALE_NAMES = ("q_descale", "k_descale", "v_descale")
_OUT = {"bf16": DType.bf16, "f16": DType.f16}
FP8_ATTRS = (
    Attr("has_descale", "bool", False,
         doc="FP8: q_descale, k_descale, v_descale (f32, [1] or per head) follow the other optional operands"),
    Attr("out_dtype", "str", None, optional=True, choices=tuple(_OUT),
         doc="FP8: out's dtype (and the gradients'), None -> bf16"),
)


def descale_names(attrs) -> tuple[str, ...]:
    return DESCALE_NAMES if attrs.get("has_descale") else ()


def compute_dtype(dt: DType, attrs) -> DType:
    """The dtype of out (and of grad_out, dq, dk, dv): q's, or for FP8 inputs out_dtype (bf16 by default)."""
    return _OUT[attrs.get("out_dtype") or "bf16"] if dt == F8 else dt


def check_fp8(op: str, dt: DType, descales: dict, Hq: int, Hkv: int, attrs) -> None:
    """The FP8 attributes only with FP8 (or f64) inputs; each descale f32 (f64 too for f64 inputs) of shape [1] or
    [its tensor's heads]."""
    if dt not in (F8, DType.f64):
        for n in ("has_descale", "out_dtype"):
            if attrs.get(n):
                raise InvalidProblemError(op, n, f"the default ({FP8_ATTRS[n == 'out_dtype'].default}) for "
                                          f"{dt} inputs (FP8 e4m3 q / k / v, or f64)", attrs[n])
        return
    for n, t in descales.items():
        h = Hq if n == "q_descale" else Hkv
        if t.dtype not in (DType.f32, dt):
            raise DTypeMismatchError(op, n, "f32" + (" or f64" if dt == DType.f64 else ""), str(t.dtype))
        if tuple(t.shape) not in ((1,), (h,)):
            raise InvalidProblemError(op, n, f"shape [1] (per tensor) or [{h}] (per {'query' if h == Hq else 'kv'}"
                                      f" head)", t.shape)


def fp8_errors(op: str, lead: tuple, q, k, v, tail: tuple = ()):
    """(inputs, attrs, exception, message pattern, name) of the FP8 argument errors; ``lead`` / ``tail``: operands
    before q (sdpa_backward's grad_out) and after v (its out, lse)."""
    q8, k8, v8 = ((s, "f8e4m3") for s, _ in (q, k, v))
    hq, hkv = q[0][1], k[0][1]
    d1 = ((1,), "f32")
    P = InvalidProblemError
    yield ((*lead, q, k, v, *tail, d1, d1, d1), {"has_descale": True}, P,
           rf"{op}: argument 'has_descale': expected the default \(False\) for f32 inputs", "descale-not-fp8")
    yield ((*lead, q, k, v, *tail), {"out_dtype": "f16"}, P,
           rf"{op}: argument 'out_dtype': expected the default \(None\) for f32 inputs", "out-dtype-not-fp8")
    yield ((*lead, q8, k8, v8, *tail, ((hq,), "f32"), ((hkv + 1,), "f32"), d1), {"has_descale": True}, P,
           rf"{op}: argument 'k_descale': expected shape \[1\] \(per tensor\) or \[{hkv}\] \(per kv head\)",
           "descale-shape")
    yield ((*lead, q8, k8, v8, *tail, d1, d1, ((1,), "bf16")), {"has_descale": True}, DTypeMismatchError,
           rf"{op}: argument 'v_descale': expected dtype f32, got bf16", "descale-dtype")
    yield ((*lead, q8, k8, v8, *tail), {"out_dtype": "f32"}, P,
           rf"{op}: argument 'out_dtype': expected one of 'bf16', 'f16'", "out-dtype-f32")
    yield ((*lead, q8, k8, v, *tail), {}, DTypeMismatchError,
           rf"{op}: argument 'v': expected dtype f8e4m3 \(q's dtype\)", "fp8-mixed")
