"""The random family's plain generators on cuRAND's host API, through nvmath-python's bindings
(``nvmath.bindings.curand``): uniform, normal, exponential, randint, bernoulli.

Generators.  One cuRAND generator of type PSEUDO_PHILOX4_32_10 (ordering PSEUDO_DEFAULT) per (thread, device,
stream), created on first use and bound to that stream (``curandSetStream``).  Every call sets the seed
(``curandSetPseudoRandomGeneratorSeed``: the op's ``seed``) and the offset (``curandSetGeneratorOffset``:
``WORDS_PER_ELEMENT`` * the op's ``offset``), then generates, so the same (seed, offset) gives the same numbers on
every call, whatever was generated before.  The op consumes ``ops.random.consumed(desc)`` stream elements exactly as
the Triton path does (a caller draws again at offset + consumed, or ``advance``s a state by it); a call generates
at most 2 cuRAND words per element (f64 uniforms and normals take two, an odd-length f32 normal one extra), so the
word windows [2 offset, 2 (offset + consumed)) of successive calls never overlap.

Not the Triton stream's numbers.  cuRAND's host generator orders Philox's outputs its own way (its threads' counter
blocks interleaved, Box-Muller on its own pairs), so the same (seed, offset) gives different values from the
Triton / reference stream (ops/random.py): the same distributions, not bit-identical across backends (the route
says so).  The plan prefers Triton (priority 10 vs cuRAND's 5); ``PlanPreference(prefer=(Backend.CURAND,))``
selects cuRAND.  The device-side ``state`` operand (CUDA-graph replay) is refused: cuRAND's host API takes seed and
offset on the host, and reading them from the device would synchronize.

Transforms (torch operations on the generated buffer, f32, or f64 for an f64 output; half outputs are cast from it):
uniform   cuRAND's U in (0, 1] with 1 -> 0 (torch's own fix-up of curand_uniform), then low + (high - low) U
normal    curandGenerateNormal(mean, std) (an even count: an odd length generates one more into the buffer)
exponential  -log(U) / lambd on U in (0, 1] (never log 0)
randint   the 32-bit words w: low + floor(w (high - low) / 2^32) (int64, split into 16-bit halves: exact)
bernoulli U' = U with 1 -> 0, 1 where U' < p (the attribute, or each element of the input)
"""
from __future__ import annotations

import threading

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.random import has_state, randint_range

__all__ = ["WORDS_PER_ELEMENT", "CURAND_OPS", "generator", "seed_and_offset", "generate_into"]

WORDS_PER_ELEMENT = 2
CURAND_OPS = ("uniform", "normal", "exponential", "randint", "bernoulli")
_TLS = threading.local()


def _lib():
    """``nvmath.bindings.curand`` (imported on first use; ``backends.nvmath_import_error("curand")`` has already
    said why it would not be importable)."""
    from nvmath.bindings import curand

    return curand


def _stream(device):
    import torch

    return torch.cuda.current_stream(device).cuda_stream


def generator(device_index: int, stream: int) -> int:
    """This thread's Philox generator for (device, stream), created and bound on first use."""
    gens = getattr(_TLS, "generators", None)
    if gens is None:
        gens = _TLS.generators = {}
    g = gens.get((device_index, stream))
    if g is None:
        import torch

        lib = _lib()
        with torch.cuda.device(device_index):
            g = lib.create_generator(int(lib.RngType.PSEUDO_PHILOX4_32_10))
            lib.set_generator_ordering(g, int(lib.Ordering.PSEUDO_DEFAULT))
            lib.set_stream(g, stream)
        gens[(device_index, stream)] = g
    return g


def seed_and_offset(g: int, seed: int, offset: int) -> None:
    """Restart ``g`` at (seed, WORDS_PER_ELEMENT * offset): the next generate call's numbers depend on these only."""
    lib = _lib()
    lib.set_pseudo_random_generator_seed(g, seed)
    lib.set_generator_offset(g, WORDS_PER_ELEMENT * offset)


def _count(op: str, n: int) -> int:
    """How many values the generate call writes: normals come in pairs (cuRAND refuses an odd count)."""
    return n + (n & 1) if op == "normal" else n


def generate_into(op: str, g: int, buf, n: int, desc) -> None:
    """One cuRAND generate call of ``op``'s raw draws into the contiguous ``buf`` (at least ``_count(op, n)``
    elements: int32 words for randint, f32 / f64 values otherwise)."""
    lib = _lib()
    ptr, f64 = buf.data_ptr(), buf.element_size() == 8
    if op == "randint":
        lib.generate(g, ptr, n)
    elif op == "normal":
        fn = lib.generate_normal_double if f64 else lib.generate_normal
        fn(g, ptr, _count(op, n), float(desc.attr("mean")), float(desc.attr("std")))
    else:
        (lib.generate_uniform_double if f64 else lib.generate_uniform)(g, ptr, n)


def _finish(op: str, raw, desc, x):
    """The op's values from the raw draws (module doc), in the buffer's dtype (int64 for randint)."""
    import torch

    if op == "normal":
        return raw
    if op == "randint":
        low, rng = randint_range(desc)
        w = raw.to(torch.int64) & 0xFFFFFFFF
        hi, lo = w >> 16, w & 0xFFFF
        return low + ((hi * rng + ((lo * rng) >> 16)) >> 16)
    if op == "exponential":
        return raw.log_().mul_(-1.0 / desc.attr("lambd"))
    u = raw.masked_fill_(raw == 1.0, 0.0)
    if op == "uniform":
        lo, hi = desc.attr("low"), desc.attr("high")
        return u.mul_(hi - lo).add_(lo)
    p = desc.attr("p")
    return (u < (x.to(u.dtype) if p is None else float(p))).to(u.dtype)


def _buffer_dtype(desc):
    import torch

    if desc.op == "randint":
        return torch.int32
    out = desc.outputs[0].dtype
    x = desc.inputs[0].dtype if desc.op == "bernoulli" else None
    return torch.float64 if DType.f64 in (out, x) else torch.float32


def _bind(desc, pref=None):
    import torch

    op = desc.op
    n = desc.outputs[0].numel
    seed, offset = desc.attr("seed"), desc.attr("offset")
    bdt = _buffer_dtype(desc)

    def run(desc_, inputs, outputs, ws):
        y = outputs[0]
        if n == 0:
            return
        direct = (y.dtype == bdt and y.is_contiguous() and _count(op, n) == n and op != "randint"
                  and y.data_ptr() % 16 == 0)
        buf = y.view(-1) if direct else torch.empty(_count(op, n), dtype=bdt, device=y.device)
        g = generator(y.device.index, _stream(y.device))
        seed_and_offset(g, seed, offset)
        generate_into(op, g, buf, n, desc)
        res = _finish(op, buf[:n], desc, inputs[0].reshape(-1) if op == "bernoulli" else None)
        if res.data_ptr() != y.data_ptr():
            y.copy_(res.view(y.shape))
    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _supports(desc):
    if has_state(desc):
        return ("the device-side 'state' operand: cuRAND's host API takes seed and offset on the host (reading them "
                "would synchronize); the Triton stream reads them on the device")
    return None


def _precision(desc, pref=None):
    # cuRAND computes f32 values (f64 for f64 outputs); a given (seed, offset, n) gives the same bits every call
    f64 = _buffer_dtype(desc).itemsize == 8
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              True, True)


_ROUTES = {"uniform": "curandGenerateUniform(Double) + affine", "normal": "curandGenerateNormal(Double)",
           "exponential": "curandGenerateUniform(Double) + -log / lambd", "randint": "curandGenerate + scale",
           "bernoulli": "curandGenerateUniform(Double) + compare"}


def _route(desc, pref=None):
    return f"curand:PHILOX4_32_10 {_ROUTES[desc.op]} (cuRAND's ordering: not the Triton stream's numbers)"


for _op in CURAND_OPS:
    register(Impl(op=_op, backend=Backend.CURAND, run=_run, bind=_bind, precision=_precision, supports=_supports,
                  devices=frozenset({"cuda"}), priority=5.0, route=_route, array_api="torch"))
