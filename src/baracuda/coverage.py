"""The coverage matrix: op x dtype x backend x forward/backward, read from the op specs and the registry.

Nothing here is written by hand: the rows come from ``baracuda.all_specs()`` and each op's registered
implementations (``_core.registry.implementations``).  Forward coverage of a backend is the dtypes its
``Impl`` declares (``None`` = every dtype of the spec).  Backward coverage: the op's backward rule is
traced on the shapes of its non-empty samples (per dtype) to find every op it composes; the backward
runs on a backend for a dtype when each of those ops has a forward there for that dtype.  Where the rule
cannot be traced, the approximation "differentiable and the forward runs there" is used and flagged.

>>> from baracuda.coverage import coverage, render
>>> cov = coverage()
>>> print(render(cov, "text").splitlines()[0])  # doctest: +ELLIPSIS
baracuda coverage: ...
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from ._core.dtypes import DType, as_dtype
from ._core.plan import _Ctx
from ._core.registry import Impl, implementations
from ._core.sku import Backend
from ._core.spec import Descriptor, OpSpec, TensorSpec, all_specs, saved_names

__all__ = ["OpCoverage", "Coverage", "coverage", "render", "FORMATS", "BW_NOTE"]

BW_NOTE = ("backward on a backend = every op the backward rule composes (traced on the op's samples) has a "
           "forward there for that dtype (floating dtypes only; a backend name alone = all of them); '~' marks ops whose rule could not be traced, where the approximation "
           "'differentiable and the forward runs there' is used")


def is_gpu_impl(impl: Impl) -> bool:
    """A device implementation: runs on CUDA and computes on device arrays (not a host NumPy body)."""
    return "cuda" in impl.devices and impl.array_api != "numpy"


@dataclass
class OpCoverage:
    name: str
    family: str
    dtypes: list[str]
    differentiable: bool
    torch_name: str | None
    jax_name: str | None
    # backend -> {"fw": [dtype...], "bw": [dtype...], "devices": [...], "gpu": bool}
    backends: dict[str, dict] = field(default_factory=dict)
    bw_ops: list[str] = field(default_factory=list)   # ops the backward rule composes (traced)
    bw_traced: bool = True

    @property
    def gpu(self) -> bool:
        return any(b["gpu"] and b["fw"] for b in self.backends.values())

    def to_json(self) -> dict:
        d = asdict(self)
        d["gpu"] = self.gpu
        return d


@dataclass
class Coverage:
    backends: list[str]
    ops: list[OpCoverage]

    @property
    def no_gpu(self) -> list[str]:
        return [o.name for o in self.ops if not o.gpu]

    def summary(self) -> dict:
        per_backend = {b: sum(1 for o in self.ops if o.backends.get(b, {}).get("fw")) for b in self.backends}
        return {"ops": len(self.ops), "gpu_ops": sum(o.gpu for o in self.ops),
                "differentiable": sum(o.differentiable for o in self.ops),
                "families": len({o.family for o in self.ops}), "ops_per_backend": per_backend,
                "no_gpu_implementation": self.no_gpu}

    def to_json(self) -> dict:
        return {"note": BW_NOTE, "backends": self.backends, "summary": self.summary(),
                "ops": [o.to_json() for o in self.ops]}


class _Recorder(_Ctx):
    """A backward-rule context that only records which ops (and dtypes) the rule composes."""

    def __init__(self):
        self.trace = True
        self.tape = None        # (views -- ctx.reshape / ctx.expand -- are recorded by no tape here)
        self.calls: set[tuple[str, DType]] = set()
        self.descs: list[Descriptor] = []

    def op(self, name, *xs, **attrs):
        desc = Descriptor(name, tuple(self.spec_of(x) for x in xs), tuple(sorted(attrs.items())))
        self.calls.add((name, desc.dtype))
        self.descs.append(desc)
        outs = desc.outputs
        return outs[0] if len(outs) == 1 else outs


def trace_backward_descs(desc: Descriptor) -> list[Descriptor]:
    """The descriptors of every op the backward rule of ``desc`` runs, in order (shape-only tracing)."""
    rec = _Recorder()
    desc.spec.grad(rec, desc, tuple(desc.outputs), saved_specs(desc.spec, desc))
    return rec.descs


def saved_specs(spec: OpSpec, desc: Descriptor) -> dict:
    """What a backward plan of ``desc`` keeps, by name (inputs by argument name, outputs as out/outN)."""
    ins = dict(zip(spec.arg_names[:len(desc.inputs)], desc.inputs))   # (a Variadic names operand i 'name[i]')
    return {s: ins[s] if s in ins else desc.outputs[int(s[3:] or 0)] for s in saved_names(desc)}


def _trace_backward(spec: OpSpec, dt: DType) -> set[tuple[str, DType]] | None:
    """(op, dtype) pairs the backward rule runs for ``dt``: the union over the op's non-empty samples
    (shape-only tracing, nothing is computed); None when no sample could be traced."""
    if spec.samples is None:
        return None
    calls: set | None = None
    samples = []
    try:
        for smp in spec.samples(np.random.default_rng(0)):
            samples.append(smp)
    except Exception:  # noqa: BLE001  (a failing generator: trace the samples drawn before it failed)
        pass
    for sample in samples:
        arrays = [np.asarray(x) for x in sample.inputs]
        if not all(a.size for a in arrays):
            continue
        try:
            ins = [(a.shape, dt if a.dtype.kind == "f" else as_dtype(a.dtype)) for a in arrays]
            desc = Descriptor.make(spec.name, *ins, **sample.attrs)
            rec = _Recorder()
            spec.grad(rec, desc, tuple(desc.outputs), saved_specs(spec, desc))
        except Exception:  # noqa: BLE001  (this sample is not valid for dt, or the rule needs real data)
            continue
        calls = (calls or set()) | rec.calls
    return calls


def _fw_dtypes(op: str) -> dict[Backend, frozenset]:
    from ._core.spec import get_spec

    all_dt = frozenset(get_spec(op).dtypes)
    return {i.backend: (all_dt if i.dtypes is None else frozenset(i.dtypes) & all_dt) for i in implementations(op)}


def _op_coverage(spec: OpSpec, backends: list[Backend]) -> OpCoverage:
    spec_dtypes = [d.short for d in spec.dtypes]
    row = OpCoverage(spec.name, spec.family, spec_dtypes, spec.is_differentiable, spec.torch_name, spec.jax_name)
    impls = {i.backend: i for i in implementations(spec.name)}
    # gradients exist for floating (and complex) dtypes only; integer/bool dtypes have no backward
    grad_dtypes = [dt for dt in spec.dtypes if dt.is_floating or dt.is_complex] if spec.is_differentiable else []
    traces = {dt: _trace_backward(spec, dt) for dt in grad_dtypes}
    row.bw_traced = all(t is not None for t in traces.values())
    row.bw_ops = sorted({name for t in traces.values() if t for name, _ in t})
    fw_of = {name: _fw_dtypes(name) for name in row.bw_ops}
    for b in backends:
        impl = impls.get(b)
        if impl is None:
            continue
        fw = spec_dtypes if impl.dtypes is None else [d.short for d in spec.dtypes if d in impl.dtypes]
        bw = []
        for dt in grad_dtypes:
            if dt.short not in fw:
                continue
            calls = traces[dt]
            if calls is None or all(d in fw_of[name].get(b, ()) for name, d in calls):
                bw.append(dt.short)
        row.backends[str(b)] = {"fw": fw, "bw": bw, "devices": sorted(impl.devices), "gpu": is_gpu_impl(impl)}
    return row


def coverage(family: str | None = None) -> Coverage:
    """The matrix for every registered op (or one ``family``), sorted by family then name."""
    specs = sorted(all_specs(), key=lambda s: (s.family, s.name))
    if family is not None:
        specs = [s for s in specs if s.family == family]
    backends = list(Backend)
    return Coverage([str(b) for b in backends], [_op_coverage(s, backends) for s in specs])


# -- rendering ------------------------------------------------------------------------------------
def _cell(o: OpCoverage, b: str) -> str:
    c = o.backends.get(b)
    if c is None or not c["fw"]:
        return "-"
    return "all" if c["fw"] == o.dtypes else ",".join(c["fw"])


def _bw(o: OpCoverage) -> str:
    if not o.differentiable:
        return "-"
    grad_dts = [d for d in o.dtypes if d.startswith(("f", "bf", "c"))]
    cells = [b if [d for d in o.backends[b]["fw"] if d in grad_dts] == o.backends[b]["bw"]
             else f"{b}({','.join(o.backends[b]['bw'])})" for b in o.backends if o.backends[b]["bw"]]
    return ("" if o.bw_traced else "~") + (",".join(cells) or "none")


def _text(cov: Coverage) -> str:
    head = ["op", "family", "dtypes", *cov.backends, "backward", "gpu"]
    rows = [[o.name, o.family, ",".join(o.dtypes), *(_cell(o, b) for b in cov.backends), _bw(o),
             "yes" if o.gpu else "NO GPU"] for o in cov.ops]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    s = cov.summary()
    lines = [f"baracuda coverage: {s['ops']} ops in {s['families']} families, {s['gpu_ops']} with a GPU "
             f"implementation, {s['differentiable']} differentiable",
             f"cells: dtypes with a forward ('all' = every dtype of the op); {BW_NOTE}", ""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if cov.no_gpu:
        lines += ["", f"no GPU implementation ({len(cov.no_gpu)}): {', '.join(cov.no_gpu)}"]
    return "\n".join(lines)


def _markdown(cov: Coverage) -> str:
    s = cov.summary()
    out = ["# baracuda op coverage", "",
           "Generated by `baracuda ops --write` from the op specs and the backend registry; do not edit.", "",
           f"{s['ops']} ops in {s['families']} families; {s['gpu_ops']} have a GPU implementation; "
           f"{s['differentiable']} are differentiable.", "",
           "Cells list the dtypes each backend implements in the forward direction (`all` = every dtype of the op).",
           f"Note: {BW_NOTE}.", ""]
    if cov.no_gpu:
        out += [f"**No GPU implementation ({len(cov.no_gpu)}):** " + ", ".join(f"`{n}`" for n in cov.no_gpu), ""]
    families = sorted({o.family for o in cov.ops})
    for fam in families:
        out += [f"## {fam}", "", "| op | dtypes | " + " | ".join(cov.backends) + " | backward | GPU | torch |",
                "|---" * (len(cov.backends) + 5) + "|"]
        for o in cov.ops:
            if o.family != fam:
                continue
            gpu = "yes" if o.gpu else "**no GPU**"
            torch_name = f"`{o.torch_name}`" if o.torch_name else ""
            out.append(f"| `{o.name}` | {', '.join(o.dtypes)} | " + " | ".join(_cell(o, b) for b in cov.backends)
                       + f" | {_bw(o)} | {gpu} | {torch_name} |")
        out.append("")
    return "\n".join(out)


def _json(cov: Coverage) -> str:
    return json.dumps(cov.to_json(), indent=1, sort_keys=False)


_RENDER = {"text": _text, "markdown": _markdown, "json": _json}
FORMATS = tuple(_RENDER)


def render(cov: Coverage, fmt: str = "text") -> str:
    try:
        return _RENDER[fmt](cov)
    except KeyError:
        raise ValueError(f"coverage: format must be one of {FORMATS}, got {fmt!r}") from None
