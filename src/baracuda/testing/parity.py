"""Torch parity from PyTorch's own samples: every published drop-in against torch on its OpInfo entries.

For each drop-in ``baracuda.torch.X`` whose torch name ``torch.X`` has entries in
``torch.testing._internal.common_methods_invocations.op_db`` (by name or alias), every sample the entry
generates runs through torch and through the drop-in, in float32 and float64 and in the integer / bool dtypes
the entry declares. Compared: whether both raise, the result's structure, shapes, dtypes and values; in float64,
the gradients of every input torch differentiates (``None`` counts as zero on both sides: a gradient torch
gives as zero must be zero here, and one torch gives must exist here).

``check_entry`` returns the mismatches of one entry (empty: it passes); ``run`` checks them all and returns a
summary. The known, deliberate differences are the table in ``docs/parity.md`` (``known_differences``);
``tests/torch/test_opinfo_parity.py`` asserts that every entry passes or is in that table, and that every
entry in the table still differs. On a GPU: ``python -m baracuda.testing.parity --device cuda --json F``.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import re
import time
from dataclasses import dataclass, field

import torch

# dtypes a sample set is drawn in: the floats always (where the entry supports them), the integers and bool
# where the entry declares them
DTYPES = (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool)
# Tolerances: our CPU drop-in computes in float64 and rounds once; torch computes float32 in float32
# (accumulating reductions lose ~sqrt(n) ulps, transcendental bodies ~1-2 ulps), so float32 gets 1e-5 relative /
# absolute; float64 results agree to rounding except where torch and NumPy use different algorithms for
# special functions (1e-7 covers those); integer and bool results are exact.
TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7), torch.complex64: (1e-5, 1e-5),
       torch.complex128: (1e-7, 1e-7)}
MAX_SAMPLES = 40    # per entry and dtype: op_db's generators are exhaustive for some ops; 40 cover every kind
DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs" / "parity.md"


@dataclass
class EntryResult:
    entry: str                 # op_db name + "." + variant_test_name where there is one
    published: str             # the drop-in's name under baracuda.torch
    samples: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def entry_name(opinfo) -> str:
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def published_entries(published: dict) -> list[tuple[str, object]]:
    """(published name, OpInfo) for every op_db entry whose name or alias is a published drop-in."""
    out = []
    for o in _op_db():
        for name in (o.name,) + tuple(a.name for a in o.aliases):
            if name in published:
                out.append((name, o))
                break
    return out


# op_db entries whose ``op`` is a lambda taking the sample in another order than torch's function (einsum's samples
# are (tensors, equation), torch.einsum takes (equation, tensors)): the drop-in, which has torch's signature, is
# called the way that lambda calls torch
_SAMPLE_ORDER = {
    "einsum": lambda fn: lambda tensors, equation: fn(equation, tensors),
    "where": lambda fn: lambda self, condition, other, **kw: fn(condition, self, other, **kw),
}


def _dropin(name: str):
    import baracuda.torch as bt

    obj = bt
    for part in name.split("."):
        obj = getattr(obj, part)
    return _SAMPLE_ORDER[name](obj) if name in _SAMPLE_ORDER else obj


def _flat(x):
    """A result as a flat list of leaves (tensors, numbers, None), with its structure's signature."""
    if isinstance(x, torch.Tensor):
        return [x], "T"
    if isinstance(x, (tuple, list)):
        leaves, sig = [], []
        for e in x:
            lv, s = _flat(e)
            leaves += lv
            sig.append(s)
        return leaves, f"{type(x).__name__}({','.join(sig)})"
    return [x], type(x).__name__


def _within_torchs_own_error(a, b, truth) -> bool:
    """float32 agreement where the result cancels (a weighted sum of large terms): ours is within 3x torch's own
    distance from the float64 result (both round the same terms; neither is closer to the truth by contract)."""
    if tuple(truth.shape) != tuple(a.shape):
        return False
    t = truth.detach().double()
    own = (b.detach().double() - t).abs()
    rtol, atol = TOL[b.dtype]
    bound = 3 * own + atol + rtol * t.abs()
    err = (a.detach().double() - t).abs()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return bool(((err <= bound) | both_nan | (a.detach().double() == t)).all())


# samples whose values come from a random stream torch and baracuda draw differently (same distribution, another
# sample; docs/parity.md says why): compared by metadata only, like values_unspecified ops
def _dropping(s) -> bool:
    """A dropout sample that draws (training, p > 0): our Philox stream, not torch's (docs/parity.md)."""
    return bool(s.kwargs.get("training", True)) and s.kwargs.get("p", 0.5) > 0


RANDOM_SAMPLES = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    **{f"nn.functional.{n}": _dropping for n in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                                 "feature_alpha_dropout")},
    "bernoulli": lambda s: True,
    "multinomial": lambda s: True,
    **{n: lambda s: True for n in ("randn", "randint", "rand_like", "randn_like", "randint_like")},
}


def _values_unspecified(published: str) -> bool:
    """The op's spec says its values are uninitialized memory (torch.empty's contract): compare only metadata."""
    import baracuda.torch as bt
    from baracuda._core.errors import UnsupportedError
    from baracuda._core.spec import get_spec

    try:
        return get_spec(bt.PUBLISHED[published]).values_unspecified
    except (KeyError, UnsupportedError):    # not published / not one spec (an overload's route)
        return False


def _compare(tag, ours, theirs, out: list, truth=None, values: bool = True):
    lo, so = _flat(ours)
    lt, st = _flat(theirs)
    lf = []     # the float64 result's leaves, computed on the first float32 value mismatch (``truth()``)
    if so != st:
        out.append(f"{tag}: result structure {so} vs torch {st}")
        return
    for k, (a, b) in enumerate(zip(lo, lt)):
        where = tag if len(lo) == 1 else f"{tag}[{k}]"
        if isinstance(b, torch.Tensor):
            if tuple(a.shape) != tuple(b.shape):
                out.append(f"{where}: shape {tuple(a.shape)} vs torch {tuple(b.shape)}")
            elif a.dtype != b.dtype:
                out.append(f"{where}: dtype {a.dtype} vs torch {b.dtype}")
            elif a.device != b.device:
                out.append(f"{where}: device {a.device} vs torch {b.device}")
            elif values:
                rtol, atol = TOL.get(b.dtype, (0, 0))
                try:
                    torch.testing.assert_close(a.detach(), b.detach(), rtol=rtol, atol=atol, equal_nan=True)
                except AssertionError as e:
                    if truth is not None and b.dtype in (torch.float32, torch.complex64):
                        if not lf:
                            t = truth()
                            lf[:] = _flat(t)[0] if t is not None else [None] * len(lt)
                        if k < len(lf) and isinstance(lf[k], torch.Tensor) and _within_torchs_own_error(a, b, lf[k]):
                            continue
                    msg = str(e).strip().splitlines()
                    out.append(f"{where}: values differ ({'; '.join(m.strip() for m in msg[1:3])})")
        elif isinstance(b, float) and isinstance(a, float):
            if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-7 * max(1.0, abs(b))):
                out.append(f"{where}: {a} vs torch {b}")
        elif a != b:
            out.append(f"{where}: {a!r} vs torch {b!r}")


def _leaves(sample):
    """The tensors of a sample that require grad (input, args, kwargs; one level into lists)."""
    found = []

    def visit(v):
        if isinstance(v, torch.Tensor):
            if v.requires_grad and v.is_leaf:
                found.append(v)
        elif isinstance(v, (list, tuple)):
            for e in v:
                visit(e)

    visit(sample.input)
    for a in sample.args:
        visit(a)
    for v in sample.kwargs.values():
        visit(v)
    return found


def _call(fn, sample):
    return fn(sample.input, *sample.args, **sample.kwargs)


def _grads(outs, leaves, cots):
    pairs = [(o, c) for o, c in zip(outs, cots) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not pairs:
        return [None] * len(leaves)
    return torch.autograd.grad([o for o, _ in pairs], leaves, [c for _, c in pairs], allow_unused=True)


def _exc(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def _f64_result(opinfo, sample):
    """torch's result on the sample's float32 tensors upcast to float64 (None if torch refuses that)."""
    def up(v):
        if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
            return v.detach().double()
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(up(e) for e in v)
        return v
    try:
        with torch.no_grad():
            return opinfo.op(up(sample.input), *[up(a) for a in sample.args],
                             **{k: up(v) for k, v in sample.kwargs.items()})
    except Exception:
        return None


def check_sample(fn, opinfo, sample, dtype, tag, out: list, grad: bool, values: bool = True):
    with torch.no_grad() if not grad else torch.enable_grad():
        try:
            theirs = _call(opinfo.op, sample)
        except Exception as e:   # torch refuses: so must we
            try:
                _call(fn, sample)
            except Exception:
                return
            out.append(f"{tag}: torch raises ({_exc(e)}) but the drop-in returns a result")
            return
        try:
            ours = _call(fn, sample)
        except Exception as e:
            out.append(f"{tag}: the drop-in raises {_exc(e)}")
            return
    before = len(out)
    _compare(tag, ours, theirs, out, (lambda: _f64_result(opinfo, sample)) if dtype == torch.float32 else None,
             values)
    if not grad or len(out) > before:
        return
    leaves = _leaves(sample)
    if not leaves:
        return
    lt, _ = _flat(theirs)
    lo, _ = _flat(ours)
    gen = torch.Generator().manual_seed(0)
    cots = [torch.randn(o.shape, dtype=o.dtype, generator=gen) if isinstance(o, torch.Tensor) and o.is_floating_point()
            else None for o in lt]
    try:
        gt = _grads(lt, leaves, cots)
    except Exception:       # torch has no gradient here (e.g. an integer output): nothing to compare
        return
    try:
        go = _grads(lo, leaves, cots)
    except Exception as e:
        out.append(f"{tag} grad: the drop-in's backward raises {_exc(e)}")
        return
    for k, (a, b) in enumerate(zip(go, gt)):
        if a is None and b is None:
            continue
        a = torch.zeros_like(leaves[k]) if a is None else a
        b = torch.zeros_like(leaves[k]) if b is None else b
        _compare(f"{tag} grad[{k}]", a, b, out, values=values)


def _torch_fn(name: str):
    obj = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj


def _ours(published: str, opinfo):
    """What runs the drop-in on the entry's samples: the drop-in itself where the entry's ``op`` is torch's function
    of that name; else the entry's own ``op`` (a lambda that reorders or wraps the call: ``where``'s (self,
    condition, other) -> torch.where(condition, self, other), ``einsum``'s (tensors, equation), ``x.repeat(dims)``,
    rrelu under a fixed seed) under ``baracuda.torch.mode(strict=True)``, which routes the torch call inside to the
    drop-in and raises where it would fall through to torch."""
    fn = _dropin(published)
    if opinfo.op is _torch_fn(published):
        return fn
    import baracuda.torch as bt

    def through_op(*args, **kwargs):
        with bt.mode(strict=True):
            return opinfo.op(*args, **kwargs)
    return through_op


def _size(sample) -> int:
    """A sample's tensor elements (its input and every tensor argument): the interpreter's work grows with it."""
    n = 0
    for v in (sample.input, *sample.args, *sample.kwargs.values()):
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, torch.Tensor):
                n += t.numel()
    return n


def check_entry(published: str, opinfo, device: str = "cpu", dtypes=DTYPES,
                max_samples: int = MAX_SAMPLES, smallest: bool = False) -> EntryResult:
    """``smallest``: the ``max_samples`` smallest samples (by their tensors' elements) instead of the first ones."""
    res = EntryResult(entry_name(opinfo), published)
    fn = _ours(published, opinfo)
    values = not _values_unspecified(published)
    supported = opinfo.supported_dtypes(device)
    for dtype in dtypes:
        if dtype not in supported:
            continue
        grad = dtype == torch.float64 and opinfo.supports_autograd
        try:
            samples = list(opinfo.sample_inputs(device, dtype, requires_grad=grad))
            samples = (sorted(samples, key=_size) if smallest else samples)[:max_samples]
        except Exception as e:      # a sample generator that needs something this machine lacks
            res.mismatches.append(f"{dtype}: op_db's sample generator raises {_exc(e)}")
            continue
        for k, s in enumerate(samples):
            torch.manual_seed(k)
            res.samples += 1
            n = len(res.mismatches)
            random = RANDOM_SAMPLES.get(published, lambda s: False)(s)
            check_sample(fn, opinfo, s, dtype, f"{str(dtype)[6:]} sample {k}", res.mismatches, grad,
                         values and not random)
            if len(res.mismatches) - n and len(res.mismatches) >= 6:   # enough to see what differs
                return res
    return res


def known_differences(path: pathlib.Path = DOCS) -> dict[str, str]:
    """The docs table's rows: entry -> reason (``| `entry` | what differs | why |``)."""
    known = {}
    if not path.exists():
        return known
    for line in path.read_text().splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|(.*)\|(.*)\|\s*$", line)
        if m:
            known[m.group(1)] = m.group(3).strip()
    return known


def run(device: str = "cpu", only: str | None = None, shard: tuple[int, int] = (0, 1), log=None,
        prefer: tuple = ()) -> dict:
    """Check every entry (those matching ``only``; the ``shard[0]``-th of ``shard[1]`` slices); ``log``: a file
    that gets one JSON line per entry as it finishes (a run cut short keeps what it did); ``prefer``: backends
    to select first (``("triton",)`` on the CPU runs the Triton kernels under TRITON_INTERPRET=1)."""
    import baracuda as bc
    import baracuda.torch as bt

    results = []
    t0 = time.perf_counter()
    for i, (name, o) in enumerate(published_entries(bt.PUBLISHED)):
        if (only and not re.search(only, entry_name(o))) or i % shard[1] != shard[0]:
            continue
        with bc.preference(bc.PlanPreference(prefer=list(prefer))):
            r = check_entry(name, o, device)
        results.append(r)
        if log is not None:
            log.write(json.dumps({"entry": r.entry, "published": r.published, "samples": r.samples,
                                  "mismatches": r.mismatches}) + "\n")
            log.flush()
    return summary(results, device, time.perf_counter() - t0)


def summary(results: list[EntryResult], device: str, seconds: float) -> dict:
    known = known_differences()
    passed = [r for r in results if r.ok]
    return {"device": device, "torch": torch.__version__, "entries": len(results), "passed": len(passed),
            "pass_rate": round(len(passed) / max(1, len(results)), 4), "seconds": round(seconds, 1),
            "failed": {r.entry: {"published": r.published, "known": r.entry in known, "mismatches": r.mismatches}
                       for r in results if not r.ok}}


def read_logs(paths) -> list[EntryResult]:
    """The entries of ``--log`` files (e.g. one per shard of a parallel run)."""
    out = []
    for p in paths:
        for line in pathlib.Path(p).read_text().splitlines():
            d = json.loads(line)
            out.append(EntryResult(d["entry"], d["published"], d["samples"], d["mismatches"]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default=None, help="a regular expression on the entry name")
    ap.add_argument("--json", default=None, help="write the summary here")
    ap.add_argument("--shard", default="0/1", help="k/n: check every n-th entry from the k-th (parallel runs)")
    ap.add_argument("--log", default=None, help="append one JSON line per entry here as it finishes")
    ap.add_argument("--prefer", default="", help="comma-separated backends to select first (e.g. triton)")
    ap.add_argument("--summarize", nargs="*", default=None, help="only summarize these --log files")
    a = ap.parse_args(argv)
    if a.summarize is not None:
        s = summary(read_logs(a.summarize), a.device, 0.0)
    else:
        k, n = (int(v) for v in a.shard.split("/"))
        log = open(a.log, "a") if a.log else None
        s = run(a.device, a.only, (k, n), log, tuple(p for p in a.prefer.split(",") if p))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(s, indent=1))
    print(f"{s['passed']}/{s['entries']} OpInfo entries pass on {s['device']} ({s['pass_rate']:.1%}) in {s['seconds']} s")
    for e, f in s["failed"].items():
        print(f"  {e}{' (known)' if f['known'] else ''}: {f['mismatches'][0]}")


if __name__ == "__main__":
    main()
