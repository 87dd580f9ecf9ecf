"""Benchmark output: the stdout table, a plain stderr progress bar, JSON, an optional plot, and a short
summary of a saved JSON (``python -m baracuda.bench.report bench.json``)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

__all__ = ["Progress", "table", "write_json", "plot", "summary"]


class Progress:
    """``[#####.....] 12/80 name`` on stderr: redrawn in place on a terminal, one line per step otherwise."""

    def __init__(self, stream=None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int, what: str) -> None:
        filled = int(self.width * done / max(total, 1))
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {what}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120) + ("\n" if done >= total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _f(x, fmt: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, fmt)


_COLS = [  # header, key, format, width (text columns: the widest value, at most the width)
    ("op", "op", "", 24), ("workload", "workload", "", 44), ("dir", "direction", "", 3), ("impl", "impl", "", 13),
    ("ms", "ms", ".4f", 9), ("GB/s", "gbps", ".0f", 6), ("TFLOP/s", "tflops", ".2f", 7),
    ("roof%", "roofline_pct", ".0f", 5), ("xeager", "vs_eager", ".2f", 6), ("xcompile", "vs_compile", ".2f", 8),
    ("relerr", "rel_err", ".1e", 7),
]


def table(report: dict) -> str:
    """One line per row; refusals/errors print their reason; each row ends with its kernel (backend[route];
    the full SKU is in the JSON)."""
    lines = []
    rows = report.get("rows", [])
    c = report.get("ceilings") or {}
    lines.append(f"device {report.get('device')} ({report.get('arch')}), torch {report.get('torch')}, "
                 f"triton {report.get('triton')}, {report.get('date')}, mode {report.get('mode')}")
    lines.append(f"ceilings: copy {_f(c.get('copy_GBps'), '.0f')} GB/s ({c.get('copy_how')}); "
                 f"peak {_f(c.get('peak_TFLOPs'), '.3g')} TFLOP/s ({c.get('peak_how')})")
    ho = report.get("host_overhead") or {}
    if "plan_run_us" in ho:
        lines.append(f"host overhead ({ho['problem']}): plan.run {ho['plan_run_us']:.1f} us/call, "
                     f"with out= {ho.get('plan_run_out_us', float('nan')):.1f}, launch only {ho['launch_us']:.1f}"
                     + (f", torch eager {ho['torch_us']:.1f}" if "torch_us" in ho else "") + " us/call")
    if report.get("mode") != "full":
        lines.append(f"{report.get('mode')}: workloads shrunk, the names keep the full sizes (actual shapes: 'shapes' "
                     "in the JSON)")
    lines.append("xeager/xcompile = peer time / baracuda time (> 1: baracuda faster); roof% = roofline floor / time")
    widths = [w if f else min(w, max([len(h)] + [len(str(r.get(k) or "")) for r in rows])) for h, k, f, w in _COLS]
    lines.append("  ".join(h.rjust(w) if f else h.ljust(w) for (h, _, f, _), w in zip(_COLS, widths)))
    n_text = sum(1 for _, _, f, _ in _COLS if not f)
    for r in rows:
        text = [str(r.get(k) or "")[:w].ljust(w) for (_, k, f, _), w in zip(_COLS, widths) if not f]
        if r.get("status", "ok") != "ok":
            lines.append("  ".join(text + [r["status"][:160]]))
            continue
        nums = [_f(r.get(k), f).rjust(w) for (_, k, f, _), w in zip(_COLS[n_text:], widths[n_text:])]
        lines.append("  ".join(text + nums + [str(r.get("kernel") or r.get("sku") or "")[:100]]))
    for s in report.get("skipped", []):
        lines.append(f"skipped {s['op']} {s['workload']}: {s['why']}")
    if report.get("fatal"):
        lines.append(f"FATAL: {report['fatal']}")
    return "\n".join(lines)


def write_json(report: dict, path) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(report, indent=1, default=str) + "\n")


def plot(report: dict, path, max_rows: int = 80) -> str | None:
    """Speedup over eager and over compile per (workload, direction, backend), the ``max_rows`` lowest
    speedups over eager first; returns None when written, else why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib)"
    rows = [r for r in report.get("rows", []) if r.get("status") == "ok" and r.get("vs_eager")]
    if not rows:
        return "no baracuda row with a PyTorch comparison: nothing to plot"
    n_all = len(rows)
    rows = sorted(rows, key=lambda r: r["vs_eager"])[:max_rows]   # the slowest relative to eager: what to fix
    labels = [f"{r['workload']} {r['direction']} {r['impl']}" for r in rows]
    eager = [r["vs_eager"] for r in rows]
    comp = [r.get("vs_compile") or float("nan") for r in rows]
    fig, ax = plt.subplots(figsize=(10, max(3, 0.28 * len(rows) + 1)))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], eager, height=0.4, label="vs torch eager")
    ax.barh([i + 0.2 for i in y], comp, height=0.4, label="vs torch.compile")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speedup (peer time / baracuda time)")
    shown = f"the {len(rows)} lowest of {n_all} rows" if n_all > len(rows) else f"{n_all} rows"
    ax.set_title(f"baracuda on {report.get('device')} (torch {report.get('torch')}): {shown}", fontsize=9)
    ax.legend(loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def _geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(report: dict) -> str:
    """A short table: per family and direction, geomean speedups and roofline, plus failures."""
    ours = [r for r in report.get("rows", []) if r.get("impl") not in ("torch", "torch.compile", "-")]
    groups: dict = {}
    for r in ours:
        groups.setdefault((r.get("family", "?"), r.get("direction", "fw")), []).append(r)
    lines = [f"bench summary: {report.get('device')}, {report.get('mode')}, {len(report.get('rows', []))} rows, "
             f"{report.get('elapsed_s', 0):.0f} s",
             f"{'family':16s} {'dir':3s} {'rows':>4s} {'ok':>4s} {'geo xeager':>10s} {'geo xcompile':>12s} "
             f"{'geo roof%':>9s} {'worst roof%':>11s}"]
    for (fam, d), rs in sorted(groups.items()):
        ok = [r for r in rs if r.get("status") == "ok"]
        worst = min((r for r in ok if r.get("roofline_pct")), key=lambda r: r["roofline_pct"], default=None)
        lines.append(f"{fam[:16]:16s} {d:3s} {len(rs):4d} {len(ok):4d} {_f(_geomean([r.get('vs_eager') for r in ok]), '.2f'):>10s} "
                     f"{_f(_geomean([r.get('vs_compile') for r in ok]), '.2f'):>12s} "
                     f"{_f(_geomean([r.get('roofline_pct') for r in ok]), '.0f'):>9s} "
                     f"{(_f(worst['roofline_pct'], '.0f') + ' ' + worst['workload']) if worst else '-':>11s}")
    bad = [r for r in report.get("rows", []) if str(r.get("status", "ok")).startswith("error")]
    for r in bad[:15]:
        lines.append(f"ERROR {r.get('op')} {r.get('workload')} {r.get('direction')} {r.get('impl')}: {r['status'][:150]}")
    if len(bad) > 15:
        lines.append(f"... {len(bad) - 15} more errors in the JSON")
    if report.get("skipped"):
        lines.append(f"skipped workloads: {len(report['skipped'])} ({report['skipped'][0]['why']})")
    if report.get("fatal"):
        lines.append(f"FATAL: {report['fatal']}")
    return "\n".join(lines)


if __name__ == "__main__":
    for f in sys.argv[1:]:
        print(summary(json.loads(Path(f).read_text())))
