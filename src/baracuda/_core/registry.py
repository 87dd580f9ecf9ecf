"""The one registry: backends register implementations per op; selection filters, orders, explains.

Selection = filter (each refusal keeps its reason) -> heuristic order (each implementation's
``priority(desc, device)``) -> preference override (``PlanPreference.prefer`` first) -> optional
autotune (time the eligible ones on the device, keep the fastest, cached per descriptor).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .device import Device
from .dtypes import DType
from .errors import UnsupportedError
from .options import PlanPreference
from .sku import Arch, Backend, PrecisionGuarantee

__all__ = ["Impl", "register", "implementations", "select_impl", "explain", "Explanation", "register_backend",
           "backend_availability"]


@dataclass(frozen=True)
class Impl:
    """One backend's implementation of one op.

    run(desc, inputs, outputs, workspace): computes into the preallocated ``outputs`` (NumPy arrays
        for ``array_api="numpy"``, torch tensors for ``"torch"``).
    supports(desc) -> None (yes) or a reason string (no).
    precision(desc, pref) -> PrecisionGuarantee.
    priority(desc, device) -> float: larger is tried first (the measured heuristic lives here).
    route(desc, pref) -> str: the concrete kernel or library entry point, for the SKU.
    """

    op: str
    backend: Backend
    run: Callable
    precision: Callable[..., PrecisionGuarantee]
    # the key dtypes it computes (desc.dtype: the first input's); None: every dtype of the op spec.  The other
    # operands' dtypes (indices, an f32 lse or table beside half q) are the spec's check's to validate
    dtypes: frozenset | None = None
    dtypes_note: str = ""                        # why the spec's other dtypes are not implemented (in the refusal)
    devices: frozenset = frozenset({"cuda"})
    archs: frozenset | None = None               # None: any arch of the device type
    supports: Callable | None = None
    priority: Callable | float = 0.0
    route: Callable | str = ""
    workspace: Callable | None = None
    reduced_precision: Callable | None = None    # (desc, pref) -> True when it would compute below the dtype's precision
    array_api: str = "torch"                     # what run() receives: "numpy" or "torch"
    layout: Callable | None = None               # (desc) -> layout tag for the SKU (GEMM)
    epilogue: Callable | None = None             # (desc) -> epilogue tag for the SKU (GEMM)
    # (desc, pref) -> run callable with run's signature, bound once per Plan: for kernels whose code depends
    # on the preference (TF32 for f32 GEMM) and to hoist per-descriptor setup (tile config) out of run.
    bind: Callable | None = None
    # False: run() reads device data back to the host to size or check its launches (CTC's lengths), so it
    # cannot run inside a CUDA-graph capture; such a run raises UnsupportedError under capture
    capturable: bool = True

    def prio(self, desc, device) -> float:
        return self.priority(desc, device) if callable(self.priority) else self.priority

    def route_of(self, desc, pref) -> str:
        return self.route(desc, pref) if callable(self.route) else (self.route or self.op)

    def workspace_of(self, desc) -> int:
        return int(self.workspace(desc)) if self.workspace is not None else 0


_IMPLS: dict[str, list[Impl]] = {}
# backend -> callable(device, pref) -> None or reason it cannot run on that device
_BACKENDS: dict[Backend, Callable] = {}


def import_submodules(package: str) -> None:
    """Import every module of ``package`` (modules whose name starts with '_' are helpers, skipped)."""
    import importlib
    import pkgutil

    pkg = importlib.import_module(package)
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not m.name.startswith("_"):
            importlib.import_module(f"{package}.{m.name}")


def register_backend(backend: Backend, availability: Callable) -> None:
    _BACKENDS[backend] = availability


def backend_availability(device: Device, pref: PlanPreference | None = None) -> dict[Backend, str | None]:
    """Every registered backend -> None (it can run on ``device`` under ``pref``) or the reason it cannot."""
    pref = pref if pref is not None else PlanPreference()
    return {b: avail(device, pref) for b, avail in _BACKENDS.items()}


def register(impl: Impl) -> Impl:
    lst = _IMPLS.setdefault(impl.op, [])
    if any(i.backend == impl.backend for i in lst):
        raise ValueError(f"{impl.op}: backend {impl.backend} registered twice")
    lst.append(impl)
    return impl


def implementations(op: str) -> list[Impl]:
    """The registered implementations of ``op`` (the backends register at ``import baracuda``: baracuda/_load.py)."""
    return list(_IMPLS.get(op, ()))


def refusal(impl: Impl, desc, device: Device, pref: PlanPreference) -> str | None:
    """Why ``impl`` cannot serve ``desc`` on ``device`` under ``pref`` (None: it can)."""
    if impl.backend in pref.forbid:
        return "forbidden by PlanPreference.forbid"
    avail = _BACKENDS.get(impl.backend)
    if avail is not None:
        why = avail(device, pref)
        if why:
            return why
    if device.type not in impl.devices:
        return f"runs on {'/'.join(sorted(impl.devices))}, not {device.type}"
    if impl.dtypes is not None and desc.dtype not in impl.dtypes:
        why = f"dtype {desc.dtype} not implemented (has {', '.join(sorted(d.short for d in impl.dtypes))})"
        return why + (f": {impl.dtypes_note}" if impl.dtypes_note else "")
    if impl.archs is not None and device.arch not in impl.archs:
        return f"arch {device.arch} not supported (needs {', '.join(sorted(a.value for a in impl.archs))})"
    if impl.reduced_precision is not None and impl.reduced_precision(desc, pref) and not pref.allow_reduced_precision:
        return "computes in reduced precision; set PlanPreference(allow_reduced_precision=True)"
    if pref.require_deterministic and not impl.precision(desc, pref).deterministic:
        return "not deterministic, and PlanPreference.require_deterministic is set"
    if pref.max_workspace_bytes is not None:
        ws = impl.workspace_of(desc)
        if ws > pref.max_workspace_bytes:
            return f"needs {ws} bytes of workspace > max_workspace_bytes={pref.max_workspace_bytes}"
    if impl.supports is not None:
        why = impl.supports(desc)
        if why:
            return why
    return None


def _ordered(desc, device, pref, impls):
    def key(i: Impl):
        pref_rank = pref.prefer.index(i.backend) if i.backend in pref.prefer else len(pref.prefer)
        return (pref_rank, -i.prio(desc, device))

    return sorted(impls, key=key)


_AUTOTUNED: dict = {}
# (desc, device, pref, ordered impls) -> the fastest impl: _core/autotune.py registers it (it builds Plans, and
# plan.py imports this module: a hook, not an import, keeps the core acyclic); baracuda/_load.py imports it
_AUTOTUNER: Callable | None = None


def set_autotuner(fn: Callable) -> None:
    global _AUTOTUNER
    _AUTOTUNER = fn


def select_impl(desc, device: Device, pref: PlanPreference) -> Impl:
    impls = _IMPLS.get(desc.op, [])
    refusals: dict[str, str] = {}
    ok = []
    for impl in impls:
        why = refusal(impl, desc, device, pref)
        if why:
            refusals[str(impl.backend)] = why
        else:
            ok.append(impl)
    if not ok:
        if not impls:
            raise UnsupportedError(desc.op, "no backend implements this op")
        raise UnsupportedError(desc.op, f"no backend can run {desc} on {device}", refusals)
    ordered = _ordered(desc, device, pref, ok)
    if pref.autotune and device.type == "cuda" and len(ordered) > 1 and not pref.prefer:
        key = (desc, device, pref)
        if key not in _AUTOTUNED:
            if _AUTOTUNER is None:
                raise RuntimeError("baracuda._core.autotune was not loaded (import baracuda loads it)")
            _AUTOTUNED[key] = _AUTOTUNER(desc, device, pref, ordered)
        return _AUTOTUNED[key]
    return ordered[0]


@dataclass
class Explanation:
    desc: object
    device: Device
    rows: list = field(default_factory=list)   # (backend, route, status, detail)

    @property
    def chosen(self):
        return next((r for r in self.rows if r[2] == "chosen"), None)

    def __str__(self) -> str:
        lines = [f"{self.desc} on {self.device} ({self.device.arch})"]
        for backend, route, status, detail in self.rows:
            lines.append(f"  {status:8s} {backend:10s} {route:34s} {detail}")
        return "\n".join(lines)


def explain(desc, device: Device, pref: PlanPreference) -> Explanation:
    ex = Explanation(desc, device)
    impls = _IMPLS.get(desc.op, [])
    ok = [i for i in impls if refusal(i, desc, device, pref) is None]
    chosen = None
    if ok:
        chosen = select_impl(desc, device, pref)
    for impl in _ordered(desc, device, pref, ok):
        status = "chosen" if impl is chosen else "eligible"
        ex.rows.append((str(impl.backend), impl.route_of(desc, pref), status,
                        f"priority={impl.prio(desc, device):g} precision: {impl.precision(desc, pref)}"))
    for impl in impls:
        if impl not in ok:
            ex.rows.append((str(impl.backend), impl.route_of(desc, pref), "refused", refusal(impl, desc, device, pref)))
    return ex
