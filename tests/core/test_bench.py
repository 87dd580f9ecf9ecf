"""The benchmark machinery on the CPU (`bench --quick --cpu-smoke`): valid JSON rows, the table, the
input domains derived from the specs, workload shrinking, timers and the roofline model."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import baracuda as bc
from baracuda._core.device import cuda_available
from baracuda.bench.inputs import Domain, input_domains, make_inputs, shrink, workload_inputs
from baracuda.bench.report import summary, table
from baracuda.bench.runner import BenchOptions, select_workloads
from baracuda.bench.timing import Ceilings, time_host
from baracuda.cli import main

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One CPU smoke run over a binary op with a backward workload (shared by the tests below)."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    rc = main(["bench", "--quick", "--cpu-smoke", "--op", "add", "--json", str(out), "--plot", str(out) + ".png"])
    return rc, json.loads(out.read_text())


def test_smoke_json_is_valid(smoke):
    rc, rep = smoke
    assert rc == 0, [r["status"] for r in rep["rows"] if r["status"] != "ok"]
    for key in ("device", "torch", "triton", "date", "ceilings", "rows", "host_overhead", "mode"):
        assert key in rep
    assert rep["mode"] == "cpu-smoke" and rep["partial"] is False
    assert rep["ceilings"]["copy_GBps"] > 0 and rep["ceilings"]["peak_TFLOPs"] > 0
    ho = rep["host_overhead"]
    assert ho["plan_run_us"] > 0 and ho["launch_us"] > 0 and ho["calls"] == 1000


def test_smoke_rows(smoke):
    _, rep = smoke
    rows = rep["rows"]
    spec = bc.get_spec("add")
    assert {r["workload"] for r in rows} == {w.name for w in spec.workloads}
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["impl"] for r in ok} >= {"torch", "reference"}
    for r in ok:
        assert r["ms"] > 0 and r["reps"] >= 3
        assert r["gbps"] is not None and r["roofline_pct"] is not None and r["bytes"] > 0
        if r["impl"] not in ("torch", "torch.compile"):
            assert r["sku"] and r["vs_eager"] > 0
            assert r["rel_err"] is not None and r["rel_err"] < 2e-2, r
    if any(w.backward for w in spec.workloads):
        bw = [r for r in ok if r["direction"] == "bw"]
        assert {r["impl"] for r in bw} >= {"torch", "reference"}


def test_table_and_summary(smoke):
    _, rep = smoke
    t = table(rep)
    assert "ceilings:" in t and "xeager" in t and "add" in t
    s = summary(rep)
    assert s.startswith("bench summary:") and "elementwise" in s


def test_plot_or_reason(smoke, tmp_path):
    from baracuda.bench.report import plot

    why = plot(smoke[1], tmp_path / "p.png")
    assert why is None and (tmp_path / "p.png").exists() or "matplotlib" in why


# -- inputs -----------------------------------------------------------------------------------------------
ALL_WORKLOADS = [(s, w) for s in sorted(bc.all_specs(), key=lambda s: s.name) for w in s.workloads]


@pytest.mark.skipif(cuda_available(), reason="a static check of the specs: the CPU CI runs it")
@pytest.mark.parametrize("spec,wl", ALL_WORKLOADS, ids=[w.name for _, w in ALL_WORKLOADS])
def test_every_workload_is_a_valid_problem(spec, wl):
    """Workloads are checked by the spec's shape rule; the shrunk (--quick) version gets real inputs in
    the op's domain: right shapes and dtypes, never all zeros, positive where the samples are."""
    ins = workload_inputs(wl, spec)
    bc.Descriptor.make(spec.name, *ins, **wl.attrs)
    small, attrs = shrink(ins, dict(wl.attrs), 512)
    try:
        desc = bc.Descriptor.make(spec.name, *small, **attrs)
    except bc.BaracudaError as e:
        pytest.skip(f"does not shrink generically: {e}")
    xs = make_inputs(desc, torch.device("cpu"))
    doms = input_domains(spec, len(desc.inputs))
    for x, t, d in zip(xs, desc.inputs, doms):
        assert tuple(x.shape) == t.shape and bc.as_dtype(x.dtype) == t.dtype
        if x.numel() and t.dtype.is_floating:
            assert bool((x != 0).any())
            if d.kind == "uniform":
                assert float(x.min()) >= d.lo - 1e-2 * abs(d.lo) and float(x.max()) <= d.hi + 1e-2 * abs(d.hi)


def test_domains_from_samples():
    from baracuda.bench.inputs import _domain_of

    assert _domain_of([np.abs(np.random.default_rng(0).standard_normal(100)) + 0.5]).kind == "uniform"
    assert _domain_of([np.random.default_rng(0).standard_normal(1000)]).kind == "normal"
    assert _domain_of([np.array([-0.9, 0.01, 0.7])]) == Domain("uniform", -0.9, 0.7)
    assert _domain_of([np.array([-2.0, 0.5, 3.0])]).kind == "nonzero"
    assert _domain_of([np.array([0, 3, 5])]) == Domain("int", 0, 5)
    assert _domain_of([np.array([True, False])]).kind == "bool"
    assert _domain_of([]).kind == "normal"


def test_positive_domain_inputs_are_positive():
    """An op whose samples are all positive gets positive benchmark inputs (derived, not named)."""
    for spec in bc.all_specs():
        doms = input_domains(spec, len(spec.arg_names))
        if doms and all(d.kind == "uniform" and d.lo > 0 for d in doms[:1]) and spec.workloads:
            ins = shrink(workload_inputs(spec.workloads[0], spec), dict(spec.workloads[0].attrs), 256)
            desc = bc.Descriptor.make(spec.name, *ins[0], **ins[1])
            assert float(make_inputs(desc, torch.device("cpu"))[0].min()) > 0
            return
    pytest.skip("no op with a positive domain registered")


def test_shrink_keeps_matching_dims():
    ins = [((4096, 8192), bc.DType.bf16), ((8192, 1024), bc.DType.bf16), ((8,), bc.DType.bf16)]
    small, attrs = shrink(ins, {"shape": (8, 4096, 8192), "dim": 1}, 1 << 12)
    (a, _), (b, _), (c, _) = small
    assert a[1] == b[0] and c == (8,)
    assert attrs["shape"] == (8, a[0], a[1]) and attrs["dim"] == 1
    assert max(math.prod(s) for s, _ in small) <= 4 * (1 << 12)
    assert shrink(ins, {}, 1 << 30) == (ins, {})


def test_workload_inputs_accepts_pairs():
    from baracuda._core.spec import Workload

    w = Workload("x", ((4, 8), ((4,), "i64")), bc.DType.f16)
    assert workload_inputs(w) == [((4, 8), bc.DType.f16), ((4,), bc.DType.i64)]


def test_select_workloads_order_and_filters():
    specs = [s for s in bc.all_specs() if s.workloads]
    fam = specs[0].family
    got = select_workloads(BenchOptions(families=[fam]))
    assert got and {s.family for s, _ in got} == {fam}
    n = len({s.name for s, _ in got})
    assert all(w is s.workloads[0] for s, w in got[:n])   # within a family, every op's first workload first
    every = select_workloads(BenchOptions())
    assert len(every) == sum(len(s.workloads) for s in bc.all_specs())
    fams = {s.family for s in specs}
    assert {s.family for s, _ in every[:len(fams)]} == fams  # families interleaved from the start
    one = select_workloads(BenchOptions(ops=[specs[0].name]))
    assert [w for _, w in one] == list(specs[0].workloads)


# -- timing and roofline ---------------------------------------------------------------------------------
def test_time_host_median():
    calls = []
    t = time_host([lambda: calls.append(1)], budget_s=0.001, max_reps=7)
    assert 3 <= t.reps <= 7 and t.ms >= 0 and len(calls) >= t.reps


def test_roofline_floor():
    c = Ceilings(copy_gbps=1000.0, copy_how="", flops_tflops=100.0, flops_how="")
    ms, bound = c.floor_ms(2_000_000_000, 1_000_000)      # 2 GB at 1 TB/s = 2 ms
    assert bound == "memory" and ms == pytest.approx(2.0)
    ms, bound = c.floor_ms(1000, 10 ** 12)                # 1 TFLOP at 100 TFLOP/s = 10 ms
    assert bound == "compute" and ms == pytest.approx(10.0)


def test_index_inputs_take_the_samples_dtype():
    """A bare shape at a position where the op's samples hold integers (class indices) gets that dtype."""
    from baracuda.bench.inputs import _sample_dtypes

    for spec in sorted(bc.all_specs(), key=lambda s: s.name):
        for wl in spec.workloads:
            hints = _sample_dtypes(spec, len(wl.shapes))
            if (wl.dtype.is_floating and any(h is not None and h.is_floating for h in hints)
                    and any(h is not None and h.is_integer for h in hints)
                    and all(isinstance(e[0], int) or e == () for e in wl.shapes)):
                got = workload_inputs(wl, spec)
                for (shape, dt), h in zip(got, hints):
                    assert dt == (h if h.is_integer else wl.dtype)
                return
    pytest.skip("no op mixes float and integer inputs in its samples")


def test_host_bench_machinery_on_cpu(monkeypatch):
    """bench --host's cases and paired timing run (the numbers mean nothing on the CPU; the GPU run is in
    bench/results): every case's baracuda and torch calls agree, forward and backward."""
    import torch

    import baracuda.torch as bt
    from baracuda.bench import host

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    for size in ("16", "64x4096"):
        for op, (theirs, ours, make) in host._cases(torch, bt, size, torch.device("cpu")).items():
            xs = make(False)
            torch.testing.assert_close(ours(*xs), theirs(*xs), rtol=1e-4, atol=1e-4, msg=op)
            if size == "16":
                r = host._paired(torch, lambda: ours(*xs), lambda: theirs(*xs), 2, 1)
                assert r["baracuda_us"] > 0 and r["torch_us"] > 0 and r["ratio"] > 0
                xg = make(True)
                out = ours(*xg)
                torch.autograd.backward(out, torch.ones_like(out) if out.dim() else None)
                assert all(x.grad is not None for x in xg)
    assert "fwd" in host._line({"op": "add", "size": "16", "row": "fwd", "target": 1.5, "baracuda_us": 2.0,
                                "torch_us": 1.0, "ratio": 2.0})


def test_complex_workloads_get_backward_rows(tmp_path):
    """A complex operand or result takes a (complex) upstream gradient: the FFT rows of issue #19 had no backward row
    (c2c) or timed an empty graph (rfft2's complex result got no upstream) before."""
    out = tmp_path / "fft.json"
    assert main(["bench", "--quick", "--cpu-smoke", "--no-compile", "--op", "fft,rfft2", "--json", str(out)]) == 0
    rows = [r for r in json.loads(out.read_text())["rows"] if r["direction"] == "bw" and r["status"] == "ok"]
    for op in ("fft", "rfft2"):
        mine = [r for r in rows if r["op"] == op and r["impl"] == "reference"]
        assert mine and {r["workload"] for r in mine} == {w.name for w in bc.get_spec(op).workloads}
        assert all(r["rel_err"] is not None and r["rel_err"] < 1e-5 for r in mine), mine
