"""The ``baracuda`` command line: info, ops (coverage matrix), explain, demo, bench.

Every subcommand reads the op specs and the registry; nothing here names an op.

    baracuda info
    baracuda ops --format markdown --write
    baracuda explain softmax --shape 16,4096 --dtype bf16 --attr dim=-1
    baracuda bench --family elementwise --json out.json --plot out.png
"""
from __future__ import annotations

import argparse
import ast
import importlib
import platform
import sys
from pathlib import Path

__all__ = ["main", "build_parser", "parse_shape", "parse_attr"]


def _version(module: str) -> str:
    try:
        return getattr(importlib.import_module(module), "__version__", "?")
    except Exception as e:  # noqa: BLE001  (a broken install is reported, not raised)
        return f"not importable ({type(e).__name__})"


# -- info ------------------------------------------------------------------------------------------
def cmd_info(args) -> int:
    import baracuda as bc
    from baracuda._core.device import Device, triton_interpreting
    from baracuda._core.options import PlanPreference
    from baracuda._core.registry import backend_availability, implementations

    print(f"baracuda {bc.__version__}")
    print(f"python   {platform.python_version()} ({sys.executable})")
    for mod in ("numpy", "torch", "triton"):
        print(f"{mod:8s} {_version(mod)}")
    print(f"TRITON_INTERPRET={'1' if triton_interpreting() else '0'}")
    dev = bc.as_device(None)
    devices = [dev] if dev.type == "cpu" else [dev, Device("cpu")]
    print(f"default device: {dev} ({dev.name}), arch {dev.arch}")
    if dev.type == "cuda":
        import torch

        p = torch.cuda.get_device_properties(dev.index)
        print(f"  compute capability {p.major}.{p.minor}, {p.multi_processor_count} SMs, "
              f"{p.total_memory / 2**30:.1f} GiB, CUDA {torch.version.cuda}")
    from baracuda.backends import library_versions

    print("NVIDIA libraries:")
    for name, version in library_versions().items():
        print(f"  {name:9s} {version}")
    n_ops = {}
    for spec in bc.all_specs():
        for impl in implementations(spec.name):
            n_ops[impl.backend] = n_ops.get(impl.backend, 0) + 1
    print(f"ops: {len(bc.all_specs())}")
    print("backends:")
    for d in devices:
        default = backend_availability(d)
        for b, why in default.items():
            forced = backend_availability(d, PlanPreference(prefer=(b,)))[b]
            if why is None:
                state = "available"
            elif forced is None:
                state = f"available only when preferred ({why})"
            else:
                state = f"unavailable: {why}"
            print(f"  {str(b):10s} on {str(d):7s} {n_ops.get(b, 0):4d} ops  {state}")
    return 0


# -- ops -------------------------------------------------------------------------------------------
def cmd_ops(args) -> int:
    from baracuda.coverage import coverage, render

    cov = coverage(args.family)
    if args.write:
        docs = Path(args.docs_dir)
        docs.mkdir(parents=True, exist_ok=True)
        (docs / "coverage.md").write_text(render(cov, "markdown") + "\n")
        (docs / "coverage.json").write_text(render(cov, "json") + "\n")
        print(f"wrote {docs / 'coverage.md'} and {docs / 'coverage.json'}", file=sys.stderr)
    print(render(cov, args.format))
    if args.format == "text" or args.missing:   # (after markdown / json: on stderr, stdout stays parseable)
        print(_mirror_report(args.missing), file=sys.stdout if args.format == "text" else sys.stderr)
    return 0


def _mirror_report(missing: bool) -> str:
    """The ``baracuda.torch`` mirror's coverage of torch's public functions (``_namespaces.public_functions``)."""
    try:
        import baracuda.torch as bt
        from baracuda.torch._namespaces import MIRRORED, mirror_coverage
    except ImportError as e:
        return f"\ntorch mirror: baracuda.torch not importable ({e})"
    covered, absent = mirror_coverage({*bt.PUBLISHED, *bt.VIEWS})
    lines = ["", f"torch mirror: {len(covered)} of {len(covered) + len(absent)} public functions ({MIRRORED})"]
    if missing:
        lines.append(f"not mirrored ({len(absent)}): " + ", ".join(absent))
    return "\n".join(lines)


# -- explain ---------------------------------------------------------------------------------------
def parse_shape(text: str) -> tuple[int, ...]:
    """'16,4096' -> (16, 4096); '16x4096' also works; '' or 'scalar' -> () (a 0-d tensor)."""
    t = text.strip().strip("()[]")
    if t in ("", "scalar"):
        return ()
    try:
        return tuple(int(p) for p in t.replace("x", ",").split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape: expected comma-separated integers like 16,4096, got {text!r}") from None


def parse_attr(text: str) -> tuple[str, object]:
    """'dim=-1' -> ('dim', -1); values are Python literals (ints, floats, tuples, None, True) or strings."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"attr: expected NAME=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    try:
        val = ast.literal_eval(v)
    except (ValueError, SyntaxError):
        val = v
    if isinstance(val, list):
        val = tuple(val)
    return k.strip(), val


def cmd_explain(args) -> int:
    import baracuda as bc
    from baracuda._core.errors import BaracudaError

    shapes = args.shape or []
    dtypes = args.dtype or ["f32"]
    if len(dtypes) not in (1, len(shapes)):
        print(f"explain: give one --dtype for all inputs or one per --shape ({len(shapes)}), got {len(dtypes)}",
              file=sys.stderr)
        return 2
    if len(dtypes) == 1:
        dtypes = dtypes * len(shapes)
    try:
        pref = bc.PlanPreference(prefer=tuple(args.prefer or ()), forbid=tuple(args.forbid or ()),
                                 allow_reduced_precision=args.tf32, require_deterministic=args.deterministic)
        desc = bc.Descriptor.make(args.op, *zip(shapes, dtypes), **dict(args.attr or ()))
        ex = bc.explain(desc, args.device, pref)
    except (BaracudaError, ValueError, TypeError) as e:
        print(f"explain: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(ex)
    if ex.chosen is None:
        print("  -> no backend can run this problem", file=sys.stderr)
        return 1
    return 0


# -- demo ------------------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    try:
        demo = importlib.import_module("baracuda.demo")
    except ImportError as e:
        print(f"demo: baracuda.demo is not available ({e})", file=sys.stderr)
        return 2
    rc = demo.main(list(args.demo_args))
    return int(rc or 0)


class _DemoArgs:
    def __init__(self, demo_args):
        self.demo_args = demo_args


# -- bench -----------------------------------------------------------------------------------------
def cmd_bench(args) -> int:
    from baracuda.bench import main as bench_main

    return bench_main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="baracuda", description="baracuda: GPU primitives through one Plan API")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    s = sub.add_parser("info", help="versions, device, and each backend's availability (and why not)")
    s.set_defaults(fn=cmd_info)

    s = sub.add_parser("ops", help="coverage matrix: op x dtype x backend x forward/backward")
    s.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    s.add_argument("--family", help="only this op family")
    s.add_argument("--write", action="store_true", help="also write DOCS_DIR/coverage.md and coverage.json")
    s.add_argument("--docs-dir", default="docs", help="where --write writes (default: docs)")
    s.add_argument("--missing", action="store_true",
                   help="list torch's public functions that baracuda.torch does not mirror")
    s.set_defaults(fn=cmd_ops)

    s = sub.add_parser("explain", help="every candidate implementation of one problem, chosen or refused (why)")
    s.add_argument("op")
    s.add_argument("--shape", type=parse_shape, action="append", help="one per input, e.g. 16,4096 ('' = 0-d)")
    s.add_argument("--dtype", action="append", help="one for all inputs, or one per --shape (default f32)")
    s.add_argument("--attr", type=parse_attr, action="append", help="NAME=VALUE (Python literal), repeatable")
    s.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the GPU if present)")
    s.add_argument("--prefer", action="append", help="backend to try first (repeatable, in order)")
    s.add_argument("--forbid", action="append", help="backend never to choose (repeatable)")
    s.add_argument("--tf32", action="store_true", help="allow reduced precision (TF32 for f32 matrix products)")
    s.add_argument("--deterministic", action="store_true", help="require deterministic implementations")
    s.set_defaults(fn=cmd_explain)

    s = sub.add_parser("demo", help="run baracuda.demo (every later argument is passed to it)")
    s.add_argument("demo_args", nargs=argparse.REMAINDER)
    s.set_defaults(fn=cmd_demo)

    s = sub.add_parser("bench", help="time every backend on the specs' workloads vs PyTorch eager and torch.compile")
    from baracuda.bench import add_arguments

    add_arguments(s)
    s.set_defaults(fn=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:  # everything after `demo` belongs to the demo, options included
        return cmd_demo(_DemoArgs(argv[1:]))
    args = build_parser().parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
