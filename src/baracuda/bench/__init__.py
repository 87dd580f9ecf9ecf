"""The benchmark suite, generated from the op specs' workloads (``OpSpec.workloads``) and cost models.

    baracuda bench --family elementwise --json out.json --plot out.png
    baracuda bench --quick --cpu-smoke --op add --json smoke.json   # CI: the code path, on the CPU
    baracuda bench --host --json host.json                          # host overhead per call vs torch (bench/host.py)
    baracuda bench --model llama --json llama.json                  # a HF model's train step per variant (models.py)
    baracuda bench --model gpt2 --device cpu --tiny                 # CI: that harness on the CPU, tiny configs

Timing needs a CUDA device; on the CPU only ``--quick --cpu-smoke`` runs (reference backend and Triton's
interpreter on tiny shapes: it checks the machinery, its times mean nothing).
This module stays import-light (no torch) so that ``baracuda --help`` is fast.
"""
from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "main", "options_from_args"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", action="append", help="only this op family (repeatable)")
    p.add_argument("--op", action="append", help="only this op (repeatable, or comma-separated)")
    p.add_argument("--workload", metavar="REGEX", help="only workloads whose name matches (re.search)")
    p.add_argument("--json", metavar="OUT", help="write the full report as JSON here")
    p.add_argument("--plot", metavar="OUT.png", help="write a speedup plot here (needs matplotlib)")
    p.add_argument("--backward", action=argparse.BooleanOptionalAction, default=True,
                   help="also time the backward of workloads that ask for it (default: yes)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="also time torch.compile of the torch peer (default: yes; no with --cpu-smoke)")
    p.add_argument("--quick", action="store_true", help="shrink every workload to about 1M elements")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="with --quick: run the machinery on the CPU (reference/interpreter, tiny shapes)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="wall-clock budget of one workload, all its rows (default 6; 2 with --quick)")
    p.add_argument("--time-budget", type=float, default=420.0,
                   help="wall-clock budget of the whole run in seconds; later workloads are skipped (default 420)")
    p.add_argument("--rep-seconds", type=float, default=None,
                   help="measured time per timing; the repetition count follows (default 0.1; 0.05 with --quick)")
    p.add_argument("--no-overhead", action="store_true", help="skip the host-overhead measurement")
    p.add_argument("--host", action="store_true",
                   help="instead of the workloads: host time per drop-in / Plan.run call vs torch (bench/host.py)")
    p.add_argument("--host-calls", type=int, default=2000, help="with --host: calls per timed round")
    p.add_argument("--host-rounds", type=int, default=7, help="with --host: interleaved rounds (median)")
    m = p.add_argument_group("real models (--model; bench/models.py)")
    m.add_argument("--model", metavar="NAME",
                   help="instead of the workloads: time a HF model's training step (zero_grad, forward with labels, "
                        "backward) under eager, bt.mode(), bt.patch, torch.compile, compile of the patched model and "
                        "Liger; NAME: llama, llama-gqa, gpt2, llama3-8b-stack")
    m.add_argument("--device", choices=("cuda", "cpu"), default=None, help="with --model (default: cuda if visible)")
    m.add_argument("--tiny", action="store_true",
                   help="with --model: tiny configuration, float32, 1 step, no compile unless --compile (CPU smoke)")
    m.add_argument("--steps", type=int, default=None, help="with --model: measured steps (default 5; 1 with --tiny)")
    m.add_argument("--warmup", type=int, default=None, help="with --model: warm-up steps (default 3; 0 with --tiny)")
    m.add_argument("--layers", type=int, default=None, help="with --model: number of decoder layers (default: the config's)")
    m.add_argument("--variant", action="append", help="with --model: only these variants (repeatable, comma-separated)")


def options_from_args(args):
    from .runner import BenchOptions

    ops = [o for item in (args.op or []) for o in item.split(",") if o]
    smoke = bool(args.cpu_smoke)
    rep = args.rep_seconds if args.rep_seconds is not None else (0.005 if smoke else 0.05 if args.quick else 0.1)
    mx = args.max_seconds if args.max_seconds is not None else (30.0 if smoke else 2.0 if args.quick else 6.0)
    return BenchOptions(families=list(args.family or []), ops=ops, backward=args.backward, quick=args.quick,
                        cpu_smoke=smoke, compile=(not smoke) if args.compile is None else args.compile, max_seconds=mx,
                        time_budget=args.time_budget, rep_seconds=rep, overhead=not args.no_overhead,
                        workload=getattr(args, "workload", None))


def main(args) -> int:
    """The ``baracuda bench`` subcommand. Exit status: 0 ok, 1 some row errored, 2 cannot run here."""
    if args.host:
        from .host import main as host_main

        return host_main(args)
    if args.model:
        from .models import main as model_main

        return model_main(args)
    from .. import all_specs, as_device
    from .._core.device import cuda_available
    from .report import Progress, plot, summary, table, write_json
    from .runner import run

    if args.cpu_smoke and not args.quick:
        print("bench: --cpu-smoke needs --quick", file=sys.stderr)
        return 2
    if args.cpu_smoke:
        device = as_device("cpu")
    elif not cuda_available():
        print("bench: error: timing needs a CUDA GPU and none is visible to torch. "
              "On a CPU-only machine, `baracuda bench --quick --cpu-smoke` runs the benchmark machinery "
              "(no meaningful times).", file=sys.stderr)
        return 2
    else:
        device = as_device("cuda")
    opts = options_from_args(args)
    known = {s.name for s in all_specs()}
    unknown = [o for o in opts.ops if o not in known]
    if unknown:
        print(f"bench: unknown op(s) {unknown}; see `baracuda ops`", file=sys.stderr)
        return 2
    checkpoint = (lambda rep: write_json(rep, args.json)) if args.json else None
    report = run(opts, device, progress=Progress(), checkpoint=checkpoint)
    print(table(report))
    print()
    print(summary(report))
    if args.json:
        write_json(report, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        why = plot(report, args.plot)
        print(why or f"wrote {args.plot}", file=sys.stderr)
    errors = [r for r in report["rows"] if str(r.get("status", "ok")).startswith("error")]
    return 1 if errors or report.get("fatal") else 0
