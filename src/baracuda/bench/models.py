"""Real-model training-step benchmark: ``baracuda bench --model NAME``.

One process times a HF transformers model's training step (``zero_grad``, forward with labels, backward; no
optimizer) under each variant in turn -- eager, ``bt.mode()``, ``bt.patch(model)``, ``torch.compile``,
``torch.compile`` of the patched model, Liger -- and reports per variant the median step time over ``--steps``
measured steps after ``--warmup`` warm-up steps (CUDA events; host clock on the CPU), tokens/s, peak memory
(``torch.cuda.max_memory_allocated``, reset before each variant) and the loss of the first measured step with its
relative difference to eager's.  A failing variant is recorded with its error and the rest still run.

Models are random-init from configurations written here (no downloads), bf16 on CUDA, ``train()`` mode with
dropout 0 and ``use_cache=False`` (no KV cache is built in a training step):

- ``llama``: LlamaForCausalLM, 4 layers, hidden 2048, intermediate 5632, 16 heads / 16 kv heads (head dim 128,
  multi-head attention), vocab 32000; seq 2048, batch 4 (issue 16's configuration).
- ``llama-gqa``: the same with 32 heads / 8 kv heads (grouped-query attention, head dim 64).
- ``gpt2``: GPT2LMHeadModel, 4 layers, hidden 1024, 16 heads, vocab 50257; seq 1024, batch 8; dropout 0.
- ``llama3-8b-stack``: Llama-3-8B-shaped: hidden 4096, 32 / 8 heads, intermediate 14336, vocab 128256,
  rope theta 500000; seq 4096, batch 1; ``--layers`` of them (default 4).

``--device cpu --tiny`` shrinks every configuration (2 layers, hidden 64, seq 16, batch 2, float32) and runs one
warm-up-free step per variant without compile unless ``--compile``: it checks the harness, its times mean nothing.

Liger patches the model instance and transformers' module-level functions irreversibly, so it runs last.
"""
from __future__ import annotations

import contextlib
import gc
import math
import statistics
import sys
import time
from dataclasses import dataclass, field

__all__ = ["MODELS", "VARIANTS", "run_model", "format_table", "main"]


@dataclass(frozen=True)
class ModelSpec:
    cls: str                  # transformers class name
    config: str               # transformers config class name
    kwargs: dict
    seq: int
    batch: int
    liger: str | None         # the liger_kernel.transformers entry point, if Liger has one for this family
    tiny: dict = field(default_factory=dict)   # overrides of ``kwargs`` for --tiny


_LLAMA_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=4, vocab_size=128, max_position_embeddings=64, use_cache=False)


def _llama(heads: int, kv: int, **kw) -> dict:
    base = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4, num_attention_heads=heads,
                num_key_value_heads=kv, vocab_size=32000, max_position_embeddings=4096, attention_dropout=0.0,
                use_cache=False)
    return {**base, **kw}


MODELS = {
    "llama": ModelSpec("LlamaForCausalLM", "LlamaConfig", _llama(16, 16), 2048, 4,
                       "apply_liger_kernel_to_llama", _LLAMA_TINY),
    "llama-gqa": ModelSpec("LlamaForCausalLM", "LlamaConfig", _llama(32, 8), 2048, 4,
                           "apply_liger_kernel_to_llama", {**_LLAMA_TINY, "num_key_value_heads": 2}),
    "gpt2": ModelSpec("GPT2LMHeadModel", "GPT2Config",
                      dict(n_embd=1024, n_layer=4, n_head=16, n_positions=1024, vocab_size=50257,
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False), 1024, 8, None,
                      dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=128,
                           bos_token_id=0, eos_token_id=0)),
    "llama3-8b-stack": ModelSpec("LlamaForCausalLM", "LlamaConfig",
                                 _llama(32, 8, hidden_size=4096, intermediate_size=14336, vocab_size=128256,
                                        rope_theta=500000.0, max_position_embeddings=8192), 4096, 1,
                                 "apply_liger_kernel_to_llama", {**_LLAMA_TINY, "num_key_value_heads": 2}),
}
_LAYER_KEY = {"LlamaConfig": "num_hidden_layers", "GPT2Config": "n_layer"}
TINY_SEQ, TINY_BATCH = 16, 2


# -- variants: each a context manager over the model, yielding the module to step --------------------------------
@contextlib.contextmanager
def _eager(model, spec):
    yield model


@contextlib.contextmanager
def _mode(model, spec):
    import baracuda.torch as bt

    with bt.mode():
        yield model


@contextlib.contextmanager
def _patch(model, spec):
    import baracuda.torch as bt

    report = bt.patch(model)
    if not report.patched:
        bt.unpatch(model)
        raise RuntimeError(f"bt.patch swapped nothing: {report}")
    try:
        yield model
    finally:
        bt.unpatch(model)


@contextlib.contextmanager
def _compile(model, spec):
    """torch.compile with its defaults (no retain_graph here, so donated buffers stay on: compile's memory as users
    see it); dynamo is reset before (a fresh recompile budget) and after (its graphs free their memory)."""
    import torch

    torch._dynamo.reset()
    try:
        yield torch.compile(model)
    finally:
        torch._dynamo.reset()


@contextlib.contextmanager
def _compile_patch(model, spec):
    with _patch(model, spec) as m, _compile(m, spec) as c:
        yield c


class Skip(Exception):
    """A variant that does not apply here (recorded as ``skipped: <why>``, not as an error)."""


@contextlib.contextmanager
def _liger(model, spec):
    try:
        import liger_kernel.transformers as lk
    except ImportError:
        raise Skip("not installed (pip install liger-kernel)") from None
    if spec.liger is None:
        raise Skip(f"Liger has no patch for {spec.cls}")
    getattr(lk, spec.liger)(model=model)   # irreversible: modules and transformers' functions (runs last)
    yield model


# (name, context manager, needs torch.compile); Liger last: it cannot be undone
VARIANTS = [("eager", _eager, False), ("mode", _mode, False), ("patch", _patch, False),
            ("compile", _compile, True), ("compile+patch", _compile_patch, True), ("liger", _liger, False)]


# -- running -----------------------------------------------------------------------------------------------------
def build(name: str, *, tiny: bool, layers: int | None, device: str, dtype):
    """(model, input ids, spec, config dict) for ``MODELS[name]``: random init, fixed seed, train() mode."""
    import torch
    import transformers

    spec = MODELS[name]
    kw = {**spec.kwargs, **(spec.tiny if tiny else {})}
    if layers is not None:
        kw[_LAYER_KEY[spec.config]] = layers
    torch.manual_seed(0)
    cfg = getattr(transformers, spec.config)(**kw)
    with torch.device(device):
        model = getattr(transformers, spec.cls)(cfg).to(dtype)
    model.train()
    seq, batch = (TINY_SEQ, TINY_BATCH) if tiny else (spec.seq, spec.batch)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1)).to(device)
    return model, ids, spec, {**kw, "seq": seq, "batch": batch, "dtype": str(dtype).removeprefix("torch.")}


def _time_steps(step, warmup: int, steps: int, cuda: bool):
    """Per-step times (ms) of ``steps`` calls after ``warmup`` calls, and the first measured step's loss."""
    import torch

    for _ in range(warmup):
        step()
    times, loss = [], None
    for i in range(steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = step()
            end.record()
            times.append((start, end))
        else:
            t0 = time.perf_counter()
            out = step()
            times.append((time.perf_counter() - t0) * 1e3)
        if i == 0:
            loss = out.detach()
    if cuda:
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in times]
    return times, float(loss)


def _free(model, cuda: bool):
    import torch

    model.zero_grad(set_to_none=True)
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def run_variant(name, ctx, model, ids, spec, warmup, steps, cuda) -> dict:
    import torch

    row = {"variant": name, "status": "ok"}
    _free(model, cuda)
    try:
        with ctx(model, spec) as m:
            def step():
                m.zero_grad(set_to_none=True)
                loss = m(input_ids=ids, labels=ids).loss
                loss.backward()
                return loss

            times, loss = _time_steps(step, warmup, steps, cuda)
        ms = statistics.median(times)
        row.update(ms=ms, min_ms=min(times), tokens_per_s=ids.numel() / (ms / 1e3), loss=loss,
                   peak_GB=torch.cuda.max_memory_allocated() / 1e9 if cuda else None)
    except Skip as e:
        row["status"] = f"skipped: {e}"
    except Exception as e:  # noqa: BLE001  (one failing variant must not stop the rest)
        row["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    _free(model, cuda)
    return row


def run_model(name: str, *, device: str = "cuda", tiny: bool = False, layers: int | None = None,
              steps: int = 5, warmup: int = 3, compile: bool = True, variants=None, progress=None) -> dict:
    import datetime

    import torch
    import transformers

    cuda = device == "cuda"
    dtype = torch.float32 if tiny else torch.bfloat16
    model, ids, spec, cfg = build(name, tiny=tiny, layers=layers, device=device, dtype=dtype)
    rows = []
    for vname, ctx, needs_compile in VARIANTS:
        if variants and vname not in variants:
            continue
        if progress:
            progress(f"{name}: {vname}")
        if needs_compile and not compile:
            rows.append({"variant": vname, "status": "skipped: --no-compile"})
            continue
        rows.append(run_variant(vname, ctx, model, ids, spec, warmup, steps, cuda))
    eager = next((r for r in rows if r["variant"] == "eager" and "ms" in r), None)
    # bf16 rounds each matmul/norm output to 8 mantissa bits (eps 7.8e-3); a loss of ~ln(vocab) after a few layers
    # differs between fused and unfused paths by a few eps.  float32: 1e-4 (reduction order only).
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for r in rows:
        if eager and "ms" in r:
            r["vs_eager"] = eager["ms"] / r["ms"]
            r["loss_rel_diff"] = abs(r["loss"] - eager["loss"]) / max(abs(eager["loss"]), 1e-30)
            if r["peak_GB"] is not None and eager["peak_GB"]:
                r["mem_vs_eager"] = r["peak_GB"] / eager["peak_GB"]
    diffs = [r["loss_rel_diff"] for r in rows if "loss_rel_diff" in r]
    return {
        "mode": "model", "model": name, "class": spec.cls, "config": cfg, "tiny": tiny,
        "params": sum(p.numel() for p in model.parameters()),
        "weights_GB": sum(p.numel() * p.element_size() for p in model.parameters()) / 1e9,   # inside every peak
        "tokens_per_step": ids.numel(), "warmup": warmup, "steps": steps,
        "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
        "transformers": transformers.__version__, "cuda": torch.version.cuda,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "timer": "CUDA events per step, median" if cuda else "host clock per step, median (not a performance number)",
        "step": "zero_grad(set_to_none=True); loss = model(input_ids, labels=input_ids).loss; loss.backward()",
        "loss_tolerance": tol, "loss_max_rel_diff": max(diffs) if diffs else None,
        "loss_agree": all(d <= tol for d in diffs), "rows": rows,
    }


def _f(x, fmt):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


_COLS = [("variant", "variant", "", 14), ("ms", "ms", ".2f", 9), ("tokens/s", "tokens_per_s", ",.0f", 11),
         ("xeager", "vs_eager", ".2f", 6), ("peak GB", "peak_GB", ".2f", 7), ("xmem", "mem_vs_eager", ".2f", 5),
         ("loss", "loss", ".5f", 9), ("loss rel", "loss_rel_diff", ".1e", 8)]


def format_table(rep: dict) -> str:
    cfg = rep["config"]
    head = (f"{rep['model']} ({rep['class']}, {rep['params'] / 1e6:.1f}M params, batch {cfg['batch']} x seq "
            f"{cfg['seq']}, {cfg['dtype']}) on {rep['device']}: median of {rep['steps']} steps after "
            f"{rep['warmup']} warm-up")
    lines = [head, "  ".join(h.rjust(w) if f else h.ljust(w) for h, _, f, w in _COLS) + "  status"]
    for r in rep["rows"]:
        cells = [(_f(r.get(k), f).rjust(w) if f else str(r.get(k)).ljust(w)) for _, k, f, w in _COLS]
        lines.append("  ".join(cells) + "  " + r["status"])
    lines.append(f"loss max rel diff vs eager: {_f(rep['loss_max_rel_diff'], '.2e')} "
                 f"(tolerance {rep['loss_tolerance']:.0e}: {'agree' if rep['loss_agree'] else 'DISAGREE'})")
    return "\n".join(lines)


def main(args) -> int:
    """``baracuda bench --model NAME``. Exit status: 0 ok, 1 a variant errored or the losses disagree, 2 cannot run."""
    from .._core.device import cuda_available
    from .report import write_json

    if args.model not in MODELS:
        print(f"bench: unknown model {args.model!r}; one of {sorted(MODELS)}", file=sys.stderr)
        return 2
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("bench: --model needs transformers (pip install transformers)", file=sys.stderr)
        return 2
    device = args.device or ("cuda" if cuda_available() else "cpu")
    if device == "cuda" and not cuda_available():
        print("bench: --device cuda: no CUDA GPU is visible to torch", file=sys.stderr)
        return 2
    if device == "cpu" and not args.tiny:
        print("bench: --model on the CPU needs --tiny (the real configurations are GPU-sized)", file=sys.stderr)
        return 2
    tiny = args.tiny
    steps = args.steps if args.steps is not None else (1 if tiny else 5)
    warmup = args.warmup if args.warmup is not None else (0 if tiny else 3)
    if steps < 1 or warmup < 0:
        print(f"bench: --steps must be >= 1 and --warmup >= 0, got {steps} and {warmup}", file=sys.stderr)
        return 2
    compile_ = (not tiny) if args.compile is None else args.compile
    variants = [v for item in (args.variant or []) for v in item.split(",") if v]
    unknown = [v for v in variants if v not in {n for n, _, _ in VARIANTS}]
    if unknown:
        print(f"bench: unknown variant(s) {unknown}; from {[n for n, _, _ in VARIANTS]}", file=sys.stderr)
        return 2
    rep = run_model(args.model, device=device, tiny=tiny, layers=args.layers, steps=steps, warmup=warmup,
                    compile=compile_, variants=variants,
                    progress=lambda what: print(f"[bench --model] {what}", file=sys.stderr, flush=True))
    rep["command"] = (f"baracuda bench --model {args.model} --device {device} --steps {steps} --warmup {warmup}"
                      + (" --tiny" if tiny else "") + (f" --layers {args.layers}" if args.layers else "")
                      + ("" if compile_ else " --no-compile") + (f" --variant {','.join(variants)}" if variants else ""))
    print(format_table(rep))
    if args.json:
        write_json(rep, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    errors = [r for r in rep["rows"] if r["status"].startswith("error")]
    return 1 if errors or not rep["loss_agree"] else 0
