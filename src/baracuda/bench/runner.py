"""The benchmark runner: every workload of every op spec, every backend that can run it, against PyTorch
eager and ``torch.compile`` of the spec's torch peer, on the same tensors in the same process.

Per workload and direction (fw, and bw when the workload asks for it) the rows are:
  one per baracuda backend (forced with ``PlanPreference(prefer=(b,))``; a backend that would not be
  chosen even when preferred is reported as refused with its reason), ``torch`` (eager) and
  ``torch.compile``.  Each row has the median time, GB/s and TFLOP/s from the spec's cost model, the
  fraction of the measured roofline, the speedup over eager and compile (peer time / our time, > 1 means
  baracuda is faster) and the relative error ||ours - eager|| / ||eager|| (a cheap check that the timed
  kernel computes the same function).

Backward cost model: the fewest bytes a backward must move (output grads and saved tensors read once,
input grads written once); flops = the sum of the cost models of the ops the backward rule runs.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from .._core.options import PlanPreference
from .._core.plan import BackwardPlan, Plan
from .._core.registry import backend_availability, implementations, refusal
from .._core.sku import Backend
from .._core.spec import Descriptor, OpSpec, Workload, all_specs
from ..coverage import is_gpu_impl, saved_specs
from .inputs import make_inputs, shrink, workload_inputs
from .timing import Ceilings, host_overhead, measure_ceilings, time_cuda, time_host

__all__ = ["BenchOptions", "run", "select_workloads"]

L2_BYTES = 50 * 1024 * 1024      # H100 L2; inputs smaller than 2x this rotate through several copies
# sticky CUDA errors: after one of these the context is unusable, so the run stops instead of failing every row
_FATAL = ("illegal memory access", "unspecified launch failure", "device-side assert", "misaligned address",
          "illegal instruction")


@dataclass
class BenchOptions:
    families: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    backward: bool = True
    quick: bool = False
    cpu_smoke: bool = False
    compile: bool = True
    max_seconds: float = 6.0        # wall-clock budget of one workload (all its rows)
    time_budget: float = 420.0      # wall-clock budget of the whole run; later workloads are skipped
    rep_seconds: float = 0.1        # measured time per timing (the timer picks the repetition count)
    overhead: bool = True
    workload: str | None = None     # a regex: only workloads whose name it finds

    @property
    def max_numel(self) -> int | None:
        if self.cpu_smoke:
            return 512
        return 1 << 20 if self.quick else None


def select_workloads(opts: BenchOptions) -> list[tuple[OpSpec, Workload]]:
    specs = sorted(all_specs(), key=lambda s: (s.family, s.name))
    if opts.families:
        specs = [s for s in specs if s.family in opts.families]
    if opts.ops:
        specs = [s for s in specs if s.name in opts.ops]
    per_family: dict[str, list] = {}
    for s in specs:
        wls = list(s.workloads)
        if opts.workload:
            wls = [w for w in wls if re.search(opts.workload, w.name)]
        if opts.cpu_smoke and not opts.ops:
            wls = wls[:1]
        per_family.setdefault(s.family, []).extend((k, s, w) for k, w in enumerate(wls))
    # Under the overall time budget every family, and within a family every op, should get rows before any
    # op gets all of them: within a family, every op's first workload, then every op's second, ...; the
    # families are then interleaved one workload at a time.
    queues = [[(s, w) for _, s, w in sorted(q, key=lambda t: t[0])] for q in per_family.values()]
    out = []
    for i in range(max((len(q) for q in queues), default=0)):
        out += [q[i] for q in queues if i < len(q)]
    return out


# -- helpers ---------------------------------------------------------------------------------------
def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _rel_err(got, want) -> float | None:
    import torch

    errs = []
    for g, w in zip(_as_tuple(got), _as_tuple(want)):
        if g is None or w is None or not isinstance(w, torch.Tensor):
            continue
        g = g if isinstance(g, torch.Tensor) else torch.as_tensor(g)
        g = g.to(w.device)
        if tuple(g.shape) != tuple(w.shape):
            return float("inf")
        if not (w.is_floating_point() or w.is_complex()):
            errs.append(float((g != w).float().mean()) if w.numel() else 0.0)
            continue
        g64, w64 = g.to(torch.float64), w.to(torch.float64)
        den = float(torch.linalg.vector_norm(w64)) or 1.0
        errs.append(float(torch.linalg.vector_norm(g64 - w64)) / den)
    return max(errs) if errs else None


def _backends(spec: OpSpec, device) -> list[Backend]:
    """Backends worth timing on ``device``: device implementations on a GPU; on the CPU smoke path, every
    implementation whose backend can run there (the reference, Triton under the interpreter)."""
    out = []
    for impl in implementations(spec.name):
        if device.type == "cuda" and not is_gpu_impl(impl):
            continue  # the reference backend is the host oracle, not a candidate for GPU timing
        if device.type not in impl.devices:
            continue
        if backend_availability(device, PlanPreference(prefer=(impl.backend,))).get(impl.backend) is None:
            out.append(impl.backend)
    return out


def _forced(desc: Descriptor, device, backend: Backend, **pref_kw) -> Plan | str:
    pref = PlanPreference(prefer=(backend,), **pref_kw)
    try:
        plan = Plan.select(desc, device, pref)
    except Exception as e:  # noqa: BLE001  (no backend at all: report why)
        return f"{type(e).__name__}: {e}".splitlines()[0]
    if plan.sku.backend != backend:
        impl = next(i for i in implementations(desc.op) if i.backend == backend)
        return refusal(impl, desc, device, pref) or f"selection chose {plan.sku.backend} even when preferred"
    return plan


def _saved(bwp: BackwardPlan, desc: Descriptor, xs, outs) -> dict:
    names = desc.spec.arg_names
    saved = {}
    for n in bwp.saves:
        if n in names:
            saved[n] = xs[names.index(n)]
        elif n == "out":
            saved[n] = outs[0]
        else:
            saved[n] = outs[int(n[3:])]
    return saved


def backward_cost(desc: Descriptor) -> tuple[int, int]:
    """Fewest bytes a backward moves (output grads and saved tensors read once, input grads written once)
    and the flops of the ops its rule runs (the rule traced on shapes, each op's cost model)."""
    from ..coverage import trace_backward_descs

    spec = desc.spec
    saved = saved_specs(spec, desc)
    nbytes = sum(t.nbytes for t in desc.outputs) + sum(t.nbytes for t in saved.values())
    nbytes += sum(desc.inputs[i].nbytes for i in spec.differentiable if i < len(desc.inputs))
    try:
        flops = sum(d.spec.bytes_flops(d)[1] for d in trace_backward_descs(desc))
    except Exception:  # noqa: BLE001  (a rule that cannot be traced on shapes: bytes only)
        flops = 0
    return nbytes, flops


class _Ctx:
    """Per-run state: device, timer, ceilings, options, rows, deadline."""

    def __init__(self, opts: BenchOptions, device, ceilings: Ceilings):
        import torch

        self.opts, self.device, self.ceilings = opts, device, ceilings
        self.cuda = device.type == "cuda"
        self.tdev = torch.device("cuda", device.index) if self.cuda else torch.device("cpu")
        self.rows: list[dict] = []
        self.fatal: str | None = None
        self.capture = True     # CUDA-graph replays for the timing (bench_workload sets it per spec)

    def time(self, fns) -> "object":
        if self.cuda:
            return time_cuda(fns, self.opts.rep_seconds, graph=self.capture)
        return time_host(fns, self.opts.rep_seconds)

    def sync(self):
        if self.cuda:
            import torch

            torch.cuda.synchronize()


def _row(ctx: _Ctx, base: dict, impl: str, nbytes: int, flops: int, timing=None, status="ok", **extra) -> dict:
    r = dict(base, impl=impl, status=status, ms=None, gbps=None, tflops=None, roofline_pct=None, reps=None,
             spread=None, **extra)
    floor, bound = ctx.ceilings.floor_ms(nbytes, flops)
    r.update(bytes=nbytes, flops=flops, floor_ms=floor, bound=bound)
    if timing is not None:
        ms = timing.ms
        r.update(ms=ms, reps=timing.reps, spread=timing.spread, timing=getattr(timing, "how", "host"),
                 gbps=nbytes / (ms * 1e-3) / 1e9 if ms > 0 else None,
                 tflops=flops / (ms * 1e-3) / 1e12 if ms > 0 else None,
                 roofline_pct=100.0 * floor / ms if ms > 0 else None)
    ctx.rows.append(r)
    return r


def _attempt(ctx: _Ctx, fn):
    """Run fn(); on an exception return its one-line text (and remember fatal CUDA errors)."""
    from .._core import checks

    try:
        out = fn()
        checks.check_errors()   # this row's deferred value checks raise here, not in a later row's call
        return out, None
    except Exception as e:  # noqa: BLE001  (every failure becomes a row with its reason)
        checks.discard()
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        if any(k in msg for k in _FATAL):
            ctx.fatal = msg
        return None, msg


def _fresh_dynamo() -> None:
    """Each workload compiles its own graph: reset dynamo so its per-code-object recompile limit (8 by
    default, after which it silently runs eager) never applies across workloads.  Donated buffers are
    turned off because the backward is timed with retain_graph=True, which they forbid."""
    import torch

    torch._dynamo.reset()
    try:
        torch._functorch.config.donated_buffer = False
    except AttributeError:
        pass


def _warm_compiler(tdev) -> None:
    """Compile one tiny function forward and backward before timing anything, so the compiler's one-time
    start-up (imports, worker pool: tens of seconds) is not charged to the first workload."""
    import torch

    _fresh_dynamo()
    x = torch.randn(64, device=tdev, requires_grad=True)
    try:
        torch.compile(lambda t: torch.sin(t) * 2.0, dynamic=False)(x).sum().backward()
    except Exception:  # noqa: BLE001  (a broken compiler shows up as error rows, with the reason)
        pass


def _n_sets(ctx: _Ctx, desc: Descriptor) -> int:
    """Input sets to rotate through: enough that the footprint exceeds 2x L2 (at most 16)."""
    if not ctx.cuda:
        return 2
    foot = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    return 1 if foot >= 2 * L2_BYTES else max(1, min(16, math.ceil(2 * L2_BYTES / max(foot, 1))))


class _torch_math:
    """Run a PyTorch peer with the math flags matching the workload's preference: TF32 for f32 matmuls and
    half-precision split-K reductions for bf16/f16 matmuls only when the workload allows reduced precision,
    as baracuda's plans do (torch's own defaults: TF32 off, half reductions on)."""

    _FLAGS = ("allow_tf32", "allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction")

    def __init__(self, reduced: bool):
        self.reduced = reduced

    def __enter__(self):
        import torch

        m = torch.backends.cuda.matmul
        self.prev = {f: getattr(m, f) for f in self._FLAGS}
        for f in self._FLAGS:
            setattr(m, f, self.reduced)
        return self

    def __exit__(self, *exc):
        import torch

        for f, v in self.prev.items():
            setattr(torch.backends.cuda.matmul, f, v)
        return False


_NO_CAPTURE = frozenset({"linalg"})


# -- one workload ----------------------------------------------------------------------------------
def bench_workload(ctx: _Ctx, spec: OpSpec, wl: Workload) -> None:
    import torch

    opts = ctx.opts
    t_start = time.perf_counter()
    # torch's linear-algebra peers (MAGMA) abort the whole process under CUDA-graph capture instead of raising
    # (H100, torch 2.11: "magma_queue::setup_ptrArray(): Assertion failed"): per-call events for that family
    ctx.capture = spec.family not in _NO_CAPTURE
    ins = workload_inputs(wl, spec)
    attrs = dict(wl.attrs)
    if opts.max_numel is not None:
        ins, attrs = shrink(ins, attrs, opts.max_numel)
    base = {"op": spec.name, "family": spec.family, "workload": wl.name, "dtype": str(wl.dtype),
            "shapes": " ".join(f"{list(s)}" for s, _ in ins), "direction": "fw"}
    desc, err = _attempt(ctx, lambda: Descriptor.make(spec.name, *ins, **attrs))
    if desc is None:
        _row(ctx, base, "-", 0, 0, status=f"error: {err}")
        return
    base["problem"] = str(desc)
    nbytes, flops = spec.bytes_flops(desc)

    credit = [0.0]   # compilation time (torch.compile) is not charged to the workload's budget

    def over_budget(extra: float = 0.0) -> bool:
        credit[0] += extra
        return time.perf_counter() - t_start - credit[0] > opts.max_seconds or ctx.fatal is not None

    sets = [make_inputs(desc, ctx.tdev, seed=k) for k in range(_n_sets(ctx, desc))]
    attrs_n = desc.attr_dict
    peer = spec.bench_peer or spec.torch_peer    # (the function a user calls: OpSpec.bench_peer)
    comparable = spec.torch_peer is not None     # (rel_err against torch_peer's values only)
    timings: dict[str, float] = {}
    ref_out = None
    peers = {}
    if peer is not None:
        reduced = bool(wl.pref.get("allow_reduced_precision"))

        def eager(*xs):
            with _torch_math(reduced):
                return peer(*xs, **attrs_n)
        peers["torch"] = eager
        if opts.compile:
            _fresh_dynamo()

            def f(*xs):
                return peer(*xs, **attrs_n)
            compiled = torch.compile(f, dynamic=False)

            def comp(*xs):
                with _torch_math(reduced):
                    return compiled(*xs)
            peers["torch.compile"] = comp

    # -- forward: PyTorch peers first (eager's output is the reference for rel_err) -------------
    for name, fn in peers.items():
        if over_budget():
            _row(ctx, base, name, nbytes, flops, status="skipped: workload time budget")
            continue
        t0 = time.perf_counter()
        out, err = _attempt(ctx, lambda: fn(*sets[0]))
        compile_s = time.perf_counter() - t0 if name == "torch.compile" else None
        over_budget(compile_s or 0.0)
        if err:
            _row(ctx, base, name, nbytes, flops, status=f"error: {err}")
            continue
        if name == "torch" and comparable:
            if peer is spec.torch_peer:
                ref_out = out
            else:       # (a bench peer: the reference values are torch_peer's, under the same math flags)
                with _torch_math(bool(wl.pref.get("allow_reduced_precision"))):
                    ref_out = spec.torch_peer(*sets[0], **attrs_n)
        t, err = _attempt(ctx, lambda: ctx.time([lambda xs=xs: fn(*xs) for xs in sets]))
        if err:
            _row(ctx, base, name, nbytes, flops, status=f"error: {err}")
            continue
        timings[name] = t.ms
        _row(ctx, base, name, nbytes, flops, t, sku=name, kernel=name, compile_s=compile_s,
             rel_err=_rel_err(out, ref_out) if name != "torch" and ref_out is not None else None)

    plans = {}
    for b in _backends(spec, ctx.device):
        plan = _forced(desc, ctx.device, b, **wl.pref)
        if isinstance(plan, str):
            _row(ctx, base, str(b), nbytes, flops, status=f"refused: {plan}")
            continue
        if over_budget():
            _row(ctx, base, str(b), nbytes, flops, status="skipped: workload time budget", sku=str(plan.sku), kernel=f"{plan.sku.backend}[{plan.sku.route}]")
            continue
        outs, err = _attempt(ctx, lambda: [_as_tuple(plan.run(*xs)) for xs in sets])
        if err:
            _row(ctx, base, str(b), nbytes, flops, status=f"error: {err}", sku=str(plan.sku), kernel=f"{plan.sku.backend}[{plan.sku.route}]")
            continue
        rel = _rel_err(outs[0], ref_out) if ref_out is not None else None
        plans[b] = (plan, outs)
        # timed as callers use it: plan.run(*tensors), outputs allocated by the plan (torch's caching allocator,
        # as for the eager peer); that is also the plan's fast path (exact torch tensors, no out=)
        fns = [lambda xs=xs: plan.run(*xs) for xs in sets]
        t, err = _attempt(ctx, lambda: ctx.time(fns))
        if err:
            _row(ctx, base, str(b), nbytes, flops, status=f"error: {err}", sku=str(plan.sku), kernel=f"{plan.sku.backend}[{plan.sku.route}]")
            continue
        _row(ctx, base, str(b), nbytes, flops, t, sku=str(plan.sku), kernel=f"{plan.sku.backend}[{plan.sku.route}]", rel_err=rel,
             vs_eager=timings["torch"] / t.ms if "torch" in timings else None,
             vs_compile=timings["torch.compile"] / t.ms if "torch.compile" in timings else None)
    ctx.sync()

    has_diff = any(i < len(desc.inputs) and _has_grad(desc.inputs[i].dtype) for i in spec.differentiable)
    if wl.backward and opts.backward and spec.is_differentiable and has_diff and ctx.fatal is None:
        _bench_backward(ctx, spec, desc, dict(base, direction="bw"), sets, peers, plans, over_budget, wl)


def _has_grad(dt) -> bool:
    """Whether a tensor of ``dt`` takes a gradient: floating and complex (an FFT's operands and results)."""
    return dt.is_floating or dt.is_complex


def _bench_backward(ctx, spec, desc, base, sets, peers, plans, over_budget, wl):
    import torch

    diff = [i for i in spec.differentiable if i < len(desc.inputs) and _has_grad(desc.inputs[i].dtype)]
    gen = torch.Generator(device=ctx.tdev)
    gen.manual_seed(123)
    # an upstream gradient for each output the drop-in returns (what a model differentiates): an extra output that
    # torch's function does not return (cross_entropy's saved lse, ``dropin_result``) gets none, here and for the
    # peers, whose extra outputs (the spec's peer returns them for the tests' comparison) are left out the same way;
    # nor do the outputs an op saves for its backward only (OpSpec.saved_outputs: solve's LU and pivots)
    n_out = len(desc.outputs) - spec.saved_outputs
    if spec.dropin_result is not None and n_out > 1:
        try:
            n_out = len(_as_tuple(spec.dropin_result(tuple(range(n_out)))))
        except Exception:  # noqa: BLE001  (a result wrapper that needs real tensors: every output then)
            n_out = len(desc.outputs) - spec.saved_outputs
    def upstream(t):
        if t.dtype.is_complex:
            return torch.randn(t.shape, device=ctx.tdev, generator=gen, dtype=t.dtype.torch)
        return torch.randn(t.shape, device=ctx.tdev, generator=gen, dtype=torch.float32).to(t.dtype.torch)

    grads = [[upstream(t) if _has_grad(t.dtype) and j < n_out else None for j, t in enumerate(desc.outputs)]
             for _ in sets]
    nbytes, flops = backward_cost(desc)
    timings: dict[str, float] = {}
    ref = None
    # peers: autograd through the torch peer, retain_graph so only the backward is timed
    for name, fn in peers.items():
        if over_budget():
            _row(ctx, base, name, nbytes, flops, status="skipped: workload time budget")
            continue

        def graph(xs, g, fn=fn):
            req = [x.detach().clone().requires_grad_(i in diff) for i, x in enumerate(xs)]
            pairs = [(o, gi) for o, gi in zip(_as_tuple(fn(*req)), g) if gi is not None and o.requires_grad]
            wrt = [req[i] for i in diff]
            outs, gs = [o for o, _ in pairs], [gi for _, gi in pairs]
            return lambda: torch.autograd.grad(outs, wrt, gs, retain_graph=True, allow_unused=True)

        t0 = time.perf_counter()
        fns, err = _attempt(ctx, lambda: [graph(xs, g) for xs, g in zip(sets, grads)])
        got = None
        if not err:
            got, err = _attempt(ctx, fns[0])
        if name == "torch.compile":
            over_budget(time.perf_counter() - t0)
        t = None
        if not err:
            t, err = _attempt(ctx, lambda: ctx.time(fns))
        if err:
            _row(ctx, base, name, nbytes, flops, status=f"error: {err}")
            continue
        if name == "torch":
            ref = got
        timings[name] = t.ms
        _row(ctx, base, name, nbytes, flops, t, sku=name, kernel=name,
             rel_err=_rel_err(got, ref) if name != "torch" else None)

    for b, (plan, outs) in plans.items():
        if over_budget():
            _row(ctx, base, str(b), nbytes, flops, status="skipped: workload time budget")
            continue
        bwp, err = _attempt(ctx, lambda: BackwardPlan.select(desc, ctx.device, PlanPreference(prefer=(b,), **wl.pref)))
        if err:
            _row(ctx, base, str(b), nbytes, flops, status=f"refused: {err}")
            continue
        skus = ("; ".join(sorted({f"{s.backend}[{s.route}]" for s in bwp.skus}))
                or "no kernel (the rule passes grads through)")
        mixed = sorted({str(s.backend) for s in bwp.skus} - {str(b)})
        fns = [lambda xs=xs, o=o, g=g: bwp.run(*g, **_saved(bwp, desc, xs, o)) for xs, o, g in zip(sets, outs, grads)]
        got, err = _attempt(ctx, fns[0])
        t = None
        if not err:
            t, err = _attempt(ctx, lambda: ctx.time(fns))
        if err:
            _row(ctx, base, str(b), nbytes, flops, status=f"error: {err}", sku=skus)
            continue
        _row(ctx, base, str(b), nbytes, flops, t, sku=skus, kernel=skus, mixed_backends=mixed or None,
             rel_err=_rel_err([got[i] for i in diff], ref) if ref is not None else None,
             vs_eager=timings["torch"] / t.ms if "torch" in timings else None,
             vs_compile=timings["torch.compile"] / t.ms if "torch.compile" in timings else None)
    ctx.sync()


# -- the whole run -----------------------------------------------------------------------------------
def run(opts: BenchOptions, device, progress=None, checkpoint=None) -> dict:
    """Benchmark every selected workload on ``device``; returns the report (JSON-ready dict).

    progress(done, total, what) is called before each workload; checkpoint(report) after each one with the
    report so far (``partial: True``), so a run killed from outside still leaves its rows behind.
    """
    t0 = time.perf_counter()
    cuda = device.type == "cuda"
    ceilings = measure_ceilings(cuda)
    ctx = _Ctx(opts, device, ceilings)
    overhead = host_overhead(device) if opts.overhead else None
    if opts.compile:
        _warm_compiler(ctx.tdev)
    work = select_workloads(opts)
    skipped: list[dict] = []
    for k, (spec, wl) in enumerate(work):
        if progress:
            progress(k, len(work), f"{spec.name} {wl.name}")
        if time.perf_counter() - t0 > opts.time_budget:
            skipped.append({"op": spec.name, "workload": wl.name, "why": "overall time budget"})
            continue
        if ctx.fatal:
            skipped.append({"op": spec.name, "workload": wl.name, "why": f"CUDA context lost: {ctx.fatal}"})
            continue
        try:
            bench_workload(ctx, spec, wl)
        except Exception as e:  # noqa: BLE001  (one broken workload must not end the run)
            ctx.rows.append({"op": spec.name, "family": spec.family, "workload": wl.name, "direction": "fw",
                             "impl": "-", "status": f"error: {type(e).__name__}: {e}".splitlines()[0][:300]})
        if cuda:
            import torch

            torch.cuda.empty_cache()
        if checkpoint:
            checkpoint(_report(opts, device, ceilings, overhead, ctx, skipped, t0, partial=True))
    if progress:
        progress(len(work), len(work), "done")
    return _report(opts, device, ceilings, overhead, ctx, skipped, t0, partial=False)


def _report(opts, device, ceilings, overhead, ctx, skipped, t0, partial: bool) -> dict:
    import datetime
    import platform

    import torch

    import baracuda

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    cuda = device.type == "cuda"
    return {
        "baracuda": baracuda.__version__,
        "device": device.name, "device_id": str(device), "arch": str(device.arch),
        "torch": torch.__version__, "triton": triton_version, "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "mode": "cpu-smoke" if opts.cpu_smoke else ("quick" if opts.quick else "full"),
        "timer": "CUDA events, median" if cuda else "host clock, median (CPU smoke: not a performance number)",
        "ceilings": {"copy_GBps": ceilings.copy_gbps, "copy_how": ceilings.copy_how,
                     "peak_TFLOPs": ceilings.flops_tflops, "peak_how": ceilings.flops_how,
                     "note": "roofline floor = max(bytes / copy bandwidth, flops / bf16 GEMM rate); for SIMT ops "
                             "(elementwise, reductions) the memory term binds"},
        "host_overhead": overhead,
        "options": {k: getattr(opts, k) for k in opts.__dataclass_fields__},
        "rows": list(ctx.rows), "skipped": list(skipped), "fatal": ctx.fatal, "partial": partial,
        "elapsed_s": time.perf_counter() - t0,
    }
