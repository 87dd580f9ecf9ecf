"""``baracuda bench --model NAME --device cpu --tiny``: the real-model benchmark's harness on the CPU (tiny random
configurations, float32, one step per variant, no compile).  Times mean nothing here; what is checked is that every
model builds, every variant runs or says why not, the losses of eager / bt.mode() / bt.patch agree, a failing variant
is recorded without stopping the others, and the JSON and the table carry every row."""
from __future__ import annotations

import contextlib
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baracuda.bench import models  # noqa: E402
from baracuda.cli import main  # noqa: E402

NAMES = [n for n, _, _ in models.VARIANTS]


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_tiny_model_on_cpu(name, tmp_path, capsys):
    out = tmp_path / "m.json"
    rc = main(["bench", "--model", name, "--device", "cpu", "--tiny", "--json", str(out)])
    rep = json.loads(out.read_text())
    rows = {r["variant"]: r for r in rep["rows"]}
    assert rc == 0, {k: r["status"] for k, r in rows.items()}
    assert [r["variant"] for r in rep["rows"]] == NAMES
    assert rep["model"] == name and rep["tiny"] and rep["config"]["dtype"] == "float32"
    assert rep["steps"] == 1 and rep["warmup"] == 0 and rep["tokens_per_step"] == models.TINY_SEQ * models.TINY_BATCH
    for v in ("eager", "mode", "patch"):
        r = rows[v]
        assert r["status"] == "ok", r
        assert r["ms"] > 0 and math.isclose(r["tokens_per_s"], rep["tokens_per_step"] / (r["ms"] / 1e3))
        # random init over a vocabulary of 128: the loss is near ln(128) = 4.85, far from 0 or nan
        assert 3.0 < r["loss"] < 7.0 and r["loss_rel_diff"] <= rep["loss_tolerance"] == 1e-4
        assert r["peak_GB"] is None    # no CUDA memory on the CPU
    assert rows["eager"]["vs_eager"] == 1.0 and rows["eager"]["loss_rel_diff"] == 0.0
    for v in ("compile", "compile+patch"):
        assert rows[v]["status"] == "skipped: --no-compile"
    assert rows["liger"]["status"] == "ok" or rows["liger"]["status"].startswith("skipped:")
    assert rep["loss_agree"] and rep["command"].startswith(f"baracuda bench --model {name} --device cpu")
    table = capsys.readouterr().out
    for v in NAMES:
        assert f"\n{v} " in table


def test_layers_and_variant_filter(tmp_path):
    out = tmp_path / "m.json"
    assert main(["bench", "--model", "llama", "--device", "cpu", "--tiny", "--layers", "1", "--steps", "2",
                 "--variant", "eager,patch", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["config"]["num_hidden_layers"] == 1 and rep["steps"] == 2
    assert [r["variant"] for r in rep["rows"]] == ["eager", "patch"]


def test_a_failing_variant_does_not_stop_the_rest(monkeypatch):
    @contextlib.contextmanager
    def broken(model, spec):
        raise ValueError("boom")
        yield model   # noqa: unreachable (a generator)

    monkeypatch.setattr(models, "VARIANTS", [("eager", models._eager, False), ("broken", broken, False),
                                             ("patch", models._patch, False)])
    rep = models.run_model("gpt2", device="cpu", tiny=True, steps=1, warmup=0, compile=False)
    st = [r["status"] for r in rep["rows"]]
    assert st == ["ok", "error: ValueError: boom", "ok"]
    assert "broken" in models.format_table(rep)


@pytest.mark.parametrize("argv, msg", [
    (["--model", "nope", "--device", "cpu", "--tiny"], "unknown model"),
    (["--model", "llama", "--device", "cpu"], "needs --tiny"),
    (["--model", "llama", "--device", "cpu", "--tiny", "--variant", "fast"], "unknown variant"),
    (["--model", "llama", "--device", "cpu", "--tiny", "--steps", "0"], "--steps must be >= 1"),
])
def test_refusals(argv, msg, capsys):
    assert main(["bench", *argv]) == 2
    assert msg in capsys.readouterr().err


def test_liger_variant_calls_the_family_entry_point(monkeypatch):
    """The Liger variant's wiring, with a stand-in ``liger_kernel.transformers`` (the package is not in the test
    extra): Llama calls its entry point with the model instance; GPT-2, which Liger does not cover, is skipped."""
    import sys
    import types

    calls = []
    fake = types.ModuleType("liger_kernel.transformers")
    fake.apply_liger_kernel_to_llama = lambda model: calls.append(type(model).__name__)
    monkeypatch.setitem(sys.modules, "liger_kernel", types.ModuleType("liger_kernel"))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", fake)
    rep = models.run_model("llama", device="cpu", tiny=True, steps=1, warmup=0, variants=["eager", "liger"])
    assert [r["status"] for r in rep["rows"]] == ["ok", "ok"] and calls == ["LlamaForCausalLM"]
    rep = models.run_model("gpt2", device="cpu", tiny=True, steps=1, warmup=0, variants=["liger"])
    assert rep["rows"][0]["status"] == "skipped: Liger has no patch for GPT2LMHeadModel"
