"""Session 13's reduction changes A/B on the GPU, one process: argmax / argmin of float rows as one packed int64
max per tile (``_FORCE["pack"]``) against the (value, index) tile path; sum / mean / amax over narrow trailing
dims read flat (``_FORCE["flat_rows"]``) against the row kernel; var over wide and narrow leading dims (one split
finished in the first stage, column-blocked fold) -- each beside torch eager and torch.compile.  Timed as the bench
rows are: CUDA-graph replays over input copies rotated past 2x L2 (bench/_graph_timer.timed).
    python bench/reduce_ab.py OUT.json [OPS]      (OPS: comma-separated, e.g. argmax,argmin; default all)"""
import json
import sys

import torch

import baracuda as bc

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import timed  # noqa: E402
from baracuda.backends.triton.reduction import reduce as tri  # noqa: E402

rows = []
CASES = [  # (op, shape, dims, dtype, knob): knob toggled off for the "before" row
    ("argmax", (16384, 4096), 1, torch.bfloat16, "pack"),
    ("argmax", (16384, 4096), 1, torch.float32, "pack"),
    ("argmin", (16384, 4096), 1, torch.bfloat16, "pack"),
    ("argmax", (16384, 4096), 1, torch.float16, "pack"),
    ("argmax", (1, 16777216), 1, torch.bfloat16, "pack"),
    ("argmax", (1048576, 16), 1, torch.bfloat16, "pack"),
    ("sum", (1048576, 16), 1, torch.bfloat16, "flat_rows"),
    ("mean", (1048576, 16), 1, torch.bfloat16, "flat_rows"),
    ("amax", (1048576, 16), 1, torch.bfloat16, "flat_rows"),
    ("sum", (262144, 64), 1, torch.bfloat16, "flat_rows"),
    ("sum", (4194304, 4), 1, torch.bfloat16, "flat_rows"),
    ("sum", (1048576, 16), 1, torch.float32, "flat_rows"),
    ("var", (16, 1048576), 0, torch.bfloat16, None),
    ("var", (16384, 4096), 0, torch.bfloat16, None),
    ("var", (1048576, 16), 0, torch.bfloat16, None),
    ("var", (256, 262144), 0, torch.bfloat16, None),
]


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


def main(out, only=None):
    for op, shape, dim, dt, knob in CASES:
        if only and op not in only:
            continue
        x = torch.randn(shape, device="cuda", dtype=dt) * 2 + 3
        nbytes = x.numel() * x.element_size()
        xs = [x] + [x.clone() for _ in range(max(0, -(-(160 << 20) // nbytes) - 1))]
        base = dict(op=op, shape=list(shape), dtype=str(dt), dim=dim, mb=nbytes / 1e6)
        tf = {"argmax": lambda t: torch.argmax(t, dim), "argmin": lambda t: torch.argmin(t, dim),
              "sum": lambda t: torch.sum(t, dim), "mean": lambda t: torch.mean(t, dim),
              "amax": lambda t: torch.amax(t, dim), "var": lambda t: torch.var(t, dim)}[op]
        want = tf(x)
        row(**base, impl="torch", us=timed(lambda i: tf(xs[i % len(xs)])))
        cf = torch.compile(tf)
        cf(x)
        row(**base, impl="torch.compile", us=timed(lambda i: cf(xs[i % len(xs)])))
        attrs = dict(dim=dim) if op.startswith("arg") else dict(dims=(dim,))
        if op == "var":
            attrs["correction"] = 1.0
        for on in ((True, False) if knob else (True,)):
            if knob:
                tri._FORCE[knob] = on
            p = bc.Plan.select(bc.Descriptor.like(op, x, **attrs), "cuda")
            got = p.run(x)
            ok = bool(torch.equal(got, want)) if op.startswith("arg") else \
                float(((got.double() - want.double()).abs() / want.double().abs().clamp_min(1e-3)).max())
            row(**base, impl="baracuda" if on else f"baracuda {knob}=off", route=p.sku.route, check=ok,
                us=timed(lambda i: p.run(xs[i % len(xs)])))
            tri._FORCE.pop(knob, None)
    json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(",") if len(sys.argv) > 2 else None)
