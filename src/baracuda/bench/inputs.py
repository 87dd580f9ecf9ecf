"""Benchmark inputs, derived from the op specs: shapes from ``spec.workloads``, value domains from
``spec.samples`` (never zeros: a zero input hides unwritten outputs and can run faster than real data).

Domain rule, per input position, from every sample of the op with the same number of inputs:
  floating, every sample value > 0         -> uniform over [sample min, sample max] (e.g. log: positive)
  floating, every |value| >= 0.05          -> standard normal pushed away from zero (e.g. divisors)
  floating, sample values within [-1, 1]   -> uniform over [sample min, sample max] (bounded domains)
  floating otherwise                       -> standard normal
  integer                                  -> uniform integers over [sample min, sample max] (indices
                                              drawn for a small sample stay valid for a larger workload)
  bool                                     -> fair coin
An op whose valid inputs cannot be described this way declares its own maker in its spec (``OpSpec.inputs``,
set with ``baracuda._core.spec.set_bench_inputs``; fn(desc, torch_device, generator) -> list of tensors);
``register_input_maker(op, fn)`` overrides it from outside the library.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._core.dtypes import DType, as_dtype
from .._core.spec import Descriptor, OpSpec, TensorSpec, Workload

__all__ = ["Domain", "input_domains", "workload_inputs", "shrink", "make_inputs", "register_input_maker"]

_MAKERS: dict[str, Callable] = {}


def register_input_maker(op: str, fn: Callable) -> None:
    """Override the sample-derived inputs of ``op``: fn(desc, device, generator) -> list of torch tensors."""
    _MAKERS[op] = fn


@dataclass(frozen=True)
class Domain:
    kind: str            # normal | uniform | nonzero | int | bool
    lo: float = 0.0
    hi: float = 1.0

    def __str__(self) -> str:
        return self.kind if self.kind in ("normal", "nonzero", "bool") else f"{self.kind}[{self.lo:g},{self.hi:g}]"


_NORMAL = Domain("normal")
_DOMAINS: dict[tuple[str, int], list[Domain]] = {}


def _domain_of(arrays: list[np.ndarray]) -> Domain:
    arrays = [a for a in arrays if a.size]
    if not arrays:
        return _NORMAL
    kind = arrays[0].dtype.kind
    if kind == "b":
        return Domain("bool")
    lo = min(float(np.min(a)) for a in arrays)
    hi = max(float(np.max(a)) for a in arrays)
    if kind in "iu":
        return Domain("int", lo, hi)
    a64 = [np.asarray(a, np.float64) for a in arrays]
    if not all(np.isfinite(a).all() for a in a64):
        return _NORMAL
    if lo > 0:
        return Domain("uniform", lo, hi) if hi > lo else Domain("uniform", lo, lo * 2)
    if min(float(np.min(np.abs(a))) for a in a64) >= 0.05:
        return Domain("nonzero")
    if -1.0 <= lo and hi <= 1.0 and hi > lo:
        return Domain("uniform", lo, hi)
    return _NORMAL


def input_domains(spec: OpSpec, n_inputs: int) -> list[Domain]:
    """One Domain per input position, from every sample of ``spec`` with ``n_inputs`` inputs."""
    key = (spec.name, n_inputs)
    if key not in _DOMAINS:
        per_pos: list[list[np.ndarray]] = [[] for _ in range(n_inputs)]
        if spec.samples is not None:
            try:
                for s in spec.samples(np.random.default_rng(0)):
                    if len(s.inputs) == n_inputs:
                        for i, x in enumerate(s.inputs):
                            per_pos[i].append(np.asarray(x))
            except Exception:  # noqa: BLE001  (a failing sample generator leaves the default domain)
                pass
        _DOMAINS[key] = [_domain_of(a) for a in per_pos]
    return _DOMAINS[key]


def _sample_dtypes(spec: OpSpec, n_inputs: int) -> list[DType | None]:
    """The dtype of each input position in the op's first sample with ``n_inputs`` inputs."""
    if spec.samples is None:
        return [None] * n_inputs
    try:
        for s in spec.samples(np.random.default_rng(0)):
            if len(s.inputs) == n_inputs:
                return [as_dtype(np.asarray(x).dtype) for x in s.inputs]
    except Exception:  # noqa: BLE001  (a failing sample generator: no hint)
        pass
    return [None] * n_inputs


def workload_inputs(wl: Workload, spec: OpSpec | None = None) -> list[tuple[tuple[int, ...], DType]]:
    """(shape, dtype) per input.  A workload shape entry is a TensorSpec, a (shape, dtype) pair, or a bare
    shape, which takes ``wl.dtype`` -- except, when ``spec`` is given, at a position where the op's samples
    hold integer or bool arrays while other positions hold floats (class indices, masks): there the
    samples' dtype is used, so ``((n, c), (n,))`` with dtype bf16 means bf16 logits and i64 targets."""
    out = []
    hints = _sample_dtypes(spec, len(wl.shapes)) if spec is not None else [None] * len(wl.shapes)
    mixed = any(h is not None and (h.is_floating or h.is_complex) for h in hints)
    for entry, hint in zip(wl.shapes, hints):
        if isinstance(entry, TensorSpec):
            out.append((tuple(entry.shape), entry.dtype))
        elif (isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], (tuple, list))
              and isinstance(entry[1], (str, DType))):
            out.append((tuple(int(d) for d in entry[0]), as_dtype(entry[1])))
        else:
            dt = wl.dtype
            if mixed and hint is not None and wl.dtype.is_floating and (hint.is_integer or hint == DType.bool):
                dt = hint
            out.append((tuple(int(d) for d in entry), dt))
    return out


def shrink(ins: list[tuple[tuple[int, ...], DType]], attrs: dict, max_numel: int):
    """Scale every dimension above 16 down by one common factor so the largest input has at most about
    ``max_numel`` elements.  A shrunk dimension keeps the power-of-two factor (up to 16) of the original, so
    even stays even and multiples of 16 stay multiples of 16 (packing, vector widths, GEMM alignment).  The
    same mapping is applied to integers > 16 inside tuple attributes (target shapes), so dimensions that
    had to agree still agree."""
    largest = max((math.prod(s) for s, _ in ins), default=0)
    if largest <= max_numel:
        return ins, attrs
    big = max((sum(1 for d in s if d > 16) for s, _ in ins), default=0) or 1
    f = (largest / max_numel) ** (1.0 / big)

    def m(d):
        if not isinstance(d, int) or isinstance(d, bool) or d <= 16:
            return d
        g = min(16, d & -d)                       # the power of two dividing d, at most 16
        return max(16, g * math.ceil(d / f / g))

    new_ins = [(tuple(m(d) for d in s), dt) for s, dt in ins]
    new_attrs = {k: (tuple(m(d) for d in v) if isinstance(v, tuple) else v) for k, v in attrs.items()}
    return new_ins, new_attrs


def _tensor(shape, dt: DType, dom: Domain, device, gen):
    import torch

    if dom.kind == "bool" or dt == DType.bool:
        return torch.rand(shape, device=device, generator=gen) < 0.5
    if dt.is_packed:  # two 4-bit values per uint8 container byte: any byte is valid
        return torch.randint(0, 256, shape, device=device, generator=gen, dtype=torch.uint8)
    if dt.is_integer:
        lo, hi = (int(dom.lo), int(dom.hi)) if dom.kind == "int" else (0, 7)
        return torch.randint(lo, hi + 1, shape, device=device, generator=gen, dtype=dt.torch)
    compute = torch.float64 if dt == DType.f64 else torch.float32
    if dom.kind == "uniform":
        x = torch.rand(shape, device=device, generator=gen, dtype=compute) * (dom.hi - dom.lo) + dom.lo
    else:
        x = torch.randn(shape, device=device, generator=gen, dtype=compute)
        if dom.kind == "nonzero":
            x = torch.where(x.abs() < 0.1, torch.where(x < 0, x - 0.1, x + 0.1), x)
    return x.to(dt.torch)


def make_inputs(desc: Descriptor, device, seed: int = 0) -> list:
    """Random torch tensors on ``device`` (a torch.device) for ``desc``, in each input's domain."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    maker = _MAKERS.get(desc.op) or desc.spec.inputs
    if maker is not None:
        return list(maker(desc, device, gen))
    doms = input_domains(desc.spec, len(desc.inputs))
    return [_tensor(t.shape, t.dtype, d, device, gen) for t, d in zip(desc.inputs, doms)]
